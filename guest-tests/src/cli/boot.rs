//! The flags of every command that boots guests (`run`, `bisect`, `judge`), declared once and
//! checked once: which suite, which QEMU (`--qemu 7.2|10` or `--qemu-bin`, launch::qemus) and
//! how it and the backend are started, the seed, the progress bar.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use gt_launch::accel::AccelChoice;
use gt_launch::sched::HostSched;
use gt_launch::settings::{BootSettings, HostSetup};
use gt_launch::{backend, qemu, qemus};
use gt_suite::Suite;

#[derive(Args, Debug, Clone)]
pub struct BootArgs {
    /// tcg, kvm or auto (probe KVM once, cache the verdict).
    #[arg(long, default_value = "auto")]
    accel: String,
    /// Hard timeout per boot in seconds (default: the suite's).
    #[arg(long)]
    timeout: Option<u64>,
    /// vhost-blk binary (default: next to this executable).
    #[arg(long)]
    backend_bin: Option<PathBuf>,
    /// A QEMU binary (default: the system's qemu-system-x86_64; Debian 12: 7.2).
    #[arg(long, conflicts_with = "qemu")]
    qemu_bin: Option<PathBuf>,
    /// A supported QEMU by version: 7.2 (the system's) or 10 (bookworm-backports, unpacked
    /// into the cache by ci/fetch-qemu10.sh).
    #[arg(long, value_name = "VERSION")]
    qemu: Option<String>,
    /// Base seed; repeat r (or boot r of a step) uses seed + r.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Where suites are looked up (default: guest-tests/suites).
    #[arg(long)]
    suites_dir: Option<PathBuf>,
    /// One line per finished boot instead of a progress bar.
    #[arg(long)]
    no_progress: bool,
}

impl BootArgs {
    /// Loads suite `name` and checks the rest (nothing is created): the suite's BIOS, pinned
    /// vCPUs, the host's own scheduling (`run` may override these three).
    pub fn check(self, name: &str) -> Result<BootSettings, String> {
        let dir = self.suites_dir.unwrap_or_else(gt_suite::default_dir);
        let suite = Suite::load(&dir, name).map_err(|e| e.to_string())?;
        let accel: AccelChoice = self.accel.parse()?;
        let timeout = self.timeout.unwrap_or(suite.spec.timeout_secs);
        if timeout == 0 {
            return Err("--timeout must be positive".into());
        }
        let qemu_bin = match (self.qemu_bin, self.qemu) {
            (Some(p), _) => p,
            (None, Some(v)) => qemus::resolve(&v, &gt_suite::paths::cache_dir())?,
            (None, None) => PathBuf::from(qemus::SYSTEM_QEMU),
        };
        if let Some(min) = suite.spec.min_qemu.as_deref() {
            qemus::check_min(&suite.name, Some(min), &qemu::version(&qemu_bin)?)?;
        }
        let backend_bin = match self.backend_bin {
            Some(p) if !p.is_file() => {
                return Err(format!("--backend-bin {}: no such file", p.display()))
            }
            Some(p) => Some(p),
            None => backend::default_vhost_blk(),
        };
        Ok(BootSettings {
            host: HostSetup {
                bios: suite.spec.bios,
                backend_bin,
                qemu_bin,
                pin_vcpus: true,
                host_sched: HostSched::default(),
            },
            suite,
            accel,
            timeout: Duration::from_secs(timeout),
            seed: self.seed,
            progress: !self.no_progress,
        })
    }
}
