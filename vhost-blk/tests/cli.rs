//! The binary's command line: bad input gets one line and exit code 2, nothing is created or
//! deleted; signals end the daemon cleanly; a live socket is not stolen.

mod common;

use std::process::Command;

use common::Backend;

fn vhost_blk(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_vhost-blk"))
        .args(args)
        .output()
        .unwrap()
}

/// `args` get one line and exit code 2, and none of `created` exists afterwards.
#[track_caller]
fn assert_refused(args: &[&str], created: &[&std::path::Path]) {
    let out = vhost_blk(args);
    assert_eq!(out.status.code(), Some(2), "{args:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
    assert!(err.starts_with("vhost-blk: "), "{err}");
    for p in created {
        assert!(!p.exists(), "{args:?} created {}", p.display());
    }
}

#[test]
fn bad_options_exit_2_with_one_line_and_create_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("s.sock");
    let img = dir.path().join("new.img");
    let s = sock.to_str().unwrap();
    let i = img.to_str().unwrap();
    let cases: Vec<Vec<&str>> = vec![
        vec!["--socket-path", s],
        vec!["--socket-path", s, "--image", i],
        vec!["--socket-path", s, "--image", i, "--size", "12Q"],
        vec!["--socket-path", s, "--null", "1G", "--num-queues", "0"],
        vec!["--socket-path", s, "--null", "1G", "--bogus"],
        vec!["--socket-path", s, "--null", "1G", "--device", "nvme"],
        vec!["--socket-path", s, "--null", "1G", "--sandbox", "maybe"],
        vec![
            "--socket-path",
            s,
            "--null",
            "1G",
            "--config",
            "/nonexistent.toml",
        ],
        vec!["--null", "1G"],
        vec![
            "--socket-path",
            s,
            "--device",
            "scsi",
            "--topology",
            "targets=1,luns=0,absent_pq=2",
        ],
        vec![
            "--socket-path",
            s,
            "--device",
            "scsi",
            "--topology",
            "targets=1,luns=0,absent_luns=20000",
        ],
    ];
    for a in cases {
        assert_refused(&a, &[&sock, &img]);
    }
}

#[test]
fn test_instruments_are_for_an_image_and_direct_refuses_a_partial_last_block() {
    let dir = tempfile::tempdir_in(concat!(env!("CARGO_MANIFEST_DIR"), "/../target")).unwrap();
    let sock = dir.path().join("s.sock");
    let s = sock.to_str().unwrap();
    let tail = dir.path().join("tail.img");
    std::fs::write(&tail, vec![0u8; 4096 + 512]).unwrap();
    let t = tail.to_str().unwrap();
    let trace = dir.path().join("trace");
    let tr = trace.to_str().unwrap();
    let cases: Vec<Vec<&str>> = vec![
        vec!["--socket-path", s, "--null", "1G", "--syscall-trace", tr],
        vec![
            "--socket-path",
            s,
            "--mem",
            "1M",
            "--test-fault",
            "no-flush",
        ],
        vec![
            "--socket-path",
            s,
            "--image",
            t,
            "--syscall-trace",
            "/nonexistent/t",
        ],
        vec!["--socket-path", s, "--image", t, "--syscall-trace", t],
        vec!["--socket-path", s, "--image", t, "--test-fault", "bogus"],
        // Not a whole number of 4 KiB blocks: --direct could not write the last one.
        vec!["--socket-path", s, "--image", t, "--direct"],
    ];
    for a in cases {
        assert_refused(&a, &[&sock, &trace]);
    }
    assert_eq!(
        std::fs::metadata(&tail).unwrap().len(),
        4608,
        "the image is untouched"
    );
}

#[test]
fn print_capabilities_and_version() {
    let out = vhost_blk(&["--print-capabilities"]);
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["type"], "block");
    assert!(vhost_blk(&["--version"]).status.success());
}

#[test]
fn sigint_and_sigterm_remove_the_socket_and_exit_0() {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        let mut b = Backend::start(&["--null", "1G"]);
        let st = b.signal_and_wait(sig);
        assert_eq!(st.code(), Some(0), "signal {sig}");
        assert!(!b.socket.exists());
    }
}

#[test]
fn a_live_socket_is_not_stolen_and_a_stale_one_is_replaced() {
    let b = Backend::start(&["--null", "1G"]);
    let s = b.socket.to_str().unwrap().to_string();
    let out = vhost_blk(&["--socket-path", &s, "--null", "1G"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("in use"));
    assert!(b.socket.exists(), "the live backend keeps its socket");
    drop(b);
    // A stale socket (bound, never served) is cleaned up by the next backend.
    let dir = tempfile::tempdir().unwrap();
    let stale = dir.path().join("vhost.sock");
    drop(std::os::unix::net::UnixListener::bind(&stale).unwrap());
    let b2 = Backend::start_in(dir, &["--null", "1G"]);
    assert!(vhost_blk_frontend::Connection::connect(
        &b2.socket,
        &vhost_blk_frontend::ConnectOptions::default()
    )
    .is_ok());
}

#[test]
fn same_settings_from_a_toml_file() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("c.toml");
    std::fs::write(&cfg, "mem = \"8M\"\nnum_queues = 3\nserial = \"TOML\"\n").unwrap();
    let b = Backend::start(&["--config", cfg.to_str().unwrap()]);
    let opts = vhost_blk_frontend::ConnectOptions {
        num_queues: 3,
        ..Default::default()
    };
    let mut conn = vhost_blk_frontend::Connection::connect(&b.socket, &opts).unwrap();
    let cfg = conn.config(0, 60).unwrap();
    assert_eq!(u16::from_le_bytes(cfg[34..36].try_into().unwrap()), 3);
    assert_eq!(
        u64::from_le_bytes(cfg[0..8].try_into().unwrap()),
        (8 << 20) / 512
    );
}

/// `--rt-priority`: every thread of the backend runs SCHED_FIFO at that priority; where this
/// process may not use real-time policies, the backend refuses with one line and exit 2.
#[test]
fn rt_priority_makes_every_thread_fifo_or_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("vhost.sock");
    let s = sock.to_str().unwrap();
    let probe = vhost_blk(&[
        "--socket-path",
        s,
        "--null",
        "1G",
        "--rt-priority",
        "7",
        "--bogus",
    ]);
    assert_eq!(
        probe.status.code(),
        Some(2),
        "a bad option is still caught first"
    );
    let param = libc::sched_param { sched_priority: 1 };
    // SAFETY: sched_setscheduler on a thread this test creates for the probe; it reads one
    // sched_param from the stack.
    let allowed = std::thread::spawn(move || unsafe {
        libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) == 0
    })
    .join()
    .unwrap();
    if !allowed {
        let out = vhost_blk(&["--socket-path", s, "--null", "1G", "--rt-priority", "7"]);
        assert_eq!(out.status.code(), Some(2));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("--rt-priority 7") && err.lines().count() == 1,
            "{err}"
        );
        assert!(!sock.exists(), "nothing created");
        return;
    }
    let mut b = Backend::start_in(dir, &["--null", "1G", "--rt-priority", "7"]);
    let pid = b.child.id();
    let list = || -> Vec<i32> {
        std::fs::read_dir(format!("/proc/{pid}/task"))
            .unwrap()
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse().ok())
            .collect()
    };
    // The signal thread may start just after the socket appears: give it a moment, then check
    // every thread there is (the main thread at least).
    let t = std::time::Instant::now();
    while list().len() < 2 && t.elapsed() < std::time::Duration::from_secs(2) {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let tasks = list();
    assert!(!tasks.is_empty());
    for tid in tasks {
        let mut p = libc::sched_param { sched_priority: 0 };
        // SAFETY: sched_getscheduler / sched_getparam on a thread of our child; `p` is a valid
        // out-pointer on this stack.
        let (policy, ok) = unsafe {
            (
                libc::sched_getscheduler(tid),
                libc::sched_getparam(tid, &mut p) == 0,
            )
        };
        assert_eq!(policy, libc::SCHED_FIFO, "thread {tid}");
        assert!(
            ok && p.sched_priority == 7,
            "thread {tid}: {}",
            p.sched_priority
        );
    }
    assert_eq!(b.signal_and_wait(libc::SIGTERM).code(), Some(0));
}
