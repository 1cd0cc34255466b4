//! One run, stage by stage: the initrd (images), the boot (launch, feeding the agent's
//! stream parser), the artefacts saved and judged and results.json written (results).

use std::time::Instant;

use gt_images::job::{self, JobParams};
use gt_launch::agent::StreamParser;
use gt_launch::rerun_file::RerunInfo;
use gt_launch::{LaunchError, RunSpec};
use gt_ordering::OrderingRecord;
use gt_results::results::{
    self, HostInfo, Launched, Provenance, RunInfo, RunResult, RunStatus, SweepPoint, Timings,
};

/// What results.json says about the run `spec` describes (repeat `repeat` of the matrix), with
/// its kernel's memory-model check made when the run was planned (`ordering`).
pub fn run_info(spec: &RunSpec, repeat: u32, ordering: Option<&OrderingRecord>) -> RunInfo {
    let sweep = spec.variant.as_deref().and_then(|v| {
        let var = spec.suite.variant(v)?;
        Some(SweepPoint {
            param: spec.suite.spec.sweep_param.clone()?,
            value: var.value?,
            series: var.running_cpus.map(|k| format!("{k} running vCPUs")),
        })
    });
    RunInfo {
        suite: spec.suite.name.clone(),
        kernel: spec.kernel.variant.clone(),
        repeat,
        variant: spec.variant.clone(),
        sweep,
        run_dir: spec.run_dir.clone(),
        pair: spec.pair,
        primary_metric: spec.suite.spec.primary_metric.clone(),
        secondary_metric: spec.suite.spec.secondary_metric.clone(),
        judgement: spec.suite.spec.judgement.clone(),
        verdict: spec.suite.spec.verdict.clone(),
        ordering: ordering.cloned(),
    }
}

/// Runs one boot and always writes `results.json` and `rerun.json` (a launcher error becomes
/// a failed run with what is known); `ordering` goes into results.json ([`run_info`]).
pub fn execute(spec: &RunSpec, rerun: RerunInfo, ordering: Option<&OrderingRecord>) -> RunResult {
    let info = run_info(spec, rerun.repeat, ordering);
    let cell = spec.for_cell();
    let result = match cell.and_then(|cell| launched(&cell, info.clone())) {
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

/// The guest kernel died of an `int3` Oops under TCG: a vCPU ran a breakpoint the kernel's
/// live text patching (static keys, ftrace) had already removed. Seen at boot and mid-run
/// with unchanged kernels and suites (QEMU 7.2 MTTCG), so it is the emulated machine's fault,
/// not the kernel's behaviour under test; a kernel that really dies this way on every boot
/// still fails once the retries are used up.
pub fn died_of_stale_int3(r: &RunResult) -> bool {
    r.provenance.accelerator == "tcg"
        && matches!(&r.status, RunStatus::Failed { reason } if reason.contains(STALE_INT3_OOPS))
}

/// The console line (and so the failure reason) of that crash.
pub const STALE_INT3_OOPS: &str = "Oops: int3";

/// Whether a failed run says nothing about the kernel: [`never_reached_agent`] or
/// [`died_of_stale_int3`].
pub fn worth_retrying(r: &RunResult) -> bool {
    never_reached_agent(r) || died_of_stale_int3(r)
}

/// [`execute`], booting again (up to `retries` times) when the run failed for the emulated
/// machine's reasons ([`worth_retrying`]: the guest died before its agent sent anything, or
/// of TCG's stale-int3 Oops), not a device problem. Each failed attempt's directory is kept as
/// `<run dir>.attempt<k>`, and the index counts the attempts.
pub fn execute_retrying(
    spec: &RunSpec,
    rerun: RerunInfo,
    ordering: Option<&OrderingRecord>,
    retries: u32,
) -> (RunResult, u32) {
    let mut rec = execute(spec, rerun.clone(), ordering);
    let mut attempt = 1;
    while attempt <= retries && worth_retrying(&rec) {
        let mut keep = spec.run_dir.clone().into_os_string();
        keep.push(format!(".attempt{attempt}"));
        eprintln!(
            "run {} failed for the emulated machine's reasons ({:?}); kept as {}, retrying",
            spec.run_dir.display(),
            rec.status,
            keep.to_string_lossy()
        );
        if std::fs::rename(&spec.run_dir, &keep).is_err() {
            break;
        }
        rec = execute(spec, rerun.clone(), ordering);
        attempt += 1;
    }
    (rec, attempt)
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
    gt_launch::prepare(spec)?;
    // initrd = base initramfs + job archive.
    let initrd = gt_launch::initrd_path(dir);
    let offsets = spec
        .kernel
        .bzimage
        .with_file_name(gt_images::kernel::offsets::FILE);
    let archive = job::archive(&JobParams {
        run_id: &spec.run_id,
        suite: &spec.suite,
        lock_offsets: std::fs::read_to_string(offsets).ok(),
    });
    job::write_initrd(&spec.kernel.initramfs, &archive, &initrd).map_err(io(&initrd))?;
    let initrd_sha = results::sha256_file(&initrd).map_err(io(&initrd))?;
    std::fs::write(
        dir.join("initrd.sha256"),
        format!("{initrd_sha}  initrd.cpio\n"),
    )
    .map_err(io(dir))?;

    let mut parser = StreamParser::default();
    let raw = gt_launch::run(spec, &initrd, &mut parser)?;
    let artifacts = parser.finish();
    results::save_artifacts(&dir.join("artifacts"), &artifacts).map_err(io(dir))?;
    host.loadavg_after = gt_launch::host::loadavg();
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

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;
    use std::path::{Path, PathBuf};
    use std::time::Duration;

    use super::*;
    use gt_images::KernelImage;
    use gt_launch::qemu::Accel;
    use gt_launch::rerun_file::RerunInfo;
    use gt_results::results::fixtures::fixture_stream;
    use gt_results::results::{RunStatus, RESULTS_FILE};
    use gt_suite::Suite;

    /// A stand-in for qemu-system-x86_64 (no guest is booted): `-version` prints a version;
    /// otherwise `body` runs with `$data` (a file holding `stream`), `$out` (the results
    /// chardev's file) and `$con` (the console, the first `-serial file:`) set.
    fn qemu_script(dir: &Path, stream: &[u8], body: &str) -> PathBuf {
        let data = dir.join("stream.bin");
        std::fs::write(&data, stream).unwrap();
        let script = dir.join("fake-qemu");
        std::fs::write(
            &script,
            format!(
                "#!/bin/sh\n\
                 if [ \"$1\" = -version ]; then echo 'QEMU emulator version 9.9.9 (fake)'; exit 0; fi\n\
                 data={d}\n\
                 for a in \"$@\"; do case \"$a\" in file,id=res,path=*) out=${{a#file,id=res,path=}};; \
                 file:*) [ -n \"$con\" ] || con=${{a#file:}};; esac; done\n{body}",
                d = data.display()
            ),
        )
        .unwrap();
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        script
    }

    /// Writes `stream` to the results chardev's file in two parts and exits.
    fn fake_qemu(dir: &Path, stream: &[u8]) -> PathBuf {
        qemu_script(
            dir,
            stream,
            "head -c 300 \"$data\" > \"$out\"\nsleep 0.3\ntail -c +301 \"$data\" >> \"$out\"\n",
        )
    }

    fn spec(dir: &Path, qemu_bin: PathBuf) -> (RunSpec, RerunInfo) {
        let suite = Suite::load(&gt_suite::default_dir(), "smoke-builtin-scsi").unwrap();
        let initramfs = dir.join("base.cpio");
        std::fs::write(&initramfs, b"").unwrap();
        let kernel = KernelImage {
            variant: "fake".into(),
            release: String::new(),
            bzimage: dir.join("bzImage"),
            bzimage_sha256: "00".into(),
            initramfs,
            initramfs_sha256: "11".into(),
            cmdline: String::new(),
            boot_trace_events: true,
            inputs: Vec::new(),
        };
        let settings = gt_launch::settings::BootSettings {
            suite: suite.clone(),
            accel: gt_launch::accel::AccelChoice::Tcg,
            timeout: Duration::from_secs(30),
            host: gt_launch::settings::HostSetup {
                bios: suite.spec.bios,
                backend_bin: None,
                qemu_bin,
                pin_vcpus: false,
                host_sched: Default::default(),
            },
            seed: 3,
            progress: false,
        };
        let spec = settings.run_spec("fake".into(), &dir.join("run"), kernel, Accel::Tcg, 3);
        let rerun = settings.rerun_info("fake".into(), None, 3);
        (spec, rerun)
    }

    #[test]
    fn a_launched_run_is_parsed_once_judged_and_written() {
        let d = tempfile::tempdir().unwrap();
        let stream = fixture_stream();
        let (spec, rerun) = spec(d.path(), fake_qemu(d.path(), &stream));
        let r = execute(&spec, rerun, None);
        let dir = &spec.run_dir;
        // The stream as launch saw it, parsed by the agent, derived by results.
        assert_eq!(std::fs::read(dir.join("results.bin")).unwrap(), stream);
        let expect = RunResult::from_artifacts(
            r.info.clone(),
            r.provenance.clone(),
            &gt_launch::agent::parse_stream(&stream),
            r.timings.clone(),
        );
        assert_eq!(r.steps, expect.steps);
        assert_eq!(r.artifacts, expect.artifacts);
        for (k, v) in &expect.metrics {
            assert_eq!(r.metrics.get(k), Some(v), "{k}");
        }
        assert!(r.metric("harness.qemu_wall_s").is_some());
        assert!(r.timings.wall_to_first_artifact_s.is_some());
        assert!(r.timings.total_wall_s.is_some());
        // QEMU ended, the guest said ok, the 8 request vectors the suite expects are there.
        assert_eq!(r.status, RunStatus::Ok);
        assert_eq!(
            r.provenance.qemu.version,
            "QEMU emulator version 9.9.9 (fake)"
        );
        assert_eq!(r.provenance.backend.name, "qemu-builtin");
        assert_eq!(r.provenance.seeds["run"], 3);
        assert!(!r.provenance.started_at.is_empty());
        assert!(dir.join("initrd.cpio").is_file() && dir.join("initrd.sha256").is_file());
        assert!(dir.join("artifacts").join("meta").is_file());
        assert_eq!(RunResult::read(&dir.join(RESULTS_FILE)).unwrap(), r);
        assert!(dir.join("rerun.json").is_file());
    }

    #[test]
    fn a_launcher_error_is_a_failed_run_with_what_is_known() {
        let d = tempfile::tempdir().unwrap();
        let (spec, rerun) = spec(d.path(), d.path().join("no-such-qemu"));
        let r = execute(&spec, rerun, None);
        let RunStatus::Failed { reason } = &r.status else {
            panic!("{:?}", r.status)
        };
        assert!(reason.contains("no-such-qemu"), "{reason}");
        assert!(never_reached_agent(&r));
        assert!(spec.run_dir.join(RESULTS_FILE).is_file());
    }

    /// First call: part of the stream, then the guest "dies" of an int3 Oops (console);
    /// later calls: the whole stream.
    fn qemu_crashing_once(dir: &Path, stream: &[u8]) -> PathBuf {
        let body = format!(
            "if [ ! -e {m} ]; then : > {m}; head -c 400 \"$data\" > \"$out\"; \
             printf '[ 4.07] Oops: int3: 0000 [#1] PREEMPT_RT SMP NOPTI\\n\
             [ 4.08] Kernel panic - not syncing: Fatal exception in interrupt\\n' > \"$con\"; exit 0; fi\n\
             cat \"$data\" > \"$out\"\n",
            m = dir.join("crashed-once").display()
        );
        qemu_script(dir, stream, &body)
    }

    #[test]
    fn a_mid_run_int3_oops_under_tcg_is_booted_again_and_kept() {
        let d = tempfile::tempdir().unwrap();
        let (spec, rerun) = spec(d.path(), qemu_crashing_once(d.path(), &fixture_stream()));
        let (r, attempts) = execute_retrying(&spec, rerun, None, 2);
        assert_eq!(r.status, RunStatus::Ok);
        assert_eq!(attempts, 2);
        let first = RunResult::read(&d.path().join("run.attempt1").join(RESULTS_FILE)).unwrap();
        // The agent had sent something, so only the int3 rule can have retried it.
        assert!(!first.artifacts.is_empty(), "{first:?}");
        assert!(!never_reached_agent(&first) && died_of_stale_int3(&first));
        let RunStatus::Failed { reason } = &first.status else {
            panic!("{:?}", first.status)
        };
        assert!(reason.contains("Oops: int3"), "{reason}");
    }

    #[test]
    fn only_tcg_int3_oopses_count_as_the_emulators_fault() {
        let fail = |accel: &str, reason: &str| {
            let prov = Provenance {
                accelerator: accel.into(),
                ..Default::default()
            };
            let mut r = RunResult::failed(RunInfo::default(), prov, reason, Timings::default());
            r.artifacts.push(gt_results::results::ArtifactRecord {
                name: "meta".into(),
                bytes: 1,
                complete: true,
            });
            r
        };
        let oops = "guest ended without a status artefact (3 artefacts); console: [4.0] Oops: int3: 0000 [#1]";
        assert!(worth_retrying(&fail("tcg", oops)));
        assert!(!worth_retrying(&fail("kvm", oops)));
        let bug = "guest ended without a status artefact (3 artefacts); console: [4.0] BUG: unable to handle page fault";
        assert!(!worth_retrying(&fail("tcg", bug)));
        assert!(!worth_retrying(&fail("tcg", "guest: fio rc=1")));
    }
}
