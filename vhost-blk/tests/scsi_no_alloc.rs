//! The per-request path allocates nothing: a counting global allocator (counting only on the
//! thread that asks for it) around the work a queue worker does for each request, from a popped
//! descriptor chain to the completion handed to the engine and published:
//! chain validation, the personality (virtio-scsi framing and SCSI emulation, or virtio-blk),
//! the storage, and the queue's completion engine and statistics.
//!
//! Commands covered: virtio-scsi READ(10), READ(16), WRITE(10), WRITE(16), TEST UNIT READY, a
//! READ out of range (CHECK CONDITION with sense data), an absent target (BAD_TARGET); virtio-blk
//! reads and writes. Both with a pass-through completion model and with a 10 us MSI-X latency
//! (completions held by the engine, then flushed).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::{Arc, Mutex};

use vhost_blk::blk::{BlkOptions, BlkPersonality};
use vhost_blk::device::chain::GuestMemoryMmapT;
use vhost_blk::device::queue::QueueState;
use vhost_blk::device::{Chain, Outcome, Personality, RequestKind};
use vhost_blk::scsi::{ScsiOptions, ScsiPersonality};
use vhost_blk_completion::{CompletionModel, Distribution};
use vhost_blk_frontend::scsi::lun_address;
use vhost_blk_scsi::emulation::Topology;
use vhost_blk_scsi::topology::compact::parse_topology;
use vhost_blk_stats::QueueStats;
use vhost_blk_storage::NullStorage;
use virtio_queue::desc::{split::Descriptor as SplitDescriptor, RawDescriptor};
use virtio_queue::QueueT;
use vm_memory::{Bytes, GuestAddress, GuestMemoryMmap};

/// Counts allocations of the threads that enabled counting.
struct Counting;

thread_local! {
    /// `Some(n)`: counting is on for this thread, `n` allocations so far.
    static ALLOCS: Cell<Option<u64>> = const { Cell::new(None) };
}

fn count_one() {
    let _ = ALLOCS.try_with(|c| {
        if let Some(n) = c.get() {
            c.set(Some(n + 1));
        }
    });
}

// SAFETY: every call is forwarded to the system allocator unchanged; the counter is a
// thread-local Cell without a destructor, so counting never allocates nor re-enters.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count_one();
        // SAFETY: same contract as ours.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count_one();
        // SAFETY: same contract as ours.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count_one();
        // SAFETY: same contract as ours.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as ours.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Allocations made by `f` on this thread.
fn allocations_of(f: impl FnOnce()) -> u64 {
    ALLOCS.with(|c| c.set(Some(0)));
    f();
    ALLOCS.with(|c| c.replace(None)).unwrap_or(0)
}

const F_NEXT: u16 = 1;
const F_WRITE: u16 = 2;
/// Where the request buffers live (the mock rings use the first pages).
const HDR: u64 = 0x10000;
const RESP: u64 = 0x11000;
const DATA: u64 = 0x12000;

fn mem() -> GuestMemoryMmapT {
    GuestMemoryMmap::from_ranges(&[(GuestAddress(0), 1 << 20)]).unwrap()
}

/// Puts `descs` (address, length, flags) in a fresh mock split queue and pops the chain.
fn chain<'m>(mem: &'m GuestMemoryMmapT, descs: &[(u64, u32, u16)]) -> Chain<'m> {
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

/// A queue state fed without a vring (publication goes to the engine and statistics only).
fn queue_state<K: RequestKind>(msix: Distribution) -> QueueState {
    let model = CompletionModel {
        msix,
        ..CompletionModel::default()
    };
    // As a queue's first request does (QueueState::submit): the histograms are allocated once,
    // before the requests this test counts.
    let mut st = QueueStats::new(0, K::NAMES);
    st.prepare();
    QueueState::new(2, Some(0), &model, Arc::new(Mutex::new(st)))
}

/// What the worker does with one chain, as `DeviceBackend::process_queue` does it.
fn serve<P: Personality>(p: &P, state: &mut QueueState, queue: usize, c: Chain<'_>) -> u32 {
    let head = c.head_index();
    let Outcome::Complete {
        used_len,
        kind,
        bytes,
        extra_delay_ns,
    } = p.process(queue, c)
    else {
        panic!("request held");
    };
    let (r, w) = kind.payload(bytes);
    state.submit(head, used_len, kind.index(), r, w, extra_delay_ns);
    state.publish(true, || false);
    // Held completions (the MSI-X latency model) are published as the timer would.
    state.flush(true);
    used_len
}

/// A virtio-scsi command: request header (LUN field, CDB), response, data.
fn scsi_chain<'m>(mem: &'m GuestMemoryMmapT, lun: [u8; 8], cdb: &[u8], write: bool) -> Chain<'m> {
    let mut hdr = [0u8; 19 + 32];
    hdr[..8].copy_from_slice(&lun);
    hdr[19..19 + cdb.len()].copy_from_slice(cdb);
    mem.write_slice(&hdr, GuestAddress(HDR)).unwrap();
    let data_flags = if write { 0 } else { F_WRITE };
    if write {
        // Data-out comes before the response.
        chain(
            mem,
            &[
                (HDR, hdr.len() as u32, 0),
                (DATA, 4096, 0),
                (RESP, 12 + 96, F_WRITE),
            ],
        )
    } else {
        chain(
            mem,
            &[
                (HDR, hdr.len() as u32, 0),
                (RESP, 12 + 96, F_WRITE),
                (DATA, 4096, data_flags),
            ],
        )
    }
}

fn cdb10(op: u8, lba: u32, blocks: u16) -> Vec<u8> {
    let mut c = vec![op, 0, 0, 0, 0, 0, 0, 0, 0, 0];
    c[2..6].copy_from_slice(&lba.to_be_bytes());
    c[7..9].copy_from_slice(&blocks.to_be_bytes());
    c
}

fn cdb16(op: u8, lba: u64, blocks: u32) -> Vec<u8> {
    let mut c = vec![0u8; 16];
    c[0] = op;
    c[2..10].copy_from_slice(&lba.to_be_bytes());
    c[10..14].copy_from_slice(&blocks.to_be_bytes());
    c
}

/// CDB, LUN field, is a write, expected response byte, expected SCSI status.
type Command = (Vec<u8>, [u8; 8], bool, u8, u8);

fn scsi_commands() -> Vec<Command> {
    let (lun, absent) = (lun_address(0, 0), lun_address(5, 0));
    vec![
        (cdb10(0x28, 8, 8), lun, false, 0, 0),            // READ(10)
        (cdb16(0x88, 800, 8), lun, false, 0, 0),          // READ(16)
        (cdb10(0x2a, 16, 8), lun, true, 0, 0),            // WRITE(10)
        (cdb16(0x8a, 1600, 8), lun, true, 0, 0),          // WRITE(16)
        (vec![0; 6], lun, false, 0, 0),                   // TEST UNIT READY
        (cdb16(0x88, u64::MAX - 4, 8), lun, false, 0, 2), // READ past the end: CHECK CONDITION
        (cdb10(0x28, 0, 8), absent, false, 3, 0),         // absent target: BAD_TARGET
    ]
}

fn scsi_personality() -> ScsiPersonality {
    let cfg = parse_topology("targets=1,luns=1,storage=null:64M").unwrap();
    let topology = Arc::new(Topology::from_config(&cfg).unwrap());
    ScsiPersonality::new(
        topology,
        ScsiOptions {
            num_queues: 1,
            queue_size: 16,
            cmd_per_lun: 16,
        },
    )
}

fn run_scsi(msix: Distribution) {
    let m = mem();
    let p = scsi_personality();
    let mut state = queue_state::<vhost_blk::scsi::virtio::ScsiKind>(msix);
    let cmds = scsi_commands();
    let mut total = 0;
    for round in 0..200 {
        for (cdb, lun, write, response, status) in &cmds {
            let c = scsi_chain(&m, *lun, cdb, *write);
            let mut used = 0;
            let n = allocations_of(|| used = serve(&p, &mut state, 2, c));
            assert!(used >= 12, "{cdb:x?}: used length {used}");
            let mut resp = [0u8; 12];
            m.read_slice(&mut resp, GuestAddress(RESP)).unwrap();
            assert_eq!((resp[11], resp[10]), (*response, *status), "{cdb:x?}");
            // The first round may meet one-time initialisation (log call sites).
            if round > 0 {
                total += n;
                assert_eq!(n, 0, "{cdb:x?}: {n} allocations for one request");
            }
        }
    }
    assert_eq!(total, 0);
}

#[test]
fn scsi_requests_do_not_allocate() {
    run_scsi(Distribution::Fixed(0));
}

#[test]
fn scsi_requests_held_by_the_latency_model_do_not_allocate() {
    run_scsi(Distribution::Fixed(10_000));
}

#[test]
fn blk_requests_do_not_allocate() {
    let m = mem();
    let p = BlkPersonality::new(
        Arc::new(NullStorage::new(64 << 20)),
        BlkOptions {
            num_queues: 1,
            queue_size: 16,
            block_size: 512,
            serial: "s".into(),
            writethrough: false,
        },
    );
    let mut state = queue_state::<vhost_blk::blk::BlkKind>(Distribution::Fixed(10_000));
    for round in 0..200u64 {
        for write in [false, true] {
            // virtio_blk_outhdr: type (0 in, 1 out), reserved, sector.
            let mut hdr = [0u8; 16];
            hdr[0] = u8::from(write);
            hdr[8..].copy_from_slice(&(round * 8).to_le_bytes());
            m.write_slice(&hdr, GuestAddress(HDR)).unwrap();
            let data = if write { 0 } else { F_WRITE };
            let c = chain(&m, &[(HDR, 16, 0), (DATA, 4096, data), (RESP, 1, F_WRITE)]);
            let mut used = 0;
            let n = allocations_of(|| used = serve(&p, &mut state, 0, c));
            assert!(used >= 1);
            assert_eq!(
                m.read_obj::<u8>(GuestAddress(RESP)).unwrap(),
                0,
                "status OK"
            );
            if round > 0 {
                assert_eq!(n, 0, "write={write}: {n} allocations for one request");
            }
        }
    }
}

#[test]
fn the_counter_counts() {
    // The check above cannot pass vacuously: an allocation on this thread is seen.
    let n = allocations_of(|| drop(std::hint::black_box(vec![1u8; 64])));
    assert_eq!(n, 1);
}
