//! fio 3.33 `--output-format=json`: aggregate the jobs into one summary per direction.
//!
//! Sums (IOPS, bandwidth, bytes, I/O counts) add up across jobs; means are weighted by each
//! job's I/O count. fio's JSON has no histogram bins, so percentiles of several jobs cannot be
//! merged exactly: with one job (or `group_reporting`) they are fio's own; with several they are
//! the I/O-weighted mean of the jobs' percentiles and `percentiles_merged` says so.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::MetricsError;

/// One direction (read or write) summed over all jobs.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FioDirection {
    pub iops: f64,
    /// KiB/s, as fio's `bw`.
    pub bw_kib_s: f64,
    pub io_bytes: u64,
    pub total_ios: u64,
    /// Longest job runtime, ms.
    pub runtime_ms: u64,
    pub clat_mean_us: f64,
    pub lat_mean_us: f64,
    /// Completion-latency percentiles in microseconds, keyed `p50`, `p99`, `p99.9` ...
    pub clat_percentiles_us: BTreeMap<String, f64>,
    /// True when the percentiles are a weighted mean over several jobs.
    pub percentiles_merged: bool,
}

/// A whole fio run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FioSummary {
    pub fio_version: String,
    pub jobs: usize,
    /// Jobs whose `error` field was non-zero, as `jobname: errno`.
    pub job_errors: Vec<String>,
    pub read: Option<FioDirection>,
    pub write: Option<FioDirection>,
}

impl FioSummary {
    /// Read + write I/Os.
    pub fn total_ios(&self) -> u64 {
        self.read.as_ref().map_or(0, |d| d.total_ios)
            + self.write.as_ref().map_or(0, |d| d.total_ios)
    }

    /// Read + write IOPS.
    pub fn iops(&self) -> f64 {
        self.read.as_ref().map_or(0.0, |d| d.iops) + self.write.as_ref().map_or(0.0, |d| d.iops)
    }

    /// The direction that carried I/O when only one did.
    pub fn single_direction(&self) -> Option<&FioDirection> {
        match (&self.read, &self.write) {
            (Some(r), None) => Some(r),
            (None, Some(w)) => Some(w),
            _ => None,
        }
    }
}

/// Parses fio's JSON output. Text before the JSON object (fio prints warnings there) is skipped.
pub fn parse_fio(data: &[u8]) -> Result<FioSummary, MetricsError> {
    let text = String::from_utf8_lossy(data);
    let start = json_start(&text).ok_or_else(|| MetricsError::Json("no JSON object".into()))?;
    let v: Value =
        serde_json::from_str(&text[start..]).map_err(|e| MetricsError::Json(e.to_string()))?;
    let jobs = v
        .get("jobs")
        .and_then(Value::as_array)
        .ok_or_else(|| MetricsError::Structure("no `jobs` array".into()))?;
    if jobs.is_empty() {
        return Err(MetricsError::Structure("`jobs` is empty".into()));
    }
    let mut job_errors = Vec::new();
    for j in jobs {
        let err = j.get("error").and_then(Value::as_i64).unwrap_or(0);
        if err != 0 {
            let name = j.get("jobname").and_then(Value::as_str).unwrap_or("?");
            job_errors.push(format!("{name}: {err}"));
        }
    }
    Ok(FioSummary {
        fio_version: v
            .get("fio version")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
        jobs: jobs.len(),
        job_errors,
        read: aggregate(jobs, "read")?,
        write: aggregate(jobs, "write")?,
    })
}

/// The first `{` that starts a line (fio's JSON begins at a line start).
fn json_start(text: &str) -> Option<usize> {
    if text.starts_with('{') {
        return Some(0);
    }
    text.find("\n{").map(|p| p + 1)
}

fn num(v: &Value, key: &str) -> f64 {
    v.get(key).and_then(Value::as_f64).unwrap_or(0.0)
}

fn uint(v: &Value, key: &str) -> u64 {
    v.get(key).and_then(Value::as_u64).unwrap_or(0)
}

/// `"99.900000"` -> `"p99.9"`.
fn pct_key(k: &str) -> Option<String> {
    let p: f64 = k.parse().ok()?;
    if !(0.0..=100.0).contains(&p) {
        return None;
    }
    Some(format!("p{}", (p * 10_000.0).round() / 10_000.0))
}

fn aggregate(jobs: &[Value], dir: &str) -> Result<Option<FioDirection>, MetricsError> {
    let mut out = FioDirection::default();
    let mut clat_w = 0.0;
    let mut lat_w = 0.0;
    let mut pct_sum: BTreeMap<String, f64> = BTreeMap::new();
    let mut contributing = 0usize;
    for j in jobs {
        let Some(d) = j.get(dir) else { continue };
        if !d.is_object() {
            return Err(MetricsError::Structure(format!("`{dir}` is not an object")));
        }
        let ios = uint(d, "total_ios");
        if ios == 0 {
            continue;
        }
        contributing += 1;
        out.iops += num(d, "iops");
        out.bw_kib_s += num(d, "bw");
        out.io_bytes += uint(d, "io_bytes");
        out.total_ios += ios;
        out.runtime_ms = out.runtime_ms.max(uint(d, "runtime"));
        let w = ios as f64;
        if let Some(c) = d.get("clat_ns") {
            clat_w += num(c, "mean") / 1000.0 * w;
            if let Some(p) = c.get("percentile").and_then(Value::as_object) {
                for (k, val) in p {
                    if let (Some(key), Some(ns)) = (pct_key(k), val.as_f64()) {
                        *pct_sum.entry(key).or_default() += ns / 1000.0 * w;
                    }
                }
            }
        }
        if let Some(l) = d.get("lat_ns") {
            lat_w += num(l, "mean") / 1000.0 * w;
        }
    }
    if out.total_ios == 0 {
        return Ok(None);
    }
    let total = out.total_ios as f64;
    out.clat_mean_us = clat_w / total;
    out.lat_mean_us = lat_w / total;
    out.clat_percentiles_us = pct_sum.into_iter().map(|(k, s)| (k, s / total)).collect();
    out.percentiles_merged = contributing > 1;
    Ok(Some(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> Vec<u8> {
        let p = format!(
            "{}/../guest-tests/tests/fixtures/fio/{name}",
            env!("CARGO_MANIFEST_DIR")
        );
        std::fs::read(&p).unwrap_or_else(|e| panic!("{p}: {e}"))
    }

    #[test]
    fn percentile_keys_are_normalised() {
        assert_eq!(pct_key("99.000000").as_deref(), Some("p99"));
        assert_eq!(pct_key("99.900000").as_deref(), Some("p99.9"));
        assert_eq!(pct_key("0.010000").as_deref(), Some("p0.01"));
        assert_eq!(pct_key("x"), None);
        assert_eq!(pct_key("120"), None);
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        assert!(matches!(parse_fio(b""), Err(MetricsError::Json(_))));
        assert!(matches!(
            parse_fio(b"{\"jobs\": 3}"),
            Err(MetricsError::Structure(_))
        ));
        assert!(matches!(
            parse_fio(b"{\"jobs\": []}"),
            Err(MetricsError::Structure(_))
        ));
        assert!(matches!(
            parse_fio(b"{\"jobs\": [{\"read\": 5}]}"),
            Err(MetricsError::Structure(_))
        ));
        assert!(parse_fio(&[0xff, 0xfe, b'{', 0]).is_err());
        // A truncated real output.
        let full = fixture("randread.json");
        assert!(parse_fio(&full[..full.len() / 2]).is_err());
    }

    #[test]
    fn randread_single_job() {
        let s = parse_fio(&fixture("randread.json")).unwrap();
        assert_eq!(s.fio_version, "fio-3.33");
        assert_eq!(s.jobs, 1);
        assert!(s.write.is_none());
        let r = s.read.as_ref().unwrap();
        assert_eq!(r.total_ios, 2048, "--number_ios caps the job at 2048 I/Os");
        assert_eq!(r.io_bytes, 2048 * 4096);
        assert!(!r.percentiles_merged);
        assert!(r.iops > 0.0 && r.bw_kib_s > 0.0);
        // bw (KiB/s) and iops describe the same 4 KiB transfers.
        assert!((r.bw_kib_s / 4.0 / r.iops - 1.0).abs() < 0.02, "{r:?}");
        let p50 = r.clat_percentiles_us["p50"];
        let p99 = r.clat_percentiles_us["p99"];
        assert!(p50 > 0.0 && p50 <= p99 && p99 <= r.clat_percentiles_us["p99.9"]);
        assert!(r.lat_mean_us >= r.clat_mean_us);
    }

    #[test]
    fn leading_warning_text_is_skipped() {
        let mut data = b"fio: some warning\nnote: more\n".to_vec();
        data.extend(fixture("randread.json"));
        assert_eq!(parse_fio(&data).unwrap().read.unwrap().total_ios, 2048);
    }

    #[test]
    fn mixed_read_write() {
        let s = parse_fio(&fixture("randrw.json")).unwrap();
        let (r, w) = (s.read.as_ref().unwrap(), s.write.as_ref().unwrap());
        assert!(r.total_ios > 0 && w.total_ios > 0);
        assert_eq!(s.total_ios(), r.total_ios + w.total_ios);
        assert!(s.single_direction().is_none());
        assert!((s.iops() - r.iops - w.iops).abs() < 1e-9);
    }

    #[test]
    fn sequential_write() {
        let s = parse_fio(&fixture("seqwrite.json")).unwrap();
        assert!(s.read.is_none());
        let w = s.single_direction().unwrap();
        assert_eq!(w.io_bytes, 4 * 1024 * 1024);
        assert_eq!(w.total_ios, 4 * 1024 * 1024 / (128 * 1024));
    }

    #[test]
    fn several_jobs_are_summed() {
        let s = parse_fio(&fixture("multijob.json")).unwrap();
        assert_eq!(s.jobs, 3);
        let r = s.read.as_ref().unwrap();
        assert_eq!(r.total_ios, 3 * 512);
        assert!(r.percentiles_merged);
        // Sum of the per-job IOPS read straight from the JSON.
        let v: Value = serde_json::from_slice(&fixture("multijob.json")).unwrap();
        let sum: f64 = v["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|j| j["read"]["iops"].as_f64().unwrap())
            .sum();
        assert!((r.iops - sum).abs() < 1e-6);
        let min_p50 = v["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|j| {
                j["read"]["clat_ns"]["percentile"]["50.000000"]
                    .as_f64()
                    .unwrap()
                    / 1000.0
            })
            .fold(f64::INFINITY, f64::min);
        assert!(r.clat_percentiles_us["p50"] >= min_p50 - 1e-9);
    }

    #[test]
    fn group_reporting_gives_one_job() {
        let s = parse_fio(&fixture("grouped.json")).unwrap();
        assert_eq!(s.jobs, 1);
        let r = s.read.unwrap();
        assert_eq!(r.total_ios, 4 * 256);
        assert!(!r.percentiles_merged);
    }
}
