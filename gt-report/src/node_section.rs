//! The per-node section: which metrics it covers and its table ([`gt_compare::nodes`] has
//! the statistics).

use gt_compare::nodes::{node_effects, NodeRow};
use gt_compare::Comparison;
use gt_results::metrics::registry;
use gt_results::results::RunResult;

use super::tables::{fmt_num, fmt_p};

/// The metric every booted run has and that shows a node's own speed.
pub const NODE_SPEED_METRIC: &str = "harness.boot_to_fio_ready_s";

/// The metrics a node split is shown for: the runs' primary and secondary metric, else the
/// registry's headline metrics among the compared rows; then `NODE_SPEED_METRIC`.
pub fn node_metrics(runs: &[RunResult], c: &Comparison) -> Vec<String> {
    let mut v = named_metrics(runs, c);
    if c.rows.iter().any(|r| r.metric == NODE_SPEED_METRIC)
        && !v.iter().any(|m| m == NODE_SPEED_METRIC)
    {
        v.push(NODE_SPEED_METRIC.to_string());
    }
    v
}

fn named_metrics(runs: &[RunResult], c: &Comparison) -> Vec<String> {
    let named: Vec<String> = runs
        .iter()
        .flat_map(|r| {
            [
                r.info.primary_metric.clone(),
                r.info.secondary_metric.clone(),
            ]
        })
        .flatten()
        .fold(Vec::new(), |mut v, m| {
            if !v.contains(&m) {
                v.push(m);
            }
            v
        });
    if !named.is_empty() {
        return named;
    }
    let mut v: Vec<String> = c
        .rows
        .iter()
        .filter(|r| registry::is_headline(&r.metric))
        .map(|r| r.metric.clone())
        .collect();
    v.dedup();
    v
}

/// Node rows for the report (empty when the runs did not come from a scheduler or several
/// hosts).
pub fn node_rows(runs: &[RunResult], c: &Comparison) -> Vec<NodeRow> {
    if !gt_compare::nodes::applies(runs) {
        return Vec::new();
    }
    node_effects(runs, &c.kernels, &node_metrics(runs, c))
}

/// The table: one line per (metric, cell, node), the test on the cell's first line.
pub fn node_table(rows: &[NodeRow]) -> (Vec<String>, Vec<Vec<String>>) {
    let header = [
        "metric",
        "cell",
        "node",
        "runs",
        "per kernel: n × mean",
        "mean residual",
        "load before",
        "other jobs",
        "node effect (ANOVA of residuals)",
    ]
    .map(String::from)
    .to_vec();
    let mut out = Vec::new();
    for r in rows {
        let cell = match (&r.variant, r.suite.as_str()) {
            (Some(v), s) => format!("{s} {v}"),
            (None, s) => s.to_string(),
        };
        for (i, n) in r.nodes.iter().enumerate() {
            let test = if i > 0 {
                String::new()
            } else if let (Some(f), Some((d1, d2))) = (r.f, r.df) {
                format!("F({d1}, {d2}) = {}, p {}", fmt_num(f), fmt_p(r.p))
            } else {
                r.untested.clone().unwrap_or_default()
            };
            out.push(vec![
                if i == 0 {
                    r.metric.clone()
                } else {
                    String::new()
                },
                if i == 0 { cell.clone() } else { String::new() },
                n.node.clone(),
                n.runs.to_string(),
                n.per_kernel
                    .iter()
                    .map(|(k, c, m)| format!("{k}: {c} × {}", fmt_num(*m)))
                    .collect::<Vec<_>>()
                    .join(", "),
                match n.relative {
                    Some(rel) => format!("{} ({:+.1} %)", fmt_num(n.mean_residual), rel * 100.0),
                    None => fmt_num(n.mean_residual),
                },
                n.load_before.map_or("–".into(), |l| format!("{l:.2}")),
                n.other_jobs.to_string(),
                test,
            ]);
        }
    }
    (header, out)
}

/// The paragraph above the table.
pub const NODE_NOTE: &str = "Residual = value - its kernel's mean in the cell, so a node that \
    ran more of one kernel is not read as a node effect. The test is a one-way ANOVA of the \
    residuals by node (F with g - 1 and N - k - g + 1 degrees of freedom: g nodes, k kernels, N \
    runs). A small p says the node moved the figures: compare within a node, or exclude it.";
