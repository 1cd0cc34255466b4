use std::collections::BTreeSet;
use std::path::Path;

use super::*;
use crate::results::fixtures::fixture_stream;
use crate::results::{Provenance, RunInfo, RunResult, Timings};

fn fixture() -> RunResult {
    RunResult::from_artifacts(
        RunInfo::default(),
        Provenance::default(),
        &gt_launch::agent::parse_stream(&fixture_stream()),
        Timings::default(),
    )
}

/// Every metric name in the results under docs/results.
fn doc_metric_names() -> BTreeSet<String> {
    let docs = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/results");
    crate::results::load_runs(&[docs])
        .runs
        .iter()
        .flat_map(|r| r.metrics.keys().cloned())
        .collect()
}

#[test]
fn every_derived_metric_is_declared_and_built_from_its_own_pattern() {
    let r = fixture();
    assert!(r.metrics.len() > 20);
    for def in all() {
        let Derive::Step(f) = def.derive else {
            continue;
        };
        for s in &r.steps {
            let mut m = BTreeMap::new();
            f(
                s,
                &mut Out {
                    pattern: def.pattern,
                    step: &s.name,
                    m: &mut m,
                },
            );
            for name in m.keys() {
                assert!(pattern::matches(def.pattern, name).is_some(), "{name}");
                // A more specific def may claim a name first, never a different family.
                let found = find(name).unwrap();
                assert_eq!(found.def.pattern, def.pattern, "{name}");
            }
        }
    }
    for name in r.metrics.keys() {
        assert!(find(name).is_some(), "{name} is not in the registry");
    }
}

#[test]
fn every_metric_of_the_published_results_is_declared() {
    let names = doc_metric_names();
    assert!(names.len() > 50, "{}", names.len());
    let missing: Vec<&String> = names.iter().filter(|n| find(n).is_none()).collect();
    assert!(missing.is_empty(), "{missing:?}");
}

#[test]
fn headline_metrics_are_the_ones_the_report_always_plotted() {
    // The report used to pick these by name suffix; the registry must pick the same.
    const OLD_SUFFIXES: &[&str] = &[
        "irq_d_per_kio",
        "d_queue_lock_per_kio",
        "irq_switches_per_kio",
        "irqs_per_io",
        "iops",
        "clat_p99_us",
        "rescan.ms_median",
        "scan.first_disk_s",
        "scan.virtio_scsi_init_us",
        // Added with the lock-wait metrics (locks.<step>), after the suffix list was retired.
        "qlock_wait_ms_per_kio",
        "lockwait_ms_per_kio",
        "dblocked_peak",
        "qlock_blocked_peak",
        // Added with the quiesce storm (storm.<step>).
        "storm_cycles",
        "storm_stuck",
        // Added with the unfrozen storm hook (its lost-run detector).
        "storm_stranded",
        // Added as seed000-scale's primary metric (queue_lock's share of the contentions).
        "qlock_contention_share_pct",
    ];
    let old = |m: &str| {
        OLD_SUFFIXES
            .iter()
            .any(|h| m == *h || m.ends_with(&format!(".{h}")))
    };
    let mut names = doc_metric_names();
    names.extend(fixture().metrics.into_keys());
    for n in &names {
        assert_eq!(is_headline(n), old(n), "{n}");
    }
}

#[test]
fn lookup_gives_unit_direction_and_description() {
    let r = find("randread.irq_d_per_kio").unwrap();
    assert_eq!(r.def.better, Better::Lower);
    assert_eq!(r.def.unit, "switches/1,000 I/Os");
    assert!(!r.def.description.is_empty());
    assert_eq!(
        find("randread.read.iops").unwrap().def.better,
        Better::Higher
    );
    assert_eq!(
        find("randread.func.blk_mq_run_hw_queue_per_kio")
            .unwrap()
            .def
            .pattern,
        "{step}.func.{func}_per_kio"
    );
    // The function profiler's time is a time, not a count of hits.
    let t = find("rescan.func.blk_mq_exit_hctx:usecs").unwrap();
    assert_eq!((t.def.unit, t.def.better), ("us", Better::Lower));
    assert_eq!(
        find("rescan.func.blk_mq_exit_hctx").unwrap().def.unit,
        "hits"
    );
    assert!(find(HARNESS_QEMU_WALL_S).is_some());
    assert!(find("no-such-metric").is_none());
    for d in all() {
        assert!(
            !d.unit.is_empty() && !d.description.is_empty(),
            "{}",
            d.pattern
        );
    }
}

#[test]
fn each_lock_figure_is_one_registry_metric_under_its_own_name() {
    use crate::metrics::LockFigure;
    for fig in LockFigure::ALL {
        let defs = all().filter(|d| d.pattern == fig.pattern()).count();
        assert_eq!(defs, 1, "{fig:?}");
        let name = if *fig == LockFigure::DblockedGePct {
            format!("rr.{}", fig.with_k(3))
        } else {
            fig.on("rr")
        };
        assert_eq!(find(&name).unwrap().def.pattern, fig.pattern(), "{name}");
        assert!(fig.is(&name) || fig.is_k(&name, 3), "{name}");
    }
    assert_eq!(
        LockFigure::QlockWaitMsPerKio.pattern(),
        "{step}.qlock_wait_ms_per_kio"
    );
    assert!(!LockFigure::DblockedPeak.is("rr.lockblocked_peak_x"));
    assert!(!LockFigure::LockblockedPeak.is("rr.qlock_blocked_peak"));
}
