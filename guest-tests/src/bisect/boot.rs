//! How each boot of a bisection or a judge runs: suite, metric, QEMU and backend settings,
//! and where (here, or as Slurm jobs). Shared by [`super::lab`] and [`super::onslurm`].

use std::path::PathBuf;
use std::time::Duration;

use crate::launch::accel::AccelChoice;
use crate::suite::{Bios, Suite};

/// How each boot runs (shared by `bisect` and `judge`).
#[derive(Debug, Clone)]
pub struct BootConfig {
    pub suite: Suite,
    pub metric: String,
    pub accel: AccelChoice,
    pub timeout: Duration,
    pub bios: Bios,
    pub backend_bin: Option<PathBuf>,
    pub qemu_bin: PathBuf,
    pub seed: u64,
    pub pin_vcpus: bool,
    pub progress: bool,
    /// Boot each run as a Slurm job (`--executor slurm`); None: here.
    pub slurm: Option<crate::batch::SlurmOptions>,
}
