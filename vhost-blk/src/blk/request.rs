//! virtio-blk request handling: header, data and status from one descriptor chain.
//!
//! Every field the guest controls is checked: the chain layout (see `chain.rs`), the request
//! type, sector ranges against the capacity (with overflow checks), data lengths (whole
//! sectors), discard / write-zeroes segments against the advertised limits, and writes on a
//! read-only disk. A bad request gets IOERR or UNSUPP and the queue keeps going.

use std::mem::size_of;

use virtio_bindings::virtio_blk::*;
use vm_memory::ByteValued;

use super::{BlkPersonality, ID_LEN, MAX_DISCARD_SECTORS, MAX_DISCARD_SEG};
use crate::device::{load_chain, Chain, GuestBufs, Outcome, RequestKind};
use smallvec::SmallVec;
use vhost_blk_storage::StorageError;

/// Length of `struct virtio_blk_outhdr`.
pub const HEADER_LEN: usize = size_of::<virtio_blk_outhdr>();
/// Length of `struct virtio_blk_discard_write_zeroes`.
pub const DISCARD_SEG_LEN: usize = size_of::<virtio_blk_discard_write_zeroes>();
const SECTOR: u64 = 512;

/// virtio-blk request types, as the statistics count them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlkKind {
    Read,
    Write,
    Flush,
    Discard,
    WriteZeroes,
    GetId,
    Other,
    /// A request that could not be parsed or failed.
    Error,
}

impl RequestKind for BlkKind {
    const NAMES: &'static [&'static str] = &[
        "read",
        "write",
        "flush",
        "discard",
        "write_zeroes",
        "get_id",
        "other",
        "error",
    ];
    const ERROR: Self = BlkKind::Error;

    fn index(self) -> usize {
        self as usize
    }

    fn payload(self, bytes: u64) -> (u64, u64) {
        match self {
            BlkKind::Read => (bytes, 0),
            BlkKind::Write => (0, bytes),
            _ => (0, 0),
        }
    }
}

/// The status byte written at the end of the chain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum BlkStatus {
    Ok = VIRTIO_BLK_S_OK as u8,
    IoErr = VIRTIO_BLK_S_IOERR as u8,
    Unsupp = VIRTIO_BLK_S_UNSUPP as u8,
}

/// `struct virtio_blk_outhdr` (little endian), as read from the chain.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
#[repr(transparent)]
pub struct RequestHeader(pub virtio_blk_outhdr);

// SAFETY: `virtio_blk_outhdr` is `repr(C)` of two u32 and a u64 (16 bytes, no padding, see
// the assertion below): every byte pattern is a valid value, every byte is initialised.
unsafe impl ByteValued for RequestHeader {}
const _: () = assert!(HEADER_LEN == 16);

impl RequestHeader {
    pub fn new(type_: u32, sector: u64) -> Self {
        Self(virtio_blk_outhdr {
            type_: type_.to_le(),
            ioprio: 0,
            sector: sector.to_le(),
        })
    }
    pub fn type_(&self) -> u32 {
        u32::from_le(self.0.type_)
    }
    pub fn sector(&self) -> u64 {
        u64::from_le(self.0.sector)
    }
}

/// `struct virtio_blk_discard_write_zeroes` (little endian): one DISCARD / WRITE_ZEROES segment.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
#[repr(transparent)]
pub struct DiscardSegment(pub virtio_blk_discard_write_zeroes);

// SAFETY: `repr(C)` of a u64 and two u32 (16 bytes, no padding, see the assertion below).
unsafe impl ByteValued for DiscardSegment {}
const _: () = assert!(DISCARD_SEG_LEN == 16);

impl DiscardSegment {
    pub fn new(sector: u64, num_sectors: u32, flags: u32) -> Self {
        Self(virtio_blk_discard_write_zeroes {
            sector: sector.to_le(),
            num_sectors: num_sectors.to_le(),
            flags: flags.to_le(),
        })
    }
}

/// Result of executing a request, before the status byte is written.
struct Done {
    status: BlkStatus,
    /// Bytes written into the data-in part (not counting the status byte).
    data_in: usize,
    kind: BlkKind,
    bytes: u64,
}

impl Done {
    /// Success, `bytes` of payload (the statistics' count), nothing written into data-in.
    fn ok(kind: BlkKind, bytes: u64) -> Self {
        Self {
            status: BlkStatus::Ok,
            data_in: 0,
            kind,
            bytes,
        }
    }

    fn err(status: BlkStatus, kind: BlkKind) -> Self {
        Self {
            status,
            data_in: 0,
            kind,
            bytes: 0,
        }
    }
}

/// Handles one chain.
pub fn handle(p: &BlkPersonality, chain: Chain<'_>) -> Outcome<BlkKind> {
    let mut bufs = GuestBufs::empty();
    if !load_chain(&mut bufs, &chain, &p.limits()) {
        return Outcome::unanswered();
    }
    if bufs.writable_len() == 0 {
        // No room for a status byte: nothing can be reported. Return the buffer unused.
        tracing::debug!("chain {} has no status byte", chain.head_index());
        return Outcome::unanswered();
    }
    let done = execute(p, &bufs);
    bufs.write_obj(bufs.writable_len() - 1, &(done.status as u8));
    let kind = if done.status == BlkStatus::Ok {
        done.kind
    } else {
        BlkKind::Error
    };
    Outcome::Complete {
        used_len: (done.data_in + 1) as u32,
        kind,
        bytes: done.bytes,
        extra_delay_ns: 0,
    }
}

fn storage_status(e: &StorageError) -> BlkStatus {
    tracing::debug!("storage error: {e}");
    BlkStatus::IoErr
}

/// Byte range of `len` bytes at `sector`, checked against the capacity.
fn byte_range(sector: u64, len: u64, capacity: u64) -> Option<u64> {
    let off = sector.checked_mul(SECTOR)?;
    let end = off.checked_add(len)?;
    (end <= capacity).then_some(off)
}

fn execute(p: &BlkPersonality, bufs: &GuestBufs<'_>) -> Done {
    let Some(h) = bufs.read_obj::<RequestHeader>(0) else {
        return Done::err(BlkStatus::IoErr, BlkKind::Error);
    };
    let storage = p.storage();
    match h.type_() {
        VIRTIO_BLK_T_IN => read(p, bufs, h.sector()),
        VIRTIO_BLK_T_OUT => write(p, bufs, h.sector()),
        VIRTIO_BLK_T_FLUSH => {
            let kind = BlkKind::Flush;
            if storage.read_only() {
                return Done::ok(kind, 0);
            }
            match storage.flush() {
                Ok(()) => Done::ok(kind, 0),
                Err(e) => Done::err(storage_status(&e), kind),
            }
        }
        VIRTIO_BLK_T_GET_ID => get_id(p, bufs),
        VIRTIO_BLK_T_DISCARD | VIRTIO_BLK_T_WRITE_ZEROES => discard_or_zero(p, bufs, h.type_()),
        _ => Done::err(BlkStatus::Unsupp, BlkKind::Other),
    }
}

/// Bytes of the data-in part (the writable part less the status byte; `handle` checked that
/// there is one) and of the data-out part (the readable part less the header; `execute` read
/// the header).
fn data_lens(bufs: &GuestBufs<'_>) -> (usize, usize) {
    (
        bufs.writable_len().saturating_sub(1),
        bufs.readable_len().saturating_sub(HEADER_LEN),
    )
}

/// VIRTIO_BLK_T_IN: storage straight into the guest's buffers.
fn read(p: &BlkPersonality, bufs: &GuestBufs<'_>, sector: u64) -> Done {
    let kind = BlkKind::Read;
    let (data_in_len, data_out_len) = data_lens(bufs);
    if data_out_len != 0 || data_in_len as u64 % SECTOR != 0 {
        return Done::err(BlkStatus::IoErr, kind);
    }
    let storage = p.storage();
    let Some(off) = byte_range(sector, data_in_len as u64, storage.size()) else {
        return Done::err(BlkStatus::IoErr, kind);
    };
    match storage.read_vectored_at(&bufs.writable_slices(0, data_in_len), off) {
        Ok(()) => Done {
            data_in: data_in_len,
            ..Done::ok(kind, data_in_len as u64)
        },
        Err(e) => Done::err(storage_status(&e), kind),
    }
}

/// VIRTIO_BLK_T_OUT: the guest's buffers straight to storage (then a flush in writethrough
/// mode).
fn write(p: &BlkPersonality, bufs: &GuestBufs<'_>, sector: u64) -> Done {
    let kind = BlkKind::Write;
    let (data_in_len, data_out_len) = data_lens(bufs);
    let storage = p.storage();
    if storage.read_only() || data_in_len != 0 || data_out_len as u64 % SECTOR != 0 {
        return Done::err(BlkStatus::IoErr, kind);
    }
    let Some(off) = byte_range(sector, data_out_len as u64, storage.size()) else {
        return Done::err(BlkStatus::IoErr, kind);
    };
    let res = storage
        .write_vectored_at(&bufs.readable_slices(HEADER_LEN), off)
        .and_then(|()| {
            if p.writeback() {
                Ok(())
            } else {
                storage.flush()
            }
        });
    match res {
        Ok(()) => Done::ok(kind, data_out_len as u64),
        Err(e) => Done::err(storage_status(&e), kind),
    }
}

/// VIRTIO_BLK_T_GET_ID: the serial, NUL padded to 20 bytes, cut to the buffer.
fn get_id(p: &BlkPersonality, bufs: &GuestBufs<'_>) -> Done {
    let mut id = [0u8; ID_LEN];
    let serial = p.opts.serial.as_bytes();
    id.iter_mut().zip(serial).for_each(|(d, s)| *d = *s);
    let n = data_lens(bufs).0.min(ID_LEN);
    bufs.write_writable(0, id.get(..n).unwrap_or_default());
    Done {
        data_in: n,
        ..Done::ok(BlkKind::GetId, n as u64)
    }
}

/// DISCARD and WRITE_ZEROES: a list of {sector, num_sectors, flags} segments, all checked
/// before any is carried out.
fn discard_or_zero(p: &BlkPersonality, bufs: &GuestBufs<'_>, type_: u32) -> Done {
    let zeroes = type_ == VIRTIO_BLK_T_WRITE_ZEROES;
    let kind = if zeroes {
        BlkKind::WriteZeroes
    } else {
        BlkKind::Discard
    };
    let storage = p.storage();
    let data_len = data_lens(bufs).1;
    if storage.read_only() {
        return Done::err(BlkStatus::IoErr, kind);
    }
    if data_len == 0 || data_len % DISCARD_SEG_LEN != 0 || bufs.writable_len() != 1 {
        return Done::err(BlkStatus::IoErr, kind);
    }
    let nseg = data_len / DISCARD_SEG_LEN;
    if nseg > MAX_DISCARD_SEG as usize {
        return Done::err(BlkStatus::IoErr, kind);
    }
    let mut segs: SmallVec<[(u64, u64, bool); 4]> = SmallVec::new();
    for i in 0..nseg {
        let Some(s) = bufs.read_obj::<DiscardSegment>(HEADER_LEN + i * DISCARD_SEG_LEN) else {
            return Done::err(BlkStatus::IoErr, kind);
        };
        match check_segment(p, &s, zeroes) {
            Ok(seg) => segs.push(seg),
            Err(status) => return Done::err(status, kind),
        }
    }
    let mut bytes = 0;
    for (off, len, unmap) in segs {
        let r = if zeroes {
            storage.write_zeroes(off, len, unmap)
        } else {
            storage.discard(off, len)
        };
        if let Err(e) = r {
            return Done::err(storage_status(&e), kind);
        }
        bytes += len;
    }
    // Write-through: zeroes are data the guest wrote, durable before they complete as a
    // write's are (docs/data-guarantees.md). A discard promises nothing about the data.
    if zeroes && !p.writeback() {
        if let Err(e) = storage.flush() {
            return Done::err(storage_status(&e), kind);
        }
    }
    Done::ok(kind, bytes)
}

/// One DISCARD / WRITE_ZEROES segment checked: (byte offset, byte length, unmap).
fn check_segment(
    p: &BlkPersonality,
    s: &DiscardSegment,
    zeroes: bool,
) -> Result<(u64, u64, bool), BlkStatus> {
    let sector = u64::from_le(s.0.sector);
    let num = u32::from_le(s.0.num_sectors);
    let flags = u32::from_le(s.0.flags);
    // Bit 0 is `unmap`, meaningful only for WRITE_ZEROES; any other bit is reserved.
    if flags & !VIRTIO_BLK_WRITE_ZEROES_FLAG_UNMAP != 0 || (!zeroes && flags != 0) {
        return Err(BlkStatus::Unsupp);
    }
    let align = u64::from(p.opts.block_size / 512).max(1);
    if num > MAX_DISCARD_SECTORS
        || (!zeroes && (sector % align != 0 || u64::from(num) % align != 0))
    {
        return Err(BlkStatus::IoErr);
    }
    let len = u64::from(num) * SECTOR;
    let off = byte_range(sector, len, p.storage().size()).ok_or(BlkStatus::IoErr)?;
    Ok((off, len, flags & VIRTIO_BLK_WRITE_ZEROES_FLAG_UNMAP != 0))
}

#[cfg(test)]
#[path = "request_tests.rs"]
mod tests;
