//! Null storage: reads return zeros (or, untouched, leave the buffers as they are), writes are
//! accepted and dropped.

use std::io::{IoSlice, IoSliceMut};

use super::{check_range, iov_len, Storage, StorageError};

/// A device of a given size that stores nothing.
#[derive(Debug)]
pub struct NullStorage {
    size: u64,
    /// Reads zero the buffers (false: they are left untouched).
    fill: bool,
}

impl NullStorage {
    /// Reads return zeros.
    pub fn new(size: u64) -> Self {
        Self { size, fill: true }
    }

    /// Reads succeed without writing the buffers (like Linux null_blk without memory backing):
    /// the cost of a request without the zero fill, for measuring the rest of the path.
    pub fn untouched(size: u64) -> Self {
        Self { size, fill: false }
    }
}

impl Storage for NullStorage {
    fn size(&self) -> u64 {
        self.size
    }
    fn read_only(&self) -> bool {
        false
    }
    fn read_vectored_at(
        &self,
        bufs: &mut [IoSliceMut<'_>],
        offset: u64,
    ) -> Result<(), StorageError> {
        check_range(offset, iov_len(bufs), self.size)?;
        if self.fill {
            for b in bufs.iter_mut() {
                b.fill(0);
            }
        }
        Ok(())
    }
    fn write_vectored_at(&self, bufs: &[IoSlice<'_>], offset: u64) -> Result<(), StorageError> {
        check_range(offset, iov_len(bufs), self.size)
    }
    fn flush(&self) -> Result<(), StorageError> {
        Ok(())
    }
    fn discard(&self, offset: u64, len: u64) -> Result<(), StorageError> {
        check_range(offset, len, self.size)
    }
    fn write_zeroes(&self, offset: u64, len: u64, _may_unmap: bool) -> Result<(), StorageError> {
        check_range(offset, len, self.size)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_zero_and_checks_bounds() {
        let s = NullStorage::new(4096);
        let mut buf = vec![0xaau8; 512];
        s.read_at(&mut buf, 3584).unwrap();
        assert!(buf.iter().all(|&b| b == 0));
        assert!(matches!(
            s.read_at(&mut buf, 3585),
            Err(StorageError::OutOfRange { .. })
        ));
        assert!(s.write_at(&buf, 4096).is_err());
        let u = NullStorage::untouched(4096);
        let mut buf = vec![0xaau8; 512];
        u.read_at(&mut buf, 0).unwrap();
        assert!(buf.iter().all(|&b| b == 0xaa));
        assert!(u.read_at(&mut buf, 3585).is_err());
    }
}
