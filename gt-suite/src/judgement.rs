//! `[judgement]`: how a suite's verdict judges each kernel against the baseline, declared as
//! data so that a regression needs a suite, not code (compare::judgement does the statistics,
//! report::judgement_words the words).
//!
//! Contract:
//! 1. `mechanism` is the metric (exact compare name) whose reduction is the mechanism's
//!    "reduced"; `guards` are mechanism metrics that must not rise; `effects` are the seed's own
//!    observables (throughput, latency). Their directions are the metric registry's.
//! 2. `min_reduction` (0 < x < 1) is the least reduction that counts: a ratio whose 95 % CI lies
//!    below `1 - min_reduction` is reduced, one whose CI lies above it is unchanged, anything
//!    between is undecided; the same share sets "increased" (CI above `1 / (1 - min_reduction)`).
//! 3. `effect_margin` (0 <= x < 1): an effect is worse when its CI excludes 1 on the bad side
//!    and the ratio is beyond `1 - effect_margin` (`1 + effect_margin` for lower-is-better).
//! 4. `locks` are per-lock metrics (a lock named by its address in the guest, metrics::locks):
//!    reported in the reasons with their intervals, never deciding.
//! 5. Names and numbers are checked here ([`JudgementSpec::validate`]); that the metrics exist
//!    is checked against the registry when a matrix is planned, like `primary_metric`.
//! 6. `[judgement.words]` says what the figures are about, in the regression's terms, for the
//!    reasons the report writes ([`JudgementWords`]); without it the reasons name the metrics.

use serde::{Deserialize, Serialize};

use crate::SuiteSpec;

/// A suite's `[judgement]` table, copied into every run's results.json (`info.judgement`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JudgementSpec {
    pub mechanism: String,
    #[serde(default)]
    pub guards: Vec<String>,
    pub min_reduction: f64,
    pub effects: Vec<String>,
    pub effect_margin: f64,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub locks: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub words: Option<JudgementWords>,
}

/// Rule 6: the regression's own words, each one line, used as they are in the reasons
/// (report::judgement_words); `{base}` stands for the baseline kernel's name.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JudgementWords {
    /// The mechanism as a plural noun phrase: "{mechanism} fell", "{mechanism} at 0.5x".
    pub mechanism: String,
    /// What a mechanism that increased means, a clause: "the irq threads wait more than on
    /// {base}".
    pub increased: String,
    /// Why the memory model's Sometimes decides, a clause after "decided by the memory model: ".
    pub unsafe_reason: String,
    /// What the memory model's Sometimes means for this code, a clause ("a request can stay
    /// queued while no CPU runs the queue").
    pub sometimes: String,
    /// What the memory model's Never rules out, a noun phrase ("no stranded request").
    pub never: String,
    /// What the mechanism cannot see: sentences the verdict's caveats add.
    pub caveat: String,
}

impl JudgementWords {
    /// Every text, for rule 6's check.
    fn texts(&self) -> [&String; 6] {
        [
            &self.mechanism,
            &self.increased,
            &self.unsafe_reason,
            &self.sometimes,
            &self.never,
            &self.caveat,
        ]
    }
}

impl JudgementSpec {
    /// Rules 2-3 and non-empty names.
    pub fn validate(&self) -> Result<(), String> {
        if !(self.min_reduction > 0.0 && self.min_reduction < 1.0) {
            return Err(format!(
                "[judgement] min_reduction {} is not in (0, 1)",
                self.min_reduction
            ));
        }
        if !(self.effect_margin >= 0.0 && self.effect_margin < 1.0) {
            return Err(format!(
                "[judgement] effect_margin {} is not in [0, 1)",
                self.effect_margin
            ));
        }
        if self.effects.is_empty() {
            return Err("[judgement] names no effects".into());
        }
        let names = self.metrics();
        if let Some(w) = &self.words {
            if w.texts()
                .iter()
                .any(|t| t.trim().is_empty() || t.contains('\n'))
            {
                return Err("[judgement.words] each must be one non-empty line".into());
            }
        }
        if let Some(bad) = names.clone().find(|m| !m.contains('.')) {
            return Err(format!(
                "[judgement] '{bad}' is not a metric name (STEP.METRIC)"
            ));
        }
        Ok(())
    }

    /// Every metric the judgement reads, mechanism first.
    pub fn metrics(&self) -> impl Iterator<Item = &String> + Clone {
        std::iter::once(&self.mechanism)
            .chain(&self.guards)
            .chain(&self.locks)
            .chain(&self.effects)
    }
}

impl SuiteSpec {
    /// The metric that decides about a kernel: the `[judgement]`'s mechanism when the suite has
    /// one (what the irq threads wait for, whatever function takes the lock), else its
    /// `primary_metric`. Bisection classifies by it and the per-boot progress line shows it.
    pub fn deciding_metric(&self) -> Option<&str> {
        self.judgement
            .as_ref()
            .map(|j| j.mechanism.as_str())
            .or(self.primary_metric.as_deref())
    }
}
