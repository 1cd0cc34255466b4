//! What the bench reports: per-queue and total results, as JSON and as text lines.
//!
//! 1. The `--json` format is declared here once: [`Report`] writes it and `table latency` /
//!    `table profile` read it back through the same types.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use vhost_blk_stats::{CountSummary, LatencySummary};

use crate::args::{Client, Device};

/// One queue's results, or the total's.
#[derive(Serialize, Deserialize)]
pub struct QueueReport {
    pub queue: Option<u16>,
    pub ops: u64,
    pub errors: u64,
    pub iops: f64,
    pub mib_per_s: f64,
    pub interrupts: u64,
    pub latency_us: LatencySummary,
    pub irq_delay_us: Option<LatencySummary>,
    pub completions_per_irq: Option<CountSummary>,
}

/// The whole run: what was asked, the backend's CPU time, per queue and in total.
#[derive(Serialize, Deserialize)]
pub struct Report {
    pub socket: PathBuf,
    pub client: Client,
    pub device: Device,
    pub rw: String,
    pub bs: u32,
    pub queues: u16,
    pub qd: u16,
    pub threads: u16,
    pub seconds: f64,
    pub measure_irq: bool,
    pub backend_cpu_seconds: Option<f64>,
    pub ops_per_backend_cpu_second: Option<f64>,
    pub per_queue: Vec<QueueReport>,
    pub total: QueueReport,
}

/// One queue (or the total) as the text line the bench prints.
pub fn line(r: &QueueReport) -> String {
    let name = r.queue.map_or("total".to_string(), |q| format!("q{q}"));
    let l = &r.latency_us;
    let mut s = format!(
        "{name:>5}: {:>9.0} IOPS {:>8.1} MiB/s  lat us p50 {:.1} p90 {:.1} p99 {:.1} p99.9 {:.1} max {:.1}  irqs {}",
        r.iops, r.mib_per_s, l.p50, l.p90, l.p99, l.p999, l.max, r.interrupts
    );
    if let Some(d) = &r.irq_delay_us {
        s += &format!(
            "  irq-delay us p50 {:.1} p90 {:.1} p99 {:.1} max {:.1}",
            d.p50, d.p90, d.p99, d.max
        );
    }
    if r.errors > 0 {
        s += &format!("  ERRORS {}", r.errors);
    }
    s
}
