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

/// An hdrhistogram (percentiles to 3 significant digits) plus the exact count, sum, min and max,
/// so that mean, min and max are reported to the nanosecond.
#[derive(Debug, Clone)]
pub struct Hist {
    hdr: Histogram<u64>,
    sum: u128,
    min: u64,
    max: u64,
}

impl Hist {
    /// A histogram of nanosecond latencies (up to 60 s).
    pub fn latency() -> Self {
        Self::new(HIST_MAX_NS)
    }

    /// A histogram of counts (up to 2^20).
    pub fn counts() -> Self {
        Self::new(HIST_MAX_BATCH)
    }

    fn new(max: u64) -> Self {
        Hist {
            hdr: Histogram::new_with_bounds(1, max, 3).expect("constant bounds are valid"),
            sum: 0,
            min: u64::MAX,
            max: 0,
        }
    }

    /// Records `v` (values above the histogram's range count at its top for percentiles).
    pub fn record(&mut self, v: u64) {
        self.hdr.saturating_record(v);
        self.sum += u128::from(v);
        self.min = self.min.min(v);
        self.max = self.max.max(v);
    }

    pub fn count(&self) -> u64 {
        self.hdr.len()
    }
    pub fn min(&self) -> Option<u64> {
        (self.count() > 0).then_some(self.min)
    }
    pub fn max(&self) -> Option<u64> {
        (self.count() > 0).then_some(self.max)
    }
    pub fn mean(&self) -> Option<f64> {
        (self.count() > 0).then(|| self.sum as f64 / self.count() as f64)
    }
    /// The value at quantile `q` (hdrhistogram precision, clamped to the exact min and max).
    pub fn quantile(&self, q: f64) -> Option<u64> {
        (self.count() > 0).then(|| self.hdr.value_at_quantile(q).clamp(self.min, self.max))
    }
    pub fn histogram(&self) -> &Histogram<u64> {
        &self.hdr
    }

    /// Adds `other`'s values (histograms made by the same constructor).
    pub fn add(&mut self, other: &Hist) {
        // Same bounds on both sides, so the addition cannot fail.
        let _ = self.hdr.add(&other.hdr);
        self.sum += other.sum;
        self.min = self.min.min(other.min);
        self.max = self.max.max(other.max);
    }
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
    completions_per_irq: Hist,
    service: Hist,
    irq_delay: Hist,
    irq_error: Hist,
}

impl QueueStats {
    /// Allocates the histograms (~0.75 MiB per queue); nothing allocates afterwards.
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
            completions_per_irq: Hist::counts(),
            service: Hist::latency(),
            irq_delay: Hist::latency(),
            irq_error: Hist::latency(),
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
        self.service.record(service_ns);
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
        self.completions_per_irq.record(published.len() as u64);
        for &t in published {
            self.irq_delay.record(now.saturating_sub(t));
        }
        match error_ns {
            e if e < 0 => self.irq_early += 1,
            0 => self.irq_on_time += 1,
            _ => self.irq_late += 1,
        }
        self.irq_error
            .record(u64::try_from(error_ns.unsigned_abs()).unwrap_or(u64::MAX));
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
    pub fn irq_delay(&self) -> &Hist {
        &self.irq_delay
    }
    pub fn irq_error(&self) -> &Hist {
        &self.irq_error
    }
    pub fn service(&self) -> &Hist {
        &self.service
    }
    pub fn completions_per_irq(&self) -> &Hist {
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
        self.completions_per_irq.add(&other.completions_per_irq);
        self.service.add(&other.service);
        self.irq_delay.add(&other.irq_delay);
        self.irq_error.add(&other.irq_error);
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
    /// All zero for an empty histogram.
    pub fn of(h: &Hist) -> Self {
        let q = |q: f64| us(h.quantile(q).unwrap_or(0));
        LatencySummary {
            count: h.count(),
            mean: h.mean().map_or(0.0, |m| m.round() / 1000.0),
            min: us(h.min().unwrap_or(0)),
            p50: q(0.5),
            p90: q(0.9),
            p99: q(0.99),
            p999: q(0.999),
            max: us(h.max().unwrap_or(0)),
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
    pub fn of(h: &Hist) -> Self {
        CountSummary {
            count: h.count(),
            mean: h.mean().unwrap_or(0.0),
            p50: h.quantile(0.5).unwrap_or(0),
            p99: h.quantile(0.99).unwrap_or(0),
            max: h.max().unwrap_or(0),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_requests_bytes_and_in_flight_high_water() {
        let mut q = QueueStats::new(2);
        q.on_request(RequestKind::Read, 4096);
        q.on_request(RequestKind::Write, 512);
        q.on_request(RequestKind::Flush, 0);
        q.on_publish(1_000);
        q.on_request(RequestKind::Read, 4096);
        q.on_publish(2_000);
        q.on_publish(3_000);
        q.on_discard();
        let s = q.snapshot();
        assert_eq!(
            (s.requests["read"], s.requests["write"], s.requests["flush"]),
            (2, 1, 1)
        );
        assert_eq!((s.bytes_read, s.bytes_written), (8192, 512));
        assert_eq!((s.in_flight, s.in_flight_max), (0, 3));
        assert_eq!((s.completions, s.discarded), (3, 1));
        assert_eq!(s.service_us.count, 3);
        assert_eq!(s.service_us.mean, 2.0);
        assert_eq!(s.service_us.max, 3.0);
        // More completions than requests never wraps the in-flight count.
        q.on_publish(1);
        assert_eq!(q.in_flight(), 0);
    }

    #[test]
    fn interrupts_record_every_completion_delay_and_the_signed_error() {
        let mut q = QueueStats::new(0);
        q.on_interrupt(&[100, 150, 190], 200, 0);
        q.on_interrupt(&[1_000], 1_500, 30);
        q.on_interrupt(&[2_000], 2_010, -40);
        assert_eq!(q.interrupts(), 3);
        assert_eq!(q.irq_timing(), (1, 1, 1));
        let s = q.snapshot();
        assert_eq!(s.completions_per_irq.max, 3);
        assert_eq!(s.completions_per_irq.count, 3);
        assert_eq!(s.irq_delay_us.count, 5);
        assert_eq!((s.irq_delay_us.min, s.irq_delay_us.max), (0.01, 0.5));
        assert_eq!(s.irq_error_us.max, 0.04);
    }

    #[test]
    fn device_totals_merge_queues_and_serialize_in_microseconds() {
        let mut a = QueueStats::new(0);
        let mut b = QueueStats::new(1);
        a.on_request(RequestKind::Read, 4096);
        a.on_publish(50_000);
        a.on_interrupt(&[0], 10_000, 0);
        b.on_request(RequestKind::ScsiCmd, 0);
        b.on_publish(150_000);
        b.on_interrupt(&[0], 30_000, 2_000);
        let dev = DeviceStats::collect(Some("msix=10us".into()), [&a, &b]);
        assert_eq!(dev.queues.len(), 2);
        assert_eq!(dev.total.queue, None);
        assert_eq!(
            dev.total.requests["read"] + dev.total.requests["scsi_cmd"],
            2
        );
        assert_eq!(dev.total.interrupts, 2);
        assert_eq!(dev.total.service_us.mean, 100.0);
        let json: serde_json::Value = serde_json::from_str(&dev.to_json()).unwrap();
        assert_eq!(json["queues"][1]["queue"], 1);
        assert_eq!(json["total"]["irq_delay_us"]["max"], 30.0);
        assert_eq!(json["total"]["irq_late"], 1);
        assert_eq!(json["model"], "msix=10us");
        let line = dev.summary();
        assert!(!line.contains('\n'));
        assert!(
            line.contains("read:1,scsi_cmd:1") && line.contains("irqs=2"),
            "{line}"
        );
    }

    #[test]
    fn export_is_atomic_and_reports_errors() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("stats.json");
        let exporter = StatsExporter::new(&path);
        let q = QueueStats::new(0);
        for _ in 0..2 {
            exporter.export(&DeviceStats::collect(None, [&q])).unwrap();
        }
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(serde_json::from_str::<serde_json::Value>(&text).is_ok());
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(names.len(), 1, "temporary file left behind");

        let bad = StatsExporter::new(dir.path().join("missing/stats.json"));
        let err = bad.export(&DeviceStats::collect(None, [&q])).unwrap_err();
        assert!(err.to_string().contains("missing/stats.json"), "{err}");
        assert!(!dir.path().join("missing").exists());
    }
}
