//! The metric registry: every metric compare can see is declared here once, with its unit,
//! which direction is better, a description, the artefact that produces it, whether the report
//! plots it by default, and its derivation. `results` derives the flat `metrics` map of
//! results.json with [`derive_step`] and [`derive_guest`]; compare, report and plots read
//! [`find`] for units, direction and descriptions. Nothing else knows metric names.
//!
//! # Adding a metric
//!
//! 1. Add one [`MetricDef`] to the catalogue of its kind, the only place metric names are
//!    written: [`METRICS`] (`registry/catalog.rs`: fio, interrupts, D switches, function
//!    counts, rescans, verify), [`HOST_METRICS`] (`catalog_host.rs`: `harness.*`),
//!    [`LOCK_METRICS`] (`catalog_locks.rs`: lock waits, step CPU; a lock metric's name suffix
//!    is its [`super::LockFigure`]'s, declared once in `metrics/locks/figures.rs` and named by
//!    variant everywhere else, its entry one `lock!` line), [`STORM_METRICS`]
//!    (`catalog_storm.rs`) or [`SCAN_METRICS`] (`catalog_scan.rs`). Give its name pattern (see
//!    [`super::pattern`]: `{step}` for per-step metrics, extra placeholders such as `{site}` or
//!    `{k}` for families), unit, [`Better`], description, source, [`Headline`], and its
//!    derivation: `Derive::Step(fn(&StepResult, &mut Out))` for per-step data,
//!    `Derive::Guest(..)` for whole-run guest data, or `Derive::Host(fn(&HostTimes, &mut Out))`
//!    for what launch measured on the host. More specific patterns go before more general ones
//!    (`..._per_kio` before `{func}`): the first match in [`all`]'s order names a metric.
//! 2. Only if it needs raw data nothing records yet: extend the parser of the artefact that
//!    carries it (its typed summary is already on [`StepResult`] or [`GuestInfo`]), or for a
//!    host measurement the launch code that fills [`HostTimes`]. A brand-new artefact kind
//!    also needs its field on [`StepResult`] (`metrics/step.rs`) and its arm in
//!    `results/derive.rs`.
//!
//! A suite that names a `primary_metric` gives its exact compare name; [`find`] checks it
//! (`find("randread.irq_d_per_kio")`).

use std::collections::BTreeMap;

use super::pattern::{self, Captures};

/// One [`MetricDef`] in the catalogues' compact form (defined before the catalogue modules, so
/// both see it).
macro_rules! def {
    ($pattern:expr, $unit:expr, $better:ident, $source:expr, $headline:expr, $desc:expr, $derive:expr) => {
        MetricDef {
            pattern: $pattern,
            unit: $unit,
            better: Better::$better,
            description: $desc,
            source: $source,
            headline: $headline,
            derive: $derive,
        }
    };
}

mod catalog;
mod catalog_host;
mod catalog_locks;
mod catalog_scan;
mod catalog_storm;

use super::{GuestInfo, StepResult};
pub use catalog::{scan_metric, METRICS};
pub use catalog_host::{HARNESS_BOOT_TO_FIO_READY_S, HARNESS_QEMU_WALL_S, HOST_METRICS};
pub use catalog_locks::LOCK_METRICS;
pub use catalog_scan::SCAN_METRICS;
pub use catalog_storm::STORM_METRICS;
use gt_launch::HostTimes;

/// Every metric, in resolution order.
pub fn all() -> impl Iterator<Item = &'static MetricDef> {
    METRICS
        .iter()
        .chain(HOST_METRICS.iter())
        .chain(LOCK_METRICS.iter())
        .chain(STORM_METRICS.iter())
        .chain(SCAN_METRICS.iter())
}

/// Which way a change is an improvement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Better {
    Higher,
    Lower,
    /// A count or a setting that describes the run rather than judging it.
    Neither,
}

/// Whether the report plots a metric by default (besides every flagged metric).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Headline {
    No,
    Yes,
    /// Only when the placeholder has one of these values.
    For(&'static str, &'static [&'static str]),
}

/// How a metric is derived.
#[derive(Clone, Copy)]
pub enum Derive {
    /// From one step's data; the pattern starts with `{step}`.
    Step(fn(&StepResult, &mut Out)),
    /// From what the guest reported about the whole run.
    Guest(fn(&GuestInfo, &mut Out)),
    /// From what launch measured on the host (`harness.*`).
    Host(fn(&HostTimes, &mut Out)),
}

/// One metric (or family of metrics sharing a pattern).
#[derive(Clone, Copy)]
pub struct MetricDef {
    /// Name pattern, e.g. `{step}.irq_d_per_kio` (see [`super::pattern`]).
    pub pattern: &'static str,
    pub unit: &'static str,
    pub better: Better,
    pub description: &'static str,
    /// The step or artefact that produces it (`fio.<step>.json`, `irqsw.<step>`, ...).
    pub source: &'static str,
    pub headline: Headline,
    pub derive: Derive,
}

impl std::fmt::Debug for MetricDef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MetricDef")
            .field("pattern", &self.pattern)
            .field("unit", &self.unit)
            .field("better", &self.better)
            .finish_non_exhaustive()
    }
}

/// A metric name resolved against the registry.
#[derive(Debug, Clone)]
pub struct Resolved {
    pub def: &'static MetricDef,
    pub captures: Captures,
}

impl Resolved {
    /// Measured on the host (not derived from artefacts).
    pub fn is_harness(&self) -> bool {
        matches!(self.def.derive, Derive::Host(_))
    }

    /// Plotted by default.
    pub fn is_headline(&self) -> bool {
        match self.def.headline {
            Headline::No => false,
            Headline::Yes => true,
            Headline::For(var, values) => self
                .captures
                .iter()
                .any(|(k, v)| k == var && values.contains(&v.as_str())),
        }
    }
}

/// The definition a metric name belongs to (first matching pattern).
pub fn find(name: &str) -> Option<Resolved> {
    all().find_map(|def| {
        pattern::matches(def.pattern, name).map(|captures| Resolved { def, captures })
    })
}

/// True when the report plots `name` by default.
pub fn is_headline(name: &str) -> bool {
    find(name).is_some_and(|r| r.is_headline())
}

/// Where a derivation writes: names are built from the def's pattern, so they always match it.
pub struct Out<'a> {
    pattern: &'static str,
    step: &'a str,
    m: &'a mut BTreeMap<String, f64>,
}

impl Out<'_> {
    /// The metric with only `{step}` (if any) filled in. Non-finite values are dropped.
    pub fn put(&mut self, v: f64) {
        self.put_with(&[], v);
    }

    /// The metric with further placeholders (`("dir", "read")`, `("func", f)`).
    pub fn put_with(&mut self, vars: &[(&str, &str)], v: f64) {
        if !v.is_finite() {
            return;
        }
        let mut all = vec![("step", self.step)];
        all.extend_from_slice(vars);
        let name = pattern::fill(self.pattern, &all);
        debug_assert!(!name.contains('{'), "{}: unfilled in {name}", self.pattern);
        self.m.insert(name, v);
    }
}

/// Adds the metrics of one step (named `step.name`) to `m`.
pub fn derive_step(m: &mut BTreeMap<String, f64>, step: &StepResult) {
    for def in all() {
        if let Derive::Step(f) = def.derive {
            f(
                step,
                &mut Out {
                    pattern: def.pattern,
                    step: &step.name,
                    m,
                },
            );
        }
    }
}

/// Adds the metrics launch measured on the host to `m`.
pub fn derive_host(m: &mut BTreeMap<String, f64>, times: &HostTimes) {
    for def in all() {
        if let Derive::Host(f) = def.derive {
            f(
                times,
                &mut Out {
                    pattern: def.pattern,
                    step: "",
                    m,
                },
            );
        }
    }
}

/// Adds the whole-run guest metrics to `m`.
pub fn derive_guest(m: &mut BTreeMap<String, f64>, guest: &GuestInfo) {
    for def in all() {
        if let Derive::Guest(f) = def.derive {
            f(
                guest,
                &mut Out {
                    pattern: def.pattern,
                    step: "",
                    m,
                },
            );
        }
    }
}

#[cfg(test)]
mod tests;
