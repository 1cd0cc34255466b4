//! Booted-guest checks of backend restarts (vhost-user inflight tracking; the drill is
//! `guest_tests::drill::restart`, which experiments/restart-experiment.sh runs through
//! `lab drill restart`): Debian's PREEMPT_RT kernel under QEMU (TCG unless `VB_ACCEL=kvm`), our
//! backend on a file with 8 request queues, fio randwrite + crc32c verify on all 8 queues while
//! the harness SIGKILLs the backend 3 times mid-fio and starts it again on the same socket:
//! - `blk_restarts`: vhost-user-blk on the system's QEMU (7.2), suite `restart-verify`;
//! - `scsi_restarts`: vhost-user-scsi, suite `restart-verify-scsi`, on a QEMU >= 8.2 (the
//!   pinned QEMU 10, ci/fetch-qemu10.sh; QEMU 7.2's vhost-user-scsi does not reconnect).
//!
//! Each passes when the drill's checks all held (fio clean, dmesg clean, every kill followed by
//! a backend that installed the inflight area, at least one chain resubmitted, fds and private
//! memory flat across instances).

use crate::common;

use guest_tests::drill::restart::{self, RestartDrill};

fn restarts(suite: &str) {
    let _g = common::one_guest_at_a_time();
    let d = RestartDrill {
        suite: suite.into(),
        dir: common::run_dir(&format!("restart-{suite}")),
        min_resubmitted: 1,
    };
    let out = restart::run(&common::rig(), &d).unwrap_or_else(|e| panic!("{e}"));
    eprintln!("{suite}: {:?}", out.result);
    assert!(out.failures.is_empty(), "{}", out.failures.join("\n"));
}

#[test]
#[ignore = "boots a guest: ci/test.sh runs these (--ignored)"]
fn blk_restarts() {
    restarts("restart-verify");
}

#[test]
#[ignore = "boots a guest: ci/test.sh runs these (--ignored)"]
fn scsi_restarts() {
    restarts("restart-verify-scsi");
}
