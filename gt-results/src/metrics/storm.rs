//! `storm.<step>`: what the agent's quiesce storm did (images/agent/init, `step_storm`).
//!
//! Contract:
//! 1. The artefact is whitespace-separated `key=value` tokens over a few lines; unknown keys are
//!    ignored, so the agent can add fields without breaking old hosts.
//! 2. `cycles`, `errors`, `secs`, `ios` and `stuck` are required and must be finite and
//!    non-negative (`stuck` 0 or 1); anything else is a [`MetricsError`], never a panic.
//! 3. A storm with `stuck=1` keeps its figures: the cycles and I/Os before the stuck I/O are
//!    still what the run did.

use serde::{Deserialize, Serialize};

use super::text::kv_pairs;
use super::MetricsError;

/// One quiesce storm under I/O.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Storm {
    /// The kernel path driven (`nr_requests`, or `debugfs-quiesce_storm`: the TEST-ONLY unfrozen
    /// hook of images/patches/6.12/storm-hook.patch).
    pub path: String,
    /// Completed quiesce/unquiesce cycles (successful writes that changed the value).
    pub cycles: u64,
    /// Writes the kernel refused.
    pub errors: u64,
    /// Wall seconds of the storm (guest uptime).
    pub secs: f64,
    /// Reads + writes the disk completed during the storm (`/sys/block/<disk>/stat`).
    pub ios: u64,
    /// The watchdog's per-I/O deadline.
    pub deadline_s: Option<f64>,
    /// The longest time any fio job went without progress, seconds (1 s resolution).
    pub max_stall_s: Option<f64>,
    /// fio jobs watched.
    pub jobs: Option<u64>,
    /// New WARNING/BUG/hung-task lines in the kernel log during the storm.
    pub kernel_warnings: Option<u64>,
    /// An I/O missed its deadline (evidence in `storm.<step>.stuck`).
    pub stuck: bool,
    /// Unfrozen hook only: unquiesces that left work to run (submitters met the quiesced queue).
    pub met_pending: Option<u64>,
    /// Unfrozen hook only: lost queue runs the hook saw (work pending 2 s after an unquiesce).
    pub stranded: Option<u64>,
    /// Unfrozen hook only: the longest wait for that work to be run, microseconds.
    pub max_settle_us: Option<f64>,
}

fn num(kv: &std::collections::BTreeMap<&str, &str>, k: &str) -> Result<f64, MetricsError> {
    kv.get(k)
        .and_then(|v| v.parse::<f64>().ok())
        .filter(|v| v.is_finite() && *v >= 0.0)
        .ok_or_else(|| MetricsError::Structure(format!("no valid `{k}=`")))
}

fn opt(kv: &std::collections::BTreeMap<&str, &str>, k: &str) -> Option<f64> {
    num(kv, k).ok()
}

/// Parses `storm.<step>`.
pub fn parse_storm(text: &str) -> Result<Storm, MetricsError> {
    let kv = kv_pairs(text);
    if kv.is_empty() {
        return Err(MetricsError::Empty);
    }
    let stuck = match kv.get("stuck") {
        Some(&"0") => false,
        Some(&"1") => true,
        _ => return Err(MetricsError::Structure("no valid `stuck=` (0 or 1)".into())),
    };
    Ok(Storm {
        path: kv.get("path").map(|s| s.to_string()).unwrap_or_default(),
        cycles: num(&kv, "cycles")? as u64,
        errors: num(&kv, "errors")? as u64,
        secs: num(&kv, "secs")?,
        ios: num(&kv, "ios")? as u64,
        deadline_s: opt(&kv, "deadline_s"),
        max_stall_s: opt(&kv, "max_stall_s"),
        jobs: opt(&kv, "jobs").map(|v| v as u64),
        kernel_warnings: opt(&kv, "kernel_warnings").map(|v| v as u64),
        stuck,
        met_pending: opt(&kv, "met_pending").map(|v| v as u64),
        stranded: opt(&kv, "stranded").map(|v| v as u64),
        max_settle_us: opt(&kv, "max_settle_us"),
    })
}

impl Storm {
    /// Cycles per second of storm (None for a zero-length storm).
    pub fn cycles_per_s(&self) -> Option<f64> {
        (self.secs > 0.0).then(|| self.cycles as f64 / self.secs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OK: &str = "path=nr_requests values=64,128 deadline_s=10\ncycles=10240 errors=0\n\
        secs=61.50 ios=40000\njobs=8 max_stall_s=1 kernel_warnings=0\nstuck=0 stuck_jobs=\n";

    #[test]
    fn parses_a_clean_storm() {
        let s = parse_storm(OK).unwrap();
        assert_eq!(s.path, "nr_requests");
        assert_eq!((s.cycles, s.errors, s.ios), (10240, 0, 40000));
        assert_eq!(s.jobs, Some(8));
        assert_eq!(s.max_stall_s, Some(1.0));
        assert!(!s.stuck);
        assert!((s.cycles_per_s().unwrap() - 10240.0 / 61.5).abs() < 1e-9);
    }

    #[test]
    fn keeps_the_figures_of_a_stuck_storm() {
        let s =
            parse_storm(&OK.replace("stuck=0 stuck_jobs=", "stuck=1 stuck_jobs=812,815")).unwrap();
        assert!(s.stuck);
        assert_eq!(s.cycles, 10240);
    }

    /// The unfrozen hook's artefact, as the agent writes it: the hook's counters, then its
    /// kernel log lines commented out.
    const HOOK: &str = "path=debugfs-quiesce_storm hold_us=10 deadline_s=10\n\
        cycles=181345 met_pending=2210 max_settle_us=5120 stranded=0 errors=0\n\
        secs=30.41 ios=201000\njobs=8 max_stall_s=0 kernel_warnings=0\nstuck=0 stuck_jobs=\n";

    #[test]
    fn parses_the_unfrozen_hook() {
        let s = parse_storm(HOOK).unwrap();
        assert_eq!(s.path, "debugfs-quiesce_storm");
        assert_eq!(
            (s.cycles, s.met_pending, s.stranded),
            (181345, Some(2210), Some(0))
        );
        assert_eq!(s.max_settle_us, Some(5120.0));
        assert_eq!(parse_storm(OK).unwrap().stranded, None);
        let lost = HOOK.replace("stranded=0 errors=0", "stranded=1 errors=1")
            + "# [ 41.2] blk-mq quiesce storm: lost queue run: hctx3 has pending work\n";
        let s = parse_storm(&lost).unwrap();
        assert_eq!((s.stranded, s.errors), (Some(1), 1));
    }

    #[test]
    fn rejects_bad_input_without_panicking() {
        assert_eq!(parse_storm(""), Err(MetricsError::Empty));
        assert!(parse_storm(&OK.replace("stuck=0", "stuck=2")).is_err());
        assert!(parse_storm(&OK.replace("cycles=10240", "cycles=-1")).is_err());
        assert!(parse_storm(&OK.replace("secs=61.50", "secs=NaN")).is_err());
        assert!(parse_storm(&OK.replace("ios=40000", "")).is_err());
        assert!(parse_storm("\u{0}\u{ff}=\n=== stuck").is_err());
        let s = parse_storm("cycles=1 errors=0 secs=0 ios=0 stuck=0").unwrap();
        assert_eq!(s.cycles_per_s(), None);
    }
}
