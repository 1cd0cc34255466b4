//! Booted-guest checks of backend restarts (vhost-user inflight tracking): Debian's PREEMPT_RT
//! kernel under QEMU (TCG unless `VB_ACCEL=kvm`), our backend on a file with 8 request queues,
//! fio randwrite + crc32c verify on all 8 queues while the harness SIGKILLs the backend 3 times
//! mid-fio, each time once its statistics show requests taken and not completed, and starts it
//! again on the same socket (QEMU `reconnect=1`):
//! - `blk_restarts`: vhost-user-blk on the system's QEMU (7.2), suite `restart-verify`;
//! - `scsi_restarts`: vhost-user-scsi, suite `restart-verify-scsi`, on a QEMU >= 8.2 (the
//!   pinned QEMU 10, ci/fetch-qemu10.sh; QEMU 7.2's vhost-user-scsi does not reconnect).
//!
//! Each must end with fio's exit status 0, no fio job error (a verify failure is one), no I/O
//! error, SCSI error handling or hung task in the guest's dmesg, every kill followed by a
//! restarted backend that installed the inflight area, at least `VB_RESTART_MIN_RESUBMITTED`
//! (default 1) chains resubmitted on the request queues over all kills (counted from the new
//! backends' logs, launch::restart rule 6), for SCSI the event queue's buffers taken over at
//! every kill, and the backend's fd count and RSS, and QEMU's fd count, flat across instances.
//!
//! `VB_RESTART_SUITE` runs another suite (the 10-kill experiment,
//! `experiments/restart-experiment.sh`), `VB_RESTART_DIR` keeps the run directory there, `VB_QEMU` picks the QEMU (7.2, 10). The last
//! line printed, `RESTART-RESULT {json}`, is what the experiment script tabulates.

// A test reads as one scenario: exempt from clippy::too_many_lines (non-test code is not).
#![allow(clippy::too_many_lines)]

use crate::common;

use std::path::{Path, PathBuf};

use common::one_boot;
use guest_tests::launch::restart::{memory_flat, RestartResult, FDS_SPREAD, RESULT_PREFIX};
use guest_tests::matrix;
use guest_tests::suite::{self, Suite};

/// Lines of the guest's dmesg that mean lost, failed or stuck I/O.
fn bad_dmesg_lines(dmesg: &str) -> Vec<&str> {
    const BAD: &[&str] = &[
        "i/o error",
        "failed result",
        "abort",
        "device offlined",
        "timing out command",
        "scsi_eh",
        "blk_update_request",
        "buffer i/o",
        "blocked for more than",
        "is not a head",
        "bad_ring",
        "virtio_blk",
        "call trace",
        "oops:",
    ];
    dmesg
        .lines()
        .filter(|l| {
            let l = l.to_lowercase();
            BAD.iter().any(|b| l.contains(b)) && !l.contains("virtio_blk virtio")
            // probe lines
        })
        .collect()
}

fn spread(v: &[u64]) -> (u64, u64) {
    (
        v.iter().copied().min().unwrap_or(0),
        v.iter().copied().max().unwrap_or(0),
    )
}

/// Per kill: requests in flight before it, chains resubmitted after it (request queues, other).
fn per_kill(recs: &[serde_json::Value]) -> Vec<(Option<u64>, u64, u64)> {
    recs.iter()
        .filter(|r| r["killed"] == true)
        .map(|r| {
            let n = |k: &str| r[k].as_u64();
            (
                n("in_flight"),
                n("resubmitted").unwrap_or(0),
                n("resubmitted_other").unwrap_or(0),
            )
        })
        .collect()
}

/// Boots suite `VB_RESTART_SUITE` (else `default_suite`) once and checks it (module docs).
fn restarts(default_suite: &str) {
    let _g = common::one_guest_at_a_time();
    let suite_name = std::env::var("VB_RESTART_SUITE").unwrap_or_else(|_| default_suite.into());
    let min_resubmitted: u64 = std::env::var("VB_RESTART_MIN_RESUBMITTED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1);
    let dir = match std::env::var_os("VB_RESTART_DIR") {
        Some(d) => PathBuf::from(d),
        None => Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("restart-{suite_name}-{}", std::process::id())),
    };
    let _ = std::fs::remove_dir_all(&dir);
    let s: Suite = Suite::load(&suite::default_dir(), &suite_name).unwrap();
    let kills = s.spec.restarts.as_ref().expect("[restarts]").kills as usize;
    let (spec, rerun) = one_boot(
        &s,
        None,
        &dir,
        format!("dev-{suite_name}"),
        None,
        Some(common::backend_bin()),
    );
    // Retries a guest that never reached the agent (the MTTCG early-boot Oops seen here).
    let (r, _) = matrix::execute_retrying(&spec, rerun, common::EARLY_CRASH_RETRIES);
    let qemu = std::fs::read_to_string(dir.join("qemu.version")).unwrap_or_default();
    let console = std::fs::read_to_string(dir.join("console.log")).unwrap_or_default();
    let tail: Vec<&str> = console.lines().rev().take(15).collect();
    let tail = tail.into_iter().rev().collect::<Vec<_>>().join("\n");
    assert!(
        r.status.is_ok(),
        "{:?}\nrun dir {}\n{tail}",
        r.status,
        dir.display()
    );

    // fio: exit status 0 (verify_fatal: a verify failure fails it), no job error, I/O done.
    let fio: Vec<_> = r.steps.iter().filter(|s| s.fio.is_some()).collect();
    assert_eq!(fio.len(), 1, "{:?}", r.steps);
    let f = fio[0].fio.as_ref().unwrap();
    assert_eq!(
        fio[0].rc,
        Some(0),
        "fio exit status; run dir {}",
        dir.display()
    );
    assert!(
        f.job_errors.is_empty(),
        "fio job errors: {:?}",
        f.job_errors
    );
    assert!(f.total_ios() > 0);

    // The guest saw no I/O error, SCSI error handling, hung task or ring error.
    let dmesg = std::fs::read_to_string(dir.join("artifacts/dmesg")).expect("dmesg artefact");
    let bad = bad_dmesg_lines(&dmesg);
    assert!(bad.is_empty(), "guest dmesg: {bad:#?}");

    // Every kill happened, mid-fio, and each new backend took over the inflight area.
    let recs: Vec<serde_json::Value> =
        serde_json::from_str(&std::fs::read_to_string(dir.join("restarts.json")).unwrap()).unwrap();
    let killed = recs.iter().filter(|r| r["killed"] == true).count();
    assert_eq!(killed, kills, "{recs:#?}");
    assert_eq!(recs.len(), kills + 1);
    for k in 1..=kills {
        let log = std::fs::read_to_string(dir.join(format!("backend.{k}.log"))).unwrap();
        assert!(
            log.contains("inflight area installed"),
            "backend.{k}.log:\n{log}"
        );
    }
    // Requests were taken and not completed at the kills, and the next backends resubmitted
    // them (the recovery path carried traffic).
    let kills_seen = per_kill(&recs);
    let resubmitted: u64 = kills_seen.iter().map(|k| k.1).sum();
    eprintln!("kill: in flight before, chains resubmitted on request queues / other queues");
    for (k, (inf, req, other)) in kills_seen.iter().enumerate() {
        eprintln!("  {}: {inf:?}, {req} / {other}", k + 1);
    }
    assert!(
        resubmitted >= min_resubmitted,
        "{resubmitted} chains resubmitted over {kills} kills, want >= {min_resubmitted}: {kills_seen:?}"
    );
    if s.spec.device == suite::Device::Scsi {
        // The event queue's buffers are held by the device (no event is ever reported): each
        // new backend must take them over, or the guest loses its event queue.
        assert!(
            kills_seen.iter().all(|k| k.2 > 0),
            "event-queue buffers not taken over at every kill: {kills_seen:?}"
        );
    }

    // Flat across instances: backend fds and private memory, QEMU fds. The whole resident set
    // is printed but not held flat: it counts the pages of the guest's shared memory each
    // instance happened to touch (at 128 queues 115-185 MB across the instances of one run,
    // docs/results/scale128), which says nothing of a leak; the private part does.
    let col = |key: &str| -> Vec<u64> { recs.iter().filter_map(|r| r[key].as_u64()).collect() };
    let (bfds, rss, qfds) = (col("backend_fds"), col("backend_rss_kib"), col("qemu_fds"));
    let anon = col("backend_anon_kib");
    assert_eq!(anon.len(), kills + 1, "{recs:#?}");
    assert_eq!(bfds.len(), kills + 1, "{recs:#?}");
    // The killed instances were read mid-fio and must match. So must the last one when it was
    // read mid-fio too (restart.rs rule 2: when a further kill would have been due). Read only
    // after the agent finished, by a guest that may have reset the device and closed its
    // queues' kick and call eventfds, it may only not grow.
    let last_in_step = recs[kills]["in_step"] == true;
    let (lo, hi) = spread(&bfds[..kills]);
    assert!(hi - lo <= FDS_SPREAD, "backend fds {bfds:?}");
    if last_in_step {
        let (lo, hi) = spread(&bfds);
        assert!(
            hi - lo <= FDS_SPREAD,
            "backend fds {bfds:?} (all read mid-fio)"
        );
    } else {
        assert!(bfds[kills] <= hi + FDS_SPREAD, "backend fds {bfds:?}");
    }
    assert!(memory_flat(&anon), "backend private KiB {anon:?}");
    let (lo, hi) = spread(&qfds);
    assert!(hi - lo <= FDS_SPREAD, "QEMU fds {qfds:?}");
    let restart_ms: Vec<f64> = recs
        .iter()
        .filter_map(|r| r["restart_ms"].as_f64())
        .collect();
    eprintln!(
        "{suite_name}: {kills} kills, {resubmitted} chains resubmitted, fio {} I/Os, \
         restart ms {restart_ms:.0?}, backend fds {bfds:?} (last read mid-fio: {last_in_step}), \
         RSS KiB {rss:?}, private KiB {anon:?}, QEMU fds {qfds:?}, total {:?} s",
        f.total_ios(),
        r.timings.total_wall_s
    );
    let result = RestartResult {
        suite: suite_name.clone(),
        device: s.spec.device.as_str().into(),
        qemu: qemu.trim().into(),
        kills,
        in_flight: kills_seen.iter().map(|k| k.0).collect(),
        resubmitted: kills_seen.iter().map(|k| k.1).collect(),
        resubmitted_other: kills_seen.iter().map(|k| k.2).collect(),
        fio_rc: fio[0].rc,
        fio_job_errors: f.job_errors.len(),
        fio_ios: f.total_ios(),
        dmesg_bad: bad.len(),
        backend_fds: bfds,
        backend_rss_kib: rss,
        backend_anon_kib: anon,
        qemu_fds: qfds,
        wall_s: r.timings.total_wall_s,
    };
    eprintln!(
        "{RESULT_PREFIX}{}",
        serde_json::to_string(&result).expect("a RestartResult serializes")
    );
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

#[test]
#[ignore = "boots a guest: ci/test.sh runs these (--ignored)"]
fn dmesg_filter_flags_io_errors_not_probe_lines() {
    let d = "[ 0.0] calibrate_delay_direct() failed to get a good estimate for loops_per_jiffy.\n\
             [ 1.0] virtio_blk virtio1: 8/0/0 default/read/poll queues\n\
             [ 2.0] I/O error, dev vda, sector 8 op 0x1:(WRITE)\n\
             [ 3.0] INFO: task fio:99 blocked for more than 120 seconds.\n\
             [ 4.0] sd 0:0:0:0: [sda] tag#3 abort\n\
             [ 5.0] sd 0:0:0:0: [sda] Attached SCSI disk\n";
    let bad = bad_dmesg_lines(d);
    assert_eq!(bad.len(), 3, "{bad:?}");
}
