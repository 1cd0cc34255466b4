use super::*;

#[test]
fn fds_within_two_memory_within_a_factor_of_two() {
    assert!(fds_flat(&[88, 89, 90]));
    assert!(!fds_flat(&[88, 91]));
    assert!(memory_flat(&[8748, 10960, 12124, 15648]));
    assert!(memory_flat(&[1000, 2000]));
    assert!(!memory_flat(&[1000, 2001]));
    assert!(!fds_flat(&[]) && !memory_flat(&[]));
}

#[test]
fn resubmissions_are_counted_per_kind_of_queue() {
    let log = "x INFO vhost_blk::device::backend: inflight requests of the previous backend \
               queue=1 call=true resubmit=8 repaired=0 discarded=0 used=0 next_avail=8\n\
               y INFO ...: inflight requests of the previous backend queue=3 resubmit=5 used=9\n\
               z INFO ...: inflight requests of the previous backend queue=2 resubmit=x\n\
               w INFO other line queue=4 resubmit=100\n";
    assert_eq!(resubmissions(log, 2), (5, 8));
    assert_eq!(resubmissions(log, 0), (13, 0));
    assert_eq!(resubmissions("", 0), (0, 0));
}

#[test]
fn a_due_kill_waits_for_requests_in_flight_at_most_the_limit() {
    let dir = tempfile::tempdir().unwrap();
    let stats = super::super::backend::stats_file(dir.path());
    // A stand-in backend that rewrites its stats file on SIGUSR1 (3 requests in flight).
    let template = dir.path().join("template.json");
    let mut q = vhost_blk_stats::QueueStats::new(0, &["read"]);
    q.prepare();
    for _ in 0..3 {
        q.on_request(0, 4096, 0);
    }
    let three = DeviceStats::collect(None, [&q]);
    std::fs::write(&template, serde_json::to_string(&three).unwrap()).unwrap();
    let script = format!(
        "trap 'cp {t} {p}.t && mv {p}.t {p}' USR1; while :; do sleep 0.02; done",
        t = template.display(),
        p = stats.display()
    );
    let argv = ["sh".to_string(), "-c".to_string(), script];
    let mut b = Guarded::spawn("sh", &argv, &dir.path().join("b.log")).unwrap();
    std::thread::sleep(Duration::from_millis(100));
    let pid = b.pid().unwrap();
    let plan = |n| RestartSettings {
        kills: 1,
        first_after_s: 0.0,
        every_s: 1.0,
        in_flight_at_least: n,
        target: KillTarget::Backend,
        jitter_s: 0.0,
    };
    let sock = dir.path().join("s.sock");
    let mut r = Restarter::new(plan(2), vec![], &sock, dir.path(), Device::Scsi, 0);
    assert_eq!(r.gate(1.0, pid), Some(Some(3)), "enough in flight: go");
    let mut r = Restarter::new(plan(5), vec![], &sock, dir.path(), Device::Scsi, 0);
    assert_eq!(r.gate(1.0, pid), None, "too few: wait");
    assert_eq!(r.gate(5.0, pid), None);
    assert_eq!(
        r.gate(1.0 + GATE_LIMIT_S, pid),
        Some(Some(3)),
        "limit reached"
    );
    let mut r = Restarter::new(plan(0), vec![], &sock, dir.path(), Device::Scsi, 0);
    assert_eq!(r.gate(1.0, pid), Some(None), "not asked");
    b.stop(Duration::from_secs(1));
}

#[test]
fn proc_readers_see_this_process() {
    let me = std::process::id();
    assert!(fd_count(me).unwrap() >= 3);
    assert!(rss_kib(me).unwrap() > 0);
    assert!(anon_kib(me).unwrap() > 0);
    assert!(fd_count(u32::MAX).is_none());
}

#[test]
fn kills_follow_the_plan_and_restart_on_the_same_socket() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("s.sock");
    // A stand-in backend that creates its socket and lives until killed.
    let argv: Vec<String> = [
        "qemu-storage-daemon",
        "--blockdev",
        "driver=null-co,node-name=n0,size=1048576",
        "--export",
    ]
    .iter()
    .map(|s| s.to_string())
    .chain([format!(
        "type=vhost-user-blk,id=e0,node-name=n0,addr.type=unix,addr.path={}",
        sock.display()
    )])
    .collect();
    let plan = RestartSettings {
        kills: 2,
        first_after_s: 1.0,
        every_s: 0.5,
        in_flight_at_least: 0,
        target: KillTarget::Backend,
        jitter_s: 0.0,
    };
    let mut b = super::super::backend::start(
        &argv,
        &sock,
        &dir.path().join("b.log"),
        Duration::from_secs(10),
    )
    .unwrap();
    let mut r = Restarter::new(plan, argv, &sock, dir.path(), Device::Blk, 0);
    r.poll(0.0, false, false, &mut b, None).unwrap();
    assert!(r.records.is_empty(), "no step yet");
    r.poll(0.1, true, false, &mut b, None).unwrap();
    r.poll(1.0, true, false, &mut b, None).unwrap();
    assert!(r.records.is_empty(), "first kill at 1.1");
    let first = b.pid().unwrap();
    r.poll(1.2, true, false, &mut b, None).unwrap();
    assert_eq!(r.records.len(), 1);
    assert_ne!(b.pid().unwrap(), first);
    assert!(sock.exists());
    r.poll(1.3, true, false, &mut b, None).unwrap();
    assert_eq!(r.records.len(), 1, "next one every_s later");
    r.poll(10.0, true, false, &mut b, None).unwrap();
    assert_eq!(r.records.len(), 2, "kills = 2");
    let last = b.pid().unwrap();
    r.poll(10.1, true, false, &mut b, None).unwrap();
    assert!(r.last.is_none(), "not yet due");
    r.poll(20.0, true, false, &mut b, None).unwrap();
    assert_eq!(r.records.len(), 2, "no third kill");
    assert_eq!(b.pid().unwrap(), last, "the last instance lives on");
    let mid = r
        .last
        .clone()
        .expect("read when a kill would have been due");
    assert!(mid.in_step && !mid.killed && mid.at_s == 20.0);
    r.poll(20.1, false, true, &mut b, None).unwrap();
    assert_eq!(
        r.last.as_ref().unwrap().at_s,
        20.0,
        "the mid-step reading is kept"
    );
    r.finish(21.0, &b, None);
    assert_eq!(r.records.len(), 3);
    assert!(!r.records[2].killed && r.records[0].killed && r.records[0].in_step);
    assert!(r.records[2].in_step && r.records[2].pid == last);
    let text = std::fs::read_to_string(dir.path().join("restarts.json")).unwrap();
    assert!(text.contains("restart_ms") && text.contains("\"in_step\": true"));
    b.stop(Duration::from_secs(1));
}

#[test]
fn last_instance_without_a_long_enough_step_is_read_when_the_agent_finishes() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("s.sock");
    let plan = RestartSettings {
        kills: 0,
        first_after_s: 5.0,
        every_s: 1.0,
        in_flight_at_least: 0,
        target: KillTarget::Backend,
        jitter_s: 0.0,
    };
    // `sleep` stands in for the backend: only its pid is read.
    let argv = ["sleep".to_string(), "30".to_string()];
    let mut b = Guarded::spawn("sleep", &argv, &dir.path().join("b.log")).unwrap();
    let mut r = Restarter::new(plan, vec![], &sock, dir.path(), Device::Blk, 0);
    r.poll(1.0, true, false, &mut b, None).unwrap();
    r.poll(3.0, true, false, &mut b, None).unwrap();
    assert!(r.last.is_none(), "due at 6.0, the step ended before");
    r.poll(4.0, false, true, &mut b, None).unwrap();
    r.finish(9.0, &b, None);
    assert_eq!(r.records.len(), 1);
    let rec = &r.records[0];
    assert!(!rec.in_step && !rec.killed && rec.at_s == 4.0);
    assert!(rec.backend_fds.is_some());
    b.stop(Duration::from_secs(1));
}
