//! Placeholder of the memory-model check's types (issue 45 brings the check itself).

use serde::{Deserialize, Serialize};

/// herd7's answer for a litmus test's `exists` clause.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Answer {
    Never,
    Sometimes,
}

/// One litmus test's answer.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct LitmusOutcome {
    pub component: String,
    pub test: String,
    pub path: String,
    pub answer: Answer,
    pub expected: Option<Answer>,
}

/// Every test a kernel's components carry, with the model's version.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct OrderingCheck {
    pub kernel: String,
    pub model: String,
    pub outcomes: Vec<LitmusOutcome>,
    pub unchecked: Vec<String>,
}

impl OrderingCheck {
    /// The tests herd7 answered Sometimes.
    pub fn sometimes(&self) -> Vec<&LitmusOutcome> {
        self.outcomes
            .iter()
            .filter(|o| o.answer == Answer::Sometimes)
            .collect()
    }
}

/// What the memory-model check of a run's kernel gave (results.json `info.ordering`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum OrderingRecord {
    Checked(OrderingCheck),
    /// herd7 or the model could not run: the reason.
    Failed {
        reason: String,
    },
}

/// The check of kernel `spec` as a run records it (placeholder until the check lands).
pub fn record_for(spec: &str, _images: &crate::images::ImageOptions) -> OrderingRecord {
    OrderingRecord::Failed {
        reason: format!("{spec}: the memory-model check is not built yet"),
    }
}
