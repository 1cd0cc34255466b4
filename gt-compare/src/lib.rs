//! A/B comparison of kernels over results.json files: runs are grouped by suite, variant
//! (sweep cell) and kernel; for every metric each kernel gets a [`Summary`] and every non-baseline kernel a
//! [`Versus`] against the baseline (the first kernel).
//!
//! Statistics only: rendering is the report's. Units and directions come from the metric
//! registry ([`gt_results::metrics::registry`]).
//!
//! Statistics are in `stats`: CI of the mean from Student's t, Welch's t-test (both
//! `gt-stats`'s), Mann-Whitney U (exact without ties, else normal approximation) and an
//! LKP-style flag (|median change| >= 5 %, non-overlapping min-max ranges, at least 2 runs per
//! kernel).

#![cfg_attr(test, allow(clippy::too_many_lines))]

pub mod components;
pub mod judgement;
pub mod nodes;
pub mod power;
pub mod runs;
pub mod sequential;
pub mod spread;
mod stats;
pub mod verdict;

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use gt_results::metrics::registry::{self, Better};
use gt_results::results::{kernel_order, RunResult, SweepPoint};
use gt_stats::{mean, variance, welch_p};

pub use stats::{lkp_flag, mann_whitney, summarize, Mwu, MwuMethod, Summary, MWU_EXACT_MAX_N};

/// Relative median change that, with disjoint ranges, raises the flag.
pub const LKP_THRESHOLD: f64 = 0.05;

/// Why a comparison cannot be made.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum CompareError {
    #[error("no successful runs to compare")]
    NoRuns,
    #[error("kernel {0:?} has no runs")]
    MissingKernel(String),
}

/// One kernel measured against the baseline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Versus {
    pub kernel: String,
    /// median(kernel) / median(baseline); None when the baseline median is 0.
    pub ratio: Option<f64>,
    pub welch_p: Option<f64>,
    pub mwu: Option<Mwu>,
    pub flag: bool,
    /// For a flagged change of a metric with a direction (registry): whether it went the better
    /// way. None when not flagged, or for metrics that are neither better higher nor lower.
    #[serde(default)]
    pub improved: Option<bool>,
    /// mean(kernel) - mean(baseline) with the half-width of its 95 % Welch CI.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diff: Option<Diff>,
    /// Paired design: statistics of the per-pair differences (kernel - baseline).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paired: Option<Paired>,
}

/// A difference of means and its 95 % confidence half-width.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Diff {
    pub mean: f64,
    pub ci95: f64,
}

/// Per-pair differences (kernel - baseline) over the pairs where both ran.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Paired {
    pub n: usize,
    pub diff: Diff,
    /// Paired t-test, two-sided.
    pub t_p: Option<f64>,
    /// Wilcoxon signed-rank, two-sided (exact for n <= 30).
    pub wilcoxon_p: Option<f64>,
}

/// Welch's difference of means (b - a) with its 95 % CI half-width (`gt_stats` rules 3 and 5:
/// 0 when both samples have zero variance).
fn welch_diff(a: &[f64], b: &[f64]) -> Option<Diff> {
    let (se2, df) = gt_stats::welch_terms(a, b)?;
    Some(Diff {
        mean: mean(b) - mean(a),
        ci95: gt_stats::half_width_95(se2, df)?,
    })
}

/// Paired statistics over the pair ids both kernels have.
fn paired(base: &BTreeMap<u32, f64>, other: &BTreeMap<u32, f64>) -> Option<Paired> {
    let d: Vec<f64> = base
        .iter()
        .filter_map(|(p, b)| other.get(p).map(|o| o - b))
        .collect();
    if d.len() < 2 {
        return None;
    }
    let (m, v) = (mean(&d), variance(&d));
    Some(Paired {
        n: d.len(),
        diff: Diff {
            mean: m,
            ci95: gt_stats::half_width_95(v / d.len() as f64, (d.len() - 1) as f64)?,
        },
        t_p: gt_stats::paired_t_p(&d),
        wilcoxon_p: sequential::wilcoxon_signed_rank_p(&d),
    })
}

/// One metric in one (suite, variant) cell.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MetricRow {
    pub suite: String,
    pub variant: Option<String>,
    pub sweep: Option<SweepPoint>,
    pub metric: String,
    /// The metric's unit and direction from the registry (empty / None when undeclared).
    #[serde(default)]
    pub unit: String,
    #[serde(default)]
    pub better: Option<Better>,
    /// Kernel -> summary, in kernel order (kernels without values are absent).
    pub per_kernel: Vec<(String, Summary)>,
    pub versus: Vec<Versus>,
    /// Kernel -> the raw values, in run order (what the strip plots draw).
    pub values: BTreeMap<String, Vec<f64>>,
}

impl MetricRow {
    /// The cell's name for tables and plots: the variant, prefixed by the suite when the
    /// comparison spans several suites.
    pub fn cell_label(&self, several_suites: bool) -> String {
        match (several_suites, &self.variant) {
            (true, Some(v)) => format!("{} {v}", self.suite),
            (true, None) => self.suite.clone(),
            (false, Some(v)) => v.clone(),
            (false, None) => String::new(),
        }
    }

    pub fn summary(&self, kernel: &str) -> Option<&Summary> {
        self.per_kernel
            .iter()
            .find(|(k, _)| k == kernel)
            .map(|(_, s)| s)
    }
}

/// The whole comparison.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    /// Kernel order; the first is the baseline.
    pub kernels: Vec<String>,
    pub rows: Vec<MetricRow>,
    /// Runs left out because they did not succeed: (run dir, status).
    pub excluded: Vec<(String, String)>,
    /// Suites of the compared runs (rows of different suites are never pooled).
    pub suites: Vec<String>,
}

impl Comparison {
    pub fn several_suites(&self) -> bool {
        self.suites.len() > 1
    }

    pub fn baseline(&self) -> &str {
        self.kernels.first().map_or("", String::as_str)
    }

    /// Rows for one metric across variants.
    pub fn metric<'a>(&'a self, metric: &'a str) -> impl Iterator<Item = &'a MetricRow> + 'a {
        self.rows.iter().filter(move |r| r.metric == metric)
    }
}

/// A (suite, variant, sweep point) cell: runs of different cells are never pooled.
pub(crate) type Cell = (String, Option<String>, Option<SweepPoint>);

/// The cells of `runs`, in order of first appearance.
pub(crate) fn cells_of(runs: &[&RunResult]) -> Vec<Cell> {
    let mut cells: Vec<Cell> = Vec::new();
    for r in runs {
        let c = (
            r.info.suite.clone(),
            r.info.variant.clone(),
            r.info.sweep.clone(),
        );
        if !cells.contains(&c) {
            cells.push(c);
        }
    }
    cells
}

/// Compares `runs` (in the order of [`gt_results::results::load_runs`]). `kernels` fixes the order
/// (first = baseline); when empty, [`kernel_order`] picks it. Failed runs are excluded from the
/// figures and listed; a kernel whose every run failed keeps its place in the order, with no
/// figures (the judgement reads its failures, `judgement::boots`).
pub fn compare(runs: &[RunResult], kernels: &[String]) -> Result<Comparison, CompareError> {
    let mut excluded = Vec::new();
    let ok: Vec<&RunResult> = runs
        .iter()
        .filter(|r| {
            let keep = r.status.is_ok();
            if !keep {
                excluded.push((
                    r.info.run_dir.display().to_string(),
                    format!("{:?}", r.status),
                ));
            }
            keep
        })
        .collect();
    if ok.is_empty() {
        return Err(CompareError::NoRuns);
    }
    // A kernel with runs, none successful, stays in the order (judged on its failures).
    let order = kernel_order(runs, kernels);
    for k in &order {
        if !runs.iter().any(|r| &r.info.kernel == k) {
            return Err(CompareError::MissingKernel(k.clone()));
        }
    }
    // Cells: by suite, then sweep value, then label.
    let mut cells = cells_of(&ok);
    cells.sort_by(|a, b| {
        let key = |v: &Cell| v.2.as_ref().map(|s| s.value);
        a.0.cmp(&b.0)
            .then_with(|| {
                key(a)
                    .partial_cmp(&key(b))
                    .unwrap_or(std::cmp::Ordering::Equal)
            })
            .then_with(|| a.1.cmp(&b.1))
    });
    let mut suites: Vec<String> = cells.iter().map(|c| c.0.clone()).collect();
    suites.dedup();
    let metrics: BTreeSet<&String> = ok.iter().flat_map(|r| r.metrics.keys()).collect();
    let mut rows = Vec::new();
    for cell in &cells {
        let runs: Vec<&&RunResult> = ok
            .iter()
            .filter(|r| {
                r.info.suite == cell.0 && r.info.variant == cell.1 && r.info.sweep == cell.2
            })
            .collect();
        for m in &metrics {
            let (values, pairs) = kernel_values(&runs, m, &order);
            if values.is_empty() {
                continue;
            }
            rows.push(row(cell, m, &order, values, &pairs));
        }
    }
    Ok(Comparison {
        kernels: order,
        rows,
        excluded,
        suites,
    })
}

/// Per kernel, the values of paired runs by pair number.
type Pairs = BTreeMap<String, BTreeMap<u32, f64>>;

/// One cell's values of `metric` per kernel (kernels without any left out) and, for paired
/// runs, per kernel the values by pair number.
fn kernel_values(
    runs: &[&&RunResult],
    metric: &str,
    order: &[String],
) -> (BTreeMap<String, Vec<f64>>, Pairs) {
    let mut values: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    let mut pairs: Pairs = BTreeMap::new();
    for k in order {
        let v: Vec<f64> = runs
            .iter()
            .filter(|r| &r.info.kernel == k)
            .filter_map(|r| r.metric(metric))
            .collect();
        if !v.is_empty() {
            values.insert(k.clone(), v);
        }
        let p: BTreeMap<u32, f64> = runs
            .iter()
            .filter(|r| &r.info.kernel == k)
            .filter_map(|r| Some((r.info.pair?, r.metric(metric)?)))
            .collect();
        if !p.is_empty() {
            pairs.insert(k.clone(), p);
        }
    }
    (values, pairs)
}

fn row(
    (suite, variant, sweep): &(String, Option<String>, Option<SweepPoint>),
    metric: &str,
    order: &[String],
    values: BTreeMap<String, Vec<f64>>,
    pairs: &Pairs,
) -> MetricRow {
    let per_kernel: Vec<(String, Summary)> = order
        .iter()
        .filter_map(|k| Some((k.clone(), summarize(values.get(k)?)?)))
        .collect();
    let def = registry::find(metric).map(|r| r.def);
    let better = def.map(|d| d.better);
    let mut versus = Vec::new();
    let base = &order[0];
    if let (Some(bv), Some(bs)) = (
        values.get(base),
        per_kernel.iter().find(|(k, _)| k == base).map(|(_, s)| s),
    ) {
        for (k, s) in per_kernel.iter().filter(|(k, _)| k != base) {
            let ov = &values[k];
            let flag = lkp_flag(bs, s, LKP_THRESHOLD);
            let up = s.median > bs.median;
            versus.push(Versus {
                kernel: k.clone(),
                ratio: (bs.median != 0.0).then(|| s.median / bs.median),
                welch_p: welch_p(bv, ov),
                mwu: mann_whitney(bv, ov),
                flag,
                improved: match better {
                    Some(Better::Higher) if flag => Some(up),
                    Some(Better::Lower) if flag => Some(!up),
                    _ => None,
                },
                diff: welch_diff(bv, ov),
                paired: pairs
                    .get(base)
                    .zip(pairs.get(k))
                    .and_then(|(b, o)| paired(b, o)),
            });
        }
    }
    MetricRow {
        suite: suite.clone(),
        variant: variant.clone(),
        sweep: sweep.clone(),
        metric: metric.to_string(),
        unit: def.map_or_else(String::new, |d| d.unit.to_string()),
        better,
        per_kernel,
        versus,
        values,
    }
}

#[cfg(any(test, feature = "fixtures"))]
pub mod fixtures;
#[cfg(test)]
mod tests;
