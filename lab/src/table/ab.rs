//! `table ab`: experiments/bench-ab.sh's table, old build (A) against new (B), of one run (that
//! script says how each file is measured).
//!
//! 1. Files in OUT_DIR: per round R (1..=ROUNDS), configuration C and side S (A or B)
//!    `rR-C-S.json`, the bench's `--json`. A missing file is a failed run: its round is left out.
//! 2. A round counts for C when both sides have ops per backend CPU-second other than zero (the
//!    pair). Without any pair C's row is `-` and 0 rounds.
//! 3. A and B: the medians of the pairs' figures; `B/A of medians`; the paired ratios B / A,
//!    their geometric mean (exp of the mean of the natural logs, `gt_stats::geo_mean`) and
//!    min..max.
//! 4. The 95 % confidence interval of that geometric mean: Student's t on the natural logs of
//!    the paired ratios (n - 1 degrees of freedom), back through exp; `-` with fewer than two
//!    pairs. It says what a run of this many rounds can tell apart: an interval wider than the
//!    difference being asked about leaves the question open. A ratio that is not positive (a
//!    negative figure) has no logarithm: the geometric mean and its interval are `-`.
//! 5. IOPS: per side the median of the runs' total IOPS other than zero, over every round
//!    (not only the pairs); `nan` when there is none.

use std::path::{Path, PathBuf};

use super::{load, median, Names, TableError};
use gt_report::pyfmt::{fixed, grouped};
use vhost_blk_bench::report::Report;

#[derive(Debug, clap::Args)]
pub(crate) struct AbArgs {
    /// The run's directory (experiments/bench-ab.sh's OUT_DIR).
    #[arg(value_name = "OUT_DIR", value_parser = super::run_dir)]
    dir: PathBuf,
    /// Rounds of the run (the script's ROUNDS).
    #[arg(long, default_value_t = 6, value_parser = clap::value_parser!(u32).range(1..=1000))]
    rounds: u32,
    /// Configurations in the table's order, white-space separated (CONFIGS).
    #[arg(
        long,
        default_value = "null-bench null-blkio mem-bench mem-blkio memw-bench scsi10-bench",
        value_parser = super::names
    )]
    configs: Names,
}

const HEAD: &str = "| configuration | A ops/backend-CPU-s (median) | B (median) | B/A of medians \
    | paired B/A (geo. mean, min..max) | 95 % CI of the paired geo. mean | A IOPS | B IOPS | rounds \
    |\n|---|---|---|---|---|---|---|---|---|";

/// A figure other than zero (the script's truth test).
fn nonzero(x: Option<f64>) -> Option<f64> {
    x.filter(|&x| x != 0.0)
}

/// One side's runs of configuration `c`, round by round (`None`: no file).
fn side(dir: &Path, rounds: u32, c: &str, s: char) -> Result<Vec<Option<Report>>, TableError> {
    (1..=rounds)
        .map(|r| load(&dir.join(format!("r{r}-{c}-{s}.json"))))
        .collect()
}

/// The table (module docs).
pub(crate) fn table(a: &AbArgs) -> Result<String, TableError> {
    let mut out = vec![HEAD.to_string()];
    for c in &a.configs.0 {
        let runs_a = side(&a.dir, a.rounds, c, 'A')?;
        let runs_b = side(&a.dir, a.rounds, c, 'B')?;
        out.push(row(c, &runs_a, &runs_b));
    }
    Ok(out.join("\n") + "\n")
}

/// Configuration `c`'s row from its A and B runs (rules 2-5).
fn row(c: &str, runs_a: &[Option<Report>], runs_b: &[Option<Report>]) -> String {
    let eff = |j: &Option<Report>| nonzero(j.as_ref().and_then(|j| j.ops_per_backend_cpu_second));
    let pairs: Vec<(f64, f64)> = runs_a
        .iter()
        .zip(runs_b)
        .filter_map(|(x, y)| eff(x).zip(eff(y)))
        .collect();
    let (Some(ma), Some(mb)) = (
        median(pairs.iter().map(|p| Some(p.0))),
        median(pairs.iter().map(|p| Some(p.1))),
    ) else {
        return format!("| {c} | - | - | - | - | - | - | - | 0 |");
    };
    let ratios: Vec<f64> = pairs.iter().map(|(x, y)| y / x).collect();
    let geo = gt_stats::geo_mean(&ratios).ok();
    let min = ratios.iter().copied().fold(f64::INFINITY, f64::min);
    let max = ratios.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let iops = |runs: &[Option<Report>]| {
        let m = median(runs.iter().flatten().map(|j| nonzero(Some(j.total.iops))));
        grouped(m.unwrap_or(f64::NAN))
    };
    let ci = geo.and_then(|g| g.ci95).map_or_else(
        || "-".to_string(),
        |(lo, hi)| format!("{}..{}", fixed(lo, 3), fixed(hi, 3)),
    );
    format!(
        "| {c} | {} | {} | {} | {} ({}..{}) | {ci} | {} | {} | {} |",
        grouped(ma),
        grouped(mb),
        fixed(mb / ma, 3),
        geo.map_or_else(|| "-".to_string(), |g| fixed(g.geo_mean, 3)),
        fixed(min, 3),
        fixed(max, 3),
        iops(runs_a),
        iops(runs_b),
        pairs.len()
    )
}

#[cfg(test)]
mod tests;
