//! The restart drill (vhost-user inflight tracking): one boot of a `[restarts]` suite of
//! backend kills (`restart-verify*`), fio randwrite + crc32c verify on every driven queue while
//! the harness SIGKILLs the backend mid-fio, each time once its statistics show requests taken
//! and not completed, and starts it again on the same socket (QEMU `reconnect=1`).
//!
//! 1. fio's exit status 0, no fio job error (a verify failure is one), I/O done.
//! 2. No I/O error, SCSI error handling, hung task or ring error in the guest's dmesg
//!    ([`bad_dmesg_lines`]).
//! 3. Every planned kill happened, and each new backend installed the inflight area.
//! 4. At least `min_resubmitted` chains resubmitted on the request queues over all kills
//!    (counted from the new backends' logs, launch::restart rule 6); for SCSI, the event
//!    queue's buffers taken over at every kill.
//! 5. Flat across instances: the backend's fds (the killed instances, read mid-fio; the last
//!    too when read mid-fio, else it may only not grow), its private memory
//!    (`launch::restart::memory_flat`), QEMU's fds. The whole resident set is recorded, not
//!    judged: it counts the pages of the guest's shared memory each instance touched.

use std::path::{Path, PathBuf};

use super::{
    check, console_tail, load_suite, restarts_of, Boot, DrillError, Rig, EARLY_CRASH_RETRIES,
};
use crate::matrix;
use gt_launch::restart::{memory_flat, RestartRecord, RestartResult, FDS_SPREAD};
use gt_results::results::RunResult;
use gt_suite::Device;

/// One restart drill.
#[derive(Debug, Clone)]
pub struct RestartDrill {
    pub suite: String,
    pub dir: PathBuf,
    /// Rule 4's floor.
    pub min_resubmitted: u64,
}

/// What a restart drill found: the record (`RESTART-RESULT` line) and the checks that failed.
#[derive(Debug, Clone)]
pub struct RestartOutcome {
    pub result: Option<RestartResult>,
    pub failures: Vec<String>,
}

/// Lines of the guest's dmesg that mean lost, failed or stuck I/O (the driver's probe lines
/// are not).
pub fn bad_dmesg_lines(dmesg: &str) -> Vec<&str> {
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
        })
        .collect()
}

fn spread(v: &[u64]) -> (u64, u64) {
    (
        v.iter().copied().min().unwrap_or(0),
        v.iter().copied().max().unwrap_or(0),
    )
}

/// Runs `d` on `rig` (module docs).
pub fn run(rig: &Rig, d: &RestartDrill) -> Result<RestartOutcome, DrillError> {
    let s = load_suite(&d.suite)?;
    let kills = restarts_of(&s)?.kills as usize;
    let _ = std::fs::remove_dir_all(&d.dir);
    let boot = Boot {
        dir: &d.dir,
        run_id: format!("dev-{}", d.suite),
        variant: None,
        seed: 1,
        timeout: None,
    };
    let (spec, rerun) = rig.one_boot(&s, boot, Some(rig.backend()?))?;
    let (r, _) = matrix::execute_retrying(&spec, rerun, None, EARLY_CRASH_RETRIES);
    let dir = &d.dir;
    if !r.status.is_ok() {
        let why = format!(
            "{:?}\nrun dir {}\n{}",
            r.status,
            dir.display(),
            console_tail(dir, 15)
        );
        return Ok(RestartOutcome {
            result: None,
            failures: vec![why],
        });
    }
    let mut failures = Vec::new();
    let Some(guest) = check_guest(&r, dir, &mut failures) else {
        return Ok(RestartOutcome {
            result: None,
            failures,
        });
    };
    let recs = gt_launch::restart::read_records(dir);
    let killed: Vec<&RestartRecord> = recs.iter().filter(|r| r.killed).collect();
    check_kills(&recs, kills, dir, &mut failures);
    let resubmitted: Vec<u64> = killed.iter().map(|r| r.resubmitted.unwrap_or(0)).collect();
    let other: Vec<u64> = killed
        .iter()
        .map(|r| r.resubmitted_other.unwrap_or(0))
        .collect();
    check_resubmissions(
        &resubmitted,
        &other,
        d.min_resubmitted,
        s.spec.device,
        &mut failures,
    );
    let (bfds, qfds, rss, anon) = instance_columns(&recs);
    check_flat(&recs, &bfds, &qfds, &anon, &mut failures);

    let result = RestartResult {
        suite: d.suite.clone(),
        device: s.spec.device.as_str().into(),
        qemu: std::fs::read_to_string(dir.join("qemu.version"))
            .unwrap_or_default()
            .trim()
            .into(),
        kills,
        in_flight: killed.iter().map(|r| r.in_flight).collect(),
        resubmitted,
        resubmitted_other: other,
        fio_rc: guest.fio_rc,
        fio_job_errors: guest.fio_job_errors,
        fio_ios: guest.fio_ios,
        dmesg_bad: guest.dmesg_bad,
        backend_fds: bfds,
        backend_rss_kib: rss,
        backend_anon_kib: anon,
        qemu_fds: qfds,
        wall_s: r.timings.total_wall_s,
    };
    Ok(RestartOutcome {
        result: Some(result),
        failures,
    })
}

/// What the guest reported of its fio step and its dmesg.
struct GuestFigures {
    fio_rc: Option<i64>,
    fio_job_errors: usize,
    fio_ios: u64,
    dmesg_bad: usize,
}

/// Rules 1 and 2; None when the run has no fio step at all.
fn check_guest(r: &RunResult, dir: &Path, failures: &mut Vec<String>) -> Option<GuestFigures> {
    let where_ = || format!("run dir {}", dir.display());
    let fio: Vec<_> = r.steps.iter().filter(|s| s.fio.is_some()).collect();
    let Some((step, f)) = fio.first().and_then(|st| Some((*st, st.fio.as_ref()?))) else {
        failures.push(format!("no fio step: {:?}; {}", r.steps, where_()));
        return None;
    };
    check(failures, fio.len() == 1, || {
        format!("{} fio steps, want 1", fio.len())
    });
    check(failures, step.rc == Some(0), || {
        format!("fio exit status {:?}; {}", step.rc, where_())
    });
    check(failures, f.job_errors.is_empty(), || {
        format!("fio job errors: {:?}", f.job_errors)
    });
    check(failures, f.total_ios() > 0, || "fio did no I/O".into());
    let dmesg = std::fs::read_to_string(dir.join("artifacts/dmesg")).unwrap_or_default();
    let bad = bad_dmesg_lines(&dmesg);
    check(failures, !dmesg.is_empty(), || {
        format!("no dmesg artefact; {}", where_())
    });
    check(failures, bad.is_empty(), || {
        format!("guest dmesg: {bad:#?}")
    });
    Some(GuestFigures {
        fio_rc: step.rc,
        fio_job_errors: f.job_errors.len(),
        fio_ios: f.total_ios(),
        dmesg_bad: bad.len(),
    })
}

/// Rule 3: every planned kill happened and each new backend installed the inflight area.
fn check_kills(recs: &[RestartRecord], kills: usize, dir: &Path, failures: &mut Vec<String>) {
    let killed = recs.iter().filter(|r| r.killed).count();
    check(failures, killed == kills && recs.len() == kills + 1, || {
        format!(
            "{killed} kills of {kills}, {} instances: {recs:#?}",
            recs.len()
        )
    });
    for k in 1..=killed {
        let log = std::fs::read_to_string(dir.join(format!("backend.{k}.log"))).unwrap_or_default();
        check(failures, log.contains("inflight area installed"), || {
            format!("backend.{k}.log has no inflight area installed:\n{log}")
        });
    }
}

/// Rule 4, over the chains resubmitted after each kill on request and other queues.
fn check_resubmissions(
    resubmitted: &[u64],
    other: &[u64],
    min: u64,
    device: Device,
    failures: &mut Vec<String>,
) {
    let total: u64 = resubmitted.iter().sum();
    check(failures, total >= min, || {
        format!(
            "{total} chains resubmitted over {} kills, want >= {min}: {resubmitted:?}",
            resubmitted.len()
        )
    });
    if device == Device::Scsi {
        check(failures, other.iter().all(|&n| n > 0), || {
            format!("event-queue buffers not taken over at every kill: {other:?}")
        });
    }
}

/// Per instance: backend fds, QEMU fds, backend resident and private KiB.
fn instance_columns(recs: &[RestartRecord]) -> (Vec<u64>, Vec<u64>, Vec<u64>, Vec<u64>) {
    (
        recs.iter()
            .filter_map(|r| r.backend_fds.map(u64::from))
            .collect(),
        recs.iter()
            .filter_map(|r| r.qemu_fds.map(u64::from))
            .collect(),
        recs.iter().filter_map(|r| r.backend_rss_kib).collect(),
        recs.iter().filter_map(|r| r.backend_anon_kib).collect(),
    )
}

/// Rule 5.
fn check_flat(
    recs: &[RestartRecord],
    bfds: &[u64],
    qfds: &[u64],
    anon: &[u64],
    failures: &mut Vec<String>,
) {
    let last_in_step = recs.last().is_some_and(|r| r.in_step);
    check(
        failures,
        fds_flat_over_instances(bfds, recs.len(), last_in_step),
        || format!("backend fds {bfds:?} (last read mid-fio: {last_in_step})"),
    );
    check(
        failures,
        anon.len() == recs.len() && memory_flat(anon),
        || format!("backend private KiB {anon:?}"),
    );
    let (lo, hi) = spread(qfds);
    check(
        failures,
        qfds.len() == recs.len() && hi - lo <= FDS_SPREAD,
        || format!("QEMU fds {qfds:?}"),
    );
}

/// Rule 5 for the backend's descriptors over `instances` instances, killed ones first: the
/// killed ones match within [`FDS_SPREAD`]; the last matches them too when it was read mid-fio,
/// else it may only not grow (read after the agent finished, by a guest that may have reset
/// the device and closed its queues' eventfds).
fn fds_flat_over_instances(fds: &[u64], instances: usize, last_in_step: bool) -> bool {
    if instances == 0 || fds.len() != instances {
        return false;
    }
    let killed = &fds[..instances - 1];
    let (lo, hi) = spread(killed);
    if hi - lo > FDS_SPREAD {
        return false;
    }
    let last = fds[instances - 1];
    if last_in_step {
        let (lo, hi) = spread(fds);
        hi - lo <= FDS_SPREAD
    } else {
        killed.is_empty() || last <= hi + FDS_SPREAD
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dmesg_filter_flags_io_errors_not_probe_lines() {
        let d =
            "[ 0.0] calibrate_delay_direct() failed to get a good estimate for loops_per_jiffy.\n\
                 [ 1.0] virtio_blk virtio1: 8/0/0 default/read/poll queues\n\
                 [ 2.0] I/O error, dev vda, sector 8 op 0x1:(WRITE)\n\
                 [ 3.0] INFO: task fio:99 blocked for more than 120 seconds.\n\
                 [ 4.0] sd 0:0:0:0: [sda] tag#3 abort\n\
                 [ 5.0] sd 0:0:0:0: [sda] Attached SCSI disk\n";
        let bad = bad_dmesg_lines(d);
        assert_eq!(bad.len(), 3, "{bad:?}");
    }

    #[test]
    fn descriptors_of_the_last_instance_may_only_not_grow_when_read_after_the_step() {
        assert!(fds_flat_over_instances(&[40, 41, 40, 30], 4, false));
        assert!(!fds_flat_over_instances(&[40, 41, 40, 30], 4, true));
        assert!(!fds_flat_over_instances(&[40, 41, 40, 50], 4, false));
        assert!(!fds_flat_over_instances(&[40, 48, 40, 40], 4, true));
        assert!(!fds_flat_over_instances(&[40, 40], 3, true));
    }
}
