//! Inflight I/O tracking for split virtqueues (vhost-user `VHOST_USER_PROTOCOL_F_INFLIGHT_SHMFD`):
//! a shared-memory area, handed to the frontend with `GET_INFLIGHT_FD` and back to a restarted
//! backend with `SET_INFLIGHT_FD`, in which the backend marks the descriptor chains it has taken
//! from the ring and not yet returned. Layout and protocol as QEMU's vhost-user specification
//! ("Inflight I/O tracking") describes them; written here from that description.
//!
//! Rules:
//! 1. The area is one region per queue, each `stride(queue_size)` bytes (a 16-byte header then
//!    16 bytes per descriptor head, rounded up to 64): header `features: u64, version: u16,
//!    desc_num: u16, last_batch_head: u16, used_idx: u16`; per head `inflight: u8, pad[5],
//!    next: u16, counter: u64`. Every access is an atomic load or store of its natural width.
//! 2. A chain is marked when it is popped, in pop order: `counter` from the queue's counter,
//!    then `inflight = 1`. A chain is returned one at a time: `next = last_batch_head`,
//!    `last_batch_head = head`, the used entry (which advances the ring's used index), then
//!    `inflight = 0`, `used_idx = ring used index`. So after a crash at most one returned chain
//!    is still marked, and it is the head of the last batch.
//! 3. On the first drain after `SET_INFLIGHT_FD` ([`Tracker::recover`]): a region of version 0
//!    is new and is initialised; any other version, or a `desc_num` other than the one the
//!    region was mapped for, is not ours to interpret: it is cleared (logged). If the region's
//!    `used_idx` differs from the ring's, the difference (at most the ring size, else nothing is
//!    walked) is the last batch: that many entries of the `last_batch_head`/`next` list are
//!    unmarked, each index checked. Marked heads at or beyond the ring size, and `inflight`
//!    values other than 0 and 1, are cleared. The rest are resubmitted in counter order, and
//!    the ring's next available index becomes `used + number resubmitted`.
//! 4. The area is also mapped by the frontend (and was written by a process that crashed):
//!    nothing read from it is trusted; it can make this backend resubmit a wrong set of heads,
//!    never index outside the area or panic.
//! 5. A queue whose answers promise that requests of other queues are done (virtio-scsi's
//!    control queue: a task management function reports the tasks it covers finished) reads its
//!    region only after every request queue started since the area was installed has read its
//!    own ([`RecoveryGate`]): a TMF the previous backend had taken is answered after the
//!    requests it was about have been resubmitted and published, as it would have been without
//!    the restart. Until then the gated queue takes nothing from its ring; the request queue
//!    that recovers last wakes it.
//! 6. An area this backend creates has [`STATE_LEN`] more bytes after the queue regions (the
//!    layout is the backend's to choose; QEMU keeps the size it was given): the device's own
//!    state that must outlive a backend process, [`StateRegion`]. QEMU keeps the area for the
//!    device's life and frees it on a device reset, exactly the life of the guest's cache-mode
//!    choices (docs/data-guarantees.md), which are kept there: a restarted backend serves the
//!    guest's choice, not its default. An area without the trailer (another backend's) has no
//!    state; bytes that are not a recorded value read as "not recorded".

use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicU16, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::Arc;

/// Header bytes of one queue region.
const HDR: usize = 16;
/// Bytes per descriptor head.
const DESC: usize = 16;
/// Queue regions start on this boundary.
const ALIGN: usize = 64;
/// The region version this backend writes and reads.
pub const VERSION: u16 = 1;

/// Bytes of the device state after the queue regions (rule 6).
pub const STATE_LEN: usize = 4096;
/// The state region's first 8 bytes once anything is recorded.
const STATE_MAGIC: u64 = u64::from_le_bytes(*b"VBSTATE1");

/// Bytes of one queue's region for `queue_size` descriptor heads.
pub fn stride(queue_size: u16) -> usize {
    (HDR + DESC * usize::from(queue_size)).div_ceil(ALIGN) * ALIGN
}

/// Why an area cannot be created or mapped.
#[derive(Debug, thiserror::Error)]
pub enum InflightError {
    #[error("inflight area: {0}")]
    Invalid(String),
    #[error("inflight area: {0}")]
    Io(#[from] io::Error),
}

/// One mapping of the inflight area (all queues).
pub struct InflightArea {
    ptr: NonNull<u8>,
    len: usize,
    num_queues: u16,
    queue_size: u16,
}

// SAFETY: the mapping is plain shared memory; every access goes through atomics (rule 1), so
// concurrent use from several threads (and from the frontend's process) is data-race free.
unsafe impl Send for InflightArea {}
// SAFETY: as above.
unsafe impl Sync for InflightArea {}

impl std::fmt::Debug for InflightArea {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InflightArea")
            .field("len", &self.len)
            .field("num_queues", &self.num_queues)
            .field("queue_size", &self.queue_size)
            .finish()
    }
}

impl InflightArea {
    /// A new zero-filled memfd for `num_queues` regions of `queue_size` heads, and its size.
    pub fn create(num_queues: u16, queue_size: u16) -> Result<(File, u64), InflightError> {
        let regions = (stride(queue_size) * usize::from(num_queues)) as u64;
        if regions == 0 {
            return Err(InflightError::Invalid("no queues or no descriptors".into()));
        }
        let size = regions + STATE_LEN as u64;
        // SAFETY: the name is a valid NUL-terminated string; flags are plain bits.
        let fd = unsafe { libc::memfd_create(c"vhost-blk-inflight".as_ptr(), libc::MFD_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error().into());
        }
        // SAFETY: `fd` was just returned by memfd_create and is owned by nobody else.
        let file = unsafe { File::from_raw_fd(fd) };
        file.set_len(size)?;
        Ok((file, size))
    }

    /// Maps `mmap_size` bytes at `mmap_offset` of `file` for `num_queues` regions of
    /// `queue_size` heads, after checking the sizes against each other and the file.
    pub fn map(
        file: &File,
        mmap_size: u64,
        mmap_offset: u64,
        num_queues: u16,
        queue_size: u16,
    ) -> Result<Self, InflightError> {
        let need = (stride(queue_size) * usize::from(num_queues)) as u64;
        if num_queues == 0 || queue_size == 0 {
            return Err(InflightError::Invalid("no queues or no descriptors".into()));
        }
        if mmap_size < need {
            return Err(InflightError::Invalid(format!(
                "{mmap_size} bytes for {num_queues} queues of {queue_size} need {need}"
            )));
        }
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(1) as u64;
        if mmap_offset % page != 0 {
            return Err(InflightError::Invalid(format!(
                "offset {mmap_offset} is not page aligned"
            )));
        }
        let file_len = file.metadata()?.len();
        if mmap_offset
            .checked_add(mmap_size)
            .is_none_or(|end| end > file_len)
        {
            return Err(InflightError::Invalid(format!(
                "{mmap_size} bytes at {mmap_offset} exceed the file ({file_len} bytes)"
            )));
        }
        let len = usize::try_from(mmap_size)
            .map_err(|_| InflightError::Invalid(format!("size {mmap_size}")))?;
        // SAFETY: a fresh shared mapping of a range checked to lie inside the file; the result
        // is checked for MAP_FAILED before use.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                mmap_offset as libc::off_t,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error().into());
        }
        let ptr = NonNull::new(ptr.cast::<u8>())
            .ok_or_else(|| InflightError::Invalid("mmap returned null".into()))?;
        Ok(Self {
            ptr,
            len,
            num_queues,
            queue_size,
        })
    }

    pub fn num_queues(&self) -> u16 {
        self.num_queues
    }

    pub fn queue_size(&self) -> u16 {
        self.queue_size
    }

    /// The device state after the queue regions, if the area has room for it (rule 6).
    pub fn state(self: &Arc<Self>) -> Option<StateRegion> {
        let off = stride(self.queue_size) * usize::from(self.num_queues);
        (self.len >= off + STATE_LEN).then(|| StateRegion {
            area: self.clone(),
            off,
        })
    }

    /// The region of queue `q`, if the area has one.
    pub fn queue(self: &Arc<Self>, q: usize) -> Option<QueueRegion> {
        (q < usize::from(self.num_queues)).then(|| QueueRegion {
            area: self.clone(),
            off: q * stride(self.queue_size),
            desc_num: self.queue_size,
        })
    }
}

impl Drop for InflightArea {
    fn drop(&mut self) {
        // SAFETY: `ptr`/`len` are exactly the mapping made in `map`, unmapped only here.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}

/// The device's state in the area (rule 6): an 8-byte magic, then one byte per slot (a disk:
/// virtio-blk's slot 0, a SCSI LUN's its place in the topology): 0 not recorded, 1 write cache
/// on, 2 off.
#[derive(Debug, Clone)]
pub struct StateRegion {
    area: Arc<InflightArea>,
    off: usize,
}

impl StateRegion {
    /// Slots of cache-mode bytes.
    pub const SLOTS: usize = STATE_LEN - 8;

    fn byte(&self, at: usize) -> Option<&AtomicU8> {
        (at < STATE_LEN && self.off + at < self.area.len).then(|| {
            // SAFETY: inside the mapping (checked above); a byte has no alignment to keep; an
            // atomic byte has the layout of the byte the frontend sees.
            unsafe { &*self.area.ptr.as_ptr().add(self.off + at).cast::<AtomicU8>() }
        })
    }

    fn magic(&self) -> Option<u64> {
        let mut b = [0u8; 8];
        for (i, d) in b.iter_mut().enumerate() {
            *d = self.byte(i)?.load(Ordering::Acquire);
        }
        Some(u64::from_le_bytes(b))
    }

    /// The write-cache setting recorded for `slot`, if one is.
    pub fn write_cache(&self, slot: usize) -> Option<bool> {
        if slot >= Self::SLOTS || self.magic()? != STATE_MAGIC {
            return None;
        }
        match self.byte(8 + slot)?.load(Ordering::Acquire) {
            1 => Some(true),
            2 => Some(false),
            _ => None,
        }
    }

    /// Records the write-cache setting of `slot` (nothing beyond the last slot).
    pub fn set_write_cache(&self, slot: usize, on: bool) {
        let Some(b) = self.byte(8 + slot).filter(|_| slot < Self::SLOTS) else {
            return;
        };
        b.store(if on { 1 } else { 2 }, Ordering::Release);
        for (i, v) in STATE_MAGIC.to_le_bytes().into_iter().enumerate() {
            if let Some(m) = self.byte(i) {
                m.store(v, Ordering::Release);
            }
        }
    }
}

/// One queue's region of the area.
#[derive(Debug, Clone)]
pub struct QueueRegion {
    area: Arc<InflightArea>,
    off: usize,
    desc_num: u16,
}

impl QueueRegion {
    /// The byte at `at` of this region as an atomic of type `T`.
    fn at<T>(&self, at: usize) -> &T {
        debug_assert!(at % std::mem::align_of::<T>() == 0);
        assert!(self.off + at + std::mem::size_of::<T>() <= self.area.len);
        // SAFETY: the offset is inside the mapping (checked above: regions were sized in
        // `map`), naturally aligned (the mapping is page aligned, regions 64-byte aligned,
        // every field at a multiple of its size), and the atomic types have the layout of the
        // plain integers the frontend sees.
        unsafe { &*self.area.ptr.as_ptr().add(self.off + at).cast::<T>() }
    }
    fn version(&self) -> &AtomicU16 {
        self.at(8)
    }
    fn desc_num_field(&self) -> &AtomicU16 {
        self.at(10)
    }
    fn last_batch_head(&self) -> &AtomicU16 {
        self.at(12)
    }
    fn used_idx(&self) -> &AtomicU16 {
        self.at(14)
    }
    fn inflight(&self, head: u16) -> &AtomicU8 {
        self.at(HDR + DESC * usize::from(head))
    }
    fn next(&self, head: u16) -> &AtomicU16 {
        self.at(HDR + DESC * usize::from(head) + 6)
    }
    fn counter(&self, head: u16) -> &AtomicU64 {
        self.at(HDR + DESC * usize::from(head) + 8)
    }

    /// Number of heads this region tracks.
    pub fn desc_num(&self) -> u16 {
        self.desc_num
    }

    /// Whether `head` is marked (tests and diagnostics).
    pub fn is_marked(&self, head: u16) -> bool {
        head < self.desc_num && self.inflight(head).load(Ordering::Acquire) == 1
    }

    /// The region's copy of the used index.
    pub fn region_used_idx(&self) -> u16 {
        self.used_idx().load(Ordering::Acquire)
    }

    /// Clears every head and writes a fresh header with `used_idx`.
    fn initialise(&self, used_idx: u16) {
        for h in 0..self.desc_num {
            self.inflight(h).store(0, Ordering::Relaxed);
            self.next(h).store(0, Ordering::Relaxed);
            self.counter(h).store(0, Ordering::Relaxed);
        }
        self.at::<AtomicU64>(0).store(0, Ordering::Relaxed);
        self.desc_num_field()
            .store(self.desc_num, Ordering::Relaxed);
        self.last_batch_head().store(0, Ordering::Relaxed);
        self.used_idx().store(used_idx, Ordering::Relaxed);
        self.version().store(VERSION, Ordering::Release);
    }
}

/// What [`Tracker::recover`] found.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Recovery {
    /// Heads to process again, in the order they were first taken.
    pub resubmit: Vec<u16>,
    /// The ring's next available index from now on.
    pub next_avail: u16,
    /// Entries of the last batch unmarked because the ring had already published them.
    pub repaired: u16,
    /// Marks that could not be valid (head beyond the ring, bad value), cleared.
    pub discarded: u16,
    /// The region was new (version 0) or unreadable, and was initialised.
    pub initialised: bool,
}

/// A queue's inflight bookkeeping: its region and its counter.
#[derive(Debug)]
pub struct Tracker {
    region: QueueRegion,
    counter: u64,
    /// Set when the region is installed: the next drain recovers first.
    pending: bool,
    /// False when the ring is larger than the region (nothing can be tracked).
    usable: bool,
}

impl Tracker {
    pub fn new(region: QueueRegion) -> Self {
        Self {
            region,
            counter: 0,
            pending: true,
            usable: true,
        }
    }

    pub fn region(&self) -> &QueueRegion {
        &self.region
    }

    /// Whether the region still has to be read before the ring is drained.
    pub fn recovery_pending(&self) -> bool {
        self.pending
    }

    /// Marks `head` as taken from the ring (rule 2).
    pub fn on_pop(&mut self, head: u16) {
        if !self.usable || head >= self.region.desc_num {
            return;
        }
        self.counter += 1;
        self.region
            .counter(head)
            .store(self.counter, Ordering::Relaxed);
        self.region.inflight(head).store(1, Ordering::Release);
    }

    /// Before the used entry of `head` is written (rule 2).
    pub fn before_used(&self, head: u16) {
        if !self.usable || head >= self.region.desc_num {
            return;
        }
        let last = self.region.last_batch_head().load(Ordering::Relaxed);
        self.region.next(head).store(last, Ordering::Relaxed);
        self.region.last_batch_head().store(head, Ordering::Release);
    }

    /// After the used entry of `head` was written and the ring's used index is `used_idx`.
    pub fn after_used(&self, head: u16, used_idx: u16) {
        if !self.usable || head >= self.region.desc_num {
            return;
        }
        self.region.inflight(head).store(0, Ordering::Release);
        self.region.used_idx().store(used_idx, Ordering::Release);
    }

    /// Reads the region for a ring of `ring_size` whose used index in guest memory is
    /// `guest_used` (rule 3), and re-marks the heads to resubmit with fresh counters in their
    /// order. `None` if the ring cannot be tracked by this region (then tracking is off).
    pub fn recover(&mut self, ring_size: u16, guest_used: u16) -> Option<Recovery> {
        self.pending = false;
        let r = &self.region;
        if ring_size == 0 || ring_size > r.desc_num {
            tracing::warn!(
                ring_size,
                desc_num = r.desc_num,
                "inflight region smaller than the ring: not tracking this queue"
            );
            self.usable = false;
            return None;
        }
        self.usable = true;
        self.counter = 0;
        let mut out = Recovery {
            next_avail: guest_used,
            ..Recovery::default()
        };
        let version = r.version().load(Ordering::Acquire);
        let desc_num = r.desc_num_field().load(Ordering::Acquire);
        if version != VERSION || desc_num != r.desc_num {
            if version != 0 {
                tracing::warn!(version, desc_num, "inflight region not readable: cleared");
            }
            r.initialise(guest_used);
            out.initialised = true;
            return Some(out);
        }
        let region_used = r.used_idx().load(Ordering::Acquire);
        let batch = guest_used.wrapping_sub(region_used);
        if batch > ring_size {
            tracing::warn!(
                guest_used,
                region_used,
                "inflight region's used index is implausible: last batch not walked"
            );
        } else {
            let mut h = r.last_batch_head().load(Ordering::Acquire);
            for _ in 0..batch {
                if h >= r.desc_num {
                    break;
                }
                r.inflight(h).store(0, Ordering::Relaxed);
                out.repaired += 1;
                h = r.next(h).load(Ordering::Relaxed);
            }
        }
        r.used_idx().store(guest_used, Ordering::Release);
        let mut marked: Vec<(u64, u16)> = Vec::new();
        for h in 0..r.desc_num {
            match r.inflight(h).load(Ordering::Acquire) {
                0 => {}
                1 if h < ring_size => marked.push((r.counter(h).load(Ordering::Relaxed), h)),
                _ => {
                    r.inflight(h).store(0, Ordering::Relaxed);
                    out.discarded += 1;
                }
            }
        }
        marked.sort_unstable();
        out.resubmit = marked.into_iter().map(|(_, h)| h).collect();
        for &h in &out.resubmit {
            self.on_pop(h);
        }
        // At most ring_size heads are marked, so this fits the ring's index arithmetic.
        out.next_avail = guest_used.wrapping_add(out.resubmit.len() as u16);
        Some(out)
    }
}

/// Rule 5: which started request queues still have to read their region, and whether the gated
/// queue is waiting for them. One bit per queue of the device, however many (a virtio-scsi
/// device has up to 1,026 vrings); a queue index beyond the device's count holds nothing.
#[derive(Debug)]
pub struct RecoveryGate {
    /// Bit `q % 64` of word `q / 64`: queue `q` has yet to recover.
    bits: Box<[AtomicU64]>,
    /// How many bits are set (the gate is open at 0).
    pending: AtomicUsize,
    waiting: AtomicBool,
}

impl RecoveryGate {
    /// A gate for queues `0..num_queues`.
    pub fn new(num_queues: usize) -> Self {
        Self {
            bits: (0..num_queues.div_ceil(64))
                .map(|_| AtomicU64::new(0))
                .collect(),
            pending: AtomicUsize::new(0),
            waiting: AtomicBool::new(false),
        }
    }

    fn word(&self, q: usize) -> Option<(&AtomicU64, u64)> {
        Some((self.bits.get(q / 64)?, 1u64 << (q % 64)))
    }

    /// Queue `q` starts with a recovery pending (before its ring can be drained).
    pub fn starting(&self, q: usize) {
        if let Some((w, bit)) = self.word(q) {
            // Counted before it is visible, so `pending` never falls short of the bits set.
            self.pending.fetch_add(1, Ordering::SeqCst);
            if w.fetch_or(bit, Ordering::SeqCst) & bit != 0 {
                self.pending.fetch_sub(1, Ordering::SeqCst);
            }
        }
    }

    /// Queue `q` has recovered, or was stopped. True when that opened the gate while the gated
    /// queue was waiting: the caller wakes it.
    pub fn done(&self, q: usize) -> bool {
        let Some((w, bit)) = self.word(q) else {
            return false;
        };
        if w.fetch_and(!bit, Ordering::SeqCst) & bit == 0 {
            return false;
        }
        self.pending.fetch_sub(1, Ordering::SeqCst) == 1
            && self.waiting.swap(false, Ordering::SeqCst)
    }

    /// Whether the gated queue may recover now; if not, it is marked waiting (and woken by
    /// the [`done`](Self::done) that opens the gate).
    pub fn may_pass(&self) -> bool {
        self.waiting.store(true, Ordering::SeqCst);
        if self.pending.load(Ordering::SeqCst) == 0 {
            self.waiting.store(false, Ordering::SeqCst);
            return true;
        }
        false
    }

    /// Device reset: nothing pending, nobody waiting.
    pub fn clear(&self) {
        for w in self.bits.iter() {
            w.store(0, Ordering::SeqCst);
        }
        self.pending.store(0, Ordering::SeqCst);
        self.waiting.store(false, Ordering::SeqCst);
    }
}

#[cfg(test)]
#[path = "inflight_tests.rs"]
mod tests;
