//! Guest buffers of one descriptor chain, validated once and then handed to the storage layer
//! as plain `IoSlice`/`IoSliceMut`.
//!
//! The chain is read as two byte streams, the device-readable part followed by the
//! device-writable part (VIRTIO_F_ANY_LAYOUT semantics: the driver may split headers and data
//! across descriptors in any way). A chain is refused when a readable descriptor follows a
//! writable one, a descriptor has zero length, an address range is not guest RAM, the chain is
//! longer than the device's limit, or a writable range overlaps any other range (which would
//! let one request alias its own buffers).

use std::io::{IoSlice, IoSliceMut};

use smallvec::SmallVec;
use virtio_queue::DescriptorChain;
use vm_memory::{GuestAddress, GuestMemoryBackend, GuestMemoryMmap};

/// Guest memory as the backend maps it (no dirty-page bitmap).
pub type GuestMemoryMmapT = GuestMemoryMmap<()>;
/// A descriptor chain popped from a vring. It borrows the guest memory the worker loaded for
/// the drain (no reference count is taken per request).
pub type Chain<'m> = DescriptorChain<&'m GuestMemoryMmapT>;

/// The largest chain a personality accepts, from what it advertises: `seg_max` data segments
/// (the queue size less the two descriptors of header and status/response) of `size_max`
/// bytes, plus 64 KiB for headers; at most queue size + 2 descriptors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChainLimits {
    /// Data segments per request (advertised as `seg_max`).
    pub seg_max: u32,
    /// Most bytes in one chain.
    pub max_bytes: u64,
    /// Most descriptors in one chain.
    pub max_descs: usize,
}

impl ChainLimits {
    pub fn new(queue_size: u16, size_max: u32) -> Self {
        let seg_max = u32::from(queue_size).saturating_sub(2).max(1);
        Self {
            seg_max,
            max_bytes: u64::from(seg_max) * u64::from(size_max) + 64 * 1024,
            max_descs: usize::from(queue_size).max(1) + 2,
        }
    }
}

/// The validated buffers of `chain`, or `None` (logged) when it is malformed. The one place a
/// descriptor chain becomes guest buffers.
pub fn guest_bufs<'c>(chain: &'c Chain<'_>, limits: &ChainLimits) -> Option<GuestBufs<'c>> {
    let descs = chain.clone().map(|d| Desc {
        addr: d.addr().0,
        len: d.len(),
        writable: d.is_write_only(),
    });
    match GuestBufs::new(chain.memory(), descs, limits.max_bytes, limits.max_descs) {
        Ok(b) => Some(b),
        Err(e) => {
            tracing::debug!("refused chain {}: {e}", chain.head_index());
            None
        }
    }
}

/// Why a chain was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChainError {
    #[error("readable descriptor after a writable one")]
    ReadableAfterWritable,
    #[error("zero-length descriptor")]
    ZeroLength,
    #[error("descriptor {addr:#x}+{len:#x} is outside guest memory")]
    BadAddress { addr: u64, len: u32 },
    #[error("chain carries {0} bytes, more than the device accepts")]
    TooLong(u64),
    #[error("chain has more than {0} descriptors")]
    TooManyDescriptors(usize),
    #[error("writable buffer overlaps another buffer of the same chain")]
    Overlap,
    #[error("chain is empty")]
    Empty,
}

/// One host-mapped piece of guest memory.
#[derive(Debug, Clone, Copy)]
struct Piece {
    ptr: *mut u8,
    len: usize,
    gpa: u64,
}

/// Pieces kept inline per direction before spilling to the heap: a typical request has one or
/// two of each (header; data and status), so the hot path never allocates.
const INLINE_PIECES: usize = 4;

/// The pieces of one direction of a chain.
type Pieces = SmallVec<[Piece; INLINE_PIECES]>;

/// Host slices for vectored storage I/O, inline for the common short chains.
pub type IoSlices<'m> = SmallVec<[IoSlice<'m>; INLINE_PIECES]>;
/// Mutable host slices for vectored storage I/O, inline for the common short chains.
pub type IoSlicesMut<'m> = SmallVec<[IoSliceMut<'m>; INLINE_PIECES]>;

/// Validated buffers of a chain. Lives no longer than the guest-memory guard it came from.
#[derive(Debug)]
pub struct GuestBufs<'m> {
    readable: Pieces,
    writable: Pieces,
    readable_len: usize,
    writable_len: usize,
    _mem: std::marker::PhantomData<&'m GuestMemoryMmapT>,
}

/// A descriptor as the personality sees it: guest address, length, device-writable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Desc {
    pub addr: u64,
    pub len: u32,
    pub writable: bool,
}

impl<'m> GuestBufs<'m> {
    /// Validates `descs` against `mem`. `max_bytes` bounds the total length, `max_descs` the count.
    pub fn new(
        mem: &'m GuestMemoryMmapT,
        descs: impl IntoIterator<Item = Desc>,
        max_bytes: u64,
        max_descs: usize,
    ) -> Result<Self, ChainError> {
        let mut bufs = GuestBufs {
            readable: Pieces::new(),
            writable: Pieces::new(),
            readable_len: 0,
            writable_len: 0,
            _mem: std::marker::PhantomData,
        };
        let mut total: u64 = 0;
        for (n, d) in descs.into_iter().enumerate() {
            if n >= max_descs {
                return Err(ChainError::TooManyDescriptors(max_descs));
            }
            if d.len == 0 {
                return Err(ChainError::ZeroLength);
            }
            if !d.writable && !bufs.writable.is_empty() {
                return Err(ChainError::ReadableAfterWritable);
            }
            total += u64::from(d.len);
            if total > max_bytes {
                return Err(ChainError::TooLong(total));
            }
            let bad = ChainError::BadAddress {
                addr: d.addr,
                len: d.len,
            };
            if d.addr.checked_add(u64::from(d.len)).is_none() {
                return Err(bad);
            }
            let mut gpa = d.addr;
            for slice in mem.get_slices(GuestAddress(d.addr), d.len as usize) {
                let slice = slice.map_err(|_| bad.clone())?;
                let piece = Piece {
                    ptr: slice.ptr_guard_mut().as_ptr(),
                    len: slice.len(),
                    gpa,
                };
                gpa += slice.len() as u64;
                if d.writable {
                    bufs.writable.push(piece);
                } else {
                    bufs.readable.push(piece);
                }
            }
            if d.writable {
                bufs.writable_len += d.len as usize;
            } else {
                bufs.readable_len += d.len as usize;
            }
        }
        if bufs.readable.is_empty() && bufs.writable.is_empty() {
            return Err(ChainError::Empty);
        }
        bufs.check_overlap()?;
        Ok(bufs)
    }

    fn check_overlap(&self) -> Result<(), ChainError> {
        if self.writable.is_empty() {
            return Ok(());
        }
        let mut all: SmallVec<[(u64, u64, bool); 2 * INLINE_PIECES]> = self
            .readable
            .iter()
            .map(|p| (p.gpa, p.gpa + p.len as u64, false))
            .chain(
                self.writable
                    .iter()
                    .map(|p| (p.gpa, p.gpa + p.len as u64, true)),
            )
            .collect();
        all.sort_unstable();
        // Any writable range that overlaps its neighbour (or a readable range overlapping a
        // writable one) is refused; readable ranges may overlap each other.
        let mut max_end = 0u64;
        let mut max_end_writable = false;
        for (i, &(start, end, w)) in all.iter().enumerate() {
            if i > 0 && start < max_end && (w || max_end_writable) {
                return Err(ChainError::Overlap);
            }
            if end > max_end {
                max_end = end;
                max_end_writable = w;
            } else if w {
                max_end_writable = true;
            }
        }
        Ok(())
    }

    /// Bytes the driver gave for the device to read.
    pub fn readable_len(&self) -> usize {
        self.readable_len
    }

    /// Bytes the device may write.
    pub fn writable_len(&self) -> usize {
        self.writable_len
    }

    /// Copies readable bytes `[offset, offset + dst.len())` into `dst`. Returns false if the
    /// readable part is too short.
    pub fn read_readable(&self, offset: usize, dst: &mut [u8]) -> bool {
        let Some(end) = offset.checked_add(dst.len()) else {
            return false;
        };
        if end > self.readable_len {
            return false;
        }
        for (slice, pos) in Self::ranges(&self.readable, offset, dst.len()) {
            // SAFETY: `slice` lies inside a validated guest-memory piece (see `ranges`).
            let src = unsafe { std::slice::from_raw_parts(slice.0, slice.1) };
            dst[pos..pos + slice.1].copy_from_slice(src);
        }
        true
    }

    /// Writes `src` into the writable part at `offset`. Returns false if it does not fit.
    pub fn write_writable(&self, offset: usize, src: &[u8]) -> bool {
        let Some(end) = offset.checked_add(src.len()) else {
            return false;
        };
        if end > self.writable_len {
            return false;
        }
        for (slice, pos) in Self::ranges(&self.writable, offset, src.len()) {
            // SAFETY: `slice` lies inside a validated, non-overlapping writable piece.
            let dst = unsafe { std::slice::from_raw_parts_mut(slice.0, slice.1) };
            dst.copy_from_slice(&src[pos..pos + slice.1]);
        }
        true
    }

    /// Sub-ranges `(ptr, len)` of `pieces` covering `[offset, offset+len)`, each with its
    /// position relative to `offset`. The caller checked that the range is inside.
    fn ranges(pieces: &[Piece], offset: usize, len: usize) -> Ranges<'_> {
        Ranges {
            pieces: pieces.iter(),
            skip: offset,
            left: len,
            pos: 0,
        }
    }

    /// The readable bytes from `offset` to the end, as slices for vectored writes to storage.
    pub fn readable_iov(&self, offset: usize) -> IoSlices<'m> {
        let len = self.readable_len.saturating_sub(offset);
        Self::ranges(&self.readable, offset, len)
            // SAFETY: each range is inside guest memory that stays mapped for 'm (the memory
            // guard the chain was validated against); the device only reads it.
            .map(|((p, n), _)| IoSlice::new(unsafe { std::slice::from_raw_parts(p, n) }))
            .collect()
    }

    /// The writable bytes `[offset, offset+len)`, as slices for vectored reads from storage.
    /// The caller must not hold two overlapping results at once.
    pub fn writable_iov(&mut self, offset: usize, len: usize) -> IoSlicesMut<'m> {
        let len = len.min(self.writable_len.saturating_sub(offset));
        Self::ranges(&self.writable, offset, len)
            // SAFETY: each range is inside guest memory mapped for 'm; writable pieces were
            // checked not to overlap any other buffer of the chain, and `&mut self` keeps this
            // the only live mutable view the backend creates.
            .map(|((p, n), _)| IoSliceMut::new(unsafe { std::slice::from_raw_parts_mut(p, n) }))
            .collect()
    }
}

/// Iterator behind [`GuestBufs::ranges`]: walks the pieces without collecting them.
struct Ranges<'p> {
    pieces: std::slice::Iter<'p, Piece>,
    skip: usize,
    left: usize,
    pos: usize,
}

impl Iterator for Ranges<'_> {
    type Item = ((*mut u8, usize), usize);

    fn next(&mut self) -> Option<Self::Item> {
        while self.left > 0 {
            let p = self.pieces.next()?;
            if self.skip >= p.len {
                self.skip -= p.len;
                continue;
            }
            let n = (p.len - self.skip).min(self.left);
            // SAFETY: `skip < p.len`, so the pointer stays inside the piece.
            let ptr = unsafe { p.ptr.add(self.skip) };
            let at = self.pos;
            self.pos += n;
            self.left -= n;
            self.skip = 0;
            return Some(((ptr, n), at));
        }
        None
    }
}

/// Test helper: puts `descs` (address, length, flags; NEXT is added between them) into a mock
/// split queue in `mem` and pops the chain, as a worker would.
#[cfg(test)]
pub(crate) fn mock_chain<'m>(mem: &'m GuestMemoryMmapT, descs: &[(u64, u32, u16)]) -> Chain<'m> {
    use virtio_queue::desc::{split::Descriptor as SplitDescriptor, RawDescriptor};
    use virtio_queue::QueueT;
    const F_NEXT: u16 = 1;
    let vq = virtio_queue::mock::MockSplitQueue::new(mem, 16);
    let raw: Vec<RawDescriptor> = descs
        .iter()
        .enumerate()
        .map(|(i, &(a, l, f))| {
            let next = if i + 1 < descs.len() { f | F_NEXT } else { f };
            RawDescriptor::from(SplitDescriptor::new(a, l, next, (i + 1) as u16))
        })
        .collect();
    vq.add_desc_chains(&raw, 0).unwrap();
    let mut q: virtio_queue::Queue = vq.create_queue().unwrap();
    q.pop_descriptor_chain(mem).unwrap()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mem() -> GuestMemoryMmapT {
        GuestMemoryMmap::from_ranges(&[
            (GuestAddress(0), 0x10000),
            (GuestAddress(0x10000), 0x10000),
        ])
        .unwrap()
    }

    fn d(addr: u64, len: u32, writable: bool) -> Desc {
        Desc {
            addr,
            len,
            writable,
        }
    }

    #[test]
    fn streams_cross_descriptors_and_regions() {
        let m = mem();
        let src: Vec<u8> = (0..32).collect();
        vm_memory::Bytes::write_slice(&m, &src, GuestAddress(0xfff0)).unwrap();
        let b = GuestBufs::new(&m, [d(0xfff0, 32, false), d(0x100, 8, true)], 1 << 20, 16).unwrap();
        assert_eq!(b.readable_len(), 32);
        let mut out = [0u8; 20];
        assert!(b.read_readable(10, &mut out));
        assert_eq!(&out[..], &src[10..30]);
        assert!(!b.read_readable(20, &mut out));
        assert!(b.write_writable(7, &[0xab]));
        assert!(!b.write_writable(8, &[0xab]));
        let mut check = [0u8; 1];
        vm_memory::Bytes::read_slice(&m, &mut check, GuestAddress(0x107)).unwrap();
        assert_eq!(check[0], 0xab);
        assert_eq!(
            b.readable_iov(16).iter().map(|s| s.len()).sum::<usize>(),
            16
        );
    }

    #[test]
    fn long_chains_spill_past_the_inline_pieces() {
        // More pieces than fit inline in either direction (and one crossing a region edge).
        let m = mem();
        let src: Vec<u8> = (0..96).collect();
        vm_memory::Bytes::write_slice(&m, &src, GuestAddress(0xffd8)).unwrap();
        let readable = (0..6).map(|i| d(0xffd8 + i * 16, 16, false));
        let writable = (0..7).map(|i| d(0x2000 + i * 0x100, 64, true));
        let mut b = GuestBufs::new(&m, readable.chain(writable), 1 << 20, 16).unwrap();
        assert_eq!((b.readable_len(), b.writable_len()), (96, 7 * 64));
        let mut out = [0u8; 40];
        assert!(b.read_readable(50, &mut out));
        assert_eq!(&out[..], &src[50..90]);
        let out_iov = b.readable_iov(8);
        assert_eq!(out_iov.len(), 7);
        assert_eq!(out_iov.iter().map(|s| s.len()).sum::<usize>(), 88);
        assert_eq!(&out_iov[0][..], &src[8..16]);
        let mut in_iov = b.writable_iov(100, 300);
        let lens: Vec<usize> = in_iov.iter().map(|s| s.len()).collect();
        assert_eq!(lens, [28, 64, 64, 64, 64, 16]);
        in_iov[1].fill(0xcd);
        drop(in_iov);
        let mut check = [0u8; 64];
        vm_memory::Bytes::read_slice(&m, &mut check, GuestAddress(0x2200)).unwrap();
        assert_eq!(check, [0xcd; 64]);
        let (w, r) = ([0x11u8; 150], 0x2000 + 3 * 0x100 + 60);
        assert!(b.write_writable(3 * 64 + 60, &w));
        let mut back = [0u8; 8];
        vm_memory::Bytes::read_slice(&m, &mut back, GuestAddress(r)).unwrap();
        assert_eq!(back[..4], [0x11; 4]);
        assert!(!b.write_writable(7 * 64 - 1, &[0, 0]));
    }

    #[test]
    fn malformed_chains_are_refused() {
        let m = mem();
        let cases: Vec<(Vec<Desc>, ChainError)> = vec![
            (
                vec![d(0, 16, true), d(16, 16, false)],
                ChainError::ReadableAfterWritable,
            ),
            (vec![d(0, 0, false)], ChainError::ZeroLength),
            (
                vec![d(0x1f000, 0x1800, true)],
                ChainError::BadAddress {
                    addr: 0x1f000,
                    len: 0x1800,
                },
            ),
            (
                vec![d(u64::MAX - 4, 16, false)],
                ChainError::BadAddress {
                    addr: u64::MAX - 4,
                    len: 16,
                },
            ),
            (
                vec![d(0, 0x1000, false), d(0x1000, 0x1000, true)],
                ChainError::TooLong(0x2000),
            ),
            (vec![d(0, 16, false), d(8, 16, true)], ChainError::Overlap),
            (vec![d(0, 64, true), d(32, 8, true)], ChainError::Overlap),
            (vec![], ChainError::Empty),
        ];
        for (descs, want) in cases {
            assert_eq!(
                GuestBufs::new(&m, descs.clone(), 0x1800, 8).unwrap_err(),
                want,
                "{descs:?}"
            );
        }
        let many = (0..9).map(|i| d(i * 16, 16, false));
        assert_eq!(
            GuestBufs::new(&m, many, 1 << 20, 8).unwrap_err(),
            ChainError::TooManyDescriptors(8)
        );
        // Readable buffers may overlap each other.
        assert!(GuestBufs::new(
            &m,
            [d(0, 16, false), d(0, 16, false), d(64, 1, true)],
            1 << 20,
            8
        )
        .is_ok());
    }
}
