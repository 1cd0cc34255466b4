//! Seed 003's cost model, next to what the runs measured.
//!
//! Rules:
//! 1. The model applies when every successful run of two or more kernels has the factors:
//!    `scan.scsi_nr_hw_queues` (H), `scan.scsi_can_queue` (D), `rescan.n`,
//!    `rescan.func.blk_mq_exit_hctx` (calls) and its `:usecs` (the function profile of the
//!    rescans). Runs of more than one suite variant: no model.
//! 2. Per run: probe removals per scan R = calls / (rescans x H) (every torn-down queue exits
//!    H hctx); time per call t = usecs / calls.
//! 3. Per pair of kernels, the slower being the one with the larger mean t: per-tag cost
//!    c = (t_slow - t_fast) / D (the profiler's own per-call overhead cancels), and the
//!    predicted extra scan time is R x H x D x c, R the mean over both kernels' runs.
//! 4. Measured extra time: mean boot scan (`scan.virtio_scsi_init_us`, not profiled) and mean
//!    first rescan (`rescan.ms_first`, profiled) of the slower kernel minus the faster's, with
//!    Welch's 95 % interval and p. The boot scan probes what a rescan probes only when no LUN
//!    registers; the table shows each kernel's R so a mismatch is visible.
//! 5. The extrapolation keeps R, D and c and sets H to 128 (the seed's controller).

use super::block::Block;
use super::tables::{fmt_num, fmt_p};
use gt_results::results::RunResult;
use gt_stats::{mean, welch_diff_ci95, welch_p};

const H: &str = "scan.scsi_nr_hw_queues";
const D: &str = "scan.scsi_can_queue";
const RESCANS: &str = "rescan.n";
const CALLS: &str = "rescan.func.blk_mq_exit_hctx";
const CALL_US: &str = "rescan.func.blk_mq_exit_hctx:usecs";
const BOOT_US: &str = "scan.virtio_scsi_init_us";
const FIRST_MS: &str = "rescan.ms_first";

/// The hctx count the extrapolation column uses.
pub const EXTRAPOLATE_HCTX: f64 = 128.0;

/// One kernel's factors, over its successful runs.
#[derive(Debug, Clone, PartialEq)]
pub struct KernelFactors {
    pub kernel: String,
    pub runs: usize,
    /// Probe removals per scan, mean over runs.
    pub removals: f64,
    pub hctx: f64,
    pub depth: f64,
    /// blk_mq_exit_hctx time per call in the profiled rescans (us), mean over runs.
    pub us_per_call: f64,
    /// Boot scan per run (ms).
    pub boot_ms: Vec<f64>,
    /// First rescan per run (ms).
    pub first_rescan_ms: Vec<f64>,
}

/// A measured difference: slower minus faster.
#[derive(Debug, Clone, PartialEq)]
pub struct Measured {
    pub mean: f64,
    pub ci95: Option<(f64, f64)>,
    pub welch_p: Option<f64>,
}

impl Measured {
    fn of(slow: &[f64], fast: &[f64]) -> Option<Self> {
        if slow.is_empty() || fast.is_empty() {
            return None;
        }
        let m = gt_stats::mean;
        Some(Self {
            mean: m(slow) - m(fast),
            ci95: welch_diff_ci95(slow, fast),
            welch_p: welch_p(slow, fast),
        })
    }
}

/// The model for one pair of kernels.
#[derive(Debug, Clone, PartialEq)]
pub struct PairModel {
    pub slow: String,
    pub fast: String,
    pub removals: f64,
    pub hctx: f64,
    pub depth: f64,
    /// Per-tag cost difference (ns).
    pub per_tag_ns: f64,
    /// R x H x D x c (ms).
    pub predicted_ms: f64,
    pub boot: Option<Measured>,
    pub first_rescan: Option<Measured>,
    /// R x 128 x D x c (ms).
    pub at_128_ms: f64,
}

impl PairModel {
    /// Measured boot-scan extra over predicted.
    pub fn boot_ratio(&self) -> Option<f64> {
        let b = self.boot.as_ref()?;
        (self.predicted_ms > 0.0).then(|| b.mean / self.predicted_ms)
    }
}

/// The model section's data.
#[derive(Debug, Clone, PartialEq)]
pub struct ScanModel {
    pub kernels: Vec<KernelFactors>,
    pub pairs: Vec<PairModel>,
}

fn factors(kernel: &str, runs: &[&RunResult]) -> Option<KernelFactors> {
    let mut removals = Vec::new();
    let mut per_call = Vec::new();
    let (mut hctx, mut depth) = (Vec::new(), Vec::new());
    let (mut boot_ms, mut first_rescan_ms) = (Vec::new(), Vec::new());
    for r in runs {
        let g = |k: &str| r.metrics.get(k).copied().filter(|v| v.is_finite());
        let (h, d, n, calls, us) = (g(H)?, g(D)?, g(RESCANS)?, g(CALLS)?, g(CALL_US)?);
        if h <= 0.0 || d <= 0.0 || n <= 0.0 || calls <= 0.0 {
            return None;
        }
        removals.push(calls / (n * h));
        per_call.push(us / calls);
        hctx.push(h);
        depth.push(d);
        boot_ms.extend(g(BOOT_US).map(|us| us / 1000.0));
        first_rescan_ms.extend(g(FIRST_MS));
    }
    if removals.is_empty() {
        return None;
    }
    Some(KernelFactors {
        kernel: kernel.to_string(),
        runs: removals.len(),
        removals: mean(&removals),
        hctx: mean(&hctx),
        depth: mean(&depth),
        us_per_call: mean(&per_call),
        boot_ms,
        first_rescan_ms,
    })
}

fn pair(a: &KernelFactors, b: &KernelFactors) -> PairModel {
    let (slow, fast) = if a.us_per_call >= b.us_per_call {
        (a, b)
    } else {
        (b, a)
    };
    let removals = (slow.removals + fast.removals) / 2.0;
    let (hctx, depth) = (
        (slow.hctx + fast.hctx) / 2.0,
        (slow.depth + fast.depth) / 2.0,
    );
    let per_tag_us = (slow.us_per_call - fast.us_per_call) / depth;
    let predicted_ms = removals * hctx * depth * per_tag_us / 1000.0;
    PairModel {
        slow: slow.kernel.clone(),
        fast: fast.kernel.clone(),
        removals,
        hctx,
        depth,
        per_tag_ns: per_tag_us * 1000.0,
        predicted_ms,
        boot: Measured::of(&slow.boot_ms, &fast.boot_ms),
        first_rescan: Measured::of(&slow.first_rescan_ms, &fast.first_rescan_ms),
        at_128_ms: removals * EXTRAPOLATE_HCTX * depth * per_tag_us / 1000.0,
    }
}

/// The model over `runs`, kernels in `order` (see the module rules); None when it does not
/// apply.
pub fn scan_model(runs: &[RunResult], order: &[String]) -> Option<ScanModel> {
    let ok: Vec<&RunResult> = runs.iter().filter(|r| r.status.is_ok()).collect();
    let variants: std::collections::BTreeSet<Option<&str>> =
        ok.iter().map(|r| r.info.variant.as_deref()).collect();
    if variants.len() > 1 {
        return None;
    }
    let mut kernels = Vec::new();
    for k in order {
        let mine: Vec<&RunResult> = ok.iter().copied().filter(|r| &r.info.kernel == k).collect();
        if mine.is_empty() {
            continue;
        }
        kernels.push(factors(k, &mine)?);
    }
    if kernels.len() < 2 {
        return None;
    }
    let mut pairs = Vec::new();
    for (i, a) in kernels.iter().enumerate() {
        for b in &kernels[i + 1..] {
            pairs.push(pair(a, b));
        }
    }
    Some(ScanModel { kernels, pairs })
}

fn measured(m: &Option<Measured>) -> String {
    match m {
        None => "–".into(),
        Some(m) => {
            let ci = m.ci95.map_or(String::new(), |(lo, hi)| {
                format!(" [{}, {}]", fmt_num(lo), fmt_num(hi))
            });
            format!("{}{ci}, p {}", fmt_num(m.mean), fmt_p(m.welch_p))
        }
    }
}

/// The report section.
pub(super) fn blocks(m: &ScanModel) -> Vec<Block> {
    use Block::*;
    let mut b = vec![
        Heading(2, "Seed 003 cost model".into()),
        Para(
            "Predicted extra scan time = probe removals per scan (R) x hctx (H) x tags per hctx \
             (D) x per-tag cost (c). R = blk_mq_exit_hctx calls per rescan / H and c = the \
             difference in blk_mq_exit_hctx time per call between the two kernels / D, both from \
             the function profile of the rescans; measured = the difference of the mean boot \
             scan (virtio_scsi_init, initcall_debug, not profiled) and of the first rescan \
             (profiled), with Welch's 95 % interval and p. The last column keeps R, D and c and \
             sets H = 128; c is this host's (TCG) cost: scale it by your machine's."
                .into(),
        ),
    ];
    let kh = [
        "kernel",
        "runs",
        "R",
        "H",
        "D",
        "us per blk_mq_exit_hctx call",
        "boot scan ms (mean)",
        "first rescan ms (mean)",
    ];
    let krows = m
        .kernels
        .iter()
        .map(|k| {
            let avg = |x: &[f64]| {
                if x.is_empty() {
                    "–".into()
                } else {
                    fmt_num(mean(x))
                }
            };
            vec![
                k.kernel.clone(),
                k.runs.to_string(),
                fmt_num(k.removals),
                format!("{:.0}", k.hctx),
                format!("{:.0}", k.depth),
                format!("{:.2}", k.us_per_call),
                avg(&k.boot_ms),
                avg(&k.first_rescan_ms),
            ]
        })
        .collect();
    b.push(Table(kh.iter().map(|s| s.to_string()).collect(), krows));
    let ph = [
        "slower vs faster",
        "R x H x D",
        "c (ns/tag)",
        "predicted extra (ms)",
        "measured extra, boot scan (ms) [95 % CI], Welch p",
        "measured / predicted",
        "measured extra, first rescan (ms) [95 % CI], Welch p",
        "predicted at H = 128 (ms)",
    ];
    let prows = m
        .pairs
        .iter()
        .map(|p| {
            vec![
                format!("{} vs {}", p.slow, p.fast),
                format!("{} x {:.0} x {:.0}", fmt_num(p.removals), p.hctx, p.depth),
                format!("{:.2}", p.per_tag_ns),
                fmt_num(p.predicted_ms),
                measured(&p.boot),
                p.boot_ratio().map_or("–".into(), |r| format!("{r:.2}")),
                measured(&p.first_rescan),
                fmt_num(p.at_128_ms),
            ]
        })
        .collect();
    b.push(Table(ph.iter().map(|s| s.to_string()).collect(), prows));
    b
}

#[cfg(test)]
mod tests;
