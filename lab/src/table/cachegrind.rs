//! `table cachegrind`: experiments/cachegrind-ab.sh's table of one run (that script says how
//! each file is measured): per build and tool, the backend's events per completed request.
//!
//! 1. Files in OUT_DIR per build B (`old`, `new`) and tool T (`callgrind`, `cachegrind`):
//!    `B-T-stats.json` (the backend's `--stats-file`) and `B.T` (the tool's output); all four
//!    pairs required.
//! 2. Requests: the sum of the stats' per-queue completions. Events and totals: the tool's
//!    `events:` line and its first `totals:` or `summary:` line (as `table callgrind` reads).
//! 3. Each event per request = total / requests, grouped by thousands, 1 place (the script's
//!    former Python printed `{:,.1f}`).
//! 4. No requests or no totals line is an error naming the file.

use std::path::PathBuf;

use super::callgrind::{completions_in, totals_in};
use super::TableError;
use gt_report::pyfmt::{grouped, grouped_fixed};

#[derive(Debug, clap::Args)]
pub(crate) struct CachegrindArgs {
    /// The run's directory (experiments/cachegrind-ab.sh's OUT_DIR).
    #[arg(value_name = "OUT_DIR", value_parser = super::run_dir)]
    dir: PathBuf,
    /// The path the run measured (the header's word): scsi or blk.
    #[arg(long = "path", default_value = "scsi", value_parser = ["scsi", "blk"])]
    kind: String,
}

/// The table (module docs).
pub(crate) fn table(a: &CachegrindArgs) -> Result<String, TableError> {
    let mut out = format!(
        "| build | tool | requests | per request ({}) |\n|---|---|---|---|\n",
        a.kind
    );
    for build in ["old", "new"] {
        for tool in ["callgrind", "cachegrind"] {
            let stats = a.dir.join(format!("{build}-{tool}-stats.json"));
            let n = completions_in(stats)?;
            let (events, totals) = totals_in(&a.dir.join(format!("{build}.{tool}")))?;
            let per: Vec<String> = events
                .iter()
                .zip(&totals)
                .map(|(e, &t)| format!("{e} {}", grouped_fixed(t as f64 / n as f64, 1)))
                .collect();
            out += &format!(
                "| {build} | {tool} | {} | {} |\n",
                grouped(n as f64),
                per.join(" ")
            );
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::fixtures::{stats_file as stats, write};

    #[test]
    fn a_table_from_a_small_run_and_an_error_naming_a_missing_file() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let a = CachegrindArgs {
            dir: d.to_path_buf(),
            kind: "scsi".into(),
        };
        for b in ["old", "new"] {
            stats(d, &format!("{b}-callgrind-stats.json"), &[1000, 1000]);
            write(
                d,
                &format!("{b}.callgrind"),
                "events: Ir\nsummary: 15370800\ntotals: 15370800\n",
            );
        }
        assert!(table(&a)
            .unwrap_err()
            .to_string()
            .contains("old-cachegrind-stats.json"));
        for b in ["old", "new"] {
            stats(d, &format!("{b}-cachegrind-stats.json"), &[2000]);
            write(
                d,
                &format!("{b}.cachegrind"),
                "events: Ir Bcm\nsummary: 15320800 11800\n",
            );
        }
        assert_eq!(
            table(&a).unwrap(),
            "| build | tool | requests | per request (scsi) |\n|---|---|---|---|\n\
             | old | callgrind | 2,000 | Ir 7,685.4 |\n\
             | old | cachegrind | 2,000 | Ir 7,660.4 Bcm 5.9 |\n\
             | new | callgrind | 2,000 | Ir 7,685.4 |\n\
             | new | cachegrind | 2,000 | Ir 7,660.4 Bcm 5.9 |\n"
        );
    }
}
