//! Seed 000 at scale, booted: the main job's cell of suite `seed000-scale` (62 request queues,
//! one possible guest CPU per queue, 2 of them running) on Debian's prebuilt RT kernel, which
//! has the queue_lock re-check in blk_mq_run_hw_queue (6.12.117), against vhost-blk.
//!
//! Checks what the scale design rests on: QEMU gives the guest 62 CPUs and Linux brings up 2;
//! the disk has 62 hctx; the agent ran one fio job per running CPU in both steps; the lock
//! tracer found the request irq threads contending on queue_lock (the base kernel meets the
//! lock at this scale); the run recorded where its vCPUs ran and the host slice.
//!
//! Slow (one TCG boot, ~40 s), so it runs only with `VB_BOOT_TESTS=1`, as the other booted
//! tests.

mod common;

use std::path::Path;
use std::time::Duration;

use guest_tests::launch::placement::Placement;
use guest_tests::matrix;
use guest_tests::suite::{self, Suite};

const CELL: &str = "q62-c2";

#[test]
fn many_hctx_guest_meets_the_queue_lock_on_the_base_kernel() {
    if std::env::var("VB_BOOT_TESTS").ok().as_deref() != Some("1") {
        eprintln!("skipped: set VB_BOOT_TESTS=1 to boot a guest");
        return;
    }
    let s = Suite::load(&suite::default_dir(), "seed000-scale").unwrap();
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("scale-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let (spec, rerun) = common::one_boot(
        &s,
        Some(CELL),
        &dir,
        "e2e-scale".into(),
        Some(Duration::from_secs(300)),
        Some(common::backend_bin()),
    );
    let (r, _) = matrix::execute_retrying(&spec, rerun, common::EARLY_CRASH_RETRIES);
    assert!(
        r.status.is_ok(),
        "{:?}; run dir {}",
        r.status,
        dir.display()
    );

    // The machine's shape: 62 possible CPUs, 2 online, 62 hctx.
    let meta = &r.guest.meta;
    assert_eq!(meta.get("nproc").map(String::as_str), Some("2"), "{meta:?}");
    assert_eq!(
        meta.get("possible_cpus").map(String::as_str),
        Some("0-61"),
        "{meta:?}"
    );
    assert_eq!(r.guest.disk.get("hctx").map(String::as_str), Some("62"));

    // One fio job per running CPU in each step (fio's own record of the expanded job file),
    // and I/O done.
    for (i, step) in ["scale-randread", "scale-seqread"].iter().enumerate() {
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

    // The base kernel meets queue_lock with 60 idle hctx: contentions recorded.
    let c = r
        .metric("scale-randread.qlock_wait_count_per_kio")
        .expect("lock-wait metric (trace_locks)");
    eprintln!(
        "q62-c2 on {}: {:.1} queue_lock contentions per 1,000 I/Os, mean wait {:?} us, {:?} IOPS",
        common::KERNEL,
        c,
        r.metric("scale-randread.qlock_wait_mean_us"),
        r.metric("scale-randread.iops")
    );
    assert!(
        c > 0.0,
        "no queue_lock contention at 62 hctx on the base kernel"
    );

    // Placement and host slice recorded (launch/placement.rs).
    let host = guest_tests::launch::cpu::allowed_cpus();
    let want = Placement::plan(&host, 2, None).vcpus_per_core();
    assert_eq!(r.metric("harness.running_vcpus_per_core"), Some(want));
    assert!(r.metric("harness.host_slice_ms").is_some_and(|v| v > 0.0));
}
