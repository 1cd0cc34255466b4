//! Storage behind a device personality: positional, vectored I/O on [`IoBuf`]s.
//!
//! Rules:
//! 1. Nothing here knows about virtio or SCSI. Every backend is shared by all request queues
//!    (`&self` methods, no lock on the I/O path): the file backend uses `preadv`/`pwritev` on
//!    one shared descriptor, `null` touches no memory beyond its zero fill, and `mem` is a file
//!    backend over a memfd.
//! 2. The buffers are vm-memory `VolatileSlice`s, usually guest memory that the guest may change
//!    at any moment: they are only ever handed to the kernel (`preadv`/`pwritev`) or copied with
//!    vm-memory's volatile copies, never seen as a Rust reference. The backend's own buffers
//!    take part through `VolatileSlice::from(&mut [u8])` ([`Storage::read_at`]) or
//!    [`Storage::write_at`].
//! 3. A read or write moves every byte of the buffers or fails; the range is checked against
//!    the size first ([`check_range`]).

// No panic on guest input, as in vhost-blk: `unwrap`, `expect`, `panic!`, `unreachable!`,
// indexing and slicing are errors outside tests (an exception is allowed in place, with its
// reason).
#![cfg_attr(
    not(test),
    deny(
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::panic,
        clippy::unreachable,
        clippy::indexing_slicing
    )
)]
#![cfg_attr(test, allow(clippy::too_many_lines))]

mod file;
mod health;
mod logged;
mod null;
#[cfg(any(test, feature = "test-util"))]
pub mod probe;
mod ranges;
pub mod trace;
pub mod writelog;

use std::path::PathBuf;
use std::sync::Arc;

pub use file::{FileStorage, TestFault, DIRECT_ALIGN};
pub use logged::LoggedStorage;
pub use null::NullStorage;
use vm_memory::VolatileSlice;

/// Errors of the storage layer. Personalities map them to a device status (IOERR, MEDIUM ERROR).
#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    #[error("cannot open image {path}: {source}")]
    Open {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot create image {path}: {source}")]
    Create {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("range {offset}+{len} is beyond the end of the storage ({size} bytes)")]
    OutOfRange { offset: u64, len: u64, size: u64 },
    #[error("storage is read-only")]
    ReadOnly,
    #[error(
        "image {path} is {size} bytes, not a whole number of 4096-byte blocks: --direct \
         cannot write its last block (resize the image or drop --direct)"
    )]
    UnalignedDirect { path: PathBuf, size: u64 },
    /// An earlier write error on this image (module `health`): flushes fail until restart.
    #[error(
        "an earlier write to the image failed (errno {errno}): writes since the last \
         successful flush may be lost; flushes fail until the backend is restarted"
    )]
    Failed { errno: i32 },
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
}

impl StorageError {
    /// The errno behind an I/O failure, if there is one (a personality maps ENOSPC and EIO to
    /// different statuses).
    pub fn errno(&self) -> Option<i32> {
        match self {
            StorageError::Failed { errno } => Some(*errno),
            StorageError::Io(e) => e.raw_os_error(),
            _ => None,
        }
    }
}

/// How to open a storage beyond its spec: test and diagnosis instruments of the image file.
#[derive(Debug, Clone, Default)]
pub struct Instruments {
    /// `--write-log` ([`LoggedStorage`]).
    pub write_log: Option<PathBuf>,
    /// `--syscall-trace` ([`trace`]).
    pub syscall_trace: Option<PathBuf>,
    /// A deliberately broken storage (debug builds only, [`TestFault`]).
    pub test_fault: Option<TestFault>,
}

/// A block store addressed in bytes. Implementations must be safe to call from every queue
/// worker at once.
pub trait Storage: Send + Sync + std::fmt::Debug {
    /// Capacity in bytes.
    fn size(&self) -> u64;
    /// Whether writes are refused.
    fn read_only(&self) -> bool;
    /// Fill all of `bufs` from `offset`. The range must lie inside the storage.
    fn read_vectored_at(&self, bufs: &[IoBuf<'_>], offset: u64) -> Result<(), StorageError>;
    /// Write all of `bufs` at `offset` (only reading them). The range must lie inside the
    /// storage.
    fn write_vectored_at(&self, bufs: &[IoBuf<'_>], offset: u64) -> Result<(), StorageError>;
    /// Write all of `buf` (the backend's own bytes) at `offset`.
    fn write_at(&self, buf: &[u8], offset: u64) -> Result<(), StorageError>;
    /// Make completed writes durable.
    fn flush(&self) -> Result<(), StorageError>;
    /// Drop the data of a range (reads may return anything afterwards; ours return zeros).
    fn discard(&self, offset: u64, len: u64) -> Result<(), StorageError>;
    /// Make a range read back as zeros; `may_unmap` allows deallocating it.
    fn write_zeroes(&self, offset: u64, len: u64, may_unmap: bool) -> Result<(), StorageError>;

    /// Reads into one buffer of the backend's own (tests, SCSI emulation of small commands).
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<(), StorageError> {
        self.read_vectored_at(&[IoBuf::from(buf)], offset)
    }
}

/// A buffer of vectored storage I/O: guest memory (or a buffer of the backend's own) under
/// vm-memory's volatile access, without a dirty-page bitmap.
pub type IoBuf<'a> = VolatileSlice<'a, ()>;

/// Checks that `offset..offset+len` lies inside `size` without overflowing.
#[inline]
pub fn check_range(offset: u64, len: u64, size: u64) -> Result<(), StorageError> {
    match offset.checked_add(len) {
        Some(end) if end <= size => Ok(()),
        _ => Err(StorageError::OutOfRange { offset, len, size }),
    }
}

/// Total length of a set of buffers.
#[inline]
pub fn iov_len(bufs: &[IoBuf<'_>]) -> u64 {
    bufs.iter().map(|b| b.len() as u64).sum()
}

/// What a storage is made of, as parsed from the command line or TOML.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum StorageSpec {
    /// A raw image file; `create_size` creates a sparse file of that size if it does not exist.
    File {
        path: PathBuf,
        #[serde(default)]
        create_size: Option<u64>,
        #[serde(default)]
        direct: bool,
        #[serde(default)]
        read_only: bool,
    },
    /// Reads return zeros, writes are dropped.
    Null { size: u64 },
    /// Reads leave the buffers untouched, writes are dropped (like null_blk without memory
    /// backing): for measuring the request path without the zero fill.
    NullUntouched { size: u64 },
    /// A RAM disk (an anonymous memfd).
    Mem { size: u64 },
}

impl StorageSpec {
    /// Opens the storage as [`open`](Self::open) does, its modifying operations logged to
    /// `write_log` when given ([`LoggedStorage`]).
    pub fn open_logged(
        &self,
        write_log: Option<&std::path::Path>,
    ) -> Result<Arc<dyn Storage>, StorageError> {
        self.open_with(&Instruments {
            write_log: write_log.map(Into::into),
            ..Instruments::default()
        })
    }

    /// Opens the storage with its [`Instruments`] (the trace and the fault apply to an image
    /// file only; the configuration refuses them for anything else).
    pub fn open_with(&self, inst: &Instruments) -> Result<Arc<dyn Storage>, StorageError> {
        let s: Arc<dyn Storage> = match self {
            StorageSpec::File {
                path,
                create_size,
                direct,
                read_only,
            } => {
                let mut f = FileStorage::open(path, *create_size, *direct, *read_only)?
                    .with_test_fault(inst.test_fault);
                if let Some(t) = &inst.syscall_trace {
                    f = f.with_trace(t)?;
                }
                Arc::new(f)
            }
            _ => self.open()?,
        };
        Ok(match &inst.write_log {
            Some(p) => Arc::new(LoggedStorage::open(s, p)?),
            None => s,
        })
    }

    /// Opens (or creates, for `File` with `create_size`) the storage.
    pub fn open(&self) -> Result<Arc<dyn Storage>, StorageError> {
        Ok(match self {
            StorageSpec::File {
                path,
                create_size,
                direct,
                read_only,
            } => Arc::new(FileStorage::open(path, *create_size, *direct, *read_only)?),
            StorageSpec::Null { size } => Arc::new(NullStorage::new(*size)),
            StorageSpec::NullUntouched { size } => Arc::new(NullStorage::untouched(*size)),
            StorageSpec::Mem { size } => Arc::new(FileStorage::memfd(*size)?),
        })
    }

    /// Size in bytes if known without opening anything.
    pub fn declared_size(&self) -> Option<u64> {
        match self {
            StorageSpec::File { .. } => None,
            StorageSpec::Null { size }
            | StorageSpec::NullUntouched { size }
            | StorageSpec::Mem { size } => Some(*size),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn range_checks_catch_overflow_and_end() {
        assert!(check_range(0, 512, 512).is_ok());
        assert!(check_range(512, 0, 512).is_ok());
        assert!(check_range(1, 512, 512).is_err());
        assert!(check_range(u64::MAX, 2, u64::MAX).is_err());
    }
}
