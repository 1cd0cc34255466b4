//! The sandbox drill (vhost-blk issue 57, docs/sandbox.md): every thread of our backend is
//! confined while it serves a booted guest. The suite's backend is started (its own defaults:
//! the sandbox on), one guest boots against it and reports its disk (drivers probed, rings
//! started, partitions read); then, with QEMU still connected, every thread of the backend is
//! read from /proc/PID/task/*/status.
//!
//! 1. Every thread shows `Seccomp: 2` (a filter) and `NoNewPrivs: 1`.
//! 2. The backend serves: the guest reported its disk, and the backend is alive after QEMU is
//!    killed (it saw the disconnect within 10 s).
//! 3. A guest that died of the early-boot int3 Oops is booted again (module rule 4 of
//!    [`drill`](super)).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use super::EARLY_CRASH_RETRIES;
use super::{check, fresh_dir, guest_argv, load_suite, until_disk_report, DiskReport};
use super::{DrillError, Rig};
use gt_launch::backend;
use gt_launch::process::Guarded;

/// The record's prefix on `lab drill sandbox`'s standard output.
pub const SANDBOX_PREFIX: &str = "SANDBOX-RESULT ";

/// How long the guest may take to report its disk.
const READY_LIMIT: Duration = Duration::from_secs(180);

/// One sandbox drill.
#[derive(Debug, Clone)]
pub struct SandboxDrill {
    pub suite: String,
    pub dir: PathBuf,
}

/// One backend thread's confinement, as /proc shows it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ThreadStatus {
    pub tid: u32,
    pub name: String,
    /// `Seccomp:` (0 none, 1 strict, 2 filter).
    pub seccomp: String,
    /// `NoNewPrivs:`.
    pub no_new_privs: String,
    /// `Seccomp_filters:`, how many filters are stacked.
    pub filters: String,
}

/// What the drill found: the suite, every thread, and the checks that failed.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct SandboxOutcome {
    pub suite: String,
    pub threads: Vec<ThreadStatus>,
    pub failures: Vec<String>,
}

/// Every thread of `pid` (empty if it cannot be read).
pub fn threads_of(pid: u32) -> Vec<ThreadStatus> {
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    let mut out: Vec<ThreadStatus> = dir
        .flatten()
        .filter_map(|t| {
            let tid = t.file_name().to_str()?.parse().ok()?;
            let status = std::fs::read_to_string(t.path().join("status")).ok()?;
            let field = |k: &str| {
                status
                    .lines()
                    .find_map(|l| l.strip_prefix(k))
                    .map_or_else(|| "?".into(), |v| v.trim().to_string())
            };
            Some(ThreadStatus {
                tid,
                name: field("Name:"),
                seccomp: field("Seccomp:"),
                no_new_privs: field("NoNewPrivs:"),
                filters: field("Seccomp_filters:"),
            })
        })
        .collect();
    out.sort_by_key(|t| t.tid);
    out
}

/// Boots until the disk report, retrying an early Oops (rule 3); the guest still runs.
fn boot(argv: &[String], d: &SandboxDrill) -> Result<Guarded, String> {
    for attempt in 0..=EARLY_CRASH_RETRIES {
        let log = d.dir.join(format!("qemu.{attempt}.log"));
        let mut q = Guarded::spawn("qemu", argv, &log).map_err(|e| format!("QEMU: {e}"))?;
        match until_disk_report(&mut q, &d.dir, READY_LIMIT) {
            DiskReport::Ready(_) => return Ok(q),
            DiskReport::EarlyOops => eprintln!("{}: int3 Oops before the agent; again", d.suite),
            DiskReport::Failed(why) => {
                q.stop(Duration::from_secs(5));
                return Err(why);
            }
        }
    }
    Err(format!("int3 Oops {} times", EARLY_CRASH_RETRIES + 1))
}

/// Runs `d` on `rig` (module docs).
pub fn run(rig: &Rig, d: &SandboxDrill) -> Result<SandboxOutcome, DrillError> {
    let s = load_suite(&d.suite)?;
    let kernel = rig.kernel_image()?;
    let bin = rig.backend()?;
    fresh_dir(&d.dir)?;
    let socket = d.dir.join("vhost.sock");
    let argv = guest_argv(rig, &s, &kernel, &socket, &d.dir, &d.suite)?;
    let bargv = backend::argv(&s, None, Some(&bin), &socket, &d.dir, 1)
        .map_err(|e| DrillError::Suite(d.suite.clone(), e.to_string()))?
        .ok_or_else(|| DrillError::Suite(d.suite.clone(), "not a vhost-blk suite".into()))?;
    let blog = d.dir.join("backend.log");
    let mut b = backend::start(&bargv, &socket, &blog, Duration::from_secs(10))
        .map_err(|e| DrillError::Io(blog.clone(), std::io::Error::other(e.to_string())))?;
    let pid = b.pid().unwrap_or(0);
    let mut failures = Vec::new();
    let mut threads = Vec::new();
    match boot(&argv, d) {
        Ok(mut q) => {
            threads = threads_of(pid);
            let _ = q.kill();
            let t = Instant::now();
            let seen = || {
                std::fs::read_to_string(&blog).is_ok_and(|l| l.contains("frontend disconnected"))
            };
            while !seen() && t.elapsed() < Duration::from_secs(10) {
                std::thread::sleep(Duration::from_millis(20));
            }
            check(&mut failures, seen(), || {
                "no disconnect in the backend's log".into()
            });
        }
        Err(why) => failures.push(format!("the guest did not report its disk: {why}")),
    }
    check(&mut failures, b.try_wait().is_none(), || {
        format!("the backend died (see {})", blog.display())
    });
    b.stop(Duration::from_secs(5));
    check(&mut failures, !threads.is_empty(), || {
        "no thread read".into()
    });
    for t in &threads {
        check(
            &mut failures,
            t.seccomp == "2" && t.no_new_privs == "1",
            || {
                format!(
                    "thread {} {}: Seccomp {} NoNewPrivs {}",
                    t.tid, t.name, t.seccomp, t.no_new_privs
                )
            },
        );
    }
    Ok(SandboxOutcome {
        suite: d.suite.clone(),
        threads,
        failures,
    })
}
