//! Snapshots of the statistics: per-queue and device totals, serialized as JSON (written
//! atomically by [`StatsExporter`]) and as a one-line log summary.
//!
//! 1. The JSON of `--stats-file` is declared here once: its readers (vhost-blk-bench's
//!    `table latency`) deserialize these same types.

use std::borrow::Cow;
use std::fmt::Write as _;
use std::io::{self, Write as _};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use thiserror::Error;

use super::{Hist, QueueStats};

fn us(ns: u64) -> f64 {
    ns as f64 / 1000.0
}

/// Percentiles of a latency histogram, in microseconds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QueueSnapshot {
    pub queue: Option<u16>,
    /// Requests per kind. The device's names are static; a file read back owns its keys.
    pub requests: std::collections::BTreeMap<Cow<'static, str>, u64>,
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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeviceStats {
    /// The completion model in force (its one-line form), if the caller gives it.
    pub model: Option<String>,
    pub queues: Vec<QueueSnapshot>,
    pub total: QueueSnapshot,
}

impl DeviceStats {
    /// Collects snapshots of `queues` and their merged totals. Each item is held only while its
    /// queue is read (a lock guard is released before the next queue's is taken), and nothing
    /// of a queue is copied but its summary: the only histograms allocated are the total's.
    pub fn collect<Q: std::ops::Deref<Target = QueueStats>>(
        model: Option<String>,
        queues: impl IntoIterator<Item = Q>,
    ) -> Self {
        let mut total: Option<QueueStats> = None;
        let mut snaps = Vec::new();
        for q in queues {
            let q = &*q;
            total
                .get_or_insert_with(|| QueueStats::new(0, q.names))
                .merge(q);
            snaps.push(q.snapshot());
        }
        let mut total = total.unwrap_or_else(|| QueueStats::new(0, &[])).snapshot();
        total.queue = None;
        DeviceStats {
            model,
            queues: snaps,
            total,
        }
    }

    /// The snapshot as pretty JSON.
    pub fn to_json(&self) -> Result<String, serde_json::Error> {
        serde_json::to_string_pretty(self)
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
    #[error("stats as JSON: {0}")]
    Json(#[from] serde_json::Error),
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
        write_atomic(&self.path, stats.to_json()?.as_bytes()).map_err(|source| StatsError::Write {
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
    use crate::tests::{NAMES, READ, SCSI_CMD};

    #[test]
    fn device_totals_merge_queues_and_serialize_in_microseconds() {
        let mut a = QueueStats::new(0, NAMES);
        let mut b = QueueStats::new(1, NAMES);
        a.on_request(READ, 4096, 0);
        a.on_publish(50_000);
        a.on_interrupt(&[0], 10_000, 0);
        b.on_request(SCSI_CMD, 0, 0);
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
        let json: serde_json::Value = serde_json::from_str(&dev.to_json().unwrap()).unwrap();
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
    fn exported_json_reads_back_into_the_same_types() {
        let mut a = QueueStats::new(0, NAMES);
        a.on_request(READ, 4096, 0);
        a.on_publish(50_000);
        a.on_interrupt(&[0], 12_000, 2_000);
        let dev = DeviceStats::collect(Some("msix=10us".into()), [&a]);
        let back: DeviceStats = serde_json::from_str(&dev.to_json().unwrap()).unwrap();
        assert_eq!(back, dev);
        assert_eq!(back.total.requests["read"], 1);
        assert_eq!(back.total.irq_late, 1);
        assert_eq!(back.total.irq_error_us.p50, 2.0);
        // A file with a field missing is an error, not a silent zero.
        let mut json: serde_json::Value = serde_json::from_str(&dev.to_json().unwrap()).unwrap();
        json["total"].as_object_mut().unwrap().remove("irq_late");
        assert!(serde_json::from_value::<DeviceStats>(json).is_err());
    }

    #[test]
    fn export_is_atomic_and_reports_errors() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("stats.json");
        let exporter = StatsExporter::new(&path);
        let q = QueueStats::new(0, NAMES);
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
