use super::*;
use gt_launch::agent::parse_stream;

use super::fixtures::{fixture_stream, frame, ORDER};

fn info() -> RunInfo {
    RunInfo {
        suite: "seed000".into(),
        kernel: "base".into(),
        repeat: 0,
        variant: None,
        sweep: None,
        run_dir: "runs/x".into(),
        ..Default::default()
    }
}

fn build(stream: &[u8]) -> RunResult {
    RunResult::from_artifacts(
        info(),
        Provenance::default(),
        &parse_stream(stream),
        Timings::default(),
    )
}

#[test]
fn fixture_run_gives_the_expected_metrics() {
    let r = build(&fixture_stream());
    assert_eq!(r.status, RunStatus::Ok);
    assert!(r.parse_errors.is_empty(), "{:?}", r.parse_errors);
    assert!(r.warnings.is_empty(), "{:?}", r.warnings);
    assert_eq!(r.artifacts.len(), ORDER.len());
    assert_eq!(r.provenance.kernel.release, "6.12.117-rt-vb");
    assert_eq!(r.timings.boot_to_init_s, Some(2.48));
    let labels: Vec<&str> = r.steps.iter().map(|s| s.label.as_str()).collect();
    assert_eq!(labels, ["0-verify", "1-randread.fio", "2-rescan:3"]);
    let m = |k: &str| r.metric(k).unwrap_or_else(|| panic!("no metric {k}"));
    assert_eq!(m("randread.total_ios"), 2048.0);
    assert_eq!(m("randread.irq_d_switches"), 28.0);
    assert_eq!(m("randread.irq_s_switches"), 1567.0);
    assert_eq!(m("randread.irq_switches_total"), 1597.0);
    assert_eq!(m("randread.irq_d_per_kio"), 28.0 * 1000.0 / 2048.0);
    assert_eq!(m("randread.req_irqs"), 1700.0);
    assert_eq!(m("randread.irqs_per_io"), 1700.0 / 2048.0);
    assert_eq!(m("randread.d_queue_lock"), 15.0);
    assert_eq!(m("randread.dstack_total"), 28.0);
    assert_eq!(m("randread.func.blk_mq_run_hw_queue"), 24769.0);
    assert_eq!(m("randread.secs"), 11.35);
    assert!(m("randread.iops") > 0.0);
    assert!(m("randread.clat_p99_us") >= m("randread.clat_p50_us"));
    assert!(r.metric("randread.clat_p99_9_us").is_some());
    assert_eq!(m("rescan.n"), 3.0);
    assert_eq!(m("rescan.ms_median"), 3301.25);
    assert_eq!(m("rescan.ms_max"), 3412.0);
    assert_eq!(m("scan.virtio_scsi_init_us"), 315_214.0);
    assert_eq!(m("scan.first_disk_s"), 2.91);
    assert_eq!(m("scan.initcalls_total_us"), 315_214.0 + 41.0 + 1200.0);
    assert_eq!(
        r.metric("scan.pci_subsys_init_us"),
        None,
        "only storage initcalls"
    );
    assert_eq!(
        r.guest.scan.as_ref().unwrap().initcalls_us["pci_subsys_init"],
        1200
    );
    assert_eq!(m("verify.ok"), 1.0);
    // Rescans are ordered by index, not by arrival.
    assert_eq!(r.guest.rescans[0].ms, 3301.25);
    assert_eq!(r.guest.disk["queue_depth"], "4");
}

#[test]
fn write_read_round_trip_and_find_all() {
    let r = build(&fixture_stream());
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("seed000/base/0");
    let p = r.write(&run).unwrap();
    assert_eq!(p, run.join(RESULTS_FILE));
    assert_eq!(RunResult::read(&run).unwrap(), r);
    assert_eq!(RunResult::read(&p).unwrap(), r);
    std::fs::create_dir_all(dir.path().join("broken")).unwrap();
    std::fs::write(dir.path().join("broken").join(RESULTS_FILE), b"{").unwrap();
    let all = RunResult::find_all(dir.path());
    assert_eq!(all.len(), 2);
    assert!(all.iter().filter(|x| x.is_ok()).count() == 1);
    // A future schema is refused, with the version in the error.
    let mut v: serde_json::Value = serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap();
    v["schema_version"] = 99.into();
    std::fs::write(&p, v.to_string()).unwrap();
    let e = RunResult::read(&p).unwrap_err().to_string();
    assert!(e.contains("schema_version 99"), "{e}");
}

#[test]
fn missing_status_and_failed_steps() {
    let s = fixture_stream();
    let cut = s
        .windows(20)
        .position(|w| w == b"\n@@VB-BEGIN status 3")
        .unwrap();
    let r = build(&s[..cut]);
    assert!(matches!(&r.status, RunStatus::Failed { reason } if reason.contains("no status")));
    let s2 =
        String::from_utf8_lossy(&s).replace("step=1-randread.fio rc=0", "step=1-randread.fio rc=1");
    let r = build(s2.as_bytes());
    assert!(matches!(&r.status, RunStatus::Failed { reason } if reason.contains("1-randread.fio")));
    // Host-side verdicts override.
    let mut r = build(&s);
    r.set_status(RunStatus::TimedOut { after_s: 300.0 });
    assert!(!r.status.is_ok());
    let f = RunResult::failed(
        info(),
        Provenance::default(),
        "qemu exited 1",
        Timings::default(),
    );
    assert_eq!(
        f.status,
        RunStatus::Failed {
            reason: "qemu exited 1".into()
        }
    );
}

#[test]
fn malformed_and_truncated_artefacts_are_recorded_not_fatal() {
    let mut s = frame("meta", b"\xff\xfe\x00");
    s.extend(frame("fio.1-x.fio.json", b"{\"jobs\": [ {\"read\": "));
    s.extend(frame("irqsw.1-x.fio", b"pid=1 comm=a state=D count=-5\n"));
    s.extend(frame("rescan.zz", b"ms=1"));
    s.extend(frame("interrupts.before.1-x.fio", b"garbage"));
    s.extend(frame("status", b"ok"));
    s.extend_from_slice(b"\n@@VB-BEGIN dstacks.1-x.fio 999\ncount=1\n");
    let r = build(&s);
    let bad: Vec<&str> = r.parse_errors.iter().map(|p| p.artifact.as_str()).collect();
    assert_eq!(
        bad,
        [
            "meta",
            "fio.1-x.fio.json",
            "irqsw.1-x.fio",
            "rescan.zz",
            "interrupts.before.1-x.fio",
            "dstacks.1-x.fio"
        ]
    );
    assert!(r.parse_errors[5].message.contains("truncated"));
    assert!(r.metrics.is_empty());
    assert!(!r.artifacts[6].complete);
    // Still writable: no NaN sneaks into the JSON.
    let dir = tempfile::tempdir().unwrap();
    r.write(dir.path()).unwrap();
    assert_eq!(RunResult::read(dir.path()).unwrap(), r);
}

#[test]
fn arbitrary_bytes_never_panic() {
    // Deterministic pseudo-random streams with frame markers sprinkled in.
    let base = fixture_stream();
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    for round in 0..200 {
        let mut s = base.clone();
        for _ in 0..(1 + round % 20) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let i = (x as usize) % s.len();
            s[i] = (x >> 32) as u8;
        }
        let r = build(&s);
        assert!(r.metrics.values().all(|v| v.is_finite()));
    }
}

#[test]
fn save_artifacts_sanitises_names() {
    let dir = tempfile::tempdir().unwrap();
    let arts = parse_stream(
        &[
            frame("../../etc/evil", b"x"),
            frame(".hidden", b"y"),
            frame("fio.1-a.fio.json", b"{}"),
        ]
        .concat(),
    );
    save_artifacts(&dir.path().join("a"), &arts).unwrap();
    let mut names: Vec<String> = std::fs::read_dir(dir.path().join("a"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["_.._.._etc_evil", "_.hidden", "fio.1-a.fio.json"]);
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
}

#[test]
fn agent_error_notes_become_issues_and_warnings() {
    let mut s = fixture_stream();
    s.extend(frame(
        "irqsw.3-other.fio",
        b"error=no request irq threads or no sched_switch event\n",
    ));
    s.extend(frame(
        "funcs.3-other.fio",
        b"func=a hits=3\nfunc=b error=not_traceable\n",
    ));
    s.extend(frame(
        "fio.3-other.fio.stderr",
        b"fio: note: both iodepth and numjobs\n",
    ));
    let r = build(&s);
    assert_eq!(r.parse_errors.len(), 1);
    assert_eq!(r.parse_errors[0].artifact, "irqsw.3-other.fio");
    assert!(r.parse_errors[0].message.contains("no request irq threads"));
    assert!(r
        .warnings
        .iter()
        .any(|w| w == "funcs.3-other.fio: func=b error=not_traceable"));
    assert!(r
        .warnings
        .iter()
        .any(|w| w.starts_with("fio.3-other.fio.stderr: fio: note")));
    assert_eq!(r.metric("other.func.a"), Some(3.0));
    assert_eq!(r.steps.last().unwrap().label, "3-other.fio");
}

#[test]
fn real_stream_from_an_rt_guest() {
    // tests/fixtures/streams/README.md says where it comes from.
    let s = std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../guest-tests/tests/fixtures/streams/rt612-virtio-scsi-randread.stream"
    ))
    .unwrap();
    let r = build(&s);
    assert_eq!(r.status, RunStatus::Ok);
    assert!(r.parse_errors.is_empty(), "{:?}", r.parse_errors);
    assert!(r.warnings.is_empty(), "{:?}", r.warnings);
    assert_eq!(r.provenance.kernel.release, "6.12.117");
    let m = |k: &str| r.metric(k).unwrap_or_else(|| panic!("no metric {k}"));
    // Four busy irq threads, S + D == voluntary switches for each.
    let sw = r.steps[1].irq_switches.as_ref().unwrap();
    assert_eq!(sw.cross_check_ok(), Some(true));
    assert_eq!(sw.dropped, Some(0));
    assert_eq!(m("randread.irq_d_switches"), (264 + 292 + 315 + 266) as f64);
    // The stack trigger saw every one of those D switches.
    assert_eq!(m("randread.dstack_total"), m("randread.irq_d_switches"));
    let sites = &r.steps[1].lock_sites.as_ref().unwrap().sites;
    assert_eq!(sites["add_timer_randomness"], 684);
    assert_eq!(sites["free_to_partial_list"], 61 + 212 + 113);
    assert_eq!(sites["virtscsi_req_done"], 65);
    assert_eq!(m("randread.d_queue_lock"), 0.0);
    assert!(!sites.contains_key("(unknown)"));
    assert_eq!(m("randread.func.blk_mq_run_hw_queue"), 0.0);
    assert!(
        m("randread.req_irqs") > 0.0,
        "virtio1-request vectors counted"
    );
    let per_kio = m("randread.irq_d_switches") * 1000.0 / m("randread.total_ios");
    assert_eq!(m("randread.irq_d_per_kio"), per_kio);
    assert!(m("scan.initcalls_total_us") > 0.0);
    assert!(r.guest.scan.as_ref().unwrap().initcalls_us.len() > 100);
    assert!(r.metrics.keys().filter(|k| k.starts_with("scan.")).count() < 20);
    assert_eq!(m("verify.ok"), 1.0);
}

#[test]
fn load_runs_sorts_chronologically_dedups_and_picks_the_first_ok_kernel_as_baseline() {
    // A kernel whose boots all failed stays in the order (it is judged on its failures), after
    // every kernel with a successful boot, so it is never taken as the baseline.
    let dir = tempfile::tempdir().unwrap();
    let base = build(&fixture_stream());
    for (sub, kernel, started, repeat, ok) in [
        ("a", "late", "2024-01-01T00:00:03Z", 0, true),
        ("b", "failed", "2024-01-01T00:00:01Z", 0, false),
        ("c", "early", "2024-01-01T00:00:02Z", 1, true),
        ("d", "early", "2024-01-01T00:00:02Z", 0, true),
    ] {
        let mut r = base.clone();
        r.info.kernel = kernel.into();
        r.info.repeat = repeat;
        r.info.run_dir = dir.path().join(sub);
        r.provenance.started_at = started.into();
        if !ok {
            r.set_status(RunStatus::Failed { reason: "x".into() });
        }
        r.write(&dir.path().join(sub)).unwrap();
    }
    std::fs::write(dir.path().join(RESULTS_FILE), b"{").unwrap();
    // The same runs through two paths count once.
    let l = load_runs(&[dir.path(), &dir.path().join("a")]);
    let order: Vec<(&str, u32)> = l
        .runs
        .iter()
        .map(|r| (r.info.kernel.as_str(), r.info.repeat))
        .collect();
    assert_eq!(
        order,
        [("failed", 0), ("early", 0), ("early", 1), ("late", 0)]
    );
    assert_eq!(l.unreadable.len(), 1);
    assert_eq!(l.kernels(&[]), ["early", "late", "failed"]);
    assert_eq!(l.kernels(&["late".into()]), ["late"]);
}

#[test]
fn a_kept_failed_attempt_never_hides_the_run_that_replaced_it() {
    // The executor keeps a failed first boot as `<dir>.attempt1`; its results.json records the
    // final run's directory. Both must load: the attempt as a failed run, the retry as ok.
    let dir = tempfile::tempdir().unwrap();
    let base = build(&fixture_stream());
    let run = dir.path().join("001-k-r0");
    let mut failed = base.clone();
    failed.info.run_dir = run.clone();
    failed.provenance.started_at = "2024-01-01T00:00:01Z".into();
    failed.set_status(RunStatus::Failed {
        reason: "Oops: int3".into(),
    });
    failed.write(&dir.path().join("001-k-r0.attempt1")).unwrap();
    let mut ok = base.clone();
    ok.info.run_dir = run.clone();
    ok.provenance.started_at = "2024-01-01T00:00:02Z".into();
    ok.write(&run).unwrap();
    let l = load_runs(&[dir.path()]);
    let states: Vec<bool> = l.runs.iter().map(|r| r.status.is_ok()).collect();
    assert_eq!(states, [false, true]);
    // And through two overlapping paths, still once each.
    assert_eq!(load_runs(&[dir.path(), &run]).runs.len(), 2);
}

#[test]
fn storm_artefacts_give_the_storm_metrics_and_a_stuck_io_is_a_warning() {
    let storm = b"path=nr_requests values=64,128 deadline_s=10\ncycles=12000 errors=0\n\
secs=60.00 ios=30000\njobs=8 max_stall_s=1 kernel_warnings=0\nstuck=0 stuck_jobs=\n";
    let mut s = frame("storm.1-quiesce-storm.fio", storm);
    s.extend(frame("steps", b"step=1-quiesce-storm.fio rc=0 secs=61.0\n"));
    s.extend(frame("status", b"ok"));
    let r = build(&s);
    assert!(r.parse_errors.is_empty(), "{:?}", r.parse_errors);
    assert!(r.warnings.is_empty(), "{:?}", r.warnings);
    let m = |k: &str| r.metric(k).unwrap_or_else(|| panic!("no metric {k}"));
    assert_eq!(m("quiesce-storm.storm_cycles"), 12000.0);
    assert_eq!(m("quiesce-storm.storm_cycles_per_s"), 200.0);
    assert_eq!(m("quiesce-storm.storm_ios"), 30000.0);
    assert_eq!(m("quiesce-storm.storm_stuck"), 0.0);
    assert_eq!(m("quiesce-storm.storm_max_stall_s"), 1.0);

    let stuck =
        String::from_utf8_lossy(storm).replace("stuck=0 stuck_jobs=", "stuck=1 stuck_jobs=91");
    let mut s = frame("storm.1-quiesce-storm.fio", stuck.as_bytes());
    s.extend(frame(
        "storm.1-quiesce-storm.fio.stuck",
        b"inflight=1 0 stat=...\n== hctx3/dispatch\nffff {.op=READ}\n",
    ));
    s.extend(frame(
        "status",
        b"fail storm 1-quiesce-storm.fio: I/O of fio job(s) 91 not completed within 10 s",
    ));
    let r = build(&s);
    assert!(r.parse_errors.is_empty(), "{:?}", r.parse_errors);
    assert!(
        matches!(r.status, RunStatus::Failed { .. }),
        "{:?}",
        r.status
    );
    assert_eq!(r.metric("quiesce-storm.storm_stuck"), Some(1.0));
    assert!(
        r.warnings.iter().any(|w| w.contains("debugfs dump kept")),
        "{:?}",
        r.warnings
    );
    assert!(r
        .warnings
        .iter()
        .any(|w| w.contains("missed the storm's deadline")));
}
