//! What the fuzz targets share: a reader of the fuzzer's bytes, guest memory with a hole in it,
//! an adversarial split ring (every descriptor, flag and index from the input, indirect tables
//! in guest memory the input fills) and the check that a request wrote nothing outside the
//! chain's device-writable buffers.
//!
//! Input layout of [`pop_chain`] (`make_seeds.py` writes seeds in it): head index (1 byte), then
//! 16 descriptors of (selector: 1 byte; address: 8 bytes if the selector's bit 7 is set, else 2
//! bytes times 4; length: 4 bytes if bit 6 is set, else 2; flags: 1 byte, low 3 bits; next: 1
//! byte), then up to 4 KiB copied to guest addresses 0x1000 and 0x20000.

use std::cell::RefCell;
use std::sync::OnceLock;

use virtio_queue::desc::{split::Descriptor as SplitDescriptor, RawDescriptor};
use virtio_queue::mock::MockSplitQueue;
use virtio_queue::{Queue, QueueT};
use vm_memory::{Bytes, GuestAddress, GuestMemoryMmap};

use vhost_blk::device::{load_chain, Chain, ChainLimits, GuestBufs, Outcome};

/// Descriptors in the ring.
pub const QUEUE_SIZE: u16 = 16;
/// Where the input's data goes in each region.
pub const DATA_AT: [u64; 2] = [0x1000, 0x20000];
/// Bytes of input data copied to each of [`DATA_AT`].
pub const DATA_LEN: usize = 0x1000;

/// The fuzzer's bytes, read front to back; zeros once they run out.
pub struct Input<'a>(&'a [u8]);

impl<'a> Input<'a> {
    pub fn new(data: &'a [u8]) -> Self {
        Self(data)
    }
    pub fn take(&mut self, n: usize) -> &'a [u8] {
        let (a, b) = self.0.split_at(n.min(self.0.len()));
        self.0 = b;
        a
    }
    fn array<const N: usize>(&mut self) -> [u8; N] {
        let mut b = [0u8; N];
        let t = self.take(N);
        b[..t.len()].copy_from_slice(t);
        b
    }
    pub fn u8(&mut self) -> u8 {
        self.array::<1>()[0]
    }
    pub fn u16(&mut self) -> u16 {
        u16::from_le_bytes(self.array())
    }
    pub fn u32(&mut self) -> u32 {
        u32::from_le_bytes(self.array())
    }
    pub fn u64(&mut self) -> u64 {
        u64::from_le_bytes(self.array())
    }
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
    pub fn rest(&mut self) -> &'a [u8] {
        self.take(self.0.len())
    }
}

/// Bytes in each of the two guest RAM regions.
const REGION: usize = 0x10000;

/// Guest RAM of two 64 KiB regions with a hole between them: [0, 0x10000) and
/// [0x20000, 0x30000), all zeros. One mapping per process, zeroed for every input: a fresh
/// mapping per input (and fresh snapshot buffers) spent most of the run in the kernel's page
/// fault path (perf, 2026-12-05), not in the code under test.
pub fn guest_memory() -> &'static GuestMemoryMmap<()> {
    static MEM: OnceLock<GuestMemoryMmap<()>> = OnceLock::new();
    static ZEROS: [u8; REGION] = [0; REGION];
    let mem = MEM.get_or_init(|| {
        GuestMemoryMmap::from_ranges(&[(GuestAddress(0), REGION), (GuestAddress(0x20000), REGION)])
            .expect("two small anonymous mappings")
    });
    for at in [0, 0x20000] {
        mem.write_slice(&ZEROS, GuestAddress(at)).expect("region");
    }
    mem
}
/// Limits no chain exceeds: what a personality accepted, `load_chain` with these accepts too
/// (for the writable length a completion may report).
pub fn any_chain() -> ChainLimits {
    ChainLimits {
        seg_max: u32::MAX,
        max_bytes: u64::MAX,
        max_descs: usize::MAX,
    }
}

thread_local! {
    /// All of guest RAM as it was before a request (see [`snapshot_before`]), and a buffer for
    /// it after, allocated once.
    static SNAPSHOTS: RefCell<(Vec<u8>, Vec<u8>)> =
        RefCell::new((vec![0; 2 * REGION], vec![0; 2 * REGION]));
}

fn snapshot_into(mem: &GuestMemoryMmap<()>, v: &mut [u8]) {
    let (a, b) = v.split_at_mut(REGION);
    mem.read_slice(a, GuestAddress(0)).expect("region 0");
    mem.read_slice(b, GuestAddress(0x20000)).expect("region 1");
}

/// Copies all of guest RAM aside, for [`assert_only_writable_changed`] to compare against.
pub fn snapshot_before(mem: &GuestMemoryMmap<()>) {
    SNAPSHOTS.with_borrow_mut(|(before, _)| snapshot_into(mem, before));
}

/// Asserts that every byte of guest RAM that changed since [`snapshot_before`] lies in
/// `writable` (offsets as [`writable_ranges`] gives them).
pub fn assert_only_writable_changed(mem: &GuestMemoryMmap<()>, writable: &[(usize, usize)]) {
    SNAPSHOTS.with_borrow_mut(|(before, after)| {
        snapshot_into(mem, after);
        assert_only_writable_differ(before, after, writable);
    });
}

/// Device-writable guest ranges of `chain` as offsets into a [`snapshot`] (a range that is not
/// guest RAM is left out: nothing may be written there anyway).
pub fn writable_ranges(chain: &Chain<'_>) -> Vec<(usize, usize)> {
    chain
        .clone()
        .filter(|d| d.is_write_only())
        .filter_map(|d| {
            let (a, len) = (d.addr().0, u64::from(d.len()));
            let end = a.checked_add(len)?;
            let off = match a {
                0..0x10000 if end <= 0x10000 => a,
                0x20000..0x30000 if end <= 0x30000 => a - 0x10000,
                _ => return None,
            };
            Some((off as usize, (off + len) as usize))
        })
        .collect()
}

/// Asserts that every byte that differs between `before` and `after` lies in `writable`.
fn assert_only_writable_differ(before: &[u8], after: &[u8], writable: &[(usize, usize)]) {
    // 256-byte chunks compared whole first (one memcmp each): byte by byte, every comparison
    // would be a libFuzzer compare hook, and 128 Ki of them per input dominated the run time.
    const CHUNK: usize = 256;
    for (c, (a, b)) in before.chunks(CHUNK).zip(after.chunks(CHUNK)).enumerate() {
        if a == b {
            continue;
        }
        for (k, (x, y)) in a.iter().zip(b).enumerate() {
            let i = c * CHUNK + k;
            if x != y {
                assert!(
                    writable.iter().any(|&(s, e)| (s..e).contains(&i)),
                    "byte {i:#x} outside the writable buffers changed ({x:#x} -> {y:#x}); writable {writable:x?}"
                );
            }
        }
    }
}

/// Writes the ring the input describes (see the module documentation) into `mem`, with its
/// avail index at 1, and pops the chain at its head as a worker would.
pub fn pop_chain<'m>(mem: &'m GuestMemoryMmap<()>, input: &mut Input<'_>) -> Option<Chain<'m>> {
    let vq = MockSplitQueue::new(mem, QUEUE_SIZE);
    let head = u16::from(input.u8()) % QUEUE_SIZE;
    for i in 0..QUEUE_SIZE {
        let sel = input.u8();
        let addr = if sel & 0x80 != 0 {
            input.u64()
        } else {
            u64::from(input.u16()) << 2
        };
        let len = if sel & 0x40 != 0 {
            input.u32()
        } else {
            u32::from(input.u16())
        };
        let flags = u16::from(input.u8() & 0x7);
        let next = u16::from(input.u8());
        let d = SplitDescriptor::new(addr, len, flags, next);
        vq.desc_table().store(i, RawDescriptor::from(d)).ok()?;
    }
    let data = input.take(DATA_LEN);
    for at in DATA_AT {
        mem.write_slice(data, GuestAddress(at)).ok()?;
    }
    vq.avail().ring().ref_at(0).ok()?.store(head);
    vq.avail().idx().store(1);
    let mut q: Queue = vq.create_queue().ok()?;
    q.pop_descriptor_chain(mem)
}

/// The ring targets' common check: pops a chain from `input` into fresh guest memory, hands it
/// to `process`, and asserts that the used length stays within the chain's writable bytes and
/// that nothing outside its device-writable buffers changed. Nothing to do when the input
/// makes no chain.
pub fn process_checked<K>(
    input: &mut Input<'_>,
    process: impl for<'m> FnOnce(Chain<'m>) -> Outcome<K>,
) {
    let mem = guest_memory();
    let Some(chain) = pop_chain(mem, input) else {
        return;
    };
    let writable_len = {
        let mut bufs = GuestBufs::empty();
        if load_chain(&mut bufs, &chain, &any_chain()) {
            bufs.writable_len()
        } else {
            0
        }
    };
    let writable = writable_ranges(&chain);
    snapshot_before(mem);
    if let Outcome::Complete { used_len, .. } = process(chain) {
        assert!(
            used_len as usize <= writable_len,
            "used {used_len} > {writable_len}"
        );
    }
    assert_only_writable_changed(mem, &writable);
}
