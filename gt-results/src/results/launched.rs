//! A launched run -> [`RunResult`]: the verdict (host's, then the guest's `status`, then the
//! suite's expectations), timings, provenance, and the metrics the harness measured.

use std::path::Path;

use super::judge::{expectations, judge, kv};
use super::{
    BackendProvenance, HostInfo, KernelProvenance, Provenance, QemuProvenance, RunInfo, RunResult,
    RunStatus, Timings,
};
use crate::metrics::registry;
use gt_launch::agent::Artifact;
use gt_launch::{HostVerdict, RawRun, RunSpec};
use gt_suite::BackendKind;

impl From<HostVerdict> for RunStatus {
    fn from(v: HostVerdict) -> RunStatus {
        match v {
            HostVerdict::Ended => RunStatus::Ok,
            HostVerdict::Failed { reason } => RunStatus::Failed { reason },
            HostVerdict::TimedOut { after_s } => RunStatus::TimedOut { after_s },
        }
    }
}

/// What the executor knows about a run that reached QEMU.
#[derive(Debug)]
pub struct Launched<'a> {
    pub spec: &'a RunSpec,
    pub raw: &'a RawRun,
    /// The raw stream, parsed once by the agent.
    pub artifacts: &'a [Artifact],
    /// Probed before the run; `loadavg_after` set after it.
    pub host: HostInfo,
    pub started_at: String,
    /// Host wall time of the whole run (initrd to saved artefacts).
    pub total_wall_s: f64,
}

impl RunResult {
    /// The result of a launched run.
    pub fn from_launch(info: RunInfo, l: Launched) -> RunResult {
        let spec = l.spec;
        let dir = &spec.run_dir;
        let status = judge(l.raw.verdict.clone().into(), l.artifacts, dir);
        let status = expectations(status, &spec.suite, l.artifacts);
        let timings = Timings {
            boot_to_init_s: l
                .artifacts
                .iter()
                .find(|a| a.name == "meta")
                .and_then(|a| kv(&a.text(), "init_uptime_s"))
                .and_then(|v| v.parse().ok()),
            wall_to_first_artifact_s: l.raw.times.first_artifact_s,
            total_wall_s: Some(l.total_wall_s),
        };
        let provenance = provenance(spec, l.raw, l.host, l.started_at);
        let mut r = RunResult::from_artifacts(info, provenance, l.artifacts, timings);
        r.set_status(status);
        let times = &l.raw.times;
        for s in &mut r.steps {
            s.host_cpu =
                times.cpu_window(&format!("begin.{}", s.label), &format!("end.{}", s.label));
            if s.host_cpu.is_some() {
                registry::derive_step(&mut r.metrics, s);
            }
        }
        registry::derive_host(&mut r.metrics, times);
        r.kernel_log = kernel_log(l.artifacts, dir);
        r
    }
}

/// The kernel's error reports of one boot: its dmesg (every level, sent by the agent at the
/// end) and its serial console (what a boot that crashed or hung printed last).
fn kernel_log(arts: &[Artifact], dir: &Path) -> Vec<crate::metrics::kernlog::LogFinding> {
    let dmesg = arts
        .iter()
        .rev()
        .find(|a| a.name == "dmesg")
        .map(|a| a.text())
        .unwrap_or_default();
    let console = std::fs::read_to_string(gt_launch::qemu::console_log(dir)).unwrap_or_default();
    crate::metrics::kernlog::merge(&[&dmesg, &console])
}

fn provenance(spec: &RunSpec, raw: &RawRun, host: HostInfo, started_at: String) -> Provenance {
    let suite = &spec.suite;
    let root = gt_suite::paths::repo_root();
    let (git_rev, git_dirty) = super::git_state(&root);
    // The tree's git state describes the backend only when the binary was built from it.
    let from_tree = suite.spec.backend == BackendKind::VhostBlk
        && spec
            .host
            .backend_bin
            .as_deref()
            .is_some_and(|b| built_in_tree(b, &root));
    let builtin = suite.spec.backend == BackendKind::QemuBuiltin;
    let mut config =
        std::fs::read_to_string(suite.dir.join(format!("{}.toml", suite.name))).unwrap_or_default();
    if let Some(v) = spec.variant.as_deref().and_then(|v| suite.variant(v)) {
        config.push_str(&format!("\n# variant: {}\n", v.name));
    }
    Provenance {
        kernel: KernelProvenance {
            variant: spec.kernel.variant.clone(),
            release: spec.kernel.release.clone(),
            bzimage_sha256: spec.kernel.bzimage_sha256.clone(),
            inputs: spec.kernel.inputs.clone(),
        },
        initramfs_sha256: spec.kernel.initramfs_sha256.clone(),
        backend: BackendProvenance {
            name: suite.spec.backend.as_str().into(),
            version: raw.backend_version.clone().unwrap_or_else(|| {
                if builtin {
                    raw.qemu_version.clone()
                } else {
                    "unknown".into()
                }
            }),
            git_rev: from_tree.then_some(git_rev).flatten(),
            git_dirty: from_tree.then_some(git_dirty).flatten(),
            argv: raw.backend_argv.clone().unwrap_or_default(),
            config,
        },
        qemu: QemuProvenance {
            version: raw.qemu_version.clone(),
            argv: raw.qemu_argv.clone(),
        },
        accelerator: spec.accel.as_str().into(),
        host,
        seeds: [("run".to_string(), spec.seed)].into_iter().collect(),
        started_at,
        guest_tests_version: env!("CARGO_PKG_VERSION").into(),
        scheduler: None,
    }
}

/// True when `bin` lies under `root` (both canonicalised).
fn built_in_tree(bin: &Path, root: &Path) -> bool {
    match (bin.canonicalize(), root.canonicalize()) {
        (Ok(b), Ok(r)) => b.starts_with(r),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_binaries_under_the_tree_get_its_git_rev() {
        let root = gt_suite::paths::repo_root();
        assert!(built_in_tree(&root.join("guest-tests/Cargo.toml"), &root));
        assert!(!built_in_tree(Path::new("/bin/sh"), &root));
        assert!(!built_in_tree(&root.join("no/such/file"), &root));
    }
}
