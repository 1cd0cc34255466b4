//! Per-run values of chosen metrics and, per kernel, n, min, max and sum over its successful
//! runs: the figures that means and tests do not give (a storm's cycles in all, each boot's
//! value, round-by-round differences). `compare --runs` prints them.
//!
//! Contract:
//! 1. One row per run, in the order the runs are given (`load_runs` sorts them the one way),
//!    named by the last component of its run directory; a metric the run lacks is `None`.
//! 2. A failed or timed-out run is listed with its state and left out of the per-kernel
//!    figures.
//! 3. Kernels come in the order they first appear; each gets one line per metric that at least
//!    one of its successful runs has.

use serde::Serialize;

use gt_results::results::{RunResult, RunStatus};

/// One run's values of the chosen metrics.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunRow {
    pub run: String,
    pub kernel: String,
    pub repeat: u32,
    /// `ok`, `failed` or `timed out`.
    pub state: &'static str,
    pub values: Vec<Option<f64>>,
}

/// One kernel's successful runs for one metric.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct KernelTotals {
    pub kernel: String,
    pub metric: String,
    pub n: usize,
    pub min: f64,
    pub max: f64,
    pub sum: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunsTable {
    pub metrics: Vec<String>,
    pub rows: Vec<RunRow>,
    pub totals: Vec<KernelTotals>,
}

fn state(s: &RunStatus) -> &'static str {
    match s {
        RunStatus::Ok => "ok",
        RunStatus::Failed { .. } => "failed",
        RunStatus::TimedOut { .. } => "timed out",
    }
}

fn row(r: &RunResult, metrics: &[String]) -> RunRow {
    let dir = &r.info.run_dir;
    RunRow {
        run: dir.file_name().map_or_else(
            || dir.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        ),
        kernel: r.info.kernel.clone(),
        repeat: r.info.repeat,
        state: state(&r.status),
        values: metrics.iter().map(|m| r.metrics.get(m).copied()).collect(),
    }
}

/// The table of `metrics` over `runs` (rules 1-3).
pub fn runs_table(runs: &[RunResult], metrics: &[String]) -> RunsTable {
    let rows: Vec<RunRow> = runs.iter().map(|r| row(r, metrics)).collect();
    let mut kernels: Vec<String> = Vec::new();
    for r in &rows {
        if !kernels.contains(&r.kernel) {
            kernels.push(r.kernel.clone());
        }
    }
    let mut totals = Vec::new();
    for k in &kernels {
        for (i, m) in metrics.iter().enumerate() {
            let col: Vec<f64> = rows
                .iter()
                .filter(|r| &r.kernel == k && r.state == "ok")
                .filter_map(|r| r.values.get(i).copied().flatten())
                .collect();
            if col.is_empty() {
                continue;
            }
            totals.push(KernelTotals {
                kernel: k.clone(),
                metric: m.clone(),
                n: col.len(),
                min: col.iter().copied().fold(f64::INFINITY, f64::min),
                max: col.iter().copied().fold(f64::NEG_INFINITY, f64::max),
                sum: col.iter().sum(),
            });
        }
    }
    RunsTable {
        metrics: metrics.to_vec(),
        rows,
        totals,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::run;

    #[test]
    fn rows_in_order_totals_over_successful_runs_only() {
        let mut v = vec![
            run("a", None, &[("x", 1.0), ("y", 10.0)]),
            run("b", None, &[("x", 5.0)]),
            run("a", None, &[("x", 3.0)]),
            run("a", None, &[("x", 100.0), ("y", 1.0)]),
        ];
        v[3].status = RunStatus::Failed {
            reason: "boot".into(),
        };
        let t = runs_table(&v, &["x".to_string(), "y".to_string()]);
        assert_eq!(t.rows.len(), 4);
        assert_eq!(t.rows[1].kernel, "b");
        assert_eq!(t.rows[2].values, vec![Some(3.0), None]);
        assert_eq!(t.rows[3].state, "failed");
        // a: x over runs 0 and 2 (the failed run is left out), y over run 0 only; b: x only.
        let a_x = &t.totals[0];
        assert_eq!((a_x.kernel.as_str(), a_x.metric.as_str()), ("a", "x"));
        assert_eq!((a_x.n, a_x.min, a_x.max, a_x.sum), (2, 1.0, 3.0, 4.0));
        assert_eq!((t.totals[1].metric.as_str(), t.totals[1].n), ("y", 1));
        assert_eq!(t.totals[2].kernel, "b");
        assert_eq!(t.totals.len(), 3);
    }

    #[test]
    fn a_metric_no_run_has_gives_dashes_and_no_totals() {
        let v = vec![run("a", None, &[("x", 1.0)])];
        let t = runs_table(&v, &["nope".to_string()]);
        assert_eq!(t.rows[0].values, vec![None]);
        assert!(t.totals.is_empty());
    }
}
