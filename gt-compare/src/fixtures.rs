//! Test fixtures other crates' tests build on (cargo feature `fixtures`): runs with given
//! metrics, and an interleaved A/B experiment.

use gt_results::results::{Provenance, RunInfo, RunResult, RunStatus, SweepPoint, Timings};

pub fn run(kernel: &str, variant: Option<(&str, f64)>, metrics: &[(&str, f64)]) -> RunResult {
    let info = RunInfo {
        suite: "t".into(),
        kernel: kernel.into(),
        variant: variant.map(|(l, _)| l.to_string()),
        sweep: variant.map(|(_, v)| SweepPoint {
            param: "msix_latency_us".into(),
            value: v,
            series: None,
        }),
        run_dir: format!("runs/{kernel}").into(),
        ..Default::default()
    };
    let mut r = RunResult::failed(info, Provenance::default(), "", Timings::default());
    r.status = RunStatus::Ok;
    r.metrics = metrics.iter().map(|(k, v)| (k.to_string(), *v)).collect();
    r
}

pub const A: [f64; 6] = [12.1, 14.3, 9.8, 15.6, 11.2, 12.4];
const B: [f64; 6] = [5.2, 6.1, 4.9, 6.3, 5.5, 6.0];

pub fn ab_runs() -> Vec<RunResult> {
    let mut v = Vec::new();
    // Interleaved like a real experiment; IOPS identical in distribution.
    for i in 0..6 {
        let iops = 5000.0 + 100.0 * i as f64;
        v.push(run(
            "base",
            None,
            &[("rr.irq_d_per_kio", A[i]), ("rr.iops", iops)],
        ));
        v.push(run(
            "seed000",
            None,
            &[("rr.irq_d_per_kio", B[i]), ("rr.iops", iops + 50.0)],
        ));
    }
    v
}
