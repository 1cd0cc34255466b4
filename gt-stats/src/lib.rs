//! The statistics the harness's crates share, each computed here once (`gt-compare`'s summaries,
//! judgement, power and sequential rule, `guest-tests`' bisection classifier, `lab`'s A/B
//! table).
//!
//! Contract:
//! 1. Samples ([`mean`], [`variance`]): the mean is the sum in order divided by n; the variance
//!    has n - 1 in its denominator. These two are the only functions here that answer NaN: the
//!    mean of an empty sample and the variance of fewer than 2 values. Everything else answers
//!    `None` or an error where it has no figure.
//! 2. Student's t ([`t_quantile`]): the p quantile of t with df degrees of freedom, for
//!    0 < p < 1 and df > 0; infinite df is the standard normal (t's limit); anything else `None`.
//! 3. The 95 % half-width of a mean: [`half_width_95`] from the estimate's variance (of the mean,
//!    s² / n) and its degrees of freedom, `t(0.975, df) * sqrt(var)`; [`mean_half_width_95`] from
//!    a sample's n and standard deviation, `t(0.975, n - 1) * sd / sqrt(n)`. The two forms are the
//!    same figure; each caller keeps the one it always computed, so that no committed figure
//!    moves by a rounding. n = 1 (df <= 0) has no interval: `None`, never an infinite or NaN
//!    width. Zero variance (every value equal) gives `Some(0.0)`: the interval is the point,
//!    whatever the degrees of freedom (Welch's are infinite then). A negative or non-finite
//!    variance or sd: `None`.
//! 4. The paired t-test ([`paired_t_p`]) on per-pair differences: two-sided,
//!    `min(1, 2 F(-|t|))` with t = mean / sqrt(s² / n) on n - 1 degrees of freedom; `None` below
//!    2 values, with a non-finite value, or with zero variance (no t statistic).
//! 5. Welch ([`welch_terms`], [`welch_df`], [`welch_p`], [`welch_diff_ci95`]): the squared
//!    standard error of mean(a) - mean(b) and its Welch-Satterthwaite degrees of freedom
//!    (infinite when both samples have zero variance); `None` below 2 values in either sample.
//!    The p and the interval (the one the p inverts) are `None` also when both samples have zero
//!    variance (identical constant samples: no t statistic).
//! 6. Geometric means, on the natural logarithms ([`logs`], [`geo_mean`], [`geo_ratio`]): every
//!    value must be positive and finite, else [`GeoError::NotPositive`] (a zero's logarithm is
//!    -inf, a negative value's NaN: no figure is made of them). [`geo_mean`]: exp of the mean
//!    log, with the 95 % interval of rule 3 on the logs (n - 1 degrees of freedom) back through
//!    exp; [`GeoError::TooFew`] for an empty sample, no interval for one value. [`geo_ratio`]:
//!    the ratio of two samples' geometric means, other / base, with Welch's interval and p on the
//!    logs (rule 5); [`GeoError::TooFew`] below 2 values a side; no interval and no p when both
//!    sides are constant. Identical samples give the ratio 1, an interval around it and p = 1.
//! 7. For tests only (`testing`, feature `testing`): the one generator of every simulation
//!    (`testing::Rng`: xorshift64 and Box-Muller, deterministic from its seed) and the reference
//!    samples scipy's figures were computed on.

#![cfg_attr(test, allow(clippy::too_many_lines))]

mod geo;
mod sample;
mod t;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
mod welch;

pub use geo::{geo_mean, geo_ratio, logs, GeoError, GeoMean, GeoRatio};
pub use sample::{mean, variance};
pub use t::{half_width_95, mean_half_width_95, paired_t_p, t_quantile};
pub use welch::{welch_df, welch_diff_ci95, welch_p, welch_terms};

#[cfg(test)]
mod tests;
