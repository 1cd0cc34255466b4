//! The completion engine through the real vhost-user path: a configured MSI-X latency delays
//! the interrupt (never early, within generous bounds on a noisy host) and shows in the stats.

mod common;

use std::time::{Duration, Instant};

use common::Backend;
use vhost_blk_frontend::{BlkRequest, ConnectOptions, Connection};

#[test]
fn msix_latency_delays_the_interrupt_and_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let stats_path = dir.path().join("stats.json");
    let sp = stats_path.to_str().unwrap().to_string();
    let mut backend = Backend::start_in(
        dir,
        &[
            "--null",
            "1G",
            "--num-queues",
            "2",
            "--msix-latency",
            "2ms",
            "--stats-file",
            &sp,
        ],
    );
    let opts = ConnectOptions {
        num_queues: 2,
        ..Default::default()
    };
    let mut conn = Connection::connect(&backend.socket, &opts).unwrap();
    let mut q = conn.take_queue(1).unwrap();
    let mut req = BlkRequest::new(&q.ram.clone(), 4096).unwrap();
    let mut delays = Vec::new();
    for i in 0..40 {
        let t = Instant::now();
        q.submit(&req.read(i * 8, 4096).unwrap().bufs()).unwrap();
        // Wait for the interrupt itself, not for the used entry.
        let mut got = 0;
        while got == 0 {
            got = q.wait_call(Duration::from_secs(5)).unwrap();
            assert!(t.elapsed() < Duration::from_secs(5), "no interrupt");
        }
        delays.push(t.elapsed());
        let used = q.poll().unwrap();
        assert_eq!(used.len(), 1);
        assert_eq!(req.result(used[0].len).unwrap().status, 0);
    }
    delays.sort();
    let median = delays[delays.len() / 2];
    assert!(
        delays[0] >= Duration::from_millis(2),
        "an interrupt came early: {:?}",
        delays[0]
    );
    assert!(median < Duration::from_millis(60), "median {median:?}");
    drop(conn);
    let st = backend.signal_and_wait(libc::SIGTERM);
    assert!(st.success());
    let v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&stats_path).unwrap()).unwrap();
    let q1 = &v["queues"][1];
    assert_eq!(q1["requests"]["read"], 40, "{q1}");
    assert!(q1["interrupts"].as_u64().unwrap() >= 40);
    assert!(
        q1["irq_delay_us"]["p50"].as_f64().unwrap() >= 2000.0,
        "{}",
        q1["irq_delay_us"]
    );
    assert_eq!(v["queues"][0]["requests"]["read"], 0);
}
