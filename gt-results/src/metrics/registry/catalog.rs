//! The catalogue: every metric, declared once with its derivation (see the parent module's
//! docs for how to add one).

use super::{Better, Derive, Headline, MetricDef, Out};
use crate::metrics::{
    is_request_vector, median_sorted, FioDirection, FioSummary, GuestInfo, StepFigure, StepResult,
};

// ---- derivation helpers ----

pub(super) fn ios(s: &StepResult) -> u64 {
    s.fio.as_ref().map_or(0, FioSummary::total_ios)
}

/// `x` per 1,000 fio I/Os of the step (None without I/Os).
fn per_kio(s: &StepResult, x: u64) -> Option<f64> {
    let n = ios(s);
    (n > 0).then(|| x as f64 * 1000.0 / n as f64)
}

/// The step's fio directions: one unnamed when the job went one way, else `read`/`write`.
fn fio_dirs(f: &FioSummary) -> Vec<(&'static str, &FioDirection)> {
    match f.single_direction() {
        Some(d) => vec![("", d)],
        None => [("read", &f.read), ("write", &f.write)]
            .into_iter()
            .filter_map(|(k, d)| d.as_ref().map(|d| (k, d)))
            .collect(),
    }
}

fn each_dir(s: &StepResult, o: &mut Out, v: impl Fn(&FioDirection) -> Option<f64>) {
    for (k, d) in s.fio.as_ref().map(fio_dirs).unwrap_or_default() {
        if let Some(x) = v(d) {
            o.put_with(&[("dir", k)], x);
        }
    }
}

fn pct(s: &StepResult, o: &mut Out, key: &str) {
    each_dir(s, o, |d| d.clat_percentiles_us.get(key).copied());
}

fn req_irqs(s: &StepResult) -> Option<u64> {
    let d = s.interrupts.as_ref()?;
    Some(
        d.iter()
            .filter(|(k, _)| is_request_vector(k))
            .map(|(_, v)| *v)
            .sum(),
    )
}

fn rescan_ms(g: &GuestInfo) -> Vec<f64> {
    let mut ms: Vec<f64> = g.rescans.iter().map(|r| r.ms).collect();
    ms.sort_by(f64::total_cmp);
    ms
}

/// Initcalls that become metrics (all are kept in `guest.scan`): the storage stack's.
pub fn scan_metric(initcall: &str) -> bool {
    ["scsi", "virtio", "virtblk", "init_sd", "blk", "megaraid"]
        .iter()
        .any(|k| initcall.contains(k))
}

const FIO: &str = "fio.<step>.json";
const IRQSW: &str = "irqsw.<step>";
const DSTACKS: &str = "dstacks.<step>";

use Derive::{Guest, Step};
use Headline::{No, Yes};

/// The fio, interrupt, D-switch, function and scan metrics; the host metrics are in
/// [`super::catalog_host::HOST_METRICS`], the lock-wait and step-CPU metrics in
/// [`super::catalog_locks::LOCK_METRICS`]. First match wins when names are
/// resolved ([`super::all`]), so specific patterns come first.
pub static METRICS: &[MetricDef] = &[
    // ---- fio ----
    def!(
        StepFigure::Iops.pattern(),
        "IOPS",
        Higher,
        FIO,
        Yes,
        "I/O operations per second, all directions",
        Step(|s, o| if let Some(f) = &s.fio {
            o.put(f.iops())
        })
    ),
    def!(
        "{step}.total_ios",
        "I/Os",
        Neither,
        FIO,
        No,
        "I/Os fio completed in the step",
        Step(|s, o| if let Some(f) = &s.fio {
            o.put(f.total_ios() as f64)
        })
    ),
    def!(
        "{step}.bw_kib_s",
        "KiB/s",
        Higher,
        FIO,
        No,
        "bandwidth, all directions",
        Step(|s, o| if let Some(f) = &s.fio {
            o.put(
                f.read.as_ref().map_or(0.0, |d| d.bw_kib_s)
                    + f.write.as_ref().map_or(0.0, |d| d.bw_kib_s),
            )
        })
    ),
    def!(
        "{step}.bw_mb_s",
        "MB/s",
        Higher,
        FIO,
        No,
        "bandwidth, all directions, in MB/s of 10^6 bytes (fio's MB/s, the seed's 640 -> 153 MB/s)",
        Step(|s, o| if let Some(f) = &s.fio {
            let kib = f.read.as_ref().map_or(0.0, |d| d.bw_kib_s)
                + f.write.as_ref().map_or(0.0, |d| d.bw_kib_s);
            o.put(kib * 1024.0 / 1e6)
        })
    ),
    def!(
        "{step}.{dir}.iops",
        "IOPS",
        Higher,
        FIO,
        Yes,
        "I/O operations per second in one direction of a mixed job",
        Step(
            |s, o| for (k, d) in s.fio.as_ref().map(fio_dirs).unwrap_or_default() {
                if !k.is_empty() {
                    o.put_with(&[("dir", k)], d.iops)
                }
            }
        )
    ),
    def!(
        "{step}{.dir}.clat_mean_us",
        "us",
        Lower,
        FIO,
        No,
        "mean completion latency",
        Step(|s, o| each_dir(s, o, |d| Some(d.clat_mean_us)))
    ),
    def!(
        "{step}{.dir}.lat_mean_us",
        "us",
        Lower,
        FIO,
        No,
        "mean total latency (submission + completion)",
        Step(|s, o| each_dir(s, o, |d| Some(d.lat_mean_us)))
    ),
    def!(
        "{step}{.dir}.clat_p50_us",
        "us",
        Lower,
        FIO,
        No,
        "median completion latency",
        Step(|s, o| pct(s, o, "p50"))
    ),
    def!(
        "{step}{.dir}.clat_p90_us",
        "us",
        Lower,
        FIO,
        No,
        "90th percentile completion latency",
        Step(|s, o| pct(s, o, "p90"))
    ),
    def!(
        "{step}{.dir}.clat_p99_us",
        "us",
        Lower,
        FIO,
        Yes,
        "99th percentile completion latency",
        Step(|s, o| pct(s, o, "p99"))
    ),
    def!(
        "{step}{.dir}.clat_p99_9_us",
        "us",
        Lower,
        FIO,
        No,
        "99.9th percentile completion latency",
        Step(|s, o| pct(s, o, "p99.9"))
    ),
    // ---- the agent's step record ----
    def!(
        "{step}.secs",
        "s",
        Neither,
        "steps",
        No,
        "wall time of the step in the guest",
        Step(|s, o| if let Some(x) = s.secs {
            o.put(x)
        })
    ),
    // ---- interrupts ----
    def!(
        "{step}.req_irqs",
        "interrupts",
        Neither,
        "interrupts.before/after.<step>",
        No,
        "interrupts on the request vectors during the step",
        Step(|s, o| if let Some(r) = req_irqs(s) {
            o.put(r as f64)
        })
    ),
    def!(
        "{step}.irqs_per_io",
        "interrupts/I/O",
        Neither,
        "interrupts.before/after.<step>",
        Yes,
        "request-vector interrupts per fio I/O",
        Step(|s, o| if let (Some(r), n) = (req_irqs(s), ios(s)) {
            if n > 0 {
                o.put(r as f64 / n as f64)
            }
        })
    ),
    // ---- irq-thread context switches ----
    def!(
        "{step}.irq_d_switches",
        "switches",
        Lower,
        IRQSW,
        No,
        "request irq threads' switches out in D (blocked on a sleeping lock)",
        Step(|s, o| if let Some(sw) = &s.irq_switches {
            o.put(sw.in_state('D') as f64)
        })
    ),
    def!(
        "{step}.irq_s_switches",
        "switches",
        Neither,
        IRQSW,
        No,
        "request irq threads' switches out in S (waiting for work)",
        Step(|s, o| if let Some(sw) = &s.irq_switches {
            o.put(sw.in_state('S') as f64)
        })
    ),
    def!(
        "{step}.irq_switches_total",
        "switches",
        Lower,
        IRQSW,
        No,
        "all switches out of the request irq threads",
        Step(|s, o| if let Some(sw) = &s.irq_switches {
            o.put(sw.total() as f64)
        })
    ),
    def!(
        "{step}.irq_d_per_kio",
        "switches/1,000 I/Os",
        Lower,
        IRQSW,
        Yes,
        "D switches of the request irq threads per 1,000 I/Os",
        Step(|s, o| if let Some(sw) = &s.irq_switches {
            if let Some(x) = per_kio(s, sw.in_state('D')) {
                o.put(x)
            }
        })
    ),
    def!(
        "{step}.irq_switches_per_kio",
        "switches/1,000 I/Os",
        Lower,
        IRQSW,
        Yes,
        "all switches of the request irq threads per 1,000 I/Os",
        Step(|s, o| if let Some(sw) = &s.irq_switches {
            if let Some(x) = per_kio(s, sw.total()) {
                o.put(x)
            }
        })
    ),
    def!(
        "{step}.irqsw_dropped",
        "events",
        Lower,
        IRQSW,
        No,
        "ftrace events lost (switch counts are low when > 0)",
        Step(
            |s, o| if let Some(d) = s.irq_switches.as_ref().and_then(|sw| sw.dropped) {
                o.put(d as f64)
            }
        )
    ),
    // ---- D-state stacks by lock site ----
    def!(
        "{step}.dstack_total",
        "switches",
        Lower,
        DSTACKS,
        No,
        "D switches with a kernel stack, all lock sites",
        Step(|s, o| if let Some(ls) = &s.lock_sites {
            o.put(ls.total() as f64)
        })
    ),
    def!(
        "{step}.d_queue_lock",
        "switches",
        Lower,
        DSTACKS,
        No,
        "D switches at the q->queue_lock site (blk_mq_run_hw_queue)",
        Step(|s, o| if let Some(ls) = &s.lock_sites {
            o.put(ls.queue_lock() as f64)
        })
    ),
    def!(
        "{step}.d_queue_lock_share",
        "fraction",
        Lower,
        DSTACKS,
        No,
        "share of the D switches at the q->queue_lock site",
        Step(|s, o| if let Some(ls) = &s.lock_sites {
            if ls.total() > 0 {
                o.put(ls.queue_lock() as f64 / ls.total() as f64)
            }
        })
    ),
    def!(
        "{step}.d_queue_lock_per_kio",
        "switches/1,000 I/Os",
        Lower,
        DSTACKS,
        Yes,
        "D switches at the q->queue_lock site per 1,000 I/Os",
        Step(|s, o| if let Some(ls) = &s.lock_sites {
            if let Some(x) = per_kio(s, ls.queue_lock()) {
                o.put(x)
            }
        })
    ),
    // ---- function hit counts and times ----
    // The function profiler's total time first (`FUNC:usecs`, text::funcs); then `_per_kio`: it
    // is the more specific pattern, and a function literally named `x_per_kio` then wins over
    // `x`'s rate, as it always did.
    def!(
        "{step}.func.{func}:usecs",
        "us",
        Lower,
        "funcs.<step>",
        No,
        "time inside a traced kernel function during the step (the function profiler's total)",
        Step(|s, o| for (f, us) in s.funcs.iter().flatten() {
            if let Some(f) = f.strip_suffix(":usecs") {
                o.put_with(&[("func", f)], *us as f64)
            }
        })
    ),
    def!(
        "{step}.func.{func}_per_kio",
        "hits/1,000 I/Os",
        Neither,
        "funcs.<step>",
        No,
        "hits of a traced kernel function per 1,000 I/Os",
        Step(|s, o| {
            for (f, h) in s
                .funcs
                .iter()
                .flatten()
                .filter(|(f, _)| !f.ends_with(":usecs"))
            {
                if let Some(x) = per_kio(s, *h) {
                    o.put_with(&[("func", f)], x)
                }
            }
        })
    ),
    def!(
        "{step}.func.{func}",
        "hits",
        Neither,
        "funcs.<step>",
        No,
        "hits of a traced kernel function during the step",
        Step(|s, o| for (f, h) in s.funcs.iter().flatten() {
            if !f.ends_with(":usecs") {
                o.put_with(&[("func", f)], *h as f64)
            }
        })
    ),
    // ---- SCSI rescans ----
    def!(
        "rescan.n",
        "rescans",
        Neither,
        "rescan.<i>",
        No,
        "rescans timed",
        Guest(|g, o| if !g.rescans.is_empty() {
            o.put(g.rescans.len() as f64)
        })
    ),
    def!(
        "rescan.ms_median",
        "ms",
        Lower,
        "rescan.<i>",
        Yes,
        "median rescan time",
        Guest(|g, o| if !g.rescans.is_empty() {
            o.put(median_sorted(&rescan_ms(g)))
        })
    ),
    def!(
        "rescan.ms_mean",
        "ms",
        Lower,
        "rescan.<i>",
        No,
        "mean rescan time",
        Guest(|g, o| if !g.rescans.is_empty() {
            let ms = rescan_ms(g);
            o.put(ms.iter().sum::<f64>() / ms.len() as f64)
        })
    ),
    def!(
        "rescan.ms_min",
        "ms",
        Lower,
        "rescan.<i>",
        No,
        "fastest rescan",
        Guest(|g, o| if let Some(x) = rescan_ms(g).first() {
            o.put(*x)
        })
    ),
    def!(
        "rescan.ms_max",
        "ms",
        Lower,
        "rescan.<i>",
        No,
        "slowest rescan",
        Guest(|g, o| if let Some(x) = rescan_ms(g).last() {
            o.put(*x)
        })
    ),
    def!(
        "rescan.disks",
        "disks",
        Neither,
        "rescan.<i>",
        No,
        "disks after the last rescan",
        Guest(
            |g, o| if let Some(d) = g.rescans.last().and_then(|r| r.disks) {
                o.put(d as f64)
            }
        )
    ),
    // ---- boot-time scan ----
    def!(
        "scan.initcalls_total_us",
        "us",
        Lower,
        "scan",
        No,
        "all initcalls' time",
        Guest(
            |g, o| if let Some(s) = g.scan.as_ref().filter(|s| !s.initcalls_us.is_empty()) {
                o.put(
                    s.initcalls_us
                        .values()
                        .fold(0u64, |a, b| a.saturating_add(*b)) as f64,
                )
            }
        )
    ),
    def!(
        "scan.first_disk_s",
        "s",
        Lower,
        "scan",
        Yes,
        "guest uptime when the first disk appeared",
        Guest(
            |g, o| if let Some(v) = g.scan.as_ref().and_then(|s| s.first_disk_s) {
                o.put(v)
            }
        )
    ),
    def!(
        "scan.{initcall}_us",
        "us",
        Lower,
        "scan",
        Headline::For("initcall", &["virtio_scsi_init"]),
        "time of one storage-stack initcall",
        Guest(
            |g, o| for (f, us) in g.scan.iter().flat_map(|s| &s.initcalls_us) {
                if scan_metric(f) {
                    o.put_with(&[("initcall", f)], *us as f64)
                }
            }
        )
    ),
    // ---- verify ----
    def!(
        "verify.ok",
        "bool",
        Higher,
        "verify",
        No,
        "1 when the data verification passed",
        Guest(|g, o| if let Some(v) = &g.verify {
            o.put(if v.ok { 1.0 } else { 0.0 })
        })
    ),
];
