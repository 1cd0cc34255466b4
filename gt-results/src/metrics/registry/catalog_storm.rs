//! The quiesce-storm metrics (`storm.<step>`): how many quiesce/unquiesce cycles ran under I/O,
//! how many I/Os completed meanwhile, and whether any I/O missed its deadline.

use super::{Better, Derive, Headline, MetricDef, Out};
use crate::metrics::{StepResult, Storm};

const STORM: &str = "storm.<step>";

fn storm(s: &StepResult, o: &mut Out, f: fn(&Storm) -> Option<f64>) {
    if let Some(v) = s.storm.as_ref().and_then(f) {
        o.put(v);
    }
}

use Derive::Step;
use Headline::{No, Yes};

/// Quiesce storm: cycles, I/Os, stuck I/Os.
pub static STORM_METRICS: &[MetricDef] = &[
    def!(
        "{step}.storm_cycles",
        "cycles",
        Higher,
        STORM,
        Yes,
        "quiesce/unquiesce cycles completed under I/O (blk_mq_quiesce_queue -> blk_mq_unquiesce_queue)",
        Step(|s, o| storm(s, o, |x| Some(x.cycles as f64)))
    ),
    def!(
        "{step}.storm_cycles_per_s",
        "cycles/s",
        Higher,
        STORM,
        No,
        "quiesce/unquiesce cycles per second of storm",
        Step(|s, o| storm(s, o, Storm::cycles_per_s))
    ),
    def!(
        "{step}.storm_ios",
        "I/Os",
        Higher,
        STORM,
        No,
        "I/Os the disk completed during the storm",
        Step(|s, o| storm(s, o, |x| Some(x.ios as f64)))
    ),
    def!(
        "{step}.storm_stuck",
        "runs",
        Lower,
        STORM,
        Yes,
        "1 when an I/O missed the storm's per-I/O deadline (a lost queue run), else 0",
        Step(|s, o| storm(s, o, |x| Some(if x.stuck { 1.0 } else { 0.0 })))
    ),
    def!(
        "{step}.storm_stranded",
        "runs",
        Lower,
        STORM,
        Yes,
        "lost queue runs the TEST-ONLY unfrozen hook saw: work still pending 2 s after an unquiesce",
        Step(|s, o| storm(s, o, |x| x.stranded.map(|v| v as f64)))
    ),
    def!(
        "{step}.storm_met_pending",
        "cycles",
        Higher,
        STORM,
        No,
        "unfrozen hook: unquiesces that left work to run (submitters met the quiesced queue)",
        Step(|s, o| storm(s, o, |x| x.met_pending.map(|v| v as f64)))
    ),
    def!(
        "{step}.storm_max_settle_us",
        "us",
        Lower,
        STORM,
        No,
        "unfrozen hook: longest wait after an unquiesce for the work it left to be run",
        Step(|s, o| storm(s, o, |x| x.max_settle_us))
    ),
    def!(
        "{step}.storm_max_stall_s",
        "s",
        Lower,
        STORM,
        No,
        "longest time any fio job went without progress during the storm (1 s resolution)",
        Step(|s, o| storm(s, o, |x| x.max_stall_s))
    ),
    def!(
        "{step}.storm_errors",
        "writes",
        Lower,
        STORM,
        No,
        "storm writes the kernel refused",
        Step(|s, o| storm(s, o, |x| Some(x.errors as f64)))
    ),
    def!(
        "{step}.storm_kernel_warnings",
        "lines",
        Lower,
        STORM,
        No,
        "new WARNING/BUG/hung-task lines in the kernel log during the storm",
        Step(|s, o| storm(s, o, |x| x.kernel_warnings.map(|v| v as f64)))
    ),
];
