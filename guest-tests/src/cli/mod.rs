//! The `guest-tests` commands: argument types, their validation, and one function per command.
//! `main.rs` only sets up logging, parses and calls [`dispatch`].

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::batch;
use crate::matrix::{self, Index, MatrixConfig, MatrixError};
use gt_images::ImageOptions;
use gt_suite::Suite;

mod bisect;
mod boot;
mod check;
mod compare_cmd;
mod each;
mod executor;
mod migrate;
mod ordering;
mod run;
mod runs;
mod within;
pub use bisect::{BisectArgs, JudgeArgs};
pub use run::RunArgs;

#[derive(Parser, Debug)]
#[command(name = "guest-tests", version, about)]
pub struct Cli {
    #[command(subcommand)]
    pub cmd: Cmd,
}

#[derive(Subcommand, Debug)]
pub enum Cmd {
    /// Run a suite over one or more kernels (interleaved), N repeats each.
    Run(Box<RunArgs>),
    /// Repeat the run described by a results.json.
    Rerun {
        results: PathBuf,
        /// Output run directory (default: <original run dir>-rerun-<n>).
        #[allow(rustdoc::invalid_html_tags)] // clap's --help text: <...> are placeholders, not HTML
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Compare the runs (results.json) under one or more directories, kernel by kernel.
    Compare(Box<compare_cmd::CompareArgs>),
    /// Write report.md, report.html and plots/ for the runs under a directory.
    Report {
        dir: PathBuf,
        #[arg(long)]
        kernels: Option<String>,
        #[arg(long)]
        title: Option<String>,
    },
    /// Assertions on runs' results (ci/tree-kernel-smoke.sh): exit 0, or 1 and the first failure.
    #[command(subcommand)]
    Check(check::CheckCmd),
    /// Kernel images and the initramfs: build, list.
    Images(gt_images::cli::ImagesArgs),
    /// Each kernel's litmus tests under the memory model (LKMM) of its source, run with herd7
    /// (ci/fetch-herd7.sh): Never / Sometimes per test; exit 0 when they ran, 2 on bad input.
    Ordering(Box<ordering::OrderingArgs>),
    /// List the suites (with `--variants SUITE`: that suite's variants, one per line).
    Suites {
        #[arg(long, value_name = "SUITE")]
        variants: Option<String>,
    },
    /// Wait for a matrix submitted with `run --executor slurm --detach`, then write its
    /// index.json and report as `run` does.
    Collect { dir: PathBuf },
    /// (Internal) run array task TASK of the matrix in DIR: what a Slurm node executes.
    #[command(hide = true)]
    RunOne { dir: PathBuf, task: usize },
    /// Find the first bad commit (or patch) of a kernel tree by booting and measuring: every
    /// step is decided by a sequential test against the good and bad ends, resumable.
    Bisect(Box<BisectArgs>),
    /// Build and boot the tree's checkout, classify it against good and bad runs: exit 0
    /// (good), 1 (bad), 125 (cannot decide, build or boot failed), for `git bisect run`.
    Judge(Box<JudgeArgs>),
    /// Bring results written by older versions up to today's schema, once (e.g. `migrate
    /// verdict --from FILE DIR...`: the `[verdict]` they were judged with, as data).
    #[command(subcommand)]
    Migrate(migrate::MigrateCmd),
}

fn split_kernels(k: Option<&str>) -> Vec<String> {
    k.map(|k| k.split(',').map(|x| x.trim().to_string()).collect())
        .unwrap_or_default()
}

/// After a matrix: the report and the comparison table (when anything succeeded), a summary
/// line; exit code 1 when a run failed.
fn after_run(out: &Path, idx: &Index) -> ExitCode {
    let opts = gt_report::ReportOptions {
        kernels: idx.kernels.clone(),
        ..Default::default()
    };
    match gt_report::build_with(out, &opts) {
        Ok(f) => println!("report: {}", f.markdown.display()),
        Err(e) => eprintln!("guest-tests: no report: {e}"),
    }
    if let Ok(t) = gt_report::headline_table(out, &idx.kernels) {
        print!("{t}");
    }
    let failed = idx.runs.iter().filter(|r| !r.status.is_ok()).count();
    println!(
        "{}: {} runs, {failed} failed (index: {})",
        out.display(),
        idx.runs.len(),
        out.join("index.json").display()
    );
    if failed > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

fn slurm_run(cfg: &MatrixConfig, o: &batch::SlurmOptions) -> ExitCode {
    match batch::submit(cfg, o, &mut |l| println!("{l}")) {
        Ok(batch::SubmitOutcome::Detached(_)) => {
            println!(
                "detached; wait and collect with: guest-tests collect {}",
                cfg.out.display()
            );
            ExitCode::SUCCESS
        }
        Ok(batch::SubmitOutcome::Finished(idx)) => after_run(&cfg.out, &idx),
        Err(e) => fail(&e, e.exit_code()),
    }
}

/// Prints `guest-tests: <msg>` on stderr and returns `code`.
/// Prints `v` as pretty JSON on stdout (exit 0), or fails with exit 1.
pub fn print_json<T: serde::Serialize>(v: &T) -> ExitCode {
    match serde_json::to_string_pretty(v) {
        Ok(t) => {
            println!("{t}");
            ExitCode::SUCCESS
        }
        Err(e) => fail(e, 1),
    }
}

pub fn fail(msg: impl std::fmt::Display, code: u8) -> ExitCode {
    eprintln!("guest-tests: {msg}");
    ExitCode::from(code)
}

fn matrix_err(e: MatrixError) -> ExitCode {
    let code = if matches!(e, MatrixError::Input(_)) {
        2
    } else {
        1
    };
    fail(e, code)
}

/// Runs one parsed command.
pub fn dispatch(cli: Cli) -> ExitCode {
    match cli.cmd {
        Cmd::Run(a) => run_cmd(*a),
        Cmd::Collect { dir } => collect_cmd(&dir),
        Cmd::RunOne { dir, task } => match batch::run_one(&dir, task) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => fail(&e, e.exit_code()),
        },
        Cmd::Rerun { results, out } => rerun_cmd(&results, out),
        Cmd::Compare(a) => compare_cmd::run(*a),
        Cmd::Report {
            dir,
            kernels,
            title,
        } => report_cmd(&dir, kernels.as_deref(), title),
        Cmd::Check(c) => check::check_cmd(c),
        Cmd::Bisect(a) => bisect::bisect_cmd(*a),
        Cmd::Judge(a) => bisect::judge_cmd(*a),
        Cmd::Images(args) => match gt_images::cli::run(&args) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => fail(&e, e.exit_code() as u8),
        },
        Cmd::Ordering(a) => ordering::ordering_cmd(&a),
        Cmd::Migrate(c) => migrate::migrate_cmd(&c),
        Cmd::Suites {
            variants: Some(name),
        } => match Suite::load(&gt_suite::default_dir(), &name) {
            Ok(s) => {
                for v in &s.spec.variants {
                    println!("{}", v.name);
                }
                ExitCode::SUCCESS
            }
            Err(e) => fail(e, 2),
        },
        Cmd::Suites { variants: None } => suites_cmd(),
    }
}

/// `guest-tests run`: the matrix here, on Slurm (`--executor slurm`), or its plan
/// (`--dry-run`).
fn run_cmd(a: RunArgs) -> ExitCode {
    let dry_run = a.dry_run;
    let slurm = match run::slurm_options(&a) {
        Ok(s) => s,
        Err(e) => return fail(e, 2),
    };
    let cfg = match MatrixConfig::try_from(a) {
        Ok(c) => c,
        Err(e) => return fail(e, 2),
    };
    if dry_run {
        for p in matrix::plan(&cfg.kernels, &cfg.variants, cfg.repeat, cfg.boot.seed) {
            println!(
                "{}  kernel={} variant={} seed={}",
                cfg.out.join(&p.dir).display(),
                p.kernel,
                p.variant.as_deref().unwrap_or("-"),
                p.seed
            );
        }
        if let Some(o) = &slurm {
            println!("{}", batch::dry_run_argv(&cfg, o).join(" "));
        }
        return ExitCode::SUCCESS;
    }
    match &slurm {
        Some(o) => slurm_run(&cfg, o),
        None => match matrix::run(&cfg) {
            Ok(idx) => after_run(&cfg.out, &idx),
            Err(e) => matrix_err(e),
        },
    }
}

/// `guest-tests collect DIR`: waits for a Slurm matrix and writes its index.
fn collect_cmd(dir: &Path) -> ExitCode {
    if !batch::TaskFile::path(dir).is_file() {
        return fail(
            format!(
                "{}: no {} (not a matrix submitted with --executor slurm)",
                dir.display(),
                batch::TaskFile::path(Path::new("")).display()
            ),
            2,
        );
    }
    match batch::collect(dir, std::time::Duration::from_secs(3), &mut |l| {
        println!("{l}")
    }) {
        Ok(idx) => after_run(dir, &idx),
        Err(e) => fail(&e, e.exit_code()),
    }
}

/// `guest-tests rerun RESULTS [--out DIR]`: the run again, into the first free
/// `<dir>-rerun-N` by default.
fn rerun_cmd(results: &Path, out: Option<PathBuf>) -> ExitCode {
    let base = results
        .parent()
        .map(|p| p.display().to_string())
        .unwrap_or_else(|| ".".into());
    let out = out.unwrap_or_else(|| {
        (1..)
            .map(|n| PathBuf::from(format!("{base}-rerun-{n}")))
            .find(|p| !p.exists())
            .unwrap_or_else(|| PathBuf::from(format!("{base}-rerun")))
    });
    if out.exists() {
        return fail(format!("--out {} already exists", out.display()), 2);
    }
    match matrix::rerun(results, &out, &ImageOptions::default()) {
        Ok(rec) => {
            println!("{}: {:?}", out.display(), rec.status);
            if rec.status.is_ok() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            }
        }
        Err(e) => matrix_err(e),
    }
}

/// `guest-tests report DIR`: report.md and report.html from the results under DIR.
fn report_cmd(dir: &Path, kernels: Option<&str>, title: Option<String>) -> ExitCode {
    if !dir.is_dir() {
        return fail(format!("{}: not a directory", dir.display()), 2);
    }
    let opts = gt_report::ReportOptions {
        kernels: split_kernels(kernels),
        title,
        ..Default::default()
    };
    match gt_report::build_with(dir, &opts) {
        Ok(f) => {
            println!("{}\n{}", f.markdown.display(), f.html.display());
            ExitCode::SUCCESS
        }
        Err(e @ gt_report::ReportError::NoResults(_)) => fail(e, 2),
        Err(e) => fail(e, 1),
    }
}

/// `guest-tests suites`: each suite with its description and variants.
fn suites_cmd() -> ExitCode {
    let dir = gt_suite::default_dir();
    let names = match gt_suite::list(&dir) {
        Ok(n) => n,
        Err(e) => return fail(e, 1),
    };
    for n in names {
        match Suite::load(&dir, &n) {
            Ok(s) => {
                println!("{n:24} {}", s.spec.description);
                let v: Vec<&str> = s.spec.variants.iter().map(|v| v.name.as_str()).collect();
                if !v.is_empty() {
                    println!("{:24} variants: {}", "", v.join(", "));
                }
            }
            Err(e) => println!("{n:24} INVALID: {e}"),
        }
    }
    ExitCode::SUCCESS
}

#[cfg(test)]
mod tests {
    use super::run::utc_stamp;
    use super::*;
    use gt_launch::accel::AccelChoice;
    use std::time::Duration;

    fn args(extra: &[&str]) -> RunArgs {
        let mut v = vec!["guest-tests", "run"];
        v.extend_from_slice(extra);
        match Cli::try_parse_from(v).unwrap().cmd {
            Cmd::Run(a) => *a,
            _ => unreachable!(),
        }
    }

    #[test]
    fn utc_stamp_is_correct() {
        assert_eq!(utc_stamp(0), "19700101-000000");
        assert_eq!(utc_stamp(1_709_210_096), "20240229-123456");
    }

    #[test]
    fn bad_run_input_is_one_line_and_creates_nothing() {
        let d = tempfile::tempdir().unwrap();
        let out = d.path().join("o");
        let o = out.to_str().unwrap();
        for (extra, needle) in [
            (vec!["--suite", "nope"], "known: "),
            (vec!["--repeat", "0"], "--repeat"),
            (vec!["--kernels", "rt,,debian-rt"], "empty"),
            (vec!["--kernels", "rt,rt"], "twice"),
            (
                vec!["--kernels", "rt,nope"],
                "is not a kernel line (lines: rt",
            ),
            (vec!["--accel", "hvf"], "known: tcg, kvm, auto"),
            (vec!["--bios", "uefi"], "seabios"),
            (
                vec!["--suite", "latency-sweep", "--variant", "x"],
                "msix-0us",
            ),
            (vec!["--backend-bin", "/nonexistent/vb"], "no such file"),
            (vec!["--timeout", "0"], "positive"),
            (vec!["--retries", "9"], "--retries"),
            (vec!["--vcpu-placement", "split"], "needs --design paired"),
            (
                vec!["--vcpu-placement", "numa"],
                "known: pinned, host, split",
            ),
            (vec!["--host-sched", "fifo"], "known: normal, rt, nice"),
        ] {
            let mut e = extra.clone();
            e.extend(["--out", o]);
            let err = MatrixConfig::try_from(args(&e)).unwrap_err();
            assert!(err.contains(needle), "{extra:?}: {err}");
            assert!(!err.contains('\n'));
            assert!(!out.exists());
        }
    }

    #[test]
    fn good_run_input_is_validated_into_config() {
        let d = tempfile::tempdir().unwrap();
        let out = d.path().join("o");
        let c = MatrixConfig::try_from(args(&[
            "--suite",
            "latency-sweep",
            "--kernels",
            "rt, debian-rt",
            "--repeat",
            "2",
            "--out",
            out.to_str().unwrap(),
            "--timeout",
            "30",
        ]))
        .unwrap();
        assert_eq!(c.kernels, ["rt", "debian-rt"]);
        assert_eq!(c.variants.len(), 4);
        assert_eq!(c.boot.timeout, Duration::from_secs(30));
        assert_eq!(c.boot.accel, AccelChoice::Auto);
        assert!(!out.exists());
    }

    #[test]
    fn executor_flags_are_checked_before_anything_runs() {
        for (extra, needle) in [
            (
                vec!["--partition", "p"],
                "--partition goes with --executor slurm",
            ),
            (vec!["--detach"], "--detach goes with --executor slurm"),
            (vec!["--executor", "pbs"], "known: local, slurm"),
            (
                vec!["--executor", "slurm", "--until-decided"],
                "not supported with --executor slurm",
            ),
            (
                vec!["--executor", "slurm", "--slurm-args", "--chdir=/x"],
                "--chdir is set by the executor",
            ),
        ] {
            let e = run::slurm_options(&args(&extra)).unwrap_err();
            assert!(e.contains(needle), "{extra:?}: {e}");
        }
        assert_eq!(run::slurm_options(&args(&[])).unwrap(), None);
        let o = run::slurm_options(&args(&["--executor", "slurm", "--detach"]))
            .unwrap()
            .unwrap();
        assert!(o.detach && o.exclusive && o.partition.is_none());
    }

    #[test]
    fn non_empty_out_dir_is_refused() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("x"), "").unwrap();
        let err = MatrixConfig::try_from(args(&[
            "--suite",
            "smoke",
            "--out",
            d.path().to_str().unwrap(),
        ]))
        .unwrap_err();
        assert!(err.contains("not empty"), "{err}");
    }
}
