//! Inflight bookkeeping on a mock split ring (virtio-queue's MockSplitQueue): marks on pop,
//! unmarks on publish, a "crash" (a fresh tracker over a fresh mapping of the same memfd, as a
//! restarted backend gets it) and the recovery, including garbage in the area.

use std::fs::File;
use std::sync::Arc;

use rand::{Rng, SeedableRng};
use virtio_queue::desc::{split::Descriptor as SplitDescriptor, RawDescriptor};
use virtio_queue::mock::MockSplitQueue;
use virtio_queue::{Queue, QueueT};
use vm_memory::{GuestAddress, GuestMemoryMmap};

use super::*;
use crate::device::chain::GuestMemoryMmapT;
use crate::device::resubmit::{within_guest_ram, Scratch};

const RING: u16 = 16;
const DATA: u64 = 0x10_0000;

fn mem() -> GuestMemoryMmapT {
    GuestMemoryMmap::from_ranges(&[(GuestAddress(0), 0x20_0000)]).unwrap()
}

/// A memfd area of one queue, and a tracker over a fresh mapping of it.
fn area(queue_size: u16) -> (File, u64) {
    InflightArea::create(1, queue_size).unwrap()
}

fn tracker(f: &(File, u64), queue_size: u16) -> Tracker {
    let a = Arc::new(InflightArea::map(&f.0, f.1, 0, 1, queue_size).unwrap());
    Tracker::new(a.queue(0).unwrap())
}

/// `n` one-descriptor chains (heads 0..n), descriptor i at DATA + i * 0x1000.
fn ring(mem: &GuestMemoryMmapT, n: u16) -> (MockSplitQueue<'_, GuestMemoryMmapT>, Queue) {
    let vq = MockSplitQueue::new(mem, RING);
    let descs: Vec<RawDescriptor> = (0..n)
        .map(|i| {
            RawDescriptor::from(SplitDescriptor::new(
                DATA + u64::from(i) * 0x1000,
                512,
                0,
                0,
            ))
        })
        .collect();
    vq.add_desc_chains(&descs, 0).unwrap();
    let q: Queue = vq.create_queue().unwrap();
    (vq, q)
}

/// Pops every available chain, marking each, and returns the heads in pop order.
fn pop_all(q: &mut Queue, mem: &GuestMemoryMmapT, t: &mut Tracker) -> Vec<u16> {
    let mut heads = vec![];
    while let Some(c) = q.pop_descriptor_chain(mem) {
        t.on_pop(c.head_index());
        heads.push(c.head_index());
    }
    heads
}

/// Returns `head` as the device layer does (inflight rule 2).
fn complete(q: &mut Queue, mem: &GuestMemoryMmapT, t: &Tracker, head: u16) {
    t.before_used(head);
    q.add_used(mem, head, 0).unwrap();
    t.after_used(head, q.next_used());
}

fn guest_used(q: &Queue, mem: &GuestMemoryMmapT) -> u16 {
    q.used_idx(mem, std::sync::atomic::Ordering::Acquire)
        .unwrap()
        .0
}

#[test]
fn a_new_area_is_initialised_and_pop_marks_publish_unmarks() {
    let m = mem();
    let f = area(RING);
    let mut t = tracker(&f, RING);
    assert!(t.recovery_pending());
    let rec = t.recover(RING, 0).unwrap();
    assert!(rec.initialised && rec.resubmit.is_empty() && rec.next_avail == 0);
    assert!(!t.recovery_pending());
    let (_vq, mut q) = ring(&m, 4);
    assert_eq!(pop_all(&mut q, &m, &mut t), vec![0, 1, 2, 3]);
    for h in 0..4 {
        assert!(t.region().is_marked(h));
    }
    complete(&mut q, &m, &t, 2);
    assert!(!t.region().is_marked(2));
    assert!(t.region().is_marked(0) && t.region().is_marked(1) && t.region().is_marked(3));
    assert_eq!(t.region().region_used_idx(), 1);
    assert_eq!(guest_used(&q, &m), 1);
}

#[test]
fn after_a_crash_the_unreturned_chains_come_back_in_pop_order() {
    let m = mem();
    let f = area(RING);
    let mut t = tracker(&f, RING);
    t.recover(RING, 0).unwrap();
    let (vq, mut q) = ring(&m, 5);
    pop_all(&mut q, &m, &mut t);
    // Out of order: 3, then 0.
    complete(&mut q, &m, &t, 3);
    complete(&mut q, &m, &t, 0);
    drop(t); // the backend dies
    let mut t2 = tracker(&f, RING);
    let used = guest_used(&q, &m);
    let rec = t2.recover(RING, used).unwrap();
    assert_eq!(rec.resubmit, vec![1, 2, 4]);
    assert_eq!(rec.next_avail, 5, "used 2 + 3 in flight");
    assert_eq!(
        (rec.repaired, rec.discarded, rec.initialised),
        (0, 0, false)
    );
    // Re-marked in the same order, so a second crash keeps it.
    let c = |h| t2.region().counter(h).load(Ordering::Relaxed);
    assert!(c(1) < c(2) && c(2) < c(4));
    // The chains are rebuilt from the guest's descriptor table, each where it was.
    let mut s = Scratch::new(&m, vq.desc_table_addr().0, RING, &rec.resubmit).unwrap();
    let chains = s.chains();
    let got: Vec<(u16, u64)> = chains
        .iter()
        .map(|c| (c.head_index(), c.clone().next().unwrap().addr().0))
        .collect();
    assert_eq!(
        got,
        vec![(1, DATA + 0x1000), (2, DATA + 0x2000), (4, DATA + 0x4000)]
    );
    assert!(chains.iter().all(|c| within_guest_ram(c, &m)));
    // The restarted ring pops the next new chain, not an old one.
    vq.add_desc_chains(
        &[RawDescriptor::from(SplitDescriptor::new(DATA, 512, 0, 0))],
        5,
    )
    .unwrap();
    q.set_next_avail(rec.next_avail);
    assert_eq!(q.pop_descriptor_chain(&m).unwrap().head_index(), 5);
}

#[test]
fn a_crash_between_the_used_entry_and_the_unmark_is_repaired() {
    let m = mem();
    let f = area(RING);
    let mut t = tracker(&f, RING);
    t.recover(RING, 0).unwrap();
    let (_vq, mut q) = ring(&m, 3);
    pop_all(&mut q, &m, &mut t);
    complete(&mut q, &m, &t, 1);
    // Head 2 reaches the used ring, then the backend dies before unmarking it.
    t.before_used(2);
    q.add_used(&m, 2, 0).unwrap();
    drop(t);
    let mut t2 = tracker(&f, RING);
    let rec = t2.recover(RING, guest_used(&q, &m)).unwrap();
    assert_eq!(rec.repaired, 1);
    assert_eq!(rec.resubmit, vec![0]);
    assert_eq!(rec.next_avail, 3);
    assert_eq!(t2.region().region_used_idx(), 2);
}

#[test]
fn a_chain_popped_but_not_yet_marked_is_popped_again() {
    let m = mem();
    let f = area(RING);
    let mut t = tracker(&f, RING);
    t.recover(RING, 0).unwrap();
    let (_vq, mut q) = ring(&m, 3);
    let c0 = q.pop_descriptor_chain(&m).unwrap();
    t.on_pop(c0.head_index());
    let _c1 = q.pop_descriptor_chain(&m).unwrap(); // dies before marking it
    drop(t);
    let mut t2 = tracker(&f, RING);
    let rec = t2.recover(RING, 0).unwrap();
    assert_eq!(rec.resubmit, vec![0]);
    q.set_next_avail(rec.next_avail);
    assert_eq!(q.pop_descriptor_chain(&m).unwrap().head_index(), 1);
}

#[test]
fn an_area_of_another_layout_or_version_is_cleared_not_read() {
    let f = area(RING);
    let mut t = tracker(&f, RING);
    t.recover(RING, 0).unwrap();
    t.on_pop(3);
    t.region()
        .desc_num_field()
        .store(RING + 1, Ordering::Relaxed);
    let mut t2 = tracker(&f, RING);
    let rec = t2.recover(RING, 7).unwrap();
    assert!(rec.initialised && rec.resubmit.is_empty());
    assert_eq!(rec.next_avail, 7);
    assert!(!t2.region().is_marked(3));
    t2.on_pop(3);
    t2.region().version().store(9, Ordering::Relaxed);
    let rec = tracker(&f, RING).recover(RING, 7).unwrap();
    assert!(rec.initialised && rec.resubmit.is_empty());
}

#[test]
fn a_ring_larger_than_the_area_is_not_tracked() {
    let f = area(8);
    let mut t = tracker(&f, 8);
    assert!(t.recover(16, 0).is_none());
    t.on_pop(3);
    t.before_used(3);
    assert!(!t.region().is_marked(3));
}

#[test]
fn garbage_in_the_area_gives_a_bounded_valid_resubmission() {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(15);
    for round in 0..200 {
        let f = area(RING);
        let t = tracker(&f, RING);
        let r = t.region();
        for off in 0..stride(RING) {
            r.at::<AtomicU8>(off).store(rng.gen(), Ordering::Relaxed);
        }
        if round % 2 == 0 {
            // Keep the header readable so the walk and the scan run on garbage.
            r.version().store(VERSION, Ordering::Relaxed);
            r.desc_num_field().store(RING, Ordering::Relaxed);
        }
        let ring_size = [RING, RING / 2, 1][round % 3];
        let used: u16 = rng.gen();
        let mut t = tracker(&f, RING);
        let rec = t.recover(ring_size, used).unwrap();
        let mut seen = rec.resubmit.clone();
        seen.sort_unstable();
        seen.dedup();
        assert_eq!(seen.len(), rec.resubmit.len(), "no head twice");
        assert!(rec.resubmit.iter().all(|&h| h < ring_size));
        assert_eq!(rec.next_avail, used.wrapping_add(rec.resubmit.len() as u16));
        assert_eq!(t.region().region_used_idx(), used);
    }
}

#[test]
fn mapping_checks_sizes_offsets_and_the_file() {
    let (file, size) = InflightArea::create(2, 128).unwrap();
    let regions = 2 * stride(128) as u64;
    assert_eq!(
        size,
        regions + super::STATE_LEN as u64,
        "the regions and the device state"
    );
    assert_eq!(stride(128), 2112);
    assert!(InflightArea::map(&file, size, 0, 2, 128).is_ok());
    assert!(
        InflightArea::map(&file, regions, 0, 2, 128).is_ok(),
        "no state: still valid"
    );
    assert!(
        InflightArea::map(&file, regions - 1, 0, 2, 128).is_err(),
        "too small"
    );
    assert!(
        InflightArea::map(&file, size, 0, 5, 128).is_err(),
        "more queues than bytes"
    );
    assert!(
        InflightArea::map(&file, size, 4096, 2, 128).is_err(),
        "beyond the file"
    );
    assert!(
        InflightArea::map(&file, size, 100, 2, 128).is_err(),
        "unaligned"
    );
    assert!(InflightArea::map(&file, size, 0, 0, 128).is_err());
    assert!(InflightArea::map(&file, u64::MAX, 0, 2, 128).is_err());
    let a = Arc::new(InflightArea::map(&file, size, 0, 2, 128).unwrap());
    assert!(a.queue(1).is_some() && a.queue(2).is_none());
}

#[test]
fn a_resubmitted_chain_outside_guest_ram_is_refused() {
    let m = mem();
    let vq = MockSplitQueue::new(&m, RING);
    // Points just above guest RAM, where the scratch ring lives.
    let d = RawDescriptor::from(SplitDescriptor::new(0x20_0000, 16, 0, 0));
    vq.add_desc_chains(&[d], 0).unwrap();
    let mut s = Scratch::new(&m, vq.desc_table_addr().0, RING, &[0]).unwrap();
    let chains = s.chains();
    assert_eq!(chains.len(), 1);
    assert!(!within_guest_ram(&chains[0], &m));
}

#[test]
fn the_gated_queue_waits_for_every_started_request_queue_and_the_last_one_wakes_it() {
    let g = RecoveryGate::new(64);
    assert!(g.may_pass(), "nothing started: open");
    g.starting(2);
    g.starting(3);
    assert!(!g.may_pass(), "two request queues still to recover");
    assert!(!g.done(2), "one left: no wake-up yet");
    assert!(!g.may_pass());
    assert!(g.done(3), "the last one wakes the waiting queue");
    assert!(!g.done(3), "once");
    assert!(g.may_pass());
    // Stopped or never-started queues do not hold it shut; nobody waiting, nobody woken.
    g.starting(5);
    assert!(!g.done(4));
    assert!(!g.done(5), "open again but nobody was waiting");
    assert!(g.may_pass());
    g.starting(63);
    g.starting(64); // beyond the device's queues: nothing to wait for
    assert!(!g.may_pass());
    assert!(g.done(63));
    g.clear();
    assert!(g.may_pass(), "a reset forgets everything");
}

#[test]
fn at_128_queues_every_request_queue_holds_the_gate() {
    // virtio-scsi with 128 request queues: vrings 2..130. The gate used a u64 mask and let
    // the control queue pass while vrings 64 and up were still to recover.
    let g = RecoveryGate::new(130);
    for q in 2..130 {
        g.starting(q);
    }
    for q in 2..129 {
        assert!(!g.done(q) || q == 128, "queue {q} does not open it");
        assert!(!g.may_pass(), "queue 129 still to recover (after {q})");
    }
    assert!(
        g.done(129),
        "the last queue, past 64, wakes the waiting control queue"
    );
    assert!(g.may_pass());
    // Concurrently, across word boundaries.
    for _ in 0..100 {
        let g = Arc::new(RecoveryGate::new(130));
        for q in 2..130 {
            g.starting(q);
        }
        assert!(!g.may_pass());
        let workers: Vec<_> = (0..4)
            .map(|k| {
                let g = g.clone();
                std::thread::spawn(move || {
                    (2..130)
                        .filter(|q| q % 4 == k)
                        .filter(|&q| g.done(q))
                        .count()
                })
            })
            .collect();
        let wakes: usize = workers.into_iter().map(|w| w.join().unwrap()).sum();
        assert_eq!(wakes, 1, "exactly one wake-up");
        assert!(g.may_pass());
    }
}

#[test]
fn the_gate_wakes_exactly_once_under_concurrent_recoveries() {
    for _ in 0..200 {
        let g = Arc::new(RecoveryGate::new(10));
        for q in 2..10 {
            g.starting(q);
        }
        let waiter = {
            let g = g.clone();
            std::thread::spawn(move || g.may_pass())
        };
        let workers: Vec<_> = (2..10)
            .map(|q| {
                let g = g.clone();
                std::thread::spawn(move || g.done(q))
            })
            .collect();
        let wakes = workers
            .into_iter()
            .map(|w| w.join().unwrap())
            .filter(|&w| w)
            .count();
        let passed = waiter.join().unwrap();
        // Either the waiter found the gate open, or exactly one recovery woke it (both is a
        // spurious wake-up, harmless: the woken queue then finds nothing to wait for).
        assert!(passed || wakes == 1, "passed {passed}, wakes {wakes}");
        assert!(wakes <= 1);
        assert!(g.may_pass());
    }
}
