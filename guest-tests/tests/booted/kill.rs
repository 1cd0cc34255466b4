//! Booted kill tests (docs/data-guarantees.md), one per personality, on Debian's PREEMPT_RT
//! kernel under TCG: the guest's `killwrite` step writes 4 KiB blocks with O_DIRECT from 4
//! writers and flushes every 0.2 s, sending each acknowledgement the moment it returns, while
//! the harness kills at a random point (`[restarts]`):
//! - `blk_kill_both`: suite `kill-ci-blk`, the backend and QEMU SIGKILLed together once (page
//!   cache, write cache on; QEMU 7.2);
//! - `scsi_kill_backend`: suite `kill-ci-scsi`, the backend SIGKILLed and restarted 3 times
//!   (O_DIRECT, write cache off; QEMU >= 8.2, the pinned QEMU 10).
//!
//! Then `results::kills` reads the image: every write acknowledged before a completed flush
//! (write cache off: every acknowledged write) must be there byte for byte (or a later write of
//! the same block); at least one such write must have been checked, and the kill must have
//! happened while the writer ran. `VB_KILL_SUITE` / `VB_KILL_VARIANT` run another suite and
//! variant, `VB_KILL_SEED` another seed (1), `VB_KILL_DIR` keeps the run directory there. The
//! last line printed is `KILL-RESULT {json}` (experiments/kill-experiment.sh collects them).

use crate::common;

use std::path::{Path, PathBuf};

use common::one_boot;
use guest_tests::matrix;
use guest_tests::results::kills;
use guest_tests::suite::{self, KillTarget, Suite};

fn kill_test(default_suite: &str) {
    let _g = common::one_guest_at_a_time();
    let name = std::env::var("VB_KILL_SUITE").unwrap_or_else(|_| default_suite.into());
    let variant = std::env::var("VB_KILL_VARIANT").ok();
    let dir = match std::env::var_os("VB_KILL_DIR") {
        Some(d) => PathBuf::from(d),
        None => Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("kill-{name}-{}", std::process::id())),
    };
    let _ = std::fs::remove_dir_all(&dir);
    let s: Suite = Suite::load(&suite::default_dir(), &name).unwrap();
    let plan = s.spec.restarts.clone().expect("[restarts]");
    let (mut spec, mut rerun) = one_boot(
        &s,
        variant.as_deref(),
        &dir,
        format!("dev-{name}"),
        None,
        Some(common::backend_bin()),
    );
    // The kill's random point comes from the seed (restart rule 8).
    if let Some(seed) = std::env::var("VB_KILL_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        (spec.seed, rerun.seed) = (seed, seed);
    }
    let (r, _) = matrix::execute_retrying(&spec, rerun, common::EARLY_CRASH_RETRIES);
    let console = std::fs::read_to_string(dir.join("console.log")).unwrap_or_default();
    let tail: Vec<&str> = console.lines().rev().take(15).collect();
    let tail = tail.into_iter().rev().collect::<Vec<_>>().join("\n");
    // A kill of QEMU ends the run without the guest's status; a backend kill run must end ok.
    if plan.target == KillTarget::Backend {
        assert!(
            r.status.is_ok(),
            "{:?}\nrun dir {}\n{tail}",
            r.status,
            dir.display()
        );
    }
    let recs: Vec<serde_json::Value> =
        serde_json::from_str(&std::fs::read_to_string(dir.join("restarts.json")).unwrap()).unwrap();
    // A backend kill (and `both`) marks the backend's record killed; a QEMU kill leaves the
    // backend alive: it happened when the run ended before the writer finished.
    let stream = std::fs::read(dir.join("results.bin")).unwrap();
    let rep = kills::judge(&stream, &dir.join("disk.img")).unwrap();
    let kills_done = match plan.target {
        KillTarget::Qemu => usize::from(!recs.is_empty() && !rep.finished),
        _ => recs.iter().filter(|r| r["killed"] == true).count(),
    };
    assert!(
        kills_done >= plan.kills as usize,
        "{kills_done} kills of {} planned: {recs:#?}\nrun dir {}\n{tail}",
        plan.kills,
        dir.display()
    );
    eprintln!("{name}: {rep:?}");
    assert!(
        rep.ok(),
        "lost or corrupt writes: {rep:#?}\nrun dir {}",
        dir.display()
    );
    if plan.target != KillTarget::Backend {
        assert!(
            !rep.finished,
            "the kill came after the writer finished: {rep:?}"
        );
    }
    let mut v = serde_json::to_value(&rep).unwrap();
    v["suite"] = name.into();
    v["variant"] = variant.unwrap_or_default().into();
    v["kills"] = kills_done.into();
    eprintln!("KILL-RESULT {v}");
}

#[test]
#[ignore = "boots a guest: ci/test.sh runs these (--ignored)"]
fn blk_kill_both() {
    kill_test("kill-ci-blk");
}

#[test]
#[ignore = "boots a guest: ci/test.sh runs these (--ignored)"]
fn scsi_kill_backend() {
    kill_test("kill-ci-scsi");
}
