//! Past vhost-user-backend's 64 vrings (device::workers): the real backend binary with 128
//! virtio-blk queues, 128 virtio-SCSI request queues (130 vrings) and vhost-user's most (256
//! vrings), driven by the in-process frontend on every queue in parallel, data checked, and the
//! backend's per-queue statistics showing each queue's requests. Worker groups (`--threads`)
//! that reach past vring 63 run on vhost-blk's own threads; one per queue (the default) splits
//! the device between the crate's threads (vrings 0-63) and ours.

mod common;

use std::time::Duration;

use common::{file_bytes, pattern, Backend};
use vhost_blk_frontend::{
    scsi_connect_options, BlkRequest, ConnectOptions, Connection, QueueHandle, ScsiRequest,
};

const T: Duration = Duration::from_secs(20);

/// One request on `q`, answered; its used length.
fn run(q: &mut QueueHandle, bufs: &[vhost_blk_frontend::Buf]) -> u32 {
    let head = q.submit(bufs).unwrap();
    let used = q.wait(T).unwrap();
    assert_eq!(used.len(), 1);
    assert_eq!(used[0].id, head);
    used[0].len
}

/// Per queue, (reads, writes) as the backend's statistics file counts them.
fn stats_per_queue(path: &std::path::Path) -> Vec<(u64, u64)> {
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    v["queues"]
        .as_array()
        .unwrap()
        .iter()
        .map(|q| {
            let r = &q["requests"];
            (r["read"].as_u64().unwrap(), r["write"].as_u64().unwrap())
        })
        .collect()
}

/// virtio-blk with `n` queues (and `extra` options): every queue writes a pattern into its own
/// 64 KiB and reads it back, all queues at once; the image and the statistics agree.
fn blk_all_queues(n: u16, extra: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("disk.img");
    let stats = dir.path().join("stats.json");
    let (img_s, stats_s) = (img.to_str().unwrap(), stats.to_str().unwrap());
    let n_s = n.to_string();
    let mut args = vec!["--image", img_s, "--size", "32M", "--num-queues", &n_s];
    args.extend_from_slice(&["--stats-file", stats_s]);
    args.extend_from_slice(extra);
    let mut backend = Backend::start_in(dir, &args);
    let opts = ConnectOptions {
        num_queues: n,
        inflight: true,
        mem_size: 128 << 20,
        queue_size: 64,
        ..Default::default()
    };
    let mut conn = Connection::connect(&backend.socket, &opts).unwrap();
    let cfg = conn.config(0, 60).unwrap();
    assert_eq!(u16::from_le_bytes(cfg[34..36].try_into().unwrap()), n);
    let handles: Vec<_> = (0..usize::from(n))
        .map(|i| {
            let mut q = conn.take_queue(i).unwrap();
            std::thread::spawn(move || {
                let mut req = BlkRequest::new(&q.ram.clone(), 16384).unwrap();
                for k in 0..4u64 {
                    let sector = i as u64 * 128 + k * 32;
                    let data = pattern(sector, i as u8, 16384);
                    let len = run(&mut q, &req.write(sector, &data).unwrap().bufs());
                    assert_eq!(req.result(len).unwrap().status, 0, "queue {i}");
                    let len = run(&mut q, &req.read(sector, 16384).unwrap().bufs());
                    assert_eq!(req.result(len).unwrap().status, 0, "queue {i}");
                    assert_eq!(req.data().unwrap(), data, "queue {i} sector {sector}");
                }
            })
        })
        .collect();
    for h in handles {
        h.join().expect("queue thread");
    }
    drop(conn);
    assert!(backend.signal_and_wait(libc::SIGTERM).success());
    for i in 0..u64::from(n) {
        let sector = i * 128 + 96;
        assert_eq!(
            file_bytes(&img, sector * 512, 16384),
            pattern(sector, i as u8, 16384),
            "queue {i}"
        );
    }
    let per_queue = stats_per_queue(&stats);
    assert_eq!(per_queue.len(), usize::from(n));
    for (i, &(r, w)) in per_queue.iter().enumerate() {
        assert_eq!((r, w), (4, 4), "queue {i}'s statistics");
    }
}

#[test]
fn blk_128_queues_one_thread_each() {
    blk_all_queues(128, &[]);
}

#[test]
fn blk_128_queues_on_8_threads() {
    // Round-robin groups of 16 queues, each reaching past vring 63: all on our threads.
    blk_all_queues(128, &["--threads", "8"]);
}

#[test]
fn blk_256_queues_the_protocol_limit() {
    blk_all_queues(256, &["--threads", "16"]);
}

#[test]
fn scsi_128_request_queues_control_and_event_beside_them() {
    let dir = tempfile::tempdir().unwrap();
    let stats = dir.path().join("stats.json");
    let stats_s = stats.to_str().unwrap();
    let args = [
        "--device",
        "scsi",
        "--null",
        "1G",
        "--num-queues",
        "128",
        "--stats-file",
        stats_s,
    ];
    let mut backend = Backend::start_in(dir, &args);
    let opts = ConnectOptions {
        inflight: true,
        mem_size: 128 << 20,
        queue_size: 64,
        ..scsi_connect_options(128)
    };
    let mut conn = Connection::connect(&backend.socket, &opts).unwrap();
    // num_queues (request queues) is the config space's first field.
    let cfg = conn.config(0, 4).unwrap();
    assert_eq!(u32::from_le_bytes(cfg[..4].try_into().unwrap()), 128);
    let first = vhost_blk::scsi::personality::FIRST_REQUEST_QUEUE;
    let handles: Vec<_> = (first..first + 128)
        .map(|i| {
            let mut q = conn.take_queue(i).unwrap();
            std::thread::spawn(move || {
                let mut req = ScsiRequest::new(&q.ram.clone(), 4096).unwrap();
                for k in 0..3u64 {
                    req.set_tag(k + 1);
                    let len = run(&mut q, &req.read16(i as u64 * 8, 8).unwrap().bufs());
                    assert!(req.result(len).unwrap().is_good(), "queue {i}");
                }
            })
        })
        .collect();
    for h in handles {
        h.join().expect("queue thread");
    }
    drop(conn);
    assert!(backend.signal_and_wait(libc::SIGTERM).success());
    let per_queue = stats_per_queue(&stats);
    assert_eq!(per_queue.len(), first + 128);
    for (i, &(r, _)) in per_queue.iter().enumerate().skip(first) {
        assert_eq!(r, 3, "request queue {i}'s statistics");
    }
}
