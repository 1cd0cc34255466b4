//! Null storage: reads return zeros, writes are accepted and dropped.

use std::io::{IoSlice, IoSliceMut};

use super::{check_range, iov_len, Storage, StorageError};

/// A device of a given size that stores nothing.
#[derive(Debug)]
pub struct NullStorage {
    size: u64,
}

impl NullStorage {
    pub fn new(size: u64) -> Self {
        Self { size }
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
        for b in bufs.iter_mut() {
            b.fill(0);
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
    }
}
