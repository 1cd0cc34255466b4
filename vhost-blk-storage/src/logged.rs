//! A storage that appends every write, flush, discard and write-zeroes, in completion order,
//! to a write log (`--write-log`, like dm-log-writes; the format is [`super::writelog`]), for
//! `vhost-blk-replay` to replay onto the starting image up to each flush point.
//!
//! Rules:
//! 1. Exact: the logged bytes are the written bytes. A write's data is first copied out of the
//!    guest's buffers (once, with vm-memory's volatile copy), then written from that copy and
//!    logged from it: a guest changing its buffer meanwhile cannot make the two differ.
//! 2. Completion order: one lock is held across the operation on the storage and its append,
//!    so the log's order is the order in which the operations took effect and were answered.
//!    A flush the guest sends after seeing a write completed comes after it in the log. The
//!    lock serializes every modifying request: a test tool's cost, not a production mode.
//! 3. A failed append fails the request (the guest sees an I/O error) and every later one: a
//!    log with a hole in it would replay to states the disk never was in.
//! 4. A log that exists is continued: its records are checked, a record cut short by a killed
//!    backend is cut off (logged), and the sequence goes on. A record that is whole but fails
//!    its checks is damage, not a kill: the log is refused at open (the backend exits 2 with the
//!    byte offset), never silently cut there. Its header must describe the same image
//!    size. The log is not synced: it records what the backend did, for process kills and
//!    replays, not for a host crash.

use std::fs::{File, OpenOptions};
use std::io::{Seek, SeekFrom, Write};
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};

use super::writelog::{crc32c, Kind, LogEnd, LogHeader, LogReader, Record};
use super::{check_range, iov_len, IoBuf, Storage, StorageError};

/// The log file and where the sequence stands.
#[derive(Debug)]
struct LogFile {
    file: File,
    seq: u64,
    failed: bool,
}

impl LogFile {
    /// Appends one record (rule 3: an error poisons the log).
    fn append(&mut self, kind: Kind, offset: u64, len: u64, data: &[u8]) -> std::io::Result<()> {
        if self.failed {
            return Err(std::io::Error::other("the write log failed earlier"));
        }
        let rec = Record {
            kind,
            seq: self.seq,
            offset,
            len,
            data_crc: if data.is_empty() { 0 } else { crc32c(0, data) },
        };
        let mut buf = Vec::with_capacity(rec.encode().len() + data.len());
        buf.extend_from_slice(&rec.encode());
        buf.extend_from_slice(data);
        match self.file.write_all(&buf) {
            Ok(()) => {
                self.seq += 1;
                Ok(())
            }
            Err(e) => {
                self.failed = true;
                Err(e)
            }
        }
    }
}

/// A [`Storage`] whose modifying operations are logged (module rules).
#[derive(Debug)]
pub struct LoggedStorage {
    inner: Arc<dyn Storage>,
    log: Mutex<LogFile>,
}

impl LoggedStorage {
    /// Wraps `inner`, appending to the log at `path` (created, or continued: rule 4).
    pub fn open(inner: Arc<dyn Storage>, path: &Path) -> Result<Self, StorageError> {
        let open_err = |source: std::io::Error| StorageError::Open {
            path: path.to_owned(),
            source,
        };
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(open_err)?;
        let header = LogHeader {
            image_size: inner.size(),
        };
        let len = file.metadata().map_err(open_err)?.len();
        let seq = if len == 0 {
            file.write_all(&header.encode()).map_err(open_err)?;
            0
        } else {
            let mut r = LogReader::new(&file).map_err(|e| open_err(std::io::Error::other(e)))?;
            if r.header != header {
                return Err(open_err(std::io::Error::other(format!(
                    "the log is of an image of {} bytes, this one has {}",
                    r.header.image_size, header.image_size
                ))));
            }
            while r
                .next_record()
                .map_err(|e| open_err(std::io::Error::other(e)))?
                .is_some()
            {}
            match r.end() {
                Some(LogEnd::Truncated(at)) => {
                    tracing::warn!(at, "write log: cutting off a record cut short by a kill");
                }
                Some(LogEnd::Corrupt(at)) => {
                    return Err(open_err(std::io::Error::other(format!(
                        "damaged record at byte {at} (not a tail cut short by a kill): \
                         refusing to continue the log; move it away, or keep its first {at} \
                         bytes with `truncate -s {at}` if the rest is known to be garbage"
                    ))));
                }
                _ => {}
            }
            let (good, records) = (r.good_len(), r.records());
            file.set_len(good).map_err(open_err)?;
            file.seek(SeekFrom::Start(good)).map_err(open_err)?;
            records
        };
        tracing::info!(path = %path.display(), continued_at = seq, "write log open");
        Ok(Self {
            inner,
            log: Mutex::new(LogFile {
                file,
                seq,
                failed: false,
            }),
        })
    }

    fn lock(&self) -> MutexGuard<'_, LogFile> {
        // A holder that panicked left no half record behind it that matters more than the
        // request failing: `failed` is set only by a failed append.
        self.log.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Rule 2: the operation and its record under one lock.
    fn logged(
        &self,
        kind: Kind,
        offset: u64,
        len: u64,
        data: &[u8],
        op: impl FnOnce() -> Result<(), StorageError>,
    ) -> Result<(), StorageError> {
        let mut log = self.lock();
        if log.failed {
            return Err(StorageError::Io(std::io::Error::other(
                "the write log failed earlier",
            )));
        }
        op()?;
        Ok(log.append(kind, offset, len, data)?)
    }
}

impl Storage for LoggedStorage {
    fn size(&self) -> u64 {
        self.inner.size()
    }

    fn read_only(&self) -> bool {
        self.inner.read_only()
    }

    fn read_vectored_at(&self, bufs: &[IoBuf<'_>], offset: u64) -> Result<(), StorageError> {
        self.inner.read_vectored_at(bufs, offset)
    }

    fn write_vectored_at(&self, bufs: &[IoBuf<'_>], offset: u64) -> Result<(), StorageError> {
        let len = iov_len(bufs);
        check_range(offset, len, self.size())?;
        // Rule 1: one copy, written and logged.
        let mut data = vec![0u8; len as usize];
        let mut at = 0;
        for b in bufs {
            at += b.copy_to(data.get_mut(at..).unwrap_or_default());
        }
        self.write_at(&data, offset)
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> Result<(), StorageError> {
        self.logged(Kind::Write, offset, buf.len() as u64, buf, || {
            self.inner.write_at(buf, offset)
        })
    }

    fn flush(&self) -> Result<(), StorageError> {
        self.logged(Kind::Flush, 0, 0, &[], || self.inner.flush())
    }

    fn discard(&self, offset: u64, len: u64) -> Result<(), StorageError> {
        self.logged(Kind::Discard, offset, len, &[], || {
            self.inner.discard(offset, len)
        })
    }

    fn write_zeroes(&self, offset: u64, len: u64, may_unmap: bool) -> Result<(), StorageError> {
        self.logged(Kind::WriteZeroes, offset, len, &[], || {
            self.inner.write_zeroes(offset, len, may_unmap)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::FileStorage;
    use super::*;

    fn records(path: &Path) -> (Vec<(Record, Vec<u8>)>, Option<LogEnd>) {
        let f = File::open(path).unwrap();
        let mut r = LogReader::new(f).unwrap();
        let mut v = Vec::new();
        while let Some(x) = r.next_record().unwrap() {
            v.push(x);
        }
        (v, r.end())
    }

    #[test]
    fn every_modifying_operation_is_logged_in_order_and_a_log_is_continued() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("w.log");
        let inner: Arc<dyn Storage> = Arc::new(FileStorage::memfd(1 << 20).unwrap());
        let s = LoggedStorage::open(inner.clone(), &path).unwrap();
        let (mut a, mut b) = (vec![1u8; 512], vec![2u8; 1024]);
        s.write_vectored_at(&[IoBuf::from(&mut a[..]), IoBuf::from(&mut b[..])], 4096)
            .unwrap();
        s.flush().unwrap();
        s.discard(0, 4096).unwrap();
        s.write_zeroes(8192, 512, false).unwrap();
        let mut back = vec![0u8; 1536];
        s.read_at(&mut back, 4096).unwrap();
        assert_eq!(&back[..512], &a[..]);
        assert!(
            s.write_at(&[0u8; 512], (1 << 20) - 256).is_err(),
            "out of range"
        );
        drop(s);
        let (recs, end) = records(&path);
        assert_eq!(end, Some(LogEnd::Clean));
        let kinds: Vec<Kind> = recs.iter().map(|r| r.0.kind).collect();
        assert_eq!(
            kinds,
            [Kind::Write, Kind::Flush, Kind::Discard, Kind::WriteZeroes]
        );
        assert_eq!(recs[0].1, [&a[..], &b[..]].concat());
        assert_eq!((recs[0].0.offset, recs[0].0.len), (4096, 1536));
        // A torn tail (a backend killed mid-append) is cut off, and the sequence goes on.
        let len = std::fs::metadata(&path).unwrap().len();
        let f = OpenOptions::new().append(true).open(&path).unwrap();
        (&f).write_all(&[0x52, 0x57, 0x42]).unwrap();
        let s = LoggedStorage::open(inner.clone(), &path).unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().len(), len);
        s.flush().unwrap();
        drop(s);
        let (recs, end) = records(&path);
        assert_eq!(end, Some(LogEnd::Clean));
        assert_eq!(recs.len(), 5);
        assert_eq!(recs[4].0.seq, 4);
        // A damaged record (not a cut tail): refused, and the log is left as it was.
        let good = std::fs::metadata(&path).unwrap().len();
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[super::super::writelog::HEADER_LEN + 20] ^= 1;
        std::fs::write(&path, &bytes).unwrap();
        let e = LoggedStorage::open(inner.clone(), &path).unwrap_err();
        assert!(e.to_string().contains("damaged record at byte 32"), "{e}");
        assert_eq!(std::fs::metadata(&path).unwrap().len(), good);
        bytes[super::super::writelog::HEADER_LEN + 20] ^= 1;
        std::fs::write(&path, &bytes).unwrap();
        // Another image size: refused.
        let other: Arc<dyn Storage> = Arc::new(FileStorage::memfd(1 << 21).unwrap());
        assert!(LoggedStorage::open(other, &path).is_err());
    }
}
