//! The kill drill (docs/data-guarantees.md): one boot of a `[restarts]` suite whose guest step
//! `killwrite` writes 4 KiB blocks with O_DIRECT from 4 writers and flushes every 0.2 s,
//! sending each acknowledgement the moment it returns, while the harness kills the backend,
//! QEMU or both at a random point drawn from the seed (restart rule 8).
//!
//! 1. `results::kills` then reads the image: every write acknowledged before a completed flush
//!    (write cache off: every acknowledged write) must be there byte for byte, or a later write
//!    of the same block; at least one such write must have been checked.
//! 2. The kills planned must have happened: a backend kill (and `both`) marks the backend's
//!    record killed; a QEMU kill leaves the backend alive and counts when the run ended before
//!    the writer finished.
//! 3. A backend-kill run must end ok (the guest finished with its backend restarted); a kill of
//!    QEMU or of both must have come while the writer ran.

use std::path::PathBuf;

use serde::Serialize;

use super::{
    check, console_tail, load_suite, restarts_of, Boot, DrillError, Rig, EARLY_CRASH_RETRIES,
};
use crate::matrix;
use gt_results::results::kills::{self, KillReport};
use gt_suite::KillTarget;

/// One kill drill: which suite, variant and seed, into which directory.
#[derive(Debug, Clone)]
pub struct KillDrill {
    pub suite: String,
    pub variant: Option<String>,
    /// The kill's random point.
    pub seed: u64,
    pub dir: PathBuf,
}

/// What a kill drill found: the image's judgement and the kills done. Its JSON is the
/// `KILL-RESULT` line experiments/kill-experiment.sh collects.
#[derive(Debug, Clone, Serialize)]
pub struct KillOutcome {
    #[serde(flatten)]
    pub report: Option<KillReport>,
    pub suite: String,
    pub variant: String,
    pub kills: usize,
    /// Checks that failed (module rules 1-3), empty when all held.
    #[serde(skip)]
    pub failures: Vec<String>,
}

/// The prefix of [`KillOutcome`]'s line.
pub const KILL_PREFIX: &str = "KILL-RESULT ";

/// Runs `d` on `rig` (module docs).
pub fn run(rig: &Rig, d: &KillDrill) -> Result<KillOutcome, DrillError> {
    let s = load_suite(&d.suite)?;
    let plan = restarts_of(&s)?;
    let _ = std::fs::remove_dir_all(&d.dir);
    let boot = Boot {
        dir: &d.dir,
        run_id: format!("dev-{}", d.suite),
        variant: d.variant.as_deref(),
        seed: d.seed,
        timeout: None,
    };
    let (spec, rerun) = rig.one_boot(&s, boot, Some(rig.backend()?))?;
    let (r, _) = matrix::execute_retrying(&spec, rerun, None, EARLY_CRASH_RETRIES);
    let dir = &d.dir;
    let mut failures = Vec::new();
    if plan.target == KillTarget::Backend {
        check(&mut failures, r.status.is_ok(), || {
            format!(
                "{:?}\nrun dir {}\n{}",
                r.status,
                dir.display(),
                console_tail(dir, 15)
            )
        });
    }
    let recs = gt_launch::restart::read_records(dir);
    let report = std::fs::read(dir.join("results.bin"))
        .map_err(|e| e.to_string())
        .and_then(|stream| kills::judge(&stream, &dir.join("disk.img")));
    let report = match report {
        Ok(rep) => Some(rep),
        Err(e) => {
            failures.push(format!(
                "the image could not be judged: {e}; run dir {}",
                dir.display()
            ));
            None
        }
    };
    let finished = report.as_ref().is_some_and(|rep| rep.finished);
    let kills_done = match plan.target {
        KillTarget::Qemu => usize::from(!recs.is_empty() && !finished),
        _ => recs.iter().filter(|r| r.killed).count(),
    };
    check(&mut failures, kills_done >= plan.kills as usize, || {
        format!(
            "{kills_done} kills of {} planned: {recs:#?}\nrun dir {}\n{}",
            plan.kills,
            dir.display(),
            console_tail(dir, 15)
        )
    });
    if let Some(rep) = &report {
        check(&mut failures, rep.ok(), || {
            format!(
                "lost or corrupt writes: {rep:#?}\nrun dir {}",
                dir.display()
            )
        });
        if plan.target != KillTarget::Backend {
            check(&mut failures, !rep.finished, || {
                format!("the kill came after the writer finished: {rep:?}")
            });
        }
    }
    Ok(KillOutcome {
        report,
        suite: d.suite.clone(),
        variant: d.variant.clone().unwrap_or_default(),
        kills: kills_done,
        failures,
    })
}
