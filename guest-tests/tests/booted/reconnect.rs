//! A long-running backend leaks nothing when QEMU is killed and started again against it (the
//! drill is `guest_tests::drill::reconnect`, which experiments/reconnect-experiment.sh runs 20
//! times per personality through `lab drill reconnect`): our backend on a file with 8 request
//! queues, then 3 boots of Debian's RT kernel under real QEMU, each SIGKILLed once the guest's
//! agent has reported its disk. The backend's open fds and threads after each disconnect must
//! equal those after the first. Both personalities (suites `reconnect-idle`,
//! `reconnect-idle-scsi`).

use crate::common;

use guest_tests::drill::reconnect::{self, ReconnectDrill};

fn reconnects(suite: &str) {
    let _g = common::one_guest_at_a_time();
    let d = ReconnectDrill {
        suite: suite.into(),
        connections: 3,
        dir: common::run_dir(&format!("reconnect-{suite}")),
    };
    let out = reconnect::run(&common::rig(), &d).unwrap_or_else(|e| panic!("{e}"));
    eprintln!("{suite}: {:?}", out.result);
    assert!(out.failures.is_empty(), "{}", out.failures.join("\n"));
    assert_eq!(out.result.map(|r| r.after.len()), Some(3));
}

#[test]
#[ignore = "boots a guest: ci/test.sh runs these (--ignored)"]
fn blk_backend_leaks_nothing_per_qemu_connection() {
    reconnects("reconnect-idle");
}

#[test]
#[ignore = "boots a guest: ci/test.sh runs these (--ignored)"]
fn scsi_backend_leaks_nothing_per_qemu_connection() {
    reconnects("reconnect-idle-scsi");
}
