//! Every modifying O_DIRECT operation on shared blocks, from eight threads standing in for
//! eight queues (storage/ranges.rs): 512-byte writes (a read-modify-write of their block),
//! aligned 4 KiB writes, three-sector writes across a block boundary (what SCSI WRITE SAME
//! hands the storage), WRITE ZEROES with and without unmap, and discards, seeded, on 16 blocks.
//! Every 100 operations per thread the threads meet and the image is checked against a model
//! of what completed: each sector must hold the bytes of an operation that covered it and that
//! no operation started after it completed has superseded. A sector holding anything else is a
//! completed write lost. Before one range lock covered every operation (only the bounce path
//! was locked), a read-modify-write put old sectors back over completed zeroes and writes.
//!
//! `VB_MIXED_OPS` sets the total (default 100,000); the figure is printed.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier, Mutex};

use vhost_blk_storage::{FileStorage, Storage, StorageError};

const THREADS: usize = 8;
const BLOCKS: u64 = 16;
const SECTORS: u64 = BLOCKS * 8;
const ROUND: usize = 100;

#[derive(Clone, Copy, Debug)]
enum Op {
    Sector,
    Block,
    Same,
    Zeroes(bool),
    Discard,
}

#[derive(Clone, Debug)]
struct Done {
    id: u64,
    first: u64,
    count: u64,
    zero: bool,
    start: u64,
    end: u64,
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        // xorshift64*
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn stamp(id: u64, sector: u64) -> [u8; 512] {
    let mut s = [0u8; 512];
    for (i, c) in s.chunks_mut(16).enumerate() {
        c[..8].copy_from_slice(&id.to_le_bytes());
        c[8..16].copy_from_slice(&(sector ^ ((i as u64) << 48) | (1 << 63)).to_le_bytes());
    }
    s
}

/// The operation whose bytes a sector holds: `Some(id)`, `None` for zeros; `Err` for neither.
fn decode(s: &[u8], sector: u64) -> Result<Option<u64>, ()> {
    if s.iter().all(|&b| b == 0) {
        return Ok(None);
    }
    let id = u64::from_le_bytes(s[..8].try_into().unwrap());
    if s == stamp(id, sector) {
        Ok(Some(id))
    } else {
        Err(())
    }
}

/// 4 KiB-aligned bytes (O_DIRECT takes aligned buffers without the bounce).
fn aligned(data: &[u8], f: impl FnOnce(&[u8])) {
    let mut v = vec![0u8; data.len() + 4096];
    let at = v.as_ptr().align_offset(4096);
    v[at..at + data.len()].copy_from_slice(data);
    f(&v[at..at + data.len()]);
}

fn run_op(s: &FileStorage, op: Op, id: u64, rng: &mut Rng) -> (u64, u64, bool) {
    let (first, count, zero) = match op {
        Op::Sector => (rng.below(SECTORS), 1, false),
        Op::Block => (rng.below(BLOCKS) * 8, 8, false),
        Op::Same => (rng.below(BLOCKS - 1) * 8 + 6, 3, false),
        Op::Zeroes(_) => (rng.below(SECTORS - 4), 1 + rng.below(4), true),
        Op::Discard => (rng.below(BLOCKS) * 8, 8, true),
    };
    let data: Vec<u8> = (first..first + count).flat_map(|x| stamp(id, x)).collect();
    let r = match op {
        Op::Sector | Op::Same => s.write_at(&data, first * 512),
        Op::Block => {
            let mut r = Ok(());
            aligned(&data, |d| r = s.write_at(d, first * 512));
            r
        }
        Op::Zeroes(unmap) => s.write_zeroes(first * 512, count * 512, unmap),
        Op::Discard => s.discard(first * 512, count * 512),
    };
    r.unwrap();
    (first, count, zero)
}

/// Sectors whose bytes are not those of an unsuperseded completed operation. `ops[x]` holds
/// the operations covering sector `x` that may still be its content; superseded ones (an
/// operation covering the sector started after they completed) are dropped after the check.
fn lost(s: &FileStorage, ops: &mut [Vec<Done>], new: Vec<Done>) -> Vec<(u64, String)> {
    for d in new {
        for x in d.first..d.first + d.count {
            ops[x as usize].push(d.clone());
        }
    }
    let mut img = vec![0u8; (SECTORS * 512) as usize];
    s.read_at(&mut img, 0).unwrap();
    let mut bad = Vec::new();
    for x in 0..SECTORS {
        let covering = &mut ops[x as usize];
        let latest_start = covering.iter().map(|o| o.start).max().unwrap_or(0);
        // An operation may be the sector's if none covering it started after it completed.
        covering.retain(|d| d.end > latest_start);
        let got = decode(&img[(x * 512) as usize..][..512], x);
        let ok = match got {
            Ok(Some(id)) => covering.iter().any(|d| d.id == id && !d.zero),
            Ok(None) => latest_start == 0 || covering.iter().any(|d| d.zero),
            Err(()) => false,
        };
        if !ok {
            bad.push((x, format!("{got:?}")));
        }
    }
    bad
}

#[test]
fn mixed_direct_operations_on_shared_blocks_lose_no_completed_write() {
    let total: usize = std::env::var("VB_MIXED_OPS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000);
    let rounds = total.div_ceil(THREADS * ROUND);
    // Not the temp dir: it is often a tmpfs.
    let target = concat!(env!("CARGO_MANIFEST_DIR"), "/../target");
    std::fs::create_dir_all(target).unwrap();
    let dir = tempfile::tempdir_in(target).unwrap();
    let s = match FileStorage::open(&dir.path().join("m.img"), Some(SECTORS * 512), true, false) {
        Ok(s) => Arc::new(s),
        Err(StorageError::Open { .. } | StorageError::Create { .. }) => {
            eprintln!("no O_DIRECT in {target}: nothing to test");
            return;
        }
        Err(e) => panic!("{e}"),
    };
    let clock = Arc::new(AtomicU64::new(1));
    let done = Arc::new(Mutex::new(Vec::<Done>::new()));
    let barrier = Arc::new(Barrier::new(THREADS + 1));
    let threads: Vec<_> = (0..THREADS)
        .map(|t| {
            let (s, clock, done, barrier) =
                (s.clone(), clock.clone(), done.clone(), barrier.clone());
            std::thread::spawn(move || {
                let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ ((t as u64 + 1) * 0x1000_0001));
                for _ in 0..rounds {
                    for _ in 0..ROUND {
                        let op = match rng.below(10) {
                            0..=3 => Op::Sector,
                            4 | 5 => Op::Block,
                            6 => Op::Same,
                            7 => Op::Zeroes(false),
                            8 => Op::Zeroes(true),
                            _ => Op::Discard,
                        };
                        let start = clock.fetch_add(1, Ordering::SeqCst);
                        let (first, count, zero) = run_op(&s, op, start, &mut rng);
                        let end = clock.fetch_add(1, Ordering::SeqCst);
                        let d = Done {
                            id: start,
                            first,
                            count,
                            zero,
                            start,
                            end,
                        };
                        done.lock().unwrap().push(d);
                    }
                    barrier.wait(); // the checker reads
                    barrier.wait(); // and lets go
                }
            })
        })
        .collect();
    let mut lost_total = Vec::new();
    let mut per_sector = vec![Vec::new(); SECTORS as usize];
    let mut ops = 0;
    for _ in 0..rounds {
        barrier.wait();
        let new = std::mem::take(&mut *done.lock().unwrap());
        ops += new.len();
        lost_total.extend(lost(&s, &mut per_sector, new));
        barrier.wait();
    }
    for t in threads {
        t.join().unwrap();
    }
    println!(
        "MIXED-DIRECT-RESULT {{\"threads\": {THREADS}, \"blocks\": {BLOCKS}, \"operations\": {ops}, \"checks\": {}, \"lost_sectors\": {}}}",
        rounds * SECTORS as usize,
        lost_total.len()
    );
    assert!(ops >= total);
    assert!(
        lost_total.is_empty(),
        "{} sector checks found a completed write lost (first: {:?})",
        lost_total.len(),
        &lost_total[..lost_total.len().min(5)]
    );
}
