//! One bisection boot handed to Slurm: the candidate's run as a one-task job array, planned and
//! submitted exactly as `run --executor slurm` does ([`crate::batch::submit`]), waited for,
//! and read back from its results.json. The step logic does not know where its boots ran.

use std::path::Path;

use super::boot::BootConfig;
use super::search::Failure;
use crate::batch::{self, BatchError, SlurmOptions};
use crate::matrix::{Design, MatrixConfig};
use gt_images::spec::KernelSpec;
use gt_images::ImageOptions;
use gt_launch::settings::BootSettings;
use gt_results::results::{load_runs, RunResult};

/// Boots `spec` once as a Slurm job into the matrix directory `run_dir` (its run is the one
/// subdirectory). Bad input (no Slurm, an unknown partition, a path the nodes cannot see)
/// aborts the bisection; a job that ended without a successful run is the caller's skip.
pub fn boot(
    b: &BootConfig,
    spec: &KernelSpec,
    run_dir: &Path,
    seed: u64,
    o: &SlurmOptions,
) -> Result<RunResult, Failure> {
    let cfg = MatrixConfig {
        boot: BootSettings {
            seed,
            progress: false,
            ..b.settings.clone()
        },
        kernels: vec![spec.label.clone()],
        kernel_specs: vec![spec.text.clone()],
        variants: vec![None],
        repeat: 1,
        out: run_dir.to_path_buf(),
        retries: 1,
        images: ImageOptions::default(),
        design: Design::Interleaved,
        until_decided: None,
        extra_backend_args: Vec::new(),
        split_pairs: false,
    };
    let o = SlurmOptions {
        detach: false,
        ..o.clone()
    };
    match batch::submit(&cfg, &o, &mut |l| println!("    slurm: {l}")) {
        Ok(batch::SubmitOutcome::Finished(_)) => {}
        Ok(batch::SubmitOutcome::Detached(_)) => {
            return Err(Failure::Abort("the Slurm job was detached".into()))
        }
        Err(e @ BatchError::Input(_)) => return Err(Failure::Abort(e.to_string())),
        Err(e) => return Err(Failure::Skip(format!("Slurm: {e}"))),
    }
    load_runs(&[run_dir])
        .runs
        .into_iter()
        .next()
        .ok_or_else(|| Failure::Skip(format!("no results.json under {}", run_dir.display())))
}
