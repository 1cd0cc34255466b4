//! `lab table`: the tables of experiments/bench-latency.sh (`table latency`),
//! experiments/profile-backend.sh (`table profile`), experiments/bench-ab.sh (`table ab`),
//! experiments/syscalls-per-request.sh (`table syscalls`) and
//! experiments/callgrind-per-request.sh (`table callgrind`), built from one run's files, and one
//! cyclictest histogram's figures (`table cyclictest`).
//!
//! 1. Every JSON file is read through the type that writes it: the bench's `--json` through
//!    [`vhost_blk_bench::report::Report`], the backend's `--stats-file` through
//!    [`vhost_blk_stats::DeviceStats`]; cyclictest's histograms through [`cyclictest`]; perf's
//!    and callgrind's text by the rules of [`syscalls`] and [`callgrind`].
//! 2. A file a run may lack (a tool not installed, a failed run) is absent, not an error: its row
//!    is left out or its figure shown as `-`. A file that exists but does not parse, or lacks a
//!    figure the table needs, is an error naming it (exit 1).
//! 3. The text is byte for byte the committed tables' (ci/check-reports.sh diffs them): numbers
//!    are formatted as [`gt_report::pyfmt`] says, and a median is `statistics.median`'s
//!    ([`median`]).
//! 4. Bad arguments: one line, exit 2.

mod ab;
mod cachegrind;
mod callgrind;
mod cyclictest;
#[cfg(test)]
mod fixtures;
mod latency;
mod profile;
mod syscalls;

use std::ffi::OsString;
use std::io;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use gt_results::metrics::median_sorted;
use serde::de::DeserializeOwned;

/// Tables of an experiment's files (their Markdown on stdout).
#[derive(Debug, Parser)]
#[command(name = "lab-table", bin_name = "lab table")]
struct TableArgs {
    #[command(subcommand)]
    table: Table,
}

#[derive(Debug, Subcommand)]
enum Table {
    /// experiments/bench-latency.sh's table (latency accuracy, efficiency, goals) of one run.
    Latency(latency::LatencyArgs),
    /// experiments/profile-backend.sh's summary (where the backend's CPU goes) of one run.
    Profile(profile::ProfileArgs),
    /// p50 / p99 / max / n of one cyclictest histogram (docs/results/bench-latency-s30/fair-floor.sh).
    Cyclictest(cyclictest::CyclictestArgs),
    /// experiments/bench-ab.sh's table (old build A against new B) of one run.
    Ab(ab::AbArgs),
    /// experiments/syscalls-per-request.sh's table (system calls, switches, wake-ups per request).
    Syscalls(syscalls::SyscallsArgs),
    /// experiments/callgrind-per-request.sh's table (the backend's instructions per request).
    Callgrind(callgrind::CallgrindArgs),
    /// experiments/cachegrind-ab.sh's table (two builds' events per request under valgrind).
    Cachegrind(cachegrind::CachegrindArgs),
    #[command(flatten)]
    Harness(crate::harness::TableCmd),
}

/// Why a table could not be built.
#[derive(Debug, thiserror::Error)]
pub(crate) enum TableError {
    #[error("reading {0}: {1}")]
    Read(PathBuf, io::Error),
    #[error("{0}: {1}")]
    Json(PathBuf, serde_json::Error),
    #[error("{0}: {1}")]
    Content(PathBuf, String),
}

/// The text of `path`, or `None` when there is no such file.
pub(crate) fn read_opt(path: &Path) -> Result<Option<String>, TableError> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(Some(text)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(TableError::Read(path.to_path_buf(), e)),
    }
}

/// The JSON file `path` as a `T`, or `None` when there is no such file.
pub(crate) fn load<T: DeserializeOwned>(path: &Path) -> Result<Option<T>, TableError> {
    read_opt(path)?
        .map(|text| serde_json::from_str(&text).map_err(|e| TableError::Json(path.into(), e)))
        .transpose()
}

/// A clap error as one line: its message without the `error: ` prefix, the lines that name
/// what is wrong joined, usage and hints left out.
pub(crate) fn one_line(e: &clap::Error) -> String {
    if e.kind() == clap::error::ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
        return "which table: latency, profile, cyclictest, ab, syscalls, callgrind or cachegrind (see --help)"
            .into();
    }
    let text = e.to_string();
    let message: Vec<&str> = text
        .lines()
        .take_while(|l| !l.trim().is_empty())
        .map(str::trim)
        .collect();
    let line = message.join(" ");
    line.strip_prefix("error: ").unwrap_or(&line).to_string()
}

/// The median of the values present, as Python's `statistics.median` (the mean of the two
/// middle values for an even count); `None` for none.
pub(crate) fn median(xs: impl IntoIterator<Item = Option<f64>>) -> Option<f64> {
    let mut v: Vec<f64> = xs.into_iter().flatten().collect();
    v.sort_by(f64::total_cmp);
    (!v.is_empty()).then(|| median_sorted(&v))
}

/// A run's directory: one that exists.
pub(crate) fn run_dir(s: &str) -> Result<PathBuf, String> {
    let path = PathBuf::from(s);
    if path.is_dir() {
        Ok(path)
    } else {
        Err("no such directory".into())
    }
}

/// Names that are parts of a run's file names (configurations, paths), in the table's order.
#[derive(Debug, Clone)]
pub(crate) struct Names(pub Vec<String>);

/// White-space separated names of letters, digits, `-` and `_`, e.g. `null-bench mem-blkio`;
/// at least one.
pub(crate) fn names(s: &str) -> Result<Names, String> {
    let names: Vec<String> = s.split_whitespace().map(String::from).collect();
    if names.is_empty() {
        return Err("no name given".into());
    }
    let name_char = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_';
    match names.iter().find(|n| !n.chars().all(name_char)) {
        Some(bad) => Err(format!("`{bad}` is not a name (letters, digits, - and _)")),
        None => Ok(Names(names)),
    }
}

/// `lab table ARGS...` (`argv` starts at `table`): prints the table.
pub(crate) fn main(argv: impl IntoIterator<Item = OsString>) -> ExitCode {
    let args = match TableArgs::try_parse_from(argv) {
        Ok(args) => args,
        Err(e) if !e.use_stderr() => {
            // --help, --version
            let _ = e.print();
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("lab table: {}", one_line(&e));
            return ExitCode::from(2);
        }
    };
    let table = match args.table {
        Table::Harness(t) => return crate::harness::table_cmd(t),
        ref other => other,
    };
    let table = match table {
        Table::Latency(a) => latency::table(a),
        Table::Profile(a) => profile::table(a),
        Table::Cyclictest(a) => cyclictest::table(a),
        Table::Ab(a) => ab::table(a),
        Table::Syscalls(a) => syscalls::table(a),
        Table::Callgrind(a) => callgrind::table(a),
        Table::Cachegrind(a) => cachegrind::table(a),
        Table::Harness(_) => unreachable!("handled above"),
    };
    match table {
        Ok(text) => {
            print!("{text}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("lab table: {e}");
            ExitCode::from(1)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_arguments_are_one_line() {
        let parse = |v: &[&str]| TableArgs::try_parse_from(v.iter().copied());
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().to_str().unwrap();
        let line = |v: &[&str]| one_line(&parse(v).unwrap_err());
        let bad = line(&["table", "latency", d, "--targets", "10 x"]);
        assert!(bad.contains("--targets") && bad.contains("`x`"), "{bad}");
        let missing = line(&["table", "latency"]);
        assert!(missing.contains("<OUT_DIR>"), "{missing}");
        assert!(line(&["table"])
            .contains("latency, profile, cyclictest, ab, syscalls, callgrind or cachegrind"));
        assert!(line(&["table", "latency", "/no/such/dir"]).contains("no such directory"));
        for l in [bad, missing] {
            assert!(!l.contains('\n') && !l.starts_with("error"), "{l}");
        }
        assert!(parse(&["table", "profile", d, "fio"]).is_err());
        assert!(parse(&["table", "latency", d, "--rounds", "0"]).is_err());
        let ok = parse(&["table", "profile", d, "blkio"]).unwrap();
        assert!(matches!(ok.table, Table::Profile(_)));
    }

    #[test]
    fn names_are_file_name_parts() {
        assert_eq!(
            names(" null-bench  mem_1 ").unwrap().0,
            ["null-bench", "mem_1"]
        );
        assert!(names("  ").unwrap_err().contains("no name"));
        assert!(names("a ../b").unwrap_err().contains("`../b`"));
    }

    #[test]
    fn load_tells_absent_from_unreadable() {
        let dir = tempfile::tempdir().unwrap();
        let absent: Option<serde_json::Value> = load(&dir.path().join("none.json")).unwrap();
        assert!(absent.is_none());
        let bad = dir.path().join("bad.json");
        std::fs::write(&bad, "{").unwrap();
        let err = load::<serde_json::Value>(&bad).unwrap_err();
        assert!(err.to_string().contains("bad.json"), "{err}");
    }

    #[test]
    fn median_is_statistics_median() {
        assert_eq!(median([Some(3.0), Some(1.0), Some(2.0)]), Some(2.0));
        assert_eq!(
            median([Some(3.0), None, Some(1.0), Some(2.0), Some(10.0)]),
            Some(2.5)
        );
        // (0.1 + 0.2) / 2 in doubles, as Python computes it.
        assert_eq!(
            median([Some(0.2), Some(0.1)]),
            Some(0.150_000_000_000_000_02)
        );
        assert_eq!(median([None, None]), None);
        assert_eq!(median([]), None);
    }
}
