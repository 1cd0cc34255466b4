//! Per-node effects: whether the machine a run landed on moved its figures.
//!
//! Rules:
//! 1. A run's node is the batch scheduler's node name (`provenance.scheduler.node`), else the
//!    host's name (`provenance.host.hostname`), else `?`. Only successful runs count.
//! 2. For one metric in one (suite, variant, sweep) cell, each value's residual is its distance
//!    from its kernel's mean in that cell, so a node that happened to run more of one kernel is
//!    not mistaken for a node effect.
//! 3. The test is a one-way ANOVA of those residuals by node: F = (SSB / (g - 1)) /
//!    (SSW / (N - k - g + 1)) with g nodes, k kernels and N values (the kernel means used up
//!    k - 1 further degrees of freedom), p from Fisher-Snedecor. It needs g >= 2 and a positive
//!    residual degree of freedom; otherwise the row has no p and says why.
//! 4. Per node the row keeps the runs, each kernel's mean there, the mean residual (as a
//!    fraction of the cell's grand mean), the mean 1-minute load before the runs and the other
//!    scheduler jobs seen on the node when they started.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use statrs::distribution::{ContinuousCDF, FisherSnedecor};

use gt_results::results::{RunResult, SweepPoint};
use gt_stats::mean;

/// One node's share of a cell.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeFigures {
    pub node: String,
    pub runs: usize,
    /// Kernel -> (n, mean) on this node, in kernel order.
    pub per_kernel: Vec<(String, usize, f64)>,
    /// Mean residual (value - its kernel's cell mean) on this node.
    pub mean_residual: f64,
    /// `mean_residual` / the cell's grand mean (None when that is 0).
    pub relative: Option<f64>,
    /// Mean 1-minute load average before the runs (None when no run recorded it).
    pub load_before: Option<f64>,
    /// Other scheduler jobs seen on the node when its runs started (total over the runs).
    pub other_jobs: usize,
}

/// One metric in one cell, split by node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeRow {
    pub suite: String,
    pub variant: Option<String>,
    pub sweep: Option<SweepPoint>,
    pub metric: String,
    pub nodes: Vec<NodeFigures>,
    /// F statistic, its degrees of freedom and p (rule 3), when testable.
    pub f: Option<f64>,
    pub df: Option<(usize, usize)>,
    pub p: Option<f64>,
    /// Why there is no test (one node, too few runs), when there is none.
    pub untested: Option<String>,
}

/// The node a run ran on (rule 1).
pub fn node_of(r: &RunResult) -> String {
    let p = &r.provenance;
    p.scheduler
        .as_ref()
        .map(|s| s.node.clone())
        .filter(|n| !n.is_empty())
        .or_else(|| Some(p.host.hostname.clone()).filter(|h| !h.is_empty()))
        .unwrap_or_else(|| "?".into())
}

/// Whether a node section is worth showing: a scheduler placed the runs, or they span hosts.
pub fn applies(runs: &[RunResult]) -> bool {
    let ok: Vec<&RunResult> = runs.iter().filter(|r| r.status.is_ok()).collect();
    ok.iter().any(|r| r.provenance.scheduler.is_some())
        || ok.iter().map(|r| node_of(r)).collect::<BTreeSet<_>>().len() > 1
}

/// Node rows for `metrics` (exact names) in every cell where they have values; `kernels`
/// fixes the kernel order of the per-node means.
pub fn node_effects(runs: &[RunResult], kernels: &[String], metrics: &[String]) -> Vec<NodeRow> {
    let ok: Vec<&RunResult> = runs.iter().filter(|r| r.status.is_ok()).collect();
    let cells = super::cells_of(&ok);
    let mut rows = Vec::new();
    for cell in &cells {
        for m in metrics {
            // (node, kernel, value, load, other jobs)
            let pts: Vec<Pt> = ok
                .iter()
                .filter(|r| {
                    r.info.suite == cell.0 && r.info.variant == cell.1 && r.info.sweep == cell.2
                })
                .filter_map(|r| {
                    let v = r.metric(m).filter(|v| v.is_finite())?;
                    let s = r.provenance.scheduler.as_ref();
                    Some((
                        node_of(r),
                        r.info.kernel.as_str(),
                        v,
                        r.provenance.host.loadavg_before.map(|l| l[0]),
                        s.map_or(0, |s| s.other_jobs.len()),
                    ))
                })
                .collect();
            if pts.is_empty() {
                continue;
            }
            rows.push(row(cell, m, kernels, &pts));
        }
    }
    rows
}

/// [`mean`] of the values an iterator gives; None when it gives none.
fn mean_of(x: impl Iterator<Item = f64>) -> Option<f64> {
    let v: Vec<f64> = x.collect();
    (!v.is_empty()).then(|| mean(&v))
}

/// One run's point: (node, kernel, value, load average before, other jobs on the node).
type Pt<'a> = (String, &'a str, f64, Option<f64>, usize);

fn row(
    (suite, variant, sweep): &(String, Option<String>, Option<SweepPoint>),
    metric: &str,
    kernels: &[String],
    pts: &[Pt<'_>],
) -> NodeRow {
    let kmeans: BTreeMap<&str, f64> = pts
        .iter()
        .map(|p| p.1)
        .collect::<BTreeSet<_>>()
        .into_iter()
        .filter_map(|k| Some((k, mean_of(pts.iter().filter(|p| p.1 == k).map(|p| p.2))?)))
        .collect();
    let mut out = NodeRow {
        suite: suite.clone(),
        variant: variant.clone(),
        sweep: sweep.clone(),
        metric: metric.to_string(),
        nodes: node_figures(kernels, pts, &kmeans),
        f: None,
        df: None,
        p: None,
        untested: None,
    };
    node_f_test(&mut out, pts, &kmeans);
    out
}

/// Each node's figures: runs, per-kernel means (`kernels`' order, then the others), the mean
/// residual against each kernel's mean (`kmeans`), relative to the grand mean, load, other jobs.
fn node_figures(
    kernels: &[String],
    pts: &[Pt<'_>],
    kmeans: &BTreeMap<&str, f64>,
) -> Vec<NodeFigures> {
    let grand = mean_of(pts.iter().map(|p| p.2)).unwrap_or(0.0);
    let resid = |p: &Pt<'_>| p.2 - kmeans[p.1];
    let node_names: BTreeSet<&str> = pts.iter().map(|p| p.0.as_str()).collect();
    let mut order: Vec<&str> = kernels.iter().map(String::as_str).collect();
    order.extend(kmeans.keys().filter(|k| !kernels.iter().any(|x| x == *k)));
    node_names
        .iter()
        .map(|&n| {
            let here: Vec<_> = pts.iter().filter(|p| p.0 == n).collect();
            let mr = mean_of(here.iter().map(|p| resid(p))).unwrap_or(0.0);
            // Rounding noise of the subtraction (one node: exactly 0 in exact arithmetic).
            let mr = if mr.abs() <= 1e-9 * grand.abs() {
                0.0
            } else {
                mr
            };
            NodeFigures {
                node: n.to_string(),
                runs: here.len(),
                per_kernel: order
                    .iter()
                    .filter_map(|&k| {
                        let v: Vec<f64> = here.iter().filter(|p| p.1 == k).map(|p| p.2).collect();
                        Some((k.to_string(), v.len(), mean_of(v.into_iter())?))
                    })
                    .collect(),
                mean_residual: mr,
                relative: (grand != 0.0).then(|| mr / grand),
                load_before: mean_of(here.iter().filter_map(|p| p.3)),
                other_jobs: here.iter().map(|p| p.4).sum(),
            }
        })
        .collect()
}

/// The one-way F test of the node effect on the residuals (kernel means removed) into `out`,
/// or why it was not tested (one node, no residual degree of freedom, no spread).
fn node_f_test(out: &mut NodeRow, pts: &[Pt<'_>], kmeans: &BTreeMap<&str, f64>) {
    let resid = |p: &Pt<'_>| p.2 - kmeans[p.1];
    let (g, k, n) = (out.nodes.len(), kmeans.len(), pts.len());
    if g < 2 {
        out.untested = Some("one node: no node effect to test".into());
        return;
    }
    let Some(df2) = (n + 1).checked_sub(k + g).filter(|d| *d > 0) else {
        out.untested = Some(format!(
            "{n} values, {k} kernels, {g} nodes: no residual degree of freedom"
        ));
        return;
    };
    let ssb: f64 = out
        .nodes
        .iter()
        .map(|nf| nf.runs as f64 * nf.mean_residual * nf.mean_residual)
        .sum();
    let ssw: f64 = pts
        .iter()
        .map(|p| {
            let nm = out
                .nodes
                .iter()
                .find(|nf| nf.node == p.0)
                .map_or(0.0, |nf| nf.mean_residual);
            (resid(p) - nm).powi(2)
        })
        .sum();
    let df1 = g - 1;
    out.df = Some((df1, df2));
    if ssw <= 0.0 {
        out.untested = Some("no spread within nodes".into());
        return;
    }
    let f = (ssb / df1 as f64) / (ssw / df2 as f64);
    out.f = Some(f);
    out.p = FisherSnedecor::new(df1 as f64, df2 as f64)
        .ok()
        .map(|d| d.sf(f));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::run;
    use gt_results::results::SchedulerInfo;

    fn on(node: &str, kernel: &str, v: f64, load: f64) -> RunResult {
        let mut r = run(kernel, None, &[("m", v)]);
        r.provenance.scheduler = Some(SchedulerInfo {
            name: "slurm".into(),
            node: node.into(),
            other_jobs: if node == "busy" {
                vec!["7 u x".into()]
            } else {
                vec![]
            },
            ..Default::default()
        });
        r.provenance.host.loadavg_before = Some([load, 0.0, 0.0]);
        r
    }

    #[test]
    fn a_slow_node_is_found_whatever_the_kernel_mix() {
        // Kernel b is 10 higher; node "busy" adds 5 to everything it runs, and runs mostly b.
        let mut runs = Vec::new();
        for (i, d) in [0.1, -0.2, 0.15, -0.05].iter().enumerate() {
            runs.push(on("n1", "a", 100.0 + d, 0.5));
            if i == 0 {
                runs.push(on("n1", "b", 110.0 + d, 0.5));
            } else {
                runs.push(on("busy", "b", 115.0 + d, 3.0));
            }
            runs.push(on("busy", "a", 105.0 - d, 3.0));
        }
        let rows = node_effects(&runs, &["a".into(), "b".into()], &["m".into()]);
        assert_eq!(rows.len(), 1);
        let r = &rows[0];
        assert_eq!(r.nodes.len(), 2);
        let busy = r.nodes.iter().find(|n| n.node == "busy").unwrap();
        let n1 = r.nodes.iter().find(|n| n.node == "n1").unwrap();
        assert!(busy.mean_residual > 1.5 && n1.mean_residual < -1.5, "{r:?}");
        assert_eq!(busy.other_jobs, 7);
        assert_eq!(busy.load_before, Some(3.0));
        assert_eq!(r.df, Some((1, 12 - 2 - 2 + 1)));
        assert!(r.p.unwrap() < 1e-6, "{r:?}");
    }

    #[test]
    fn no_node_effect_gives_a_large_p_and_one_node_is_not_tested() {
        let mut runs = Vec::new();
        for d in [0.3, -0.1, 0.2, -0.4, 0.0, 0.1] {
            runs.push(on("n1", "a", 10.0 + d, 1.0));
            runs.push(on("n2", "a", 10.0 - d, 1.0));
            runs.push(on("n1", "b", 20.0 - d, 1.0));
            runs.push(on("n2", "b", 20.0 + d, 1.0));
        }
        let r = &node_effects(&runs, &[], &["m".into()])[0];
        assert!(r.p.unwrap() > 0.5, "{r:?}");
        assert_eq!(r.nodes[0].per_kernel.len(), 2);

        let one: Vec<RunResult> = (0..4).map(|i| on("n1", "a", i as f64, 0.0)).collect();
        let r = &node_effects(&one, &[], &["m".into()])[0];
        assert!(r.p.is_none() && r.untested.as_deref().unwrap().starts_with("one node"));
        assert!(applies(&one));
        let local: Vec<RunResult> = (0..4).map(|i| run("a", None, &[("m", i as f64)])).collect();
        assert!(
            !applies(&local),
            "local runs on one host get no node section"
        );
    }
}
