//! `table callgrind`: experiments/callgrind-per-request.sh's table of one run (that script says
//! how each file is measured): the backend's instructions per request, per path.
//!
//! 1. Files in OUT_DIR per path P: `P-stats.json` (the backend's `--stats-file`, read through
//!    [`DeviceStats`]) and `P.cg` (callgrind's output); both required.
//! 2. Completions: the sum of the stats' per-queue completions. Ir: the first number of the
//!    first line of `P.cg` that starts with `totals:` or `summary:` (callgrind writes both; the
//!    first event is Ir).
//! 3. Ir per request = Ir / completions, 0 places; `vs` = that over the first path's, 3 places.
//! 4. No completions, no totals line, or an Ir of 0 (the collection's symbol matched nothing)
//!    is an error naming the file.

use std::path::PathBuf;

use vhost_blk_stats::DeviceStats;

use super::{load, read_opt, Names, TableError};
use gt_report::pyfmt::fixed;

#[derive(Debug, clap::Args)]
pub(crate) struct CallgrindArgs {
    /// The run's directory (experiments/callgrind-per-request.sh's OUT_DIR).
    #[arg(value_name = "OUT_DIR", value_parser = super::run_dir)]
    dir: PathBuf,
    /// Paths in the table's order, white-space separated; the first is the `vs` base.
    #[arg(long, default_value = "blk scsi10 scsi16", value_parser = super::names)]
    paths: Names,
}

/// The completions a path's stats file counted (rule 2).
fn completions(a: &CallgrindArgs, p: &str) -> Result<u64, TableError> {
    completions_in(a.dir.join(format!("{p}-stats.json")))
}

/// The completions the backend's stats file `path` counted: the sum over its queues.
pub(super) fn completions_in(path: PathBuf) -> Result<u64, TableError> {
    let stats: DeviceStats =
        load(&path)?.ok_or_else(|| TableError::Content(path.clone(), "no such file".into()))?;
    let n = stats.queues.iter().map(|q| q.completions).sum();
    if n == 0 {
        return Err(TableError::Content(path, "no request completed".into()));
    }
    Ok(n)
}

/// The instructions a path's callgrind file counted (rule 2).
fn instructions(a: &CallgrindArgs, p: &str) -> Result<u64, TableError> {
    let path = a.dir.join(format!("{p}.cg"));
    let (_, totals) = totals_in(&path)?;
    let ir = totals[0];
    let err = |what: &str| TableError::Content(path.clone(), what.into());
    if ir == 0 {
        return Err(err(
            "0 instructions counted (the collection's symbol matched nothing?)",
        ));
    }
    Ok(ir)
}

/// The event names (the `events:` line) and their totals (the first line that starts with
/// `totals:` or `summary:`) of a callgrind or cachegrind output file: at least one total (the
/// first event is Ir); the events may be missing.
pub(super) fn totals_in(path: &std::path::Path) -> Result<(Vec<String>, Vec<u64>), TableError> {
    let text =
        read_opt(path)?.ok_or_else(|| TableError::Content(path.into(), "no such file".into()))?;
    let err = |what: &str| TableError::Content(path.into(), what.into());
    let events: Vec<String> = text
        .lines()
        .find_map(|l| l.strip_prefix("events:"))
        .map(|e| e.split_whitespace().map(str::to_string).collect())
        .unwrap_or_default();
    let line = text
        .lines()
        .find(|l| l.starts_with("totals:") || l.starts_with("summary:"))
        .ok_or_else(|| err("no totals: or summary: line"))?;
    let totals: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(str::parse)
        .collect::<Result<_, _>>()
        .map_err(|_| err("the totals line holds something other than counts"))?;
    if totals.is_empty() {
        return Err(err("the totals line has no instruction count"));
    }
    Ok((events, totals))
}

/// The table (module docs).
pub(crate) fn table(a: &CallgrindArgs) -> Result<String, TableError> {
    let mut out = String::from(
        "| path | completions | Ir in handle_event | Ir per request | vs blk |\n|---|---|---|---|---|\n",
    );
    let mut base = None;
    for p in &a.paths.0 {
        let (n, ir) = (completions(a, p)?, instructions(a, p)?);
        let per = ir as f64 / n as f64;
        let base = *base.get_or_insert(per);
        out += &format!(
            "| {p} | {n} | {ir} | {} | {}x |\n",
            fixed(per, 0),
            fixed(per / base, 3)
        );
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::fixtures::{stats_file, write};
    use clap::Parser;
    use std::path::Path;

    fn args(v: &[&str]) -> CallgrindArgs {
        #[derive(Parser)]
        struct Cli {
            #[command(flatten)]
            callgrind: CallgrindArgs,
        }
        Cli::try_parse_from(std::iter::once("callgrind").chain(v.iter().copied()))
            .unwrap()
            .callgrind
    }

    /// A path's stats file whose queues completed `per_queue` requests each.
    fn stats(dir: &Path, name: &str, per_queue: &[u64]) {
        stats_file(dir, &format!("{name}-stats.json"), per_queue);
    }

    #[test]
    fn a_table_from_a_small_run() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        stats(d, "blk", &[600, 400]);
        write(
            d,
            "blk.cg",
            "version: 1\ncmd: vhost-blk\nevents: Ir\nsummary: 7345500\n",
        );
        stats(d, "scsi10", &[300, 300, 400]);
        // callgrind's later form: totals after the cost lines, several events.
        let cg = "events: Ir Dr\nfn=(1) handle_event\n16 3\ntotals: 7941000 12\nsummary: 1\n";
        write(d, "scsi10.cg", cg);
        let text = table(&args(&[d.to_str().unwrap(), "--paths", "blk scsi10"])).unwrap();
        // The script's former Python printed the same for these numbers.
        assert_eq!(
            text,
            "| path | completions | Ir in handle_event | Ir per request | vs blk |\n\
             |---|---|---|---|---|\n\
             | blk | 1000 | 7345500 | 7346 | 1.000x |\n\
             | scsi10 | 1000 | 7941000 | 7941 | 1.081x |\n"
        );
    }

    #[test]
    fn broken_runs_are_errors_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let err = |p: &str| {
            let a = args(&[d.to_str().unwrap(), "--paths", p]);
            table(&a).unwrap_err().to_string()
        };
        assert!(err("blk").contains("blk-stats.json"));
        stats(d, "blk", &[10]);
        assert!(err("blk").contains("blk.cg"));
        write(d, "blk.cg", "events: Ir\n");
        assert!(err("blk").contains("no totals"));
        write(d, "blk.cg", "summary: 0\n");
        assert!(err("blk").contains("0 instructions"));
        stats(d, "idle", &[0, 0]);
        write(d, "idle.cg", "summary: 5\n");
        let e = err("idle");
        assert!(
            e.contains("idle-stats.json") && e.contains("no request"),
            "{e}"
        );
    }
}
