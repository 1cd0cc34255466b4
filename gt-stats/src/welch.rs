//! Welch's test of two means (rule 5).

use crate::sample::{mean, variance};
use crate::t::{half_width_95, t_two_sided_p};

/// The Welch-Satterthwaite degrees of freedom of a difference of two means whose variances (of
/// the mean, s² / n) are `va` and `vb`, each estimated with `dfa`, `dfb` degrees of freedom
/// (n - 1); infinite when both variances are zero.
pub fn welch_df(va: f64, dfa: f64, vb: f64, dfb: f64) -> f64 {
    let se2 = va + vb;
    if se2 > 0.0 {
        se2 * se2 / (va * va / dfa + vb * vb / dfb)
    } else {
        f64::INFINITY
    }
}

/// The squared standard error of mean(a) - mean(b) and its degrees of freedom ([`welch_df`]);
/// `None` below 2 values in either sample.
pub fn welch_terms(a: &[f64], b: &[f64]) -> Option<(f64, f64)> {
    if a.len() < 2 || b.len() < 2 {
        return None;
    }
    let (va, vb) = (variance(a) / a.len() as f64, variance(b) / b.len() as f64);
    let df = welch_df(va, (a.len() - 1) as f64, vb, (b.len() - 1) as f64);
    Some((va + vb, df))
}

/// [`welch_terms`] where a t statistic exists: a standard error above zero and finite.
fn se2_df(a: &[f64], b: &[f64]) -> Option<(f64, f64)> {
    let (se2, df) = welch_terms(a, b)?;
    (se2 > 0.0 && se2.is_finite()).then_some((se2, df))
}

/// Welch's two-sided p of mean(a) = mean(b); `None` below 2 values in either sample or with
/// zero variance in both.
pub fn welch_p(a: &[f64], b: &[f64]) -> Option<f64> {
    let (se2, df) = se2_df(a, b)?;
    t_two_sided_p((mean(a) - mean(b)) / se2.sqrt(), df)
}

/// Welch's 95 % interval of mean(a) - mean(b), the one [`welch_p`] inverts; `None` where it is.
pub fn welch_diff_ci95(a: &[f64], b: &[f64]) -> Option<(f64, f64)> {
    let (se2, df) = se2_df(a, b)?;
    let h = half_width_95(se2, df)?;
    let d = mean(a) - mean(b);
    Some((d - h, d + h))
}
