//! A long-running backend leaks nothing per frontend connection: the real `vhost-blk` binary,
//! and an in-process frontend that connects (with inflight tracking, as QEMU does), does I/O on
//! every request queue, and drops the connection, N times in a row, for both personalities.
//! After each disconnect the backend's threads return to its idle count (main and signal
//! threads) and its open descriptors to what they were after the first connection.
//!
//! vhost-user-backend 0.24 leaves one exit eventfd per worker thread open per connection
//! (device::exit_events); before the daemon closed them this went 6 -> 14 -> 22 -> 30 -> 38
//! descriptors over four connections with 8 queues.

mod common;

use std::time::{Duration, Instant};

use common::Backend;
use vhost_blk_frontend::{
    scsi_connect_options, BlkRequest, ConnectOptions, Connection, QueueHandle, ScsiRequest,
};

const T: Duration = Duration::from_secs(10);
const CONNECTIONS: usize = 20;
const REQUEST_QUEUES: u16 = 8;

fn count(pid: u32, what: &str) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/{what}"))
        .map(|d| d.count())
        .unwrap_or(0)
}

/// (open fds, threads) of `pid` once the connection it served is gone: waits (bounded) until
/// neither has changed for 300 ms, or, with `want`, until both equal it. Returns the last
/// reading either way.
fn settled(pid: u32, want: Option<(usize, usize)>) -> (usize, usize) {
    let t = Instant::now();
    let mut last = (count(pid, "fd"), count(pid, "task"));
    let mut stable_since = Instant::now();
    while t.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(20));
        let now = (count(pid, "fd"), count(pid, "task"));
        if now != last {
            last = now;
            stable_since = Instant::now();
        }
        let done = match want {
            Some(w) => now == w,
            None => stable_since.elapsed() > Duration::from_millis(300),
        };
        if done {
            return now;
        }
    }
    last
}

/// One request on `q`, answered.
fn blk_io(q: &mut QueueHandle, i: u64) {
    let mut req = BlkRequest::new(&q.ram.clone(), 4096).unwrap();
    let head = q.submit(&req.read(i * 8, 4096).unwrap().bufs()).unwrap();
    let used = q.wait(T).unwrap();
    assert_eq!(used.len(), 1);
    assert_eq!(used[0].id, head);
    assert_eq!(req.result(used[0].len).unwrap().status, 0);
}

fn scsi_io(q: &mut QueueHandle, i: u64) {
    let mut req = ScsiRequest::new(&q.ram.clone(), 4096).unwrap();
    req.set_tag(i + 1);
    let head = q.submit(&req.read16(i * 8, 8).unwrap().bufs()).unwrap();
    let used = q.wait(T).unwrap();
    assert_eq!(used.len(), 1);
    assert_eq!(used[0].id, head);
    assert!(req.result(used[0].len).unwrap().is_good());
}

/// Connects `CONNECTIONS` times (I/O on every request queue each time) and checks that the
/// backend's fds and threads after the last disconnect equal those after the first.
fn connect_and_drop(args: &[&str], opts: &ConnectOptions, first_request: usize, scsi: bool) {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("disk.img");
    let img = img.to_str().unwrap().to_string();
    let mut all = vec!["--image", &img, "--size", "16M"];
    all.extend_from_slice(args);
    let backend = Backend::start_in(dir, &all);
    let pid = backend.child.id();
    let (_, idle_threads) = settled(pid, None);
    let mut first = None;
    let mut readings = Vec::new();
    for c in 0..CONNECTIONS {
        {
            let mut conn = Connection::connect(&backend.socket, opts).unwrap();
            assert!(
                conn.has_inflight_area(),
                "the backend offers inflight tracking"
            );
            for i in first_request..usize::from(opts.num_queues) {
                let mut q = conn.take_queue(i).unwrap();
                if scsi {
                    scsi_io(&mut q, i as u64);
                } else {
                    blk_io(&mut q, i as u64);
                }
            }
        }
        let r = settled(pid, first);
        readings.push(r);
        if c == 0 {
            assert_eq!(r.1, idle_threads, "threads after the first connection");
            first = Some(r);
        }
    }
    let first = first.unwrap();
    assert_eq!(
        readings.last().copied(),
        Some(first),
        "(fds, threads) after each of {CONNECTIONS} connections: {readings:?}"
    );
    assert!(
        readings.iter().all(|&r| r == first),
        "(fds, threads) after each connection: {readings:?}"
    );
}

#[test]
fn blk_leaks_no_descriptor_or_thread_per_connection() {
    let opts = ConnectOptions {
        num_queues: REQUEST_QUEUES,
        inflight: true,
        ..Default::default()
    };
    connect_and_drop(&["--num-queues", "8"], &opts, 0, false);
}

#[test]
fn scsi_leaks_no_descriptor_or_thread_per_connection() {
    let opts = ConnectOptions {
        inflight: true,
        ..scsi_connect_options(REQUEST_QUEUES)
    };
    connect_and_drop(
        &["--device", "scsi", "--num-queues", "8"],
        &opts,
        vhost_blk::scsi::personality::FIRST_REQUEST_QUEUE,
        true,
    );
}

/// The same past vhost-user-backend's 64 vrings: 128 queues, half of them on vhost-blk's
/// own worker threads (device::workers), whose epoll, exit and kick descriptors go with the
/// connection.
#[test]
fn blk_128_queues_leak_no_descriptor_or_thread_per_connection() {
    let opts = ConnectOptions {
        num_queues: 128,
        inflight: true,
        mem_size: 128 << 20,
        queue_size: 64,
        ..Default::default()
    };
    connect_and_drop(&["--num-queues", "128"], &opts, 0, false);
}

#[test]
fn scsi_128_request_queues_leak_no_descriptor_or_thread_per_connection() {
    let opts = ConnectOptions {
        inflight: true,
        mem_size: 128 << 20,
        queue_size: 64,
        ..scsi_connect_options(128)
    };
    connect_and_drop(
        &["--device", "scsi", "--num-queues", "128", "--threads", "16"],
        &opts,
        vhost_blk::scsi::personality::FIRST_REQUEST_QUEUE,
        true,
    );
}

/// Relay rule 4: with inflight tracking, a call eventfd the frontend installs after the rings
/// run (as QEMU's vhost-user-scsi does with its guest notifiers, after enabling the rings) is
/// signalled once the backend has it: an interrupt sent before went to a notifier QEMU
/// discards. Without inflight tracking it is not signalled before there is I/O.
#[test]
fn a_call_eventfd_installed_on_running_rings_is_signalled_once() {
    use vhost::VhostBackend;
    use vmm_sys_util::eventfd::{EventFd, EFD_NONBLOCK};
    // Rings 0 and 1 on vhost-user-backend's threads; 64 and 65 on ours (device::workers).
    for (n, rings) in [(2u16, [0, 1]), (66, [64, 65])] {
        for inflight in [true, false] {
            let n_s = n.to_string();
            let backend = Backend::start(&["--mem", "16M", "--num-queues", &n_s]);
            let opts = ConnectOptions {
                num_queues: n,
                inflight,
                ..Default::default()
            };
            let mut conn = Connection::connect(&backend.socket, &opts).unwrap();
            // The recovery's owed interrupt went to the first call eventfd: let it pass (1 s:
            // 200 ms was once too short on a loaded 2-core host, 2026-12-06).
            std::thread::sleep(Duration::from_millis(1000));
            for i in rings {
                let call = EventFd::new(EFD_NONBLOCK).unwrap();
                conn.frontend().set_vring_call(i, &call).unwrap();
                let t = Instant::now();
                let mut n = 0;
                while n == 0 && t.elapsed() < Duration::from_millis(500) {
                    n = call.read().unwrap_or(0);
                    std::thread::sleep(Duration::from_millis(5));
                }
                assert_eq!(n, u64::from(inflight), "queue {i}, inflight {inflight}");
            }
        }
    }
}
