//! The cost of scale (issue 46, `experiments/scale-cost.sh`): for each cell of suite
//! `scale-cost` (vhost-blk virtio-scsi on null storage, 8, 62 and 128 request queues, one
//! possible guest CPU per queue of which 2 run), `VB_COST_REPEAT` (default 1) boots of
//! `VB_COST_KERNEL` (default Debian's RT kernel) under the system's QEMU (`VB_QEMU` picks
//! another) against a backend started for that boot. Per boot: the wall time from QEMU's start
//! to the agent's disk report (kernel boot, driver probe, the 128-hctx queue set-up, SCSI scan);
//! the backend's resident memory, threads and open descriptors before QEMU connects and once
//! the guest has reported its disk; QEMU's resident memory and threads then. Each boot prints a
//! `COST-RESULT {json}` line; the last lines are the table of medians.
//!
//! It checks only that the guest came up with its hctx and the backend served the connection
//! with one thread per queue (vhost-user-backend's and vhost-blk's own together): it measures,
//! the numbers are judged in docs/results/scale-cost/. An experiment, not a check: ci/test.sh
//! leaves it out (`--skip cost::`); experiments/scale-cost.sh runs it.

// A test reads as one scenario: exempt from clippy::too_many_lines (non-test code is not).
#![allow(clippy::too_many_lines)]

use crate::common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use guest_tests::agent::StreamParser;
use guest_tests::images::job::{self, JobParams};
use guest_tests::images::{self, ImageOptions};
use guest_tests::launch::process::Guarded;
use guest_tests::launch::{backend, qemu, StreamWatch};
use guest_tests::suite::{self, Suite};

/// What one boot cost.
#[derive(Debug, Clone, serde::Serialize)]
struct Cost {
    queues: u32,
    boot_to_disk_s: f64,
    backend_idle: Proc,
    backend_connected: Proc,
    qemu: Proc,
}

/// Resident memory (KiB), threads and open descriptors of a process.
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
struct Proc {
    rss_kib: u64,
    threads: usize,
    fds: usize,
}

fn read_proc(pid: u32) -> Proc {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let rss_kib = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let count = |what: &str| {
        std::fs::read_dir(format!("/proc/{pid}/{what}"))
            .map(|d| d.count())
            .unwrap_or(0)
    };
    Proc {
        rss_kib,
        threads: count("task"),
        fds: count("fd"),
    }
}

/// The reading of `pid` once threads and descriptors have not changed for 500 ms (at most 10 s).
fn settled(pid: u32) -> Proc {
    let t = Instant::now();
    let mut last = read_proc(pid);
    let mut since = Instant::now();
    while t.elapsed() < Duration::from_secs(10) && since.elapsed() < Duration::from_millis(500) {
        std::thread::sleep(Duration::from_millis(25));
        let now = read_proc(pid);
        if (now.threads, now.fds) != (last.threads, last.fds) {
            since = Instant::now();
        }
        last = now;
    }
    last
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// One boot of `cell`; None when the guest died of the early-boot int3 Oops (boot again).
fn one_boot(cell: &Suite, kernel: &images::KernelImage, dir: &Path) -> Option<Cost> {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).unwrap();
    let initrd = dir.join("initrd.cpio");
    let archive = job::archive(&JobParams {
        run_id: "cost",
        suite: cell,
        lock_offsets: None,
    });
    job::write_initrd(&kernel.initramfs, &archive, &initrd).unwrap();
    let socket = dir.join("vhost.sock");
    let bargv = backend::argv(cell, None, Some(&common::backend_bin()), &socket, dir, 1)
        .unwrap()
        .unwrap();
    let mut b = backend::start(
        &bargv,
        &socket,
        &dir.join("backend.log"),
        Duration::from_secs(10),
    )
    .unwrap();
    let bpid = b.pid().unwrap();
    let backend_idle = settled(bpid);
    let qemu_bin = common::qemu_bin(cell);
    let argv = qemu::argv(&qemu::QemuParams {
        qemu_bin: &qemu_bin,
        accel: common::accel(),
        bios: cell.spec.bios,
        suite: cell,
        builtin_latency_ns: 0,
        socket: Some(&socket),
        run_dir: dir,
        bzimage: &kernel.bzimage,
        initrd: &initrd,
        cmdline: qemu::kernel_cmdline(&kernel.cmdline, kernel.boot_trace_events, cell),
    });
    let results = qemu::results_bin(dir);
    let t = Instant::now();
    let mut q = Guarded::spawn("qemu", &argv, &dir.join("qemu.log")).unwrap();
    let mut parser = StreamParser::default();
    let mut fed = 0usize;
    while !parser.progress().device_ready {
        if q.try_wait().is_some() {
            let text = std::fs::read_to_string(dir.join("console.log")).unwrap_or_default();
            assert!(
                text.contains(guest_tests::executor::STALE_INT3_OOPS),
                "QEMU exited before the disk report; console {}",
                dir.join("console.log").display()
            );
            b.stop(Duration::from_secs(5));
            return None;
        }
        assert!(
            t.elapsed() < Duration::from_secs(cell.spec.timeout_secs),
            "no disk report; console {}",
            dir.join("console.log").display()
        );
        std::thread::sleep(Duration::from_millis(20));
        let bytes = std::fs::read(&results).unwrap_or_default();
        if bytes.len() > fed {
            parser.feed(&bytes[fed..]);
            fed = bytes.len();
        }
    }
    let boot_to_disk_s = t.elapsed().as_secs_f64();
    let backend_connected = settled(bpid);
    let qemu = read_proc(q.pid().unwrap());
    q.stop(Duration::from_secs(5));
    b.stop(Duration::from_secs(5));
    Some(Cost {
        queues: cell.spec.num_queues,
        boot_to_disk_s,
        backend_idle,
        backend_connected,
        qemu,
    })
}

#[test]
#[ignore = "boots a guest: ci/test.sh runs these (--ignored)"]
fn boot_time_memory_and_threads_at_8_62_and_128_queues() {
    let repeat: usize = std::env::var("VB_COST_REPEAT")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1);
    let kernel_name = std::env::var("VB_COST_KERNEL").unwrap_or_else(|_| common::KERNEL.into());
    let kernel = images::ensure(&kernel_name, &ImageOptions::default()).unwrap();
    let s = Suite::load(&suite::default_dir(), "scale-cost").unwrap();
    let base: PathBuf =
        Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("scale-cost-{}", std::process::id()));
    let mut all: Vec<Cost> = Vec::new();
    for r in 0..repeat {
        for v in &s.spec.variants {
            let cell = s.for_variant(Some(&v.name)).unwrap();
            let dir = base.join(format!("{}-r{r}", v.name));
            let mut tries = 0;
            let cost = loop {
                match one_boot(&cell, &kernel, &dir) {
                    Some(c) => break c,
                    None if tries < common::EARLY_CRASH_RETRIES => tries += 1,
                    None => panic!("{}: int3 Oops {tries} times", v.name),
                }
            };
            // One worker thread per vring while connected, beside the idle threads.
            let vrings = cost.queues as usize + 2;
            assert!(
                cost.backend_connected.threads >= cost.backend_idle.threads + vrings,
                "{}: {:?}",
                v.name,
                cost
            );
            eprintln!(
                "COST-RESULT {}",
                serde_json::json!({"kernel": kernel_name, "cell": v.name, "cost": cost})
            );
            all.push(cost);
        }
    }
    let mib = |k: u64| k as f64 / 1024.0;
    eprintln!(
        "\nscale-cost: {kernel_name}, {repeat} boot(s) per cell, medians\n\n\
         | request queues | boot to disk report (s) | backend RSS idle / connected (MiB) | \
         backend threads idle / connected | backend fds connected | QEMU RSS (MiB) | QEMU threads |\n\
         |---|---|---|---|---|---|---|"
    );
    for v in &s.spec.variants {
        let q = v.num_queues.unwrap_or(s.spec.num_queues);
        let c: Vec<&Cost> = all.iter().filter(|c| c.queues == q).collect();
        let m = |f: &dyn Fn(&Cost) -> f64| median(c.iter().map(|c| f(c)).collect());
        eprintln!(
            "| {q} | {:.1} | {:.1} / {:.1} | {:.0} / {:.0} | {:.0} | {:.0} | {:.0} |",
            m(&|c| c.boot_to_disk_s),
            m(&|c| mib(c.backend_idle.rss_kib)),
            m(&|c| mib(c.backend_connected.rss_kib)),
            m(&|c| c.backend_idle.threads as f64),
            m(&|c| c.backend_connected.threads as f64),
            m(&|c| c.backend_connected.fds as f64),
            m(&|c| mib(c.qemu.rss_kib)),
            m(&|c| c.qemu.threads as f64),
        );
    }
}
