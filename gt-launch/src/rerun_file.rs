//! `rerun.json`: the harness options of a run that results.json does not carry, so that
//! `guest-tests rerun results.json` can repeat the run exactly.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::accel::AccelChoice;
use super::settings::HostSetup;

/// File name inside a run directory, next to results.json.
pub const RERUN_FILE: &str = "rerun.json";

/// What `rerun` needs besides results.json.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RerunInfo {
    pub kernel: String,
    /// An ad-hoc kernel's `--kernels` element (`LABEL=tree:...`), when `kernel` is its label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel_spec: Option<String>,
    pub suite: String,
    pub suites_dir: PathBuf,
    pub variant: Option<String>,
    pub repeat: u32,
    pub seed: u64,
    pub accel: AccelChoice,
    pub timeout_secs: u64,
    /// Its fields at this level of the JSON (`bios`, `backend_bin`, `qemu_bin`, `pin_vcpus`,
    /// `host_sched`), as before it was one struct.
    #[serde(flatten)]
    pub host: HostSetup,
    /// Appended to the suite's backend arguments (`run --backend-threads`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extra_backend_args: Vec<String>,
    /// `run --vcpu-placement split`: this guest's slot in its pair.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pin_slot: Option<u32>,
}

impl RerunInfo {
    pub fn write(&self, run_dir: &Path) -> std::io::Result<()> {
        let text = serde_json::to_string_pretty(self).map_err(std::io::Error::other)?;
        std::fs::write(run_dir.join(RERUN_FILE), text + "\n")
    }

    /// Reads the `rerun.json` next to `results` (a results.json path or its run directory).
    pub fn read_beside(results: &Path) -> Result<RerunInfo, String> {
        let dir = if results.is_dir() {
            results
        } else {
            results.parent().unwrap_or(Path::new("."))
        };
        let p = dir.join(RERUN_FILE);
        let text = std::fs::read_to_string(&p).map_err(|e| format!("{}: {e}", p.display()))?;
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", p.display()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gt_suite::Bios;

    #[test]
    fn round_trips_beside_results_json() {
        let d = tempfile::tempdir().unwrap();
        let r = RerunInfo {
            kernel: "rt".into(),
            kernel_spec: None,
            suite: "smoke".into(),
            suites_dir: "/s".into(),
            variant: Some("msix-20us".into()),
            repeat: 2,
            seed: 7,
            accel: AccelChoice::Auto,
            timeout_secs: 60,
            host: HostSetup {
                bios: Bios::Seabios,
                backend_bin: None,
                qemu_bin: "qemu-system-x86_64".into(),
                pin_vcpus: false,
                host_sched: Default::default(),
            },
            extra_backend_args: Vec::new(),
            pin_slot: None,
        };
        r.write(d.path()).unwrap();
        assert_eq!(
            RerunInfo::read_beside(&d.path().join("results.json")).unwrap(),
            r
        );
        assert_eq!(RerunInfo::read_beside(d.path()).unwrap(), r);
        std::fs::write(d.path().join(RERUN_FILE), "{\"kernel\": 1}").unwrap();
        assert!(RerunInfo::read_beside(d.path()).is_err());
    }

    /// A rerun.json as written before the host setup was one struct (every field at the top
    /// level, no `pin_vcpus` or `host_sched`) still reads, and an unknown field is still refused.
    #[test]
    fn reads_the_flat_schema_and_refuses_unknown_fields() {
        let flat = r#"{"kernel": "rt", "suite": "smoke", "suites_dir": "/s", "variant": null,
            "repeat": 0, "seed": 1, "accel": "tcg", "bios": "qboot", "timeout_secs": 600,
            "backend_bin": null, "qemu_bin": "/usr/bin/qemu-system-x86_64"}"#;
        let r: RerunInfo = serde_json::from_str(flat).unwrap();
        assert_eq!(r.host.bios, Bios::Qboot);
        assert_eq!(
            r.host.qemu_bin,
            PathBuf::from("/usr/bin/qemu-system-x86_64")
        );
        assert!(!r.host.pin_vcpus);
        let text = serde_json::to_string(&r).unwrap();
        assert!(
            text.contains(r#""qemu_bin":"/usr/bin/qemu-system-x86_64""#),
            "{text}"
        );
        let unknown = flat.replace(r#""seed": 1"#, r#""seed": 1, "sede": 2"#);
        let e = serde_json::from_str::<RerunInfo>(&unknown).unwrap_err();
        assert!(e.to_string().contains("sede"), "{e}");
    }
}
