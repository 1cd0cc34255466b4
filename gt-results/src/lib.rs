//! What a run produced, typed: the parsers of the guest agent's artefacts and the metric
//! registry ([`metrics`]), and `results.json` with its provenance, derived from them and read
//! back by every later stage ([`results`]).

#![cfg_attr(test, allow(clippy::too_many_lines))]

pub mod metrics;
pub mod results;
