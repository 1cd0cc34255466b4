//! How every guest of a command boots, declared once.
//!
//! 1. `run`, `bisect` and `judge` take the same boot flags (`cli::boot`) and check them the same
//!    way into one [`BootSettings`]; `run` may then override the BIOS, the vCPU placement and
//!    the host scheduling with its own flags.
//! 2. Matrices (`MatrixConfig`) and bisections (`BootConfig`) hold a `BootSettings` and do not
//!    repeat its fields.
//! 3. Each boot's [`RunSpec`] starts from [`BootSettings::run_spec`] and its `rerun.json` from
//!    [`BootSettings::rerun_info`]; a caller sets only what is its own (a matrix: the variant,
//!    the repeat, the pair, the pin slot, extra backend arguments).
//! 4. What the host runs a boot with ([`HostSetup`]: firmware, binaries, vCPU pinning, host
//!    scheduling) is one struct, held by `BootSettings` and by both per-boot records (`RunSpec`
//!    and `RerunInfo` flatten it, so their JSON keeps one level).

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::accel::AccelChoice;
use super::qemu::Accel;
use super::rerun_file::RerunInfo;
use super::sched::HostSched;
use super::RunSpec;
use gt_images::KernelImage;
use gt_suite::{Bios, Suite};
use serde::{Deserialize, Serialize};

/// What the host runs a boot with: the same in every boot of a command, and recorded with each.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HostSetup {
    pub bios: Bios,
    /// vhost-blk binary (None: next to this executable).
    pub backend_bin: Option<PathBuf>,
    pub qemu_bin: PathBuf,
    /// Pin vCPU thread k to host CPU k mod n in every boot (`run --vcpu-placement`).
    #[serde(default)]
    pub pin_vcpus: bool,
    /// Real-time host scheduling of QEMU and the backend (`launch::sched`, `run --host-sched`).
    #[serde(default)]
    pub host_sched: HostSched,
}

/// The settings every boot of one command shares.
#[derive(Debug, Clone)]
pub struct BootSettings {
    pub suite: Suite,
    /// As asked (`auto` is resolved once per command, before the first boot).
    pub accel: AccelChoice,
    /// Hard timeout of one boot.
    pub timeout: Duration,
    pub host: HostSetup,
    /// Base seed; a repeat or a step adds its number.
    pub seed: u64,
    /// A progress bar (false: one line per finished boot).
    pub progress: bool,
}

impl BootSettings {
    /// One boot of `kernel` as `run_id` in `run_dir` (which must not exist yet), with `seed`
    /// and the resolved `accel`: no variant, no pair, no pin slot.
    pub fn run_spec(
        &self,
        run_id: String,
        run_dir: &Path,
        kernel: KernelImage,
        accel: Accel,
        seed: u64,
    ) -> RunSpec {
        RunSpec {
            run_id,
            run_dir: run_dir.to_path_buf(),
            kernel,
            suite: self.suite.clone(),
            variant: None,
            seed,
            accel,
            timeout: self.timeout,
            host: self.host.clone(),
            pair: None,
            pin_slot: None,
        }
    }

    /// What `guest-tests rerun` needs to boot `kernel` (its `--kernels` element `kernel_spec`
    /// when that is not its name) again with `seed`: no variant, repeat 0.
    pub fn rerun_info(&self, kernel: String, kernel_spec: Option<String>, seed: u64) -> RerunInfo {
        RerunInfo {
            kernel,
            kernel_spec,
            suite: self.suite.name.clone(),
            suites_dir: self.suite.dir.clone(),
            variant: None,
            repeat: 0,
            seed,
            accel: self.accel,
            timeout_secs: self.timeout.as_secs(),
            host: self.host.clone(),
            extra_backend_args: Vec::new(),
            pin_slot: None,
        }
    }
}
