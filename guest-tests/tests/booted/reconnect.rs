//! A long-running backend leaks nothing when QEMU is killed and started again against it (no
//! backend restart): our backend on a file with 8 request queues, then `VB_RECONNECTS` (default
//! 3; `experiments/reconnect-experiment.sh` runs 20) boots of Debian's RT kernel under real QEMU,
//! each SIGKILLed once the guest's agent has reported its disk (drivers probed, device started,
//! partitions read). After each disconnect the backend's open fds and threads are read once
//! they settle; after the last they must equal those after the first. Both personalities
//! (suites `reconnect-idle`, `reconnect-idle-scsi`; `VB_RECONNECT_SUFFIX=-128` takes their
//! 128-queue forms, whose vrings past 63 run on vhost-blk's own worker threads); `VB_QEMU`
//! picks the QEMU, `VB_RECONNECT_KERNEL` the kernel (default Debian's RT kernel).
//!
//! Before the daemon closed the exit eventfds vhost-user-backend 0.24 leaves open, this grew
//! by 8 fds per connection (7 -> 32 -> 56 -> 80 after 2 / 5 / 8 connections, 2026-12-04).
//! The last line printed, `RECONNECT-RESULT {json}` (a `ReconnectResult`), is what the
//! experiment script tabulates (`lab table reconnects`).

// A test reads as one scenario: exempt from clippy::too_many_lines (non-test code is not).
#![allow(clippy::too_many_lines)]

use crate::common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use guest_tests::agent::StreamParser;
use guest_tests::images::job::{self, JobParams};
use guest_tests::images::{self, ImageOptions};
use guest_tests::launch::process::Guarded;
use guest_tests::launch::restart::{ReconnectResult, RECONNECT_PREFIX};
use guest_tests::launch::{backend, qemu, StreamWatch};
use guest_tests::suite::{self, Suite};

/// How long one guest may take to report its disk.
const READY_LIMIT: Duration = Duration::from_secs(120);

fn count(pid: u32, what: &str) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/{what}"))
        .map(|d| d.count())
        .unwrap_or(0)
}

/// (fds, threads) of `pid` once neither has changed for 500 ms (at most 10 s).
fn settled(pid: u32) -> (usize, usize) {
    let t = Instant::now();
    let mut last = (count(pid, "fd"), count(pid, "task"));
    let mut since = Instant::now();
    while t.elapsed() < Duration::from_secs(10) && since.elapsed() < Duration::from_millis(500) {
        std::thread::sleep(Duration::from_millis(25));
        let now = (count(pid, "fd"), count(pid, "task"));
        if now != last {
            last = now;
            since = Instant::now();
        }
    }
    last
}

fn occurrences(path: &Path, needle: &str) -> usize {
    std::fs::read_to_string(path)
        .map(|t| t.matches(needle).count())
        .unwrap_or(0)
}

/// Waits (at most 10 s) until the backend has logged `want` disconnects in all.
fn wait_disconnects(backend_log: &Path, want: usize, n: usize) {
    let t = Instant::now();
    while occurrences(backend_log, "frontend disconnected") < want {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "connection {n}: the backend did not see the disconnect"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Boots one guest against the running backend, waits for its disk report, SIGKILLs QEMU and
/// waits for the backend to see the disconnect (its `disconnects`th in all). Err when the guest
/// died before its agent of the int3 Oops Debian's kernel sometimes meets under MTTCG at boot
/// (`common::EARLY_CRASH_RETRIES`): worth booting again, as the other booted tests do.
fn one_connection(
    argv: &[String],
    dir: &Path,
    backend_log: &Path,
    n: usize,
    disconnects: usize,
) -> Result<(), String> {
    let results = qemu::results_bin(dir);
    let _ = std::fs::remove_file(&results);
    let console = dir.join("console.log");
    let mut q = Guarded::spawn("qemu", argv, &dir.join(format!("qemu.{n}.log"))).unwrap();
    let mut parser = StreamParser::default();
    let mut fed = 0usize;
    let t = Instant::now();
    while !parser.progress().device_ready {
        if q.try_wait().is_some() {
            wait_disconnects(backend_log, disconnects, n);
            let text = std::fs::read_to_string(&console).unwrap_or_default();
            assert!(
                text.contains(guest_tests::executor::STALE_INT3_OOPS),
                "connection {n}: QEMU exited before the disk report; console {}",
                console.display()
            );
            return Err("int3 Oops before the agent".into());
        }
        assert!(
            t.elapsed() < READY_LIMIT,
            "connection {n}: no disk report; console {}",
            console.display()
        );
        std::thread::sleep(Duration::from_millis(50));
        let bytes = std::fs::read(&results).unwrap_or_default();
        if bytes.len() > fed {
            parser.feed(&bytes[fed..]);
            fed = bytes.len();
        }
    }
    let pid = q.pid().unwrap();
    // SAFETY: kill(2) on our own child, not reaped yet (try_wait returned None above).
    unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
    assert!(
        q.wait_for(Duration::from_secs(10)).is_some(),
        "QEMU survived SIGKILL"
    );
    wait_disconnects(backend_log, disconnects, n);
    Ok(())
}

fn reconnects(suite_name: &str) {
    let _g = common::one_guest_at_a_time();
    let suffix = std::env::var("VB_RECONNECT_SUFFIX").unwrap_or_default();
    let suite_name = &format!("{suite_name}{suffix}");
    let n: usize = std::env::var("VB_RECONNECTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3);
    let dir: PathBuf = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("reconnect-{suite_name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let s = Suite::load(&suite::default_dir(), suite_name).unwrap();
    // `VB_RECONNECT_KERNEL`: another kernel (the 128-queue runs use rt128: Debian's kernel with
    // 128 possible CPUs met its MTTCG int3 Oops in about half of the boots here).
    let kernel_name =
        std::env::var("VB_RECONNECT_KERNEL").unwrap_or_else(|_| common::KERNEL.into());
    let kernel = images::ensure(&kernel_name, &ImageOptions::default()).unwrap();
    let initrd = dir.join("initrd.cpio");
    let archive = job::archive(&JobParams {
        run_id: suite_name,
        suite: &s,
        lock_offsets: None,
    });
    job::write_initrd(&kernel.initramfs, &archive, &initrd).unwrap();
    let socket = dir.join("vhost.sock");
    let bin = common::backend_bin();
    let bargv = backend::argv(&s, None, Some(&bin), &socket, &dir, 1)
        .unwrap()
        .unwrap();
    let blog = dir.join("backend.log");
    let mut b = backend::start(&bargv, &socket, &blog, Duration::from_secs(10)).unwrap();
    let bpid = b.pid().unwrap();
    let qemu_bin = common::qemu_bin(&s);
    let qversion = qemu::version(&qemu_bin).unwrap();
    let argv = qemu::argv(&qemu::QemuParams {
        qemu_bin: &qemu_bin,
        accel: common::accel(),
        bios: s.spec.bios,
        suite: &s,
        builtin_latency_ns: 0,
        socket: Some(&socket),
        run_dir: &dir,
        bzimage: &kernel.bzimage,
        initrd: &initrd,
        cmdline: qemu::kernel_cmdline(&kernel.cmdline, kernel.boot_trace_events, &s),
    });
    let before = settled(bpid);
    let mut after = Vec::new();
    let mut disconnects = 0;
    for i in 1..=n {
        let mut tries = 0;
        loop {
            disconnects += 1;
            match one_connection(&argv, &dir, &blog, i, disconnects) {
                Ok(()) => break,
                Err(e) if tries < common::EARLY_CRASH_RETRIES => {
                    tries += 1;
                    eprintln!("{suite_name}: connection {i}: {e}; booting again");
                }
                Err(e) => panic!("connection {i}: {e}, {tries} times"),
            }
        }
        after.push(settled(bpid));
        eprintln!(
            "{suite_name}: after connection {i}: (fds, threads) {:?}",
            after[i - 1]
        );
    }
    assert!(b.try_wait().is_none(), "the backend died");
    b.stop(Duration::from_secs(5));
    let result = ReconnectResult {
        after,
        before,
        connections: n,
        device: s.spec.device.as_str().into(),
        qemu: qversion,
        suite: suite_name.into(),
    };
    eprintln!(
        "{RECONNECT_PREFIX}{}",
        serde_json::to_string(&result).expect("a ReconnectResult serializes")
    );
    let after = &result.after;
    assert_eq!(
        after.first(),
        after.last(),
        "(fds, threads) after the first and the last of {n} connections: {after:?}"
    );
    assert!(
        after.iter().all(|a| Some(a) == after.first()),
        "(fds, threads) after each connection: {after:?}"
    );
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
