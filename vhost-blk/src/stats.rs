//! Per-queue statistics: request counters, in-flight depth, interrupts and latency histograms,
//! exported as JSON (atomically written files) and as a one-line log summary.
//!
//! Ownership: one [`QueueStats`] per queue worker, never shared between queues (wrap each in its
//! own `Mutex` to export). The completion engine records publications and interrupts itself;
//! the worker records each request as it arrives ([`QueueStats::on_request`]).
//!
//! Histograms (hdrhistogram, 3 significant digits, values in ns up to 60 s):
//! - `service`: emulated service time, submit to publication as it happened;
//! - `irq_delay`: completion-to-interrupt delay of *every* completion (its publication to the
//!   signal that covered it);
//! - `irq_error`: per interrupt, |signal time - target time|, where the target is the interrupt's
//!   computed due time (oldest publication + drawn MSI-X latency, held by coalescing, rounded up to
//!   the aligned tick). The sign goes to the counters `irq_early` / `irq_late` / `irq_on_time`:
//!   the engine never signals early except when a queue is flushed, so "late" is the timing error of
//!   the host (timer wake-up and scheduling).
//! - `completions_per_irq`: how many completions each interrupt covered.
//!
//! JSON reports latencies in microseconds as floats with ns precision.

use std::fmt::Write as _;
use std::io::{self, Write as _};
use std::path::{Path, PathBuf};

use hdrhistogram::Histogram;
use serde::Serialize;
use thiserror::Error;

/// Upper bound of the latency histograms (values above are clamped).
const HIST_MAX_NS: u64 = 60_000_000_000;
/// Upper bound of the completions-per-interrupt histogram.
const HIST_MAX_BATCH: u64 = 1 << 20;

/// The request types counted per queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RequestKind {
    Read,
    Write,
    Flush,
    Discard,
    WriteZeroes,
    GetId,
    ScsiCmd,
    Tmf,
    Other,
    /// A request that could not be parsed.
    Error,
}

impl RequestKind {
    pub const ALL: [RequestKind; 10] = [
        RequestKind::Read,
        RequestKind::Write,
        RequestKind::Flush,
        RequestKind::Discard,
        RequestKind::WriteZeroes,
        RequestKind::GetId,
        RequestKind::ScsiCmd,
        RequestKind::Tmf,
        RequestKind::Other,
        RequestKind::Error,
    ];

    pub fn name(self) -> &'static str {
        match self {
            RequestKind::Read => "read",
            RequestKind::Write => "write",
            RequestKind::Flush => "flush",
            RequestKind::Discard => "discard",
            RequestKind::WriteZeroes => "write_zeroes",
            RequestKind::GetId => "get_id",
            RequestKind::ScsiCmd => "scsi_cmd",
            RequestKind::Tmf => "tmf",
            RequestKind::Other => "other",
            RequestKind::Error => "error",
        }
    }
}

fn latency_hist() -> Histogram<u64> {
    Histogram::new_with_bounds(1, HIST_MAX_NS, 3).expect("constant bounds are valid")
}

/// Counters and histograms of one queue.
#[derive(Debug, Clone)]
pub struct QueueStats {
    queue: u16,
    requests: [u64; RequestKind::ALL.len()],
    bytes_read: u64,
    bytes_written: u64,
    in_flight: u64,
    in_flight_max: u64,
    completions: u64,
    discarded: u64,
    interrupts: u64,
    irq_early: u64,
    irq_late: u64,
    irq_on_time: u64,
    completions_per_irq: Histogram<u64>,
    service: Histogram<u64>,
    irq_delay: Histogram<u64>,
    irq_error: Histogram<u64>,
}

impl QueueStats {
    /// Allocates the histograms (~1 MiB per queue); nothing allocates afterwards.
    pub fn new(queue: u16) -> Self {
        QueueStats {
            queue,
            requests: [0; RequestKind::ALL.len()],
            bytes_read: 0,
            bytes_written: 0,
            in_flight: 0,
            in_flight_max: 0,
            completions: 0,
            discarded: 0,
            interrupts: 0,
            irq_early: 0,
            irq_late: 0,
            irq_on_time: 0,
            completions_per_irq: Histogram::new_with_bounds(1, HIST_MAX_BATCH, 3)
                .expect("constant bounds are valid"),
            service: latency_hist(),
            irq_delay: latency_hist(),
            irq_error: latency_hist(),
        }
    }

    pub fn queue(&self) -> u16 {
        self.queue
    }

    /// A request arrived from the guest. `bytes` counts as read for `Read`, written for `Write`.
    /// Every request counted here must later complete through the engine (publish or discard).
    pub fn on_request(&mut self, kind: RequestKind, bytes: u64) {
        self.requests[kind as usize] += 1;
        match kind {
            RequestKind::Read => self.bytes_read += bytes,
            RequestKind::Write => self.bytes_written += bytes,
            _ => {}
        }
        self.in_flight += 1;
        self.in_flight_max = self.in_flight_max.max(self.in_flight);
    }

    /// Adds bytes moved by a request type other than plain read/write (e.g. a SCSI READ(10)).
    pub fn add_bytes(&mut self, read: u64, written: u64) {
        self.bytes_read += read;
        self.bytes_written += written;
    }

    /// A completion was published (engine).
    pub fn on_publish(&mut self, service_ns: u64) {
        self.in_flight = self.in_flight.saturating_sub(1);
        self.completions += 1;
        self.service.saturating_record(service_ns);
    }

    /// A pending request was dropped without completion (engine, device reset).
    pub fn on_discard(&mut self) {
        self.in_flight = self.in_flight.saturating_sub(1);
        self.discarded += 1;
    }

    /// An interrupt at `now` covered completions published at `published`; `error_ns` is the
    /// signal time minus the target time (engine).
    pub fn on_interrupt(&mut self, published: &[u64], now: u64, error_ns: i128) {
        self.interrupts += 1;
        self.completions_per_irq
            .saturating_record(published.len() as u64);
        for &t in published {
            self.irq_delay.saturating_record(now.saturating_sub(t));
        }
        match error_ns {
            e if e < 0 => self.irq_early += 1,
            0 => self.irq_on_time += 1,
            _ => self.irq_late += 1,
        }
        self.irq_error
            .saturating_record(u64::try_from(error_ns.unsigned_abs()).unwrap_or(u64::MAX));
    }

    pub fn requests(&self, kind: RequestKind) -> u64 {
        self.requests[kind as usize]
    }
    pub fn in_flight(&self) -> u64 {
        self.in_flight
    }
    pub fn interrupts(&self) -> u64 {
        self.interrupts
    }
    pub fn completions(&self) -> u64 {
        self.completions
    }
    pub fn irq_delay(&self) -> &Histogram<u64> {
        &self.irq_delay
    }
    pub fn irq_error(&self) -> &Histogram<u64> {
        &self.irq_error
    }
    pub fn service(&self) -> &Histogram<u64> {
        &self.service
    }
    pub fn completions_per_irq(&self) -> &Histogram<u64> {
        &self.completions_per_irq
    }
    /// (early, on time, late) interrupt counts.
    pub fn irq_timing(&self) -> (u64, u64, u64) {
        (self.irq_early, self.irq_on_time, self.irq_late)
    }

    /// Adds `other` into `self` (for device totals).
    fn merge(&mut self, other: &QueueStats) {
        for (a, b) in self.requests.iter_mut().zip(other.requests) {
            *a += b;
        }
        self.bytes_read += other.bytes_read;
        self.bytes_written += other.bytes_written;
        self.in_flight += other.in_flight;
        self.in_flight_max += other.in_flight_max;
        self.completions += other.completions;
        self.discarded += other.discarded;
        self.interrupts += other.interrupts;
        self.irq_early += other.irq_early;
        self.irq_late += other.irq_late;
        self.irq_on_time += other.irq_on_time;
        // Same bounds on both sides, so addition cannot fail.
        let _ = self.completions_per_irq.add(&other.completions_per_irq);
        let _ = self.service.add(&other.service);
        let _ = self.irq_delay.add(&other.irq_delay);
        let _ = self.irq_error.add(&other.irq_error);
    }

    /// A serializable snapshot.
    pub fn snapshot(&self) -> QueueSnapshot {
        QueueSnapshot {
            queue: Some(self.queue),
            requests: RequestKind::ALL
                .iter()
                .map(|&k| (k.name(), self.requests(k)))
                .collect(),
            bytes_read: self.bytes_read,
            bytes_written: self.bytes_written,
            in_flight: self.in_flight,
            in_flight_max: self.in_flight_max,
            completions: self.completions,
            discarded: self.discarded,
            interrupts: self.interrupts,
            irq_early: self.irq_early,
            irq_on_time: self.irq_on_time,
            irq_late: self.irq_late,
            completions_per_irq: CountSummary::of(&self.completions_per_irq),
            service_us: LatencySummary::of(&self.service),
            irq_delay_us: LatencySummary::of(&self.irq_delay),
            irq_error_us: LatencySummary::of(&self.irq_error),
        }
    }
}

fn us(ns: u64) -> f64 {
    ns as f64 / 1000.0
}

/// Percentiles of a latency histogram, in microseconds.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LatencySummary {
    pub count: u64,
    pub mean: f64,
    pub min: f64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub p999: f64,
    pub max: f64,
}

impl LatencySummary {
    pub fn of(h: &Histogram<u64>) -> Self {
        if h.is_empty() {
            return LatencySummary {
                count: 0,
                mean: 0.0,
                min: 0.0,
                p50: 0.0,
                p90: 0.0,
                p99: 0.0,
                p999: 0.0,
                max: 0.0,
            };
        }
        LatencySummary {
            count: h.len(),
            mean: h.mean().round() / 1000.0,
            min: us(h.min()),
            p50: us(h.value_at_quantile(0.5)),
            p90: us(h.value_at_quantile(0.9)),
            p99: us(h.value_at_quantile(0.99)),
            p999: us(h.value_at_quantile(0.999)),
            max: us(h.max()),
        }
    }
}

/// Percentiles of a count histogram (completions per interrupt).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CountSummary {
    pub count: u64,
    pub mean: f64,
    pub p50: u64,
    pub p99: u64,
    pub max: u64,
}

impl CountSummary {
    pub fn of(h: &Histogram<u64>) -> Self {
        let empty = h.is_empty();
        CountSummary {
            count: h.len(),
            mean: if empty { 0.0 } else { h.mean() },
            p50: if empty { 0 } else { h.value_at_quantile(0.5) },
            p99: if empty { 0 } else { h.value_at_quantile(0.99) },
            max: h.max(),
        }
    }
}

/// One queue (or the device total, `queue: null`) as exported.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct QueueSnapshot {
    pub queue: Option<u16>,
    pub requests: std::collections::BTreeMap<&'static str, u64>,
    pub bytes_read: u64,
    pub bytes_written: u64,
    pub in_flight: u64,
    /// Per queue: its high-water mark; in the totals: the sum of the queues' marks.
    pub in_flight_max: u64,
    pub completions: u64,
    pub discarded: u64,
    pub interrupts: u64,
    pub irq_early: u64,
    pub irq_on_time: u64,
    pub irq_late: u64,
    pub completions_per_irq: CountSummary,
    pub service_us: LatencySummary,
    pub irq_delay_us: LatencySummary,
    pub irq_error_us: LatencySummary,
}

/// The device's statistics: every queue and the totals.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DeviceStats {
    /// The completion model in force (its one-line form), if the caller gives it.
    pub model: Option<String>,
    pub queues: Vec<QueueSnapshot>,
    pub total: QueueSnapshot,
}

impl DeviceStats {
    /// Collects snapshots of `queues` and their merged totals.
    pub fn collect<'a>(
        model: Option<String>,
        queues: impl IntoIterator<Item = &'a QueueStats>,
    ) -> Self {
        let mut total = QueueStats::new(0);
        let mut snaps = Vec::new();
        for q in queues {
            total.merge(q);
            snaps.push(q.snapshot());
        }
        let mut total = total.snapshot();
        total.queue = None;
        DeviceStats {
            model,
            queues: snaps,
            total,
        }
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("plain data serializes")
    }

    /// One line for the log.
    pub fn summary(&self) -> String {
        let t = &self.total;
        let mut s = format!("stats: queues={} requests=", self.queues.len());
        let mut sep = "";
        for (name, n) in t.requests.iter().filter(|(_, &n)| n > 0) {
            let _ = write!(s, "{sep}{name}:{n}");
            sep = ",";
        }
        if sep.is_empty() {
            s.push('0');
        }
        let _ = write!(
            s,
            " read={}B written={}B irqs={} completions/irq={:.2} service p50/p99={:.1}/{:.1}us \
             irq-delay p50/p99={:.1}/{:.1}us irq-error p50/p99={:.1}/{:.1}us late={} early={}",
            t.bytes_read,
            t.bytes_written,
            t.interrupts,
            t.completions_per_irq.mean,
            t.service_us.p50,
            t.service_us.p99,
            t.irq_delay_us.p50,
            t.irq_delay_us.p99,
            t.irq_error_us.p50,
            t.irq_error_us.p99,
            t.irq_late,
            t.irq_early,
        );
        s
    }
}

/// Errors of the stats export.
#[derive(Debug, Error)]
pub enum StatsError {
    #[error("writing stats to {path}: {source}")]
    Write {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

/// Writes stats files atomically: a temporary file in the same directory, fsync, rename.
#[derive(Debug, Clone)]
pub struct StatsExporter {
    path: PathBuf,
}

impl StatsExporter {
    pub fn new(path: impl Into<PathBuf>) -> Self {
        StatsExporter { path: path.into() }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Replaces the file with `stats` as JSON; readers see the old or the new file, never a part.
    pub fn export(&self, stats: &DeviceStats) -> Result<(), StatsError> {
        write_atomic(&self.path, stats.to_json().as_bytes()).map_err(|source| StatsError::Write {
            path: self.path.clone(),
            source,
        })
    }
}

fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let name = path
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no file name"))?;
    let mut tmp_name = std::ffi::OsString::from(".");
    tmp_name.push(name);
    tmp_name.push(format!(".tmp.{}", std::process::id()));
    let tmp = path.with_file_name(tmp_name);
    let result = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.write_all(b"\n")?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}
