//! The lock-wait metrics of the request irq threads (`locks.<step>`, seed 000's lock and every
//! other site) and what the host gave the guest during a step (`begin.`/`end.` marks). Each
//! lock metric's name is its [`LockFigure`]'s (declared once in `metrics/locks/figures.rs`).

use super::catalog::ios;
use super::{Better, Derive, Headline, MetricDef, Out};
use crate::metrics::{LockFigure, StepFigure, StepResult};

const LOCKS: &str = "locks.<step>";

/// Seconds of I/O in the step (fio's runtime; the longest direction).
fn fio_secs(s: &StepResult) -> Option<f64> {
    let f = s.fio.as_ref()?;
    let ms = [&f.read, &f.write]
        .iter()
        .filter_map(|d| d.as_ref().map(|d| d.runtime_ms))
        .max()?;
    (ms > 0).then(|| ms as f64 / 1000.0)
}

/// One figure of the step's `locks` data, normalised by its I/Os and seconds.
fn lock_value(s: &StepResult, key: &str) -> Option<f64> {
    let (l, secs) = (s.locks.as_ref()?, fio_secs(s)?);
    let n = ios(s);
    if n == 0 {
        return None;
    }
    l.metrics(n as f64, secs)
        .into_iter()
        .find_map(|(k, v)| (k == key).then_some(v))
}

fn lockfig(s: &StepResult, o: &mut Out, fig: LockFigure) {
    if let Some(v) = lock_value(s, fig.suffix()) {
        o.put(v);
    }
}

/// One lock metric: `{step}.<suffix>` of `LockFigure::$fig`, a lower value is better, taken
/// from the step's `locks` data under the same figure.
macro_rules! lock {
    ($fig:ident, $unit:expr, $headline:expr, $desc:expr) => {
        def!(
            LockFigure::$fig.pattern(),
            $unit,
            Lower,
            LOCKS,
            $headline,
            $desc,
            Step(|s, o| lockfig(s, o, LockFigure::$fig))
        )
    };
}

use Derive::Step;
use Headline::{No, Yes};

/// Lock waits, D sleeps, blocked-thread concurrency, step CPU.
pub static LOCK_METRICS: &[MetricDef] = &[
    // ---- lock waits of the request irq threads (locks.<step>) ----
    lock!(
        QlockWaitMsPerKio,
        "ms/1,000 I/Os",
        Yes,
        "time the request irq threads waited for seed 000's queue_lock (blk_mq_run_hw_queue) per 1,000 I/Os (lock:contention_begin -> end)"
    ),
    lock!(
        QlockWaitMsPerS,
        "ms/s",
        No,
        "queue_lock wait of the request irq threads per second of I/O"
    ),
    lock!(
        QlockWaitCountPerKio,
        "waits/1,000 I/Os",
        No,
        "queue_lock contentions of the request irq threads per 1,000 I/Os"
    ),
    lock!(
        QlockWaitMeanUs,
        "us",
        No,
        "mean queue_lock wait (0 without contention)"
    ),
    lock!(
        QlockWaitMaxUs,
        "us",
        No,
        "longest queue_lock wait"
    ),
    lock!(
        QlockWaitSharePct,
        "%",
        No,
        "queue_lock's share of all the request irq threads' lock wait"
    ),
    lock!(
        QlockContentionSharePct,
        "%",
        Yes,
        "queue_lock's share of all the request irq threads' lock contentions (by count; a contention is queue_lock's when blk_mq_run_hw_queue took the lock, so a patch that takes it elsewhere reads 0 by construction)"
    ),
    lock!(
        LockwaitMsPerKio,
        "ms/1,000 I/Os",
        Yes,
        "time the request irq threads waited for any sleeping or spinning lock, all sites, per 1,000 I/Os"
    ),
    lock!(
        LockwaitMsPerS,
        "ms/s",
        No,
        "all-site lock wait of the request irq threads per second of I/O"
    ),
    lock!(
        LockwaitCountPerKio,
        "waits/1,000 I/Os",
        No,
        "lock contentions of the request irq threads per 1,000 I/Os, all sites"
    ),
    lock!(
        LockwaitMeanUs,
        "us",
        No,
        "mean lock wait, all sites"
    ),
    lock!(
        LockwaitMaxUs,
        "us",
        No,
        "longest lock wait, all sites"
    ),
    lock!(
        QlockAddrCountPerKio,
        "waits/1,000 I/Os",
        No,
        "contentions of the request irq threads on the disk's queue_lock, identified by its address (request_queue + the field's offset), whatever function took it, per 1,000 I/Os"
    ),
    lock!(
        QlockAddrWaitMsPerKio,
        "ms/1,000 I/Os",
        No,
        "time the request irq threads waited for the disk's queue_lock (identified by its address), per 1,000 I/Os"
    ),
    lock!(
        OtherLocksCountPerKio,
        "waits/1,000 I/Os",
        No,
        "contentions of the request irq threads on every lock but the disk's queue_lock (by address), per 1,000 I/Os"
    ),
    lock!(
        OtherLocksWaitMsPerKio,
        "ms/1,000 I/Os",
        No,
        "time the request irq threads waited for every lock but the disk's queue_lock (by address), per 1,000 I/Os"
    ),
    lock!(
        TryfailPerKio,
        "failed trylocks/1,000 I/Os",
        No,
        "failed trylocks of the request irq threads (a return probe on rt_spin_trylock and _raw_spin_trylock), every lock, per 1,000 I/Os: the waits a trylock loop makes without a contention event"
    ),
    lock!(
        QlockAddrTryfailPerKio,
        "failed trylocks/1,000 I/Os",
        No,
        "failed trylocks of the request irq threads on the disk's queue_lock (by address), per 1,000 I/Os"
    ),
    lock!(
        IrqCpuMsPerKio,
        "ms/1,000 I/Os",
        No,
        "CPU time of the request irq threads (utime + stime, /proc/PID/stat) per 1,000 I/Os: a patch that spins for a lock instead of sleeping on it spends it here"
    ),
    lock!(
        DsleepPerKio,
        "sleeps/1,000 I/Os",
        No,
        "switches of the request irq threads into D (on PREEMPT_RT: any sleeping-lock wait, and other D sleeps) per 1,000 I/Os"
    ),
    lock!(
        DsleepMsPerKio,
        "ms/1,000 I/Os",
        No,
        "time the request irq threads spent in D (switch-out to wakeup) per 1,000 I/Os"
    ),
    lock!(
        DblockedPeak,
        "threads",
        Yes,
        "most request irq threads in D at the same moment (the seed: 6-8 of 8)"
    ),
    def!(
        LockFigure::DblockedGePct.pattern(),
        "% of time",
        Lower,
        LOCKS,
        No,
        "share of the step with at least k request irq threads in D at once",
        Step(|s, o| for k in 1..=8 {
            if let Some(v) = lock_value(s, &LockFigure::DblockedGePct.with_k(k)) {
                o.put_with(&[("k", &k.to_string())], v);
            }
        })
    ),
    lock!(
        LockblockedPeak,
        "threads",
        No,
        "most request irq threads waiting for a lock at the same moment, all sites"
    ),
    lock!(
        QlockBlockedPeak,
        "threads",
        Yes,
        "most request irq threads waiting for the queue_lock at the same moment"
    ),
    // ---- what the host gave the guest during a step (begin./end. marks) ----
    def!(
        StepFigure::GuestCpuPerS.pattern(),
        "CPU-s/s",
        Higher,
        "host /proc",
        No,
        "CPU time QEMU's vCPU threads got per wall second of the step (a starved guest shows low)",
        Step(|s, o| if let Some(c) = &s.host_cpu {
            o.put(c.vcpu_per_s)
        })
    ),
    def!(
        StepFigure::BackendCpuPerS.pattern(),
        "CPU-s/s",
        Neither,
        "host /proc",
        No,
        "CPU time of the external backend per wall second of the step",
        Step(|s, o| if let Some(c) = &s.host_cpu {
            o.put(c.backend_per_s)
        })
    ),
    def!(
        StepFigure::HostOtherCpuPerS.pattern(),
        "CPU-s/s",
        Lower,
        "host /proc",
        No,
        "host CPU busy time not accounted to QEMU or the backend per wall second (unrelated load)",
        Step(|s, o| if let Some(c) = &s.host_cpu {
            o.put(c.other_load_per_s)
        })
    ),
    def!(
        StepFigure::HostStealCpuPerS.pattern(),
        "CPU-s/s",
        Lower,
        "host /proc",
        No,
        "host CPU the hypervisor below this host kept from it per wall second of the step (/proc/stat steal; 0 on bare metal)",
        Step(|s, o| if let Some(c) = &s.host_cpu {
            o.put(c.steal_per_s)
        })
    ),
    def!(
        "{step}.host_loadavg",
        "load",
        Lower,
        "host /proc",
        No,
        "host 1-minute load average at the end of the step",
        Step(|s, o| if let Some(c) = &s.host_cpu {
            o.put(c.loadavg_end)
        })
    ),
];
