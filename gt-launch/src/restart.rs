//! Backend restarts while the guest runs (`[restarts]` of a suite): SIGKILL, then the same
//! argv again on the same socket, as a supervisor with `Restart=always` would do; QEMU
//! reconnects by itself (`reconnect=1`).
//!
//! Rules:
//! 1. Kills happen only while a step runs (its begin mark arrived, its end mark not yet): the
//!    first `first_after_s` after a step is first seen running, each further one `every_s`
//!    after the previous restart. A kill that falls between steps waits for the next step.
//! 2. Before each kill the backend's open fds and RSS and QEMU's open fds are read from /proc.
//!    The last instance is read in the same state: whenever a further kill would have fallen
//!    due under rule 1 while a step runs, the newest such reading is kept (`in_step: true`).
//!    Only if no step ran that long after the last kill is it read when the agent has finished,
//!    or when the run ends if it never did (`in_step: false`; a guest that has already reset
//!    the device has closed its queues' eventfds by then). The records go to
//!    `RUN/restarts.json` (and [`super::HostTimes::backend_restarts`]).
//! 3. The killed backend's stale socket is removed before the new one starts; the new one
//!    must create its socket within [`super::BACKEND_START_LIMIT`], else the run fails.
//! 4. Instance k (from 1) logs to `backend.k.log`.
//! 5. With `in_flight_at_least = N`, a due kill first asks the backend for its statistics
//!    (SIGUSR1 rewrites its stats file; read as soon as it changed, at most 200 ms later) and
//!    happens only when they show at least N requests taken and not completed; otherwise the
//!    next poll asks again, for at most [`GATE_LIMIT_S`], after which the kill happens anyway.
//!    The count seen is recorded (`in_flight`).
//! 6. At the end, each kill's record gets the chains the next instance resubmitted from the
//!    inflight area (its log's "inflight requests of the previous backend" lines): on request
//!    queues (`resubmitted`) and on the others (`resubmitted_other`: virtio-scsi's control and
//!    event queues, vrings 0 and 1).
//! 7. `target = "qemu"` or `"both"`: the one kill SIGKILLs QEMU (after the backend, for
//!    `both`), nothing is restarted, and the run ends there: [`Restarter::ended`] tells the
//!    driver that QEMU's death (and the backend's) was the plan, not a failure. The kill-test
//!    judge (`results::kills`) then reads the image.
//! 8. `jitter_s`: each kill happens a uniformly random time in `0..jitter_s` after its
//!    schedule (rule 1), drawn from the run's seed (splitmix64): a boot is repeatable.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use serde::{Deserialize, Serialize};
use vhost_blk_stats::DeviceStats;

use super::process::Guarded;
use gt_suite::{Device, KillTarget, RestartSettings};

/// How long a due kill waits for requests in flight (rule 5).
pub const GATE_LIMIT_S: f64 = 10.0;

/// The backend's log line for what a queue took over from its predecessor (device/backend.rs).
const RESUBMIT_LINE: &str = "inflight requests of the previous backend";

/// The first request vring of a device (virtio-scsi: control 0, event 1, requests from 2).
pub fn first_request_vring(device: Device) -> usize {
    match device {
        Device::Blk => 0,
        Device::Scsi => 2,
    }
}

/// Chains a backend's log says it resubmitted: (on request queues, on the other queues).
pub fn resubmissions(log: &str, first_request_vring: usize) -> (u64, u64) {
    let field = |line: &str, key: &str| -> Option<u64> {
        line.split_whitespace()
            .find_map(|w| w.strip_prefix(key)?.parse().ok())
    };
    let mut out = (0, 0);
    for line in log.lines().filter(|l| l.contains(RESUBMIT_LINE)) {
        let (Some(q), Some(n)) = (field(line, "queue="), field(line, "resubmit=")) else {
            continue;
        };
        if q as usize >= first_request_vring {
            out.0 += n;
        } else {
            out.1 += n;
        }
    }
    out
}

/// One backend instance as seen just before it was killed (or at the end of the run): an
/// element of `RUN/restarts.json`, written by [`Restarter::finish`] and read back by
/// `lab table restart-goals`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RestartRecord {
    /// Seconds from QEMU start.
    pub at_s: f64,
    pub pid: u32,
    /// Open file descriptors of the backend.
    pub backend_fds: Option<u32>,
    /// Resident set of the backend, KiB: its private memory plus the pages of the guest's
    /// shared memory it has touched (which vary with where the guest's buffers were).
    pub backend_rss_kib: Option<u64>,
    /// The private (anonymous) part of that resident set, KiB (`RssAnon`): heap, stacks and
    /// statistics, what a leak per instance would grow. Absent in records made before it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backend_anon_kib: Option<u64>,
    /// Open file descriptors of QEMU.
    pub qemu_fds: Option<u32>,
    /// Whether it was killed (false: the last instance).
    pub killed: bool,
    /// Whether it was read while a step ran (always for killed ones; rule 2 for the last).
    pub in_step: bool,
    /// Kill to new socket, milliseconds (killed instances only).
    pub restart_ms: Option<f64>,
    /// Requests taken and not completed per the backend's statistics just before the kill
    /// (rule 5; `None` when not asked or not answered).
    pub in_flight: Option<u64>,
    /// Chains the next instance resubmitted on request queues after this kill (rule 6).
    pub resubmitted: Option<u64>,
    /// The same on the other queues (virtio-scsi's control and event queues).
    pub resubmitted_other: Option<u64>,
}

/// The backend's descriptors over a restart run's instances may differ by at most this many.
pub const FDS_SPREAD: u64 = 2;

/// The backend's private memory (`RssAnon`) over a restart run's instances may differ by at most
/// this factor. Each instance is a new process, so nothing accumulates inside one; what differs
/// between them is how many malloc arenas the worker threads happened to create and fill (at 8
/// request queues 8.7-15.6 MB in one run, at 128 queues 101-167 MB over three runs:
/// docs/results/scale128). A leak carried across restarts (a growing inflight area resubmitted
/// each time, say) grows past any fixed factor.
pub const MEMORY_SPREAD: f64 = 2.0;

/// Whether the backend's descriptors stayed flat over the instances ([`FDS_SPREAD`]); false
/// when there are none.
pub fn fds_flat(fds: &[u64]) -> bool {
    let (Some(lo), Some(hi)) = (fds.iter().min(), fds.iter().max()) else {
        return false;
    };
    hi - lo <= FDS_SPREAD
}

/// Whether the backend's private memory stayed flat over the instances ([`MEMORY_SPREAD`]);
/// false when there are none.
pub fn memory_flat(kib: &[u64]) -> bool {
    let (Some(lo), Some(hi)) = (kib.iter().min(), kib.iter().max()) else {
        return false;
    };
    *hi as f64 <= *lo as f64 * MEMORY_SPREAD
}

/// What tests/booted/restart.rs found in one run of a restart suite: its last line of output,
/// `RESTART-RESULT {json}` (experiments/restart-experiment.sh keeps it in each run's log;
/// `lab table restart-goals` reads it back).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RestartResult {
    pub suite: String,
    pub device: String,
    /// `qemu -version`'s first line.
    pub qemu: String,
    pub kills: usize,
    /// Per kill: requests in flight before it, chains resubmitted on request queues and on
    /// the other queues (the [`RestartRecord`]s of the killed instances).
    pub in_flight: Vec<Option<u64>>,
    pub resubmitted: Vec<u64>,
    pub resubmitted_other: Vec<u64>,
    /// fio's exit status.
    pub fio_rc: Option<i64>,
    pub fio_job_errors: usize,
    pub fio_ios: u64,
    /// Guest dmesg lines showing an I/O error, SCSI error handling or a hung task.
    pub dmesg_bad: usize,
    /// Per instance, killed ones first.
    pub backend_fds: Vec<u64>,
    pub backend_rss_kib: Vec<u64>,
    /// Per instance, the private part (empty in results made before it was recorded).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub backend_anon_kib: Vec<u64>,
    pub qemu_fds: Vec<u64>,
    /// The run's wall time, seconds.
    pub wall_s: Option<f64>,
}

/// The prefix of [`RestartResult`]'s line.
pub const RESULT_PREFIX: &str = "RESTART-RESULT ";

/// What tests/booted/reconnect.rs found for one personality: QEMU killed and started again
/// `connections` times against one backend (no backend restart). Its line of output,
/// `RECONNECT-RESULT {json}`, is kept by experiments/reconnect-experiment.sh in
/// `OUT/reconnect-qemuQ.log` and read back by `lab table reconnects`. The fields are
/// in the order the line always had (alphabetical).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReconnectResult {
    /// The backend's (open fds, threads) once settled after each disconnect.
    pub after: Vec<(usize, usize)>,
    /// The same before the first connection.
    pub before: (usize, usize),
    pub connections: usize,
    pub device: String,
    /// `qemu -version`'s first line.
    pub qemu: String,
    pub suite: String,
}

/// The prefix of [`ReconnectResult`]'s line.
pub const RECONNECT_PREFIX: &str = "RECONNECT-RESULT ";

fn process(pid: u32) -> Option<procfs::process::Process> {
    procfs::process::Process::new(i32::try_from(pid).ok()?).ok()
}

fn fd_count(pid: u32) -> Option<u32> {
    process(pid)?.fd_count().ok().map(|n| n as u32)
}

fn modified(p: &Path) -> Option<SystemTime> {
    std::fs::metadata(p).and_then(|m| m.modified()).ok()
}

/// `VmRSS` of `/proc/PID/status`, KiB (procfs keeps the kernel's kB figure as it is).
fn rss_kib(pid: u32) -> Option<u64> {
    process(pid)?.status().ok()?.vmrss
}

/// `RssAnon` of `/proc/PID/status`, KiB: the resident set without file and shared-memory pages
/// (the guest's memory is a shared memfd mapping).
fn anon_kib(pid: u32) -> Option<u64> {
    process(pid)?.status().ok()?.rssanon
}

/// Drives the kills of one run.
pub struct Restarter {
    plan: RestartSettings,
    argv: Vec<String>,
    socket: PathBuf,
    run_dir: PathBuf,
    /// When the next kill is due (seconds from QEMU start), once the first step began.
    next_at: Option<f64>,
    /// The last instance, read when the agent finished.
    last: Option<RestartRecord>,
    /// Since when a due kill has been waiting for requests in flight (rule 5).
    gate_since: Option<f64>,
    first_request_vring: usize,
    /// splitmix64 state for the jitter (rule 8).
    rng: u64,
    /// QEMU was killed as planned (rule 7).
    ended: bool,
    pub records: Vec<RestartRecord>,
}

impl Restarter {
    pub fn new(
        plan: RestartSettings,
        argv: Vec<String>,
        socket: &Path,
        run_dir: &Path,
        device: Device,
        seed: u64,
    ) -> Self {
        Self {
            plan,
            argv,
            socket: socket.to_path_buf(),
            run_dir: run_dir.to_path_buf(),
            next_at: None,
            last: None,
            gate_since: None,
            first_request_vring: first_request_vring(device),
            rng: seed,
            ended: false,
            records: Vec::new(),
        }
    }

    /// Whether the run ended with the planned kill of QEMU (rule 7).
    pub fn ended(&self) -> bool {
        self.ended
    }

    /// Rule 8: seconds in `0..jitter_s`.
    fn jitter(&mut self) -> f64 {
        self.rng = self.rng.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        (z >> 11) as f64 / (1u64 << 53) as f64 * self.plan.jitter_s
    }

    /// Rule 7: QEMU (and, for `both`, the backend first) SIGKILLed; nothing restarts.
    fn kill_qemu(&mut self, mut rec: RestartRecord, backend: &mut Guarded, qemu: Option<u32>) {
        if self.plan.target == KillTarget::Both {
            // SAFETY: kill(2) on the pid of our own child, which has not been reaped yet.
            unsafe { libc::kill(rec.pid as libc::pid_t, libc::SIGKILL) };
        }
        if let Some(q) = qemu {
            // SAFETY: as above: QEMU is our child and the driver reaps it only once it exited.
            unsafe { libc::kill(q as libc::pid_t, libc::SIGKILL) };
        }
        if self.plan.target == KillTarget::Both
            && backend.wait_for(Duration::from_secs(5)).is_none()
        {
            tracing::warn!(pid = rec.pid, "backend did not die on SIGKILL");
        }
        rec.killed = self.plan.target == KillTarget::Both;
        tracing::info!(target = ?self.plan.target, qemu, "killed as planned; the run ends");
        self.records.push(rec);
        self.ended = true;
    }

    /// Requests in flight per the backend's statistics, asked for now (rule 5).
    fn in_flight(&self, pid: u32) -> Option<u64> {
        let file = super::backend::stats_file(&self.run_dir);
        let before = modified(&file);
        // SAFETY: kill(2) on the pid of our own child, which has not been reaped yet.
        unsafe { libc::kill(pid as libc::pid_t, libc::SIGUSR1) };
        let t = Instant::now();
        while t.elapsed() < Duration::from_millis(200) {
            std::thread::sleep(Duration::from_millis(1));
            if modified(&file) != before {
                let text = std::fs::read_to_string(&file).ok()?;
                let stats: DeviceStats = serde_json::from_str(&text).ok()?;
                return Some(stats.total.in_flight);
            }
        }
        None
    }

    /// Rule 5: `None` while a due kill waits, else what the statistics showed.
    fn gate(&mut self, now_s: f64, pid: u32) -> Option<Option<u64>> {
        let want = u64::from(self.plan.in_flight_at_least);
        if want == 0 {
            return Some(None);
        }
        let since = *self.gate_since.get_or_insert(now_s);
        let seen = self.in_flight(pid);
        if seen.is_some_and(|n| n >= want) || now_s - since >= GATE_LIMIT_S {
            self.gate_since = None;
            return Some(seen);
        }
        None
    }

    fn killed(&self) -> u32 {
        self.records.iter().filter(|r| r.killed).count() as u32
    }

    fn record(
        &self,
        at_s: f64,
        pid: u32,
        qemu: Option<u32>,
        killed: bool,
        in_step: bool,
    ) -> RestartRecord {
        RestartRecord {
            at_s,
            pid,
            backend_fds: fd_count(pid),
            backend_rss_kib: rss_kib(pid),
            backend_anon_kib: anon_kib(pid),
            qemu_fds: qemu.and_then(fd_count),
            killed,
            in_step,
            restart_ms: None,
            in_flight: None,
            resubmitted: None,
            resubmitted_other: None,
        }
    }

    /// Called on every poll of the run: kills and restarts `backend` when due (rule 1).
    /// `Err` when the new backend does not come up (the run fails).
    pub fn poll(
        &mut self,
        now_s: f64,
        in_step: bool,
        finished: bool,
        backend: &mut Guarded,
        qemu_pid: Option<u32>,
    ) -> Result<(), String> {
        if finished {
            if self.last.is_none() {
                if let Some(pid) = backend.pid() {
                    self.last = Some(self.record(now_s, pid, qemu_pid, false, false));
                }
            }
            return Ok(());
        }
        if !in_step || self.ended {
            return Ok(());
        }
        if self.next_at.is_none() {
            self.next_at = Some(now_s + self.plan.first_after_s + self.jitter());
        }
        let due = self.next_at.unwrap_or(now_s);
        if now_s < due {
            return Ok(());
        }
        let Some(pid) = backend.pid() else {
            return Err("backend has no pid".into());
        };
        if self.killed() >= self.plan.kills {
            // A kill that does not happen: read the last instance as the killed ones were.
            self.last = Some(self.record(now_s, pid, qemu_pid, false, true));
            self.next_at = Some(now_s + self.plan.every_s);
            return Ok(());
        }
        let Some(in_flight) = self.gate(now_s, pid) else {
            return Ok(());
        };
        let mut rec = self.record(now_s, pid, qemu_pid, true, true);
        rec.in_flight = in_flight;
        if self.plan.target != KillTarget::Backend {
            self.kill_qemu(rec, backend, qemu_pid);
            return Ok(());
        }
        let t = Instant::now();
        // SAFETY: kill(2) on the pid of our own child, which has not been reaped yet.
        unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
        if backend.wait_for(Duration::from_secs(5)).is_none() {
            return Err(format!("backend {pid} did not die on SIGKILL"));
        }
        let _ = std::fs::remove_file(&self.socket);
        let k = self.killed() + 1;
        let log = self.run_dir.join(format!("backend.{k}.log"));
        *backend =
            super::backend::start(&self.argv, &self.socket, &log, super::BACKEND_START_LIMIT)
                .map_err(|e| format!("restart {k}: {e}"))?;
        rec.restart_ms = Some(t.elapsed().as_secs_f64() * 1e3);
        tracing::info!(
            kill = k,
            pid,
            in_flight = rec.in_flight,
            restart_ms = rec.restart_ms,
            "backend killed and restarted"
        );
        self.records.push(rec);
        let next = now_s + t.elapsed().as_secs_f64() + self.plan.every_s + self.jitter();
        self.next_at = Some(next);
        Ok(())
    }

    /// The run ended: reads the last instance (rule 2) and writes `restarts.json`.
    pub fn finish(&mut self, now_s: f64, backend: &Guarded, qemu_pid: Option<u32>) {
        let last = self.last.take().or_else(|| {
            backend
                .pid()
                .map(|pid| self.record(now_s, pid, qemu_pid, false, false))
        });
        self.records.extend(last);
        for (i, rec) in self.records.iter_mut().filter(|r| r.killed).enumerate() {
            let log = self.run_dir.join(format!("backend.{}.log", i + 1));
            if let Ok(text) = std::fs::read_to_string(&log) {
                let (req, other) = resubmissions(&text, self.first_request_vring);
                rec.resubmitted = Some(req);
                rec.resubmitted_other = Some(other);
            }
        }
        let p = records_file(&self.run_dir);
        match serde_json::to_string_pretty(&self.records) {
            Ok(t) => {
                if let Err(e) = std::fs::write(&p, t + "\n") {
                    tracing::warn!("{}: {e}", p.display());
                }
            }
            Err(e) => tracing::warn!("{RECORDS_FILE}: {e}"),
        }
    }
}

/// The file of a run's [`RestartRecord`]s, in its run directory.
pub const RECORDS_FILE: &str = "restarts.json";

/// `run_dir`'s [`RECORDS_FILE`].
pub fn records_file(run_dir: &Path) -> PathBuf {
    run_dir.join(RECORDS_FILE)
}

/// The [`RestartRecord`]s `run_dir` holds; none when there is no such file or it does not
/// parse (a run that ended before [`Restarter::finish`]).
pub fn read_records(run_dir: &Path) -> Vec<RestartRecord> {
    std::fs::read_to_string(records_file(run_dir))
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests;
