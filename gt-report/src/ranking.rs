//! Kernels ranked by throughput in each cell of a grid sweep: which fix version gives back the
//! most of what the base kernel loses.
//!
//! Rules:
//! 1. Only rows of a grid sweep (a sweep point with a series, `suite/cells.rs`) and only
//!    throughput metrics: `<step>.iops` and `<step>.bw_mb_s` (more is better).
//! 2. In each cell the kernels are ordered by their mean, highest first, each with its mean and
//!    its ratio to the baseline's mean; a kernel without values in the cell is left out.
//! 3. Nothing here for other runs, so reports of earlier experiments are unchanged.

use super::block::Block;
use super::tables::fmt_num;
use gt_compare::{Comparison, MetricRow};

fn ranked(c: &Comparison, r: &MetricRow) -> Option<String> {
    let base = r.summary(c.baseline())?.mean;
    let mut ks: Vec<(&str, f64)> = r
        .per_kernel
        .iter()
        .map(|(k, s)| (k.as_str(), s.mean))
        .collect();
    ks.sort_by(|a, b| b.1.total_cmp(&a.1));
    let parts: Vec<String> = ks
        .iter()
        .map(|(k, m)| {
            if base > 0.0 && *k != c.baseline() {
                format!("{k} {} ({:.2}x)", fmt_num(*m), m / base)
            } else {
                format!("{k} {}", fmt_num(*m))
            }
        })
        .collect();
    Some(parts.join(" > "))
}

/// The ranking blocks (rule 3: none for runs outside a grid).
pub(super) fn blocks(c: &Comparison) -> Vec<Block> {
    let rows: Vec<Vec<String>> = c
        .rows
        .iter()
        .filter(|r| r.sweep.as_ref().is_some_and(|s| s.series.is_some()))
        .filter(|r| r.metric.ends_with(".iops") || r.metric.ends_with(".bw_mb_s"))
        .filter_map(|r| {
            Some(vec![
                format!("`{}` ({})", r.metric, r.unit),
                r.cell_label(c.several_suites()),
                ranked(c, r)?,
            ])
        })
        .collect();
    if rows.is_empty() {
        return Vec::new();
    }
    vec![
        Block::Heading(2, "Throughput ranking per cell".into()),
        Block::Para(
            "Each cell's kernels by mean throughput, highest first, with the ratio to the \
             baseline's mean (statistics per pair: the comparison table)."
                .into(),
        ),
        Block::Table(
            ["metric", "cell", "ranking"].map(String::from).to_vec(),
            rows,
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use gt_compare::fixtures::run;
    use gt_results::results::SweepPoint;

    fn grid_run(kernel: &str, iops: f64, series: Option<&str>) -> gt_results::results::RunResult {
        let mut r = run(
            kernel,
            Some(("q62-c2", 62.0)),
            &[("rr.iops", iops), ("rr.wait", 1.0)],
        );
        r.info.sweep = Some(SweepPoint {
            param: "hw_queues".into(),
            value: 62.0,
            series: series.map(String::from),
        });
        r
    }

    #[test]
    fn grid_cells_rank_kernels_by_mean_throughput() {
        let mut runs = Vec::new();
        for (k, base) in [("rt", 100.0), ("v2", 130.0), ("v7", 140.0)] {
            for d in [0.0, 2.0] {
                runs.push(grid_run(k, base + d, Some("2 running vCPUs")));
            }
        }
        let c = gt_compare::compare(&runs, &[]).unwrap();
        let b = blocks(&c);
        let Some(Block::Table(_, rows)) = b.get(2) else {
            panic!("{b:?}")
        };
        assert_eq!(rows.len(), 1, "only the throughput metric: {rows:?}");
        assert_eq!(rows[0][2], "v7 141.0 (1.40x) > v2 131.0 (1.30x) > rt 101.0");
        // Not a grid: no ranking (earlier reports stay as they were).
        let flat: Vec<_> = runs
            .into_iter()
            .map(|mut r| {
                r.info.sweep.as_mut().unwrap().series = None;
                r
            })
            .collect();
        assert!(blocks(&gt_compare::compare(&flat, &[]).unwrap()).is_empty());
    }
}
