//! Student's t: its quantile, the 95 % half-width of a mean, the paired t-test (rules 2-4).

use statrs::distribution::{ContinuousCDF, Normal, StudentsT};

use crate::sample::{mean, variance};

/// Rule 2: the p quantile of Student's t with `df` degrees of freedom (the standard normal's
/// for infinite `df`); `None` unless 0 < p < 1 and df > 0.
pub fn t_quantile(p: f64, df: f64) -> Option<f64> {
    if !(p > 0.0 && p < 1.0 && df > 0.0) {
        return None;
    }
    if df == f64::INFINITY {
        return Normal::new(0.0, 1.0).ok().map(|z| z.inverse_cdf(p));
    }
    StudentsT::new(0.0, 1.0, df).ok().map(|t| t.inverse_cdf(p))
}

/// Rule 3: the half-width of the 95 % interval of an estimate whose variance is `var_of_mean`
/// (s² / n for a mean; Welch's squared standard error for a difference), `t(0.975, df) *
/// sqrt(var_of_mean)`; `Some(0.0)` for zero variance; `None` for df not > 0 (one value) or a
/// negative or non-finite variance.
pub fn half_width_95(var_of_mean: f64, df: f64) -> Option<f64> {
    if !(df > 0.0 && var_of_mean >= 0.0 && var_of_mean.is_finite()) {
        return None;
    }
    if var_of_mean == 0.0 {
        return Some(0.0);
    }
    Some(t_quantile(0.975, df)? * var_of_mean.sqrt())
}

/// Rule 3, from a sample's size and standard deviation: `t(0.975, n - 1) * sd / sqrt(n)`;
/// `Some(0.0)` for sd = 0; `None` below n = 2 or for a negative or non-finite sd.
pub fn mean_half_width_95(n: usize, sd: f64) -> Option<f64> {
    if n < 2 || !(sd >= 0.0 && sd.is_finite()) {
        return None;
    }
    if sd == 0.0 {
        return Some(0.0);
    }
    Some(t_quantile(0.975, (n - 1) as f64)? * sd / (n as f64).sqrt())
}

/// The two-sided p of statistic `t` under Student's t with `df` degrees of freedom,
/// `min(1, 2 F(-|t|))`; `None` for a NaN `t` or df not > 0.
pub(crate) fn t_two_sided_p(t: f64, df: f64) -> Option<f64> {
    if t.is_nan() {
        return None;
    }
    let d = StudentsT::new(0.0, 1.0, df).ok()?;
    Some((2.0 * d.cdf(-t.abs())).min(1.0))
}

/// Rule 4: the two-sided paired t-test on per-pair differences `d` (their mean against 0), n - 1
/// degrees of freedom; `None` below 2 values, with a non-finite value, or with zero variance.
pub fn paired_t_p(d: &[f64]) -> Option<f64> {
    let n = d.len();
    if n < 2 || d.iter().any(|v| !v.is_finite()) {
        return None;
    }
    let var = variance(d);
    if var <= 0.0 {
        return None;
    }
    t_two_sided_p(mean(d) / (var / n as f64).sqrt(), (n - 1) as f64)
}
