use std::collections::BTreeMap;

use super::*;
use gt_launch::agent::parse_stream;
use gt_results::results::{Provenance, RunInfo, Timings};

/// A successful run of `kernel` whose metrics are exactly the model's factors: R removals per
/// scan, 16 hctx x 1024 tags, one rescan, `us_per_call` per blk_mq_exit_hctx call, the boot
/// scan and first rescan as given.
fn run(kernel: &str, r: f64, us_per_call: f64, boot_ms: f64, rescan_ms: f64) -> RunResult {
    let info = RunInfo {
        suite: "seed003-scale".into(),
        kernel: kernel.into(),
        ..Default::default()
    };
    let mut run = RunResult::from_artifacts(
        info,
        Provenance::default(),
        &parse_stream(&gt_results::results::fixtures::fixture_stream()),
        Timings::default(),
    );
    assert!(run.status.is_ok());
    let calls = r * 16.0;
    run.metrics = BTreeMap::from([
        (H.to_string(), 16.0),
        (D.to_string(), 1024.0),
        (RESCANS.to_string(), 1.0),
        (CALLS.to_string(), calls),
        (CALL_US.to_string(), calls * us_per_call),
        (BOOT_US.to_string(), boot_ms * 1000.0),
        (FIRST_MS.to_string(), rescan_ms),
    ]);
    run
}

fn order(k: &[&str]) -> Vec<String> {
    k.iter().map(|s| s.to_string()).collect()
}

#[test]
fn predicted_is_removals_x_hctx_x_depth_x_per_tag_cost() {
    // 1,000 removals x 16 hctx, 7 us more per call: 112 ms predicted; the slow kernel's boot
    // scans are 110-114 ms longer.
    let mut runs = Vec::new();
    for (i, d) in [-2.0, 0.0, 2.0].into_iter().enumerate() {
        runs.push(run("fast", 1000.0, 3.0, 1000.0 + d, 900.0 + d));
        runs.push(run(
            "slow",
            1000.0,
            10.0,
            1112.0 + 2.0 * i as f64 - 2.0,
            1010.0,
        ));
    }
    let m = scan_model(&runs, &order(&["fast", "slow"])).unwrap();
    assert_eq!(m.kernels.len(), 2);
    assert_eq!(m.kernels[0].kernel, "fast");
    assert!((m.kernels[1].removals - 1000.0).abs() < 1e-9);
    let p = &m.pairs[0];
    // The slower kernel comes first whatever the order.
    assert_eq!((p.slow.as_str(), p.fast.as_str()), ("slow", "fast"));
    assert!(
        (p.per_tag_ns - 7000.0 / 1024.0).abs() < 1e-9,
        "{}",
        p.per_tag_ns
    );
    assert!((p.predicted_ms - 112.0).abs() < 1e-9, "{}", p.predicted_ms);
    assert!((p.at_128_ms - 896.0).abs() < 1e-9);
    let boot = p.boot.as_ref().unwrap();
    assert!((boot.mean - 112.0).abs() < 1e-9);
    let (lo, hi) = boot.ci95.unwrap();
    assert!(lo < 112.0 && 112.0 < hi);
    assert!(boot.welch_p.unwrap() < 1e-4);
    assert!((p.boot_ratio().unwrap() - 1.0).abs() < 1e-9);
    assert!((p.first_rescan.as_ref().unwrap().mean - 110.0).abs() < 1e-9);
    // The rendered section carries the pair's figures.
    let text = format!("{:?}", blocks(&m));
    assert!(text.contains("Seed 003 cost model"));
    assert!(text.contains("slow vs fast"));
    assert!(
        text.contains("1,000 x 16 x 1,024") || text.contains("1000 x 16 x 1024"),
        "{text}"
    );
}

#[test]
fn no_model_without_every_factor_or_with_variants() {
    let mut runs = vec![
        run("a", 100.0, 2.0, 50.0, 50.0),
        run("b", 100.0, 1.0, 50.0, 50.0),
    ];
    assert!(scan_model(&runs, &order(&["a", "b"])).is_some());
    // One kernel only.
    assert!(scan_model(&runs, &order(&["a"])).is_none());
    // A run without the function profile.
    let mut r = run("b", 100.0, 1.0, 50.0, 50.0);
    r.metrics.remove(CALL_US);
    runs.push(r);
    assert!(scan_model(&runs, &order(&["a", "b"])).is_none());
    runs.pop();
    // Zero calls cannot give R.
    let mut r = run("b", 100.0, 1.0, 50.0, 50.0);
    r.metrics.insert(CALLS.into(), 0.0);
    runs.push(r);
    assert!(scan_model(&runs, &order(&["a", "b"])).is_none());
    runs.pop();
    // Two sweep variants.
    runs[1].info.variant = Some("targets-16".into());
    assert!(scan_model(&runs, &order(&["a", "b"])).is_none());
    // Failed runs are left out: a failed run without factors does not spoil the model.
    runs[1].info.variant = None;
    let mut r = run("b", 100.0, 1.0, 50.0, 50.0);
    r.metrics.clear();
    r.status = gt_results::results::RunStatus::Failed { reason: "x".into() };
    runs.push(r);
    let m = scan_model(&runs, &order(&["a", "b"])).unwrap();
    assert_eq!(m.kernels[1].runs, 1);
    // No boot scan: the pair has no measured figure and no ratio.
    for r in &mut runs {
        r.metrics.remove(BOOT_US);
    }
    let m = scan_model(&runs, &order(&["a", "b"])).unwrap();
    assert!(m.pairs[0].boot.is_none() && m.pairs[0].boot_ratio().is_none());
}
