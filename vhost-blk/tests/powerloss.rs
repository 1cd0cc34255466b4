//! The power-loss simulator (docs/data-guarantees.md, "Power loss"), in the manner of
//! CrashMonkey / dm-log-writes: the real backend records its own `pwritev`, `fallocate` and
//! `fdatasync` calls (`--syscall-trace`, storage/trace.rs) while the in-process frontend drives
//! a seeded workload on four queues and notes, on the host's monotonic clock, when each request
//! was submitted and acknowledged. Afterwards, crash states are built from the trace: for a
//! crash between two records, every write recorded before the start of the last `fdatasync`
//! that completed is on the disk; any subset of the later ones may be, each whole, absent, or
//! torn at the trace's sector size (512 through the page cache, 4096 with O_DIRECT). In every
//! state, every sector the guest was promised must hold the promised write or a later one to
//! the same block: a promise is a write acknowledged before a FLUSH that was submitted after it
//! and acknowledged before the crash, or, in write-through mode, any acknowledged write.
//!
//! After the seeded states, a sweep: the fewest writes a crash may keep (the durable prefix
//! only) at every record of the trace, so that a promise broken in one narrow window between
//! two records is not left to chance. One more mode switches virtio-blk's write cache off a
//! third of the way in, with every queue writing (blk/personality.rs `set_config`): once the
//! switch is acknowledged every acknowledged write is promised. With the switch's old order
//! (flush, then store) this finds violating states; the config write waits for the backend's
//! REPLY_ACK, as QEMU's does (without that wait the frontend would believe the switch done
//! before the backend had stored it, and the check would blame the backend).
//!
//! The same check must fail on a backend whose flush does nothing (`--test-fault no-flush`,
//! found in the first 10 states) and on one that acknowledges a write before it reaches the
//! file (`--test-fault early-ack`). `--mem` has no durability at all and is not simulated.
//!
//! Figures: `VB_POWERLOSS_STATES` (default 1000 per mode), `VB_POWERLOSS_OPS` (default 400
//! requests per mode); every run prints `POWERLOSS-RESULT {json}` lines.

mod common;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use common::disk::Kind;
use common::Backend;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use vhost_blk_storage::trace::{monotonic_ns, Trace, TraceKind, TraceRecord};

const QUEUES: usize = 4;
const BLOCKS: u64 = 64;
const SECTOR: usize = 512;

/// What the frontend saw of one request.
#[derive(Debug, Clone)]
enum Seen {
    /// A write of sectors `first..first + count` of `block`, the block's `seq`-th write.
    Write {
        block: u64,
        first: u64,
        count: u64,
        seq: u64,
        ack: u64,
        ok: bool,
    },
    Flush {
        submit: u64,
        ack: u64,
        ok: bool,
    },
    /// The guest turned the write cache off (virtio-blk config write of `writeback = 0`).
    SwitchOff {
        ack: u64,
    },
}

/// The write cache as the workload has it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cache {
    Back,
    Through,
    /// Write-back, turned off by the guest a third of the way in, while every queue writes.
    SwitchedOff,
}

impl Cache {
    fn name(self) -> &'static str {
        match self {
            Cache::Back => "write-back",
            Cache::Through => "write-through",
            Cache::SwitchedOff => "switched-off",
        }
    }
}

/// A sector's stamp: which block, which write of it, which sector.
fn stamp(block: u64, seq: u64, sector: u64) -> [u8; SECTOR] {
    let mut s = [0u8; SECTOR];
    for (i, c) in s.chunks_mut(32).enumerate() {
        c[..8].copy_from_slice(b"VBPWRLSS");
        c[8..16].copy_from_slice(&block.to_le_bytes());
        c[16..24].copy_from_slice(&seq.to_le_bytes());
        c[24..32].copy_from_slice(&(sector ^ (i as u64) << 40).to_le_bytes());
    }
    s
}

/// (block, seq) of a stamped sector, if it is one whole.
fn unstamp(s: &[u8], sector: u64) -> Option<(u64, u64)> {
    let block = u64::from_le_bytes(s.get(8..16)?.try_into().ok()?);
    let seq = u64::from_le_bytes(s.get(16..24)?.try_into().ok()?);
    (s == stamp(block, seq, sector)).then_some((block, seq))
}

/// Per-block: the next write number and whether a write is in flight (one at a time per
/// block, so that write numbers order the writes of a block).
struct Blocks(Mutex<Vec<(u64, bool)>>);

impl Blocks {
    fn take(&self, rng: &mut ChaCha8Rng) -> (u64, u64) {
        loop {
            let b = rng.gen_range(0..BLOCKS);
            let mut v = self.0.lock().unwrap();
            let e = &mut v[b as usize];
            if !e.1 {
                e.0 += 1;
                e.1 = true;
                return (b, e.0);
            }
        }
    }
    fn give(&self, b: u64) {
        self.0.lock().unwrap()[b as usize].1 = false;
    }
}

/// Runs the seeded workload on every queue; the requests as the frontend saw them.
fn workload(
    kind: Kind,
    socket: &std::path::Path,
    ops: usize,
    seed: u64,
    cache: Cache,
) -> Vec<Seen> {
    let mut conn = kind.connect(socket, QUEUES as u16);
    let blocks = Arc::new(Blocks(Mutex::new(vec![(0, false); BLOCKS as usize])));
    let done = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let threads: Vec<_> = (0..QUEUES)
        .map(|i| {
            let mut d = kind.queue(&mut conn, i);
            let (blocks, done) = (blocks.clone(), done.clone());
            std::thread::spawn(move || {
                let mut rng = ChaCha8Rng::seed_from_u64(seed ^ (i as u64 + 1) << 32);
                let mut seen = Vec::new();
                for _ in 0..ops / QUEUES {
                    done.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    if rng.gen_range(0..100) < 15 {
                        let submit = monotonic_ns();
                        let ok = d.flush().ok;
                        seen.push(Seen::Flush {
                            submit,
                            ack: monotonic_ns(),
                            ok,
                        });
                        continue;
                    }
                    let (block, seq) = blocks.take(&mut rng);
                    let (first, count) = if rng.gen_range(0..100) < 15 {
                        (block * 8 + rng.gen_range(0..8), 1)
                    } else {
                        (block * 8, 8)
                    };
                    let data: Vec<u8> = (first..first + count)
                        .flat_map(|x| stamp(block, seq, x))
                        .collect();
                    let ok = d.write(first, &data).ok;
                    let ack = monotonic_ns();
                    blocks.give(block);
                    seen.push(Seen::Write {
                        block,
                        first,
                        count,
                        seq,
                        ack,
                        ok,
                    });
                }
                seen
            })
        })
        .collect();
    let mut switch = Vec::new();
    if cache == Cache::SwitchedOff {
        // Mid-run, with every queue writing: the config write of virtio-blk's `writeback`.
        while done.load(std::sync::atomic::Ordering::SeqCst) < ops / 3 {
            std::thread::sleep(std::time::Duration::from_micros(200));
        }
        let offset = vhost_blk::blk::WRITEBACK_OFFSET as u32;
        conn.set_config(offset, &[0]).unwrap();
        switch.push(Seen::SwitchOff {
            ack: monotonic_ns(),
        });
    }
    threads
        .into_iter()
        .flat_map(|t| t.join().unwrap())
        .chain(switch)
        .collect()
}

/// The sectors promised at crash time `t`: sector -> (block, lowest acceptable write number).
fn promised(seen: &[Seen], t: u64, write_through: bool) -> HashMap<u64, (u64, u64)> {
    // Once the switch to write-through was acknowledged, every acknowledged write is promised:
    // those that read write-back completed before the switch's flush, the rest synced.
    let switched = seen
        .iter()
        .any(|s| matches!(s, Seen::SwitchOff { ack } if *ack < t));
    let write_through = write_through || switched;
    // The latest FLUSH submission whose acknowledgement came before the crash.
    let flushed_before = seen
        .iter()
        .filter_map(|s| match s {
            Seen::Flush {
                submit,
                ack,
                ok: true,
            } if *ack < t => Some(*submit),
            _ => None,
        })
        .max()
        .unwrap_or(0);
    let mut p: HashMap<u64, (u64, u64)> = HashMap::new();
    for s in seen {
        let Seen::Write {
            block,
            first,
            count,
            seq,
            ack,
            ok: true,
            ..
        } = *s
        else {
            continue;
        };
        if ack < flushed_before || (write_through && ack < t) {
            for x in first..first + count {
                let e = p.entry(x).or_insert((block, seq));
                e.1 = e.1.max(seq);
            }
        }
    }
    p
}

/// How a crash state treats the writes after the last completed sync.
#[derive(Debug, Clone, Copy)]
enum Pick {
    None,
    All,
    Subset,
    Torn,
}

/// The disk after a crash just before record `k`: sector -> bytes' stamp (absent: zeros).
/// For every crash point k (a crash just before record k), how many records are durable: those
/// before the start of the last sync that completed with success before k.
fn durable_prefixes(tr: &Trace) -> Vec<usize> {
    let mut starts = HashMap::new();
    let mut durable = 0;
    let mut out = vec![0];
    for (i, r) in tr.records.iter().enumerate() {
        match r.kind {
            TraceKind::SyncStart => {
                starts.insert(r.offset, i);
            }
            TraceKind::SyncEnd if r.len == 0 => {
                durable = durable.max(starts.get(&r.offset).copied().unwrap_or(0));
            }
            _ => {}
        }
        out.push(durable);
    }
    out
}

fn crash_state(
    tr: &Trace,
    (k, durable_until): (usize, usize),
    pick: Pick,
    rng: &mut ChaCha8Rng,
) -> HashMap<u64, Option<(u64, u64)>> {
    let recs = &tr.records[..k];
    let mut disk = HashMap::new();
    let unit = (tr.sector as usize / SECTOR).max(1);
    for (i, r) in recs.iter().enumerate() {
        let keep_all = i < durable_until;
        let (whole, torn) = match (keep_all, pick) {
            (true, _) | (false, Pick::All) => (true, false),
            (false, Pick::None) => (false, false),
            (false, Pick::Subset) => (rng.gen_bool(0.5), false),
            (false, Pick::Torn) => (false, true),
        };
        if !whole && !torn {
            continue;
        }
        apply(&mut disk, r, unit, |_| whole || rng.gen_bool(0.5));
    }
    disk
}

/// Applies record `r` a unit of `unit` sectors at a time, each unit if `keep` says so.
fn apply(
    disk: &mut HashMap<u64, Option<(u64, u64)>>,
    r: &TraceRecord,
    unit: usize,
    mut keep: impl FnMut(u64) -> bool,
) {
    let first = r.offset / SECTOR as u64;
    let n = (r.len as usize).div_ceil(SECTOR);
    let mut kept = true;
    for (j, x) in (first..first + n as u64).enumerate() {
        if j % unit == 0 {
            kept = keep(x);
        }
        if !kept {
            continue;
        }
        let v = match r.kind {
            TraceKind::Write => r
                .data
                .get(j * SECTOR..(j + 1) * SECTOR)
                .and_then(|s| unstamp(s, x)),
            _ => None,
        };
        disk.insert(x, v);
    }
}

/// A promised sector the crash state does not hold (the promised write or a later one).
#[derive(Debug)]
#[allow(dead_code)] // read through Debug in the failure messages
struct Violation {
    state: usize,
    crash_before_record: usize,
    sector: u64,
    want: (u64, u64),
    got: Option<(u64, u64)>,
}

/// What a mode's simulation found.
#[derive(Debug, Default)]
struct Outcome {
    states: usize,
    records: usize,
    syncs: usize,
    promised_checks: usize,
    /// States with at least one violation.
    violating_states: usize,
    /// Of `states`, those of the sweep (every record, fewest writes kept).
    sweep_states: usize,
    /// The first violations (at most 1000).
    violations: Vec<Violation>,
}

/// Checks crash state number `state` (a crash just before record `k`) against the promises.
fn check_state(
    out: &mut Outcome,
    (tr, seen, wt): (&Trace, &[Seen], bool),
    state: usize,
    k: usize,
    disk: &HashMap<u64, Option<(u64, u64)>>,
) {
    let t = tr.records.get(k).map_or(u64::MAX, |r| r.time_ns);
    let mut violated = false;
    for (x, want) in promised(seen, t, wt) {
        out.promised_checks += 1;
        let got = disk.get(&x).copied().flatten();
        let fine = matches!(got, Some((b, s)) if b == want.0 && s >= want.1);
        violated |= !fine;
        if !fine && out.violations.len() < 1000 {
            out.violations.push(Violation {
                state,
                crash_before_record: k,
                sector: x,
                want,
                got,
            });
        }
    }
    out.violating_states += usize::from(violated);
    out.states += 1;
}

/// Builds `states` crash states at seeded points from the trace and checks each against the
/// promises; then the sweep: the fewest writes a crash may keep, at every record.
fn simulate(tr: &Trace, seen: &[Seen], write_through: bool, states: usize, seed: u64) -> Outcome {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let n = tr.records.len();
    let mut out = Outcome {
        records: n,
        syncs: tr
            .records
            .iter()
            .filter(|r| r.kind == TraceKind::SyncStart)
            .count(),
        ..Outcome::default()
    };
    let durable = durable_prefixes(tr);
    for state in 0..states {
        // Crash just before record k (k = n: after the last one).
        let k = rng.gen_range(1..=n.max(1));
        let pick = [Pick::None, Pick::Torn, Pick::Subset, Pick::All][state % 4];
        let disk = crash_state(tr, (k, durable[k]), pick, &mut rng);
        check_state(&mut out, (tr, seen, write_through), state, k, &disk);
    }
    // The sweep: the durable prefix only, at every crash point, built incrementally.
    let (mut disk, mut applied) = (HashMap::new(), 0);
    let unit = (tr.sector as usize / SECTOR).max(1);
    for (k, &d) in durable.iter().enumerate().skip(1) {
        for r in &tr.records[applied..d.max(applied)] {
            apply(&mut disk, r, unit, |_| true);
        }
        applied = applied.max(d);
        let at = states + k - 1;
        check_state(&mut out, (tr, seen, write_through), at, k, &disk);
        out.sweep_states += 1;
    }
    out
}

/// One mode: the backend with `args`, the workload, the trace, the simulation.
fn run_mode(kind: Kind, direct: bool, cache: Cache, fault: Option<&str>, states: usize) -> Outcome {
    let write_through = cache == Cache::Through;
    let ops: usize = std::env::var("VB_POWERLOSS_OPS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(400);
    // O_DIRECT needs a real file system, not the temp dir's tmpfs.
    let dir = tempfile::tempdir_in(concat!(env!("CARGO_MANIFEST_DIR"), "/../target")).unwrap();
    let img = dir.path().join("disk.img");
    let trace = dir.path().join("disk.trace");
    let mut args = kind.image_args(&img, QUEUES, (direct, write_through), fault);
    let trace_s = trace.to_str().unwrap().to_string();
    args.extend(["--syscall-trace".into(), trace_s]);
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut backend = Backend::start_in(dir, &argv);
    let seed = 0x5eed_0000 + u64::from(direct) * 2 + u64::from(write_through);
    let seen = workload(kind, &backend.socket, ops, seed, cache);
    assert!(backend.signal_and_wait(libc::SIGTERM).success());
    let tr = Trace::read(&trace).unwrap();
    assert!(!tr.damaged, "the trace ends in a damaged record");
    let acked = seen
        .iter()
        .filter(|s| matches!(s, Seen::Write { ok: true, .. }))
        .count();
    assert!(
        acked > ops / 2,
        "the workload's writes completed ({acked} of {ops})"
    );
    let out = simulate(&tr, &seen, write_through, states, seed);
    println!(
        "POWERLOSS-RESULT {{\"device\": \"{}\", \"storage\": \"{}\", \"cache\": \"{}\", \"fault\": \"{}\", \"requests\": {}, \"trace_records\": {}, \"syncs\": {}, \"states\": {}, \"of_them_sweep\": {}, \"promised_sectors_checked\": {}, \"violating_states\": {}, \"first_violating_state\": {}}}",
        kind.name(),
        if direct { "file-direct" } else { "file-page-cache" },
        cache.name(),
        fault.unwrap_or("none"),
        seen.len(),
        out.records,
        out.syncs,
        out.states,
        out.sweep_states,
        out.promised_checks,
        out.violating_states,
        out.violations.first().map_or("null".to_string(), |v| v.state.to_string()),
    );
    out
}

fn states() -> usize {
    std::env::var("VB_POWERLOSS_STATES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000)
}

#[test]
fn no_promised_write_is_missing_in_any_crash_state() {
    for kind in [Kind::Blk, Kind::Scsi] {
        for direct in [false, true] {
            for cache in [Cache::Back, Cache::Through] {
                let out = run_mode(kind, direct, cache, None, states());
                assert!(out.promised_checks > 0, "the workload made promises");
                assert!(
                    out.violations.is_empty(),
                    "{} direct={direct} {}: {:?}",
                    kind.name(),
                    cache.name(),
                    &out.violations[..out.violations.len().min(3)]
                );
            }
        }
    }
}

#[test]
fn a_write_racing_with_the_switch_to_write_through_is_durable() {
    // virtio-blk's cache switched off while four queues write (blk/personality.rs set_config):
    // every write acknowledged after the switch was, and every write acknowledged before it,
    // must be in every crash state after it.
    for direct in [false, true] {
        let out = run_mode(Kind::Blk, direct, Cache::SwitchedOff, None, states());
        assert!(out.promised_checks > 0, "the workload made promises");
        assert!(
            out.violations.is_empty(),
            "direct={direct}: {:?}",
            &out.violations[..out.violations.len().min(3)]
        );
    }
}

#[test]
fn a_flush_that_does_nothing_is_found_in_the_first_10_states() {
    for kind in [Kind::Blk, Kind::Scsi] {
        for direct in [false, true] {
            for cache in [Cache::Back, Cache::Through] {
                let out = run_mode(kind, direct, cache, Some("no-flush"), 10);
                let first = out.violations.first().map(|v| v.state);
                assert!(
                    first.is_some_and(|s| s < 10),
                    "{} direct={direct} {}: not found",
                    kind.name(),
                    cache.name()
                );
            }
        }
    }
}

#[test]
fn an_acknowledgement_before_the_write_reaches_the_file_is_found() {
    for kind in [Kind::Blk, Kind::Scsi] {
        for cache in [Cache::Through, Cache::Back] {
            let out = run_mode(kind, false, cache, Some("early-ack"), 100);
            assert!(
                !out.violations.is_empty(),
                "{} {}: not found",
                kind.name(),
                cache.name()
            );
        }
    }
}
