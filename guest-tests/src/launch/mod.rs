//! Launching one run: the backend (if external), then QEMU with the kernel, the initrd plus job
//! archive and the results port; a hard timeout; teardown of both, always; artefacts and
//! provenance written into the run directory.
//!
//! Run directory layout: `initrd.cpio`, `console.log`, `ttyS1.out`, `results.bin`, `qemu.log`,
//! `qemu.argv`, `backend.log`, `backend.argv`, `backend-stats.json`, `libvirt.xml`,
//! `artifacts/`, `results.json`.

pub mod accel;
pub mod backend;
pub mod host;
pub mod libvirt;
pub mod process;
pub mod qemu;
pub mod rerun;
mod verdict;

pub use verdict::kv;
use verdict::{expectations, judge};

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::agent::{parse_stream, Artifact};
use crate::images::KernelImage;
use crate::job::{self, sh_join, JobParams};
use crate::results::{
    self, BackendProvenance, HostInfo, KernelProvenance, Provenance, QemuProvenance, RunStatus,
    Timings,
};
use crate::suite::{BackendKind, Bios, Storage, Suite};
use process::Guarded;
use qemu::Accel;

/// Errors that stop a run before the guest could run (the matrix records them as failed runs).
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    #[error("{0}")]
    Config(String),
    #[error("backend: {0}")]
    Backend(String),
    #[error("qemu: {0}")]
    Qemu(String),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> LaunchError + '_ {
    move |source| LaunchError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Everything one run needs.
#[derive(Debug, Clone)]
pub struct RunSpec {
    pub run_id: String,
    /// Created by [`run`]; must not exist yet.
    pub run_dir: PathBuf,
    pub kernel: KernelImage,
    pub suite: Suite,
    pub variant: Option<String>,
    pub seed: u64,
    pub accel: Accel,
    pub bios: Bios,
    pub timeout: Duration,
    pub backend_bin: Option<PathBuf>,
    pub qemu_bin: PathBuf,
}

/// The result of one run that reached QEMU.
#[derive(Debug, Clone)]
pub struct RunOutcome {
    /// The host's verdict: timeout, backend death, or what the guest's `status` said.
    pub status: RunStatus,
    pub artifacts: Vec<Artifact>,
    pub timings: Timings,
    /// Host wall time from QEMU start to the `disk` artefact (device ready, first step next).
    pub boot_to_fio_ready_s: Option<f64>,
    /// Host wall time QEMU ran.
    pub qemu_wall_s: Option<f64>,
    pub provenance: Provenance,
}

/// Host-side timings gathered while QEMU runs.
#[derive(Debug, Clone, Copy, Default)]
struct Watch {
    first_artifact_s: Option<f64>,
    fio_ready_s: Option<f64>,
    qemu_s: Option<f64>,
}

/// How long the backend may take to create its socket.
pub const BACKEND_START_LIMIT: Duration = Duration::from_secs(10);

fn sha256_file(path: &Path) -> Result<String, LaunchError> {
    results::sha256_file(path).map_err(io(path))
}

/// Longest socket path used inside the run directory (sun_path holds 108 bytes).
const MAX_SOCKET_PATH: usize = 100;

/// The vhost-user socket: `RUN/vhost.sock` when short enough (so `backend.argv` and `qemu.argv`
/// can be rerun as written), else a private directory under $TMPDIR (returned for removal).
fn socket_path(run_id: &str, dir: &Path) -> Result<(PathBuf, Option<PathBuf>), LaunchError> {
    let inside = dir.join("vhost.sock");
    if inside.as_os_str().len() <= MAX_SOCKET_PATH {
        return Ok((inside, None));
    }
    let d = socket_dir(run_id)?;
    Ok((d.join("vu.sock"), Some(d)))
}

/// A short private directory for the vhost-user socket.
fn socket_dir(run_id: &str) -> Result<PathBuf, LaunchError> {
    let tag: String = run_id
        .chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .take(16)
        .collect();
    let d = std::env::temp_dir().join(format!(
        "gt-{}-{tag}-{}",
        std::process::id(),
        (host::unix_now() * 1e3) as u64 % 1_000_000
    ));
    std::fs::create_dir_all(&d).map_err(io(&d))?;
    Ok(d)
}

/// Runs one boot. `Err` only for problems before QEMU starts; a guest that fails, hangs or
/// crashes gives `Ok` with a failed status (console and partial artefacts kept).
pub fn run(spec: &RunSpec) -> Result<RunOutcome, LaunchError> {
    let t_total = Instant::now();
    let started_at = results::now_rfc3339();
    let mut host = HostInfo::probe();
    let dir = &spec.run_dir;
    if dir.display().to_string().contains(',') {
        return Err(LaunchError::Config(format!(
            "run directory {} contains ',' which QEMU options cannot carry",
            dir.display()
        )));
    }
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    let suite = &spec.suite;
    let variant = match &spec.variant {
        Some(v) => Some(suite.variant(v).ok_or_else(|| {
            LaunchError::Config(format!("suite '{}' has no variant '{v}'", suite.name))
        })?),
        None => None,
    };

    // initrd = base initramfs + job archive.
    let initrd = dir.join("initrd.cpio");
    let archive = job::archive(&JobParams {
        run_id: &spec.run_id,
        suite,
    });
    job::write_initrd(&spec.kernel.initramfs, &archive, &initrd).map_err(io(&initrd))?;
    let initrd_sha = sha256_file(&initrd)?;
    std::fs::write(
        dir.join("initrd.sha256"),
        format!("{initrd_sha}  initrd.cpio\n"),
    )
    .map_err(io(dir))?;

    let qemu_version = qemu::version(&spec.qemu_bin).map_err(LaunchError::Qemu)?;
    let disks = create_disk_images(suite, dir)?;
    let (socket, sock_dir) = socket_path(&spec.run_id, dir)?;
    let _ = std::fs::remove_file(&socket);
    let result = run_with_socket(spec, variant, &socket, &initrd, &qemu_version);
    let _ = std::fs::remove_file(&socket);
    if let Some(d) = sock_dir {
        let _ = std::fs::remove_dir_all(&d);
    }
    for d in &disks {
        let _ = std::fs::remove_file(d);
    }
    let (status, watch, backend_argv, backend_version, qemu_argv) = result?;

    let stream = std::fs::read(qemu::results_bin(dir)).unwrap_or_default();
    let artifacts = parse_stream(&stream);
    results::save_artifacts(&dir.join("artifacts"), &artifacts).map_err(io(dir))?;
    let status = expectations(judge(status, &artifacts, dir), suite, &artifacts);
    host.loadavg_after = results::loadavg();
    let timings = Timings {
        boot_to_init_s: artifacts
            .iter()
            .find(|a| a.name == "meta")
            .and_then(|a| kv(&a.text(), "init_uptime_s"))
            .and_then(|v| v.parse().ok()),
        wall_to_first_artifact_s: watch.first_artifact_s,
        total_wall_s: Some(t_total.elapsed().as_secs_f64()),
    };
    let (git_rev, git_dirty) = results::git_state(&crate::paths::repo_root());
    // The tree's git state describes the backend only when the binary was built from it.
    let from_tree = suite.spec.backend == BackendKind::VhostBlk
        && spec
            .backend_bin
            .as_deref()
            .is_some_and(|b| built_in_tree(b, &crate::paths::repo_root()));
    let builtin = suite.spec.backend == BackendKind::QemuBuiltin;
    let mut config =
        std::fs::read_to_string(suite.dir.join(format!("{}.toml", suite.name))).unwrap_or_default();
    if let Some(v) = variant {
        config.push_str(&format!("\n# variant: {}\n", v.name));
    }
    let provenance = Provenance {
        kernel: KernelProvenance {
            variant: spec.kernel.variant.clone(),
            release: spec.kernel.release.clone(),
            bzimage_sha256: spec.kernel.bzimage_sha256.clone(),
        },
        initramfs_sha256: spec.kernel.initramfs_sha256.clone(),
        backend: BackendProvenance {
            name: suite.spec.backend.as_str().into(),
            version: backend_version.unwrap_or_else(|| {
                if builtin {
                    qemu_version.clone()
                } else {
                    "unknown".into()
                }
            }),
            git_rev: from_tree.then_some(git_rev).flatten(),
            git_dirty: from_tree.then_some(git_dirty).flatten(),
            argv: backend_argv.unwrap_or_default(),
            config,
        },
        qemu: QemuProvenance {
            version: qemu_version,
            argv: qemu_argv,
        },
        accelerator: spec.accel.as_str().into(),
        host,
        seeds: [("run".to_string(), spec.seed)].into_iter().collect(),
        started_at,
        guest_tests_version: env!("CARGO_PKG_VERSION").into(),
    };
    Ok(RunOutcome {
        status,
        artifacts,
        timings,
        boot_to_fio_ready_s: watch.fio_ready_s,
        qemu_wall_s: watch.qemu_s,
        provenance,
    })
}

/// Sparse backing files for `[builtin] storage = "file"` (qemu-builtin, qemu-storage-daemon).
fn create_disk_images(suite: &Suite, dir: &Path) -> Result<Vec<PathBuf>, LaunchError> {
    let b = &suite.spec.builtin;
    if b.storage != Storage::File || suite.spec.backend == BackendKind::VhostBlk {
        return Ok(vec![]);
    }
    let n = if suite.spec.backend == BackendKind::QemuStorageDaemon {
        1
    } else {
        b.disks
    };
    (0..n)
        .map(|i| {
            let p = qemu::disk_image(dir, i);
            let f = std::fs::File::create(&p).map_err(io(&p))?;
            f.set_len(b.size_mib << 20).map_err(io(&p))?;
            Ok(p)
        })
        .collect()
}

type QemuPart = (
    RunStatus,
    Watch,
    Option<Vec<String>>,
    Option<String>,
    Vec<String>,
);

fn run_with_socket(
    spec: &RunSpec,
    variant: Option<&crate::suite::Variant>,
    socket: &Path,
    initrd: &Path,
    qemu_version: &str,
) -> Result<QemuPart, LaunchError> {
    let dir = &spec.run_dir;
    let suite = &spec.suite;
    let bargv = backend::argv(
        suite,
        variant,
        spec.backend_bin.as_deref(),
        socket,
        dir,
        spec.seed,
    )?;
    let cmdline = qemu::kernel_cmdline(&spec.kernel.cmdline, suite);
    let latency = variant
        .and_then(|v| v.builtin_latency_ns)
        .unwrap_or(suite.spec.builtin.latency_ns);
    let qargv = qemu::argv(&qemu::QemuParams {
        qemu_bin: &spec.qemu_bin,
        accel: spec.accel,
        bios: spec.bios,
        suite,
        builtin_latency_ns: latency,
        socket: bargv.as_ref().map(|_| socket),
        run_dir: dir,
        bzimage: &spec.kernel.bzimage,
        initrd,
        cmdline,
    });
    let write = |name: &str, text: String| -> Result<(), LaunchError> {
        let p = dir.join(name);
        std::fs::write(&p, text).map_err(io(&p))
    };
    write("qemu.argv", sh_join(&qargv) + "\n")?;
    write("qemu.version", format!("{qemu_version}\n"))?;
    write(
        "libvirt.xml",
        libvirt::snippet(suite, bargv.as_ref().map(|_| socket)),
    )?;
    let mut backend_version = None;
    let mut backend_proc: Option<Guarded> = None;
    if let Some(b) = &bargv {
        write("backend.argv", sh_join(b) + "\n")?;
        backend_version = Some(backend::version(&b[0]));
        backend_proc = Some(backend::start(
            b,
            socket,
            &dir.join("backend.log"),
            BACKEND_START_LIMIT,
        )?);
    }
    let (status, timings) = drive_qemu(spec, &qargv, backend_proc.as_mut())?;
    if let Some(mut b) = backend_proc {
        if let Some(st) = b.stop(Duration::from_secs(5)) {
            tracing::debug!(status = %st, "backend stopped");
        }
    }
    Ok((status, timings, bargv, backend_version, qargv))
}

/// Starts QEMU and polls until it ends, the guest reports `status`, the backend dies or the
/// timeout hits. QEMU is always stopped before returning.
fn drive_qemu(
    spec: &RunSpec,
    qargv: &[String],
    mut backend: Option<&mut Guarded>,
) -> Result<(RunStatus, Watch), LaunchError> {
    let dir = &spec.run_dir;
    let results = qemu::results_bin(dir);
    let t0 = Instant::now();
    let mut q = Guarded::spawn("qemu", qargv, &dir.join("qemu.log"))
        .map_err(|e| LaunchError::Qemu(format!("cannot start {}: {e}", qargv[0])))?;
    let mut timings = Watch::default();
    let mut last_len = 0u64;
    let mut status_seen: Option<Instant> = None;
    let status = loop {
        if let Some(st) = q.try_wait() {
            tracing::debug!(status = %st, "qemu exited");
            if !st.success() {
                break RunStatus::Failed {
                    reason: format!(
                        "qemu exited ({st}): {}",
                        backend::tail(&dir.join("qemu.log"), 3)
                    ),
                };
            }
            break RunStatus::Ok; // judged from the artefacts afterwards
        }
        let len = std::fs::metadata(&results).map(|m| m.len()).unwrap_or(0);
        if len != last_len {
            last_len = len;
            let now = t0.elapsed().as_secs_f64();
            let arts = parse_stream(&std::fs::read(&results).unwrap_or_default());
            if timings.first_artifact_s.is_none() && !arts.is_empty() {
                timings.first_artifact_s = Some(now);
            }
            if timings.fio_ready_s.is_none() && arts.iter().any(|a| a.name == "disk" && a.complete)
            {
                timings.fio_ready_s = Some(now);
            }
            if status_seen.is_none() && arts.iter().any(|a| a.name == "status" && a.complete) {
                status_seen = Some(Instant::now());
            }
        }
        // The agent powers off after `status`; don't wait for a slow poweroff forever.
        if status_seen.is_some_and(|t| t.elapsed() > Duration::from_secs(20)) {
            break RunStatus::Ok;
        }
        if let Some(b) = backend.as_deref_mut() {
            if let Some(st) = b.try_wait() {
                break RunStatus::Failed {
                    reason: format!(
                        "backend exited during the run ({st}): {}",
                        backend::tail(&dir.join("backend.log"), 3)
                    ),
                };
            }
        }
        if t0.elapsed() >= spec.timeout {
            break RunStatus::TimedOut {
                after_s: t0.elapsed().as_secs_f64(),
            };
        }
        std::thread::sleep(Duration::from_millis(25));
    };
    q.stop(Duration::from_secs(3));
    timings.qemu_s = Some(t0.elapsed().as_secs_f64());
    Ok((status, timings))
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
        let root = crate::paths::repo_root();
        assert!(built_in_tree(&root.join("guest-tests/Cargo.toml"), &root));
        assert!(!built_in_tree(Path::new("/bin/sh"), &root));
        assert!(!built_in_tree(&root.join("no/such/file"), &root));
    }

    #[test]
    fn socket_goes_into_the_run_dir_unless_the_path_is_too_long() {
        let (s, tmp) = socket_path("r", Path::new("/tmp/x/000-rt-r0")).unwrap();
        assert_eq!(s, Path::new("/tmp/x/000-rt-r0/vhost.sock"));
        assert!(tmp.is_none());
        let long = format!("/tmp/{}", "d".repeat(120));
        let (s, tmp) = socket_path("run-1", Path::new(&long)).unwrap();
        let tmp = tmp.unwrap();
        assert!(s.starts_with(&tmp));
        assert!(s.as_os_str().len() <= MAX_SOCKET_PATH);
        std::fs::remove_dir_all(tmp).unwrap();
    }
}
