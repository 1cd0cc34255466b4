//! A stalled queue described from outside (the daemon logs it on SIGUSR1), to tell a lost kick
//! from a worker that stopped draining from a lost interrupt.
//!
//! Contract:
//! 1. Nothing here waits for a worker: a queue whose state lock is held is reported as such
//!    (itself a finding: its worker is inside a drain), never blocked on.
//! 2. Ring indices are read from guest memory with acquire ordering, as a worker reads them;
//!    an address the memory map does not hold is reported, not dereferenced.
//! 3. Counters are relaxed atomics bumped by the workers, one increment per event: a kick
//!    event, a drain.

use std::sync::atomic::{AtomicU64, Ordering};

use vhost_user_backend::VringT;
use virtio_queue::QueueT;
use vm_memory::{Bytes, GuestAddress};

use super::chain::GuestMemoryMmapT;
use super::queue::Vring;
use super::split;

/// Per queue: how often its worker saw a kick and drained it.
#[derive(Debug, Default)]
pub struct QueueCounters {
    pub kicks: AtomicU64,
    pub drains: AtomicU64,
}

impl QueueCounters {
    pub fn kick(&self) {
        self.kicks.fetch_add(1, Ordering::Relaxed);
    }
    pub fn drain(&self) {
        self.drains.fetch_add(1, Ordering::Relaxed);
    }
}

fn read_u16(mem: &GuestMemoryMmapT, addr: u64) -> String {
    match mem.read_obj::<u16>(GuestAddress(addr)) {
        Ok(v) => u16::from_le(v).to_string(),
        Err(_) => "unmapped".into(),
    }
}

/// One line for the split ring of `vring`: readiness, the driver's and the device's indices,
/// and the two event-index fields (rule 2).
pub fn ring_line(vring: &Vring, mem: &GuestMemoryMmapT) -> String {
    let ring = vring.get_ref();
    let q = ring.get_queue();
    let size = u64::from(q.size());
    let avail = q
        .avail_idx(mem, Ordering::Acquire)
        .map_or("unmapped".into(), |w| w.0.to_string());
    let used = q
        .used_idx(mem, Ordering::Acquire)
        .map_or("unmapped".into(), |w| w.0.to_string());
    let used_event = read_u16(mem, q.avail_ring() + split::used_event_offset(size));
    let avail_event = read_u16(mem, q.used_ring() + split::avail_event_offset(size));
    format!(
        "ready={} enabled={} event_idx={} size={size} avail_idx={avail} next_avail={} \
         used_idx={used} next_used={} avail_event={avail_event} used_event={used_event}",
        q.ready(),
        ring.is_enabled(),
        q.event_idx_enabled(),
        q.next_avail(),
        q.next_used(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use virtio_queue::mock::MockSplitQueue;
    use vm_memory::{GuestMemoryAtomic, GuestMemoryMmap};

    const SIZE: u16 = 16;

    fn vring_on(mem: &GuestMemoryMmapT, vq: &MockSplitQueue<'_, GuestMemoryMmapT>) -> Vring {
        let v = Vring::new(GuestMemoryAtomic::new(mem.clone()), SIZE).unwrap();
        v.set_queue_size(SIZE);
        v.set_queue_info(vq.desc_table_addr().0, vq.avail_addr().0, vq.used_addr().0)
            .unwrap();
        v.set_queue_ready(true);
        v.set_enabled(true);
        v
    }

    #[test]
    fn reports_the_driver_and_device_indices_and_the_event_fields() {
        let mem = GuestMemoryMmap::from_ranges(&[(GuestAddress(0), 0x10_0000)]).unwrap();
        let vq = MockSplitQueue::new(&mem, SIZE);
        let v = vring_on(&mem, &vq);
        vq.avail().idx().store(u16::to_le(5));
        vq.used().idx().store(u16::to_le(2));
        let size = u64::from(SIZE);
        mem.write_obj(
            u16::to_le(7),
            GuestAddress(vq.avail_addr().0 + 4 + 2 * size),
        )
        .unwrap();
        mem.write_obj(u16::to_le(3), GuestAddress(vq.used_addr().0 + 4 + 8 * size))
            .unwrap();
        let line = ring_line(&v, &mem);
        for want in [
            "ready=true",
            "enabled=true",
            "size=16",
            "avail_idx=5",
            "next_avail=0",
            "used_idx=2",
            "next_used=0",
            "avail_event=3",
            "used_event=7",
        ] {
            assert!(line.contains(want), "{want} not in {line}");
        }
    }

    #[test]
    fn an_address_outside_guest_memory_is_reported_not_read() {
        let mem = GuestMemoryMmap::from_ranges(&[(GuestAddress(0), 0x10_0000)]).unwrap();
        let vq = MockSplitQueue::new(&mem, SIZE);
        let v = vring_on(&mem, &vq);
        // The frontend moved the rings past the end of guest RAM.
        v.set_queue_info(0, 0x20_0000, 0x30_0000).unwrap();
        let line = ring_line(&v, &mem);
        assert!(line.contains("avail_idx=unmapped"), "{line}");
        assert!(line.contains("avail_event=unmapped"), "{line}");
        assert!(line.contains("used_event=unmapped"), "{line}");
    }

    #[test]
    fn counters_count() {
        let c = QueueCounters::default();
        c.kick();
        c.kick();
        c.drain();
        assert_eq!(c.kicks.load(Ordering::Relaxed), 2);
        assert_eq!(c.drains.load(Ordering::Relaxed), 1);
    }
}
