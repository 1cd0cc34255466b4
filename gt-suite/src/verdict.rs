//! `[verdict]`: what a suite's A/B verdict reports beside its primary and secondary metrics,
//! declared as data so that a regression needs a suite, not code (compare::verdict picks the
//! rows, report::verdict_words writes them).
//!
//! Contract:
//! 1. `companions` are metric-name suffixes on the primary metric's step (`qlock_wait_ms_per_s`
//!    for `scale-randread.qlock_wait_ms_per_s`), in the verdict's order; a companion the runs did
//!    not measure is left out of the verdict.
//! 2. `observation` is the regression's own report of the blocked-threads figure, quoted
//!    beside it (seed 000: "the seed: 6-8 of 8").
//! 3. `caveat` is a sentence the verdict adds after the primary metric's, for a primary that
//!    can read well by construction (seed 000's queue_lock share reads 0 for any patch that
//!    takes the lock out of the function it is counted in).
//! 4. A suite with a `primary_metric` declares a `[verdict]` ([`super::SuiteSpec`]'s check), and
//!    every run copies it into results.json (`info.verdict`): a verdict is rebuilt from results
//!    alone. Results written before the table existed were given the one they were judged with,
//!    as data, by `guest-tests migrate verdict` (docs/results/migrations).

use serde::{Deserialize, Serialize};

/// A suite's `[verdict]` table, copied into every run's results.json (`info.verdict`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VerdictSpec {
    #[serde(default)]
    pub companions: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observation: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub caveat: Option<String>,
}

impl VerdictSpec {
    /// Rule 1's names are suffixes (no step, no space); the texts are one line each.
    pub fn validate(&self) -> Result<(), String> {
        let suffix =
            |c: &String| !c.is_empty() && c.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
        if let Some(bad) = self.companions.iter().find(|c| !suffix(c)) {
            return Err(format!(
                "[verdict] companion {bad:?} is not a metric suffix (letters, digits, _)"
            ));
        }
        for (key, text) in [("observation", &self.observation), ("caveat", &self.caveat)] {
            if text
                .as_ref()
                .is_some_and(|t| t.trim().is_empty() || t.contains('\n'))
            {
                return Err(format!("[verdict] {key} must be one non-empty line"));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_texts_are_checked() {
        let ok = VerdictSpec {
            companions: vec!["qlock_wait_ms_per_s".into(), "dblocked_ge4_pct".into()],
            observation: Some("the seed: 6-8 of 8".into()),
            caveat: None,
        };
        assert!(ok.validate().is_ok());
        let mut bad = ok.clone();
        bad.companions.push("step.iops".into());
        assert!(bad.validate().unwrap_err().contains("step.iops"));
        let mut bad = ok;
        bad.caveat = Some(" ".into());
        assert!(bad.validate().unwrap_err().contains("caveat"));
    }
}
