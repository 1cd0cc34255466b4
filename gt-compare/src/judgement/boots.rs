//! What each kernel's boots did, whatever their figures: how many ran, which failed or timed
//! out and what their console said, and what the kernel's own log reported (judgement rule 6).
//!
//! Contract:
//! 1. Every run of the kernel counts, successful or not, kept failed attempts included (a
//!    kernel that dies at boot is retried by the executor; each death is a boot).
//! 2. A failed or timed-out boot whose kernel log holds only TCG's stale-int3 Oops
//!    (`kernlog::LogClass::EmulatorInt3`) is the emulated machine's, counted in `emulator` and
//!    never against the kernel; every other failure counts (`failed`), with the most telling
//!    line: the first counted kernel-log finding, else the run's reason.
//! 3. A kernel-log finding (class and signature, `kernlog`) is `new` when no boot of the
//!    baseline logged the same, else `shared`; each with the number of the kernel's boots that
//!    logged it. Emulator findings are neither.

use serde::{Deserialize, Serialize};

use gt_results::metrics::kernlog::{LogClass, LogFinding};
use gt_results::results::{RunResult, RunStatus};

/// A boot that did not end well.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FailedBoot {
    /// The run directory's last component.
    pub run: String,
    /// `failed` or `timed out`.
    pub state: String,
    /// The most telling line (rule 2).
    pub line: String,
}

/// A report in the kernel's log, over its boots.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LogLine {
    pub class: LogClass,
    pub signature: String,
    /// The first boot's line, as logged.
    pub line: String,
    /// How many of the kernel's boots logged it.
    pub boots: usize,
}

/// One kernel's boots (rules 1-3).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BootsPart {
    pub boots: usize,
    pub ok: usize,
    pub failed: Vec<FailedBoot>,
    /// Boots lost to the emulated machine (rule 2).
    pub emulator: usize,
    /// Findings no baseline boot logged (rule 3).
    pub new_log: Vec<LogLine>,
    /// Findings the baseline logged too.
    pub shared_log: Vec<LogLine>,
}

fn run_name(r: &RunResult) -> String {
    let d = &r.info.run_dir;
    d.file_name().map_or_else(
        || d.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    )
}

/// Rule 2's telling line of a failed run.
fn telling(r: &RunResult) -> String {
    if let Some(f) = r.kernel_log.iter().find(|f| f.class.counts()) {
        return f.line.clone();
    }
    match &r.status {
        RunStatus::Failed { reason } => reason.chars().take(300).collect(),
        RunStatus::TimedOut { after_s } => format!("killed after {after_s:.0} s without an end"),
        RunStatus::Ok => String::new(),
    }
}

fn only_emulator(r: &RunResult) -> bool {
    r.kernel_log
        .iter()
        .any(|f| f.class == LogClass::EmulatorInt3)
        && !r.kernel_log.iter().any(|f| f.class.counts())
}

/// The findings of `runs`, merged per (class, signature), each with its boot count.
fn findings<'a>(runs: impl Iterator<Item = &'a RunResult>) -> Vec<LogLine> {
    let mut out: Vec<LogLine> = Vec::new();
    for r in runs {
        let mut seen: Vec<&LogFinding> = Vec::new();
        for f in r.kernel_log.iter().filter(|f| f.class.counts()) {
            if seen
                .iter()
                .any(|s| s.class == f.class && s.signature == f.signature)
            {
                continue;
            }
            seen.push(f);
            match out
                .iter_mut()
                .find(|o| o.class == f.class && o.signature == f.signature)
            {
                Some(o) => o.boots += 1,
                None => out.push(LogLine {
                    class: f.class,
                    signature: f.signature.clone(),
                    line: f.line.clone(),
                    boots: 1,
                }),
            }
        }
    }
    out
}

/// Rules 1-3 for `kernel`, against the boots of `base`.
pub fn boots_part(runs: &[RunResult], kernel: &str, base: &str) -> BootsPart {
    let mine = || runs.iter().filter(|r| r.info.kernel == kernel);
    let mut part = BootsPart::default();
    for r in mine() {
        part.boots += 1;
        if r.status.is_ok() {
            part.ok += 1;
        } else if only_emulator(r) {
            part.emulator += 1;
        } else {
            part.failed.push(FailedBoot {
                run: run_name(r),
                state: match r.status {
                    RunStatus::TimedOut { .. } => "timed out".into(),
                    _ => "failed".into(),
                },
                line: telling(r),
            });
        }
    }
    let base_log = findings(runs.iter().filter(|r| r.info.kernel == base));
    for l in findings(mine()) {
        let shared = kernel != base
            && base_log
                .iter()
                .any(|b| b.class == l.class && b.signature == l.signature);
        if shared || kernel == base {
            part.shared_log.push(l);
        } else {
            part.new_log.push(l);
        }
    }
    part
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::run;

    fn finding(class: LogClass, sig: &str) -> LogFinding {
        LogFinding {
            class,
            signature: sig.into(),
            line: format!("{sig} (as logged)"),
            count: 1,
        }
    }

    #[test]
    fn failed_boots_count_with_their_line_and_the_emulators_do_not() {
        let mut v = vec![
            run("base", None, &[]),
            run("k", None, &[]),
            run("k", None, &[]),
            run("k", None, &[]),
            run("k", None, &[]),
        ];
        v[2].status = RunStatus::Failed {
            reason: "guest ended without a status artefact".into(),
        };
        v[2].kernel_log = vec![finding(LogClass::Panic, "kernel panic: x")];
        v[3].status = RunStatus::TimedOut { after_s: 150.0 };
        v[4].status = RunStatus::Failed {
            reason: "Oops: int3".into(),
        };
        v[4].kernel_log = vec![finding(LogClass::EmulatorInt3, "int3")];
        let p = boots_part(&v, "k", "base");
        assert_eq!((p.boots, p.ok, p.emulator, p.failed.len()), (4, 1, 1, 2));
        assert_eq!(p.failed[0].line, "kernel panic: x (as logged)");
        assert_eq!(p.failed[1].state, "timed out");
        assert!(p.failed[1].line.contains("150 s"));
        // The panic is also a finding of the kernel's log, one boot of four.
        assert_eq!(p.new_log.len(), 1);
        assert_eq!(p.new_log[0].boots, 1);
    }

    #[test]
    fn a_finding_the_baseline_has_too_is_shared_not_new() {
        let mut v = vec![
            run("base", None, &[]),
            run("k", None, &[]),
            run("k", None, &[]),
        ];
        let w = finding(LogClass::Warning, "WARNING: a.c:N f");
        v[0].kernel_log = vec![w.clone()];
        v[1].kernel_log = vec![w.clone(), finding(LogClass::Warning, "WARNING: b.c:N g")];
        v[2].kernel_log = vec![w.clone(), w];
        let p = boots_part(&v, "k", "base");
        assert_eq!(p.shared_log.len(), 1);
        assert_eq!(p.shared_log[0].boots, 2, "counted once per boot");
        assert_eq!(p.new_log.len(), 1);
        assert_eq!(p.new_log[0].signature, "WARNING: b.c:N g");
        // The baseline judged against itself: nothing is new.
        assert!(boots_part(&v, "base", "base").new_log.is_empty());
    }
}
