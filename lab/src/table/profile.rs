//! `table profile`: experiments/profile-backend.sh's summary of one run, where the backend's CPU
//! goes, ours beside qemu-storage-daemon.
//!
//! 1. Files in OUT_DIR, per configuration (`ours-t8`, `ours-t1`, `qsd`, the table's columns in
//!    that order): `<name>-flat.txt` (perf report's flat profile: lines `PCT% [.] SYMBOL` or
//!    `[k]`) and `<name>.json` (the bench's report). Every one must be there.
//! 2. A symbol counts in the first group of [`GROUPS`] it matches; a group's share is the sum of
//!    its symbols' percentages, in file order.
//! 3. A symbol starting `0x` is unresolved (a stripped binary) and counted in no group.

use std::path::PathBuf;

use super::{load, read_opt, TableError};
use gt_report::pyfmt::fixed;
use vhost_blk_bench::args::Client;
use vhost_blk_bench::report::Report;

#[derive(Debug, clap::Args)]
pub(crate) struct ProfileArgs {
    /// The run's directory (experiments/profile-backend.sh's OUT_DIR).
    #[arg(value_name = "OUT_DIR", value_parser = super::run_dir)]
    dir: PathBuf,
    /// The client of the run (the script's CLIENT).
    #[arg(value_enum)]
    client: Client,
}

/// How a group's pattern matches a symbol.
#[derive(Debug, Clone, Copy)]
enum Pat {
    /// Anywhere in the symbol.
    Has(&'static str),
    /// At the symbol's end.
    Ends(&'static str),
    /// Anywhere, not followed by a word character (a letter, digit or `_`).
    Word(&'static str),
}

impl Pat {
    fn matches(self, sym: &str) -> bool {
        match self {
            Pat::Has(s) => sym.contains(s),
            Pat::Ends(s) => sym.ends_with(s),
            Pat::Word(s) => sym.match_indices(s).any(|(i, _)| {
                let after = sym.get(i + s.len()..).and_then(|r| r.chars().next());
                !after.is_some_and(|c| c.is_alphanumeric() || c == '_')
            }),
        }
    }
}

use Pat::{Ends, Has, Word};

/// Cost groups: the table's words and the symbols they take.
const GROUPS: [(&str, &[Pat]); 8] = [
    (
        "context switches and preemption (finish_task_switch, __schedule, \
         irqentry_exit_to_user_mode)",
        &[
            Has("finish_task_switch"),
            Word("__schedule"),
            Has("irqentry_exit_to_user_mode"),
        ],
    ),
    (
        "eventfd write / read (signalling, kicks; the wake-up of the waiting thread)",
        &[
            Ends("_raw_spin_unlock_irq"),
            Has("eventfd_write"),
            Has("eventfd_read"),
            Has("__GI___libc_write"),
            Has("ksys_write"),
            Has("ksys_read"),
            Has("vfs_write"),
            Has("vfs_read"),
        ],
    ),
    (
        "guest-memory translation (vm-memory region lookups, vu_gpa_to_va)",
        &[
            Has("to_region_addr"),
            Has("GuestMemoryBackendSliceIterator"),
            Has("vu_gpa_to_va"),
            Has("find_region"),
        ],
    ),
    ("zero fill (memset)", &[Has("memset")]),
    (
        "small copies (memmove / memcpy)",
        &[Has("memmove"), Has("memcpy")],
    ),
    (
        "statistics histograms (hdrhistogram)",
        &[Has("hdrhistogram")],
    ),
    ("clock_gettime", &[Has("clock_gettime")]),
    ("sched_yield", &[Has("sched_yield")]),
];

/// The configurations, in column order.
const CONFIGS: [&str; 3] = ["ours-t8", "ours-t1", "qsd"];

/// The index in [`GROUPS`] of the first group that takes `sym`.
fn group(sym: &str) -> Option<usize> {
    GROUPS
        .iter()
        .position(|(_, pats)| pats.iter().any(|p| p.matches(sym)))
}

/// `s` after its leading white space, if it has any.
fn after_space(s: &str) -> Option<&str> {
    s.starts_with(char::is_whitespace).then(|| s.trim_start())
}

/// A flat profile line: `  12.34%  [.] symbol` -> (12.34, "symbol").
fn flat_row(line: &str) -> Option<(f64, &str)> {
    let l = line.trim_start();
    let end = l.find(|c: char| !(c.is_ascii_digit() || c == '.'))?;
    let pct = l.get(..end)?.parse().ok()?;
    let rest = l.get(end..)?.strip_prefix('%')?;
    let rest = after_space(rest)?;
    let rest = rest
        .strip_prefix("[.]")
        .or_else(|| rest.strip_prefix("[k]"))?;
    let sym = if rest.is_empty() {
        rest
    } else {
        after_space(rest)?
    };
    Some((pct, sym.trim_end()))
}

/// One configuration's figures: group shares, unresolved share, ops per backend CPU-second.
struct Column {
    shares: [f64; GROUPS.len()],
    unresolved: f64,
    eff: f64,
}

fn column(a: &ProfileArgs, name: &str) -> Result<Column, TableError> {
    let path = a.dir.join(format!("{name}-flat.txt"));
    let missing = |path: PathBuf| TableError::Content(path, "no such file".into());
    let flat = read_opt(&path)?.ok_or_else(|| missing(path.clone()))?;
    let mut col = Column {
        shares: [0.0; GROUPS.len()],
        unresolved: 0.0,
        eff: 0.0,
    };
    for (pct, sym) in flat.lines().filter_map(flat_row) {
        if let Some(share) = group(sym).and_then(|g| col.shares.get_mut(g)) {
            *share += pct;
        }
        if sym.starts_with("0x") {
            col.unresolved += pct;
        }
    }
    let path = a.dir.join(format!("{name}.json"));
    let report: Report = load(&path)?.ok_or_else(|| missing(path.clone()))?;
    col.eff = report
        .ops_per_backend_cpu_second
        .filter(|&e| e > 0.0)
        .ok_or_else(|| TableError::Content(path, "no ops_per_backend_cpu_second".into()))?;
    Ok(col)
}

/// The table (module docs).
pub(crate) fn table(a: &ProfileArgs) -> Result<String, TableError> {
    let cols = CONFIGS
        .iter()
        .map(|name| column(a, name))
        .collect::<Result<Vec<_>, _>>()?;
    let client = clap::ValueEnum::to_possible_value(&a.client)
        .map(|v| v.get_name().to_string())
        .unwrap_or_default();
    let mut out = vec![
        format!(
            "| share of the backend's samples, {client} client | ours (one worker per queue) \
             | ours --threads 1 | qemu-storage-daemon |"
        ),
        "|---|---|---|---|".into(),
    ];
    let row = |label: &str, f: &dyn Fn(&Column) -> String| {
        let cells: Vec<String> = cols.iter().map(f).collect();
        format!("| {label} | {} |", cells.join(" | "))
    };
    for (g, (label, _)) in GROUPS.iter().enumerate() {
        let share = |c: &Column| c.shares.get(g).copied().unwrap_or_default();
        out.push(row(label, &|c| format!("{} %", fixed(share(c), 1))));
    }
    out.push(row(
        "ops per backend CPU-second (this profiled run)",
        &|c| format!("{}M", fixed(c.eff / 1e6, 2)),
    ));
    out.push(row("backend CPU per request, us", &|c| {
        fixed(1e6 / c.eff, 3)
    }));
    out.push(row(
        "samples in unresolved symbols (a stripped binary: counted in no group)",
        &|c| format!("{} %", fixed(c.unresolved, 1)),
    ));
    Ok(out.join("\n") + "\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flat_lines_and_groups() {
        assert_eq!(
            flat_row("    12.34%  [k] finish_task_switch.isra.0  "),
            Some((12.34, "finish_task_switch.isra.0"))
        );
        assert_eq!(
            flat_row("     0.50%  [.] 0x00000000000abc12"),
            Some((0.5, "0x00000000000abc12"))
        );
        assert_eq!(flat_row("5.00% [k]"), Some((5.0, "")));
        assert_eq!(flat_row("# Samples: 6K of event 'cpu-clock'"), None);
        assert_eq!(flat_row("  5.00%[k] x"), None);
        assert_eq!(flat_row("  5.00%  [u] x"), None);
        assert_eq!(group("__schedule"), Some(0));
        assert_eq!(
            group("__schedule_loop"),
            None,
            "a word boundary after __schedule"
        );
        assert_eq!(group("__schedule.part.0"), Some(0));
        assert_eq!(group("_raw_spin_unlock_irq"), Some(1));
        assert_eq!(
            group("_raw_spin_unlock_irqrestore"),
            None,
            "at the end only"
        );
        assert_eq!(
            group("vm_memory::GuestMemoryBackendSliceIterator::next"),
            Some(2)
        );
        // The first group wins: memcpy inside an eventfd symbol counts as eventfd.
        assert_eq!(group("eventfd_write_memcpy"), Some(1));
        assert_eq!(group("__memset_avx2_unaligned_erms"), Some(3));
        assert_eq!(group("hdrhistogram::Histogram::record"), Some(5));
        assert_eq!(group("main"), None);
    }

    #[test]
    fn a_summary_from_a_small_run() {
        let dir = tempfile::tempdir().unwrap();
        for (name, flat, eff) in [
            ("ours-t8", "  40.00%  [k] finish_task_switch\n  10.25%  [.] __memmove_avx\n   2.50%  [.] 0x1234\n", 2.0e6),
            ("ours-t1", "  30.00%  [k] __schedule\n   5.00%  [k] eventfd_write\n", 4.0e6),
            ("qsd", "  1.00%  [.] memset\n", 8.0e5),
        ] {
            std::fs::write(dir.path().join(format!("{name}-flat.txt")), flat).unwrap();
            let json = serde_json::json!({
                "socket": "/s", "client": "blkio", "device": "blk", "rw": "randread", "bs": 4096,
                "queues": 8, "qd": 16, "threads": 2, "seconds": 3.0, "measure_irq": false,
                "backend_cpu_seconds": 1.0, "ops_per_backend_cpu_second": eff, "per_queue": [],
                "total": {"queue": null, "ops": 1, "errors": 0, "iops": 1.0, "mib_per_s": 1.0,
                    "interrupts": 1, "latency_us": {"count": 1, "mean": 1.0, "min": 1.0,
                    "p50": 1.0, "p90": 1.0, "p99": 1.0, "p999": 1.0, "max": 1.0},
                    "irq_delay_us": null, "completions_per_irq": null}
            });
            std::fs::write(dir.path().join(format!("{name}.json")), json.to_string()).unwrap();
        }
        let a = ProfileArgs {
            dir: dir.path().into(),
            client: Client::Blkio,
        };
        let text = table(&a).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2 + GROUPS.len() + 3);
        assert_eq!(
            lines.first().copied(),
            Some(
                "| share of the backend's samples, blkio client \
            | ours (one worker per queue) | ours --threads 1 | qemu-storage-daemon |"
            )
        );
        assert!(
            lines.contains(
                &"| context switches and preemption (finish_task_switch, \
            __schedule, irqentry_exit_to_user_mode) | 40.0 % | 30.0 % | 0.0 % |"
            ),
            "{text}"
        );
        assert!(lines.contains(&"| small copies (memmove / memcpy) | 10.2 % | 0.0 % | 0.0 % |"));
        assert!(lines.contains(&"| zero fill (memset) | 0.0 % | 0.0 % | 1.0 % |"));
        assert!(lines.contains(
            &"| ops per backend CPU-second (this profiled run) | 2.00M | 4.00M | 0.80M |"
        ));
        assert!(lines.contains(&"| backend CPU per request, us | 0.500 | 0.250 | 1.250 |"));
        assert!(lines.contains(
            &"| samples in unresolved symbols (a stripped binary: counted in \
            no group) | 2.5 % | 0.0 % | 0.0 % |"
        ));
        std::fs::remove_file(dir.path().join("qsd-flat.txt")).unwrap();
        let err = table(&a).unwrap_err().to_string();
        assert!(err.contains("qsd-flat.txt"), "{err}");
    }
}
