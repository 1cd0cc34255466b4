//! Launching one run: the backend (if external), then QEMU with the kernel, the initrd (built
//! by the caller, [`gt_images::job`]) and the results port; a hard timeout; teardown of
//! both, always. Launch parses nothing: it hands the new bytes of the results stream to a
//! [`StreamWatch`] (the agent's framing parser) while QEMU runs, asks it how far the guest
//! got, and returns the raw stream with the host's verdict ([`RawRun`]); `results` judges
//! the artefacts and builds results.json with provenance.
//!
//! Run directory layout: `initrd.cpio`, `console.log`, `ttyS1.out`, `results.bin`, `qemu.log`,
//! `qemu.argv`, `backend.log`, `backend.argv`, `backend-stats.json`, `libvirt.xml`,
//! `artifacts/`, `results.json`.

#![cfg_attr(test, allow(clippy::too_many_lines))]

pub mod agent;

pub mod accel;
pub mod backend;
pub mod cpu;
pub mod host;
pub mod libvirt;
pub mod placement;
pub mod process;
pub mod qemu;
pub mod qemus;
pub mod rerun_file;
pub mod restart;
pub mod sched;
pub mod settings;

mod drive;

use std::path::{Path, PathBuf};
use std::time::Duration;

use drive::drive_qemu;
use gt_images::job::sh_join;
use gt_images::KernelImage;
use gt_suite::{BackendKind, Storage, Suite};
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

/// Everything one run needs (serialisable: a batch executor hands it to a node as planned).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct RunSpec {
    pub run_id: String,
    /// Created by [`run`]; must not exist yet.
    pub run_dir: PathBuf,
    pub kernel: KernelImage,
    pub suite: Suite,
    pub variant: Option<String>,
    pub seed: u64,
    pub accel: Accel,
    pub timeout: Duration,
    /// Firmware, binaries, vCPU pinning and host scheduling (flattened: one level of JSON).
    #[serde(flatten)]
    pub host: settings::HostSetup,
    /// Paired design: the repeat whose kernels boot at the same time.
    pub pair: Option<u32>,
    /// With `host.pin_vcpus`: pin every vCPU thread of this guest to host CPU `slot mod n` instead
    /// (paired design, `--vcpu-placement split`: the guests of a pair on different CPUs).
    #[serde(default)]
    pub pin_slot: Option<u32>,
}

/// What the host saw of a run that reached QEMU (nothing here is parsed from the guest).
#[derive(Debug, Clone)]
pub struct RawRun {
    pub verdict: HostVerdict,
    /// The results stream (`results.bin`) as the guest sent it.
    pub stream: Vec<u8>,
    pub times: HostTimes,
    pub qemu_version: String,
    pub qemu_argv: Vec<String>,
    /// None for QEMU's built-in devices.
    pub backend_argv: Option<Vec<String>>,
    pub backend_version: Option<String>,
}

/// The host's side of the verdict.
#[derive(Debug, Clone, PartialEq)]
pub enum HostVerdict {
    /// QEMU ended (or the guest finished): the artefacts decide.
    Ended,
    /// QEMU failed or the backend died.
    Failed {
        reason: String,
    },
    TimedOut {
        after_s: f64,
    },
}

/// A CPU-accounting snapshot taken when a mark arrived (`qemu-start`, `begin.<step>`,
/// `end.<step>`, `qemu-end`), `at_s` seconds after QEMU started.
#[derive(Debug, Clone, PartialEq)]
pub struct CpuMark {
    pub name: String,
    pub at_s: f64,
    pub sample: cpu::CpuSample,
}

/// Host wall times gathered while QEMU runs, seconds from QEMU start.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HostTimes {
    /// The first artefact began to arrive.
    pub first_artifact_s: Option<f64>,
    /// The device was ready (the guest's `disk` report), the first step next.
    pub fio_ready_s: Option<f64>,
    /// QEMU ran.
    pub qemu_s: Option<f64>,
    /// CPU accounting at QEMU start and end and at the agent's step marks.
    pub cpu_marks: Vec<CpuMark>,
    /// vCPU threads pinned (`RunSpec::pin_vcpus`); 0 when not asked or not done.
    pub vcpus_pinned: u32,
    /// vCPU threads under SCHED_RR (`RunSpec::host_sched`); 0 when not asked or not done.
    pub vcpus_realtime: u32,
    /// The host's SCHED_RR time slice (ms) when the run was real-time.
    pub rr_timeslice_ms: Option<f64>,
    /// QEMU threads at nice `sched::NICE` (`--host-sched nice`); 0 when not asked or not done.
    pub threads_reniced: u32,
    /// QEMU threads with the fair scheduler's short slice (`--host-sched short`, sched rule
    /// 6); 0 when not asked or the kernel has no custom slices.
    pub threads_short_slice: u32,
    /// Where the vCPUs were placed, when they were pinned (`placement`).
    pub placement: Option<placement::Placement>,
    /// The time slice the host gave QEMU's threads, ms (`sched::slice_ms`).
    pub host_slice_ms: Option<f64>,
    /// `[restarts]`: each backend instance before its kill, and the last one at the end.
    pub backend_restarts: Vec<restart::RestartRecord>,
}

impl HostTimes {
    /// The CPU rates between two marks (by name).
    pub fn cpu_window(&self, from: &str, to: &str) -> Option<cpu::CpuWindow> {
        let a = self.cpu_marks.iter().find(|m| m.name == from)?;
        let b = self.cpu_marks.iter().find(|m| m.name == to)?;
        cpu::CpuWindow::between(&a.sample, &b.sample, b.at_s - a.at_s)
    }
}

/// How far the guest got, as the stream's reader sees it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StreamProgress {
    /// An artefact has begun.
    pub any_artifact: bool,
    /// The device is ready (the agent's `disk` report is complete).
    pub device_ready: bool,
    /// The agent is done (its `status` is complete); it powers off next.
    pub finished: bool,
}

/// Reads the results stream while QEMU runs; launch feeds it every new byte once, in order.
/// Implemented by the agent's framing parser ([`crate::agent::StreamParser`]).
pub trait StreamWatch {
    fn feed(&mut self, bytes: &[u8]);
    fn progress(&self) -> StreamProgress;
    /// Names of the complete `begin.*` / `end.*` marks so far (the host samples its CPU
    /// accounting when each arrives).
    fn marks(&self) -> Vec<String> {
        Vec::new()
    }
}

/// How long the backend may take to create its socket.
pub const BACKEND_START_LIMIT: Duration = Duration::from_secs(10);

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

/// Checks what can be checked before anything is built (the run directory can be passed to
/// QEMU, the variant exists) and creates the run directory.
pub fn prepare(spec: &RunSpec) -> Result<(), LaunchError> {
    let dir = &spec.run_dir;
    if dir.display().to_string().contains(',') {
        return Err(LaunchError::Config(format!(
            "run directory {} contains ',' which QEMU options cannot carry",
            dir.display()
        )));
    }
    variant(spec)?;
    std::fs::create_dir_all(dir).map_err(io(dir))
}

impl RunSpec {
    /// Where this run's vCPUs go on this host (`placement`): the suite's running CPUs (all
    /// of `smp` without `running_cpus`) on the CPUs this process may use.
    pub fn placement(&self) -> placement::Placement {
        let s = &self.suite.spec;
        let running = s.running_cpus.unwrap_or_else(|| s.smp());
        placement::Placement::plan(&cpu::allowed_cpus(), running as usize, self.pin_slot)
    }

    /// This run with its suite resolved to its variant's cell (`Suite::for_variant`): what
    /// the launcher, the job archive and the backend see.
    pub fn for_cell(&self) -> Result<RunSpec, LaunchError> {
        let suite = self
            .suite
            .for_variant(self.variant.as_deref())
            .map_err(|e| LaunchError::Config(e.to_string()))?;
        Ok(RunSpec {
            suite,
            ..self.clone()
        })
    }
}

fn variant(spec: &RunSpec) -> Result<Option<&gt_suite::Cell>, LaunchError> {
    let suite = &spec.suite;
    match &spec.variant {
        Some(v) => Ok(Some(suite.variant(v).ok_or_else(|| {
            LaunchError::Config(format!("suite '{}' has no variant '{v}'", suite.name))
        })?)),
        None => Ok(None),
    }
}

/// The initrd a run boots: `RUN/initrd.cpio`.
pub fn initrd_path(run_dir: &Path) -> PathBuf {
    run_dir.join("initrd.cpio")
}

/// Runs one boot with `initrd`, feeding the results stream to `watch`. `Err` only for
/// problems before QEMU starts; a guest that fails, hangs or crashes gives `Ok` (console and
/// partial stream kept) and the caller judges it.
pub fn run(
    spec: &RunSpec,
    initrd: &Path,
    watch: &mut dyn StreamWatch,
) -> Result<RawRun, LaunchError> {
    let dir = &spec.run_dir;
    prepare(spec)?;
    let suite = &spec.suite;
    let variant = variant(spec)?;
    let qemu_version = qemu::version(&spec.host.qemu_bin).map_err(LaunchError::Qemu)?;
    let min = suite.spec.min_qemu.as_deref();
    qemus::check_min(&suite.name, min, &qemu_version).map_err(LaunchError::Config)?;
    let disks = create_disk_images(suite, dir)?;
    let (socket, sock_dir) = socket_path(&spec.run_id, dir)?;
    let _ = std::fs::remove_file(&socket);
    let result = run_with_socket(spec, variant, &socket, initrd, &qemu_version, watch);
    let _ = std::fs::remove_file(&socket);
    if let Some(d) = sock_dir {
        let _ = std::fs::remove_dir_all(&d);
    }
    for d in &disks {
        let _ = std::fs::remove_file(d);
    }
    let (verdict, times, stream, backend_argv, backend_version, qemu_argv) = result?;
    Ok(RawRun {
        verdict,
        stream,
        times,
        qemu_version,
        qemu_argv,
        backend_argv,
        backend_version,
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
    HostVerdict,
    HostTimes,
    Vec<u8>,
    Option<Vec<String>>,
    Option<String>,
    Vec<String>,
);

fn run_with_socket(
    spec: &RunSpec,
    variant: Option<&gt_suite::Cell>,
    socket: &Path,
    initrd: &Path,
    qemu_version: &str,
    watch: &mut dyn StreamWatch,
) -> Result<QemuPart, LaunchError> {
    let dir = &spec.run_dir;
    let suite = &spec.suite;
    let bargv = backend::argv(
        suite,
        variant,
        spec.host.backend_bin.as_deref(),
        socket,
        dir,
        spec.seed,
    )?;
    let cmdline = qemu::kernel_cmdline(&spec.kernel.cmdline, spec.kernel.boot_trace_events, suite);
    let latency = variant
        .and_then(|v| v.builtin_latency_ns)
        .unwrap_or(suite.spec.builtin.latency_ns);
    let qargv = qemu::argv(&qemu::QemuParams {
        qemu_bin: &spec.host.qemu_bin,
        accel: spec.accel,
        bios: spec.host.bios,
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
    run_prepare(suite, spec.seed, dir)?;
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
    let mut restarter = match (&suite.spec.restarts, &bargv) {
        (Some(plan), Some(b)) => Some(restart::Restarter::new(
            plan.clone(),
            b.clone(),
            socket,
            dir,
            suite.spec.device,
            spec.seed,
        )),
        _ => None,
    };
    let (status, timings, stream) = drive_qemu(
        spec,
        &qargv,
        backend_proc.as_mut(),
        restarter.as_mut(),
        watch,
    )?;
    if let Some(mut b) = backend_proc {
        if let Some(st) = b.stop(Duration::from_secs(5)) {
            tracing::debug!(status = %st, "backend stopped");
        }
    }
    Ok((status, timings, stream, bargv, backend_version, qargv))
}

/// The suite's `prepare` commands, in the run directory, before the backend starts (their
/// output goes to `RUN/prepare.log`); the first that fails fails the run.
fn run_prepare(suite: &Suite, seed: u64, dir: &Path) -> Result<(), LaunchError> {
    let log = dir.join("prepare.log");
    for cmd in &suite.spec.prepare {
        let argv: Vec<String> = cmd.iter().map(|a| backend::subst(a, seed, dir)).collect();
        let Some((prog, args)) = argv.split_first() else {
            continue;
        };
        let out = std::process::Command::new(prog)
            .args(args)
            .current_dir(dir)
            .output()
            .map_err(|e| LaunchError::Config(format!("prepare: cannot run {prog}: {e}")))?;
        let mut text = format!("$ {}\n", sh_join(&argv)).into_bytes();
        text.extend_from_slice(&out.stdout);
        text.extend_from_slice(&out.stderr);
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .map_err(io(&log))?;
        std::io::Write::write_all(&mut f, &text).map_err(io(&log))?;
        if !out.status.success() {
            return Err(LaunchError::Config(format!(
                "prepare: {} failed ({}), see prepare.log",
                sh_join(&argv),
                out.status
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

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
