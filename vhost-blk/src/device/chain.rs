//! Guest buffers of one descriptor chain, validated once and then handed to the personality
//! and the storage layer as vm-memory [`VolatileSlice`]s.
//!
//! Rules:
//! 1. The chain is read as two byte streams, the device-readable part followed by the
//!    device-writable part (VIRTIO_F_ANY_LAYOUT semantics: the driver may split headers and
//!    data across descriptors in any way).
//! 2. A chain is refused when a readable descriptor follows a writable one, a descriptor has
//!    zero length, an address range is not guest RAM, the chain is longer than the device's
//!    limit (bytes or descriptors), or a writable range overlaps any other range (which would
//!    let one request alias its own buffers).
//! 3. Guest memory is never a Rust reference: the guest may change any byte at any moment, which
//!    a `&[u8]` forbids while it lives. Small structures (headers, responses) are copied in and
//!    out with [`GuestBufs::read_obj`] / [`GuestBufs::write_obj`] (vm-memory's `ByteValued`
//!    types) or [`GuestBufs::read_readable`] / [`GuestBufs::write_writable`]; bulk data goes
//!    between storage and guest memory as [`GuestSlices`] (vectored, positional I/O straight
//!    into the guest's buffers, no copy). `vhost-blk/tests/no_guest_refs.rs` fails when a
//!    `slice::from_raw_parts` or an `IoSlice` comes back outside its allow list.
//! 4. Nothing here allocates for a chain of up to [`INLINE_PIECES`] pieces per direction.
//!
//! virtio-queue's `Reader`/`Writer` do the same streaming, but allocate per chain (a `VecDeque`
//! and a `Vec` per call), check neither overlap nor limits, and offer the data only as
//! `io::Read`/`io::Write` (a copy) rather than as slices for `preadv`/`pwritev`.

use smallvec::SmallVec;
use std::mem::size_of;
use virtio_queue::DescriptorChain;

use vm_memory::{
    ByteValued, GuestAddress, GuestMemoryBackend, GuestMemoryMmap, VolatileMemory, VolatileSlice,
};

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

/// Loads the validated buffers of `chain` into `bufs` (whatever it held before is dropped), or
/// returns false (logged) when the chain is malformed and leaves `bufs` empty. The one place a
/// descriptor chain becomes guest buffers. It fills the caller's `bufs` in place rather than
/// returning one: a returned `GuestBufs` (about 240 bytes) was copied on every request
/// (docs/results/scale128/README.md, "The cause, found by sampling").
pub fn load_chain<'c>(
    bufs: &mut GuestBufs<'c>,
    chain: &'c Chain<'_>,
    limits: &ChainLimits,
) -> bool {
    let descs = chain.clone().map(|d| Desc {
        addr: d.addr().0,
        len: d.len(),
        writable: d.is_write_only(),
    });
    match bufs.load(chain.memory(), descs, limits.max_bytes, limits.max_descs) {
        Ok(()) => true,
        Err(e) => {
            bufs.clear();
            tracing::debug!("refused chain {}: {e}", chain.head_index());
            false
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

/// Pieces kept inline per direction before spilling to the heap: a typical request has one or
/// two of each (header; data and status), so the hot path never allocates.
pub const INLINE_PIECES: usize = 4;

/// Guest memory for vectored storage I/O, inline for the common short chains: the pieces of
/// one direction of a chain (a descriptor, or the part of it inside one memory region, each).
pub type GuestSlices<'m> = SmallVec<[VolatileSlice<'m>; INLINE_PIECES]>;

/// Validated buffers of a chain. Lives no longer than the guest-memory guard it came from.
#[derive(Debug)]
pub struct GuestBufs<'m> {
    readable: GuestSlices<'m>,
    writable: GuestSlices<'m>,
    readable_len: usize,
    writable_len: usize,
}

/// A descriptor as the personality sees it: guest address, length, device-writable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Desc {
    pub addr: u64,
    pub len: u32,
    pub writable: bool,
}

impl<'m> GuestBufs<'m> {
    /// No buffers, for [`GuestBufs::load`] / [`load_chain`] to fill.
    pub fn empty() -> Self {
        GuestBufs {
            readable: GuestSlices::new(),
            writable: GuestSlices::new(),
            readable_len: 0,
            writable_len: 0,
        }
    }

    /// Validates `descs` against `mem`. `max_bytes` bounds the total length, `max_descs` the count.
    pub fn new(
        mem: &'m GuestMemoryMmapT,
        descs: impl IntoIterator<Item = Desc>,
        max_bytes: u64,
        max_descs: usize,
    ) -> Result<Self, ChainError> {
        let mut bufs = Self::empty();
        bufs.load(mem, descs, max_bytes, max_descs)?;
        Ok(bufs)
    }

    /// No pieces.
    fn clear(&mut self) {
        self.readable.clear();
        self.writable.clear();
        self.readable_len = 0;
        self.writable_len = 0;
    }

    /// [`GuestBufs::new`] into `self`, in place; whatever `self` held before is dropped first.
    /// On an error `self` holds the pieces loaded before it: clear or drop it.
    pub fn load(
        &mut self,
        mem: &'m GuestMemoryMmapT,
        descs: impl IntoIterator<Item = Desc>,
        max_bytes: u64,
        max_descs: usize,
    ) -> Result<(), ChainError> {
        self.clear();
        let mut total: u64 = 0;
        for (n, d) in descs.into_iter().enumerate() {
            if n >= max_descs {
                return Err(ChainError::TooManyDescriptors(max_descs));
            }
            if d.len == 0 {
                return Err(ChainError::ZeroLength);
            }
            if !d.writable && !self.writable.is_empty() {
                return Err(ChainError::ReadableAfterWritable);
            }
            total += u64::from(d.len);
            if total > max_bytes {
                return Err(ChainError::TooLong(total));
            }
            let bad = || ChainError::BadAddress {
                addr: d.addr,
                len: d.len,
            };
            if d.addr.checked_add(u64::from(d.len)).is_none() {
                return Err(bad());
            }
            // One piece per guest-memory region the descriptor spans.
            let (pieces, len) = if d.writable {
                (&mut self.writable, &mut self.writable_len)
            } else {
                (&mut self.readable, &mut self.readable_len)
            };
            // The usual descriptor lies in one region: one region lookup (`get_slice`), not
            // the region iterator's per-piece lookups.
            match mem.get_slice(GuestAddress(d.addr), d.len as usize) {
                Ok(slice) => pieces.push(slice),
                Err(_) => {
                    for slice in mem.get_slices(GuestAddress(d.addr), d.len as usize) {
                        pieces.push(slice.map_err(|_| bad())?);
                    }
                }
            }
            *len += d.len as usize;
        }
        if self.readable.is_empty() && self.writable.is_empty() {
            return Err(ChainError::Empty);
        }
        self.check_overlap()
    }

    /// Rule 2's overlap check, on host addresses (each region is mapped once, so this is the
    /// guest-address check, and it also sees two guest ranges that share host memory). Chains
    /// of up to `2 * INLINE_PIECES` pieces (every usual request) compare each writable piece
    /// with every other piece in place; longer ones sort (O(n log n) for a guest's longest
    /// chains). The pairwise path exists for speed: collecting the spans into a vector cost a
    /// copy per request (docs/results/scale128/README.md, "The cause, found by sampling").
    fn check_overlap(&self) -> Result<(), ChainError> {
        if self.writable.is_empty() {
            return Ok(());
        }
        if self.readable.len() + self.writable.len() <= 2 * INLINE_PIECES {
            self.check_overlap_pairwise()
        } else {
            self.check_overlap_sorted()
        }
    }

    /// A piece's host address range, end saturated.
    fn span(p: &VolatileSlice<'_>) -> (usize, usize) {
        let start = p.ptr_guard().as_ptr() as usize;
        (start, start.saturating_add(p.len()))
    }

    /// Each writable piece against every readable piece and every later writable piece.
    fn check_overlap_pairwise(&self) -> Result<(), ChainError> {
        let meet = |(s1, e1): (usize, usize), (s2, e2): (usize, usize)| s1 < e2 && s2 < e1;
        for (i, w) in self.writable.iter().enumerate() {
            let ws = Self::span(w);
            let others = self.readable.iter().chain(self.writable.iter().skip(i + 1));
            if others.map(Self::span).any(|o| meet(ws, o)) {
                return Err(ChainError::Overlap);
            }
        }
        Ok(())
    }

    /// The same check by sorting the spans once.
    fn check_overlap_sorted(&self) -> Result<(), ChainError> {
        let mut all: Vec<(usize, usize, bool)> = self
            .readable
            .iter()
            .map(|p| (Self::span(p), false))
            .chain(self.writable.iter().map(|p| (Self::span(p), true)))
            .map(|((s, e), w)| (s, e, w))
            .collect();
        all.sort_unstable();
        // Any writable range that overlaps its neighbour (or a readable range overlapping a
        // writable one) is refused; readable ranges may overlap each other.
        let mut max_end = 0usize;
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
        if offset
            .checked_add(dst.len())
            .is_none_or(|end| end > self.readable_len)
        {
            return false;
        }
        let mut copied = 0;
        for (slice, pos) in Self::ranges(&self.readable, offset, dst.len()) {
            copied += dst.get_mut(pos..).map_or(0, |d| slice.copy_to(d));
        }
        copied == dst.len()
    }

    /// Writes `src` into the writable part at `offset`. Returns false if it does not fit.
    pub fn write_writable(&self, offset: usize, src: &[u8]) -> bool {
        if offset
            .checked_add(src.len())
            .is_none_or(|end| end > self.writable_len)
        {
            return false;
        }
        for (slice, pos) in Self::ranges(&self.writable, offset, src.len()) {
            if let Some(s) = src.get(pos..) {
                slice.copy_from(s);
            }
        }
        true
    }

    /// The readable object of type `T` at `offset` (a copy), or `None` if the readable part is
    /// too short.
    pub fn read_obj<T: ByteValued + Default>(&self, offset: usize) -> Option<T> {
        // The usual case, one piece holds it all: one volatile load of `T`.
        if let Some(s) = Self::one_piece(&self.readable, offset, size_of::<T>()) {
            if let Ok(r) = s.get_ref::<T>(0) {
                return Some(r.load());
            }
        }
        let mut v = T::default();
        self.read_readable(offset, v.as_mut_slice()).then_some(v)
    }

    /// Writes `v` into the writable part at `offset`. Returns false if it does not fit.
    pub fn write_obj<T: ByteValued>(&self, offset: usize, v: &T) -> bool {
        if let Some(s) = Self::one_piece(&self.writable, offset, size_of::<T>()) {
            if let Ok(r) = s.get_ref::<T>(0) {
                r.store(*v);
                return true;
            }
        }
        self.write_writable(offset, v.as_slice())
    }

    /// `[offset, offset + len)` of `pieces` when one piece holds all of it.
    fn one_piece(
        pieces: &[VolatileSlice<'m>],
        offset: usize,
        len: usize,
    ) -> Option<VolatileSlice<'m>> {
        let (s, _) = Self::ranges(pieces, offset, len).next()?;
        (s.len() == len).then_some(s)
    }

    /// Sub-slices of `pieces` covering `[offset, offset+len)`, each with its position relative
    /// to `offset`. Stops at the end of the pieces.
    fn ranges<'p>(pieces: &'p [VolatileSlice<'m>], offset: usize, len: usize) -> Ranges<'p, 'm> {
        Ranges {
            pieces: pieces.iter(),
            skip: offset,
            left: len,
            pos: 0,
        }
    }

    /// The readable bytes from `offset` to the end, for vectored writes to storage.
    pub fn readable_slices(&self, offset: usize) -> GuestSlices<'m> {
        let len = self.readable_len.saturating_sub(offset);
        Self::ranges(&self.readable, offset, len)
            .map(|(s, _)| s)
            .collect()
    }

    /// The writable bytes `[offset, offset+len)` (cut at the end of the writable part), for
    /// vectored reads from storage.
    pub fn writable_slices(&self, offset: usize, len: usize) -> GuestSlices<'m> {
        let len = len.min(self.writable_len.saturating_sub(offset));
        Self::ranges(&self.writable, offset, len)
            .map(|(s, _)| s)
            .collect()
    }
}

/// Iterator behind [`GuestBufs::ranges`]: walks the pieces without collecting them.
struct Ranges<'p, 'm> {
    pieces: std::slice::Iter<'p, VolatileSlice<'m>>,
    skip: usize,
    left: usize,
    pos: usize,
}

impl<'m> Iterator for Ranges<'_, 'm> {
    type Item = (VolatileSlice<'m>, usize);

    fn next(&mut self) -> Option<Self::Item> {
        while self.left > 0 {
            let p = self.pieces.next()?;
            let plen = p.len();
            if self.skip >= plen {
                self.skip -= plen;
                continue;
            }
            let n = (plen - self.skip).min(self.left);
            // In bounds: skip < plen and n <= plen - skip, so this never fails.
            let s = p.subslice(self.skip, n).ok()?;
            let at = self.pos;
            self.pos += n;
            self.left -= n;
            self.skip = 0;
            return Some((s, at));
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
#[path = "chain_tests.rs"]
mod tests;
