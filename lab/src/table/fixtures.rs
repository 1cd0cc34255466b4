//! Test fixtures shared by the tables' tests: bench reports and files in a run's directory.

use std::path::Path;

use vhost_blk_bench::args::{Client, Device};
use vhost_blk_bench::report::{QueueReport, Report};
use vhost_blk_stats::LatencySummary;

pub(crate) fn lat(p50: f64, p99: f64) -> LatencySummary {
    LatencySummary {
        count: 1,
        mean: p50,
        min: p50,
        p50,
        p90: p99,
        p99,
        p999: p99,
        max: p99,
    }
}

/// A bench report: total IOPS, latency p50/p99, irq delay p50/p99, ops per CPU-second.
pub(crate) fn report(
    iops: f64,
    latency: (f64, f64),
    irq: Option<(f64, f64)>,
    eff: Option<f64>,
) -> Report {
    let total = QueueReport {
        queue: None,
        ops: 1000,
        errors: 0,
        iops,
        mib_per_s: 1.0,
        interrupts: 1000,
        latency_us: lat(latency.0, latency.1),
        irq_delay_us: irq.map(|(a, b)| lat(a, b)),
        completions_per_irq: None,
    };
    Report {
        socket: "/s".into(),
        client: Client::Bench,
        device: Device::Blk,
        rw: "randread".into(),
        bs: 4096,
        queues: 1,
        qd: 1,
        threads: 1,
        seconds: 2.0,
        measure_irq: irq.is_some(),
        backend_cpu_seconds: eff.map(|_| 1.0),
        ops_per_backend_cpu_second: eff,
        per_queue: Vec::new(),
        total,
    }
}

pub(crate) fn write(dir: &Path, name: &str, text: &str) {
    std::fs::write(dir.join(name), text).unwrap();
}

pub(crate) fn write_report(dir: &Path, name: &str, r: &Report) {
    write(dir, name, &serde_json::to_string_pretty(r).unwrap());
}

/// A backend stats file `name` in `dir` whose queues completed `per_queue` requests each; its
/// total says 1, which no table reads (they sum the queues).
pub(crate) fn stats_file(dir: &Path, name: &str, per_queue: &[u64]) {
    let queues: Vec<vhost_blk_stats::QueueStats> = (0..per_queue.len())
        .map(|i| vhost_blk_stats::QueueStats::new(i as u16, &["read"]))
        .collect();
    let mut s = vhost_blk_stats::DeviceStats::collect(None, &queues);
    for (q, &n) in s.queues.iter_mut().zip(per_queue) {
        q.completions = n;
    }
    s.total.completions = 1;
    write(dir, name, &s.to_json().unwrap());
}
