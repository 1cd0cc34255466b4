//! The `guest-tests` commands: argument types, their validation, and one function per command.
//! `main.rs` only sets up logging, parses and calls [`dispatch`].

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use crate::images::{self, ImageOptions};
use crate::launch::accel::AccelChoice;
use crate::launch::backend;
use crate::matrix::{self, MatrixConfig, MatrixError};
use crate::results::load_runs;
use crate::suite::{self, Bios, Suite};
use crate::{compare, report};

#[derive(Parser, Debug)]
#[command(name = "guest-tests", version, about)]
pub struct Cli {
    #[command(subcommand)]
    pub cmd: Cmd,
}

#[derive(Subcommand, Debug)]
pub enum Cmd {
    /// Run a suite over one or more kernels (interleaved), N repeats each.
    Run(RunArgs),
    /// Repeat the run described by a results.json.
    Rerun {
        results: PathBuf,
        /// Output run directory (default: <original run dir>-rerun-<n>).
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Compare the runs (results.json) under one or more directories, kernel by kernel.
    Compare {
        #[arg(required = true)]
        dirs: Vec<PathBuf>,
        /// Kernel order, first = baseline (default: the first kernel that ran).
        #[arg(long)]
        kernels: Option<String>,
        /// Only this metric's row (exact name); a name no metric has keeps the metrics whose
        /// name contains it (repeatable).
        #[arg(long = "metric")]
        metrics: Vec<String>,
        /// The whole comparison (and the verdict, if the runs name a primary metric) as JSON.
        #[arg(long)]
        json: bool,
        /// Only the verdict: primary and secondary metric, concurrency, throughput, host.
        #[arg(long, conflicts_with = "json")]
        verdict: bool,
    },
    /// Write report.md, report.html and plots/ for the runs under a directory.
    Report {
        dir: PathBuf,
        #[arg(long)]
        kernels: Option<String>,
        #[arg(long)]
        title: Option<String>,
    },
    /// Kernel images and the initramfs: build, list.
    Images(images::cli::ImagesArgs),
    /// List the suites.
    Suites,
}

#[derive(Args, Debug)]
pub struct RunArgs {
    /// Comma-separated kernel variants (images/kernels.toml).
    #[arg(long, default_value = "rt,rt+seed000")]
    kernels: String,
    #[arg(long, default_value = "seed000-rt-lock")]
    suite: String,
    /// Only this variant of a sweep suite.
    #[arg(long)]
    variant: Option<String>,
    #[arg(long, default_value_t = 5)]
    repeat: u32,
    /// Matrix directory (default: results/<suite>-<UTC time>); must not exist or be empty.
    #[arg(long)]
    out: Option<PathBuf>,
    /// tcg, kvm or auto (probe KVM once, cache the verdict).
    #[arg(long, default_value = "auto")]
    accel: String,
    /// Hard timeout per run in seconds (default: the suite's).
    #[arg(long)]
    timeout: Option<u64>,
    /// vhost-blk binary (default: next to this executable).
    #[arg(long)]
    backend_bin: Option<PathBuf>,
    #[arg(long, default_value = "qemu-system-x86_64")]
    qemu_bin: PathBuf,
    /// qboot (fast, default from the suite) or seabios.
    #[arg(long)]
    bios: Option<String>,
    /// Base seed; repeat r uses seed + r.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    #[arg(long)]
    suites_dir: Option<PathBuf>,
    /// Retry a run whose guest never reached the agent (early-boot crash) up to N times; the
    /// failed attempts are kept as <run dir>.attempt<k>.
    #[arg(long, default_value_t = 1)]
    retries: u32,
    #[arg(long)]
    no_progress: bool,
    /// Print the planned runs (order, directories, seeds) and exit: nothing is built or created.
    #[arg(long)]
    dry_run: bool,
    /// interleaved (one guest at a time, A B A B ...) or paired (the kernels of a repeat boot
    /// at the same time, each with its own backend; compare adds paired statistics).
    #[arg(long, default_value = "interleaved")]
    design: String,
    /// Keep booting until the suite's primary metric is decided (a sequential test with
    /// O'Brien-Fleming alpha spending) or --max-repeat is reached.
    #[arg(long)]
    until_decided: bool,
    /// The budget with --until-decided (boots per kernel); replaces --repeat.
    #[arg(long)]
    max_repeat: Option<u32>,
    /// Overall false-decision rate of --until-decided.
    #[arg(long, default_value_t = 0.001)]
    alpha: f64,
    /// First look of --until-decided after this many boots per kernel.
    #[arg(long, default_value_t = 3)]
    min_repeat: u32,
    /// Worker threads of vhost-blk (`--threads N` appended to the suite's backend arguments).
    #[arg(long)]
    backend_threads: Option<u32>,
}

/// Civil UTC date-time for directory names (no time-zone crate needed).
fn utc_stamp(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Howard Hinnant's days_from_civil inverse.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}{m:02}{d:02}-{:02}{:02}{:02}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

impl TryFrom<RunArgs> for MatrixConfig {
    type Error = String;

    fn try_from(a: RunArgs) -> Result<Self, String> {
        let dir = a.suites_dir.unwrap_or_else(suite::default_dir);
        let suite = Suite::load(&dir, &a.suite).map_err(|e| e.to_string())?;
        let kernels: Vec<String> = a.kernels.split(',').map(|k| k.trim().to_string()).collect();
        if kernels.iter().any(|k| k.is_empty()) {
            return Err(format!("--kernels '{}': empty kernel name", a.kernels));
        }
        // Every name is checked before any kernel is built or anything is created.
        let manifest = images::manifest::Manifest::load(&images::manifest_path())
            .map_err(|e| e.to_string())?;
        for k in &kernels {
            manifest.variant(k).map_err(|e| e.to_string())?;
        }
        let mut seen = std::collections::BTreeSet::new();
        if let Some(d) = kernels.iter().find(|k| !seen.insert(k.as_str())) {
            return Err(format!("--kernels: '{d}' appears twice"));
        }
        if a.retries > 5 {
            return Err(format!("--retries {} is more than 5", a.retries));
        }
        let design: matrix::Design = a.design.parse()?;
        let repeat = match (a.until_decided, a.max_repeat) {
            (true, Some(m)) => m,
            (true, None) => return Err("--until-decided needs --max-repeat N".into()),
            (false, Some(_)) => return Err("--max-repeat goes with --until-decided".into()),
            (false, None) => a.repeat,
        };
        if !(1..=1000).contains(&repeat) {
            return Err(format!("--repeat {repeat} not in 1..=1000"));
        }
        for (what, m) in [
            ("primary_metric", &suite.spec.primary_metric),
            ("secondary_metric", &suite.spec.secondary_metric),
        ] {
            if let Some(m) = m {
                if crate::metrics::registry::find(m).is_none() {
                    return Err(format!(
                        "suite '{}': {what} '{m}' is not a metric the registry knows",
                        suite.name
                    ));
                }
            }
        }
        let until_decided = if a.until_decided {
            if suite.spec.primary_metric.is_none() {
                return Err(format!(
                    "--until-decided: suite '{}' names no primary_metric",
                    suite.name
                ));
            }
            if !(a.alpha > 0.0 && a.alpha < 0.5) {
                return Err(format!("--alpha {} not in (0, 0.5)", a.alpha));
            }
            if a.min_repeat < 2 || a.min_repeat > repeat {
                return Err(format!(
                    "--min-repeat {} not in 2..={repeat} (--max-repeat)",
                    a.min_repeat
                ));
            }
            if kernels.len() < 2 {
                return Err("--until-decided compares two kernels: give --kernels A,B".into());
            }
            Some(matrix::SeqPlan {
                alpha: a.alpha,
                min_n: a.min_repeat as usize,
            })
        } else {
            None
        };
        let extra_backend_args = match a.backend_threads {
            Some(0) => return Err("--backend-threads must be at least 1".into()),
            Some(_) if suite.spec.backend != suite::BackendKind::VhostBlk => {
                return Err("--backend-threads applies to the vhost-blk backend only".into())
            }
            Some(t) => vec!["--threads".to_string(), t.to_string()],
            None => Vec::new(),
        };
        let accel: AccelChoice = a.accel.parse()?;
        let timeout = a.timeout.unwrap_or(suite.spec.timeout_secs);
        if timeout == 0 {
            return Err("--timeout must be positive".into());
        }
        let bios = match a.bios.as_deref() {
            None => suite.spec.bios,
            Some("qboot") => Bios::Qboot,
            Some("seabios") => Bios::Seabios,
            Some(o) => return Err(format!("unknown --bios '{o}' (known: qboot, seabios)")),
        };
        let variants = match &a.variant {
            Some(v) if suite.variant(v).is_some() => vec![Some(v.clone())],
            Some(v) => {
                let known: Vec<&str> = suite
                    .spec
                    .variants
                    .iter()
                    .map(|x| x.name.as_str())
                    .collect();
                return Err(format!(
                    "suite '{}' has no variant '{v}' (known: {})",
                    suite.name,
                    known.join(", ")
                ));
            }
            None => suite
                .variants()
                .into_iter()
                .map(|v| v.map(|v| v.name.clone()))
                .collect(),
        };
        let backend_bin = match a.backend_bin {
            Some(p) if !p.is_file() => {
                return Err(format!("--backend-bin {}: no such file", p.display()))
            }
            Some(p) => Some(p),
            None => backend::default_vhost_blk(),
        };
        let out = a.out.unwrap_or_else(|| {
            let secs = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0);
            PathBuf::from("results").join(format!("{}-{}", suite.name, utc_stamp(secs)))
        });
        if out.display().to_string().contains(',') {
            return Err(format!(
                "--out {}: QEMU cannot take paths with ','",
                out.display()
            ));
        }
        if std::fs::read_dir(&out).is_ok_and(|mut d| d.next().is_some()) {
            return Err(format!("--out {} exists and is not empty", out.display()));
        }
        Ok(MatrixConfig {
            kernels,
            suite,
            variants,
            repeat,
            out,
            accel,
            timeout: Duration::from_secs(timeout),
            bios,
            backend_bin,
            qemu_bin: a.qemu_bin,
            seed: a.seed,
            retries: a.retries,
            progress: !a.no_progress,
            images: ImageOptions {
                progress: !a.no_progress,
                ..Default::default()
            },
            design,
            until_decided,
            extra_backend_args,
        })
    }
}

fn split_kernels(k: Option<&str>) -> Vec<String> {
    k.map(|k| k.split(',').map(|x| x.trim().to_string()).collect())
        .unwrap_or_default()
}

/// What `compare` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CompareOutput {
    Table,
    Json,
    Verdict,
}

fn compare_cmd(
    dirs: &[PathBuf],
    kernels: Option<&str>,
    metrics: &[String],
    output: CompareOutput,
) -> ExitCode {
    if let Some(d) = dirs.iter().find(|d| !d.exists()) {
        return fail(format!("{}: no such file or directory", d.display()), 2);
    }
    let loaded = load_runs(dirs);
    for e in &loaded.unreadable {
        eprintln!("guest-tests: skipped {e}");
    }
    let runs = loaded.runs;
    if runs.is_empty() {
        return fail("no results.json under the given directories", 2);
    }
    let c = match compare::compare(&runs, &split_kernels(kernels)) {
        Ok(c) => c,
        Err(e) => return fail(e, 1),
    };
    let verdict = compare::verdict::verdict(&c, &runs);
    let seq = dirs.first().and_then(|d| report::sequential_note(d));
    match output {
        CompareOutput::Table => print!("{}", report::markdown_table(&c, metrics)),
        CompareOutput::Json => {
            let mut c = c;
            if !metrics.is_empty() {
                let exact = |m: &str| metrics.iter().any(|f| f == m);
                let any_exact = c.rows.iter().any(|r| exact(&r.metric));
                c.rows.retain(|r| {
                    if any_exact {
                        exact(&r.metric)
                    } else {
                        metrics.iter().any(|f| r.metric.contains(f.as_str()))
                    }
                });
            }
            let v = serde_json::json!({ "comparison": c, "verdict": verdict });
            match serde_json::to_string_pretty(&v) {
                Ok(t) => println!("{t}"),
                Err(e) => return fail(e, 1),
            }
        }
        CompareOutput::Verdict => match verdict {
            Some(v) => {
                print!("{}", report::verdict_text(&v, seq.as_ref()));
                print!("{}", report::verdict_table(&v));
            }
            None => {
                return fail(
                    "these runs name no primary metric (suite key primary_metric)",
                    2,
                )
            }
        },
    }
    ExitCode::SUCCESS
}

/// After a matrix: the report and the comparison table (when anything succeeded).
fn report_after_run(cfg: &MatrixConfig) {
    let opts = report::ReportOptions {
        kernels: cfg.kernels.clone(),
        ..Default::default()
    };
    match report::build_with(&cfg.out, &opts) {
        Ok(f) => println!("report: {}", f.markdown.display()),
        Err(e) => eprintln!("guest-tests: no report: {e}"),
    }
    if let Ok(t) = report::headline_table(&cfg.out, &cfg.kernels) {
        print!("{t}");
    }
}

/// Prints `guest-tests: <msg>` on stderr and returns `code`.
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
        Cmd::Run(a) => {
            let dry_run = a.dry_run;
            let cfg = match MatrixConfig::try_from(a) {
                Ok(c) => c,
                Err(e) => return fail(e, 2),
            };
            if dry_run {
                for p in matrix::plan(&cfg.kernels, &cfg.variants, cfg.repeat, cfg.seed) {
                    println!(
                        "{}  kernel={} variant={} seed={}",
                        cfg.out.join(&p.dir).display(),
                        p.kernel,
                        p.variant.as_deref().unwrap_or("-"),
                        p.seed
                    );
                }
                return ExitCode::SUCCESS;
            }
            match matrix::run(&cfg) {
                Ok(idx) => {
                    report_after_run(&cfg);
                    let failed = idx.runs.iter().filter(|r| !r.status.is_ok()).count();
                    println!(
                        "{}: {} runs, {failed} failed (index: {})",
                        cfg.out.display(),
                        idx.runs.len(),
                        cfg.out.join("index.json").display()
                    );
                    if failed > 0 {
                        ExitCode::from(1)
                    } else {
                        ExitCode::SUCCESS
                    }
                }
                Err(e) => matrix_err(e),
            }
        }
        Cmd::Rerun { results, out } => {
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
            match matrix::rerun(&results, &out, &ImageOptions::default()) {
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
        Cmd::Compare {
            dirs,
            kernels,
            metrics,
            json,
            verdict,
        } => {
            let out = match (json, verdict) {
                (true, _) => CompareOutput::Json,
                (_, true) => CompareOutput::Verdict,
                _ => CompareOutput::Table,
            };
            compare_cmd(&dirs, kernels.as_deref(), &metrics, out)
        }
        Cmd::Report {
            dir,
            kernels,
            title,
        } => {
            if !dir.is_dir() {
                return fail(format!("{}: not a directory", dir.display()), 2);
            }
            let opts = report::ReportOptions {
                kernels: split_kernels(kernels.as_deref()),
                title,
                ..Default::default()
            };
            match report::build_with(&dir, &opts) {
                Ok(f) => {
                    println!("{}\n{}", f.markdown.display(), f.html.display());
                    ExitCode::SUCCESS
                }
                Err(e @ report::ReportError::NoResults(_)) => fail(e, 2),
                Err(e) => fail(e, 1),
            }
        }
        Cmd::Images(args) => match images::cli::run(&args) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => fail(&e, e.exit_code() as u8),
        },
        Cmd::Suites => {
            let dir = suite::default_dir();
            let names = match suite::list(&dir) {
                Ok(n) => n,
                Err(e) => return fail(e, 1),
            };
            for n in names {
                match Suite::load(&dir, &n) {
                    Ok(s) => {
                        println!("{n:24} {}", s.spec.description);
                        let v: Vec<&str> =
                            s.spec.variants.iter().map(|v| v.name.as_str()).collect();
                        if !v.is_empty() {
                            println!("{:24} variants: {}", "", v.join(", "));
                        }
                    }
                    Err(e) => println!("{n:24} INVALID: {e}"),
                }
            }
            ExitCode::SUCCESS
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(extra: &[&str]) -> RunArgs {
        let mut v = vec!["guest-tests", "run"];
        v.extend_from_slice(extra);
        match Cli::try_parse_from(v).unwrap().cmd {
            Cmd::Run(a) => a,
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
            (vec!["--kernels", "rt,nope"], "known: "),
            (vec!["--accel", "hvf"], "known: tcg, kvm, auto"),
            (vec!["--bios", "uefi"], "seabios"),
            (
                vec!["--suite", "latency-sweep", "--variant", "x"],
                "msix-0us",
            ),
            (vec!["--backend-bin", "/nonexistent/vb"], "no such file"),
            (vec!["--timeout", "0"], "positive"),
            (vec!["--retries", "9"], "--retries"),
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
        assert_eq!(c.timeout, Duration::from_secs(30));
        assert_eq!(c.accel, AccelChoice::Auto);
        assert!(!out.exists());
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
