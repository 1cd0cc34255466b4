//! The A/B verdict: the suite's primary and secondary metrics and their companions (the seed's
//! own observables: blocked irq threads at once, throughput; what the host gave the guest),
//! picked out of a [`Comparison`] for the first two kernels. Statistics only; the words are the
//! report's (`report::verdict`).
//!
//! Contract:
//! 1. The primary and secondary metric names come from the runs' results.json
//!    (`info.primary_metric`, written from the suite), so a verdict is rebuilt from results alone.
//! 2. The test is the paired t-test when every run carries a pair id and both kernels have at
//!    least 2 pairs, else Welch's t-test; both are reported where they exist.
//! 3. A run is "starved" when the CPU its vCPUs got during the primary step is below
//!    [`STARVED_FRACTION`] of the median over all runs of the comparison.
//! 4. Faithfulness ([`Faithfulness`], only for runs that recorded their placement): running
//!    vCPUs per host core and the host's time slice (means over the successful runs), and the
//!    baseline's mean queue_lock wait per contention on the primary step. Host preemption
//!    likely dominates the lock figures when the vCPUs outnumber their cores, or when that
//!    wait is at least [`PREEMPTION_SLICES`] of a host slice: `blk_mq_run_hw_queue` holds the
//!    lock for a few microseconds, so a wait that long means the holder's vCPU was off its
//!    host core.
//! 5. No verdict for the cells of a grid sweep taken together (runs with a sweep series from
//!    more than one cell): one verdict would mix the cells' rows and pool their placements.
//!    Each cell is judged alone (`compare DIR/CELL --verdict`, `compare --each`).
//! 6. When the runs carry a `[judgement]`, every kernel after the baseline is judged
//!    (compare::judgement) and the verdict holds the judgements; `judgement` and `reasons` are
//!    those of `other`, the second kernel. A suite with a judgement and no primary metric still
//!    gets a verdict (with no rows).

use serde::{Deserialize, Serialize};

use super::judgement::{self, Judgement, KernelJudgement};
use super::{Comparison, Diff, MetricRow};
use gt_results::metrics::LockFigure;
use gt_results::results::RunResult;
use gt_suite::VerdictSpec;

/// A run whose guest got less than this share of the median vCPU time is flagged.
pub const STARVED_FRACTION: f64 = 0.6;

/// What the verdict reports beside the primary metric: the runs' `[verdict]` (`info.verdict`,
/// written from the suite; results written before suites declared it were given theirs by
/// `guest-tests migrate verdict`, docs/results/migrations), else nothing beside it.
pub fn verdict_spec_of(runs: &[RunResult]) -> VerdictSpec {
    runs.iter()
        .find_map(|r| r.info.verdict.clone())
        .unwrap_or_default()
}

/// A baseline wait per contention of at least this share of a host slice is taken as host
/// preemption of the lock holder (rule 4).
pub const PREEMPTION_SLICES: f64 = 0.5;

/// How faithful the runs were to a machine with a core per CPU (rule 4).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Faithfulness {
    pub vcpus_per_core: f64,
    /// Every run had a host core per running vCPU (placement rule 2).
    pub dedicated: bool,
    pub host_slice_ms: f64,
    /// The baseline's mean queue_lock wait per contention on the primary step, us.
    pub base_wait_mean_us: Option<f64>,
    pub host_preemption_likely: bool,
}

/// One kernel's figures for a metric.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KernelFigure {
    pub kernel: String,
    pub n: usize,
    pub mean: f64,
    pub ci95: Option<f64>,
    pub median: f64,
    pub cv: Option<f64>,
    pub min: f64,
    pub max: f64,
}

/// One metric of the verdict, baseline vs the other kernel.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VerdictRow {
    /// `primary`, `secondary`, `throughput` or `companion`.
    pub role: String,
    pub metric: String,
    pub unit: String,
    pub base: KernelFigure,
    pub other: KernelFigure,
    /// other - base: Welch, and paired when the design paired the runs.
    pub diff: Option<Diff>,
    pub welch_p: Option<f64>,
    pub paired_diff: Option<Diff>,
    pub paired_p: Option<f64>,
    pub wilcoxon_p: Option<f64>,
    /// The p-value the verdict uses and its test.
    pub p: Option<f64>,
    pub test: String,
}

/// The whole verdict.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    pub base: String,
    pub other: String,
    pub paired: bool,
    pub rows: Vec<VerdictRow>,
    /// Run directories whose guest got less than [`STARVED_FRACTION`] of the median vCPU time.
    pub starved: Vec<String>,
    /// Rule 4; absent for runs that did not record their placement.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub faithfulness: Option<Faithfulness>,
    /// Rule 6: the judgement of `other` and its reasons (the report writes the reasons), and
    /// every kernel's after the baseline.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judgement: Option<Judgement>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reasons: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub judgements: Vec<KernelJudgement>,
    /// The `[judgement]` the runs carry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judgement_spec: Option<gt_suite::JudgementSpec>,
    /// The regression's own report of the blocked-threads figure (suite::verdict rule 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observation: Option<String>,
    /// The sentence after the primary metric's (suite::verdict rule 3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub caveat: Option<String>,
}

impl Verdict {
    pub fn row(&self, role: &str) -> Option<&VerdictRow> {
        self.rows.iter().find(|r| r.role == role)
    }
}

fn figure(row: &MetricRow, kernel: &str) -> Option<KernelFigure> {
    let s = row.summary(kernel)?;
    Some(KernelFigure {
        kernel: kernel.to_string(),
        n: s.n,
        mean: s.mean,
        ci95: s.ci95.map(|(lo, hi)| (hi - lo) / 2.0),
        median: s.median,
        cv: s.cv,
        min: s.min,
        max: s.max,
    })
}

fn verdict_row(c: &Comparison, role: &str, metric: &str, other: &str) -> Option<VerdictRow> {
    let row = c.metric(metric).next()?;
    let base = figure(row, c.baseline())?;
    let oth = figure(row, other)?;
    let v = row.versus.iter().find(|v| v.kernel == other)?;
    let paired = v.paired.filter(|p| p.n >= 2);
    let (p, test) = match paired {
        Some(pd) if pd.t_p.is_some() => (pd.t_p, "paired t".to_string()),
        _ => (v.welch_p, "Welch t".to_string()),
    };
    Some(VerdictRow {
        role: role.to_string(),
        metric: metric.to_string(),
        unit: row.unit.clone(),
        base,
        other: oth,
        diff: v.diff,
        welch_p: v.welch_p,
        paired_diff: paired.map(|p| p.diff),
        paired_p: paired.and_then(|p| p.t_p),
        wilcoxon_p: paired.and_then(|p| p.wilcoxon_p),
        p,
        test,
    })
}

/// The verdict for the first two kernels of `c`, when the runs name a primary metric.
pub fn verdict(c: &Comparison, runs: &[RunResult]) -> Option<Verdict> {
    if several_grid_cells(runs) {
        return None;
    }
    let other = c.kernels.get(1)?.clone();
    let spec = judgement::spec_of(runs).cloned();
    let primary = runs.iter().find_map(|r| r.info.primary_metric.clone());
    if primary.is_none() && spec.is_none() {
        return None;
    }
    let primary = primary.unwrap_or_default();
    let secondary = runs.iter().find_map(|r| r.info.secondary_metric.clone());
    let step = primary.split('.').next().unwrap_or("").to_string();
    let mut rows = Vec::new();
    rows.extend(verdict_row(c, "primary", &primary, &other));
    if let Some(s) = &secondary {
        rows.extend(verdict_row(c, "secondary", s, &other));
    }
    // Throughput of every other step (the seed's sequential read), then the companions.
    let mut tput: Vec<&str> = c
        .rows
        .iter()
        .map(|r| r.metric.as_str())
        .filter(|m| m.ends_with(".bw_kib_s") && !m.starts_with(&format!("{step}.")))
        .collect();
    tput.dedup();
    for m in tput {
        rows.extend(verdict_row(c, "throughput", m, &other));
    }
    let words = verdict_spec_of(runs);
    for suffix in &words.companions {
        rows.extend(verdict_row(
            c,
            "companion",
            &format!("{step}.{suffix}"),
            &other,
        ));
    }
    let cpu_name = format!("{step}.guest_cpu_per_s");
    let cpu: Vec<(String, f64)> = runs
        .iter()
        .filter(|r| r.status.is_ok())
        .filter_map(|r| Some((r.info.run_dir.display().to_string(), r.metric(&cpu_name)?)))
        .collect();
    let mut sorted: Vec<f64> = cpu.iter().map(|(_, v)| *v).collect();
    sorted.sort_by(f64::total_cmp);
    let starved = if sorted.is_empty() {
        Vec::new()
    } else {
        let med = gt_results::metrics::median_sorted(&sorted);
        cpu.into_iter()
            .filter(|(_, v)| *v < STARVED_FRACTION * med)
            .map(|(d, _)| d)
            .collect()
    };
    let paired = rows
        .first()
        .is_some_and(|r| r.paired_p.is_some() || r.paired_diff.is_some());
    let judgements = judgement::judge_all(c, runs);
    Some(Verdict {
        faithfulness: faithfulness(c, runs, &step),
        base: c.baseline().to_string(),
        judgement: judgements.first().map(|k| k.judgement),
        judgements,
        judgement_spec: spec,
        reasons: Vec::new(),
        other,
        paired,
        rows,
        starved,
        observation: words.observation,
        caveat: words.caveat,
    })
}

/// Rule 5.
fn several_grid_cells(runs: &[RunResult]) -> bool {
    let mut cells = runs
        .iter()
        .filter(|r| r.info.sweep.as_ref().is_some_and(|s| s.series.is_some()))
        .map(|r| (r.info.suite.as_str(), r.info.variant.as_deref()));
    cells.next().is_some_and(|first| cells.any(|c| c != first))
}

/// Rule 4.
fn faithfulness(c: &Comparison, runs: &[RunResult], step: &str) -> Option<Faithfulness> {
    let ok: Vec<&RunResult> = runs.iter().filter(|r| r.status.is_ok()).collect();
    let mean_of = |name: &str| {
        let v: Vec<f64> = ok.iter().filter_map(|r| r.metric(name)).collect();
        (!v.is_empty()).then(|| gt_stats::mean(&v))
    };
    let vcpus_per_core = mean_of("harness.running_vcpus_per_core")?;
    let host_slice_ms = mean_of("harness.host_slice_ms")?;
    let dedicated = ok
        .iter()
        .all(|r| r.metric("harness.vcpu_cores_dedicated") == Some(1.0));
    let base_wait_mean_us = c
        .metric(&LockFigure::QlockWaitMeanUs.on(step))
        .next()
        .and_then(|row| row.summary(c.baseline()))
        .map(|s| s.mean);
    let long_wait = base_wait_mean_us.is_some_and(|w| w >= PREEMPTION_SLICES * host_slice_ms * 1e3);
    Some(Faithfulness {
        vcpus_per_core,
        dedicated,
        host_slice_ms,
        base_wait_mean_us,
        host_preemption_likely: vcpus_per_core > 1.0 || long_wait,
    })
}
