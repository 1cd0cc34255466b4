//! Descriptor chains for heads the inflight area says were in flight when the previous backend
//! died (see [`super::inflight`]).
//!
//! virtio-queue builds a chain only by popping it from an available ring, and the guest's ring
//! may have reused the slots of those heads. So the heads are written, in order, into the
//! available ring of a scratch queue that shares the guest's descriptor table; the ring lives in
//! one anonymous region placed above guest RAM in a copy of the guest memory map.
//!
//! Rules:
//! 1. The scratch region holds only the scratch rings (the heads being resubmitted); it is
//!    dropped after the resubmission.
//! 2. A resubmitted chain is processed only if every descriptor it yields lies in guest RAM
//!    (the real memory map, not the copy); otherwise it is returned unanswered, like any
//!    malformed chain. An indirect table pointed into the scratch region can only make the
//!    device read the head list as descriptors, which then fail or pass that same check.

use std::sync::Arc;

use virtio_queue::{Queue, QueueT};
use vm_memory::{Address, Bytes, GuestAddress, GuestMemoryBackend, GuestRegionMmap};

use super::chain::{Chain, GuestMemoryMmapT};
use super::split;

/// Why no scratch queue could be built.
#[derive(Debug, thiserror::Error)]
pub enum ResubmitError {
    #[error("scratch ring: {0}")]
    Memory(String),
    #[error("scratch queue: {0}")]
    Queue(String),
}

const PAGE: u64 = 4096;

/// A copy of the guest memory map with a scratch region, and a queue over it whose available
/// ring lists `heads`.
pub struct Scratch {
    pub mem: GuestMemoryMmapT,
    pub queue: Queue,
}

impl Scratch {
    /// Builds the scratch queue for a ring of `ring_size` whose descriptor table is at
    /// `desc_table` in `real`.
    pub fn new(
        real: &GuestMemoryMmapT,
        desc_table: u64,
        ring_size: u16,
        heads: &[u16],
    ) -> Result<Self, ResubmitError> {
        let n = usize::from(ring_size);
        // Each ring ends with its event-index field (a u16).
        let avail_len = split::used_event_offset(n as u64) + 2;
        let used_off = avail_len.div_ceil(8) * 8;
        let size = (used_off + split::avail_event_offset(n as u64) + 2).div_ceil(PAGE) * PAGE;
        let base = real
            .last_addr()
            .raw_value()
            .checked_add(1)
            .and_then(|a| a.checked_next_multiple_of(PAGE))
            .ok_or_else(|| ResubmitError::Memory("guest memory ends at the top".into()))?;
        let region = GuestRegionMmap::from_range(GuestAddress(base), size as usize, None)
            .map_err(|e| ResubmitError::Memory(e.to_string()))?;
        let mem = real
            .insert_region(Arc::new(region))
            .map_err(|e| ResubmitError::Memory(e.to_string()))?;
        let avail = GuestAddress(base);
        let mut idx: u16 = 0;
        for (i, &h) in heads.iter().take(n).enumerate() {
            mem.write_obj(h, avail.unchecked_add(4 + 2 * i as u64))
                .map_err(|e| ResubmitError::Memory(e.to_string()))?;
            idx += 1;
        }
        mem.write_obj(idx, avail.unchecked_add(2))
            .map_err(|e| ResubmitError::Memory(e.to_string()))?;
        let mut queue = Queue::new(ring_size).map_err(|e| ResubmitError::Queue(e.to_string()))?;
        queue.set_size(ring_size);
        let split = |a: u64| (Some(a as u32), Some((a >> 32) as u32));
        let (lo, hi) = split(desc_table);
        queue.set_desc_table_address(lo, hi);
        let (lo, hi) = split(base);
        queue.set_avail_ring_address(lo, hi);
        let (lo, hi) = split(base + used_off);
        queue.set_used_ring_address(lo, hi);
        queue.set_ready(true);
        Ok(Self { mem, queue })
    }

    /// The resubmitted chains, in order.
    pub fn chains(&mut self) -> Vec<Chain<'_>> {
        let mem = &self.mem;
        let queue = &mut self.queue;
        let mut out = Vec::new();
        while let Some(c) = queue.pop_descriptor_chain(mem) {
            out.push(c);
        }
        out
    }
}

/// Whether every descriptor of `chain` lies in `real` guest memory (rule 2).
pub fn within_guest_ram(chain: &Chain<'_>, real: &GuestMemoryMmapT) -> bool {
    let mut any = false;
    for d in chain.clone() {
        any = true;
        if !real.check_range(d.addr(), d.len() as usize) {
            return false;
        }
    }
    any
}
