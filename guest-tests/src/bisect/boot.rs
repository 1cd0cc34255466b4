//! How each boot of a bisection or a judge runs: suite, metric, QEMU and backend settings,
//! and where (here, or as Slurm jobs). Shared by [`super::lab`] and `super::onslurm`.

use gt_launch::settings::BootSettings;

/// How each boot runs (shared by `bisect` and `judge`).
#[derive(Debug, Clone)]
pub struct BootConfig {
    /// Suite, QEMU, backend, seed and the rest, as `run` has them.
    pub settings: BootSettings,
    /// The metric a boot is judged by.
    pub metric: String,
    /// Boot each run as a Slurm job (`--executor slurm`); None: here.
    pub slurm: Option<crate::batch::SlurmOptions>,
}
