//! Drills: the booted procedures that a check and an experiment both run. `kill` kills the
//! backend, QEMU or both mid-write and judges the image; `restart` kills and restarts the
//! backend mid-verify; `reconnect` kills and starts QEMU again against one backend; `cost`
//! measures what each queue count costs at boot; `sandbox` reads every backend thread's
//! confinement under a booted guest.
//!
//! 1. A drill boots real guests (real QEMU, a real kernel image, the real backend) as its
//!    [`Rig`] says. It returns what it measured as a typed record (the line an experiment
//!    tabulates) with the checks that failed, empty when every one held. What a guest, QEMU or
//!    the backend did is never a panic: it is a failed check, with the run directory named.
//! 2. What a drill cannot start without (a suite, the kernel image, QEMU, the backend binary)
//!    is a [`DrillError`], returned before anything boots.
//! 3. The booted tests (tests/booted/) run a drill and assert that no check failed; experiment
//!    scripts run `lab drill ...`, which prints the record and exits 1 when a check failed.
//!    Neither parses the other's output.
//! 4. A guest that died of the MTTCG early-boot int3 Oops before its agent reported is booted
//!    again, at most [`EARLY_CRASH_RETRIES`] times (`executor::worth_retrying`).

pub mod cost;
pub mod kill;
pub mod reconnect;
pub mod restart;
pub mod sandbox;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use gt_images::{ImageOptions, KernelImage};
use gt_launch::accel::AccelChoice;
use gt_launch::process::Guarded;
use gt_launch::qemu::{self, Accel};
use gt_launch::rerun_file::RerunInfo;
use gt_launch::settings::{BootSettings, HostSetup};
use gt_launch::{qemus, RunSpec, StreamWatch};
use gt_suite::{RestartSettings, Suite};

/// Boots again after a guest that never reached its agent or died of the int3 Oops Debian's
/// kernel sometimes meets under MTTCG (a static key patched while another vCPU runs the site);
/// two in a row were seen in CI.
pub const EARLY_CRASH_RETRIES: u32 = 3;

/// Why a drill could not start.
#[derive(Debug, thiserror::Error)]
pub enum DrillError {
    #[error("suite '{0}': {1}")]
    Suite(String, String),
    #[error("kernel '{0}' is not available ({1}): build it with `cargo run -p guest-tests -- images build {0}`")]
    Kernel(String, String),
    #[error("QEMU: {0}")]
    Qemu(String),
    #[error("no vhost-blk binary: `cargo build -p vhost-blk` or give its path")]
    NoBackend,
    #[error("{0}: {1}")]
    Io(PathBuf, std::io::Error),
}

/// What every boot of a drill runs on.
#[derive(Debug, Clone)]
pub struct Rig {
    /// A kernel of images/kernels.toml (`debian-rt`, `rt128`, ...).
    pub kernel: String,
    /// A `--qemu` choice (`7.2`, `10`, a path); None: the system's, or the pinned QEMU 10 when
    /// the suite needs a newer one (`min_qemu`).
    pub qemu: Option<String>,
    /// The vhost-blk binary; None: the one next to the running executable.
    pub backend_bin: Option<PathBuf>,
    /// TCG or KVM (never `auto`: a drill does not probe).
    pub accel: Accel,
}

impl Rig {
    /// The kernel image, built or fetched if the cache lacks it.
    pub fn kernel_image(&self) -> Result<KernelImage, DrillError> {
        gt_images::ensure(&self.kernel, &ImageOptions::default())
            .map_err(|e| DrillError::Kernel(self.kernel.clone(), e.to_string()))
    }

    /// The vhost-blk binary every drill boot starts.
    pub fn backend(&self) -> Result<PathBuf, DrillError> {
        self.backend_bin
            .clone()
            .or_else(gt_launch::backend::default_vhost_blk)
            .ok_or(DrillError::NoBackend)
    }

    /// The QEMU binary for suite `s` (module docs of [`Rig::qemu`]).
    pub fn qemu_bin(&self, s: &Suite) -> Result<PathBuf, DrillError> {
        let cache = gt_suite::paths::cache_dir();
        if let Some(choice) = &self.qemu {
            return qemus::resolve(choice, &cache).map_err(DrillError::Qemu);
        }
        let system = PathBuf::from(qemus::SYSTEM_QEMU);
        let Some(min) = s.spec.min_qemu.as_deref() else {
            return Ok(system);
        };
        let version = qemu::version(&system).unwrap_or_default();
        if qemus::check_min(&s.name, Some(min), &version).is_ok() {
            return Ok(system);
        }
        qemus::resolve(qemus::pinned_version(), &cache).map_err(|e| {
            DrillError::Qemu(format!(
                "suite '{}' needs QEMU >= {min} and the system's is '{version}': {e}",
                s.name
            ))
        })
    }

    /// The boot settings of suite `s` on this rig: its BIOS, `timeout` (None: the suite's),
    /// vCPUs pinned, `backend_bin` (None: the suite's own choice, QEMU's built-in device for
    /// the `builtin-*` suites).
    pub fn settings(
        &self,
        s: &Suite,
        timeout: Option<Duration>,
        backend_bin: Option<PathBuf>,
    ) -> Result<BootSettings, DrillError> {
        Ok(BootSettings {
            suite: s.clone(),
            accel: match self.accel {
                Accel::Kvm => AccelChoice::Kvm,
                Accel::Tcg => AccelChoice::Tcg,
            },
            timeout: timeout.unwrap_or(Duration::from_secs(s.spec.timeout_secs)),
            host: HostSetup {
                bios: s.spec.bios,
                backend_bin,
                qemu_bin: self.qemu_bin(s)?,
                pin_vcpus: true,
                host_sched: Default::default(),
            },
            seed: 1,
            progress: false,
        })
    }

    /// The spec and rerun record of one boot of `s` (sweep `variant` or none) into `dir` as
    /// `run_id` with `seed`, from [`Rig::settings`].
    pub fn one_boot(
        &self,
        s: &Suite,
        boot: Boot<'_>,
        backend_bin: Option<PathBuf>,
    ) -> Result<(RunSpec, RerunInfo), DrillError> {
        let kernel = self.kernel_image()?;
        let settings = self.settings(s, boot.timeout, backend_bin)?;
        let variant = boot.variant.map(str::to_string);
        let spec = RunSpec {
            variant: variant.clone(),
            ..settings.run_spec(boot.run_id, boot.dir, kernel, self.accel, boot.seed)
        };
        let rerun = RerunInfo {
            variant,
            ..settings.rerun_info(self.kernel.clone(), None, boot.seed)
        };
        Ok((spec, rerun))
    }
}

/// Which boot of a suite: its run directory and id, sweep variant, seed and timeout.
#[derive(Debug, Clone)]
pub struct Boot<'a> {
    pub dir: &'a Path,
    pub run_id: String,
    pub variant: Option<&'a str>,
    pub seed: u64,
    /// None: the suite's.
    pub timeout: Option<Duration>,
}

/// Suite `name` from the project's suites.
pub fn load_suite(name: &str) -> Result<Suite, DrillError> {
    Suite::load(&gt_suite::default_dir(), name)
        .map_err(|e| DrillError::Suite(name.into(), e.to_string()))
}

/// The `[restarts]` plan of suite `s` (the kill and restart drills need one).
pub fn restarts_of(s: &Suite) -> Result<RestartSettings, DrillError> {
    s.spec
        .restarts
        .clone()
        .ok_or_else(|| DrillError::Suite(s.name.clone(), "no [restarts]".into()))
}

/// `dir` emptied and created.
pub fn fresh_dir(dir: &Path) -> Result<(), DrillError> {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).map_err(|e| DrillError::Io(dir.into(), e))
}

/// The last `n` lines of the run's console log, for a failed check's message.
pub fn console_tail(dir: &Path, n: usize) -> String {
    let console = std::fs::read_to_string(dir.join("console.log")).unwrap_or_default();
    let tail: Vec<&str> = console.lines().rev().take(n).collect();
    tail.into_iter().rev().collect::<Vec<_>>().join("\n")
}

/// How a guest started by [`until_disk_report`] ended its wait.
#[derive(Debug)]
pub enum DiskReport {
    /// The agent reported the disk after this long.
    Ready(Duration),
    /// QEMU exited first, of the early-boot int3 Oops: worth booting again (rule 4).
    EarlyOops,
    /// QEMU exited first for another reason, or `limit` passed: the text says which.
    Failed(String),
}

/// Waits until the guest of `q` (run directory `dir`) has reported its disk (drivers probed,
/// device started, partitions read), at most `limit`.
pub fn until_disk_report(q: &mut Guarded, dir: &Path, limit: Duration) -> DiskReport {
    let results = qemu::results_bin(dir);
    let console = dir.join("console.log");
    let mut parser = gt_launch::agent::StreamParser::default();
    let mut fed = 0usize;
    let t = Instant::now();
    while !parser.progress().device_ready {
        if q.try_wait().is_some() {
            let text = std::fs::read_to_string(&console).unwrap_or_default();
            if text.contains(crate::executor::STALE_INT3_OOPS) {
                return DiskReport::EarlyOops;
            }
            return DiskReport::Failed(format!(
                "QEMU exited before the disk report; console {}",
                console.display()
            ));
        }
        if t.elapsed() >= limit {
            return DiskReport::Failed(format!(
                "no disk report in {limit:?}; console {}",
                console.display()
            ));
        }
        std::thread::sleep(Duration::from_millis(20));
        let bytes = std::fs::read(&results).unwrap_or_default();
        if bytes.len() > fed {
            parser.feed(&bytes[fed..]);
            fed = bytes.len();
        }
    }
    DiskReport::Ready(t.elapsed())
}

/// Open descriptors, threads and resident memory of a process.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ProcUse {
    pub rss_kib: u64,
    pub threads: usize,
    pub fds: usize,
}

impl ProcUse {
    /// `pid`'s now, through procfs as `launch::restart` reads it (zeros for what cannot be
    /// read).
    pub fn read(pid: u32) -> ProcUse {
        let p = i32::try_from(pid)
            .ok()
            .and_then(|pid| procfs::process::Process::new(pid).ok());
        let Some(p) = p else {
            return ProcUse::default();
        };
        let status = p.status().ok();
        ProcUse {
            rss_kib: status.as_ref().and_then(|s| s.vmrss).unwrap_or(0),
            threads: status.map_or(0, |s| s.threads as usize),
            fds: p.fd_count().unwrap_or(0),
        }
    }

    /// `pid`'s once its threads and descriptors have not changed for 500 ms (at most 10 s).
    pub fn settled(pid: u32) -> ProcUse {
        let t = Instant::now();
        let mut last = ProcUse::read(pid);
        let mut since = Instant::now();
        while t.elapsed() < Duration::from_secs(10) && since.elapsed() < Duration::from_millis(500)
        {
            std::thread::sleep(Duration::from_millis(25));
            let now = ProcUse::read(pid);
            if (now.threads, now.fds) != (last.threads, last.fds) {
                since = Instant::now();
            }
            last = now;
        }
        last
    }
}

/// The per-run initrd (the suite's job on the kernel's initramfs) and the QEMU argv of a guest
/// of `s` against the backend on `socket`, in `dir`.
pub fn guest_argv(
    rig: &Rig,
    s: &Suite,
    kernel: &KernelImage,
    socket: &Path,
    dir: &Path,
    run_id: &str,
) -> Result<Vec<String>, DrillError> {
    use gt_images::job::{self, JobParams};
    let initrd = dir.join("initrd.cpio");
    let archive = job::archive(&JobParams {
        run_id,
        suite: s,
        lock_offsets: None,
    });
    job::write_initrd(&kernel.initramfs, &archive, &initrd)
        .map_err(|e| DrillError::Io(initrd.clone(), std::io::Error::other(e.to_string())))?;
    let qemu_bin = rig.qemu_bin(s)?;
    Ok(qemu::argv(&qemu::QemuParams {
        qemu_bin: &qemu_bin,
        accel: rig.accel,
        bios: s.spec.bios,
        suite: s,
        builtin_latency_ns: 0,
        socket: Some(socket),
        run_dir: dir,
        bzimage: &kernel.bzimage,
        initrd: &initrd,
        cmdline: qemu::kernel_cmdline(&kernel.cmdline, kernel.boot_trace_events, s),
    }))
}

/// A check's verdict: `failures` gains `what` when `ok` is false.
pub(crate) fn check(failures: &mut Vec<String>, ok: bool, what: impl FnOnce() -> String) {
    if !ok {
        failures.push(what());
    }
}
