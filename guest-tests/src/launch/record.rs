//! What the launcher records about one run: provenance, timings, status and artefact index.
//! Serialised as `results.json` in the run directory (schema: docs/design/results-schema.md).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::accel::AccelChoice;
use super::qemu::Accel;
use crate::suite::Bios;

/// Version of the `results.json` layout written here.
pub const SCHEMA_VERSION: u32 = 1;

/// Where a run came from: enough to trust, compare and repeat it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Provenance {
    pub kernel_variant: String,
    pub kernel_release: String,
    pub bzimage_sha256: String,
    pub initramfs_sha256: String,
    /// sha256 of the exact initrd booted (base initramfs + job archive).
    pub initrd_sha256: String,
    pub suite: String,
    pub suite_sha256: String,
    pub variant: Option<String>,
    pub backend: String,
    pub backend_version: Option<String>,
    pub backend_argv: Option<Vec<String>>,
    pub qemu_version: String,
    pub qemu_argv: Vec<String>,
    pub accel: Accel,
    pub bios: Bios,
    pub git_rev: String,
    pub git_dirty: bool,
    pub host_cpu: String,
    pub host_cores: usize,
    pub host_release: String,
    pub load_before: [f64; 3],
    pub load_after: [f64; 3],
    pub seed: u64,
    pub started_unix: f64,
}

/// Wall-clock timings measured on the host, from QEMU's start.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Timings {
    /// The first artefact (`meta`) reached the results port.
    pub boot_to_first_artifact_s: Option<f64>,
    /// The `disk` artefact arrived: the device is prepared and the first step starts.
    pub boot_to_fio_ready_s: Option<f64>,
    /// QEMU start to QEMU end.
    pub qemu_s: Option<f64>,
    /// Whole run including backend start and teardown.
    pub total_s: f64,
    /// Guest uptime when /init started (from `meta`).
    pub guest_init_uptime_s: Option<f64>,
}

/// One artefact saved under `artifacts/`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArtifactInfo {
    pub name: String,
    pub bytes: usize,
    pub complete: bool,
    /// Path relative to the run directory.
    pub file: String,
}

/// What `rerun` needs to repeat the run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RerunInfo {
    pub kernel: String,
    pub suite: String,
    pub suites_dir: PathBuf,
    pub variant: Option<String>,
    pub seed: u64,
    pub accel: AccelChoice,
    pub bios: Bios,
    pub timeout_secs: u64,
    pub backend_bin: Option<PathBuf>,
    pub qemu_bin: PathBuf,
}

/// `ok`, or `failed` with a reason.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "lowercase")]
pub enum RunStatus {
    Ok,
    Failed { reason: String },
}

impl RunStatus {
    pub fn is_ok(&self) -> bool {
        matches!(self, RunStatus::Ok)
    }
}

/// The whole `results.json` written by the launcher.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    pub schema_version: u32,
    pub run_id: String,
    #[serde(flatten)]
    pub status: RunStatus,
    pub timings: Timings,
    pub provenance: Option<Provenance>,
    pub rerun: RerunInfo,
    pub artifacts: Vec<ArtifactInfo>,
}

/// Errors reading or writing results.json.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    #[error("{path}: {msg}")]
    Io { path: PathBuf, msg: String },
}

impl RunRecord {
    pub fn write(&self, run_dir: &Path) -> Result<PathBuf, RecordError> {
        let path = run_dir.join("results.json");
        let text = serde_json::to_string_pretty(self).map_err(|e| RecordError::Io {
            path: path.clone(),
            msg: e.to_string(),
        })?;
        std::fs::write(&path, text + "\n").map_err(|e| RecordError::Io {
            path: path.clone(),
            msg: e.to_string(),
        })?;
        Ok(path)
    }

    pub fn read(path: &Path) -> Result<RunRecord, RecordError> {
        let err = |msg: String| RecordError::Io {
            path: path.to_path_buf(),
            msg,
        };
        let text = std::fs::read_to_string(path).map_err(|e| err(e.to_string()))?;
        serde_json::from_str(&text).map_err(|e| err(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_through_json_with_flat_status() {
        let d = tempfile::tempdir().unwrap();
        let r = RunRecord {
            schema_version: SCHEMA_VERSION,
            run_id: "r1".into(),
            status: RunStatus::Failed {
                reason: "timeout after 5 s".into(),
            },
            timings: Timings {
                total_s: 5.5,
                ..Default::default()
            },
            provenance: None,
            rerun: RerunInfo {
                kernel: "debian-rt".into(),
                suite: "smoke".into(),
                suites_dir: "/s".into(),
                variant: None,
                seed: 3,
                accel: AccelChoice::Auto,
                bios: Bios::Qboot,
                timeout_secs: 5,
                backend_bin: None,
                qemu_bin: "qemu-system-x86_64".into(),
            },
            artifacts: vec![],
        };
        let p = r.write(d.path()).unwrap();
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
        assert_eq!(v["status"], "failed");
        assert_eq!(v["reason"], "timeout after 5 s");
        assert_eq!(RunRecord::read(&p).unwrap(), r);
    }
}
