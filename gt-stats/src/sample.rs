//! A sample's mean and variance (rule 1).

/// The arithmetic mean: the sum in order, divided by n (NaN for an empty sample).
pub fn mean(x: &[f64]) -> f64 {
    x.iter().sum::<f64>() / x.len() as f64
}

/// The sample variance, n - 1 in the denominator (NaN for fewer than 2 values).
pub fn variance(x: &[f64]) -> f64 {
    if x.len() < 2 {
        return f64::NAN;
    }
    let m = mean(x);
    x.iter().map(|v| (v - m) * (v - m)).sum::<f64>() / (x.len() - 1) as f64
}
