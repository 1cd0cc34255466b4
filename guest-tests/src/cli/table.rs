//! `guest-tests table kernel-lines LINE...`: the tables experiments' READMEs hold, computed
//! from committed results (report::kernel_lines), in the text the Python scripts they replace
//! printed.

use std::process::ExitCode;

use clap::Subcommand;

use crate::report::kernel_lines::{header, line_rows, LineSpec};
use crate::report::markdown_rows;

use super::fail;

#[derive(Subcommand, Debug)]
pub enum TableCmd {
    /// The table of docs/results/kernel-lines/README.md: per kernel line, the base kernel and
    /// each fix (experiments/exp-kernel-lines.sh).
    KernelLines {
        /// LABEL=BASE:LOCKWAIT_DIR[+DIR...][:STORM_DIR]: BASE is the line's base kernel in the
        /// seed000-lockwait matrices (every kernel there named BASE+... is a fix); STORM_DIR a
        /// quiesce-storm-unfrozen matrix of the same kernels + "+storm".
        #[arg(required = true, value_name = "LINE")]
        lines: Vec<String>,
    },
}

/// Runs one `table` command.
pub fn table_cmd(t: TableCmd) -> ExitCode {
    match t {
        TableCmd::KernelLines { lines } => kernel_lines_cmd(&lines),
    }
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
