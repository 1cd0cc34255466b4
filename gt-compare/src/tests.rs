use super::*;
use crate::fixtures::{ab_runs, run, A};
use gt_results::results::RunStatus;

#[test]
fn two_kernels() {
    let c = compare(&ab_runs(), &[]).unwrap();
    assert_eq!(c.kernels, ["base", "seed000"]);
    assert_eq!(c.rows.len(), 2);
    let d = c.metric("rr.irq_d_per_kio").next().unwrap();
    assert_eq!(d.summary("base").unwrap().median, 12.25);
    assert_eq!(d.summary("seed000").unwrap().median, 5.75);
    let v = &d.versus[0];
    assert_eq!(v.kernel, "seed000");
    assert!((v.ratio.unwrap() - 5.75 / 12.25).abs() < 1e-12);
    // scipy 1.17.1 reference values, see stats.rs.
    assert!((v.welch_p.unwrap() - 0.00030290431367790613).abs() < 1e-9);
    assert!((v.mwu.unwrap().p - 2.0 / 924.0).abs() < 1e-12);
    assert!(v.flag);
    let i = c.metric("rr.iops").next().unwrap();
    assert!(!i.versus[0].flag, "1 % apart with overlapping ranges");
    assert!(i.versus[0].welch_p.unwrap() > 0.5);
    assert_eq!(d.values["base"], A.to_vec());
}

#[test]
fn kernel_order_and_baseline_are_the_callers() {
    let c = compare(&ab_runs(), &["seed000".into(), "base".into()]).unwrap();
    assert_eq!(c.baseline(), "seed000");
    let d = c.metric("rr.irq_d_per_kio").next().unwrap();
    assert_eq!(d.versus[0].kernel, "base");
    assert!((d.versus[0].ratio.unwrap() - 12.25 / 5.75).abs() < 1e-12);
    assert_eq!(
        compare(&ab_runs(), &["nope".into()]),
        Err(CompareError::MissingKernel("nope".into()))
    );
}

#[test]
fn failed_runs_are_excluded_and_listed() {
    let mut runs = ab_runs();
    runs[0].status = RunStatus::TimedOut { after_s: 60.0 };
    let c = compare(&runs, &[]).unwrap();
    assert_eq!(c.excluded.len(), 1);
    assert!(c.excluded[0].1.contains("TimedOut"));
    assert_eq!(
        c.metric("rr.iops")
            .next()
            .unwrap()
            .summary("base")
            .unwrap()
            .n,
        5
    );
    for r in &mut runs {
        r.status = RunStatus::Failed { reason: "x".into() };
    }
    assert_eq!(compare(&runs, &[]), Err(CompareError::NoRuns));
}

#[test]
fn sweep_cells_are_compared_separately_in_axis_order() {
    let mut runs = Vec::new();
    for (lat, scale) in [(1000.0, 1.0), (0.0, 2.0), (200.0, 1.5)] {
        let label = format!("lat={lat}us");
        for i in 0..4 {
            let x = 4.0 + i as f64 * 0.1;
            runs.push(run("base", Some((&label, lat)), &[("d", x * scale)]));
            runs.push(run("seed000", Some((&label, lat)), &[("d", x)]));
        }
    }
    let c = compare(&runs, &[]).unwrap();
    let cells: Vec<f64> = c
        .rows
        .iter()
        .map(|r| r.sweep.as_ref().unwrap().value)
        .collect();
    assert_eq!(cells, [0.0, 200.0, 1000.0]);
    let ratios: Vec<f64> = c.rows.iter().map(|r| r.versus[0].ratio.unwrap()).collect();
    assert!((ratios[0] - 0.5).abs() < 1e-12 && (ratios[2] - 1.0).abs() < 1e-12);
    assert!(c.rows[0].versus[0].flag && !c.rows[2].versus[0].flag);
}

/// The paired design: a common host effect per pair hides the difference in Welch's test and
/// cancels in the paired one.
#[test]
fn paired_statistics_use_the_pairs() {
    let host = [0.0, 40.0, -30.0, 25.0, -45.0, 10.0];
    let mut v = Vec::new();
    for (i, h) in host.iter().enumerate() {
        for (k, x) in [("base", 100.0 + h), ("fix", 95.0 + h + 0.2 * i as f64)] {
            let mut r = run(k, None, &[("rr.bw_kib_s", x)]);
            r.info.pair = Some(i as u32);
            r.info.primary_metric = Some("rr.bw_kib_s".into());
            v.push(r);
        }
    }
    let c = compare(&v, &[]).unwrap();
    let row = c.metric("rr.bw_kib_s").next().unwrap();
    let vs = &row.versus[0];
    let p = vs.paired.expect("every run has a pair");
    assert_eq!(p.n, 6);
    assert!((p.diff.mean - (-5.0 + 0.2 * 2.5)).abs() < 1e-9);
    assert!(p.t_p.unwrap() < 1e-5, "paired {:?}", p.t_p);
    assert!(vs.welch_p.unwrap() > 0.5, "welch {:?}", vs.welch_p);
    let d = vs.diff.unwrap();
    assert!((d.mean - p.diff.mean).abs() < 1e-9);
    assert!(d.ci95 > p.diff.ci95);
    // The verdict picks the paired test and the suite's primary metric.
    let verdict = super::verdict::verdict(&c, &v).unwrap();
    let pr = verdict.row("primary").unwrap();
    assert_eq!(pr.test, "paired t");
    assert_eq!(pr.p, p.t_p);
    assert!(verdict.paired);
    assert!(verdict.starved.is_empty());
}

#[test]
fn runs_without_pairs_get_welch_and_starved_runs_are_flagged() {
    let mut v = Vec::new();
    for (i, cpu) in [1.6, 1.5, 0.5, 1.6].iter().enumerate() {
        for k in ["base", "fix"] {
            let x = if k == "base" {
                9.0 + i as f64 * 0.1
            } else {
                0.0
            };
            let mut r = run(
                k,
                None,
                &[
                    ("rr.qlock_wait_ms_per_kio", x),
                    ("rr.guest_cpu_per_s", *cpu),
                ],
            );
            r.info.run_dir = format!("runs/{k}-{i}").into();
            r.info.primary_metric = Some("rr.qlock_wait_ms_per_kio".into());
            v.push(r);
        }
    }
    let c = compare(&v, &[]).unwrap();
    let verdict = super::verdict::verdict(&c, &v).unwrap();
    let pr = verdict.row("primary").unwrap();
    assert_eq!(pr.test, "Welch t");
    assert!(pr.paired_p.is_none());
    assert_eq!(verdict.starved, ["runs/base-2", "runs/fix-2"]);
    assert!(!verdict.paired);
    assert!(super::verdict::verdict(&compare(&ab_runs(), &[]).unwrap(), &ab_runs()).is_none());
}

/// Verdict rule 5: one verdict per grid cell, none over several cells taken together.
#[test]
fn no_single_verdict_over_the_cells_of_a_grid() {
    let cell = |k: &str, variant: &str, x: f64| {
        let mut r = run(k, Some((variant, 62.0)), &[("rr.qlock_wait_ms_per_kio", x)]);
        r.info.primary_metric = Some("rr.qlock_wait_ms_per_kio".into());
        r.info.variant = Some(variant.into());
        r.info.sweep = Some(gt_results::results::SweepPoint {
            param: "hw_queues".into(),
            value: 62.0,
            series: Some("2 running vCPUs".into()),
        });
        r
    };
    let one: Vec<_> = [("base", 2.0), ("base", 2.2), ("fix", 0.0), ("fix", 0.0)]
        .iter()
        .map(|(k, x)| cell(k, "q62-c2", *x))
        .collect();
    assert!(super::verdict::verdict(&compare(&one, &[]).unwrap(), &one).is_some());
    let mut two = one.clone();
    two.extend(
        [("base", 9.0), ("base", 9.5), ("fix", 0.0), ("fix", 0.0)]
            .iter()
            .map(|(k, x)| cell(k, "q62-c4", *x)),
    );
    assert!(super::verdict::verdict(&compare(&two, &[]).unwrap(), &two).is_none());
}
