//! Tests of the `locks.<step>` parser, the concurrency sweep and the figures.
use super::*;
use LockFigure as F;

const SAMPLE: &str = "## pids 101 102
## comm 101 irq/27-virtio1-req.0
## comm 102 irq/28-virtio1-req.1
## dropped 0
## clock mono
## ctxsw 101 vol_before=10 vol_after=25 nonvol_before=0 nonvol_after=1
## hist lockwait
# event histogram
#
# trigger info: hist:keys=stack.stacktrace:vals=hitcount,lat:sort=hitcount.descending:size=4096 [active]
#

{ stack.stacktrace:
     rt_spin_lock+0x3c/0x60
     blk_mq_run_hw_queue+0x1a/0x140
     blk_mq_run_hw_queues+0x40/0x90
} hitcount:          2  lat:       3000
{ stack.stacktrace:
     rtlock_slowlock_locked+0x1/0x2
     rt_spin_lock+0x3c/0x60
     free_to_partial_list+0x2d/0x130
} hitcount:          1  lat:        500

Totals:
Hits: 3
Entries: 2
Dropped: 0

# event histogram
{ pid:        101 } hitcount:          2  lat:       2500
{ pid:        102 } hitcount:          1  lat:       1000
## hist dwait-pid
{ pid:        101 } hitcount:          1  lat:       4000
## hist begin
{ common_pid:        101, lock_addr: 18446612682 } hitcount:          2
{ common_pid:        102, lock_addr: 18446612690 } hitcount:          1
## trace
        fio-1 [000] .....   10.000000: tracing_mark_write: vb-window-start
 irq/27-virtio1-101 [001] d..2.   10.000002: vb_lockwait: pid=101 lat=1000 stack=STACK:
=> rt_spin_lock+0x3c/0x60
=> blk_mq_run_hw_queue+0x1a/0x140
=> blk_mq_run_hw_queues+0x40/0x90
 irq/28-virtio1-102 [002] d..2.   10.000002: vb_lockwait: pid=102 lat=1500 stack=STACK:
=> rt_spin_lock+0x3c/0x60
=> blk_mq_run_hw_queue+0x1a/0x140
=> blk_mq_run_hw_queues+0x40/0x90
 irq/27-virtio1-101 [001] d..2.   10.000005: vb_lockwait: pid=101 lat=500 stack=STACK:
=> rtlock_slowlock_locked+0x1/0x2
=> rt_spin_lock+0x3c/0x60
=> free_to_partial_list+0x2d/0x130
      <idle>-0 [003] d..2.   10.000009: vb_dwait: pid=101 lat=4000
garbage line
        fio-1 [000] .....   10.000010: tracing_mark_write: vb-window-end
## end
";

#[test]
fn parses_sections_events_and_hists() {
    let l = parse_locks(SAMPLE).unwrap();
    assert_eq!(l.pids, vec![101, 102]);
    assert_eq!(l.comms[&102], "irq/28-virtio1-req.1");
    assert_eq!(l.clock, "mono");
    assert_eq!(l.window, Some((10_000_000_000, 10_000_010_000)));
    assert_eq!(l.lock_waits.len(), 3);
    assert_eq!(l.d_waits.len(), 1);
    assert_eq!(l.hist_lockwait, (3, 3500));
    assert_eq!(l.hist_dwait, (1, 4000));
    assert_eq!(l.hist_begins, 3);
    assert_eq!(l.voluntary[&101], 15);
    assert_eq!(l.bad_lines, 1);
    assert!(!l.consistent() || l.lock_waits.len() == 3);
    let s = by_site(&l);
    assert_eq!(s["blk_mq_run_hw_queue"].count, 2);
    assert_eq!(s["blk_mq_run_hw_queue"].total_ns, 2500);
    assert_eq!(s["blk_mq_run_hw_queue"].max_ns, 1500);
    assert_eq!(s["free_to_partial_list"].count, 1);
    assert_eq!(
        l.lock_waits[0].caller.as_deref(),
        Some("blk_mq_run_hw_queues")
    );
    assert!((l.window_s() - 10e-6).abs() < 1e-12);
}

#[test]
fn concurrency_of_overlapping_waits() {
    let l = parse_locks(SAMPLE).unwrap();
    let w = l.window.unwrap();
    // waits: 101 [1000, 2000] (+ [4500, 5000]), 102 [500, 2000] in ns after the start
    let c = concurrency(&l.lock_waits, w);
    assert_eq!(c.peak, 2);
    assert!((c.share_ge[0] - 2000.0 / 10_000.0).abs() < 1e-12);
    assert!((c.share_ge[1] - 1000.0 / 10_000.0).abs() < 1e-12);
    assert_eq!(c.share_ge[2], 0.0);
    let d = concurrency(&l.d_waits, w);
    assert_eq!(d.peak, 1);
    assert!((d.share_ge[0] - 0.4).abs() < 1e-12);
    let bins = peak_per_bin(&l.lock_waits, w, 2500);
    assert_eq!(bins, vec![2, 1, 0, 0]);
}

#[test]
fn touching_intervals_do_not_overlap_and_clipping_holds() {
    let mk = |end_ns, lat_ns| Wait {
        pid: 1,
        end_ns,
        lat_ns,
        site: None,
        caller: None,
        lock: None,
    };
    let v = [mk(20, 10), mk(30, 10), mk(200, 50), mk(5, 50)];
    let c = concurrency(&v, (0, 100));
    assert_eq!(c.peak, 1);
    assert!((c.share_ge[0] - 0.25).abs() < 1e-12);
    assert_eq!(concurrency(&[], (5, 5)).peak, 0);
    // One thread's overlapping intervals count once.
    let same = [mk(50, 40), mk(40, 10)];
    assert_eq!(concurrency(&same, (0, 100)).peak, 1);
    assert!((concurrency(&same, (0, 100)).share_ge[0] - 0.4).abs() < 1e-12);
}

#[test]
fn error_only_and_hostile_input_never_panic() {
    let l = parse_locks("error=kernel has no lock/contention_begin event\n").unwrap();
    assert_eq!(l.errors.len(), 1);
    assert!(parse_locks("").is_err());
    for t in [
        "## trace\n=> orphan\n x: vb_lockwait: pid=a lat=1\n 99999999999999999999.1: vb_dwait: pid=1 lat=2\n",
        "## hist lockwait\n} hitcount: x lat: 18446744073709551615\n} hitcount: 18446744073709551615\n",
        "## comm\n## ctxsw\n## pids x y\n## weird\n",
        " 1.0000000001: vb_dwait: pid=1 lat=1\n",
    ] {
        let _ = parse_locks(t);
    }
    assert_eq!(parse_ts("1.5:"), Some(1_500_000_000));
    assert_eq!(parse_ts("12.000001"), Some(12_000_001_000));
    assert_eq!(parse_ts("x.1"), None);
}

#[test]
fn real_guest_artefact() {
    // Captured from an 8-vCPU `rt` guest (6.12.117 PREEMPT_RT, TCG) running the seed-000
    // randread job on vhost-blk's SCSI personality, host under load.
    let dir = format!(
        "{}/../guest-tests/tests/fixtures/artifacts/locks",
        env!("CARGO_MANIFEST_DIR")
    );
    let l = parse_locks(&std::fs::read_to_string(format!("{dir}/rt.locks")).unwrap()).unwrap();
    assert_eq!(l.pids.len(), 8);
    assert_eq!(l.dropped, 0);
    assert_eq!(l.bad_lines, 0);
    assert_eq!(l.hist_begins, 868);
    assert_eq!(l.lock_waits.len(), 868);
    assert_eq!(l.d_waits.len(), 580);
    assert!(l.consistent());
    let (a, b) = l.window.unwrap();
    assert!(b > a);
    let f = LockFigures::from_waits(&l);
    // The in-kernel histogram, summed by hand over the stacks whose site is the queue_lock:
    // 641 via blk_mq_run_hw_queues (760,862,969 ns) + 5 via __blk_mq_free_request.
    assert_eq!(f.queue_lock().count, 646);
    assert_eq!(f.queue_lock().total_ns, 763_401_958);
    assert_eq!(f.paths["blk_mq_run_hw_queue <- blk_mq_run_hw_queues"], 641);
    assert_eq!(f.paths["blk_mq_run_hw_queue <- __blk_mq_free_request"], 5);
    assert!(f.sites.contains_key("free_to_partial_list"));
    // Only the four irq threads of the queues fio drives contend.
    assert!(
        f.d_blocked.peak >= 2 && f.d_blocked.peak <= 4,
        "{:?}",
        f.d_blocked
    );
    assert!(f.qlock_blocked.peak >= 2);
    let fio =
        crate::metrics::parse_fio(&std::fs::read(format!("{dir}/rt.fio.json")).unwrap()).unwrap();
    let m: BTreeMap<String, f64> = f
        .metrics(
            fio.total_ios() as f64,
            fio.read.as_ref().unwrap().runtime_ms as f64 / 1e3,
        )
        .into_iter()
        .collect();
    // Every figure under its declared suffix (the family for each k), and nothing else; this
    // artefact predates the lock addresses, so no per-lock figure, and the failed trylocks and
    // CPU times (issue 55), so none of those either.
    let per_lock = [
        F::QlockAddrCountPerKio,
        F::QlockAddrWaitMsPerKio,
        F::OtherLocksCountPerKio,
        F::OtherLocksWaitMsPerKio,
        F::TryfailPerKio,
        F::QlockAddrTryfailPerKio,
        F::IrqCpuMsPerKio,
    ];
    let mut want: std::collections::BTreeSet<String> = F::ALL
        .iter()
        .filter(|x| **x != F::DblockedGePct && !per_lock.contains(x))
        .map(|x| x.suffix().to_string())
        .collect();
    want.extend((1..=f.d_blocked.share_ge.len()).map(|k| F::DblockedGePct.with_k(k)));
    assert_eq!(
        m.keys().cloned().collect::<std::collections::BTreeSet<_>>(),
        want
    );
    assert_eq!(f.d_blocked.share_ge.len(), 8);
    let kio = fio.total_ios() as f64 / 1e3;
    assert!((m[F::QlockWaitMsPerKio.suffix()] - 763.401_958 / kio).abs() < 1e-9);
    assert!(m[F::LockwaitMsPerKio.suffix()] > m[F::QlockWaitMsPerKio.suffix()]);
    // 646 of the 868 contentions of the irq threads were on queue_lock.
    assert!((m[F::QlockContentionSharePct.suffix()] - 100.0 * 646.0 / 868.0).abs() < 1e-9);
    assert!((m[F::QlockWaitSharePct.suffix()] - 100.0 * 763.401_958 / m_all_ms(&f)).abs() < 1e-9);
    assert_eq!(m[F::DblockedPeak.suffix()], f.d_blocked.peak as f64);
    assert!(m[&F::DblockedGePct.with_k(1)] >= m[&F::DblockedGePct.with_k(2)]);
}

/// All sites' wait in ms.
fn m_all_ms(f: &LockFigures) -> f64 {
    f.all().total_ns as f64 / 1e6
}

#[test]
fn no_contention_at_all_is_a_zero_share() {
    let f = LockFigures::from_waits(&parse_locks("").unwrap_or_default());
    let m: BTreeMap<String, f64> = f.metrics(1000.0, 1.0).into_iter().collect();
    assert_eq!(m[F::QlockContentionSharePct.suffix()], 0.0);
    assert_eq!(m[F::QlockWaitSharePct.suffix()], 0.0);
}

#[test]
fn later_steps_subtract_the_cumulative_base() {
    let text = "## base lockwait_hits=4 lockwait_lat=100 dwait_hits=1 dwait_lat=7 begin_hits=2\n\
                ## hist lockwait\n{ pid: 1 } hitcount: 5 lat: 80\n{ pid: 1 } hitcount: 5 lat: 80\n\
                ## hist dwait-pid\n{ pid: 1 } hitcount: 3 lat: 10\n\
                ## hist begin\n{ common_pid: 1, lock_addr: 9 } hitcount: 5\n\
                warning=sched/sched_switch was not enabled at boot\n";
    let l = parse_locks(text).unwrap();
    assert_eq!(l.hist_lockwait, (3, 30));
    assert_eq!(l.hist_dwait, (2, 3));
    assert_eq!(l.hist_begins, 3);
    assert_eq!(l.warnings.len(), 1);
    assert!(l.errors.is_empty());
}

#[test]
fn real_second_step_subtracts_the_first_steps_totals() {
    // Captured from an `rt+seed000` guest, the second fio step (seqread-4j) of a boot whose
    // triggers were set up once, in the first step: the hist totals are cumulative.
    let dir = format!(
        "{}/../guest-tests/tests/fixtures/artifacts/locks",
        env!("CARGO_MANIFEST_DIR")
    );
    let l = parse_locks(&std::fs::read_to_string(format!("{dir}/seed000-step2.locks")).unwrap())
        .unwrap();
    assert!(!l.base.is_empty());
    assert!(l.base["lockwait_hits"] > 0, "the first step had lock waits");
    assert_eq!(l.bad_lines, 0);
    assert!(
        l.errors.is_empty() && l.warnings.is_empty(),
        "{:?} {:?}",
        l.errors,
        l.warnings
    );
    assert!(
        l.consistent(),
        "hist {:?} / {:?} vs events {} / {}",
        l.hist_lockwait,
        l.hist_dwait,
        l.lock_waits.len(),
        l.d_waits.len()
    );
    let f = LockFigures::from_waits(&l);
    assert_eq!(f.queue_lock().count, 0, "seed 000 takes no queue_lock");
    assert!(f.all().count > 0);
    assert!(f.window_s > 5.0);
}

/// The agent since issue 44: each wait carries its lock's address, and naming lines come before
/// the trace.
const WITH_ADDRESSES: &str = "## pids 101 102
## queue 0xffff888004a3c000
## offset request_queue.size 1032
## offset request_queue.queue_lock 128
## kernel _text ffffffff81000000
## kernel _end ffffffff83000000
## sym ffffffff82400000 ffffffff82400000 pool_lock
## trace
        fio-1 [000] .....   10.000000: tracing_mark_write: vb-window-start
 irq/27-virtio1-101 [001] d..2.   10.000002: vb_lockwait: pid=101 lat=1000 lock=18446612682147872896 stack=STACK:
=> rt_spin_lock+0x3c/0x60
=> blk_mq_hw_queue_need_run_locked+0x1a/0x40
=> blk_mq_run_hw_queue+0x1a/0x140
 irq/28-virtio1-102 [002] d..2.   10.000003: vb_lockwait: pid=102 lat=3000 lock=18446744071599816704 stack=STACK:
=> rt_spin_lock+0x3c/0x60
=> free_object+0x2d/0x130
 irq/28-virtio1-102 [002] d..2.   10.000004: vb_lockwait: pid=102 lat=500 lock=18446612682147872896 stack=STACK:
=> rt_spin_lock+0x3c/0x60
=> blk_mq_hw_queue_need_run_locked+0x1a/0x40
        fio-1 [000] .....   10.000010: tracing_mark_write: vb-window-end
## end
";

#[test]
fn locks_are_grouped_by_address_whatever_function_took_them() {
    let l = parse_locks(WITH_ADDRESSES).unwrap();
    assert_eq!(l.bad_lines, 0);
    assert_eq!(l.naming.queue, Some(0xffff888004a3c000));
    assert_eq!(l.lock_waits[0].lock, Some(0xffff888004a3c080));
    let f = LockFigures::from_waits(&l);
    // By caller, the helper's waits are not blk_mq_run_hw_queue's; by address they are the
    // queue_lock's.
    assert_eq!(f.queue_lock().count, 0);
    assert_eq!(f.locks[QUEUE_LOCK].count, 2);
    assert_eq!(f.locks[QUEUE_LOCK].total_ns, 1500);
    assert_eq!(f.locks["pool_lock"].count, 1);
    let m: std::collections::BTreeMap<String, f64> = f.metrics(1000.0, 1.0).into_iter().collect();
    assert_eq!(m[LockFigure::QlockAddrCountPerKio.suffix()], 2.0);
    assert_eq!(m[LockFigure::OtherLocksCountPerKio.suffix()], 1.0);
    assert_eq!(m[LockFigure::QlockAddrWaitMsPerKio.suffix()], 0.0015);
    // An older artefact (no addresses) has no per-lock figures at all.
    let old = LockFigures::from_waits(&parse_locks(SAMPLE).unwrap());
    let m: std::collections::BTreeMap<String, f64> = old.metrics(1000.0, 1.0).into_iter().collect();
    assert!(!m.contains_key(LockFigure::QlockAddrCountPerKio.suffix()));
}

#[test]
fn failed_trylocks_per_lock_and_irq_cpu_time_are_step_differences() {
    // The queue at 0xffff888004a3c000, queue_lock at +128: ffff888004a3c080.
    let text = "## pids 101 102\n## queue 0xffff888004a3c000\n\
                ## offset request_queue.queue_lock 128\n\
                ## cputime 101 before=40 after=95\n## cputime 102 before=7 after=7\n\
                ## hist tryfail-base\n{ lock: ffff888004a3c080 } hitcount: 10\n\
                ## hist tryfail\n{ lock: ffff888004a3c080 } hitcount: 2510\n\
                { lock: ffff888004a3c080 } hitcount: 500\n{ lock: ffff8880aa000000 } hitcount: 3\n\
                { lock: zz } hitcount: 9\n";
    let l = parse_locks(text).unwrap();
    assert!(l.tryfail_traced);
    assert_eq!(l.tryfail[&0xffff_8880_04a3_c080], 3000);
    assert_eq!(l.tryfail[&0xffff_8880_aa00_0000], 3);
    assert_eq!(l.cpu_ticks[&101], 55);
    let f = LockFigures::from_waits(&l);
    let m: BTreeMap<String, f64> = f.metrics(2000.0, 1.0).into_iter().collect();
    assert_eq!(m[F::TryfailPerKio.suffix()], 1501.5);
    assert_eq!(m[F::QlockAddrTryfailPerKio.suffix()], 1500.0);
    // 55 ticks of 10 ms over 2 kio.
    assert_eq!(m[F::IrqCpuMsPerKio.suffix()], 275.0);
}

#[test]
fn untraced_trylocks_are_missing_not_zero() {
    let l = parse_locks("## pids 101\nwarning=no trylock function could be probed\n").unwrap();
    let f = LockFigures::from_waits(&l);
    let m: BTreeMap<String, f64> = f.metrics(1000.0, 1.0).into_iter().collect();
    assert!(!m.contains_key(F::TryfailPerKio.suffix()));
    assert!(!m.contains_key(F::IrqCpuMsPerKio.suffix()));
}
