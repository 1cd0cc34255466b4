//! The design of a judged run, decided before it from committed pilot runs: for each n of boots
//! per kernel, the chance that a fix like the pilot's is judged `improved`, and the chances that
//! a 10 % loss of one effect is caught (`worse`) or slips through (`improved`).
//!
//! Contract:
//! 1. Inputs: per metric of the `[judgement]`, the pilot's standard deviation of the logarithms
//!    (pooled over the baseline and the kernel) and the kernel's observed log ratio, taken as the
//!    true one. Both kernels get n boots; the interval is Welch's with 2n - 2 degrees of freedom
//!    (equal sds); the estimate is normal around the true log ratio with the standard error
//!    `sd * sqrt(2 / n)` (the usual approximation: it ignores that the sd is itself estimated).
//! 2. P(mechanism reduced) = P(the interval's upper end < ln(1 - min_reduction)); P(an effect
//!    within its margin) = P(its interval on the good side of ln(1 -+ margin)); P(improved) is
//!    their product (the metrics treated as independent, which they are not quite: they come
//!    from the same boots) and ignores the guards and the ordering (a fix like v7 passes
//!    both), so it is an upper bound when the guards' intervals are wide.
//! 3. P(a 10 % loss caught): the effect's true ratio 0.90 (1.10 for lower-is-better), all else
//!    as the pilot's: P(worse) = P(the estimate beyond the margin on the bad side and Welch's p
//!    below 0.05 / k); P(improved despite it) = that of rule 2 with this effect's true ratio
//!    moved.

use serde::{Deserialize, Serialize};
use statrs::distribution::{ContinuousCDF, Normal};

use super::t_quantile;

use super::super::judgement::{spec_of, EFFECT_ALPHA};
use super::super::Comparison;
use gt_results::metrics::registry::Better;
use gt_results::results::RunResult;

/// The loss the design must catch, as a ratio on the bad side.
pub const LOSS: f64 = 0.10;

/// One n of the design for one kernel.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DesignRow {
    pub kernel: String,
    pub n: usize,
    pub p_mechanism: f64,
    /// Per effect (the `[judgement]`'s order): P(within its margin).
    pub p_within: Vec<f64>,
    pub p_improved: f64,
    /// Per effect: P(worse) with a 10 % loss of that effect.
    pub p_loss_caught: Vec<f64>,
    /// Per effect: P(improved) with a 10 % loss of that effect.
    pub p_loss_improved: Vec<f64>,
}

/// A metric's pilot: true log ratio, pooled sd of the logs, which side is better.
#[derive(Debug, Clone, Copy)]
struct Pilot {
    d: f64,
    sd: f64,
    better: Better,
}

fn phi(x: f64) -> f64 {
    Normal::new(0.0, 1.0).map_or(f64::NAN, |d| d.cdf(x))
}

fn t975(df: f64) -> f64 {
    t_quantile(0.975, df)
}

fn t_two_sided(alpha: f64, df: f64) -> f64 {
    t_quantile(1.0 - alpha / 2.0, df)
}

/// The pilot of one metric from the runs (rule 1), when both kernels have 2+ positive values
/// (gt-stats rule 6).
fn pilot(c: &Comparison, metric: &str, kernel: &str) -> Option<Pilot> {
    let row = c.rows.iter().find(|r| r.metric == metric)?;
    let (b, o) = (row.values.get(c.baseline())?, row.values.get(kernel)?);
    let g = gt_stats::geo_ratio(b, o).ok()?;
    Some(Pilot {
        d: g.log_ratio,
        sd: ((g.log_var.0 + g.log_var.1) / 2.0).sqrt(),
        better: row.better.unwrap_or(Better::Neither),
    })
}

/// Rule 2 for an effect: P(the interval on the good side of the margin).
fn p_within(p: Pilot, d: f64, n: usize, margin: f64) -> f64 {
    let se = p.sd * (2.0 / n as f64).sqrt();
    let t = t975(2.0 * n as f64 - 2.0);
    match p.better {
        Better::Lower => phi(((1.0 + margin).ln() - t * se - d) / se),
        _ => 1.0 - phi(((1.0 - margin).ln() + t * se - d) / se),
    }
}

/// Rule 3: P(worse) for an effect whose true log ratio is `d`.
fn p_worse(p: Pilot, d: f64, n: usize, margin: f64, alpha: f64) -> f64 {
    let se = p.sd * (2.0 / n as f64).sqrt();
    let t = t_two_sided(alpha, 2.0 * n as f64 - 2.0);
    match p.better {
        Better::Lower => 1.0 - phi(((1.0 + margin).ln().max(t * se) - d) / se),
        _ => phi(((1.0 - margin).ln().min(-t * se) - d) / se),
    }
}

/// Rules 1-3 for every kernel after the baseline, n = 2..=n_max.
pub fn design_rows(c: &Comparison, runs: &[RunResult], n_max: usize) -> Vec<DesignRow> {
    let Some(spec) = spec_of(runs) else {
        return Vec::new();
    };
    let alpha = EFFECT_ALPHA / spec.effects.len().max(1) as f64;
    let floor = (1.0 - spec.min_reduction).ln();
    let mut out = Vec::new();
    for k in c.kernels.iter().skip(1) {
        let Some(mech) = pilot(c, &spec.mechanism, k) else {
            continue;
        };
        let Some(effects) = spec
            .effects
            .iter()
            .map(|e| pilot(c, e, k))
            .collect::<Option<Vec<Pilot>>>()
        else {
            continue;
        };
        let loss = |p: &Pilot| match p.better {
            Better::Lower => (1.0 + LOSS).ln(),
            _ => (1.0 - LOSS).ln(),
        };
        for n in 2..=n_max {
            let se = mech.sd * (2.0 / n as f64).sqrt();
            let p_mech = phi((floor - t975(2.0 * n as f64 - 2.0) * se - mech.d) / se);
            let within: Vec<f64> = effects
                .iter()
                .map(|p| p_within(*p, p.d, n, spec.effect_margin))
                .collect();
            let prod = |w: &[f64]| p_mech * w.iter().product::<f64>();
            let loss_improved = (0..effects.len())
                .map(|i| {
                    let mut w = within.clone();
                    w[i] = p_within(effects[i], loss(&effects[i]), n, spec.effect_margin);
                    prod(&w)
                })
                .collect();
            out.push(DesignRow {
                kernel: k.clone(),
                n,
                p_mechanism: p_mech,
                p_improved: prod(&within),
                p_within: within,
                p_loss_caught: effects
                    .iter()
                    .map(|p| p_worse(*p, loss(p), n, spec.effect_margin, alpha))
                    .collect(),
                p_loss_improved: loss_improved,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chances_move_the_right_way_with_n_and_the_effect() {
        let p = Pilot {
            d: 1.08f64.ln(),
            sd: 0.05,
            better: Better::Higher,
        };
        // A 1.08x gain at sd 0.05: shown within 5 % more often with more boots.
        let (a, b) = (p_within(p, p.d, 3, 0.05), p_within(p, p.d, 8, 0.05));
        assert!(a < b && b > 0.95, "{a} {b}");
        // A 10 % loss: caught more often with more boots, almost never within the margin.
        let loss = 0.9f64.ln();
        assert!(p_worse(p, loss, 3, 0.05, 0.05 / 3.0) < p_worse(p, loss, 8, 0.05, 0.05 / 3.0));
        assert!(p_within(p, loss, 8, 0.05) < 0.01);
        // Lower is better: the mirror image.
        let q = Pilot {
            d: 0.9f64.ln(),
            sd: 0.05,
            better: Better::Lower,
        };
        assert!(p_within(q, q.d, 6, 0.05) > 0.9);
        assert!(p_worse(q, 1.1f64.ln(), 8, 0.05, 0.05 / 3.0) > 0.5);
    }
}
