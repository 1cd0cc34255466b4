//! `migrate verdict --from FILE [--primary-ends-with SUFFIX] DIR...`: gives results written
//! before suites declared a `[verdict]` the one they were judged with, as data.
//!
//! Contract:
//! 1. FILE is a TOML file with one `[verdict]` table (suite::VerdictSpec), validated before any
//!    results.json is read; a bad FILE or a missing DIR is one line and exit 2, nothing written.
//! 2. A results.json is rewritten only when it names a primary metric, carries no `verdict`,
//!    and (with `--primary-ends-with`) its primary metric ends with SUFFIX; every other one is
//!    left as it is. A second run changes nothing.
//! 3. A rewritten file is the run read and written back by `results` (atomic rename), with
//!    `info.verdict` set, compact when it was compact (docs/results keeps them so): what a
//!    report reads from it is otherwise unchanged.
//! 4. Prints how many files were rewritten, left, and unreadable.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Subcommand;
use serde::Deserialize;

use gt_results::results::RunResult;
use gt_suite::VerdictSpec;

use super::fail;

#[derive(Subcommand, Debug)]
pub enum MigrateCmd {
    /// Set `info.verdict` from FILE's `[verdict]` in every results.json under DIR that names a
    /// primary metric and carries none (rule 2).
    Verdict {
        /// A TOML file with one `[verdict]` table (companions, observation, caveat).
        #[arg(long = "from", value_name = "FILE")]
        from: PathBuf,
        /// Only runs whose primary metric ends with this suffix.
        #[arg(long, value_name = "SUFFIX")]
        primary_ends_with: Option<String>,
        #[arg(required = true)]
        dirs: Vec<PathBuf>,
    },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct VerdictFile {
    verdict: VerdictSpec,
}

/// Rule 1.
fn load_verdict(file: &PathBuf) -> Result<VerdictSpec, String> {
    let text =
        std::fs::read_to_string(file).map_err(|e| format!("--from {}: {e}", file.display()))?;
    let v: VerdictFile = toml::from_str(&text)
        .map_err(|e| format!("--from {}: {}", file.display(), e.message()))?;
    v.verdict
        .validate()
        .map_err(|e| format!("--from {}: {e}", file.display()))?;
    Ok(v.verdict)
}

/// Rule 2.
fn wants(r: &RunResult, suffix: Option<&str>) -> bool {
    r.info.verdict.is_none()
        && r.info
            .primary_metric
            .as_deref()
            .is_some_and(|p| suffix.is_none_or(|s| p.ends_with(s)))
}

/// Runs `migrate`.
pub fn migrate_cmd(cmd: &MigrateCmd) -> ExitCode {
    let MigrateCmd::Verdict {
        from,
        primary_ends_with,
        dirs,
    } = cmd;
    let spec = match load_verdict(from) {
        Ok(s) => s,
        Err(e) => return fail(e, 2),
    };
    if let Some(d) = dirs.iter().find(|d| !d.is_dir()) {
        return fail(format!("{}: not a directory", d.display()), 2);
    }
    let (mut rewritten, mut left, mut unreadable) = (0usize, 0usize, 0usize);
    for d in dirs {
        for (file, r) in RunResult::find_all_at(d) {
            let Ok(mut r) = r else {
                unreadable += 1;
                continue;
            };
            if !wants(&r, primary_ends_with.as_deref()) {
                left += 1;
                continue;
            }
            r.info.verdict = Some(spec.clone());
            let dir = file.parent().map(PathBuf::from).unwrap_or_default();
            let compact = std::fs::read(&file).is_ok_and(|b| !b.starts_with(b"{\n"));
            if let Err(e) = r.write_as(&dir, compact) {
                return fail(format!("{}: {e}", file.display()), 1);
            }
            rewritten += 1;
        }
    }
    println!("migrate verdict: {rewritten} rewritten, {left} left as they were, {unreadable} unreadable");
    ExitCode::SUCCESS
}
