use clap::Parser;

use super::*;
use crate::table::fixtures::{report, write, write_report};

/// Runs: name, requests completed, interrupts, IOPS, client p99, backend CPU ticks.
const RUNS: [(&str, u64, u64, f64, f64, i64); 8] = [
    ("blk-bare-r1", 1000, 100, 5000.5, 80.25, 3),
    ("blk-bare-r2", 2000, 0, 6000.0, 90.0, 5),
    ("scsi-bare-r1", 1000, 64, 4000.0, 100.0, 4),
    ("scsi-bare-r2", 4000, 250, 7000.0, 120.5, 6),
    ("blk-perf-r1", 1000, 100, 3000.0, 150.0, 4),
    ("blk-perf-r2", 2000, 125, 3500.0, 160.0, 6),
    ("scsi-perf-r1", 1000, 50, 2500.0, 170.0, 5),
    ("scsi-perf-r2", 2000, 100, 2600.0, 175.0, 9),
];

/// perf files: a `<not counted>` count, an event given twice (the last wins), an event the
/// table does not show; blk's round 2 has no backend file and scsi's round 1 no client file.
const PERF: [(&str, &str); 6] = [
    ("blk-perf-r1-backend.perf", "# started on Fri Dec  4 17:45:09 2026\n\n300,,raw_syscalls:sys_enter,1,100.00,,\n40,,syscalls:sys_enter_epoll_wait,1,100.00,,\n<not counted>,,syscalls:sys_enter_write,1,0.00,,\n70,,sched:sched_switch,1,100.00,,\n71,,sched:sched_switch,1,100.00,,\n9,,other:event,1,100.00,,\n"),
    ("blk-perf-r1-client.perf", "60,,sched:sched_switch,1,100.00,,\n5,,sched:sched_wakeup,1,100.00,,\n"),
    ("blk-perf-r2-client.perf", "100,,sched:sched_switch,1,100.00,,\n7,,sched:sched_wakeup,1,100.00,,\n"),
    ("scsi-perf-r1-backend.perf", "500,,raw_syscalls:sys_enter,1,100.00,,\n64,,syscalls:sys_enter_write,1,100.00,,\n3,,syscalls:sys_enter_ppoll,1,100.00,,\n"),
    ("scsi-perf-r2-backend.perf", "800,,raw_syscalls:sys_enter,1,100.00,,\n125,,syscalls:sys_enter_write,1,100.00,,\n"),
    ("scsi-perf-r2-client.perf", "90,,sched:sched_switch,1,100.00,,\n"),
];

/// The table the script's former Python code printed for the same files (`... 2 100 bench blk
/// scsi`): blk's round 2 has no interrupts (completions per interrupt = ops / 1).
const EXPECTED: &str = "Client: bench. Median of 2 interleaved rounds (min-max); each figure divided by the requests the client completed over the same window.\n\
\n\
### Without tracing\n\
\n\
| per completed request | blk | scsi |\n\
|---|---|---|\n\
| IOPS | 5500 (5000-6000) | 5500 (4000-7000) |\n\
| backend CPU us per request | 27.5000 (25.0000-30.0000) | 27.5000 (15.0000-40.0000) |\n\
| completions per interrupt | 1005.00 (10.00-2000.00) | 15.81 (15.62-16.00) |\n\
| client latency p99 us | 85 (80-90) | 110 (100-120) |\n\
\n\
scsi / blk, ops per backend CPU-second, per round: 0.75 1.67 (median 1.21x)\n\
\n\
### With perf counting (slows both sides; compare the paths with each other, not with the table above)\n\
\n\
b = backend process, c = client process (scheduler events only).\n\
\n\
| per completed request | blk | scsi |\n\
|---|---|---|\n\
| IOPS | 3250 (3000-3500) | 2550 (2500-2600) |\n\
| backend CPU us per request | 35.0000 (30.0000-40.0000) | 47.5000 (45.0000-50.0000) |\n\
| completions per interrupt | 13.00 (10.00-16.00) | 20.00 (20.00-20.00) |\n\
| client latency p99 us | 155 (150-160) | 172 (170-175) |\n\
| b syscalls | 0.1500 (0.0000-0.3000) | 0.4500 (0.4000-0.5000) |\n\
| b epoll_wait | 0.0200 (0.0000-0.0400) | 0.0000 (0.0000-0.0000) |\n\
| b sched_yield | 0.0000 (0.0000-0.0000) | 0.0000 (0.0000-0.0000) |\n\
| b write | 0.0000 (0.0000-0.0000) | 0.0633 (0.0625-0.0640) |\n\
| b read | 0.0000 (0.0000-0.0000) | 0.0000 (0.0000-0.0000) |\n\
| b timerfd_settime | 0.0000 (0.0000-0.0000) | 0.0000 (0.0000-0.0000) |\n\
| b ppoll (qemu's loop) | 0.0000 (0.0000-0.0000) | 0.0015 (0.0000-0.0030) |\n\
| b switches | 0.0355 (0.0000-0.0710) | 0.0000 (0.0000-0.0000) |\n\
| b wakeups given | 0.0000 (0.0000-0.0000) | 0.0000 (0.0000-0.0000) |\n\
| c switches | 0.0550 (0.0500-0.0600) | 0.0225 (0.0000-0.0450) |\n\
| c wakeups given | 0.0043 (0.0035-0.0050) | 0.0000 (0.0000-0.0000) |\n\
\n\
scsi / blk, ops per backend CPU-second, per round: 0.80 0.67 (median 0.73x)\n\
\n\
";

fn fixture(dir: &Path) {
    for (name, ops, interrupts, iops, p99, ticks) in RUNS {
        let mut r = report(iops, (10.0, p99), None, None);
        (r.total.ops, r.total.interrupts) = (ops, interrupts);
        write_report(dir, &format!("{name}.json"), &r);
        write(dir, &format!("{name}-ticks"), &format!("{ticks}\n"));
    }
    for (name, text) in PERF {
        write(dir, name, text);
    }
}

fn args(v: &[&str]) -> Result<SyscallsArgs, clap::Error> {
    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        syscalls: SyscallsArgs,
    }
    Cli::try_parse_from(std::iter::once("syscalls").chain(v.iter().copied())).map(|c| c.syscalls)
}

#[test]
fn a_table_from_a_small_run() {
    let dir = tempfile::tempdir().unwrap();
    fixture(dir.path());
    let d = dir.path().to_str().unwrap();
    let a = args(&[d, "--rounds", "2", "--paths", "blk scsi", "--hz", "100"]).unwrap();
    assert_eq!(table(&a).unwrap(), EXPECTED);
}

#[test]
fn perf_lines() {
    let dir = tempfile::tempdir().unwrap();
    fixture(dir.path());
    let counts = perf_counts(&dir.path().join("blk-perf-r1-backend.perf")).unwrap();
    assert_eq!(counts, [300.0, 40.0, 0.0, 0.0, 0.0, 0.0, 0.0, 71.0, 0.0]);
    assert_eq!(
        perf_counts(&dir.path().join("none.perf")).unwrap(),
        [0.0; 9]
    );
}

#[test]
fn missing_or_broken_files_are_errors_naming_them() {
    let dir = tempfile::tempdir().unwrap();
    fixture(dir.path());
    let d = dir.path().to_str().unwrap();
    let err = |v: &[&str]| table(&args(v).unwrap()).unwrap_err().to_string();
    // Round 3 was not run.
    assert!(err(&[d, "--rounds", "3", "--paths", "blk"]).contains("blk-bare-r3.json"));
    write(dir.path(), "blk-bare-r1-ticks", "3 ticks\n");
    assert!(err(&[d, "--rounds", "1", "--paths", "blk"]).contains("blk-bare-r1-ticks"));
    let mut none = report(1.0, (1.0, 1.0), None, None);
    none.total.ops = 0;
    write_report(dir.path(), "scsi-bare-r1.json", &none);
    let e = err(&[d, "--rounds", "1", "--paths", "scsi"]);
    assert!(
        e.contains("scsi-bare-r1.json") && e.contains("no request"),
        "{e}"
    );
}

#[test]
fn bad_arguments() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    assert!(args(&[d, "--client", "fio"]).is_err());
    assert!(args(&[d, "--hz", "0"]).is_err());
    assert!(args(&[d, "--paths", "blk ../x"]).is_err());
    let ok = args(&[d]).unwrap();
    assert_eq!((ok.rounds, ok.hz, ok.client.as_str()), (3, 100, "bench"));
    assert_eq!(ok.paths.0, ["blk", "scsi10", "scsi16"]);
}
