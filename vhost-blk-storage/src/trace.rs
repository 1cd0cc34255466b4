//! The syscall trace (`--syscall-trace`): what the image's `FileStorage` asked the kernel to
//! write and to sync, at the system-call boundary, for the power-loss simulator
//! (docs/data-guarantees.md, "Power loss"; like dm-log-writes, one layer up).
//!
//! Rules:
//! 1. Recorded inside `FileStorage`, around the system calls themselves: a `flush` that calls no
//!    `fdatasync` records no sync, whatever the layers above believe.
//! 2. A WRITE record (the bytes `pwritev` wrote; a ZERO record for `fallocate` zeroing or
//!    punching) is appended after its call returned successfully; SYNC_START before
//!    `fdatasync` is called, SYNC_END (with its result) after it returned. One lock orders the
//!    appends and each record carries `CLOCK_MONOTONIC` nanoseconds read under it: a write
//!    recorded before a SYNC_START had completed before that `fdatasync` began, and is durable
//!    once its SYNC_END reports 0. A write recorded after is not promised by that sync.
//! 3. Timestamps are the host's monotonic clock, shared with every process on the host: a test
//!    frontend in another process places its acknowledgements on the same time line.
//! 4. The trace is not synced and is not a production mode: every modifying request pays a
//!    copy and an append. A failed append stops the recording (logged), never the I/O.
//!
//! Format (little endian): a 32-byte header `magic "VBSCTRC1" | image_size u64 | sector u32 |
//! reserved [u8; 12]`, then records of 48 bytes `magic u32 0x5642_5354 | kind u32 | seq u64 |
//! time_ns u64 | offset u64 | len u64 | data_crc u32 | header_crc u32` (header_crc: CRC-32C of
//! the first 44 bytes), each WRITE followed by its `len` bytes. Kinds: 1 WRITE, 2 ZERO,
//! 3 SYNC_START, 4 SYNC_END; a sync's `offset` is its number and SYNC_END's `len` the errno (0:
//! success). The reader stops at the first record that is cut short or fails a check.

use std::fs::File;
use std::io::{Read, Write};
use std::path::Path;
use std::sync::Mutex;

use super::writelog::crc32c;

const MAGIC: [u8; 8] = *b"VBSCTRC1";
const RECORD_MAGIC: u32 = 0x5642_5354;
/// Bytes of the file header.
pub const HEADER_LEN: usize = 32;
/// Bytes of a record header.
pub const RECORD_LEN: usize = 48;

/// What a record is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TraceKind {
    Write = 1,
    Zero = 2,
    SyncStart = 3,
    SyncEnd = 4,
}

/// One record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceRecord {
    pub kind: TraceKind,
    pub seq: u64,
    pub time_ns: u64,
    pub offset: u64,
    pub len: u64,
    pub data: Vec<u8>,
}

/// The host's `CLOCK_MONOTONIC` in nanoseconds (rule 3).
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec the call writes; CLOCK_MONOTONIC always exists.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(ts.tv_nsec as u64)
}

#[derive(Debug)]
struct Out {
    file: Option<File>,
    seq: u64,
    syncs: u64,
}

/// The writer (module rules).
#[derive(Debug)]
pub struct SyscallTrace {
    out: Mutex<Out>,
}

impl SyscallTrace {
    /// Creates (truncates) the trace at `path` for an image of `image_size` bytes.
    pub fn create(path: &Path, image_size: u64, sector: u32) -> std::io::Result<Self> {
        let mut file = File::create(path)?;
        let mut h = [0u8; HEADER_LEN];
        h[..8].copy_from_slice(&MAGIC);
        h[8..16].copy_from_slice(&image_size.to_le_bytes());
        h[16..20].copy_from_slice(&sector.to_le_bytes());
        file.write_all(&h)?;
        Ok(Self {
            out: Mutex::new(Out {
                file: Some(file),
                seq: 0,
                syncs: 0,
            }),
        })
    }

    fn append(&self, kind: TraceKind, offset: impl FnOnce(&mut Out) -> u64, len: u64, data: &[u8]) {
        // A panicking holder can at worst have cut a record short: the reader stops there.
        let mut o = self.out.lock().unwrap_or_else(|e| e.into_inner());
        let offset = offset(&mut o);
        let mut b = [0u8; RECORD_LEN];
        b[..4].copy_from_slice(&RECORD_MAGIC.to_le_bytes());
        b[4..8].copy_from_slice(&(kind as u32).to_le_bytes());
        b[8..16].copy_from_slice(&o.seq.to_le_bytes());
        b[16..24].copy_from_slice(&monotonic_ns().to_le_bytes());
        b[24..32].copy_from_slice(&offset.to_le_bytes());
        b[32..40].copy_from_slice(&len.to_le_bytes());
        let dcrc = if data.is_empty() { 0 } else { crc32c(0, data) };
        b[40..44].copy_from_slice(&dcrc.to_le_bytes());
        let hcrc = crc32c(0, &b[..44]);
        b[44..48].copy_from_slice(&hcrc.to_le_bytes());
        o.seq += 1;
        let Some(f) = o.file.as_mut() else { return };
        if let Err(e) = f.write_all(&b).and_then(|()| f.write_all(data)) {
            tracing::error!(error = %e, "syscall trace: append failed, recording stops");
            o.file = None;
        }
    }

    /// A `pwritev` of `data` at `offset` returned (rule 2).
    pub fn write(&self, offset: u64, data: &[u8]) {
        self.append(TraceKind::Write, |_| offset, data.len() as u64, data);
    }

    /// An `fallocate` zeroing `len` bytes at `offset` returned.
    pub fn zero(&self, offset: u64, len: u64) {
        self.append(TraceKind::Zero, |_| offset, len, &[]);
    }

    /// An `fdatasync` is about to be called; its number.
    pub fn sync_start(&self) -> u64 {
        let mut n = 0;
        self.append(
            TraceKind::SyncStart,
            |o| {
                o.syncs += 1;
                n = o.syncs;
                n
            },
            0,
            &[],
        );
        n
    }

    /// Sync `n` returned `errno` (0: success).
    pub fn sync_end(&self, n: u64, errno: i32) {
        self.append(TraceKind::SyncEnd, |_| n, errno as u64, &[]);
    }
}

/// A whole trace read back: the image size, the sector size and the sound records.
#[derive(Debug)]
pub struct Trace {
    pub image_size: u64,
    pub sector: u32,
    pub records: Vec<TraceRecord>,
    /// Whether the reader stopped before the end of the file (a cut or damaged record).
    pub damaged: bool,
}

impl Trace {
    /// Reads `path` (never panics; allocates no more than the file holds).
    pub fn read(path: &Path) -> std::io::Result<Self> {
        let mut bytes = Vec::new();
        File::open(path)?.read_to_end(&mut bytes)?;
        Self::parse(&bytes)
    }

    /// Parses a trace's bytes.
    pub fn parse(bytes: &[u8]) -> std::io::Result<Self> {
        let bad = |m: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, m.to_string());
        let h = bytes.get(..HEADER_LEN).ok_or_else(|| bad("no header"))?;
        if h.get(..8) != Some(&MAGIC[..]) {
            return Err(bad("not a syscall trace"));
        }
        let mut t = Trace {
            image_size: u64_at(h, 8),
            sector: (u64_at(h, 16) & 0xffff_ffff) as u32,
            records: Vec::new(),
            damaged: false,
        };
        let mut at = HEADER_LEN;
        while at < bytes.len() {
            match record_at(bytes, at, t.records.len() as u64) {
                Some((r, next)) => {
                    t.records.push(r);
                    at = next;
                }
                None => {
                    t.damaged = true;
                    break;
                }
            }
        }
        Ok(t)
    }
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut v = [0u8; 8];
    if let Some(s) = b.get(at..at + 8) {
        v.copy_from_slice(s);
    }
    u64::from_le_bytes(v)
}

/// The record at `at` and where the next starts, if it is whole and sound.
fn record_at(bytes: &[u8], at: usize, seq: u64) -> Option<(TraceRecord, usize)> {
    let b = bytes.get(at..at + RECORD_LEN)?;
    let u32_at = |i: usize| {
        let mut v = [0u8; 4];
        if let Some(s) = b.get(i..i + 4) {
            v.copy_from_slice(s);
        }
        u32::from_le_bytes(v)
    };
    if u32_at(0) != RECORD_MAGIC || u32_at(44) != crc32c(0, b.get(..44)?) || u64_at(b, 8) != seq {
        return None;
    }
    let kind = match u32_at(4) {
        1 => TraceKind::Write,
        2 => TraceKind::Zero,
        3 => TraceKind::SyncStart,
        4 => TraceKind::SyncEnd,
        _ => return None,
    };
    let len = u64_at(b, 32);
    let data_len = if kind == TraceKind::Write {
        usize::try_from(len).ok()?
    } else {
        0
    };
    let start = at + RECORD_LEN;
    let data = bytes.get(start..start.checked_add(data_len)?)?.to_vec();
    let dcrc = if data.is_empty() { 0 } else { crc32c(0, &data) };
    if dcrc != u32_at(40) {
        return None;
    }
    let r = TraceRecord {
        kind,
        seq,
        time_ns: u64_at(b, 16),
        offset: u64_at(b, 24),
        len,
        data,
    };
    Some((r, start + data_len))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_in_order_and_a_cut_tail_is_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t");
        let t = SyscallTrace::create(&p, 1 << 20, 512).unwrap();
        t.write(4096, &[7u8; 512]);
        let n = t.sync_start();
        t.zero(0, 4096);
        t.sync_end(n, 0);
        drop(t);
        let r = Trace::read(&p).unwrap();
        assert_eq!((r.image_size, r.sector, r.damaged), (1 << 20, 512, false));
        let kinds: Vec<_> = r.records.iter().map(|r| r.kind).collect();
        assert_eq!(
            kinds,
            [
                TraceKind::Write,
                TraceKind::SyncStart,
                TraceKind::Zero,
                TraceKind::SyncEnd
            ]
        );
        assert_eq!(r.records[0].data, vec![7u8; 512]);
        assert_eq!((r.records[1].offset, r.records[3].offset), (1, 1));
        assert!(r.records.windows(2).all(|w| w[0].time_ns <= w[1].time_ns));
        let bytes = std::fs::read(&p).unwrap();
        let cut = Trace::parse(&bytes[..bytes.len() - 3]).unwrap();
        assert_eq!((cut.records.len(), cut.damaged), (3, true));
        let mut flipped = bytes.clone();
        flipped[HEADER_LEN + RECORD_LEN + 100] ^= 1;
        assert_eq!(Trace::parse(&flipped).unwrap().records.len(), 0);
    }
}
