//! virtio-blk request handling: header, data and status from one descriptor chain.
//!
//! Every field the guest controls is checked: the chain layout (see `chain.rs`), the request
//! type, sector ranges against the capacity (with overflow checks), data lengths (whole
//! sectors), discard / write-zeroes segments against the advertised limits, and writes on a
//! read-only disk. A bad request gets IOERR or UNSUPP and the queue keeps going.

use virtio_bindings::virtio_blk::*;

use super::{BlkPersonality, ID_LEN, MAX_DISCARD_SECTORS, MAX_DISCARD_SEG};
use crate::device::{guest_bufs, Chain, GuestBufs, Outcome, RequestKind};
use crate::storage::StorageError;

/// Length of `struct virtio_blk_outhdr`.
pub const HEADER_LEN: usize = 16;
/// Length of `struct virtio_blk_discard_write_zeroes`.
pub const DISCARD_SEG_LEN: usize = 16;
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

/// `struct virtio_blk_outhdr`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestHeader {
    pub type_: u32,
    pub ioprio: u32,
    pub sector: u64,
}

impl RequestHeader {
    pub fn parse(b: &[u8; HEADER_LEN]) -> Self {
        Self {
            type_: u32::from_le_bytes([b[0], b[1], b[2], b[3]]),
            ioprio: u32::from_le_bytes([b[4], b[5], b[6], b[7]]),
            sector: u64::from_le_bytes([b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]]),
        }
    }

    pub fn to_bytes(&self) -> [u8; HEADER_LEN] {
        let mut b = [0u8; HEADER_LEN];
        b[0..4].copy_from_slice(&self.type_.to_le_bytes());
        b[4..8].copy_from_slice(&self.ioprio.to_le_bytes());
        b[8..16].copy_from_slice(&self.sector.to_le_bytes());
        b
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
    let Some(mut bufs) = guest_bufs(&chain, &p.limits()) else {
        return Outcome::unanswered();
    };
    if bufs.writable_len() == 0 {
        // No room for a status byte: nothing can be reported. Return the buffer unused.
        tracing::debug!("chain {} has no status byte", chain.head_index());
        return Outcome::unanswered();
    }
    let done = execute(p, &mut bufs);
    let status_at = bufs.writable_len() - 1;
    bufs.write_writable(status_at, &[done.status as u8]);
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

fn execute(p: &BlkPersonality, bufs: &mut GuestBufs<'_>) -> Done {
    let mut hdr = [0u8; HEADER_LEN];
    if !bufs.read_readable(0, &mut hdr) {
        return Done::err(BlkStatus::IoErr, BlkKind::Error);
    }
    let h = RequestHeader::parse(&hdr);
    let storage = p.storage();
    let capacity = storage.size();
    let data_in_len = bufs.writable_len() - 1;
    let data_out_len = bufs.readable_len() - HEADER_LEN;
    match h.type_ {
        VIRTIO_BLK_T_IN => {
            let kind = BlkKind::Read;
            if data_out_len != 0 || data_in_len as u64 % SECTOR != 0 {
                return Done::err(BlkStatus::IoErr, kind);
            }
            let Some(off) = byte_range(h.sector, data_in_len as u64, capacity) else {
                return Done::err(BlkStatus::IoErr, kind);
            };
            let mut iov = bufs.writable_iov(0, data_in_len);
            match storage.read_vectored_at(&mut iov, off) {
                Ok(()) => Done {
                    status: BlkStatus::Ok,
                    data_in: data_in_len,
                    kind,
                    bytes: data_in_len as u64,
                },
                Err(e) => Done::err(storage_status(&e), kind),
            }
        }
        VIRTIO_BLK_T_OUT => {
            let kind = BlkKind::Write;
            if storage.read_only() || data_in_len != 0 || data_out_len as u64 % SECTOR != 0 {
                return Done::err(BlkStatus::IoErr, kind);
            }
            let Some(off) = byte_range(h.sector, data_out_len as u64, capacity) else {
                return Done::err(BlkStatus::IoErr, kind);
            };
            let iov = bufs.readable_iov(HEADER_LEN);
            let res = storage.write_vectored_at(&iov, off).and_then(|()| {
                if p.writeback() {
                    Ok(())
                } else {
                    storage.flush()
                }
            });
            match res {
                Ok(()) => Done {
                    status: BlkStatus::Ok,
                    data_in: 0,
                    kind,
                    bytes: data_out_len as u64,
                },
                Err(e) => Done::err(storage_status(&e), kind),
            }
        }
        VIRTIO_BLK_T_FLUSH => {
            let kind = BlkKind::Flush;
            if storage.read_only() {
                return Done {
                    status: BlkStatus::Ok,
                    data_in: 0,
                    kind,
                    bytes: 0,
                };
            }
            match storage.flush() {
                Ok(()) => Done {
                    status: BlkStatus::Ok,
                    data_in: 0,
                    kind,
                    bytes: 0,
                },
                Err(e) => Done::err(storage_status(&e), kind),
            }
        }
        VIRTIO_BLK_T_GET_ID => {
            let kind = BlkKind::GetId;
            let mut id = [0u8; ID_LEN];
            let s = p.opts.serial.as_bytes();
            let n = s.len().min(ID_LEN);
            id[..n].copy_from_slice(&s[..n]);
            let n = data_in_len.min(ID_LEN);
            bufs.write_writable(0, &id[..n]);
            Done {
                status: BlkStatus::Ok,
                data_in: n,
                kind,
                bytes: n as u64,
            }
        }
        VIRTIO_BLK_T_DISCARD | VIRTIO_BLK_T_WRITE_ZEROES => discard_or_zero(p, bufs, h.type_),
        _ => Done::err(BlkStatus::Unsupp, BlkKind::Other),
    }
}

/// DISCARD and WRITE_ZEROES: a list of {sector, num_sectors, flags} segments.
fn discard_or_zero(p: &BlkPersonality, bufs: &GuestBufs<'_>, type_: u32) -> Done {
    let zeroes = type_ == VIRTIO_BLK_T_WRITE_ZEROES;
    let kind = if zeroes {
        BlkKind::WriteZeroes
    } else {
        BlkKind::Discard
    };
    let storage = p.storage();
    let data_len = bufs.readable_len() - HEADER_LEN;
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
    let align = u64::from(p.opts.block_size / 512);
    let mut segs = Vec::with_capacity(nseg);
    for i in 0..nseg {
        let mut s = [0u8; DISCARD_SEG_LEN];
        if !bufs.read_readable(HEADER_LEN + i * DISCARD_SEG_LEN, &mut s) {
            return Done::err(BlkStatus::IoErr, kind);
        }
        let sector = u64::from_le_bytes(s[0..8].try_into().unwrap_or_default());
        let num = u32::from_le_bytes(s[8..12].try_into().unwrap_or_default());
        let flags = u32::from_le_bytes(s[12..16].try_into().unwrap_or_default());
        // Bit 0 is `unmap`, meaningful only for WRITE_ZEROES; any other bit is reserved.
        if flags & !1 != 0 || (!zeroes && flags != 0) {
            return Done::err(BlkStatus::Unsupp, kind);
        }
        if num > MAX_DISCARD_SECTORS
            || (!zeroes && (sector % align != 0 || u64::from(num) % align != 0))
        {
            return Done::err(BlkStatus::IoErr, kind);
        }
        let len = u64::from(num) * SECTOR;
        let Some(off) = byte_range(sector, len, storage.size()) else {
            return Done::err(BlkStatus::IoErr, kind);
        };
        segs.push((off, len, flags & 1 == 1));
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
    Done {
        status: BlkStatus::Ok,
        data_in: 0,
        kind,
        bytes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::blk::BlkOptions;
    use crate::storage::{FileStorage, Storage};
    use std::sync::Arc;
    use vm_memory::{Bytes, GuestAddress, GuestMemoryMmap};

    const F_WRITE: u16 = 2;

    fn personality(size: u64) -> BlkPersonality {
        let s: Arc<dyn Storage> = Arc::new(FileStorage::memfd(size).unwrap());
        BlkPersonality::new(
            s,
            BlkOptions {
                num_queues: 1,
                queue_size: 16,
                block_size: 512,
                serial: "SERIAL-1".into(),
            },
        )
    }

    /// Builds a chain of `descs` (addr, len, flags) in a mock queue and runs it.
    fn run(
        p: &BlkPersonality,
        mem: &GuestMemoryMmap,
        descs: &[(u64, u32, u16)],
    ) -> Outcome<BlkKind> {
        let chain = crate::device::chain::mock_chain(mem, descs);
        handle(p, chain)
    }

    fn hdr(mem: &GuestMemoryMmap, at: u64, type_: u32, sector: u64) {
        mem.write_slice(
            &RequestHeader {
                type_,
                ioprio: 0,
                sector,
            }
            .to_bytes(),
            GuestAddress(at),
        )
        .unwrap();
    }

    fn status(mem: &GuestMemoryMmap, at: u64) -> u8 {
        mem.read_obj::<u8>(GuestAddress(at)).unwrap()
    }

    fn mem() -> GuestMemoryMmap {
        GuestMemoryMmap::from_ranges(&[(GuestAddress(0), 0x100000)]).unwrap()
    }

    #[test]
    fn write_then_read_round_trip() {
        let p = personality(1 << 20);
        let m = mem();
        let data: Vec<u8> = (0..1024u32).map(|i| (i * 7) as u8).collect();
        m.write_slice(&data, GuestAddress(0x20000)).unwrap();
        hdr(&m, 0x10000, VIRTIO_BLK_T_OUT, 8);
        let o = run(
            &p,
            &m,
            &[(0x10000, 16, 0), (0x20000, 1024, 0), (0x30000, 1, F_WRITE)],
        );
        assert!(
            matches!(
                o,
                Outcome::Complete {
                    used_len: 1,
                    kind: BlkKind::Write,
                    ..
                }
            ),
            "{o:?}"
        );
        assert_eq!(status(&m, 0x30000), 0);
        hdr(&m, 0x10000, VIRTIO_BLK_T_IN, 8);
        let o = run(
            &p,
            &m,
            &[
                (0x10000, 16, 0),
                (0x40000, 512, F_WRITE),
                (0x40200, 512, F_WRITE),
                (0x30000, 1, F_WRITE),
            ],
        );
        assert!(
            matches!(
                o,
                Outcome::Complete {
                    used_len: 1025,
                    kind: BlkKind::Read,
                    ..
                }
            ),
            "{o:?}"
        );
        let mut back = vec![0u8; 1024];
        m.read_slice(&mut back, GuestAddress(0x40000)).unwrap();
        assert_eq!(back, data);
    }

    #[test]
    fn header_and_data_in_one_descriptor_are_accepted() {
        let p = personality(1 << 20);
        let m = mem();
        hdr(&m, 0x10000, VIRTIO_BLK_T_OUT, 0);
        m.write_slice(&[0x5a; 512], GuestAddress(0x10010)).unwrap();
        let o = run(&p, &m, &[(0x10000, 16 + 512, 0), (0x30000, 1, F_WRITE)]);
        assert!(matches!(
            o,
            Outcome::Complete {
                kind: BlkKind::Write,
                ..
            }
        ));
        let mut b = [0u8; 512];
        p.storage().read_at(&mut b, 0).unwrap();
        assert_eq!(b, [0x5a; 512]);
    }

    #[test]
    fn bad_requests_get_the_right_status() {
        let p = personality(1 << 20);
        let m = mem();
        type Case = (u32, u64, Vec<(u64, u32, u16)>, u8);
        let cases: Vec<Case> = vec![
            // read past the end
            (
                VIRTIO_BLK_T_IN,
                2048,
                vec![
                    (0x10000, 16, 0),
                    (0x40000, 512, F_WRITE),
                    (0x30000, 1, F_WRITE),
                ],
                1,
            ),
            // sector overflow
            (
                VIRTIO_BLK_T_IN,
                u64::MAX / 256,
                vec![
                    (0x10000, 16, 0),
                    (0x40000, 512, F_WRITE),
                    (0x30000, 1, F_WRITE),
                ],
                1,
            ),
            // partial sector
            (
                VIRTIO_BLK_T_IN,
                0,
                vec![
                    (0x10000, 16, 0),
                    (0x40000, 100, F_WRITE),
                    (0x30000, 1, F_WRITE),
                ],
                1,
            ),
            // unknown type
            (99, 0, vec![(0x10000, 16, 0), (0x30000, 1, F_WRITE)], 2),
            // short header
            (
                VIRTIO_BLK_T_IN,
                0,
                vec![(0x10000, 8, 0), (0x30000, 1, F_WRITE)],
                1,
            ),
        ];
        for (t, sector, descs, want) in cases {
            hdr(&m, 0x10000, t, sector);
            m.write_obj(0xffu8, GuestAddress(0x30000)).unwrap();
            run(&p, &m, &descs);
            assert_eq!(
                status(&m, 0x30000),
                want,
                "type {t} sector {sector} {descs:?}"
            );
        }
    }

    #[test]
    fn get_id_returns_the_serial() {
        let p = personality(1 << 20);
        let m = mem();
        hdr(&m, 0x10000, VIRTIO_BLK_T_GET_ID, 0);
        let o = run(
            &p,
            &m,
            &[
                (0x10000, 16, 0),
                (0x40000, 20, F_WRITE),
                (0x30000, 1, F_WRITE),
            ],
        );
        assert!(matches!(o, Outcome::Complete { used_len: 21, .. }));
        let mut id = [0u8; 20];
        m.read_slice(&mut id, GuestAddress(0x40000)).unwrap();
        assert_eq!(&id[..8], b"SERIAL-1");
        assert!(id[8..].iter().all(|&b| b == 0));
    }

    #[test]
    fn chain_without_status_byte_is_returned_unused() {
        let p = personality(1 << 20);
        let m = mem();
        hdr(&m, 0x10000, VIRTIO_BLK_T_FLUSH, 0);
        let o = run(&p, &m, &[(0x10000, 16, 0)]);
        assert_eq!(
            o,
            Outcome::Complete {
                used_len: 0,
                kind: BlkKind::Error,
                bytes: 0,
                extra_delay_ns: 0
            }
        );
    }
}
