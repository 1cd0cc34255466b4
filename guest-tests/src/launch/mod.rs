//! Launching one run: the backend (if external), then QEMU with the kernel, the initrd (built
//! by the caller, [`crate::images::job`]) and the results port; a hard timeout; teardown of
//! both, always. Launch parses nothing: it hands the new bytes of the results stream to a
//! [`StreamWatch`] (the agent's framing parser) while QEMU runs, asks it how far the guest
//! got, and returns the raw stream with the host's verdict ([`RawRun`]); `results` judges
//! the artefacts and builds results.json with provenance.
//!
//! Run directory layout: `initrd.cpio`, `console.log`, `ttyS1.out`, `results.bin`, `qemu.log`,
//! `qemu.argv`, `backend.log`, `backend.argv`, `backend-stats.json`, `libvirt.xml`,
//! `artifacts/`, `results.json`.

pub mod accel;
pub mod backend;
pub mod cpu;
pub mod host;
pub mod libvirt;
pub mod placement;
pub mod process;
pub mod qemu;
pub mod qemus;
pub mod rerun;
pub mod restart;
pub mod sched;

use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::images::job::sh_join;
use crate::images::KernelImage;
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
    pub bios: Bios,
    pub timeout: Duration,
    pub backend_bin: Option<PathBuf>,
    pub qemu_bin: PathBuf,
    /// Paired design: the repeat whose kernels boot at the same time.
    pub pair: Option<u32>,
    /// Pin vCPU thread k to host CPU k mod n (the same placement in every boot).
    pub pin_vcpus: bool,
    /// With `pin_vcpus`: pin every vCPU thread of this guest to host CPU `slot mod n` instead
    /// (paired design, `--vcpu-placement split`: the guests of a pair on different CPUs).
    #[serde(default)]
    pub pin_slot: Option<u32>,
    /// Real-time host scheduling of QEMU and the backend (`sched`, rule 2).
    #[serde(default)]
    pub host_sched: sched::HostSched,
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

fn variant(spec: &RunSpec) -> Result<Option<&crate::suite::Variant>, LaunchError> {
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
    let qemu_version = qemu::version(&spec.qemu_bin).map_err(LaunchError::Qemu)?;
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
    variant: Option<&crate::suite::Variant>,
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
    let mut restarter = match (&suite.spec.restarts, &bargv) {
        (Some(plan), Some(b)) => Some(restart::Restarter::new(
            plan.clone(),
            b.clone(),
            socket,
            dir,
            suite.spec.device,
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

/// The bytes of `path` from `offset` on (none when it cannot be read yet).
fn read_from(path: &Path, offset: u64) -> Vec<u8> {
    let mut out = Vec::new();
    if let Ok(mut f) = std::fs::File::open(path) {
        if f.seek(SeekFrom::Start(offset)).is_ok() {
            let _ = f.read_to_end(&mut out);
        }
    }
    out
}

/// Starts QEMU and polls until it ends, the guest reports `status`, the backend dies or the
/// timeout hits. QEMU is always stopped before returning. Every new byte of the results
/// stream goes to `watch` once.
fn drive_qemu(
    spec: &RunSpec,
    qargv: &[String],
    mut backend: Option<&mut Guarded>,
    mut restarter: Option<&mut restart::Restarter>,
    watch: &mut dyn StreamWatch,
) -> Result<(HostVerdict, HostTimes, Vec<u8>), LaunchError> {
    let dir = &spec.run_dir;
    let results = qemu::results_bin(dir);
    let t0 = Instant::now();
    let mut q = Guarded::spawn("qemu", qargv, &dir.join("qemu.log"))
        .map_err(|e| LaunchError::Qemu(format!("cannot start {}: {e}", qargv[0])))?;
    let mut timings = HostTimes::default();
    let qpid = q.pid();
    let bpid = backend.as_deref().and_then(Guarded::pid);
    let sample = |name: &str, at_s: f64| CpuMark {
        name: name.to_string(),
        at_s,
        sample: qpid.map_or_else(cpu::CpuSample::default, |p| cpu::sample(p, bpid)),
    };
    timings.cpu_marks.push(sample("qemu-start", 0.0));
    let placement = spec.placement();
    if spec.pin_vcpus {
        tracing::debug!(placement = %placement.describe());
        timings.placement = Some(placement.clone());
    }
    let want_pinned = if spec.pin_vcpus {
        spec.suite.spec.smp() as usize
    } else {
        0
    };
    let mut stream: Vec<u8> = Vec::new();
    let mut status_seen: Option<Instant> = None;
    let mut polls: u64 = 0;
    let status = loop {
        if let Some(st) = q.try_wait() {
            tracing::debug!(status = %st, "qemu exited");
            if !st.success() {
                break HostVerdict::Failed {
                    reason: format!(
                        "qemu exited ({st}): {}",
                        backend::tail(&dir.join("qemu.log"), 3)
                    ),
                };
            }
            break HostVerdict::Ended; // judged from the artefacts afterwards
        }
        // vCPU threads exist once QEMU has set the machine up (well before the guest runs).
        if (timings.vcpus_pinned as usize) < want_pinned && t0.elapsed() < Duration::from_secs(10) {
            if let Some(p) = qpid {
                timings.vcpus_pinned = cpu::pin_vcpus(p, &placement) as u32;
            }
        }
        // A dedicated placement moves everything else off the vCPUs' cores (placement rule
        // 2), while the processes still create threads: every 8th poll of the first 30 s.
        if spec.pin_vcpus && polls % 8 == 0 && t0.elapsed() < Duration::from_secs(30) {
            for p in [qpid, bpid].into_iter().flatten() {
                placement::apply_others(p, &placement);
            }
        }
        // Real-time policies while the processes still create threads (sched, rule 3): every
        // 8th poll of the first 30 s.
        if spec.host_sched != sched::HostSched::Normal
            && polls % 8 == 0
            && t0.elapsed() < Duration::from_secs(30)
        {
            if spec.host_sched == sched::HostSched::Realtime {
                if let Some(p) = bpid {
                    sched::backend_realtime(p);
                }
                if let Some(p) = qpid {
                    timings.vcpus_realtime = sched::qemu_realtime(p) as u32;
                }
                timings.rr_timeslice_ms = sched::rr_timeslice_ms();
            } else {
                // Nice (rule 5) for `nice` and `short`, first, so that a kernel without custom
                // slices still gets it; then the slice (rule 6).
                let short = spec.host_sched == sched::HostSched::Short;
                if let Some(p) = bpid {
                    sched::renice(p);
                    if short {
                        sched::short_slice(p);
                    }
                }
                if let Some(p) = qpid {
                    timings.threads_reniced = sched::renice(p) as u32;
                    if short {
                        timings.threads_short_slice = sched::short_slice(p) as u32;
                    }
                }
            }
        }
        polls += 1;
        let len = std::fs::metadata(&results).map(|m| m.len()).unwrap_or(0);
        if len > stream.len() as u64 {
            let now = t0.elapsed().as_secs_f64();
            let new = read_from(&results, stream.len() as u64);
            watch.feed(&new);
            stream.extend_from_slice(&new);
            let p = watch.progress();
            if timings.first_artifact_s.is_none() && p.any_artifact {
                timings.first_artifact_s = Some(now);
            }
            if timings.fio_ready_s.is_none() && p.device_ready {
                timings.fio_ready_s = Some(now);
            }
            if status_seen.is_none() && p.finished {
                status_seen = Some(Instant::now());
                // The run's CPU window ends with the guest's work, while QEMU still exists:
                // once it has exited and been reaped, /proc has nothing left to read.
                timings.cpu_marks.push(sample("qemu-end", now));
            }
            for m in watch.marks() {
                if !timings.cpu_marks.iter().any(|c| c.name == m) {
                    timings.cpu_marks.push(sample(&m, now));
                }
            }
        }
        // The agent powers off after `status`; don't wait for a slow poweroff forever.
        if status_seen.is_some_and(|t| t.elapsed() > Duration::from_secs(20)) {
            break HostVerdict::Ended;
        }
        if let (Some(r), Some(b)) = (restarter.as_deref_mut(), backend.as_deref_mut()) {
            let now = t0.elapsed().as_secs_f64();
            let marks = |p: &str| {
                timings
                    .cpu_marks
                    .iter()
                    .filter(|m| m.name.starts_with(p))
                    .count()
            };
            let in_step = marks("begin.") > marks("end.");
            if let Err(reason) = r.poll(now, in_step, status_seen.is_some(), b, qpid) {
                break HostVerdict::Failed { reason };
            }
        }
        if let Some(b) = backend.as_deref_mut() {
            if let Some(st) = b.try_wait() {
                break HostVerdict::Failed {
                    reason: format!(
                        "backend exited during the run ({st}): {}",
                        backend::tail(&dir.join("backend.log"), 3)
                    ),
                };
            }
        }
        if t0.elapsed() >= spec.timeout {
            break HostVerdict::TimedOut {
                after_s: t0.elapsed().as_secs_f64(),
            };
        }
        std::thread::sleep(Duration::from_millis(25));
    };
    // A QEMU that has exited was reaped by try_wait: /proc would give zeros.
    if q.try_wait().is_none() && !timings.cpu_marks.iter().any(|c| c.name == "qemu-end") {
        timings
            .cpu_marks
            .push(sample("qemu-end", t0.elapsed().as_secs_f64()));
    }
    if let (Some(r), Some(b)) = (restarter, backend.as_deref()) {
        r.finish(t0.elapsed().as_secs_f64(), b, qpid);
        timings.backend_restarts = r.records.clone();
    }
    q.stop(Duration::from_secs(3));
    timings.qemu_s = Some(t0.elapsed().as_secs_f64());
    timings.host_slice_ms = Some(sched::slice_ms(
        spec.host_sched,
        timings.threads_short_slice,
        timings.rr_timeslice_ms,
        cpu::allowed_cpus().len(),
    ));
    // What arrived after the last poll.
    let rest = read_from(&results, stream.len() as u64);
    watch.feed(&rest);
    stream.extend_from_slice(&rest);
    Ok((status, timings, stream))
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
