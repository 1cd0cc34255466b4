//! The reconnect drill: a long-running backend leaks nothing when QEMU is killed and started
//! again against it (no backend restart). One backend of the suite (`reconnect-idle*`) is
//! started; then `connections` guests boot against it in turn, each SIGKILLed once its agent has
//! reported the disk (drivers probed, device started, partitions read).
//!
//! 1. After each disconnect the backend's open fds and threads are read once they settle
//!    ([`ProcUse::settled`](super::ProcUse::settled)); every reading must equal the first.
//! 2. The backend must see every disconnect (its log) within 10 s, and must be alive at the end.
//! 3. A guest that died of the early-boot int3 Oops is booted again (module rule 4 of
//!    [`drill`](super)); any other guest that did not report its disk in [`READY_LIMIT`]
//!    ends the drill with that failure.
//!
//! Before the daemon closed the exit eventfds vhost-user-backend 0.24 leaves open, this grew
//! by 8 fds per connection (7 -> 32 -> 56 -> 80 after 2 / 5 / 8 connections, 2026-12-04).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::EARLY_CRASH_RETRIES;
use super::{
    fresh_dir, guest_argv, load_suite, until_disk_report, DiskReport, DrillError, ProcUse, Rig,
};
use gt_launch::process::Guarded;
use gt_launch::restart::ReconnectResult;
use gt_launch::{backend, qemu};

/// How long one guest may take to report its disk.
pub const READY_LIMIT: Duration = Duration::from_secs(120);

/// One reconnect drill.
#[derive(Debug, Clone)]
pub struct ReconnectDrill {
    pub suite: String,
    pub connections: usize,
    pub dir: PathBuf,
}

/// What a reconnect drill found: its record (the `RECONNECT-RESULT` line, None when it stopped
/// before the last connection) and the checks that failed.
#[derive(Debug, Clone)]
pub struct ReconnectOutcome {
    pub result: Option<ReconnectResult>,
    pub failures: Vec<String>,
}

fn occurrences(path: &Path, needle: &str) -> usize {
    std::fs::read_to_string(path)
        .map(|t| t.matches(needle).count())
        .unwrap_or(0)
}

/// Waits (at most 10 s) until the backend has logged `want` disconnects in all.
fn wait_disconnects(backend_log: &Path, want: usize) -> Result<(), String> {
    let t = Instant::now();
    while occurrences(backend_log, "frontend disconnected") < want {
        if t.elapsed() >= Duration::from_secs(10) {
            return Err(format!("the backend did not see disconnect {want}"));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(())
}

/// How one connection ended.
enum Connection {
    Done,
    EarlyOops,
}

/// Boots one guest against the running backend, waits for its disk report, SIGKILLs QEMU and
/// waits for the backend to see the disconnect (its `disconnects`th in all).
fn one_connection(
    argv: &[String],
    dir: &Path,
    backend_log: &Path,
    n: usize,
    disconnects: usize,
) -> Result<Connection, String> {
    let _ = std::fs::remove_file(qemu::results_bin(dir));
    let mut q = Guarded::spawn("qemu", argv, &dir.join(format!("qemu.{n}.log")))
        .map_err(|e| format!("QEMU did not start: {e}"))?;
    match until_disk_report(&mut q, dir, READY_LIMIT) {
        DiskReport::Ready(_) => {}
        DiskReport::EarlyOops => {
            wait_disconnects(backend_log, disconnects)?;
            return Ok(Connection::EarlyOops);
        }
        DiskReport::Failed(why) => {
            q.stop(Duration::from_secs(5));
            return Err(why);
        }
    }
    if q.kill().is_none() {
        return Err("QEMU could not be killed and reaped".into());
    }
    wait_disconnects(backend_log, disconnects)?;
    Ok(Connection::Done)
}

/// Runs `d` on `rig` (module docs).
pub fn run(rig: &Rig, d: &ReconnectDrill) -> Result<ReconnectOutcome, DrillError> {
    let s = load_suite(&d.suite)?;
    let kernel = rig.kernel_image()?;
    let bin = rig.backend()?;
    let qversion =
        qemu::version(&rig.qemu_bin(&s)?).map_err(|e| DrillError::Qemu(e.to_string()))?;
    let dir = &d.dir;
    fresh_dir(dir)?;
    let socket = dir.join("vhost.sock");
    let argv = guest_argv(rig, &s, &kernel, &socket, dir, &d.suite)?;
    let bargv = backend::argv(&s, None, Some(&bin), &socket, dir, 1)
        .map_err(|e| DrillError::Suite(d.suite.clone(), e.to_string()))?
        .ok_or_else(|| DrillError::Suite(d.suite.clone(), "not a vhost-blk suite".into()))?;
    let blog = dir.join("backend.log");
    let mut b = backend::start(&bargv, &socket, &blog, Duration::from_secs(10))
        .map_err(|e| DrillError::Io(blog.clone(), std::io::Error::other(e.to_string())))?;
    let bpid = b.pid().unwrap_or(0);
    let usage = |p: ProcUse| (p.fds, p.threads);
    let before = usage(ProcUse::settled(bpid));
    let mut after = Vec::new();
    let mut failures = Vec::new();
    let mut disconnects = 0;
    'connections: for i in 1..=d.connections {
        let mut oopses = 0;
        loop {
            disconnects += 1;
            match one_connection(&argv, dir, &blog, i, disconnects) {
                Ok(Connection::Done) => break,
                Ok(Connection::EarlyOops) if oopses < EARLY_CRASH_RETRIES => {
                    oopses += 1;
                    eprintln!(
                        "{}: connection {i}: int3 Oops before the agent; booting again",
                        d.suite
                    );
                }
                Ok(Connection::EarlyOops) => {
                    failures.push(format!("connection {i}: int3 Oops {} times", oopses + 1));
                    break 'connections;
                }
                Err(e) => {
                    failures.push(format!("connection {i}: {e}"));
                    break 'connections;
                }
            }
        }
        after.push(usage(ProcUse::settled(bpid)));
        eprintln!(
            "{}: after connection {i}: (fds, threads) {:?}",
            d.suite,
            after[i - 1]
        );
    }
    if b.try_wait().is_some() {
        failures.push("the backend died".into());
    }
    b.stop(Duration::from_secs(5));
    if !failures.is_empty() {
        return Ok(ReconnectOutcome {
            result: None,
            failures,
        });
    }
    if !after.iter().all(|a| Some(a) == after.first()) {
        failures.push(format!(
            "(fds, threads) after each of {} connections: {after:?}",
            d.connections
        ));
    }
    Ok(ReconnectOutcome {
        result: Some(ReconnectResult {
            after,
            before,
            connections: d.connections,
            device: s.spec.device.as_str().into(),
            qemu: qversion,
            suite: d.suite.clone(),
        }),
        failures,
    })
}
