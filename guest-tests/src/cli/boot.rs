//! The flags of every command that boots guests (`run`, `bisect`, `judge`), declared once and
//! checked once: which suite, how QEMU and the backend are started, the seed, the progress bar.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use crate::launch::accel::AccelChoice;
use crate::launch::backend;
use crate::suite::{self, Suite};

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
    #[arg(long, default_value = "qemu-system-x86_64")]
    qemu_bin: PathBuf,
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

/// [`BootArgs`] checked against the suite they run.
#[derive(Debug, Clone)]
pub struct Boot {
    pub suite: Suite,
    pub accel: AccelChoice,
    pub timeout: Duration,
    pub backend_bin: Option<PathBuf>,
    pub qemu_bin: PathBuf,
    pub seed: u64,
    pub progress: bool,
}

impl BootArgs {
    /// Loads suite `name` and checks the rest (nothing is created).
    pub fn check(self, name: &str) -> Result<Boot, String> {
        let dir = self.suites_dir.unwrap_or_else(suite::default_dir);
        let suite = Suite::load(&dir, name).map_err(|e| e.to_string())?;
        let accel: AccelChoice = self.accel.parse()?;
        let timeout = self.timeout.unwrap_or(suite.spec.timeout_secs);
        if timeout == 0 {
            return Err("--timeout must be positive".into());
        }
        let backend_bin = match self.backend_bin {
            Some(p) if !p.is_file() => {
                return Err(format!("--backend-bin {}: no such file", p.display()))
            }
            Some(p) => Some(p),
            None => backend::default_vhost_blk(),
        };
        Ok(Boot {
            suite,
            accel,
            timeout: Duration::from_secs(timeout),
            backend_bin,
            qemu_bin: self.qemu_bin,
            seed: self.seed,
            progress: !self.no_progress,
        })
    }
}
