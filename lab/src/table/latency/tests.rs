use super::*;
use crate::table::fixtures::{lat, report, write, write_report};
use vhost_blk_stats::QueueStats;

/// One target (10 us, fair only), two rounds, a missing round, a run without CPU figures.
fn fixture(dir: &Path) {
    write(
        dir,
        "cyclictest.txt",
        "000005 000060\n000009 000039\n000030 000001\n\
        # Max Latencies: 00030\n# Histogram Overflows: 00000\n",
    );
    write(
        dir,
        "cyclictest-10us.txt",
        "000004 000050\n000008 000049\n000020 000001\n\
        # Max Latencies: 00020\n# Histogram Overflows: 00000\n",
    );
    write(dir, "placement.txt", "Latency runs pinned.\n\n");
    let ours = report(50_000.0, (15.25, 40.0), Some((12.5, 22.0)), Some(7e4));
    write_report(dir, "ours-msix-10us.json", &ours);
    let mut stats = DeviceStats::collect(None, [&QueueStats::new(0, &["read"])]);
    stats.total.irq_error_us = lat(0.75, 3.0);
    (stats.total.irq_early, stats.total.irq_late) = (5, 1);
    write(dir, "ours-msix-10us-stats.json", &stats.to_json().unwrap());
    write_report(
        dir,
        "qsd-latency-10us.json",
        &report(1.0, (40.0, 50.0), None, None),
    );
    let eff = |iops, p50, p99, e| report(iops, (p50, p99), None, e);
    write_report(
        dir,
        "eff-r1-ours-bench.json",
        &eff(1e5, 10.0, 20.0, Some(3e6)),
    );
    write_report(
        dir,
        "eff-r2-ours-bench.json",
        &eff(1.2e5, 12.0, 30.0, Some(4e6)),
    );
    write_report(
        dir,
        "eff-r1-qsd-bench.json",
        &eff(5e4, 20.0, 40.0, Some(1e6)),
    );
    write_report(dir, "eff-r1-ours-blkio.json", &eff(9e4, 11.0, 21.0, None));
    write(
        dir,
        "failures.txt",
        "round 2 qsd-bench: vhost-blk-bench failed (exit 1)\n",
    );
}

#[test]
fn a_table_from_a_small_run() {
    let dir = tempfile::tempdir().unwrap();
    fixture(dir.path());
    let args = LatencyArgs {
        dir: dir.path().into(),
        targets: Targets(vec![10]),
        rounds: 2,
        queues: 8,
        qd: 16,
        threads: 2,
    };
    let text = table(&args).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let has = |l: &str| assert!(lines.contains(&l), "no line {l:?} in\n{text}");
    has(
        "Host floor, cyclictest (SCHED_FIFO 80, 200 us interval, 100 wake-ups, from its \
         histogram): p50 5 us, p99 9 us, max 30 us",
    );
    has("Latency runs pinned.");
    // Timer-only -0.75 (more early than late), end to end 12.5 - 10 and 22 - 10, p99 excess
    // 12 / 8 and 12 / 9; request 15.25 - 10 rounds half to even; qsd 40 - 10.
    has("| 10 | fair (default) | -0.75 | 3.0 | +2.50 | +12.0 | 8 | 1.50 | 1.33 | +5.2 | +30.0 |");
    assert!(!text.contains("SCHED_FIFO 80 |"), "no rt run, no rt row");
    has(
        "## Efficiency: 4k randread, null storage, 8 queues x QD16, 2 client threads, 2 \
         interleaved rounds",
    );
    has("| ours, virtio-blk | vhost-blk-bench | 110000 | 3.50M (3.00M / 4.00M) | 11.0 / 25.0 |");
    has("| qemu-storage-daemon | vhost-blk-bench | 50000 | 1.00M (1.00M / -) | 20.0 / 40.0 |");
    has("| ours, virtio-blk | blkio | 90000 | -M (- / -) | 11.0 / 21.0 |");
    assert!(
        !text.contains("| qemu-storage-daemon | blkio |"),
        "no runs, no row"
    );
    has("| ours / qemu-storage-daemon, vhost-blk-bench client | 3.50x | 3.00 |");
    assert!(
        !text.contains("blkio client | "),
        "no blkio ratio without its figures"
    );
    has("- round 2 qsd-bench: vhost-blk-bench failed (exit 1)");
    has("- Efficiency >= 2.0x qemu-storage-daemon, vhost-blk-bench client: 3.50x: met");
    has("- Efficiency >= 2.0x qemu-storage-daemon, blkio client: -x: n/a");
    assert!(
        !text.contains("one worker (--threads 1)"),
        "t1 goals without figures"
    );
    has(
        "- Median latency error <= 2 us at 10 us (end to end, backend fair (default)): \
         +2.50 us: NOT met; p99 excess <= 1.5x cyclictest p99 at 10 us: 1.50x: met (against \
         the 200 us floor: 1.33x)",
    );
    has("- SCSI READ(16) ops per CPU-second within 15 % of the blk path: -x: n/a");
    assert!(text.ends_with("n/a\n"));
}

#[test]
fn an_empty_run_and_a_broken_file() {
    let dir = tempfile::tempdir().unwrap();
    let args = LatencyArgs {
        dir: dir.path().into(),
        targets: Targets(vec![10, 50]),
        rounds: 3,
        queues: 8,
        qd: 16,
        threads: 2,
    };
    let text = table(&args).unwrap();
    assert!(text.contains("\nHost floor: n/a (cyclictest not installed)\n\n"));
    assert!(!text.contains("| 10 |") && !text.contains("| ours"));
    write(dir.path(), "eff-r3-qsd-blkio.json", "{\"ops\": 1}");
    let err = table(&args).unwrap_err().to_string();
    assert!(err.contains("eff-r3-qsd-blkio.json"), "{err}");
    assert_eq!(parse_targets(" 10  50 ").unwrap().0, [10, 50]);
    assert!(parse_targets("").is_err() && parse_targets("0").is_err());
}
