//! Our backend confines itself by default (vhost-blk issue 57, docs/sandbox.md): under a
//! booted guest (Debian's RT kernel, real QEMU), every thread of the backend shows
//! `Seccomp: 2` and `NoNewPrivs: 1`, at 8 and 128 queues, both personalities (the drill is
//! `guest_tests::drill::sandbox`; experiments/sandbox-status.sh prints its table through
//! `lab drill sandbox`).

use crate::common;

use guest_tests::drill::sandbox::{self, SandboxDrill};

fn confined(suite: &str) {
    let _g = common::one_guest_at_a_time();
    let d = SandboxDrill {
        suite: suite.into(),
        dir: common::run_dir(&format!("sandbox-{suite}")),
    };
    let out = sandbox::run(&common::rig(), &d).unwrap_or_else(|e| panic!("{e}"));
    for t in &out.threads {
        eprintln!("{suite}: {t:?}");
    }
    assert!(out.failures.is_empty(), "{}", out.failures.join("\n"));
    // main, signals, the handler, the relay's two threads and the queue workers.
    assert!(out.threads.len() >= 6, "{:?}", out.threads);
}

#[test]
#[ignore = "boots a guest: ci/test.sh runs these (--ignored)"]
fn blk_8_and_128_queues_every_thread_confined() {
    confined("reconnect-idle");
    confined("reconnect-idle-128");
}

#[test]
#[ignore = "boots a guest: ci/test.sh runs these (--ignored)"]
fn scsi_8_and_128_queues_every_thread_confined() {
    confined("reconnect-idle-scsi");
    confined("reconnect-idle-scsi-128");
}
