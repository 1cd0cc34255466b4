//! `migrate`: gives results written before a fact moved from the harness's code into suite data
//! the fact they were judged with, as data: `migrate verdict --from FILE
//! [--primary-ends-with SUFFIX] DIR...` (a `[verdict]`), `migrate judgement-words --from FILE
//! DIR...` (a `[judgement.words]`).
//!
//! Contract:
//! 1. FILE is a TOML file with the table (suite::VerdictSpec; suite::JudgementWords, read from
//!    a suite file), validated before any results.json is read; a bad FILE or a missing DIR is one line and
//!    exit 2, nothing written.
//! 2. `verdict` rewrites a results.json only when it names a primary metric, carries no
//!    `verdict`, and (with `--primary-ends-with`) its primary metric ends with SUFFIX;
//!    `judgement-words` only when it carries a `judgement` without `words`. Every other one is
//!    left as it is; a second run changes nothing.
//! 3. A rewritten file is the run read and written back by `results` (atomic rename), with
//!    `info.verdict` set, compact when it was compact (docs/results keeps them so): what a
//!    report reads from it is otherwise unchanged.
//! 4. Prints how many files were rewritten, left, and unreadable.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Subcommand;
use serde::Deserialize;

use gt_results::results::RunResult;
use gt_suite::{JudgementWords, VerdictSpec};

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
    /// Set `info.judgement.words` from FILE's `[judgement.words]` in every results.json under
    /// DIR that carries a judgement without them (rule 2).
    JudgementWords {
        /// A suite file (or any TOML file) with a `[judgement.words]` table.
        #[arg(long = "from", value_name = "FILE")]
        from: PathBuf,
        #[arg(required = true)]
        dirs: Vec<PathBuf>,
    },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct VerdictFile {
    verdict: VerdictSpec,
}

/// A suite file (or any TOML file) with a `[judgement.words]` table; its other keys are not
/// read, so the words come from the suite that declares them.
#[derive(Deserialize)]
struct WordsFile {
    judgement: WordsTable,
}

#[derive(Deserialize)]
struct WordsTable {
    words: JudgementWords,
}

/// Rule 1: FILE read and parsed as `T`.
fn load<T: serde::de::DeserializeOwned>(file: &Path) -> Result<T, String> {
    let text =
        std::fs::read_to_string(file).map_err(|e| format!("--from {}: {e}", file.display()))?;
    toml::from_str(&text).map_err(|e| format!("--from {}: {}", file.display(), e.message()))
}

/// One migration: changes a run it wants (rule 2) and says whether it did.
type Edit<'a> = Box<dyn Fn(&mut RunResult) -> bool + 'a>;

/// Runs `migrate`.
pub fn migrate_cmd(cmd: &MigrateCmd) -> ExitCode {
    let (edit, dirs): (Edit, &[PathBuf]) = match cmd {
        MigrateCmd::Verdict {
            from,
            primary_ends_with,
            dirs,
        } => {
            let spec = match load::<VerdictFile>(from)
                .and_then(|f| f.verdict.validate().map(|()| f.verdict))
            {
                Ok(s) => s,
                Err(e) => return fail(e, 2),
            };
            let suffix = primary_ends_with.clone();
            let edit = move |r: &mut RunResult| {
                let wants = r.info.verdict.is_none()
                    && r.info
                        .primary_metric
                        .as_deref()
                        .is_some_and(|p| suffix.as_deref().is_none_or(|s| p.ends_with(s)));
                if wants {
                    r.info.verdict = Some(spec.clone());
                }
                wants
            };
            (Box::new(edit), dirs)
        }
        MigrateCmd::JudgementWords { from, dirs } => {
            let words = match load::<WordsFile>(from) {
                Ok(f) => f.judgement.words,
                Err(e) => return fail(e, 2),
            };
            let edit = move |r: &mut RunResult| match r.info.judgement.as_mut() {
                Some(j) if j.words.is_none() => {
                    j.words = Some(words.clone());
                    j.validate().is_ok()
                }
                _ => false,
            };
            (Box::new(edit), dirs)
        }
    };
    if let Some(d) = dirs.iter().find(|d| !d.is_dir()) {
        return fail(format!("{}: not a directory", d.display()), 2);
    }
    rewrite(dirs, &edit)
}

/// Rules 2-4 over every results.json under `dirs`.
fn rewrite(dirs: &[PathBuf], edit: &Edit) -> ExitCode {
    let (mut rewritten, mut left, mut unreadable) = (0usize, 0usize, 0usize);
    for d in dirs {
        for (file, r) in RunResult::find_all_at(d) {
            let Ok(mut r) = r else {
                unreadable += 1;
                continue;
            };
            if !edit(&mut r) {
                left += 1;
                continue;
            }
            let dir = file.parent().map(PathBuf::from).unwrap_or_default();
            let compact = std::fs::read(&file).is_ok_and(|b| !b.starts_with(b"{\n"));
            if let Err(e) = r.write_as(&dir, compact) {
                return fail(format!("{}: {e}", file.display()), 1);
            }
            rewritten += 1;
        }
    }
    println!("migrate: {rewritten} rewritten, {left} left as they were, {unreadable} unreadable");
    ExitCode::SUCCESS
}
