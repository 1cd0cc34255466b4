//! The completion model: what the operator configures (TOML or CLI), validated, and how the
//! megaraid_sas-like presets expand into per-vector settings.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer};
use thiserror::Error;

use super::distribution::{parse_duration_ns, Distribution, DistributionError, MAX_NS};
use vhost_blk_units::format_ns;

/// Default coalescing used by the `iops` and `balanced` presets when none is configured.
/// Our choice (megaraid's firmware values are not public): 16 completions or 50 us.
pub const PRESET_COALESCE: Coalesce = Coalesce {
    max_batch: 16,
    max_delay_ns: 50_000,
};

/// Default per-queue completion rate above which `balanced` coalesces (completions per second).
pub const DEFAULT_BALANCED_THRESHOLD_IOPS: u64 = 20_000;

/// Default length of the window over which `balanced` measures a queue's rate.
pub const DEFAULT_RATE_WINDOW_NS: u64 = 10_000_000;

/// Default spin before a deadline. Measured on the 2-core development host (load ~6, 2,000 wakes
/// at 200 us): a timerfd alone wakes late by p50 20 us, p90 25 us, p99 64 us. Spinning 20 us cuts
/// the error to p50 0.03 us, p90 6 us for ~2 us of spinning per wake; 30 us reaches p90 0.04 us
/// but spins ~9 us per wake, which guest vCPU threads on 2 cores pay for.
pub const DEFAULT_SPIN_NS: u64 = 20_000;

/// Largest spin accepted: beyond that, spinning costs more than it could save.
pub const MAX_SPIN_NS: u64 = 1_000_000;

/// Errors of a completion model.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum ModelError {
    #[error("{field}: {source}")]
    Distribution {
        field: String,
        #[source]
        source: DistributionError,
    },
    #[error("{0}: max_batch must be at least 1")]
    ZeroBatch(String),
    #[error("{0}: max_delay must be > 0 when max_batch > 1 (use `off` to disable coalescing)")]
    ZeroDelay(String),
    #[error("{field}: {value} ns exceeds the limit of {limit} ns")]
    TooLarge {
        field: String,
        value: u64,
        limit: u64,
    },
    #[error("aligned_tick must be greater than 0 (omit it to disable)")]
    ZeroTick,
    #[error("rate_window must be greater than 0")]
    ZeroWindow,
    #[error("override for vector {vector}, but the device has only {queues} queues")]
    VectorOutOfRange { vector: u16, queues: u16 },
    #[error("bad coalesce {0:?} (expected `off` or BATCH/DELAY, e.g. 16/50us)")]
    BadCoalesce(String),
    #[error("unknown perf mode {0:?} (expected balanced, iops or latency)")]
    BadPerfMode(String),
    #[error("bad vector override {0:?} (expected VECTOR:key=value;... with keys service, msix, coalesce)")]
    BadOverride(String),
}

/// Interrupt coalescing: signal once `max_batch` completions are pending or the oldest has been
/// pending for `max_delay_ns`, whichever comes first. `max_batch == 1` is "off" (every
/// completion triggers at once).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Coalesce {
    pub max_batch: u32,
    #[serde(deserialize_with = "de_ns", alias = "max_delay")]
    pub max_delay_ns: u64,
}

impl Coalesce {
    /// Coalescing disabled.
    pub const OFF: Coalesce = Coalesce {
        max_batch: 1,
        max_delay_ns: 0,
    };

    /// True unless this holds completions back.
    pub fn is_off(&self) -> bool {
        self.max_batch <= 1
    }

    fn validate(&self, field: &str) -> Result<(), ModelError> {
        if self.max_batch == 0 {
            return Err(ModelError::ZeroBatch(field.to_string()));
        }
        if self.max_batch > 1 && self.max_delay_ns == 0 {
            return Err(ModelError::ZeroDelay(field.to_string()));
        }
        check_limit(field, self.max_delay_ns, MAX_NS)
    }
}

impl FromStr for Coalesce {
    type Err = ModelError;
    /// `off` or `BATCH/DELAY`, e.g. `16/50us`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || ModelError::BadCoalesce(s.to_string());
        if s.trim() == "off" {
            return Ok(Coalesce::OFF);
        }
        let (batch, delay) = s.split_once('/').ok_or_else(bad)?;
        let c = Coalesce {
            max_batch: batch.trim().parse().map_err(|_| bad())?,
            max_delay_ns: parse_duration_ns(delay).map_err(|_| bad())?,
        };
        c.validate("coalesce")?;
        Ok(c)
    }
}

impl fmt::Display for Coalesce {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_off() {
            write!(f, "off")
        } else {
            write!(f, "{}/{}", self.max_batch, format_ns(self.max_delay_ns))
        }
    }
}

/// megaraid_sas `perf_mode` analogue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PerfMode {
    /// Coalesce only while a queue is busy: its completion rate over the last window reached
    /// `balanced_threshold_iops` (megaraid steers busy devices to coalescing high-IOPS queues).
    Balanced,
    /// Coalesce on every queue.
    Iops,
    /// Never coalesce (overrides the global `coalesce`; per-vector overrides still apply).
    Latency,
}

impl FromStr for PerfMode {
    type Err = ModelError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim() {
            "balanced" => Ok(PerfMode::Balanced),
            "iops" => Ok(PerfMode::Iops),
            "latency" => Ok(PerfMode::Latency),
            other => Err(ModelError::BadPerfMode(other.to_string())),
        }
    }
}

impl fmt::Display for PerfMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            PerfMode::Balanced => "balanced",
            PerfMode::Iops => "iops",
            PerfMode::Latency => "latency",
        })
    }
}

/// Settings that replace the model's for one vector (queue).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VectorOverride {
    pub service: Option<Distribution>,
    pub msix: Option<Distribution>,
    /// Explicit coalescing for this vector; it wins over the preset (`off` = `max_batch = 1`).
    #[serde(default, deserialize_with = "de_opt_coalesce")]
    pub coalesce: Option<Coalesce>,
}

pub fn parse_dist(field: &str, value: &str) -> Result<Distribution, ModelError> {
    value.parse().map_err(|source| ModelError::Distribution {
        field: field.to_string(),
        source,
    })
}

/// The whole completion model of a device. Deserializes from TOML (durations as integers of ns
/// or strings such as `"50us"`; distributions as strings in the CLI syntax), e.g.
///
/// ```toml
/// msix = "uniform:10us..100us"
/// coalesce = { max_batch = 8, max_delay = "50us" }
/// aligned_tick = "100us"
/// seed = 7
/// [overrides.3]
/// msix = "1ms"
/// ```
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CompletionModel {
    /// Emulated device service time, added after the I/O itself (0 for the seed-000 experiment).
    pub service: Distribution,
    /// Completion-to-interrupt latency of every vector without an override.
    pub msix: Distribution,
    /// Per-vector (per-queue) replacements.
    #[serde(deserialize_with = "de_overrides")]
    pub overrides: BTreeMap<u16, VectorOverride>,
    /// Coalescing for all vectors (None = off), subject to the preset.
    #[serde(deserialize_with = "de_opt_coalesce")]
    pub coalesce: Option<Coalesce>,
    /// Round every interrupt deadline up to a multiple of this on CLOCK_MONOTONIC.
    #[serde(deserialize_with = "de_opt_ns", alias = "aligned_tick")]
    pub aligned_tick_ns: Option<u64>,
    /// Wake this long before a deadline and spin for the rest.
    #[serde(deserialize_with = "de_ns", alias = "spin")]
    pub spin_ns: u64,
    /// Seed of all per-vector random streams.
    pub seed: u64,
    pub preset: Option<PerfMode>,
    /// `balanced`: a queue coalesces while its rate is at least this (completions/s).
    pub balanced_threshold_iops: u64,
    /// `balanced`: the rate window.
    #[serde(deserialize_with = "de_ns", alias = "rate_window")]
    pub rate_window_ns: u64,
}

impl Default for CompletionModel {
    fn default() -> Self {
        CompletionModel {
            service: Distribution::Fixed(0),
            msix: Distribution::Fixed(0),
            overrides: BTreeMap::new(),
            coalesce: None,
            aligned_tick_ns: None,
            spin_ns: DEFAULT_SPIN_NS,
            seed: 0,
            preset: None,
            balanced_threshold_iops: DEFAULT_BALANCED_THRESHOLD_IOPS,
            rate_window_ns: DEFAULT_RATE_WINDOW_NS,
        }
    }
}

/// The settings one vector's engine runs with, after overrides and preset expansion.
#[derive(Debug, Clone, PartialEq)]
pub struct VectorSettings {
    pub service: Distribution,
    pub msix: Distribution,
    /// Coalescing when active (None = never).
    pub coalesce: Option<Coalesce>,
    /// Coalescing applies only while the rate test says the queue is busy (`balanced`).
    pub rate_gated: bool,
    pub aligned_tick_ns: Option<u64>,
}

fn check_limit(field: &str, value: u64, limit: u64) -> Result<(), ModelError> {
    if value > limit {
        return Err(ModelError::TooLarge {
            field: field.to_string(),
            value,
            limit,
        });
    }
    Ok(())
}

impl CompletionModel {
    /// Validates every field; call once after building the model from TOML or CLI.
    pub fn validate(&self) -> Result<(), ModelError> {
        let dist = |field: &str, d: &Distribution| {
            d.validate().map_err(|source| ModelError::Distribution {
                field: field.to_string(),
                source,
            })
        };
        dist("service", &self.service)?;
        dist("msix", &self.msix)?;
        if let Some(c) = &self.coalesce {
            c.validate("coalesce")?;
        }
        for (v, ov) in &self.overrides {
            if let Some(d) = &ov.service {
                dist(&format!("vector {v} service"), d)?;
            }
            if let Some(d) = &ov.msix {
                dist(&format!("vector {v} msix"), d)?;
            }
            if let Some(c) = &ov.coalesce {
                c.validate(&format!("vector {v} coalesce"))?;
            }
        }
        match self.aligned_tick_ns {
            Some(0) => return Err(ModelError::ZeroTick),
            Some(t) => check_limit("aligned_tick", t, MAX_NS)?,
            None => {}
        }
        check_limit("spin", self.spin_ns, MAX_SPIN_NS)?;
        if self.rate_window_ns == 0 {
            return Err(ModelError::ZeroWindow);
        }
        check_limit("rate_window", self.rate_window_ns, MAX_NS)
    }

    /// Validates, and also that every override names an existing queue.
    pub fn validate_for_queues(&self, queues: u16) -> Result<(), ModelError> {
        self.validate()?;
        if let Some((&vector, _)) = self.overrides.range(queues..).next() {
            return Err(ModelError::VectorOutOfRange { vector, queues });
        }
        Ok(())
    }

    /// Expands overrides and the preset for one vector:
    /// explicit per-vector `coalesce` > preset (`latency`: off; `iops`: the model's coalescing or
    /// [`PRESET_COALESCE`]; `balanced`: the same, gated by the rate test) > the model's `coalesce`.
    pub fn settings_for(&self, vector: u16) -> VectorSettings {
        let ov = self.overrides.get(&vector);
        let service = ov.and_then(|o| o.service.clone());
        let msix = ov.and_then(|o| o.msix.clone());
        let (coalesce, rate_gated) = match (ov.and_then(|o| o.coalesce), self.preset) {
            (Some(c), _) => (Some(c), false),
            (None, None) => (self.coalesce, false),
            (None, Some(PerfMode::Latency)) => (None, false),
            (None, Some(PerfMode::Iops)) => (Some(self.coalesce.unwrap_or(PRESET_COALESCE)), false),
            (None, Some(PerfMode::Balanced)) => {
                (Some(self.coalesce.unwrap_or(PRESET_COALESCE)), true)
            }
        };
        let coalesce = coalesce.filter(|c| !c.is_off());
        VectorSettings {
            service: service.unwrap_or_else(|| self.service.clone()),
            msix: msix.unwrap_or_else(|| self.msix.clone()),
            rate_gated: rate_gated && coalesce.is_some(),
            coalesce,
            aligned_tick_ns: self.aligned_tick_ns,
        }
    }
}

impl fmt::Display for CompletionModel {
    /// One line for the log.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let opt = |c: Option<Coalesce>| c.map_or("off".to_string(), |c| c.to_string());
        write!(
            f,
            "service={} msix={} coalesce={} preset={} tick={} spin={} seed={}",
            self.service,
            self.msix,
            opt(self.coalesce),
            self.preset.map_or("none".to_string(), |p| p.to_string()),
            self.aligned_tick_ns.map_or("off".to_string(), format_ns),
            format_ns(self.spin_ns),
            self.seed
        )?;
        if self.preset == Some(PerfMode::Balanced) {
            write!(
                f,
                " balanced>={}iops/{}",
                self.balanced_threshold_iops,
                format_ns(self.rate_window_ns)
            )?;
        }
        for (v, ov) in &self.overrides {
            write!(f, " v{v}[")?;
            let mut sep = "";
            if let Some(d) = &ov.service {
                write!(f, "service={d}")?;
                sep = ";";
            }
            if let Some(d) = &ov.msix {
                write!(f, "{sep}msix={d}")?;
                sep = ";";
            }
            if let Some(c) = &ov.coalesce {
                write!(f, "{sep}coalesce={c}")?;
            }
            write!(f, "]")?;
        }
        Ok(())
    }
}

#[derive(Deserialize)]
#[serde(untagged)]
enum RawNs {
    Ns(u64),
    Text(String),
}

impl RawNs {
    fn into_ns<E: serde::de::Error>(self) -> Result<u64, E> {
        match self {
            RawNs::Ns(n) => Ok(n),
            RawNs::Text(s) => parse_duration_ns(&s).map_err(E::custom),
        }
    }
}

fn de_ns<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    RawNs::deserialize(d)?.into_ns()
}

fn de_opt_ns<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    Option::<RawNs>::deserialize(d)?
        .map(RawNs::into_ns)
        .transpose()
}

fn de_opt_coalesce<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Coalesce>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Raw {
        Text(String),
        Table(Coalesce),
    }
    match Option::<Raw>::deserialize(d)? {
        None => Ok(None),
        Some(Raw::Table(c)) => Ok(Some(c)),
        Some(Raw::Text(s)) => s.parse().map(Some).map_err(serde::de::Error::custom),
    }
}

fn de_overrides<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<BTreeMap<u16, VectorOverride>, D::Error> {
    // TOML table keys are strings: parse them as vector numbers here.
    let raw = BTreeMap::<String, VectorOverride>::deserialize(d)?;
    raw.into_iter()
        .map(|(k, v)| {
            k.trim().parse::<u16>().map(|k| (k, v)).map_err(|_| {
                serde::de::Error::custom(format!("override key `{k}` is not a vector number"))
            })
        })
        .collect()
}
