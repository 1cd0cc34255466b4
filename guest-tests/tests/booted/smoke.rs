//! Booted-guest end-to-end tests: real kernel (`gt_images::ensure("debian-rt")`), real QEMU (TCG
//! unless `VB_ACCEL` says otherwise), real fio in the guest, real backends.
//!
//! They fail (never skip) when no image can be built. The boots are serialised: two TCG guests
//! on a small host would distort each other's timings.

use crate::common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use gt_images::{ImageOptions, KernelImage};
use gt_launch::accel::AccelChoice;
use gt_launch::qemu::Accel;
use gt_launch::rerun_file::RerunInfo;
use gt_launch::settings::{BootSettings, HostSetup};
use gt_launch::RunSpec;
use gt_results::results::{RunResult, RunStatus};
use gt_suite::Suite;
use guest_tests::matrix::{self, MatrixConfig};

use common::KERNEL;

fn kernel() -> KernelImage {
    match gt_images::ensure(KERNEL, &ImageOptions::default()) {
        Ok(k) => k,
        Err(e) => panic!(
            "booted tests need the '{KERNEL}' image and it is not available: {e}\n\
             build it with `cargo run -p guest-tests -- images build {KERNEL}`"
        ),
    }
}

fn spec(suite: &str, dir: &Path, timeout: Duration) -> (RunSpec, RerunInfo) {
    let suite = Suite::load(&gt_suite::default_dir(), suite).unwrap();
    common::one_boot_on(
        &common::rig(),
        &suite,
        None,
        dir,
        format!("e2e-{}", suite.name),
        Some(timeout),
        None,
    )
}

fn keep_dir(name: &str) -> PathBuf {
    // Under target/ so a failed run's console can be read after the test.
    let d =
        Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("e2e-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn explain(r: &RunResult, dir: &Path) -> String {
    let console = std::fs::read_to_string(dir.join("console.log")).unwrap_or_default();
    let tail: Vec<&str> = console.lines().rev().take(15).collect();
    format!(
        "status {:?}\nrun dir {}\nconsole tail:\n{}",
        r.status,
        dir.display(),
        tail.into_iter().rev().collect::<Vec<_>>().join("\n")
    )
}

fn check_smoke(suite: &str) -> RunResult {
    check_smoke_with(suite, None)
}

fn check_smoke_with(suite: &str, backend_bin: Option<PathBuf>) -> RunResult {
    let _g = common::one_guest_at_a_time();
    let dir = keep_dir(suite);
    let (mut spec, rerun) = spec(suite, &dir, Duration::from_secs(240));
    spec.host.backend_bin = backend_bin;
    let (r, _) = matrix::execute_retrying(&spec, rerun, None, common::EARLY_CRASH_RETRIES);
    assert!(r.status.is_ok(), "{}", explain(&r, &dir));
    // Files the run directory must keep.
    for f in [
        "results.json",
        "rerun.json",
        "qemu.argv",
        "qemu.version",
        "libvirt.xml",
        "console.log",
        "results.bin",
        "initrd.cpio",
    ] {
        assert!(dir.join(f).is_file(), "missing {f}");
    }
    let back = RunResult::read(&dir.join("results.json")).unwrap();
    assert_eq!(back.info.kernel, KERNEL);
    assert_eq!(back.provenance.accelerator, common::accel().as_str());
    assert!(back.provenance.qemu.version.contains("QEMU"));
    assert!(!back.provenance.kernel.bzimage_sha256.is_empty());
    assert!(back.provenance.host.cores >= 1);
    // The guest saw 8 queues with 8 request vectors.
    assert_eq!(r.guest.disk.get("hctx").map(String::as_str), Some("8"));
    assert_eq!(
        r.guest.disk.get("request_vectors").map(String::as_str),
        Some("8"),
        "disk: {:?}",
        r.guest.disk
    );
    // fio ran and did I/O.
    let fio_steps: Vec<_> = r.steps.iter().filter(|s| s.fio.is_some()).collect();
    assert!(!fio_steps.is_empty(), "no fio step: {:?}", r.steps);
    for s in &fio_steps {
        assert_eq!(s.rc, Some(0), "step {}", s.label);
        assert!(s.fio.as_ref().unwrap().total_ios() > 0, "step {}", s.label);
    }
    let ready = r
        .metric("harness.boot_to_fio_ready_s")
        .expect("fio-ready time");
    eprintln!(
        "{suite}: boot to fio-ready {ready:.2} s wall ({}), guest /init at {:?} s, total {:?} s",
        common::accel().as_str(),
        r.timings.boot_to_init_s,
        r.timings.total_wall_s
    );
    r
}

#[test]
#[ignore = "boots a guest: ci/test.sh runs these (--ignored)"]
fn smoke_on_qemu_storage_daemon() {
    let r = check_smoke("smoke-qsd");
    let v = r.guest.verify.as_ref().expect("verify artefact");
    assert!(format!("{v:?}").to_lowercase().contains("ok"), "{v:?}");
    assert_eq!(r.provenance.backend.name, "qemu-storage-daemon");
    assert!(r
        .provenance
        .backend
        .argv
        .iter()
        .any(|a| a.contains("vhost-user-blk")));
}

#[test]
#[ignore = "boots a guest: ci/test.sh runs these (--ignored)"]
fn smoke_on_builtin_virtio_scsi() {
    let r = check_smoke("smoke-builtin-scsi");
    assert_eq!(r.provenance.backend.name, "qemu-builtin");
    assert!(r
        .provenance
        .qemu
        .argv
        .iter()
        .any(|a| a == "virtio-scsi-pci,id=scsi0,num_queues=8"));
}

/// Smoke on our own backend: `$VB_BACKEND_BIN`, else the `vhost-blk` built next to this test.
#[test]
#[ignore = "boots a guest: ci/test.sh runs these (--ignored)"]
fn smoke_on_vhost_blk() {
    let bin = std::env::var_os("VB_BACKEND_BIN")
        .map(PathBuf::from)
        .or_else(gt_launch::backend::default_vhost_blk)
        .expect("no vhost-blk binary: `cargo build -p vhost-blk` or set VB_BACKEND_BIN");
    let version = gt_launch::backend::version(&bin.display().to_string());
    assert!(
        version.starts_with("vhost-blk"),
        "{} is not a working vhost-blk (--version: {version}); `cargo build -p vhost-blk`",
        bin.display()
    );
    let in_tree = bin
        .canonicalize()
        .unwrap()
        .starts_with(gt_suite::paths::repo_root().canonicalize().unwrap());
    let r = check_smoke_with("smoke", Some(bin));
    assert_eq!(r.provenance.backend.name, "vhost-blk");
    assert!(r.provenance.backend.version.starts_with("vhost-blk"));
    // The tree's git revision is recorded only for a backend built from this tree.
    assert_eq!(r.provenance.backend.git_rev.is_some(), in_tree);
    let v = r.guest.verify.as_ref().expect("verify artefact");
    assert!(format!("{v:?}").to_lowercase().contains("ok"), "{v:?}");
}

/// A run that cannot finish in time is killed, marked timed out, keeps its console; the
/// matrix goes on to the next run and indexes both.
#[test]
#[ignore = "boots a guest: ci/test.sh runs these (--ignored)"]
fn hang_times_out_and_matrix_goes_on() {
    let _g = common::one_guest_at_a_time();
    let k = kernel();
    let out = keep_dir("timeout-matrix");
    let cfg = MatrixConfig {
        boot: BootSettings {
            suite: Suite::load(&gt_suite::default_dir(), "smoke-builtin-scsi").unwrap(),
            accel: match common::accel() {
                Accel::Kvm => AccelChoice::Kvm,
                Accel::Tcg => AccelChoice::Tcg,
            },
            // Far too short to boot: the guest is still running when the timeout hits.
            timeout: Duration::from_millis(1500),
            host: HostSetup {
                bios: gt_suite::Bios::Qboot,
                backend_bin: None,
                qemu_bin: PathBuf::from("qemu-system-x86_64"),
                pin_vcpus: true,
                host_sched: Default::default(),
            },
            seed: 0,
            progress: false,
        },
        kernels: vec![KERNEL.into()],
        kernel_specs: vec![KERNEL.into()],
        variants: vec![None],
        repeat: 2,
        out: out.clone(),
        retries: 0,
        images: ImageOptions::default(),
        design: matrix::Design::Interleaved,
        until_decided: None,
        extra_backend_args: Vec::new(),
        split_pairs: false,
    };
    let t = std::time::Instant::now();
    let idx = matrix::run(&cfg).unwrap();
    assert!(t.elapsed() < Duration::from_secs(60), "{:?}", t.elapsed());
    assert_eq!(idx.runs.len(), 2);
    for e in &idx.runs {
        assert!(
            matches!(e.status, RunStatus::TimedOut { .. }),
            "{:?}",
            e.status
        );
        let dir = out.join(&e.planned.dir);
        let r = RunResult::read(&dir.join("results.json")).unwrap();
        assert!(matches!(r.status, RunStatus::TimedOut { .. }));
        assert_eq!(r.provenance.kernel.bzimage_sha256, k.bzimage_sha256);
        // The console and the QEMU command line were kept.
        assert!(dir.join("console.log").is_file());
        assert!(dir.join("qemu.argv").is_file());
    }
    let index: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("index.json")).unwrap()).unwrap();
    assert_eq!(index["runs"].as_array().unwrap().len(), 2);
}

/// A backend that cannot start fails the run before any boot; the run is retried once, the
/// failed attempt is kept beside it, and the matrix records both.
#[test]
#[ignore = "boots a guest: ci/test.sh runs these (--ignored)"]
fn backend_start_failure_is_retried_and_kept() {
    let _g = common::one_guest_at_a_time();
    kernel();
    let out = keep_dir("bad-backend");
    let cfg = MatrixConfig {
        boot: BootSettings {
            suite: Suite::load(&gt_suite::default_dir(), "smoke").unwrap(),
            accel: AccelChoice::Tcg,
            timeout: Duration::from_secs(30),
            host: HostSetup {
                bios: gt_suite::Bios::Qboot,
                backend_bin: Some(PathBuf::from("/bin/false")),
                qemu_bin: PathBuf::from("qemu-system-x86_64"),
                pin_vcpus: true,
                host_sched: Default::default(),
            },
            seed: 0,
            progress: false,
        },
        kernels: vec![KERNEL.into()],
        kernel_specs: vec![KERNEL.into()],
        variants: vec![None],
        repeat: 1,
        out: out.clone(),
        retries: 1,
        images: ImageOptions::default(),
        design: matrix::Design::Interleaved,
        until_decided: None,
        extra_backend_args: Vec::new(),
        split_pairs: false,
    };
    let idx = matrix::run(&cfg).unwrap();
    assert_eq!(idx.runs.len(), 1);
    let e = &idx.runs[0];
    assert_eq!(e.attempts, 2);
    let RunStatus::Failed { reason } = &e.status else {
        panic!("{:?}", e.status)
    };
    assert!(reason.contains("before creating its socket"), "{reason}");
    let first = out.join(format!("{}.attempt1", e.planned.dir));
    assert!(first.join("results.json").is_file());
    assert!(first.join("backend.argv").is_file());
    assert!(out.join(&e.planned.dir).join("results.json").is_file());
}

/// `--accel auto` probes KVM with a short bounded boot and caches the verdict per host kernel
/// and QEMU version; the second resolution is answered from the cache at once.
#[test]
#[ignore = "boots a guest: ci/test.sh runs these (--ignored)"]
fn accel_auto_probes_once_and_caches() {
    let _g = common::one_guest_at_a_time();
    let k = kernel();
    let cache = tempfile_dir("accel-cache");
    let q = Path::new("qemu-system-x86_64");
    let v = gt_launch::qemu::version(q).unwrap();
    let t = std::time::Instant::now();
    let a = gt_launch::accel::resolve(AccelChoice::Auto, q, &v, "host-x", &k.bzimage, &cache);
    let first = t.elapsed();
    assert!(
        first < gt_launch::accel::PROBE_LIMIT + Duration::from_secs(5),
        "{first:?}"
    );
    let files: Vec<_> = std::fs::read_dir(cache.join("accel"))
        .unwrap()
        .flatten()
        .collect();
    assert_eq!(files.len(), 1);
    assert_eq!(
        std::fs::read_to_string(files[0].path()).unwrap(),
        a.as_str()
    );
    let t = std::time::Instant::now();
    let b = gt_launch::accel::resolve(AccelChoice::Auto, q, &v, "host-x", &k.bzimage, &cache);
    assert_eq!(a, b);
    assert!(t.elapsed() < Duration::from_millis(100));
    eprintln!("accel auto -> {} (probe {first:?})", a.as_str());
}

fn tempfile_dir(name: &str) -> PathBuf {
    let d = keep_dir(name);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A QEMU that refuses its command line fails the run with QEMU's own message.
#[test]
#[ignore = "boots a guest: ci/test.sh runs these (--ignored)"]
fn qemu_error_is_reported() {
    let _g = common::one_guest_at_a_time();
    let dir = keep_dir("qemu-error");
    let (mut spec, rerun) = spec("smoke-builtin-scsi", &dir, Duration::from_secs(30));
    spec.suite.spec.memory_mib = 1 << 30; // 1 PiB: QEMU cannot allocate it
    let r = matrix::execute(&spec, rerun, None);
    let RunStatus::Failed { reason } = &r.status else {
        panic!("{:?}", r.status)
    };
    assert!(reason.starts_with("qemu exited"), "{reason}");
    assert!(reason.contains("qemu-system-x86_64:"), "{reason}");
}
