//! `results.json`: one per run directory, the only input of compare and report.
//! The schema is documented in docs/results-schema.md; bump [`SCHEMA_VERSION`] on any
//! incompatible change.

pub mod checks;
mod derive;
mod judge;
pub mod kills;
mod launched;
mod load;
mod provenance;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

pub use crate::metrics::{GuestInfo, StepResult};
use gt_launch::agent::Artifact;

pub use judge::{expectations, judge, kv};
pub use launched::Launched;
pub use load::{kernel_order, load_runs, sort_runs, LoadedRuns};
pub use provenance::{
    git_state, now_rfc3339, rfc3339_utc, sha256_file, BackendProvenance, HostInfo,
    KernelProvenance, Provenance, QemuProvenance, SchedulerInfo,
};

/// Version of the results.json layout.
pub const SCHEMA_VERSION: u32 = 1;
/// File name inside a run directory.
pub const RESULTS_FILE: &str = "results.json";

/// Errors reading or writing results.
#[derive(Debug, thiserror::Error)]
pub enum ResultsError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: not a results file: {source}")]
    Json {
        path: PathBuf,
        source: serde_json::Error,
    },
    #[error("{path}: schema_version {found}, this build reads {SCHEMA_VERSION}")]
    Version { path: PathBuf, found: u32 },
}

/// What run this was.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct RunInfo {
    pub suite: String,
    /// Kernel variant (the grouping key of compare).
    pub kernel: String,
    /// 0-based repeat index within (suite, kernel, variant).
    pub repeat: u32,
    /// Label of a sweep cell or other variant (`lat=200us`); None for plain runs.
    pub variant: Option<String>,
    /// Numeric position of a sweep cell, e.g. MSI-X completion latency.
    pub sweep: Option<SweepPoint>,
    /// The run directory (as given by the harness).
    pub run_dir: PathBuf,
    /// Paired design: the repeat whose kernels booted at the same time (compare pairs them).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pair: Option<u32>,
    /// The suite's primary and secondary metrics (exact compare names), kept so that a report
    /// rebuilt from results alone knows its verdict metrics.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub primary_metric: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secondary_metric: Option<String>,
    /// The suite's `[judgement]`, kept for the same reason.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub judgement: Option<gt_suite::JudgementSpec>,
    /// The suite's `[verdict]`, kept for the same reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verdict: Option<gt_suite::VerdictSpec>,
    /// The kernel's memory-model check, made on the host when the run was planned.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ordering: Option<OrderingRecord>,
}

use gt_ordering::OrderingRecord;

/// A point on a sweep axis.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SweepPoint {
    /// Axis name with unit, e.g. `msix_latency_us`.
    pub param: String,
    pub value: f64,
    /// The curve this point belongs to when a sweep has several (a grid's running vCPUs, e.g.
    /// `2 running vCPUs`); absent for a one-dimensional sweep.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub series: Option<String>,
}

/// Outcome of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum RunStatus {
    Ok,
    Failed { reason: String },
    TimedOut { after_s: f64 },
}

impl RunStatus {
    pub fn is_ok(&self) -> bool {
        matches!(self, RunStatus::Ok)
    }
}

/// Wall-clock and guest timings, seconds.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Timings {
    /// Guest uptime when /init started (from `meta`).
    pub boot_to_init_s: Option<f64>,
    /// Host wall time from QEMU start to the first artefact.
    pub wall_to_first_artifact_s: Option<f64>,
    /// Host wall time of the whole run.
    pub total_wall_s: Option<f64>,
}

/// One artefact as received.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ArtifactRecord {
    pub name: String,
    pub bytes: usize,
    pub complete: bool,
}

/// An artefact that could not be used.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ParseIssue {
    pub artifact: String,
    pub message: String,
}

/// The content of results.json.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunResult {
    pub schema_version: u32,
    pub info: RunInfo,
    pub provenance: Provenance,
    pub status: RunStatus,
    #[serde(default)]
    pub timings: Timings,
    #[serde(default)]
    pub steps: Vec<StepResult>,
    /// Flat metrics compare works on (`randread.irq_d_per_kio`, `rescan.ms_median`, ...).
    #[serde(default)]
    pub metrics: BTreeMap<String, f64>,
    #[serde(default)]
    pub guest: GuestInfo,
    #[serde(default)]
    pub artifacts: Vec<ArtifactRecord>,
    #[serde(default)]
    pub parse_errors: Vec<ParseIssue>,
    /// Data-quality warnings (ftrace drops, failed cross-checks, truncated artefacts).
    #[serde(default)]
    pub warnings: Vec<String>,
    /// The kernel's own error reports in this boot's log (the agent's `dmesg` and the serial
    /// console; `metrics::kernlog`): warnings, BUGs, panics, hung tasks, lockups, RCU stalls.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kernel_log: Vec<crate::metrics::kernlog::LogFinding>,
}

impl RunResult {
    /// Builds a result from the guest's artefacts. Never panics: an artefact that does not
    /// parse becomes a [`ParseIssue`]. The status is the guest's `status` artefact (`failed`
    /// when it is missing or says `fail`); the harness overrides it with [`Self::set_status`]
    /// for host-side failures and timeouts.
    pub fn from_artifacts(
        info: RunInfo,
        provenance: Provenance,
        artifacts: &[Artifact],
        timings: Timings,
    ) -> RunResult {
        derive::build(info, provenance, artifacts, timings)
    }

    /// A run that produced no artefacts (backend or QEMU failed to start, ...).
    pub fn failed(
        info: RunInfo,
        provenance: Provenance,
        reason: impl Into<String>,
        timings: Timings,
    ) -> RunResult {
        let mut r = derive::build(info, provenance, &[], timings);
        r.status = RunStatus::Failed {
            reason: reason.into(),
        };
        r
    }

    /// Overrides the status (host-side verdicts win over the guest's).
    pub fn set_status(&mut self, status: RunStatus) {
        self.status = status;
    }

    /// Writes `dir/results.json` (atomically: temp file + rename), creating `dir`.
    pub fn write(&self, dir: &Path) -> Result<PathBuf, ResultsError> {
        self.write_as(dir, false)
    }

    /// [`Self::write`], indented or compact (one line and a newline: how docs/results keeps
    /// them, experiments/collect-results.sh).
    pub fn write_as(&self, dir: &Path, compact: bool) -> Result<PathBuf, ResultsError> {
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| ResultsError::Io { path, source }
        };
        std::fs::create_dir_all(dir).map_err(io(dir))?;
        let path = dir.join(RESULTS_FILE);
        let tmp = dir.join(format!(".{RESULTS_FILE}.tmp"));
        let json = if compact {
            serde_json::to_vec(self).map(|mut v| {
                v.push(b'\n');
                v
            })
        } else {
            serde_json::to_vec_pretty(self)
        }
        .map_err(|source| ResultsError::Json {
            path: path.clone(),
            source,
        })?;
        std::fs::write(&tmp, json).map_err(io(&tmp))?;
        std::fs::rename(&tmp, &path).map_err(io(&path))?;
        Ok(path)
    }

    /// Reads a results.json, given the file or its run directory.
    pub fn read(path: &Path) -> Result<RunResult, ResultsError> {
        let path = if path.is_dir() {
            path.join(RESULTS_FILE)
        } else {
            path.to_path_buf()
        };
        let data = std::fs::read(&path).map_err(|source| ResultsError::Io {
            path: path.clone(),
            source,
        })?;
        #[derive(Deserialize)]
        struct Probe {
            schema_version: u32,
        }
        let probe: Probe = serde_json::from_slice(&data).map_err(|source| ResultsError::Json {
            path: path.clone(),
            source,
        })?;
        if probe.schema_version != SCHEMA_VERSION {
            return Err(ResultsError::Version {
                path,
                found: probe.schema_version,
            });
        }
        serde_json::from_slice(&data).map_err(|source| ResultsError::Json { path, source })
    }

    /// Every results.json under `root` (recursively, sorted by path); unreadable ones are
    /// returned as errors next to the good ones.
    pub fn find_all(root: &Path) -> Vec<Result<RunResult, ResultsError>> {
        Self::find_all_at(root)
            .into_iter()
            .map(|(_, r)| r)
            .collect()
    }

    /// [`Self::find_all`] with the file each result was read from.
    pub fn find_all_at(root: &Path) -> Vec<(PathBuf, Result<RunResult, ResultsError>)> {
        let mut files = Vec::new();
        collect(root, &mut files, 0);
        files.sort();
        files
            .into_iter()
            .map(|f| {
                let r = RunResult::read(&f);
                (f, r)
            })
            .collect()
    }

    /// Convenience: a metric by name.
    pub fn metric(&self, name: &str) -> Option<f64> {
        self.metrics.get(name).copied()
    }
}

fn collect(dir: &Path, out: &mut Vec<PathBuf>, depth: usize) {
    if depth > 8 {
        return;
    }
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let p = e.path();
        let Ok(ft) = e.file_type() else { continue };
        if ft.is_dir() {
            collect(&p, out, depth + 1);
        } else if ft.is_file() && p.file_name().is_some_and(|n| n == RESULTS_FILE) {
            out.push(p);
        }
    }
}

/// Saves each artefact as `dir/<name>` (names are sanitised: anything but `[A-Za-z0-9._-]`
/// becomes `_`, and a leading dot is replaced, so a guest cannot write outside `dir`).
pub fn save_artifacts(dir: &Path, artifacts: &[Artifact]) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    // The kill-test writer sends one `kw` record per acknowledged write: kept as one file, a
    // record per line, not thousands of files (results.bin keeps them framed).
    let kw: Vec<u8> = artifacts
        .iter()
        .filter(|a| a.name == "kw" && a.complete)
        .flat_map(|a| a.data.iter().copied().chain([b'\n']))
        .collect();
    if !kw.is_empty() {
        std::fs::write(dir.join("kw"), kw)?;
    }
    for (i, a) in artifacts.iter().enumerate() {
        if a.name == "kw" && a.complete {
            continue;
        }
        let mut name: String = a
            .name
            .chars()
            .take(120)
            .map(|c| {
                if c.is_ascii_alphanumeric() || "._-".contains(c) {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        if name.is_empty() || name.starts_with('.') {
            name.insert(0, '_');
        }
        let base = format!("{name}{}", if a.complete { "" } else { ".truncated" });
        let mut path = dir.join(&base);
        if path.exists() {
            path = dir.join(format!("{base}.{i}"));
        }
        std::fs::write(path, &a.data)?;
    }
    Ok(())
}

#[cfg(any(test, feature = "fixtures"))]
pub mod fixtures;
#[cfg(test)]
mod tests;
