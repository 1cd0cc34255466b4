//! Latency distributions in nanoseconds, their CLI syntax and their samplers.
//!
//! Syntax (units `ns`, `us` (or `µs`), `ms`, `s`; decimals allowed; a bare number needs a unit
//! except `0`):
//!
//! | string | meaning |
//! |---|---|
//! | `0`, `50us`, `fixed:50us` | always that value |
//! | `uniform:10us..100us` | uniform on the closed range |
//! | `normal:100us,20us` | normal (mean, standard deviation) truncated at 0 (negative draws are redrawn) |
//! | `lognormal:100us,0.5` | lognormal with median 100 us and shape sigma 0.5 |
//! | `lognormal:mean=100us,p99=1ms` | the lognormal with that mean and 99th percentile |
//! | `exp:50us` | exponential with mean 50 us |
//! | `table:p50=100us,p90=300us,p99=1ms,p100=2ms` | empirical: linear interpolation of the inverse CDF between the points; `p0` defaults to 0 ns, `p100` is required |
//!
//! Every distribution prints back (`Display`) in a form that parses to the same value.

use std::fmt;
use std::str::FromStr;

use rand::Rng;
use rand_distr::Distribution as _;
use statrs::distribution::{Continuous, ContinuousCDF, Normal};
use thiserror::Error;

use vhost_blk_units::{UnitError, Zero};

/// Largest value any distribution parameter may take (60 s): beyond that a guest times out anyway.
pub const MAX_NS: u64 = vhost_blk_units::MAX_DURATION_NS;

/// The standard normal distribution (statrs): its CDF, inverse CDF and density.
fn std_normal() -> Normal {
    Normal::standard()
}

/// A parse or validation error of a duration or distribution string.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum DistributionError {
    #[error("{}", UnitError::EmptyDuration)]
    EmptyDuration,
    #[error("{}", UnitError::MissingUnit(.0.clone()))]
    MissingUnit(String),
    #[error("{}", UnitError::UnknownUnit(.0.clone()))]
    UnknownUnit(String),
    #[error("{}", UnitError::BadNumber(.0.clone()))]
    BadNumber(String),
    #[error("{}", UnitError::TooLarge(.0.clone()))]
    TooLarge(String),
    /// Another unit error (a zero where none is allowed).
    #[error(transparent)]
    Unit(UnitError),
    #[error("unknown distribution {0:?} (use fixed, uniform, normal, lognormal, exp or table)")]
    UnknownKind(String),
    #[error("`{kind}` expects {expected}, got {got:?}")]
    BadArguments {
        kind: &'static str,
        expected: &'static str,
        got: String,
    },
    #[error("uniform range {lo}..{hi} ns is reversed")]
    ReversedRange { lo: u64, hi: u64 },
    #[error("{what} must be a finite number >= 0, got {got:?}")]
    BadShape { what: &'static str, got: String },
    #[error("{0} must be greater than 0")]
    Zero(&'static str),
    #[error("lognormal: p99 ({p99} ns) must exceed the mean ({mean} ns) and be at most 14.9x it")]
    LognormalMeanP99 { mean: u64, p99: u64 },
    #[error("table: bad point {0:?} (expected pNN=DURATION, NN in 0..=100)")]
    BadTablePoint(String),
    #[error("table: percentiles must increase strictly and values must not decrease (at {0:?})")]
    TableNotMonotone(String),
    #[error("table: the last point must be p100")]
    TableNoP100,
}

impl From<UnitError> for DistributionError {
    fn from(e: UnitError) -> Self {
        match e {
            UnitError::EmptyDuration => DistributionError::EmptyDuration,
            UnitError::MissingUnit(s) => DistributionError::MissingUnit(s),
            UnitError::UnknownUnit(s) => DistributionError::UnknownUnit(s),
            UnitError::BadNumber(s) => DistributionError::BadNumber(s),
            UnitError::TooLarge(s) => DistributionError::TooLarge(s),
            e => DistributionError::Unit(e),
        }
    }
}

/// A distribution of non-negative latencies in nanoseconds.
#[derive(Debug, Clone, PartialEq)]
pub enum Distribution {
    /// Always the same value.
    Fixed(u64),
    /// Uniform on `lo..=hi`.
    Uniform { lo: u64, hi: u64 },
    /// Normal truncated at 0: negative draws are redrawn (a true truncation, no point mass at 0).
    Normal { mean: u64, sd: u64 },
    /// Lognormal: `median * exp(sigma * Z)`.
    LogNormal { median: u64, sigma: f64 },
    /// Exponential with this mean.
    Exp { mean: u64 },
    /// Inverse CDF by linear interpolation between `(percentile, ns)` points, first at 0, last at
    /// 100 (percentiles are kept as typed so that `Display` round-trips exactly).
    Table(Vec<(f64, u64)>),
}

impl Default for Distribution {
    fn default() -> Self {
        Distribution::Fixed(0)
    }
}

/// Parses a duration such as `0`, `250ns`, `50us`, `1.5ms` or `2s` into nanoseconds (zero
/// allowed; see [`vhost_blk_units`]).
pub fn parse_duration_ns(s: &str) -> Result<u64, DistributionError> {
    Ok(vhost_blk_units::parse_duration_ns(s, Zero::Allowed)?)
}

use vhost_blk_units::format_ns;

fn parse_shape(what: &'static str, s: &str) -> Result<f64, DistributionError> {
    match s.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
        _ => Err(DistributionError::BadShape {
            what,
            got: s.to_string(),
        }),
    }
}

fn two_args<'a>(
    kind: &'static str,
    expected: &'static str,
    args: &'a str,
    sep: &str,
) -> Result<(&'a str, &'a str), DistributionError> {
    args.split_once(sep)
        .ok_or_else(|| DistributionError::BadArguments {
            kind,
            expected,
            got: args.to_string(),
        })
}

fn parse_table(args: &str) -> Result<Distribution, DistributionError> {
    let mut points: Vec<(f64, u64)> = Vec::new();
    for part in args.split(',') {
        let bad = || DistributionError::BadTablePoint(part.to_string());
        let (key, value) = part.trim().split_once('=').ok_or_else(bad)?;
        let pct: f64 = key
            .trim()
            .strip_prefix('p')
            .ok_or_else(bad)?
            .parse()
            .map_err(|_| bad())?;
        if !(0.0..=100.0).contains(&pct) {
            return Err(bad());
        }
        let ns = parse_duration_ns(value)?;
        let q = pct;
        if q == 0.0 && points.is_empty() {
            points.push((0.0, ns));
            continue;
        }
        let &(last_q, last_ns) = points.last().unwrap_or(&(0.0, 0));
        if points.is_empty() {
            points.push((0.0, 0));
        }
        if q <= last_q || ns < last_ns {
            return Err(DistributionError::TableNotMonotone(part.to_string()));
        }
        points.push((q, ns));
    }
    match points.last() {
        Some(&(q, _)) if q == 100.0 && points.len() >= 2 => Ok(Distribution::Table(points)),
        _ => Err(DistributionError::TableNoP100),
    }
}

impl FromStr for Distribution {
    type Err = DistributionError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim();
        let Some((kind, args)) = s.split_once(':') else {
            return Ok(Distribution::Fixed(parse_duration_ns(s)?));
        };
        let dist = match kind.trim() {
            "fixed" => Distribution::Fixed(parse_duration_ns(args)?),
            "uniform" => {
                let (lo, hi) = two_args("uniform", "LO..HI", args, "..")?;
                let (lo, hi) = (parse_duration_ns(lo)?, parse_duration_ns(hi)?);
                Distribution::Uniform { lo, hi }
            }
            "normal" => {
                let (mean, sd) = two_args("normal", "MEAN,SD", args, ",")?;
                Distribution::Normal {
                    mean: parse_duration_ns(mean)?,
                    sd: parse_duration_ns(sd)?,
                }
            }
            "lognormal" => {
                let (a, b) = two_args("lognormal", "MEDIAN,SIGMA or mean=M,p99=P", args, ",")?;
                match (
                    a.trim().strip_prefix("mean="),
                    b.trim().strip_prefix("p99="),
                ) {
                    (Some(mean), Some(p99)) => {
                        lognormal_from_mean_p99(parse_duration_ns(mean)?, parse_duration_ns(p99)?)?
                    }
                    _ => Distribution::LogNormal {
                        median: parse_duration_ns(a)?,
                        sigma: parse_shape("lognormal sigma", b)?,
                    },
                }
            }
            "exp" => Distribution::Exp {
                mean: parse_duration_ns(args)?,
            },
            "table" => parse_table(args)?,
            other => return Err(DistributionError::UnknownKind(other.to_string())),
        };
        dist.validate()?;
        Ok(dist)
    }
}

/// The lognormal with the given mean and 99th percentile: solves
/// `ln(p99/mean) = z99*sigma - sigma^2/2` for the smaller root.
fn lognormal_from_mean_p99(mean: u64, p99: u64) -> Result<Distribution, DistributionError> {
    let err = DistributionError::LognormalMeanP99 { mean, p99 };
    if mean == 0 || p99 <= mean {
        return Err(err);
    }
    let r = (p99 as f64 / mean as f64).ln();
    let z99 = std_normal().inverse_cdf(0.99);
    let disc = z99 * z99 - 2.0 * r;
    if disc < 0.0 {
        return Err(err);
    }
    let sigma = z99 - disc.sqrt();
    let median = (mean as f64 / (sigma * sigma / 2.0).exp()).round() as u64;
    Ok(Distribution::LogNormal {
        median: median.max(1),
        sigma,
    })
}

impl fmt::Display for Distribution {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Distribution::Fixed(v) => write!(f, "{}", format_ns(*v)),
            Distribution::Uniform { lo, hi } => {
                write!(f, "uniform:{}..{}", format_ns(*lo), format_ns(*hi))
            }
            Distribution::Normal { mean, sd } => {
                write!(f, "normal:{},{}", format_ns(*mean), format_ns(*sd))
            }
            Distribution::LogNormal { median, sigma } => {
                write!(f, "lognormal:{},{}", format_ns(*median), sigma)
            }
            Distribution::Exp { mean } => write!(f, "exp:{}", format_ns(*mean)),
            Distribution::Table(points) => {
                write!(f, "table:")?;
                for (i, (q, ns)) in points.iter().enumerate() {
                    let sep = if i == 0 { "" } else { "," };
                    write!(f, "{sep}p{}={}", q, format_ns(*ns))?;
                }
                Ok(())
            }
        }
    }
}

impl TryFrom<String> for Distribution {
    type Error = DistributionError;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        s.parse()
    }
}

impl<'de> serde::Deserialize<'de> for Distribution {
    /// Accepts a string in the CLI syntax or an integer number of nanoseconds.
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(serde::Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Ns(u64),
            Text(String),
        }
        match Raw::deserialize(d)? {
            Raw::Ns(ns) if ns <= MAX_NS => Ok(Distribution::Fixed(ns)),
            Raw::Ns(ns) => Err(serde::de::Error::custom(DistributionError::TooLarge(
                ns.to_string(),
            ))),
            Raw::Text(s) => s.parse().map_err(serde::de::Error::custom),
        }
    }
}

impl serde::Serialize for Distribution {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

fn to_ns(v: f64) -> u64 {
    // `as` saturates: NaN -> 0, negatives -> 0, huge -> u64::MAX; then cap.
    (v.round() as u64).min(MAX_NS)
}

impl Distribution {
    /// Checks parameters that the parser alone does not (also for values built in code).
    pub fn validate(&self) -> Result<(), DistributionError> {
        let check = |v: u64| {
            if v > MAX_NS {
                Err(DistributionError::TooLarge(format!("{v}ns")))
            } else {
                Ok(())
            }
        };
        match self {
            Distribution::Fixed(v) => check(*v),
            Distribution::Uniform { lo, hi } => {
                check(*hi)?;
                if lo > hi {
                    return Err(DistributionError::ReversedRange { lo: *lo, hi: *hi });
                }
                Ok(())
            }
            Distribution::Normal { mean, sd } => {
                check(*mean)?;
                check(*sd)
            }
            Distribution::LogNormal { median, sigma } => {
                check(*median)?;
                if *median == 0 {
                    return Err(DistributionError::Zero("lognormal median"));
                }
                if !sigma.is_finite() || *sigma < 0.0 || *sigma > 10.0 {
                    return Err(DistributionError::BadShape {
                        what: "lognormal sigma (at most 10)",
                        got: sigma.to_string(),
                    });
                }
                Ok(())
            }
            Distribution::Exp { mean } => {
                check(*mean)?;
                if *mean == 0 {
                    return Err(DistributionError::Zero("exp mean"));
                }
                Ok(())
            }
            Distribution::Table(points) => {
                let ok_shape = points.len() >= 2
                    && points.first().map(|p| p.0) == Some(0.0)
                    && points.last().map(|p| p.0) == Some(100.0);
                if !ok_shape {
                    return Err(DistributionError::TableNoP100);
                }
                for (a, b) in points.iter().zip(points.iter().skip(1)) {
                    check(b.1)?;
                    if b.0 <= a.0 || b.1 < a.1 {
                        return Err(DistributionError::TableNotMonotone(format!("p{}", b.0)));
                    }
                }
                Ok(())
            }
        }
    }

    /// True when every sample is 0.
    pub fn is_zero(&self) -> bool {
        matches!(self, Distribution::Fixed(0))
    }

    /// Draws one latency in nanoseconds (capped at [`MAX_NS`]). `Fixed` does not touch `rng`.
    pub fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> u64 {
        match self {
            Distribution::Fixed(v) => *v,
            Distribution::Uniform { lo, hi } => rng.gen_range(*lo..=*hi),
            Distribution::Normal { mean, sd } => {
                if *sd == 0 {
                    return *mean;
                }
                let (m, s) = (*mean as f64, *sd as f64);
                // mean >= 0, so each draw is accepted with probability >= 1/2.
                loop {
                    let z: f64 = rand_distr::StandardNormal.sample(rng);
                    let v = m + s * z;
                    if v >= 0.0 {
                        return to_ns(v);
                    }
                }
            }
            Distribution::LogNormal { median, sigma } => {
                let z: f64 = rand_distr::StandardNormal.sample(rng);
                to_ns(*median as f64 * (sigma * z).exp())
            }
            Distribution::Exp { mean } => {
                let e: f64 = rand_distr::Exp1.sample(rng);
                to_ns(*mean as f64 * e)
            }
            Distribution::Table(points) => Self::table_quantile(points, rng.gen::<f64>() * 100.0),
        }
    }

    /// `pct` in `[0, 100]`. A validated table has at least two points; a shorter one (never
    /// built) yields its only value, or 0.
    fn table_quantile(points: &[(f64, u64)], pct: f64) -> u64 {
        let u = pct;
        let i = points
            .partition_point(|p| p.0 <= u)
            .clamp(1, points.len().saturating_sub(1).max(1));
        let (Some(&(q0, v0)), Some(&(q1, v1))) = (points.get(i - 1), points.get(i)) else {
            return points.first().map_or(0, |p| p.1);
        };
        let frac = ((u - q0) / (q1 - q0)).clamp(0.0, 1.0);
        to_ns(v0 as f64 + frac * (v1 as f64 - v0 as f64))
    }

    /// The inverse CDF at `u` in `[0, 1]` (exact for every kind; used by tests and summaries).
    pub fn quantile(&self, u: f64) -> u64 {
        let u = u.clamp(0.0, 1.0);
        let n = std_normal();
        match self {
            Distribution::Table(points) => Self::table_quantile(points, u * 100.0),
            Distribution::Fixed(v) => *v,
            Distribution::Uniform { lo, hi } => to_ns(*lo as f64 + u * (*hi - *lo) as f64),
            Distribution::Exp { mean } => to_ns(-(*mean as f64) * (1.0 - u).ln()),
            Distribution::Normal { mean, sd } => {
                let (m, s) = (*mean as f64, *sd as f64);
                if s == 0.0 {
                    return *mean;
                }
                // Truncated at 0: F(x) = (Phi((x - m) / s) - Phi(-m / s)) / (1 - Phi(-m / s)).
                let lo = n.cdf(-m / s);
                to_ns(m + s * n.inverse_cdf(lo + u * (1.0 - lo)))
            }
            Distribution::LogNormal { median, sigma } => {
                if u == 0.0 {
                    return 0;
                }
                to_ns(*median as f64 * (sigma * n.inverse_cdf(u)).exp())
            }
        }
    }

    /// The mean in nanoseconds (of the truncated distribution for `Normal`).
    pub fn mean_ns(&self) -> f64 {
        match self {
            Distribution::Fixed(v) => *v as f64,
            Distribution::Uniform { lo, hi } => (*lo as f64 + *hi as f64) / 2.0,
            Distribution::Normal { mean, sd } => {
                let (m, s) = (*mean as f64, *sd as f64);
                if s == 0.0 {
                    return m;
                }
                // E[X | X >= 0] = m + s * pdf(a) / (1 - cdf(a)), a = -m/s.
                let (a, n) = (-m / s, std_normal());
                m + s * n.pdf(a) / n.sf(a)
            }
            Distribution::LogNormal { median, sigma } => {
                *median as f64 * (sigma * sigma / 2.0).exp()
            }
            Distribution::Exp { mean } => *mean as f64,
            Distribution::Table(points) => points
                .iter()
                .zip(points.iter().skip(1))
                .map(|(a, b)| (b.0 - a.0) / 100.0 * (a.1 as f64 + b.1 as f64) / 2.0)
                .sum(),
        }
    }
}

#[cfg(test)]
#[path = "distribution_tests.rs"]
mod tests;
