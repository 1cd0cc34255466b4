//! `lab table kernel-lines LINE...`, `table restart-goals OUT [MIN]`, `table reconnects OUT
//! QEMU...`, `table scale-cost OUT` and `table bisect-run BISECT_JSON ...`: the tables the harness's experiments'
//! READMEs hold, computed from committed results ([`crate::kernel_lines`],
//! [`crate::restart_goals`], [`crate::reconnects`], [`crate::bisect_run`]), in the text the
//! Python scripts they replace printed.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Subcommand;

use gt_report::markdown_rows;

use crate::bisect_run::{read_outcome, summary_line, RunFacts, HEADER};
use crate::kernel_lines::{header, line_rows, LineSpec};
use crate::reconnects::reconnect_table;
use crate::restart_goals::{goals_table, run_names};

/// `lab table: MESSAGE` on standard error, and `code`.
fn fail(message: impl std::fmt::Display, code: u8) -> ExitCode {
    eprintln!("lab table: {message}");
    ExitCode::from(code)
}

#[derive(Subcommand, Debug)]
pub enum TableCmd {
    /// The table of docs/results/kernel-lines/README.md: per kernel line, the base kernel and
    /// each fix (experiments/exp-kernel-lines.sh).
    KernelLines {
        /// `LABEL=BASE:LOCKWAIT_DIR[+DIR...][:STORM_DIR]`: BASE is the line's base kernel in the
        /// seed000-lockwait matrices (every kernel there named BASE+... is a fix); STORM_DIR a
        /// quiesce-storm-unfrozen matrix of the same kernels + "+storm".
        #[arg(required = true, value_name = "LINE")]
        lines: Vec<String>,
    },
    /// The goal table of experiments/restart-experiment.sh (docs/results/restart-35/goals.txt)
    /// from the files it kept in OUT: per run, and per mode the runs that met every goal.
    RestartGoals {
        out: PathBuf,
        /// The least chains resubmitted on request queues over a run's kills.
        #[arg(default_value_t = 50)]
        min_resubmitted: u64,
    },
    /// The table of experiments/reconnect-experiment.sh: per QEMU and device, the backend's
    /// (fds, threads) before the first, after the first and after the last connection, from
    /// OUT/reconnect-qemuQEMU.log.
    Reconnects {
        out: PathBuf,
        /// The QEMUs, as in the logs' names (7.2, 10).
        #[arg(required = true, value_name = "QEMU")]
        qemus: Vec<String>,
    },
    /// The table of experiments/scale-cost.sh (docs/results/scale-cost/scale-cost.md): the
    /// medians per cell of the COST-RESULT lines of OUT/scale-cost.log.
    ScaleCost { out: PathBuf },
    /// One line of experiments/exp-bisect.sh's runs.tsv (docs/results/bisect/runs.tsv): a
    /// bisection's bisect.json checked against the secret first bad commit.
    BisectRun {
        /// The bisection's bisect.json.
        bisect_json: PathBuf,
        /// The full id of the commit that really is the first bad one.
        secret: String,
        /// Its position among the branch's commits, from 0.
        position: u64,
        /// The run's name (runs.tsv's first column).
        #[arg(value_parser = tsv_cell)]
        name: String,
        /// The experiment's seed (as given).
        #[arg(value_parser = tsv_cell)]
        seed: String,
        /// The run's wall seconds.
        total_wall_s: u64,
        /// Print runs.tsv's header line first.
        #[arg(long)]
        header: bool,
    },
}

/// A non-empty runs.tsv cell: no tab, no line break.
fn tsv_cell(s: &str) -> Result<String, String> {
    if s.is_empty() || s.contains(['\t', '\n', '\r']) {
        return Err("must be non-empty, without tabs or line breaks".into());
    }
    Ok(s.to_string())
}

/// Runs one `table` command.
pub fn table_cmd(t: TableCmd) -> ExitCode {
    match t {
        TableCmd::KernelLines { lines } => kernel_lines_cmd(&lines),
        TableCmd::RestartGoals {
            out,
            min_resubmitted,
        } => restart_goals_cmd(&out, min_resubmitted),
        TableCmd::Reconnects { out, qemus } => {
            if !out.is_dir() {
                return fail(format!("{}: not a directory", out.display()), 2);
            }
            match reconnect_table(&out, &qemus) {
                Ok(t) => {
                    print!("{t}");
                    ExitCode::SUCCESS
                }
                Err(e) => fail(e, 1),
            }
        }
        TableCmd::ScaleCost { out } => scale_cost_cmd(&out),
        TableCmd::BisectRun {
            bisect_json,
            secret,
            position,
            name,
            seed,
            total_wall_s,
            header,
        } => {
            let facts = RunFacts {
                name,
                seed,
                secret,
                position,
                total_wall_s,
            };
            bisect_run_cmd(&bisect_json, &facts, header)
        }
    }
}

fn scale_cost_cmd(out: &Path) -> ExitCode {
    use guest_tests::drill::cost;
    let log = out.join("scale-cost.log");
    let Ok(text) = std::fs::read_to_string(&log) else {
        return fail(format!("{}: no such file", log.display()), 2);
    };
    let lines = match cost::read_lines(&text) {
        Ok(l) if !l.is_empty() => l,
        Ok(_) => return fail(format!("{}: no COST-RESULT line", log.display()), 1),
        Err(e) => return fail(format!("{}: {e}", log.display()), 1),
    };
    // The cells in the order of their first boot; the boots per cell, as each cell had them.
    let mut queues: Vec<u32> = Vec::new();
    for l in &lines {
        if !queues.contains(&l.cost.queues) {
            queues.push(l.cost.queues);
        }
    }
    let repeat = lines.len() / queues.len();
    if queues
        .iter()
        .any(|q| lines.iter().filter(|l| l.cost.queues == *q).count() != repeat)
    {
        return fail(
            format!(
                "{}: the cells have different numbers of boots",
                log.display()
            ),
            1,
        );
    }
    let kernel = &lines[0].kernel;
    print!("{}", cost::table(kernel, repeat, &queues, &lines));
    ExitCode::SUCCESS
}

fn bisect_run_cmd(path: &Path, facts: &RunFacts, header: bool) -> ExitCode {
    if !path.is_file() {
        return fail(format!("{}: no such file", path.display()), 2);
    }
    let o = match read_outcome(path) {
        Ok(o) => o,
        Err(e) => return fail(e, 1),
    };
    if header {
        println!("{HEADER}");
    }
    println!("{}", summary_line(&o, facts));
    ExitCode::SUCCESS
}

fn kernel_lines_cmd(lines: &[String]) -> ExitCode {
    let mut specs = Vec::new();
    for l in lines {
        match l.parse::<LineSpec>() {
            Ok(s) => specs.push(s),
            Err(e) => return fail(e, 2),
        }
    }
    let dirs = specs
        .iter()
        .flat_map(|s| s.lock_dirs.iter().chain(s.storm_dir.iter()));
    for d in dirs {
        if !d.is_dir() {
            return fail(format!("{}: not a directory", d.display()), 2);
        }
    }
    let mut rows = Vec::new();
    for s in &specs {
        match line_rows(s) {
            Ok(r) => rows.extend(r),
            Err(e) => return fail(e, 1),
        }
    }
    print!("{}", markdown_rows(&header(), &rows));
    ExitCode::SUCCESS
}

fn restart_goals_cmd(out: &Path, min_resubmitted: u64) -> ExitCode {
    let names = match run_names(out) {
        Ok(n) => n,
        Err(e) => return fail(format!("{}: {e}", out.display()), 2),
    };
    if names.is_empty() {
        return fail(format!("{}: no *.status.json (no runs)", out.display()), 2);
    }
    print!("{}", goals_table(out, &names, min_resubmitted));
    ExitCode::SUCCESS
}
