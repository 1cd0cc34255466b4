//! `guest-tests compare`: its flags and what each prints (the comparison table, JSON, the
//! verdict, per-node effects; `--each`, `--runs` and `--within-boot` have their own files).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

use super::{each, fail, print_json, runs, split_kernels, within};
use gt_results::results::load_runs;

/// Compare the runs (results.json) under one or more directories, kernel by kernel.
#[derive(Args, Debug)]
pub struct CompareArgs {
    #[arg(required = true)]
    pub dirs: Vec<PathBuf>,
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
    /// Split the primary metrics (or the --metric ones) by the node each run ran on, with a
    /// test for a node effect (runs from `--executor slurm` or from several hosts).
    #[arg(long, conflicts_with_all = ["json", "verdict"])]
    by_node: bool,
    /// Judge each directory alone (one matrix each) and print the verdicts' spread: the
    /// baseline's primary mean across matrices and the range of p (with --json: as JSON).
    #[arg(long, conflicts_with_all = ["verdict", "by_node"])]
    each: bool,
    /// With --each: count the matrices whose primary p is below this.
    #[arg(long, default_value_t = 1e-4, requires = "each")]
    threshold: f64,
    /// Each run's value of the --metric metrics (exact names), then per kernel n, min, max
    /// and sum over its successful runs (with --json: as JSON).
    #[arg(long, requires = "metrics", conflicts_with_all = ["verdict", "by_node", "each", "kernels"])]
    runs: bool,
    /// Variance components within and between boots of the --metric metrics (names without
    /// the step), each measured in these steps of every boot (e.g. rr-a,rr-b,rr-c), per
    /// kernel (with --json: as JSON).
    #[arg(long, value_name = "STEPS", requires = "metrics", conflicts_with_all = ["verdict", "by_node", "each", "runs", "kernels"])]
    within_boot: Option<String>,
    /// Boots per kernel the runs' `[judgement]` would need (gt_compare::power): to decide the
    /// mechanism and each effect, to exclude 1 from the 95 % interval, and for an interval of
    /// +- --width (with --json: as JSON).
    #[arg(long, conflicts_with_all = ["verdict", "by_node", "each", "runs", "within_boot"])]
    power: bool,
    /// With --power: the interval half-width asked, as a ratio (0.05: +-5 %).
    #[arg(long, default_value_t = 0.05, requires = "power")]
    width: f64,
}

/// `guest-tests compare`: picks the mode its flags ask for.
pub fn run(a: CompareArgs) -> ExitCode {
    if let Some(steps) = a.within_boot {
        return within::within_cmd(&a.dirs, &steps, &a.metrics, a.json);
    }
    if a.runs {
        return runs::runs_cmd(&a.dirs, &a.metrics, a.json);
    }
    if a.each {
        return each::each_cmd(&a.dirs, a.kernels.as_deref(), a.threshold, a.json);
    }
    if a.power {
        return power_cmd(&a.dirs, a.kernels.as_deref(), a.width, a.json);
    }
    let out = match (a.json, a.verdict, a.by_node) {
        (true, _, _) => CompareOutput::Json,
        (_, true, _) => CompareOutput::Verdict,
        (_, _, true) => CompareOutput::ByNode,
        _ => CompareOutput::Table,
    };
    compare_dirs(&a.dirs, a.kernels.as_deref(), &a.metrics, out)
}

/// What `compare` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CompareOutput {
    Table,
    Json,
    Verdict,
    ByNode,
}

fn compare_dirs(
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
    let c = match gt_compare::compare(&runs, &split_kernels(kernels)) {
        Ok(c) => c,
        Err(e) => return fail(e, 1),
    };
    let mut verdict = gt_compare::verdict::verdict(&c, &runs);
    if let Some(v) = verdict.as_mut() {
        gt_report::fill_reasons(v);
    }
    let seq = dirs.first().and_then(|d| gt_report::sequential_note(d));
    match output {
        CompareOutput::Table => print!("{}", gt_report::markdown_table(&c, metrics)),
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
            let nodes = gt_report::node_rows(&runs, &c);
            let v = serde_json::json!({ "comparison": c, "verdict": verdict, "nodes": nodes });
            return print_json(&v);
        }
        CompareOutput::ByNode => {
            let wanted = if metrics.is_empty() {
                gt_report::node_metrics(&runs, &c)
            } else {
                metrics.to_vec()
            };
            let rows = gt_compare::nodes::node_effects(&runs, &c.kernels, &wanted);
            if rows.is_empty() {
                return fail("none of the metrics has values in these runs", 2);
            }
            println!("{}\n", gt_report::NODE_NOTE);
            let (h, r) = gt_report::node_table(&rows);
            print!("{}", gt_report::markdown_rows(&h, &r));
        }
        CompareOutput::Verdict => match verdict {
            Some(v) => {
                print!("{}", gt_report::verdict_text(&v, seq.as_ref()));
                print!("{}", gt_report::verdict_table(&v));
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

/// `compare --power`.
fn power_cmd(dirs: &[PathBuf], kernels: Option<&str>, width: f64, json: bool) -> ExitCode {
    if !(width > 0.0 && width < 1.0) {
        return fail(format!("--width {width} is not in (0, 1)"), 2);
    }
    if let Some(d) = dirs.iter().find(|d| !d.exists()) {
        return fail(format!("{}: no such file or directory", d.display()), 2);
    }
    let runs = load_runs(dirs).runs;
    let c = match gt_compare::compare(&runs, &split_kernels(kernels)) {
        Ok(c) => c,
        Err(e) => return fail(e, 1),
    };
    let rows = gt_compare::power::power_rows(&c, &runs, width);
    if rows.is_empty() {
        return fail(
            "these runs carry no [judgement] with values for two kernels",
            2,
        );
    }
    if json {
        return print_json(&rows);
    }
    let n =
        |v: Option<usize>| v.map_or(format!("> {}", gt_compare::power::MAX_N), |n| n.to_string());
    let header: Vec<String> = [
        "metric",
        "kernel",
        "boots now",
        "ratio",
        "sd(log) base / kernel",
        "n to decide",
        "n to exclude 1",
        &format!("n for +-{:.0} %", width * 100.0),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let body: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            vec![
                format!("`{}` ({})", r.metric, r.role),
                r.kernel.clone(),
                format!("{}+{}", r.n_now.0, r.n_now.1),
                gt_report::fmt_num(r.ratio),
                format!("{:.3} / {:.3}", r.sd_log_base, r.sd_log_other),
                n(r.n_decide),
                n(r.n_exclude_one),
                n(r.n_width),
            ]
        })
        .collect();
    println!(
        "Boots per kernel for {:.0} % power (Welch on logs; mechanism: the interval below its floor; effects: p < 0.05 / their number):\n",
        gt_compare::power::POWER * 100.0
    );
    print!("{}", gt_report::markdown_rows(&header, &body));
    print_design(&gt_compare::power::design::design_rows(&c, &runs, 8));
    ExitCode::SUCCESS
}

/// `compare --power`'s second table: the chances a design of n boots per kernel gives
/// (gt_compare::power::design).
fn print_design(rows: &[gt_compare::power::design::DesignRow]) {
    if rows.is_empty() {
        return;
    }
    let pct = |v: f64| format!("{:.0} %", v * 100.0);
    let list = |v: &[f64]| v.iter().map(|x| pct(*x)).collect::<Vec<_>>().join(" / ");
    let header: Vec<String> = [
        "kernel",
        "n",
        "P(mechanism reduced)",
        "P(each effect within margin)",
        "P(improved)",
        "10 % loss of each effect: P(worse)",
        "... P(improved)",
    ]
    .map(String::from)
    .to_vec();
    let body: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            vec![
                r.kernel.clone(),
                r.n.to_string(),
                pct(r.p_mechanism),
                list(&r.p_within),
                pct(r.p_improved),
                list(&r.p_loss_caught),
                list(&r.p_loss_improved),
            ]
        })
        .collect();
    println!(
        "\nThe design at n boots per kernel, these runs' ratios and spreads taken as true \
         (gt_compare::power::design: normal approximation, the metrics treated as independent; \
         effects in the [judgement]'s order):\n"
    );
    print!("{}", gt_report::markdown_rows(&header, &body));
}
