//! One run, stage by stage: the initrd (images), the boot (launch, feeding the agent's
//! stream parser), the artefacts saved and judged and results.json written (results).

use std::time::Instant;

use crate::agent::StreamParser;
use crate::images::job::{self, JobParams};
use crate::launch::rerun::RerunInfo;
use crate::launch::{self, LaunchError, RunSpec};
use crate::results::{
    self, HostInfo, Launched, Provenance, RunInfo, RunResult, SweepPoint, Timings,
};

/// Runs one boot and always writes `results.json` and `rerun.json` (a launcher error becomes
/// a failed run with what is known).
pub fn execute(spec: &RunSpec, rerun: RerunInfo) -> RunResult {
    let sweep = spec.variant.as_deref().and_then(|v| {
        let value = spec.suite.variant(v)?.value?;
        Some(SweepPoint {
            param: spec.suite.spec.sweep_param.clone()?,
            value,
        })
    });
    let info = RunInfo {
        suite: spec.suite.name.clone(),
        kernel: spec.kernel.variant.clone(),
        repeat: rerun.repeat,
        variant: spec.variant.clone(),
        sweep,
        run_dir: spec.run_dir.clone(),
    };
    let result = match launched(spec, info.clone()) {
        Ok(r) => r,
        Err(e) => {
            let prov = Provenance {
                accelerator: spec.accel.as_str().into(),
                started_at: results::now_rfc3339(),
                seeds: [("run".to_string(), spec.seed)].into_iter().collect(),
                ..Default::default()
            };
            RunResult::failed(info, prov, e.to_string(), Timings::default())
        }
    };
    let _ = std::fs::create_dir_all(&spec.run_dir);
    if let Err(e) = result.write(&spec.run_dir) {
        tracing::error!("{e}");
    }
    if let Err(e) = rerun.write(&spec.run_dir) {
        tracing::error!("{}: {e}", spec.run_dir.display());
    }
    result
}

/// A boot that failed before the agent sent anything (a guest crash in early boot, a backend
/// that did not start): infrastructure, not the kernel's behaviour under test.
pub fn never_reached_agent(r: &RunResult) -> bool {
    !r.status.is_ok() && r.artifacts.is_empty()
}

/// [`execute`], booting again (up to `retries` times) when the guest died before its agent
/// sent anything (an early-boot crash of the emulated machine, not a device problem). Each
/// failed attempt's directory is kept as `<run dir>.attempt<k>`.
pub fn execute_retrying(spec: &RunSpec, rerun: RerunInfo, retries: u32) -> RunResult {
    let mut rec = execute(spec, rerun.clone());
    let mut attempt = 1;
    while attempt <= retries && never_reached_agent(&rec) {
        let mut keep = spec.run_dir.clone().into_os_string();
        keep.push(format!(".attempt{attempt}"));
        eprintln!(
            "run {} never reached the guest agent ({:?}); kept as {}, retrying",
            spec.run_dir.display(),
            rec.status,
            keep.to_string_lossy()
        );
        if std::fs::rename(&spec.run_dir, &keep).is_err() {
            break;
        }
        rec = execute(spec, rerun.clone());
        attempt += 1;
    }
    rec
}

/// The stages of a run that can fail before there is anything to judge.
fn launched(spec: &RunSpec, info: RunInfo) -> Result<RunResult, LaunchError> {
    let t_total = Instant::now();
    let started_at = results::now_rfc3339();
    let mut host = HostInfo::probe();
    let dir = &spec.run_dir;
    let io = |path: &std::path::Path| {
        let path = path.to_path_buf();
        move |source| LaunchError::Io { path, source }
    };
    launch::prepare_dir(dir)?;
    // initrd = base initramfs + job archive.
    let initrd = launch::initrd_path(dir);
    let archive = job::archive(&JobParams {
        run_id: &spec.run_id,
        suite: &spec.suite,
    });
    job::write_initrd(&spec.kernel.initramfs, &archive, &initrd).map_err(io(&initrd))?;
    let initrd_sha = results::sha256_file(&initrd).map_err(io(&initrd))?;
    std::fs::write(
        dir.join("initrd.sha256"),
        format!("{initrd_sha}  initrd.cpio\n"),
    )
    .map_err(io(dir))?;

    let mut parser = StreamParser::default();
    let raw = launch::run(spec, &initrd, &mut parser)?;
    let artifacts = parser.finish();
    results::save_artifacts(&dir.join("artifacts"), &artifacts).map_err(io(dir))?;
    host.loadavg_after = results::loadavg();
    Ok(RunResult::from_launch(
        info,
        Launched {
            spec,
            raw: &raw,
            artifacts: &artifacts,
            host,
            started_at,
            total_wall_s: t_total.elapsed().as_secs_f64(),
        },
    ))
}
