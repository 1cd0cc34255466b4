//! What the booted-guest tests share: the backend binary, the accelerator, and the run spec and
//! rerun record of one boot of a suite on Debian's prebuilt RT kernel.

use std::path::{Path, PathBuf};
use std::time::Duration;

use guest_tests::images::{self, ImageOptions};
use guest_tests::launch::accel::AccelChoice;
use guest_tests::launch::qemu::{self, Accel};
use guest_tests::launch::qemus;
use guest_tests::launch::rerun_file::RerunInfo;
use guest_tests::launch::RunSpec;
use guest_tests::suite::Suite;

/// Held by each booted test while its guest runs: one guest at a time in the whole target.
pub fn one_guest_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static BOOT: std::sync::Mutex<()> = std::sync::Mutex::new(());
    BOOT.lock().unwrap_or_else(|e| e.into_inner())
}

/// The kernel the booted tests use.
pub const KERNEL: &str = "debian-rt";

/// Boots again after a guest that never reached its agent or died of an int3 Oops
/// (`executor::worth_retrying`): Debian's kernel under MTTCG sometimes dies that way, at boot
/// (a static key patched while another vCPU runs the site) and mid-run; two in a row were seen
/// in CI (as in tests/slurm_cluster.rs, which passes `--retries 3`).
pub const EARLY_CRASH_RETRIES: u32 = 3;

/// `$VB_BACKEND_BIN`, else the workspace's vhost-blk build.
pub fn backend_bin() -> PathBuf {
    std::env::var_os("VB_BACKEND_BIN")
        .map(PathBuf::from)
        .or_else(guest_tests::launch::backend::default_vhost_blk)
        .expect("no vhost-blk binary: `cargo build -p vhost-blk` or set VB_BACKEND_BIN")
}

/// The QEMU a booted test of `s` runs (launch::qemus): `$VB_QEMU` (a `--qemu` value, e.g. 7.2
/// or 10), else the system's, unless the suite needs a newer one (`min_qemu`): then the pinned
/// QEMU 10 from the cache (ci/fetch-qemu10.sh, which ci/test.sh runs).
pub fn qemu_bin(s: &Suite) -> PathBuf {
    let cache = guest_tests::paths::cache_dir();
    if let Ok(v) = std::env::var("VB_QEMU") {
        return qemus::resolve(&v, &cache).unwrap_or_else(|e| panic!("VB_QEMU: {e}"));
    }
    let system = PathBuf::from(qemus::SYSTEM_QEMU);
    let Some(min) = s.spec.min_qemu.as_deref() else {
        return system;
    };
    let version = qemu::version(&system).unwrap_or_default();
    if qemus::check_min(&s.name, Some(min), &version).is_ok() {
        return system;
    }
    qemus::resolve(qemus::pinned_version(), &cache).unwrap_or_else(|e| {
        panic!(
            "suite '{}' needs QEMU >= {min} and the system's is '{version}': {e}",
            s.name
        )
    })
}

/// TCG unless `VB_ACCEL=kvm`.
pub fn accel() -> Accel {
    match std::env::var("VB_ACCEL").as_deref() {
        Ok("kvm") => Accel::Kvm,
        _ => Accel::Tcg,
    }
}

/// The spec and rerun record of one boot of `s` (one sweep `variant` or none) on [`KERNEL`]
/// into `dir`, seed 1, vCPUs pinned; `timeout` None: the suite's; `backend_bin` None: the
/// suite's own backend choice (QEMU's built-in device for the `builtin-*` suites).
pub fn one_boot(
    s: &Suite,
    variant: Option<&str>,
    dir: &Path,
    run_id: String,
    timeout: Option<Duration>,
    backend_bin: Option<PathBuf>,
) -> (RunSpec, RerunInfo) {
    let kernel = images::ensure(KERNEL, &ImageOptions::default()).unwrap_or_else(|e| {
        panic!(
            "booted tests need the '{KERNEL}' image and it is not available: {e}\n\
             build it with `cargo run -p guest-tests -- images build {KERNEL}`"
        )
    });
    let timeout = timeout.unwrap_or(Duration::from_secs(s.spec.timeout_secs));
    let qemu_bin = qemu_bin(s);
    let spec = RunSpec {
        run_id,
        run_dir: dir.to_path_buf(),
        kernel,
        suite: s.clone(),
        variant: variant.map(str::to_string),
        seed: 1,
        accel: accel(),
        bios: s.spec.bios,
        timeout,
        backend_bin: backend_bin.clone(),
        qemu_bin: qemu_bin.clone(),
        pair: None,
        pin_vcpus: true,
        host_sched: Default::default(),
        pin_slot: None,
        ordering: None,
    };
    let rerun = RerunInfo {
        kernel: KERNEL.into(),
        kernel_spec: None,
        suite: s.name.clone(),
        suites_dir: s.dir.clone(),
        variant: variant.map(str::to_string),
        repeat: 0,
        seed: 1,
        accel: AccelChoice::Tcg,
        bios: s.spec.bios,
        timeout_secs: timeout.as_secs(),
        backend_bin,
        qemu_bin,
        extra_backend_args: Vec::new(),
        pin_vcpus: true,
        host_sched: Default::default(),
        pin_slot: None,
    };
    (spec, rerun)
}
