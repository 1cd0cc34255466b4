//! Parsers for the artefacts the guest agent sends (docs/design/guest-protocol.md), the typed
//! step and guest data they fill ([`StepResult`], [`GuestInfo`]), and the metric registry
//! ([`registry`]) that derives the flat metrics from them.
//!
//! Every parser takes untrusted guest text and returns either a typed summary or a
//! [`MetricsError`]; none of them panics. Lines a parser does not understand are skipped
//! (and counted where that matters), so one odd line never loses a whole artefact.

mod fio;
mod interrupts;
mod irqsw;
pub mod kernlog;
mod locks;
mod order;
pub mod pattern;
pub mod registry;
mod stacks;
mod step;
mod storm;
mod text;

pub use fio::{parse_fio, FioDirection, FioSummary};
pub use interrupts::{interrupt_deltas, is_request_vector, parse_interrupts, InterruptCounts};
pub use irqsw::{parse_irqsw, IrqSwitches, IrqThread};
pub use locks::{
    by_site, concurrency, parse_locks, peak_per_bin, Concurrency, LockFigure, LockFigures,
    LockWaits, SiteWait, Wait, TIMELINE_BIN_MS,
};
pub use order::{median_sorted, quantile_sorted};
pub use stacks::{lock_site, parse_dstacks, LockSites, QUEUE_LOCK_SITE, SLOWPATH_PREFIXES};
pub use step::{GuestInfo, StepFigure, StepResult};
pub use storm::{parse_storm, Storm};
pub use text::{
    parse_funcs, parse_kv, parse_rescan, parse_scan, parse_status, parse_steps, parse_verify,
    GuestStatus, Rescan, ScanTimes, StepRecord, Verify,
};

/// Why an artefact could not be parsed.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum MetricsError {
    #[error("not valid JSON: {0}")]
    Json(String),
    #[error("unexpected structure: {0}")]
    Structure(String),
    #[error("no usable lines")]
    Empty,
    #[error("line {line}: {message}")]
    Line { line: usize, message: String },
}
