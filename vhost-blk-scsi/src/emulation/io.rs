//! Scatter/gather helpers over the initiator's buffers: vm-memory volatile slices (guest memory
//! under the virtio layer), copied with vm-memory's volatile copies or handed to storage as
//! they are. Nothing here ever touches a byte outside the buffers it was given, nor allocates
//! for a command with up to [`INLINE_SLICES`] buffers.

use smallvec::SmallVec;

use vhost_blk_storage::{IoBuf, Storage, StorageError};

/// Slices kept inline (no allocation) when a command uses part of the buffers.
pub(crate) const INLINE_SLICES: usize = 8;

/// The data-in side of a command: the initiator's buffers and how much has been written.
pub(crate) struct DataIn<'a, 'b> {
    bufs: &'a [IoBuf<'b>],
    cap: usize,
    written: usize,
    overrun: bool,
}

impl<'a, 'b> DataIn<'a, 'b> {
    pub fn new(bufs: &'a [IoBuf<'b>]) -> Self {
        Self {
            bufs,
            cap: out_len(bufs),
            written: 0,
            overrun: false,
        }
    }

    /// Total size of the buffers.
    pub fn capacity(&self) -> usize {
        self.cap
    }

    /// Bytes written so far.
    pub fn written(&self) -> usize {
        self.written
    }

    /// Whether the command wanted to return more than the buffers hold.
    pub fn overrun(&self) -> bool {
        self.overrun
    }

    /// Returns parameter data: `data` truncated to the allocation length, then to the buffers
    /// (which sets the overrun flag). Replaces anything written before.
    pub fn put(&mut self, data: &[u8], alloc_len: usize) {
        let want = data.len().min(alloc_len);
        let n = want.min(self.cap);
        if n < want {
            self.overrun = true;
        }
        let mut done = 0;
        for b in self.bufs {
            if done == n {
                break;
            }
            let k = b.len().min(n - done);
            if let Some(src) = data.get(done..done + k) {
                b.copy_from(src);
            }
            done += k;
        }
        self.written = n;
    }

    /// Reads `len` bytes (which must fit the buffers) from `storage` at `offset` into the start
    /// of the buffers, straight from storage into them.
    pub fn read_storage(
        &mut self,
        storage: &dyn Storage,
        offset: u64,
        len: usize,
    ) -> Result<(), StorageError> {
        debug_assert!(len <= self.cap);
        if len == self.cap {
            storage.read_vectored_at(self.bufs, offset)?;
        } else {
            storage.read_vectored_at(&prefix(self.bufs, len), offset)?;
        }
        self.written = len;
        Ok(())
    }
}

/// Total length of a list of buffers (saturating).
pub(crate) fn out_len(bufs: &[IoBuf<'_>]) -> usize {
    bufs.iter()
        .map(|b| b.len())
        .fold(0usize, usize::saturating_add)
}

/// Copies data-out bytes starting at `offset` into `dst`; returns how many were copied (less
/// than `dst.len()` only when the buffers end first).
pub(crate) fn gather(bufs: &[IoBuf<'_>], mut offset: usize, dst: &mut [u8]) -> usize {
    let mut done = 0;
    for b in bufs {
        if done == dst.len() {
            break;
        }
        if offset >= b.len() {
            offset -= b.len();
            continue;
        }
        if let (Ok(src), Some(d)) = (b.offset(offset), dst.get_mut(done..)) {
            done += src.copy_to(d);
        }
        offset = 0;
    }
    done
}

/// The first `len` bytes of `bufs` as a list of slices (no copy; inline, without allocating,
/// up to [`INLINE_SLICES`] slices).
pub(crate) fn prefix<'b>(bufs: &[IoBuf<'b>], len: usize) -> SmallVec<[IoBuf<'b>; INLINE_SLICES]> {
    let mut rest = len;
    let mut part = SmallVec::new();
    for b in bufs {
        if rest == 0 {
            break;
        }
        let k = b.len().min(rest);
        if let Ok(s) = b.subslice(0, k) {
            if k > 0 {
                part.push(s);
            }
        }
        rest -= k;
    }
    part
}

#[cfg(test)]
mod tests {
    use super::*;
    use vhost_blk_storage::NullStorage;

    #[test]
    fn put_truncates_to_allocation_and_buffers() {
        let mut a = [0xffu8; 3];
        let mut b = [0xffu8; 4];
        let bufs = [IoBuf::from(&mut a[..]), IoBuf::from(&mut b[..])];
        let mut d = DataIn::new(&bufs);
        d.put(&[1, 2, 3, 4, 5, 6, 7, 8, 9], 5);
        assert_eq!(d.written(), 5);
        assert!(!d.overrun());
        d.put(&[1, 2, 3, 4, 5, 6, 7, 8, 9], 100);
        assert_eq!(d.written(), 7);
        assert!(d.overrun());
        assert_eq!(a, [1, 2, 3]);
        assert_eq!(b, [4, 5, 6, 7]);
    }

    #[test]
    fn gather_and_prefix_cross_buffers() {
        let (mut a, mut e, mut b) = ([1u8, 2, 3], [0u8; 0], [4u8, 5]);
        let bufs = [
            IoBuf::from(&mut a[..]),
            IoBuf::from(&mut e[..]),
            IoBuf::from(&mut b[..]),
        ];
        let mut dst = [0u8; 4];
        assert_eq!(gather(&bufs, 2, &mut dst), 3);
        assert_eq!(&dst[..3], &[3, 4, 5]);
        assert_eq!(gather(&bufs, 9, &mut dst), 0);
        let p = prefix(&bufs, 4);
        assert_eq!(p.iter().map(|s| s.len()).collect::<Vec<_>>(), vec![3, 1]);
        assert!(!p.spilled());
        assert_eq!(out_len(&bufs), 5);
    }

    #[test]
    fn partial_read_fills_only_the_prefix() {
        let s = NullStorage::new(4096);
        let mut a = [0xaau8; 8];
        let bufs = [IoBuf::from(&mut a[..])];
        let mut d = DataIn::new(&bufs);
        d.read_storage(&s, 0, 5).unwrap();
        assert_eq!(d.written(), 5);
        assert_eq!(a, [0, 0, 0, 0, 0, 0xaa, 0xaa, 0xaa]);
    }
}
