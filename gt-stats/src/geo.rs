//! Geometric means on the natural logarithms: one sample's, and the ratio of two samples'
//! (rule 6).

use std::fmt;

use crate::sample::{mean, variance};
use crate::t::half_width_95;
use crate::welch::{welch_diff_ci95, welch_p};

/// Why a geometric figure cannot be made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GeoError {
    /// Fewer values than the figure needs (`need` a side).
    TooFew { need: usize },
    /// A value that is zero, negative or not finite: it has no (finite) logarithm.
    NotPositive,
}

impl fmt::Display for GeoError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GeoError::TooFew { need } => write!(f, "fewer than {need} values"),
            GeoError::NotPositive => write!(f, "a value is zero, negative or not finite"),
        }
    }
}

impl std::error::Error for GeoError {}

/// The natural logarithms of `x`, when every value is positive and finite.
pub fn logs(x: &[f64]) -> Result<Vec<f64>, GeoError> {
    if x.iter().all(|v| *v > 0.0 && v.is_finite()) {
        Ok(x.iter().map(|v| v.ln()).collect())
    } else {
        Err(GeoError::NotPositive)
    }
}

/// One sample's geometric mean.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GeoMean {
    pub n: usize,
    /// exp of the mean of the logs.
    pub geo_mean: f64,
    /// The 95 % interval, t on the logs (n - 1 degrees of freedom) back through exp; `None`
    /// for one value.
    pub ci95: Option<(f64, f64)>,
}

/// Rule 6 for one sample.
pub fn geo_mean(x: &[f64]) -> Result<GeoMean, GeoError> {
    if x.is_empty() {
        return Err(GeoError::TooFew { need: 1 });
    }
    let l = logs(x)?;
    let (n, m) = (l.len(), mean(&l));
    let half = (n >= 2)
        .then(|| half_width_95(variance(&l) / n as f64, (n - 1) as f64))
        .flatten();
    Ok(GeoMean {
        n,
        geo_mean: m.exp(),
        ci95: half.map(|h| ((m - h).exp(), (m + h).exp())),
    })
}

/// The ratio of two samples' geometric means, other / base.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GeoRatio {
    /// mean(ln other) - mean(ln base).
    pub log_ratio: f64,
    /// exp(log_ratio).
    pub ratio: f64,
    /// The sample variances of the logs: (base, other).
    pub log_var: (f64, f64),
    /// Welch's 95 % interval on the logs back through exp; `None` when both sides are constant.
    pub ci95: Option<(f64, f64)>,
    /// Welch's two-sided p on the logs; `None` likewise.
    pub p: Option<f64>,
}

/// Rule 6 for two samples.
pub fn geo_ratio(base: &[f64], other: &[f64]) -> Result<GeoRatio, GeoError> {
    if base.len() < 2 || other.len() < 2 {
        return Err(GeoError::TooFew { need: 2 });
    }
    let (lb, lo) = (logs(base)?, logs(other)?);
    let d = mean(&lo) - mean(&lb);
    Ok(GeoRatio {
        log_ratio: d,
        ratio: d.exp(),
        log_var: (variance(&lb), variance(&lo)),
        ci95: welch_diff_ci95(&lo, &lb).map(|(a, b)| (a.exp(), b.exp())),
        p: welch_p(&lo, &lb),
    })
}
