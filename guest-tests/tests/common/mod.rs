//! What the booted-guest tests share: the backend binary, the accelerator, and the run spec and
//! rerun record of one boot of a suite on Debian's prebuilt RT kernel.

#![allow(dead_code)] // each test crate uses its own subset

use std::path::{Path, PathBuf};
use std::time::Duration;

use guest_tests::images::{self, ImageOptions};
use guest_tests::launch::accel::AccelChoice;
use guest_tests::launch::qemu::Accel;
use guest_tests::launch::rerun::RerunInfo;
use guest_tests::launch::RunSpec;
use guest_tests::suite::Suite;

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
        qemu_bin: PathBuf::from("qemu-system-x86_64"),
        pair: None,
        pin_vcpus: true,
        host_sched: Default::default(),
        pin_slot: None,
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
        qemu_bin: PathBuf::from("qemu-system-x86_64"),
        extra_backend_args: Vec::new(),
        pin_vcpus: true,
        host_sched: Default::default(),
        pin_slot: None,
    };
    (spec, rerun)
}
