//! The backend confines itself (vhost-blk::sandbox, docs/sandbox.md), proven on the real
//! binary driven by the in-process frontend:
//!
//! 1. By default every thread of a serving backend has a seccomp filter (`Seccomp: 2`) and no
//!    new privileges, at 8 and 128 queues, both personalities; the threads with a narrower
//!    job have their kind's filters stacked on the process's (`Seccomp_filters`). With
//!    `--sandbox off` none has a filter (the test's control: it fails when confinement is off),
//!    and every thread still has no new privileges.
//! 2. With the test-only hook (feature `sandbox-test-hook`), a forbidden call in each thread
//!    kind (main, signals, relay, handler, queue worker, vhost-blk's own worker past vring 63)
//!    kills the process by SIGSYS with a line naming the call and the thread; an open of
//!    another path is refused with EACCES (Landlock in the main thread, the workers' filter in
//!    theirs). The same probes with `--sandbox off` go through: the control.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use common::{backend_bin, wait_bounded};
use vhost_blk_frontend::{
    scsi_connect_options, BlkRequest, ConnectOptions, Connection, QueueHandle, ScsiRequest,
};

const T: Duration = Duration::from_secs(10);

/// A backend with its stderr in a file, `env` set.
struct Run {
    child: Child,
    socket: PathBuf,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl Run {
    fn start(args: &[&str], env: Option<&str>) -> Run {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("vhost.sock");
        let log = dir.path().join("stderr.log");
        let mut cmd = Command::new(backend_bin());
        cmd.arg("--socket-path")
            .arg(&socket)
            .args(["--stats-file"])
            .arg(dir.path().join("stats.json"))
            .args(args)
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap());
        if let Some(spec) = env {
            cmd.env("VHOST_BLK_SANDBOX_PROBE", spec);
        }
        let child = cmd.spawn().unwrap();
        let t = Instant::now();
        while !socket.exists() {
            assert!(t.elapsed() < T, "no socket: {}", read(&log));
            std::thread::sleep(Duration::from_millis(10));
        }
        Run {
            child,
            socket,
            log,
            _dir: dir,
        }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn stderr(&self) -> String {
        read(&self.log)
    }

    /// The exit status within `limit`, or None if it still runs.
    #[cfg_attr(not(feature = "sandbox-test-hook"), allow(dead_code))]
    fn exited_within(&mut self, limit: Duration) -> Option<ExitStatus> {
        let t = Instant::now();
        while t.elapsed() < limit {
            if let Some(s) = self.child.try_wait().unwrap() {
                return Some(s);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            // SAFETY: kill(2) on our own child's pid.
            unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
            let _ = wait_bounded(&mut self.child, Duration::from_secs(5));
        }
    }
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_default()
}

/// One read on `q`; false if the backend did not answer (it may have been killed).
fn io(q: &mut QueueHandle, scsi: bool) -> bool {
    let ram = q.ram.clone();
    if scsi {
        let mut req = ScsiRequest::new(&ram, 4096).unwrap();
        req.set_tag(1);
        let Ok(head) = q.submit(&req.read16(0, 8).unwrap().bufs()) else {
            return false;
        };
        matches!(q.wait(T), Ok(u) if u.first().is_some_and(|u| u.id == head))
    } else {
        let mut req = BlkRequest::new(&ram, 4096).unwrap();
        let Ok(head) = q.submit(&req.read(0, 4096).unwrap().bufs()) else {
            return false;
        };
        matches!(q.wait(T), Ok(u) if u.first().is_some_and(|u| u.id == head))
    }
}

/// Connection options for `queues` request queues of a personality.
fn options(scsi: bool, queues: u16) -> ConnectOptions {
    let base = if scsi {
        scsi_connect_options(queues)
    } else {
        ConnectOptions {
            num_queues: queues,
            ..Default::default()
        }
    };
    ConnectOptions {
        inflight: true,
        mem_size: 128 << 20,
        queue_size: 64,
        ..base
    }
}

fn first_request(scsi: bool) -> usize {
    if scsi {
        vhost_blk::scsi::personality::FIRST_REQUEST_QUEUE
    } else {
        0
    }
}

/// Every thread's (name, Seccomp, NoNewPrivs, Seccomp_filters).
fn threads(pid: u32) -> Vec<(String, String, String, u32)> {
    let mut out = Vec::new();
    for t in std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .flatten()
    {
        let status = read(&t.path().join("status"));
        let field = |k: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(k))
                .unwrap_or("?")
                .trim()
                .to_string()
        };
        let filters = field("Seccomp_filters:").parse().unwrap_or(0);
        out.push((
            field("Name:"),
            field("Seccomp:"),
            field("NoNewPrivs:"),
            filters,
        ));
    }
    out
}

/// Starts a backend, connects, reads once on every request queue, and returns each thread's
/// confinement while the connection is up.
fn confinement(scsi: bool, queues: u16, extra: &[&str]) -> Vec<(String, String, String, u32)> {
    let q = queues.to_string();
    let mut args = vec!["--mem", "16M", "--num-queues", &q];
    if scsi {
        args.extend(["--device", "scsi"]);
    }
    args.extend_from_slice(extra);
    let run = Run::start(&args, None);
    let opts = options(scsi, queues);
    let mut conn = Connection::connect(&run.socket, &opts).unwrap();
    for i in first_request(scsi)..usize::from(opts.num_queues) {
        let mut q = conn.take_queue(i).unwrap();
        assert!(io(&mut q, scsi), "queue {i}: {}", run.stderr());
    }
    let t = threads(run.pid());
    drop(conn);
    t
}

#[test]
fn every_thread_is_confined_by_default_at_8_and_128_queues_both_personalities() {
    for scsi in [false, true] {
        for queues in [8u16, 128] {
            let ts = confinement(scsi, queues, &[]);
            let what = format!("scsi={scsi} queues={queues}: {ts:?}");
            // main, signals, handler, two relay threads, at least one worker per 8 queues.
            assert!(ts.len() >= 5 + usize::from(queues) / 8, "{what}");
            for (name, seccomp, nnp, filters) in &ts {
                assert_eq!(seccomp, "2", "{name}: {what}");
                assert_eq!(nnp, "1", "{name}: {what}");
                // The process's two (ENOSYS for clone3, the allow-list); the narrower kinds
                // stack theirs (rule 2): one for the signal thread, two for the rest.
                let want = match name.as_str() {
                    "signals" => 3,
                    n if n.starts_with("vu-relay") || n.starts_with("vring_") => 4,
                    _ => 2,
                };
                if name != "vhost-blk" {
                    assert_eq!(*filters, want, "{name}: {what}");
                }
            }
            let handler_narrowed = ts.iter().any(|t| t.0 == "vhost-blk" && t.3 == 4);
            let main_only_process = ts.iter().any(|t| t.0 == "vhost-blk" && t.3 == 2);
            assert!(handler_narrowed && main_only_process, "{what}");
            if queues == 128 {
                assert!(ts.iter().any(|t| t.0.starts_with("vring_own")), "{what}");
            }
        }
    }
}

/// The control: the same check fails with the sandbox off.
#[test]
fn with_sandbox_off_no_thread_is_confined() {
    let ts = confinement(false, 8, &["--sandbox", "off"]);
    assert!(ts.iter().all(|t| t.1 == "0" && t.3 == 0), "{ts:?}");
    // No new privileges in every case (sandbox rule 6).
    assert!(ts.iter().all(|t| t.2 == "1"), "{ts:?}");
}

#[cfg(feature = "sandbox-test-hook")]
mod probes {
    use super::*;
    use std::os::unix::process::ExitStatusExt;

    /// A file every host has and an unconfined backend may open.
    const OTHER: &str = "open:/etc/passwd";

    /// Starts the backend with probe `kind:call` and drives what makes a thread of `kind`
    /// enter its sandbox: a connection, and I/O on `queue` (of 128 queues past 63, else 8).
    fn probe(kind: &str, call: &str, queue: usize, scsi: bool, sandbox: &str) -> Run {
        let queues: u16 = if queue >= 64 { 128 } else { 8 };
        let q = queues.to_string();
        let mut args = vec!["--mem", "16M", "--num-queues", &q, "--sandbox", sandbox];
        if scsi {
            args.extend(["--device", "scsi"]);
        }
        let run = Run::start(&args, Some(&format!("{kind}:{call}")));
        if !matches!(kind, "main" | "signals") {
            if let Ok(mut conn) = Connection::connect(&run.socket, &options(scsi, queues)) {
                if let Some(mut q) = conn.take_queue(queue) {
                    let _ = io(&mut q, scsi);
                }
            }
        }
        run
    }

    /// The backend died by SIGSYS with one line naming `call` and a thread named `thread`...
    fn killed(mut run: Run, call: &str, thread: &str) {
        let st = run.exited_within(T);
        let log = run.stderr();
        assert_eq!(
            st.and_then(|s| s.signal()),
            Some(libc::SIGSYS),
            "{st:?}: {log}"
        );
        let line = log
            .lines()
            .find(|l| l.contains("sandbox: refused system call"))
            .unwrap_or_else(|| panic!("no line naming the call: {log}"));
        assert!(
            line.contains(&format!("call {call} (")) && line.contains(&format!("thread {thread}")),
            "{line}"
        );
    }

    /// The probe's call returned (its line contains `returned`), as `ok` says, and the
    /// backend still runs.
    fn returned(mut run: Run, ok: impl Fn(&str) -> bool) {
        let t = Instant::now();
        let line = loop {
            let log = run.stderr();
            if let Some(l) = log.lines().find(|l| l.contains("sandbox probe:")) {
                break l.to_string();
            }
            assert!(t.elapsed() < T, "the probe did not return: {log}");
            std::thread::sleep(Duration::from_millis(20));
        };
        assert!(ok(&line), "{line}");
        assert!(
            run.exited_within(Duration::from_millis(300)).is_none(),
            "{}",
            run.stderr()
        );
    }

    fn eacces(l: &str) -> bool {
        l.contains("returned -1") && l.contains("os error 13")
    }

    fn went_through(l: &str) -> bool {
        !l.contains("returned -1")
    }

    #[test]
    fn main_thread_cannot_exec_open_a_socket_or_another_file() {
        killed(
            probe("main", "execve", 0, false, "on"),
            "execve",
            "vhost-blk",
        );
        killed(
            probe("main", "socket", 0, false, "on"),
            "socket",
            "vhost-blk",
        );
        // Landlock: the main thread may open files, but only below the granted folders.
        returned(probe("main", OTHER, 0, false, "on"), eacces);
    }

    #[test]
    fn signal_thread_cannot_exec_or_open_a_network_socket() {
        killed(
            probe("signals", "execve", 0, false, "on"),
            "execve",
            "signals",
        );
        killed(
            probe("signals", "socket", 0, false, "on"),
            "socket",
            "signals",
        );
    }

    #[test]
    fn relay_and_handler_threads_cannot_exec_open_sockets_or_files() {
        killed(
            probe("relay", "execve", 0, false, "on"),
            "execve",
            "vu-relay",
        );
        killed(
            probe("relay", "socket", 0, false, "on"),
            "socket",
            "vu-relay",
        );
        returned(probe("relay", OTHER, 0, false, "on"), eacces);
        killed(
            probe("handler", "socket", 0, true, "on"),
            "socket",
            "vhost-blk",
        );
        returned(probe("handler", OTHER, 0, true, "on"), eacces);
    }

    #[test]
    fn queue_workers_cannot_exec_open_sockets_or_files() {
        killed(
            probe("worker", "execve", 0, false, "on"),
            "execve",
            "vring_worker",
        );
        killed(
            probe("worker", "socket", 3, true, "on"),
            "socket",
            "vring_worker",
        );
        returned(probe("worker", OTHER, 1, false, "on"), eacces);
    }

    #[test]
    fn own_workers_past_vring_63_cannot_exec_open_sockets_or_files() {
        killed(
            probe("own", "socket", 100, false, "on"),
            "socket",
            "vring_own_",
        );
        killed(
            probe("own", "execve", 127, true, "on"),
            "execve",
            "vring_own_",
        );
        returned(probe("own", OTHER, 64, false, "on"), eacces);
    }

    /// The control: with the sandbox off every probe goes through (execve of a path that does
    /// not exist: ENOENT), so the tests above fail when confinement is broken.
    #[test]
    fn with_sandbox_off_every_probe_goes_through() {
        returned(probe("main", "execve", 0, false, "off"), |l| {
            l.contains("os error 2")
        });
        returned(probe("main", OTHER, 0, false, "off"), went_through);
        returned(probe("signals", "socket", 0, false, "off"), went_through);
        returned(probe("relay", "socket", 0, false, "off"), went_through);
        returned(probe("handler", "socket", 0, true, "off"), went_through);
        returned(probe("worker", "socket", 0, false, "off"), went_through);
        returned(probe("own", OTHER, 100, false, "off"), went_through);
    }
}
