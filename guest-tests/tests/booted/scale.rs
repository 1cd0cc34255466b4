//! Seed 000 at scale, booted: the main job's cell of suite `seed000-scale` (62 request queues,
//! one possible guest CPU per queue, 2 of them running) on Debian's prebuilt RT kernel, which
//! has the queue_lock re-check in blk_mq_run_hw_queue (6.12.117), against vhost-blk.
//!
//! Checks what the scale design rests on: QEMU gives the guest 62 CPUs and Linux brings up 2;
//! the disk has 62 hctx; the agent ran one fio job per running CPU in both steps; the lock
//! tracer found the request irq threads contending on queue_lock (the base kernel meets the
//! lock at this scale) in one of at most three boots; the run recorded where its vCPUs ran and
//! the host slice.
//!
//! Also the 128-queue disk of suites `verify128` and `verify128-scsi` (below), on the project's
//! rt128 kernel.
//!
//! Slow (one TCG boot each, ~40-60 s), so they are ignored by plain `cargo test`, as the other
//! booted tests.

// A test reads as one scenario: exempt from clippy::too_many_lines (non-test code is not).
#![allow(clippy::too_many_lines)]

use crate::common;

use std::path::Path;
use std::time::Duration;

use gt_launch::placement::Placement;
use gt_suite::Suite;
use guest_tests::drill::Rig;
use guest_tests::matrix;

const CELL: &str = "q62-c2";

/// The machine a boot must have had: online CPUs, possible CPUs, the disk's hctx.
struct Shape {
    nproc: &'static str,
    possible: &'static str,
    hctx: &'static str,
}

/// One boot of `s` (cell `variant`) on `rig`'s kernel into `dir` on vhost-blk, retried past the
/// early-boot Oops; asserts that it succeeded and had `shape`.
fn boot_with_shape(
    rig: &Rig,
    s: &Suite,
    variant: Option<&str>,
    dir: &Path,
    timeout: Option<Duration>,
    shape: &Shape,
) -> gt_results::results::RunResult {
    let _ = std::fs::remove_dir_all(dir);
    let run_id = format!("e2e-{}", s.name);
    let (spec, rerun) = common::one_boot_on(
        rig,
        s,
        variant,
        dir,
        run_id,
        timeout,
        Some(common::backend_bin()),
    );
    let (r, _) = matrix::execute_retrying(&spec, rerun, None, common::EARLY_CRASH_RETRIES);
    assert!(
        r.status.is_ok(),
        "{:?}; run dir {}",
        r.status,
        dir.display()
    );
    let meta = &r.guest.meta;
    assert_eq!(
        meta.get("nproc").map(String::as_str),
        Some(shape.nproc),
        "{meta:?}"
    );
    assert_eq!(
        meta.get("possible_cpus").map(String::as_str),
        Some(shape.possible),
        "{meta:?}"
    );
    assert_eq!(
        r.guest.disk.get("hctx").map(String::as_str),
        Some(shape.hctx)
    );
    r
}

/// Boots the contention claim may take, fixed before any boot: the claim is that the base
/// kernel meets queue_lock in at least one of them. Locally each boot saw ~100-140 waits; one
/// CI run (stop 51) saw none in its one boot for a reason not yet known, so a boot without a
/// wait is printed with what the host and the tracer saw, and the next boot is taken.
const CONTENTION_BOOTS: usize = 3;

#[test]
#[ignore = "boots a guest: ci/test.sh runs these (--ignored)"]
fn many_hctx_guest_meets_the_queue_lock_on_the_base_kernel() {
    let s = Suite::load(&gt_suite::default_dir(), "seed000-scale").unwrap();
    let mut seen = Vec::new();
    for boot in 1..=CONTENTION_BOOTS {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("scale-{}-{boot}", std::process::id()));
        let waits = one_scale_boot(&s, &dir);
        eprintln!("q62-c2 boot {boot} of at most {CONTENTION_BOOTS}: {waits:.1} queue_lock waits per 1,000 I/Os (both steps)");
        seen.push(waits);
        if waits > 0.0 {
            return;
        }
    }
    panic!("no queue_lock contention at 62 hctx on the base kernel in {CONTENTION_BOOTS} boots: {seen:?}");
}

/// One boot of the q62-c2 cell into `dir`: asserts its shape (62 possible CPUs, 2 online, 62
/// hctx), one fio job per running CPU in each step with I/O done, and the placement recorded;
/// returns the queue_lock waits per 1,000 I/Os of both steps together.
fn one_scale_boot(s: &Suite, dir: &Path) -> f64 {
    let shape = Shape {
        nproc: "2",
        possible: "0-61",
        hctx: "62",
    };
    let r = boot_with_shape(
        &common::rig(),
        s,
        Some(CELL),
        dir,
        Some(Duration::from_secs(300)),
        &shape,
    );
    let steps = ["scale-randread", "scale-seqread"];
    for (i, step) in steps.iter().enumerate() {
        let st = r.steps.iter().find(|x| x.name == *step).expect(step);
        let fio = st.fio.as_ref().expect("fio result");
        assert!(fio.total_ios() > 1000, "{step}: {} I/Os", fio.total_ios());
        let raw = dir.join(format!("artifacts/fio.{}-{step}.fio.json", i + 1));
        let json: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&raw).unwrap()).unwrap();
        let opts = &json["jobs"][0]["job options"];
        assert_eq!(opts["numjobs"], "2", "{step}: {opts}");
        assert_eq!(opts["cpus_allowed"], "0-1", "{step}: {opts}");
    }
    // Placement and host slice recorded (launch/placement.rs).
    let host = gt_launch::cpu::allowed_cpus();
    let want = Placement::plan(&host, 2, None).vcpus_per_core();
    assert_eq!(r.metric("harness.running_vcpus_per_core"), Some(want));
    assert!(r.metric("harness.host_slice_ms").is_some_and(|v| v > 0.0));

    let m = |name: &str| r.metric(name);
    for step in steps {
        eprintln!(
            "q62-c2 on {} {step}: queue_lock {:?} waits/kio (mean {:?} us), all locks {:?} waits/kio, \
             irq threads into D {:?}/kio, {:?} IOPS; host: {} online CPUs, load {}, steal {:?} CPU/s",
            common::KERNEL,
            m(&format!("{step}.qlock_wait_count_per_kio")),
            m(&format!("{step}.qlock_wait_mean_us")),
            m(&format!("{step}.lockwait_count_per_kio")),
            m(&format!("{step}.dsleep_per_kio")),
            m(&format!("{step}.iops")),
            host.len(),
            std::fs::read_to_string("/proc/loadavg").unwrap_or_default().trim(),
            m("harness.host_steal_cpu_per_s"),
        );
    }
    steps
        .iter()
        .map(|step| {
            m(&format!("{step}.qlock_wait_count_per_kio")).expect("lock-wait metric (trace_locks)")
        })
        .sum()
}

/// The kernel of the 128-queue tests: the project's own PREEMPT_RT 6.12 (NR_CPUS=128), not
/// Debian's. With 128 possible CPUs Debian's kernel dies of TCG's stale-int3 `Oops: int3` before
/// the agent in a good share of boots (4 of 12 here, docs/results/scale128; all 4 attempts of
/// the SCSI test in one CI run), a fault of QEMU's multi-threaded TCG during the kernel's live
/// text patching, not of the backend; rt128's boots have not shown it. `$VB_128_KERNEL`
/// overrides (e.g. `debian-rt`).
const KERNEL_128: &str = "rt128";

/// 128 request queues on vhost-blk as a user runs it (suites `verify128`, `verify128-scsi`;
/// docs/design/128-queues.md): QEMU gives the guest 128 possible CPUs, Linux brings up 2 and
/// the agent onlines CPUs 64 and 127; the disk has 128 hctx and 128 request vectors; the
/// pattern verify and fio's crc32c verify pass from each of the 4 CPUs; the backend's
/// statistics count reads and writes on exactly the queues of those CPUs (0 and 1 on
/// vhost-user-backend's threads, 64 and 127 on vhost-blk's own) and none on the other 124.
/// `VB_QEMU` picks the QEMU (the system's 7.2 by default), [`KERNEL_128`] the kernel.
fn a_128_queue_disk(suite_name: &str, first_request_vring: usize) {
    let s = Suite::load(&gt_suite::default_dir(), suite_name).unwrap();
    let dir =
        Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("{suite_name}-{}", std::process::id()));
    let shape = Shape {
        nproc: "4",
        possible: "0-127",
        hctx: "128",
    };
    let kernel = std::env::var("VB_128_KERNEL").unwrap_or_else(|_| KERNEL_128.into());
    let r = boot_with_shape(&common::rig_on(&kernel), &s, None, &dir, None, &shape);
    for step in ["verify", "verify-percpu"] {
        let st = r.steps.iter().find(|x| x.name == step).expect(step);
        assert_eq!(st.rc, Some(0), "{step}");
    }
    let fio = r
        .steps
        .iter()
        .find(|x| x.name == "verify-percpu")
        .and_then(|s| s.fio.as_ref())
        .expect("fio result");
    assert!(fio.job_errors.is_empty(), "{:?}", fio.job_errors);
    // fio's own record: one job per online CPU, pinned to the online list.
    let raw = dir.join("artifacts/fio.2-verify-percpu.fio.json");
    // fio prints its warnings (shared file, several writers) before the JSON.
    let text = std::fs::read_to_string(&raw).unwrap();
    let json: serde_json::Value =
        serde_json::from_str(text.get(text.find('{').unwrap_or(0)..).unwrap_or("")).unwrap();
    let opts = &json["global options"];
    assert_eq!(opts["numjobs"], "4", "{opts}");
    assert_eq!(opts["cpus_allowed"], "0-1,64,127", "{opts}");
    assert_eq!(
        json["jobs"].as_array().map(Vec::len),
        Some(4),
        "one job per CPU"
    );

    let stats: serde_json::Value =
        serde_json::from_slice(&std::fs::read(gt_launch::backend::stats_file(&dir)).unwrap())
            .unwrap();
    let queues = stats["queues"].as_array().unwrap();
    assert_eq!(queues.len(), first_request_vring + 128);
    let driven = [0, 1, 64, 127].map(|q| first_request_vring + q);
    for (v, q) in queues.iter().enumerate().skip(first_request_vring) {
        let n = |k: &str| q["requests"][k].as_u64().unwrap_or(0);
        let (reads, writes) = (n("read"), n("write"));
        if driven.contains(&v) {
            assert!(
                reads > 0 && writes > 0,
                "vring {v}: {reads} reads, {writes} writes"
            );
        } else {
            assert_eq!(
                q["requests"]
                    .as_object()
                    .map(|m| m.values().filter_map(|x| x.as_u64()).sum::<u64>()),
                Some(0),
                "vring {v} of an offline CPU served requests: {q}"
            );
        }
    }
    eprintln!(
        "{suite_name}: 128 hctx, I/O on vrings {driven:?}, fio {} I/Os, {:?} s",
        fio.total_ios(),
        r.timings.total_wall_s
    );
}

#[test]
#[ignore = "boots a guest: ci/test.sh runs these (--ignored)"]
fn blk_128_queues_every_driven_queue_verified() {
    a_128_queue_disk("verify128", 0);
}

#[test]
#[ignore = "boots a guest: ci/test.sh runs these (--ignored)"]
fn scsi_128_request_queues_every_driven_queue_verified() {
    // virtio-scsi: vrings 0 and 1 are the control and event queues.
    a_128_queue_disk("verify128-scsi", 2);
}
