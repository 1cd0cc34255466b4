use std::path::Path;

use super::*;
use gt_launch::agent::{parse_stream, Artifact};
use gt_results::results::{Provenance, RunInfo, SweepPoint, Timings};

/// The fixture run with its D-switch counts replaced: `d` per thread (3 threads) and `q` of
/// them attributed to the queue_lock, the rest to add_timer_randomness.
/// Seed 000's `[verdict]`, as its suite declares it.
fn seed000_verdict() -> gt_suite::VerdictSpec {
    gt_suite::Suite::load(&gt_suite::default_dir(), "seed000-scale")
        .unwrap()
        .spec
        .verdict
        .expect("seed000-scale declares [verdict]")
}

fn artefacts(d: [u64; 3], q: u64) -> Vec<Artifact> {
    let mut irqsw = String::new();
    let mut vol = String::new();
    for (i, dn) in d.iter().enumerate() {
        let (pid, s) = (211 + i, 400 + i as u64);
        irqsw += &format!(
            "pid={pid} comm=irq/{}-virtio1-request.{i} state=S count={s}\n",
            27 + i
        );
        irqsw += &format!(
            "pid={pid} comm=irq/{}-virtio1-request.{i} state=D count={dn}\n",
            27 + i
        );
        vol += &format!(
            "pid={pid} comm=irq/{}-virtio1-request.{i} vol_before=10 vol_after={} nonvol_before=0 nonvol_after=1\n",
            27 + i,
            10 + s + dn
        );
    }
    irqsw += &vol;
    irqsw += "dropped=0\n";
    let total: u64 = d.iter().sum();
    let frames = "__schedule+0x3ee/0x8a0\nschedule_rtlock+0x1c/0x40\nrt_spin_lock+0x41/0x60\n";
    let mut stacks = String::new();
    if q > 0 {
        stacks += &format!("count={q}\n{frames}blk_mq_run_hw_queue+0x12c/0x1e0\nblk_mq_run_hw_queues+0x5a/0xf0\n\n");
    }
    stacks += &format!(
        "count={}\n{frames}add_timer_randomness+0x31/0x1d0\n",
        total - q
    );
    parse_stream(&gt_results::results::fixtures::fixture_stream())
        .into_iter()
        .map(|mut a| {
            if a.name.starts_with("irqsw.") {
                a.data = irqsw.clone().into_bytes();
            } else if a.name.starts_with("dstacks.") {
                a.data = stacks.clone().into_bytes();
            }
            a
        })
        .collect()
}

fn write_run(root: &Path, kernel: &str, rep: u32, sweep: Option<f64>, d: [u64; 3], q: u64) {
    let variant = sweep.map(|v| format!("lat={v}us"));
    let dir = root.join(format!(
        "{kernel}-{}-{rep}",
        variant.clone().unwrap_or_default()
    ));
    let info = RunInfo {
        suite: "seed000".into(),
        kernel: kernel.into(),
        repeat: rep,
        variant,
        sweep: sweep.map(|value| SweepPoint {
            param: "msix_latency_us".into(),
            value,
            series: None,
        }),
        run_dir: dir.clone(),
        ..Default::default()
    };
    let mut p = Provenance {
        accelerator: "tcg".into(),
        started_at: format!(
            "2026-11-30T00:{:02}:{:02}Z",
            rep,
            if kernel == "base" { 0 } else { 30 }
        ),
        guest_tests_version: "0.1.0".into(),
        ..Default::default()
    };
    p.kernel.variant = kernel.into();
    p.kernel.bzimage_sha256 = format!("{:064x}", kernel.len());
    p.qemu.version = "7.2.0".into();
    p.qemu.argv = vec!["qemu-system-x86_64".into(), "-accel".into(), "tcg".into()];
    p.backend.name = "vhost-blk".into();
    p.backend.config = "[device]\nkind = \"scsi\"\n".into();
    p.seeds.insert("latency".into(), 42);
    let r = RunResult::from_artifacts(info, p, &artefacts(d, q), Timings::default());
    assert!(r.status.is_ok(), "{:?}", r.status);
    r.write(&dir).unwrap();
}

/// 6 + 6 interleaved A/B runs: base ~2x the D switches, half of them on the queue_lock.
fn ab_fixture(root: &Path) {
    for rep in 0..6u64 {
        let base = [10 + rep, 8 + rep % 3, 7 + rep % 2];
        let seed = [4 + rep % 2, 3 + rep % 3, 4];
        let bq = base.iter().sum::<u64>().div_ceil(2);
        write_run(root, "base", rep as u32, None, base, bq);
        write_run(root, "seed000", rep as u32, None, seed, 0);
    }
}

fn assert_svg(svg: &str) {
    assert!(
        svg.starts_with("<svg") || svg.starts_with("<?xml"),
        "{}",
        &svg[..60.min(svg.len())]
    );
    assert!(svg.trim_end().ends_with("</svg>"));
    // Well-formed enough: tags balance (no self-closing mismatch).
    let opens = svg.matches("<svg").count();
    assert_eq!(opens, svg.matches("</svg>").count());
    for tag in ["text", "g"] {
        assert_eq!(
            svg.matches(&format!("<{tag}")).count() - svg.matches(&format!("<{tag}/>")).count(),
            svg.matches(&format!("</{tag}>")).count(),
            "unbalanced <{tag}>"
        );
    }
}

/// A fresh directory; with `GUEST_TESTS_KEEP_REPORT=DIR` set, `DIR/<name>` is used and kept,
/// to look at the generated report.
fn out_dir(name: &str) -> (Option<tempfile::TempDir>, std::path::PathBuf) {
    match std::env::var_os("GUEST_TESTS_KEEP_REPORT") {
        Some(d) => {
            let p = Path::new(&d).join(name);
            let _ = std::fs::remove_dir_all(&p);
            std::fs::create_dir_all(&p).unwrap();
            (None, p)
        }
        None => {
            let t = tempfile::tempdir().unwrap();
            let p = t.path().to_path_buf();
            (Some(t), p)
        }
    }
}

#[test]
fn report_from_fixture_results() {
    let (_keep, dir) = out_dir("ab");
    let dir = &dir;
    ab_fixture(dir);
    let files = build(dir).unwrap();
    let md = std::fs::read_to_string(&files.markdown).unwrap();
    let html = std::fs::read_to_string(&files.html).unwrap();

    // The baseline is the kernel that ran first.
    assert!(md.contains("Baseline: **base**"), "{md}");
    assert!(md.contains("12 results.json files (12 successful"));
    // The flagged headline metric, with numbers that come from the runs.
    let data = collect(dir, &ReportOptions::default()).unwrap();
    let row = data
        .comparison
        .metric("randread.irq_d_per_kio")
        .next()
        .unwrap();
    let v = &row.versus[0];
    assert!(v.flag && v.ratio.unwrap() < 0.6);
    let line = md
        .lines()
        .find(|l| l.starts_with("- `randread.irq_d_per_kio`"))
        .expect("flagged line");
    assert!(
        line.contains(&format!("ratio {:.3}", v.ratio.unwrap())),
        "{line}"
    );
    // The lock-site table: base about half on the queue_lock, seed000 none there.
    let t = &data.lock_sites[0];
    assert_eq!(t.sites[0], "blk_mq_run_hw_queue");
    let share = t.kernels[0].1.share("blk_mq_run_hw_queue").unwrap();
    assert!((0.4..=0.6).contains(&share), "{share}");
    assert_eq!(t.kernels[1].1.share("blk_mq_run_hw_queue"), Some(0.0));
    assert!(md.contains("| `blk_mq_run_hw_queue` |"), "{md}");
    assert_eq!(
        t.main_path("blk_mq_run_hw_queue"),
        Some(("blk_mq_run_hw_queues".to_string(), 1.0))
    );
    assert!(md.contains("| `blk_mq_run_hw_queues` (100 %) |"), "{md}");
    // Plots: strip plots for the headline metrics and the lock-site chart, on disk and inline.
    let names: Vec<String> = files
        .plots
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert!(
        names.contains(&"strip-randread.irq_d_per_kio.svg".to_string()),
        "{names:?}"
    );
    assert!(
        names.contains(&"locksites-randread.svg".to_string()),
        "{names:?}"
    );
    assert!(
        !names.iter().any(|n| n.starts_with("sweep-")),
        "no sweep in this data"
    );
    for p in &files.plots {
        let svg = std::fs::read_to_string(p).unwrap();
        assert_svg(&svg);
        assert!(md.contains(&format!(
            "(plots/{})",
            p.file_name().unwrap().to_string_lossy()
        )));
    }
    let ls = std::fs::read_to_string(dir.join("plots/locksites-randread.svg")).unwrap();
    // plotters writes a text element's content on its own line.
    assert!(ls.contains("\nblk_mq_run_hw_queue\n") && ls.contains("\nadd_timer_randomness\n"));
    assert!(
        ls.contains("\nbase\n") && ls.contains("\nseed000\n"),
        "legend"
    );
    assert_eq!(html.matches("<svg").count(), files.plots.len());
    assert!(html.contains("<strong>CHANGED</strong>"));
    assert!(!html.contains("<?xml"));
    // Provenance reaches the report.
    assert!(md.contains("qemu-system-x86_64 -accel tcg") && md.contains("latency=42"));
    assert!(
        md.contains("| base--0 | base |"),
        "run paths relative to the report"
    );
    // The stdout table holds the same numbers as the report's.
    let t = markdown_table(&compare_dir(dir, &[]).unwrap(), &["irq_d_per_kio".into()]);
    let row = t.lines().nth(2).unwrap();
    assert!(md.contains(row), "{row}");
    // Rebuilding gives the same report.
    build(dir).unwrap();
    assert_eq!(std::fs::read_to_string(&files.markdown).unwrap(), md);
}

#[test]
fn sweep_curve() {
    let (_keep, dir) = out_dir("sweep");
    let dir = &dir;
    for (lat, k) in [(0.0, 4u64), (50.0, 3), (200.0, 2), (1000.0, 1)] {
        for rep in 0..3u64 {
            write_run(
                dir,
                "base",
                rep as u32,
                Some(lat),
                [5 * k + rep, 5 * k, 5 * k],
                k,
            );
            write_run(
                dir,
                "seed000",
                rep as u32,
                Some(lat),
                [3 * k + rep, 3 * k, 3 * k],
                0,
            );
        }
    }
    let files = build(dir).unwrap();
    let p = dir.join("plots/sweep-randread.irq_d_per_kio.svg");
    let svg = std::fs::read_to_string(&p).unwrap();
    assert_svg(&svg);
    assert!(svg.contains("msix_latency_us"));
    assert!(svg.contains("<polyline"), "line series drawn");
    assert!(files.plots.contains(&p));
    let md = std::fs::read_to_string(files.markdown).unwrap();
    assert!(md.contains("| lat=1000us |"));
    // One lock-site table per sweep cell.
    assert!(md.contains("Where the irq threads block: randread (lat=0us)"));
}

#[test]
fn no_results_is_an_error_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    assert!(matches!(build(dir), Err(ReportError::NoResults(_))));
    assert_eq!(std::fs::read_dir(dir).unwrap().count(), 0);
}

#[test]
fn hostile_names_are_escaped_in_html() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    ab_fixture(dir);
    // A guest-controlled lock-site name.
    let p = dir.join("base--0/results.json");
    let mut r = RunResult::read(&p).unwrap();
    let ls = r.steps[1].lock_sites.as_mut().unwrap();
    ls.sites.insert("<script>alert(1)</script>".into(), 3);
    r.write(p.parent().unwrap()).unwrap();
    let files = build(dir).unwrap();
    let html = std::fs::read_to_string(files.html).unwrap();
    assert!(!html.contains("<script>"));
    assert!(html.contains("&lt;script&gt;"));
}

#[test]
fn failed_runs_are_listed_not_compared() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    ab_fixture(dir);
    let p = dir.join("seed000--2");
    let mut r = RunResult::read(&p).unwrap();
    r.set_status(gt_results::results::RunStatus::TimedOut { after_s: 300.0 });
    r.write(&p).unwrap();
    std::fs::create_dir_all(dir.join("junk")).unwrap();
    std::fs::write(dir.join("junk/results.json"), b"not json").unwrap();
    let files = build(dir).unwrap();
    let md = std::fs::read_to_string(files.markdown).unwrap();
    assert!(
        md.contains("12 results.json files (11 successful, 1 excluded, 1 unreadable)"),
        "{md}"
    );
    assert!(
        md.contains("| seed000--2 | seed000 |  | 2 | timed out after 300 s |"),
        "{md}"
    );
    assert!(md.contains("junk/results.json: not a results file"), "{md}");
    let data = collect(dir, &ReportOptions::default()).unwrap();
    let row = data
        .comparison
        .metric("randread.irq_d_per_kio")
        .next()
        .unwrap();
    assert_eq!(row.summary("seed000").unwrap().n, 5);
}

#[test]
fn the_table_after_a_matrix_has_the_headline_and_harness_metrics_only() {
    let d = tempfile::tempdir().unwrap();
    for (i, mut r) in gt_compare::fixtures::ab_runs().into_iter().enumerate() {
        r.info.run_dir = d.path().join(format!("{i:03}"));
        r.provenance.started_at = format!("2026-01-01T00:00:{i:02}Z");
        r.metrics.insert("rr.total_ios".into(), 1e5);
        r.metrics
            .insert("harness.qemu_wall_s".into(), 30.0 + i as f64);
        r.write(&r.info.run_dir.clone()).unwrap();
    }
    let t = super::headline_table(d.path(), &[]).unwrap();
    assert!(t.contains("| rr.irq_d_per_kio |"), "{t}");
    assert!(t.contains("| rr.iops |"), "{t}");
    assert!(t.contains("| harness.qemu_wall_s |"), "{t}");
    assert!(!t.contains("total_ios"), "{t}");
}

/// Runs with the real `locks.<step>` artefacts of an `rt` and an `rt+seed000` guest (the
/// fixture's fio step stands in for the I/O count): the report opens with the verdict, has the
/// lock-wait table and the blocked-threads picture.
#[test]
fn verdict_lock_waits_and_blocked_picture_from_real_lock_artefacts() {
    let fx = format!(
        "{}/../guest-tests/tests/fixtures/artifacts/locks",
        env!("CARGO_MANIFEST_DIR")
    );
    let rt = std::fs::read(format!("{fx}/rt.locks")).unwrap();
    let fixed = std::fs::read(format!("{fx}/seed000-step2.locks")).unwrap();
    let (_t, root) = out_dir("verdict");
    for rep in 0..3u32 {
        for (kernel, locks) in [("base", &rt), ("seed000", &fixed)] {
            let mut arts = artefacts([10, 9, 8], 0);
            let label = arts
                .iter()
                .find_map(|a| a.name.strip_prefix("irqsw.").map(str::to_string))
                .unwrap();
            arts.push(Artifact {
                name: format!("locks.{label}"),
                data: locks.clone(),
                complete: true,
            });
            let dir = root.join(format!("{kernel}-{rep}"));
            let info = RunInfo {
                suite: "seed000".into(),
                kernel: kernel.into(),
                repeat: rep,
                run_dir: dir.clone(),
                primary_metric: Some("randread.qlock_wait_ms_per_kio".into()),
                secondary_metric: Some("randread.lockwait_ms_per_kio".into()),
                verdict: Some(seed000_verdict()),
                ..Default::default()
            };
            let p = Provenance {
                started_at: format!("2026-11-30T01:{rep:02}:{:02}Z", kernel.len()),
                ..Default::default()
            };
            let r = RunResult::from_artifacts(info, p, &arts, Timings::default());
            assert!(r.status.is_ok(), "{:?}", r.status);
            assert!(r.metric("randread.qlock_wait_ms_per_kio").is_some());
            r.write(&dir).unwrap();
        }
    }
    let files = build(&root).unwrap();
    let md = std::fs::read_to_string(&files.markdown).unwrap();
    let verdict = md.find("## Verdict").expect("a verdict section");
    assert!(
        verdict < md.find("## Changes").unwrap(),
        "the verdict comes first"
    );
    assert!(md.contains("**seed000 removes "), "{md}");
    assert!(md.contains("Where the irq threads wait: randread"));
    assert!(md.contains("`blk_mq_run_hw_queue`"));
    let blocked = files
        .plots
        .iter()
        .find(|p| p.file_name().unwrap().to_string_lossy() == "blocked-randread.svg")
        .expect("the blocked-threads picture");
    assert_svg(&std::fs::read_to_string(blocked).unwrap());
    // Rebuilt from results alone: the same report.
    let again = build(&root).unwrap();
    assert_eq!(std::fs::read_to_string(again.markdown).unwrap(), md);
}

/// The verdict's host line names the CPU the hypervisor below the host stole, only when there
/// was some.
#[test]
fn verdict_host_line_reports_steal_only_when_there_was_some() {
    use gt_compare::fixtures::run;
    let runs = |steal: [f64; 3]| {
        let mut v = Vec::new();
        for (i, st) in steal.iter().enumerate() {
            for k in ["base", "fix"] {
                let x = if k == "base" { 9.0 + i as f64 } else { 0.0 };
                let mut r = run(
                    k,
                    None,
                    &[
                        ("rr.qlock_wait_ms_per_kio", x),
                        ("rr.guest_cpu_per_s", 1.5),
                        ("rr.host_other_cpu_per_s", 0.02),
                        (
                            "rr.host_steal_cpu_per_s",
                            if k == "base" { *st } else { 0.0 },
                        ),
                    ],
                );
                r.info.primary_metric = Some("rr.qlock_wait_ms_per_kio".into());
                r.info.verdict = Some(seed000_verdict());
                v.push(r);
            }
        }
        v
    };
    let text = |v: &[gt_results::results::RunResult]| {
        let c = gt_compare::compare(v, &[]).unwrap();
        verdict_words::verdict_text(&gt_compare::verdict::verdict(&c, v).unwrap(), None)
    };
    let stolen = text(&runs([0.0, 0.4, 0.1]));
    assert!(
        stolen.contains("CPU stolen by the hypervisor below the host")
            && stolen.contains("(max 0.400 / 0)"),
        "{stolen}"
    );
    let bare = text(&runs([0.0; 3]));
    assert!(
        bare.contains("unrelated host load") && !bare.contains("stolen"),
        "{bare}"
    );
}

#[test]
fn verdict_on_a_contention_count_says_how_often_the_threads_waited() {
    use gt_compare::fixtures::run;
    let mut v = Vec::new();
    for (k, xs) in [("base", [70.0, 60.0, 80.0]), ("fix", [0.0; 3])] {
        for x in xs {
            let mut r = run(k, None, &[("sr.qlock_wait_count_per_kio", x)]);
            r.info.primary_metric = Some("sr.qlock_wait_count_per_kio".into());
            r.info.verdict = Some(seed000_verdict());
            v.push(r);
        }
    }
    let c = gt_compare::compare(&v, &[]).unwrap();
    let text = verdict_words::verdict_text(&gt_compare::verdict::verdict(&c, &v).unwrap(), None);
    assert!(
        text.starts_with(
            "**The request irq threads wait for queue_lock 70.00 times per 1,000 I/Os on base, \
             0 times on fix**"
        ),
        "{text}"
    );
}

#[test]
fn verdict_on_the_contention_share_gives_the_count_beside_it() {
    use gt_compare::fixtures::run;
    let mut v = Vec::new();
    let base = [(90.0, 50.0), (92.0, 70.0), (91.0, 60.0)];
    for (k, xs) in [("base", base), ("fix", [(0.0, 0.0); 3])] {
        for (share, count) in xs {
            let mut r = run(
                k,
                None,
                &[
                    ("rr.qlock_contention_share_pct", share),
                    ("rr.qlock_wait_count_per_kio", count),
                ],
            );
            r.info.primary_metric = Some("rr.qlock_contention_share_pct".into());
            r.info.verdict = Some(seed000_verdict());
            v.push(r);
        }
    }
    let c = gt_compare::compare(&v, &[]).unwrap();
    let text = verdict_words::verdict_text(&gt_compare::verdict::verdict(&c, &v).unwrap(), None);
    assert!(
        text.starts_with(
            "**91.00 % of the request irq threads' lock contentions are on queue_lock on base, \
             0 % on fix**"
        ),
        "{text}"
    );
    // The companion count on the same step, with its CV (sd 10 over mean 60).
    assert!(
        text.contains("They waited for it 60.00 times per 1,000 I/Os on base (CV 17 %), 0 on fix."),
        "{text}"
    );
}

/// The seed-000 suite's `[verdict]` reads as the verdict of results written before suites
/// declared it (suite::verdict rule 4); another suite's table changes what the verdict says
/// without code: its companions, no observation, its caveat after the first sentence.
#[test]
fn the_verdict_words_come_from_the_suite() {
    use gt_compare::fixtures::run;
    let runs = |spec: Option<&gt_suite::VerdictSpec>| {
        let mut v = Vec::new();
        for (k, share, iops) in [
            ("base", [90.0, 92.0, 91.0], 100.0),
            ("fix", [0.0; 3], 120.0),
        ] {
            for (i, s) in share.into_iter().enumerate() {
                let mut r = run(
                    k,
                    None,
                    &[
                        ("rr.qlock_contention_share_pct", s),
                        ("rr.qlock_wait_count_per_kio", s / 2.0),
                        ("rr.iops", iops + i as f64),
                    ],
                );
                r.info.primary_metric = Some("rr.qlock_contention_share_pct".into());
                r.info.verdict = spec.cloned();
                v.push(r);
            }
        }
        v
    };
    let text = |v: &[RunResult]| {
        let c = gt_compare::compare(v, &[]).unwrap();
        let verdict = gt_compare::verdict::verdict(&c, v).unwrap();
        (verdict_words::verdict_text(&verdict, None), verdict)
    };
    let suite = gt_suite::Suite::load(&gt_suite::default_dir(), "seed000-scale").unwrap();
    let declared = suite
        .spec
        .verdict
        .expect("seed000-scale declares [verdict]");
    // Runs without a [verdict] get nothing beside the primary metric (the seed-000 fallback is
    // gone: older results were migrated, docs/results/migrations).
    let (bare, _) = text(&runs(None));
    let (from_suite, _) = text(&runs(Some(&declared)));
    assert!(!bare.contains("by construction"), "{bare}");
    assert!(
        from_suite.contains("reads 0 here by construction"),
        "{from_suite}"
    );
    let other = gt_suite::VerdictSpec {
        companions: vec!["iops".into()],
        observation: None,
        caveat: Some("Another regression's caveat.".into()),
    };
    let (t, verdict) = text(&runs(Some(&other)));
    assert!(t.contains(". Another regression's caveat."), "{t}");
    assert!(!t.contains("by construction"), "{t}");
    let companions: Vec<&str> = verdict
        .rows
        .iter()
        .filter(|r| r.role == "companion")
        .map(|r| r.metric.as_str())
        .collect();
    assert_eq!(companions, ["rr.iops"]);
}
