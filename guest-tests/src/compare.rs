//! Statistics over runs grouped by kernel: medians, confidence intervals, Welch's t-test,
//! Mann-Whitney U and an LKP-style change flag.

/// Median of an ascending slice (NaN when empty).
pub fn median_sorted(v: &[f64]) -> f64 {
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}
