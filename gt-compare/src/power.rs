//! How many boots a judgement needs, from runs already made: for each metric of a
//! `[judgement]` and each kernel after the baseline, the boots per kernel at which the
//! judgement's interval (compare::judgement rule 1: Welch on the logarithms) reaches what the
//! design asks. `compare --power` prints it; docs/verdict.md ("Design") reads it.
//!
//! Contract:
//! 1. The inputs are the standard deviations of the logarithms per kernel and the observed
//!    ratio; both kernels get n boots; the interval's degrees of freedom are Welch's for those
//!    sds at n; power is 1 - beta with the normal quantile for beta (the usual approximation).
//! 2. `n_decide`: mechanism metrics: the interval lies below `1 - min_reduction` with the
//!    power; effects: the ratio is significant at 0.05 / k (the judgement's level) with the
//!    power. `n_exclude_one`: the 95 % interval excludes 1 with the power. `n_width`: the 95 %
//!    interval's half-width is at most `width` (as a ratio, e.g. 0.05 for +-5 %). None: more
//!    than [`MAX_N`], or the observed ratio does not lie on the side asked.

use serde::{Deserialize, Serialize};
use statrs::distribution::{ContinuousCDF, Normal};

pub mod design;

use super::judgement::{spec_of, EFFECT_ALPHA};
use super::Comparison;
use gt_results::results::RunResult;

/// The largest n the search tries.
pub const MAX_N: usize = 200;

/// Power asked of every figure.
pub const POWER: f64 = 0.8;

/// One metric for one kernel against the baseline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PowerRow {
    pub metric: String,
    /// `mechanism` or `effect`.
    pub role: String,
    pub kernel: String,
    /// Boots the runs had, per kernel (baseline, kernel).
    pub n_now: (usize, usize),
    pub ratio: f64,
    pub sd_log_base: f64,
    pub sd_log_other: f64,
    pub n_decide: Option<usize>,
    pub n_exclude_one: Option<usize>,
    pub n_width: Option<usize>,
}

/// The p quantile of t (`gt_stats::t_quantile`). The degrees of freedom here are always valid
/// (Welch's at n >= 2, infinite for zero spreads; 2n - 2 in the design); were they not, the
/// critical value is infinite: no n reaches it, no chance is claimed.
fn t_quantile(p: f64, df: f64) -> f64 {
    gt_stats::t_quantile(p, df).unwrap_or(f64::INFINITY)
}

fn z(p: f64) -> f64 {
    Normal::new(0.0, 1.0).map_or(f64::NAN, |d| d.inverse_cdf(p))
}

/// The standard error and Welch's degrees of freedom of the difference of mean logs at n each.
fn se_df(sa: f64, sb: f64, n: usize) -> (f64, f64) {
    let (va, vb) = (sa * sa / n as f64, sb * sb / n as f64);
    let df = gt_stats::welch_df(va, n as f64 - 1.0, vb, n as f64 - 1.0);
    ((va + vb).sqrt(), df)
}

/// The least n in 2..=MAX_N with `ok(se, df)`.
fn least_n(sa: f64, sb: f64, ok: impl Fn(f64, f64) -> bool) -> Option<usize> {
    (2..=MAX_N).find(|&n| {
        let (se, df) = se_df(sa, sb, n);
        ok(se, df)
    })
}

/// Rule 2's three figures for log ratio `d` (other - base), sds `sa`, `sb`.
pub fn boots_needed(
    d: f64,
    sa: f64,
    sb: f64,
    decide_below: Option<f64>,
    alpha: f64,
    width: f64,
) -> (Option<usize>, Option<usize>, Option<usize>) {
    let zb = z(POWER);
    let significant =
        |a: f64| move |se: f64, df: f64| d.abs() >= (t_quantile(1.0 - a / 2.0, df) + zb) * se;
    let n_decide = match decide_below {
        Some(floor) if d < floor.ln() => least_n(sa, sb, |se, df| {
            floor.ln() - d >= (t_quantile(0.975, df) + zb) * se
        }),
        Some(_) => None,
        None => least_n(sa, sb, significant(alpha)),
    };
    let n_one = least_n(sa, sb, significant(0.05));
    let n_width = least_n(sa, sb, |se, df| {
        t_quantile(0.975, df) * se <= (1.0 + width).ln()
    });
    (n_decide, n_one, n_width)
}

/// Every metric of the runs' `[judgement]`, every kernel after the baseline.
pub fn power_rows(c: &Comparison, runs: &[RunResult], width: f64) -> Vec<PowerRow> {
    let Some(spec) = spec_of(runs) else {
        return Vec::new();
    };
    let alpha = EFFECT_ALPHA / spec.effects.len().max(1) as f64;
    let floor = 1.0 - spec.min_reduction;
    let mut out = Vec::new();
    let metrics = std::iter::once((&spec.mechanism, "mechanism"))
        .chain(spec.effects.iter().map(|e| (e, "effect")));
    for (m, role) in metrics {
        let Some(row) = c.rows.iter().find(|r| &r.metric == m) else {
            continue;
        };
        for k in c.kernels.iter().skip(1) {
            let (Some(b), Some(o)) = (row.values.get(c.baseline()), row.values.get(k)) else {
                continue;
            };
            // Two positive values a side at least (gt-stats rule 6).
            let Ok(g) = gt_stats::geo_ratio(b, o) else {
                continue;
            };
            let (d, sa, sb) = (g.log_ratio, g.log_var.0.sqrt(), g.log_var.1.sqrt());
            let decide = (role == "mechanism").then_some(floor);
            let (n_decide, n_exclude_one, n_width) = boots_needed(d, sa, sb, decide, alpha, width);
            out.push(PowerRow {
                metric: m.clone(),
                role: role.into(),
                kernel: k.clone(),
                n_now: (b.len(), o.len()),
                ratio: g.ratio,
                sd_log_base: sa,
                sd_log_other: sb,
                n_decide,
                n_exclude_one,
                n_width,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_textbook_case() {
        // sd 0.05 on both sides, a 4 % effect: the normal approximation gives
        // 2 (1.96 + 0.84)^2 0.05^2 / ln(1.04)^2 = 25.5; with t quantiles a little more.
        let (_, one, width) = boots_needed(1.04f64.ln(), 0.05, 0.05, None, 0.05, 0.05);
        assert!((26..=28).contains(&one.unwrap()), "{one:?}");
        // +-5 % at sd 0.05: t(df) * 0.05 * sqrt(2 / n) <= ln 1.05 = 0.0488: at n = 9,
        // 2.120 * 0.0236 = 0.0500; at n = 10, 2.101 * 0.0224 = 0.0470.
        assert_eq!(width, Some(10));
    }

    #[test]
    fn a_mechanism_is_decided_against_its_floor_and_only_on_its_side() {
        let (d, _, _) = boots_needed(0.1f64.ln(), 0.25, 0.2, Some(0.5), 0.05, 0.1);
        assert_eq!(d, Some(2));
        let (d, _, _) = boots_needed(0.6f64.ln(), 0.25, 0.2, Some(0.5), 0.05, 0.1);
        assert_eq!(d, None);
        // An effect with no difference never becomes significant.
        let (d, one, _) = boots_needed(0.0, 0.05, 0.05, None, 0.05 / 3.0, 0.05);
        assert_eq!((d, one), (None, None));
    }
}
