//! Driving one QEMU to its end: start it, poll the results stream, the backend and the clock,
//! and stop it, always (launch's rule: parses nothing, hands each new byte to the watch once).

use std::io::{Read, Seek, SeekFrom};
use std::path::Path;
use std::time::{Duration, Instant};

use super::*;

/// The bytes of `path` from `offset` on (none when it cannot be read yet).
fn read_from(path: &Path, offset: u64) -> Vec<u8> {
    let mut out = Vec::new();
    if let Ok(mut f) = std::fs::File::open(path) {
        if f.seek(SeekFrom::Start(offset)).is_ok() {
            let _ = f.read_to_end(&mut out);
        }
    }
    out
}

/// Starts QEMU and polls until it ends, the guest reports `status`, the backend dies or the
/// timeout hits. QEMU is always stopped before returning. Every new byte of the results
/// stream goes to `watch` once.
pub(super) fn drive_qemu(
    spec: &RunSpec,
    qargv: &[String],
    mut backend: Option<&mut Guarded>,
    mut restarter: Option<&mut restart::Restarter>,
    watch: &mut dyn StreamWatch,
) -> Result<(HostVerdict, HostTimes, Vec<u8>), LaunchError> {
    let dir = &spec.run_dir;
    let results = qemu::results_bin(dir);
    let t0 = Instant::now();
    let mut q = Guarded::spawn("qemu", qargv, &dir.join("qemu.log"))
        .map_err(|e| LaunchError::Qemu(format!("cannot start {}: {e}", qargv[0])))?;
    let mut timings = HostTimes::default();
    let qpid = q.pid();
    let bpid = backend.as_deref().and_then(Guarded::pid);
    let sample = cpu_sampler(qpid, bpid);
    timings.cpu_marks.push(sample("qemu-start", 0.0));
    let (placement, want_pinned) = placement_plan(spec, &mut timings);
    let mut stream: Vec<u8> = Vec::new();
    let mut status_seen: Option<Instant> = None;
    let mut polls: u64 = 0;
    let status = loop {
        if let Some(verdict) = qemu_exited(&mut q, dir) {
            break verdict;
        }
        tune_host(
            spec,
            &placement,
            want_pinned,
            polls,
            t0,
            (qpid, bpid),
            &mut timings,
        );
        polls += 1;
        take_new_bytes(
            &results,
            &mut stream,
            watch,
            t0,
            &mut timings,
            &mut status_seen,
            &sample,
        );
        // The agent powers off after `status`; don't wait for a slow poweroff forever.
        if status_seen.is_some_and(|t| t.elapsed() > Duration::from_secs(20)) {
            break HostVerdict::Ended;
        }
        if let Some(verdict) = check_backend(
            restarter.as_deref_mut(),
            backend.as_deref_mut(),
            &timings,
            t0,
            status_seen.is_some(),
            qpid,
            dir,
        ) {
            break verdict;
        }
        if t0.elapsed() >= spec.timeout {
            break HostVerdict::TimedOut {
                after_s: t0.elapsed().as_secs_f64(),
            };
        }
        std::thread::sleep(Duration::from_millis(25));
    };
    // A QEMU that has exited was reaped by try_wait: /proc would give zeros.
    if q.try_wait().is_none() && !timings.cpu_marks.iter().any(|c| c.name == "qemu-end") {
        timings
            .cpu_marks
            .push(sample("qemu-end", t0.elapsed().as_secs_f64()));
    }
    if let (Some(r), Some(b)) = (restarter, backend.as_deref()) {
        r.finish(t0.elapsed().as_secs_f64(), b, qpid);
        timings.backend_restarts = r.records.clone();
    }
    q.stop(Duration::from_secs(3));
    timings.qemu_s = Some(t0.elapsed().as_secs_f64());
    timings.host_slice_ms = Some(host_slice_ms(spec, &timings));
    // What arrived after the last poll.
    let rest = read_from(&results, stream.len() as u64);
    watch.feed(&rest);
    stream.extend_from_slice(&rest);
    Ok((status, timings, stream))
}

/// A CPU mark of QEMU (`qpid`) and the backend (`bpid`) named `name`, taken now, at `at_s`
/// seconds into the run (zeros without a QEMU pid).
fn cpu_sampler(qpid: Option<u32>, bpid: Option<u32>) -> impl Fn(&str, f64) -> CpuMark {
    move |name: &str, at_s: f64| CpuMark {
        name: name.to_string(),
        at_s,
        sample: qpid.map_or_else(cpu::CpuSample::default, |p| cpu::sample(p, bpid)),
    }
}

/// The time slice QEMU's threads had on the host ([`sched::slice_ms`]).
fn host_slice_ms(spec: &RunSpec, timings: &HostTimes) -> f64 {
    sched::slice_ms(
        spec.host.host_sched,
        timings.threads_short_slice,
        timings.rr_timeslice_ms,
        cpu::allowed_cpus().len(),
    )
}

/// The run's vCPU placement (recorded in `timings` when it is applied) and how many vCPU threads
/// to pin (0: none).
fn placement_plan(spec: &RunSpec, timings: &mut HostTimes) -> (placement::Placement, usize) {
    let placement = spec.placement();
    if spec.host.pin_vcpus {
        tracing::debug!(placement = %placement.describe());
        timings.placement = Some(placement.clone());
    }
    let want_pinned = if spec.host.pin_vcpus {
        spec.suite.spec.smp() as usize
    } else {
        0
    };
    (placement, want_pinned)
}

/// QEMU's own end, if it has exited: a failure when its status says so, else the run ended
/// (judged from the artefacts afterwards).
fn qemu_exited(q: &mut Guarded, dir: &Path) -> Option<HostVerdict> {
    let st = q.try_wait()?;
    tracing::debug!(status = %st, "qemu exited");
    if !st.success() {
        return Some(HostVerdict::Failed {
            reason: format!(
                "qemu exited ({st}): {}",
                backend::tail(&dir.join("qemu.log"), 3)
            ),
        });
    }
    Some(HostVerdict::Ended)
}

/// The processes' host tuning while they still create threads: each vCPU on its core (the first
/// 10 s), everything else off the vCPUs' cores and the `--host-sched` policies (every 8th poll
/// of the first 30 s).
fn tune_host(
    spec: &RunSpec,
    placement: &placement::Placement,
    want_pinned: usize,
    polls: u64,
    t0: Instant,
    (qpid, bpid): (Option<u32>, Option<u32>),
    timings: &mut HostTimes,
) {
    // vCPU threads exist once QEMU has set the machine up (well before the guest runs).
    if (timings.vcpus_pinned as usize) < want_pinned && t0.elapsed() < Duration::from_secs(10) {
        if let Some(p) = qpid {
            timings.vcpus_pinned = placement::pin_vcpus(p, placement) as u32;
        }
    }
    // A dedicated placement moves everything else off the vCPUs' cores (placement rule
    // 2), while the processes still create threads: every 8th poll of the first 30 s.
    if spec.host.pin_vcpus && polls % 8 == 0 && t0.elapsed() < Duration::from_secs(30) {
        for p in [qpid, bpid].into_iter().flatten() {
            placement::apply_others(p, placement);
        }
    }
    // Real-time policies while the processes still create threads (sched, rule 3): every
    // 8th poll of the first 30 s.
    if spec.host.host_sched != sched::HostSched::Normal
        && polls % 8 == 0
        && t0.elapsed() < Duration::from_secs(30)
    {
        if spec.host.host_sched == sched::HostSched::Realtime {
            if let Some(p) = bpid {
                sched::backend_realtime(p);
            }
            if let Some(p) = qpid {
                timings.vcpus_realtime = sched::qemu_realtime(p) as u32;
            }
            timings.rr_timeslice_ms = sched::rr_timeslice_ms();
        } else {
            // Nice (rule 5) for `nice` and `short`, first, so that a kernel without custom
            // slices still gets it; then the slice (rule 6).
            let short = spec.host.host_sched == sched::HostSched::Short;
            if let Some(p) = bpid {
                sched::renice(p);
                if short {
                    sched::short_slice(p);
                }
            }
            if let Some(p) = qpid {
                timings.threads_reniced = sched::renice(p) as u32;
                if short {
                    timings.threads_short_slice = sched::short_slice(p) as u32;
                }
            }
        }
    }
}

/// Hands the results stream's new bytes (if any) to `watch` once and records what they
/// showed: the first artefact, the device ready for fio, the guest's status (the run's CPU
/// window ends there) and the watch's CPU marks.
fn take_new_bytes(
    results: &Path,
    stream: &mut Vec<u8>,
    watch: &mut dyn StreamWatch,
    t0: Instant,
    timings: &mut HostTimes,
    status_seen: &mut Option<Instant>,
    sample: &dyn Fn(&str, f64) -> CpuMark,
) {
    let len = std::fs::metadata(results).map(|m| m.len()).unwrap_or(0);
    if len <= stream.len() as u64 {
        return;
    }
    let now = t0.elapsed().as_secs_f64();
    let new = read_from(results, stream.len() as u64);
    watch.feed(&new);
    stream.extend_from_slice(&new);
    let p = watch.progress();
    if timings.first_artifact_s.is_none() && p.any_artifact {
        timings.first_artifact_s = Some(now);
    }
    if timings.fio_ready_s.is_none() && p.device_ready {
        timings.fio_ready_s = Some(now);
    }
    if status_seen.is_none() && p.finished {
        *status_seen = Some(Instant::now());
        // The run's CPU window ends with the guest's work, while QEMU still exists:
        // once it has exited and been reaped, /proc has nothing left to read.
        timings.cpu_marks.push(sample("qemu-end", now));
    }
    for m in watch.marks() {
        if !timings.cpu_marks.iter().any(|c| c.name == m) {
            timings.cpu_marks.push(sample(&m, now));
        }
    }
}

/// The backend's side of one poll: a restart due (suite `[restarts]`) that fails, or a backend
/// that exited, ends the run; so does the planned kill of QEMU (restart rule 7), as an ordinary
/// end whose artefacts and image the kill test judges.
fn check_backend(
    restarter: Option<&mut restart::Restarter>,
    mut backend: Option<&mut Guarded>,
    timings: &HostTimes,
    t0: Instant,
    status_seen: bool,
    qpid: Option<u32>,
    dir: &Path,
) -> Option<HostVerdict> {
    if let (Some(r), Some(b)) = (restarter, backend.as_deref_mut()) {
        let now = t0.elapsed().as_secs_f64();
        let marks = |p: &str| {
            timings
                .cpu_marks
                .iter()
                .filter(|m| m.name.starts_with(p))
                .count()
        };
        let in_step = marks("begin.") > marks("end.");
        if let Err(reason) = r.poll(now, in_step, status_seen, b, qpid) {
            return Some(HostVerdict::Failed { reason });
        }
        if r.ended() {
            return Some(HostVerdict::Ended);
        }
    }
    if let Some(b) = backend {
        if let Some(st) = b.try_wait() {
            return Some(HostVerdict::Failed {
                reason: format!(
                    "backend exited during the run ({st}): {}",
                    backend::tail(&dir.join("backend.log"), 3)
                ),
            });
        }
    }
    None
}
