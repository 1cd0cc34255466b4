//! What the booted-guest tests share: the rig (Debian's prebuilt RT kernel, the QEMU, the
//! backend binary, the accelerator, each overridable by environment for a local run) and the
//! run spec and rerun record of one boot of a suite on it (`guest_tests::drill`).

use std::path::{Path, PathBuf};
use std::time::Duration;

use gt_launch::qemu::Accel;
use gt_launch::rerun_file::RerunInfo;
use gt_launch::RunSpec;
use gt_suite::Suite;
use guest_tests::drill::{Boot, Rig};

pub use guest_tests::drill::EARLY_CRASH_RETRIES;

/// Held by each booted test while its guest runs: one guest at a time in the whole target.
pub fn one_guest_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static BOOT: std::sync::Mutex<()> = std::sync::Mutex::new(());
    BOOT.lock().unwrap_or_else(|e| e.into_inner())
}

/// The kernel the booted tests use.
pub const KERNEL: &str = "debian-rt";

/// TCG unless `VB_ACCEL=kvm`.
pub fn accel() -> Accel {
    match std::env::var("VB_ACCEL").as_deref() {
        Ok("kvm") => Accel::Kvm,
        _ => Accel::Tcg,
    }
}

/// [`KERNEL`]; `$VB_QEMU` (a `--qemu` value, e.g. 7.2 or 10) else the suite's choice;
/// `$VB_BACKEND_BIN` else the workspace's vhost-blk build; [`accel`].
pub fn rig() -> Rig {
    rig_on(KERNEL)
}

/// [`rig`] with another kernel of images/kernels.toml (built on first use, then cached).
pub fn rig_on(kernel: &str) -> Rig {
    Rig {
        kernel: kernel.into(),
        qemu: std::env::var("VB_QEMU").ok(),
        backend_bin: std::env::var_os("VB_BACKEND_BIN").map(PathBuf::from),
        accel: accel(),
    }
}

/// The vhost-blk binary of [`rig`].
pub fn backend_bin() -> PathBuf {
    rig().backend().unwrap_or_else(|e| panic!("{e}"))
}

/// A test's own run directory `<name>-<pid>` under the target's temporary directory.
pub fn run_dir(name: &str) -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("{name}-{}", std::process::id()))
}

/// The spec and rerun record of one boot of `s` (one sweep `variant` or none) on `rig` (usually
/// [`rig`]) into `dir`, seed 1, vCPUs pinned; `timeout` None: the suite's; `backend_bin` None:
/// the suite's own backend choice (QEMU's built-in device for the `builtin-*` suites).
pub fn one_boot_on(
    rig: &Rig,
    s: &Suite,
    variant: Option<&str>,
    dir: &Path,
    run_id: String,
    timeout: Option<Duration>,
    backend_bin: Option<PathBuf>,
) -> (RunSpec, RerunInfo) {
    let boot = Boot {
        dir,
        run_id,
        variant,
        seed: 1,
        timeout,
    };
    rig.one_boot(s, boot, backend_bin)
        .unwrap_or_else(|e| panic!("booted tests need their rig: {e}"))
}
