//! Booted kill tests (docs/data-guarantees.md; the drill is `guest_tests::drill::kill`, which
//! experiments/kill-experiment.sh runs through `lab drill kill`), one per personality, on
//! Debian's PREEMPT_RT kernel under TCG:
//! - `blk_kill_both`: suite `kill-ci-blk`, the backend and QEMU SIGKILLed together once (page
//!   cache, write cache on; QEMU 7.2);
//! - `scsi_kill_backend`: suite `kill-ci-scsi`, the backend SIGKILLed and restarted 3 times
//!   (O_DIRECT, write cache off; QEMU >= 8.2, the pinned QEMU 10).
//!
//! Each passes when the drill's checks all held: every write acknowledged before a completed
//! flush (write cache off: every acknowledged write) is in the image, at least one was checked,
//! and the kills planned happened while the writer ran.

use crate::common;

use guest_tests::drill::kill::{self, KillDrill};

fn kill_test(suite: &str) {
    let _g = common::one_guest_at_a_time();
    let d = KillDrill {
        suite: suite.into(),
        variant: None,
        seed: 1,
        dir: common::run_dir(&format!("kill-{suite}")),
    };
    let out = kill::run(&common::rig(), &d).unwrap_or_else(|e| panic!("{e}"));
    eprintln!("{suite}: {:?}, {} kills", out.report, out.kills);
    assert!(out.failures.is_empty(), "{}", out.failures.join("\n"));
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
