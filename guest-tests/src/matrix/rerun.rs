//! `guest-tests rerun`: one run again, from its results.json and rerun.json.

use std::path::Path;
use std::time::Duration;

use super::{ensure_kernels, execute, resolve_accel, with_extra_args, MatrixError};
use gt_images::ImageOptions;
use gt_launch::rerun_file::RerunInfo;
use gt_launch::RunSpec;
use gt_results::results::RunResult;
use gt_suite::Suite;

/// Repeats the run described by `results.json` (and the `rerun.json` beside it) into `out`.
pub fn rerun(
    results: &Path,
    out: &Path,
    images_opts: &ImageOptions,
) -> Result<RunResult, MatrixError> {
    let old = RunResult::read(results).map_err(|e| MatrixError::Input(e.to_string()))?;
    let r = RerunInfo::read_beside(results).map_err(MatrixError::Input)?;
    if old.info.kernel != r.kernel || old.info.suite != r.suite {
        return Err(MatrixError::Input(format!(
            "{}: results.json ({} / {}) and rerun.json ({} / {}) disagree",
            results.display(),
            old.info.suite,
            old.info.kernel,
            r.suite,
            r.kernel
        )));
    }
    let suite =
        Suite::load(&r.suites_dir, &r.suite).map_err(|e| MatrixError::Input(e.to_string()))?;
    if let Some(v) = &r.variant {
        if suite.variant(v).is_none() {
            return Err(MatrixError::Input(format!(
                "suite '{}' no longer has variant '{v}'",
                r.suite
            )));
        }
    }
    let mut suite = suite;
    with_extra_args(&mut suite.spec.backend_args, &r.extra_backend_args);
    let spec = r.kernel_spec.clone().unwrap_or_else(|| r.kernel.clone());
    let kernel = ensure_kernels(std::slice::from_ref(&spec), images_opts)?.remove(0);
    let old_hash = &old.provenance.kernel.bzimage_sha256;
    if !old_hash.is_empty() && *old_hash != kernel.bzimage_sha256 {
        tracing::warn!(old = %old_hash, new = %kernel.bzimage_sha256, "kernel image changed since the original run");
    }
    let accel = resolve_accel(r.accel, &r.host.qemu_bin, &kernel)?;
    let spec = RunSpec {
        run_id: format!("{}-{}-rerun", r.suite, r.kernel),
        run_dir: out.to_path_buf(),
        kernel,
        suite,
        variant: r.variant.clone(),
        seed: r.seed,
        accel,
        timeout: Duration::from_secs(r.timeout_secs),
        host: r.host.clone(),
        pair: None,
        pin_slot: r.pin_slot,
    };
    Ok(execute(&spec, r, old.info.ordering.as_ref()))
}
