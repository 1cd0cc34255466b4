//! `compare --runs --metric M... DIR...`: each run's value of the chosen metrics and, per
//! kernel, n / min / max / sum over its successful runs (compare::runs), as tables or JSON.

use std::path::PathBuf;
use std::process::ExitCode;

use gt_compare::runs::{runs_table, RunsTable};
use gt_report::{fmt_num, markdown_rows};
use gt_results::results::load_runs;

use super::{fail, print_json};

/// Prints the runs table of `metrics` (exact names) over the runs under `dirs`.
pub fn runs_cmd(dirs: &[PathBuf], metrics: &[String], json: bool) -> ExitCode {
    let runs = load_runs(dirs).runs;
    if runs.is_empty() {
        return fail("no results.json under the given directories", 2);
    }
    let t = runs_table(&runs, metrics);
    if json {
        return print_json(&t);
    }
    print!("{}", tables(&t));
    ExitCode::SUCCESS
}

fn tables(t: &RunsTable) -> String {
    let num = |v: Option<f64>| v.map_or("-".into(), fmt_num);
    let mut header: Vec<String> = ["run", "kernel", "repeat", "state"]
        .map(String::from)
        .to_vec();
    header.extend(t.metrics.iter().cloned());
    let rows: Vec<Vec<String>> = t
        .rows
        .iter()
        .map(|r| {
            let mut c = vec![
                r.run.clone(),
                r.kernel.clone(),
                r.repeat.to_string(),
                r.state.to_string(),
            ];
            c.extend(r.values.iter().map(|v| num(*v)));
            c
        })
        .collect();
    let mut out = markdown_rows(&header, &rows);
    let header = ["kernel", "metric", "n", "min", "max", "sum"].map(String::from);
    let totals: Vec<Vec<String>> = t
        .totals
        .iter()
        .map(|k| {
            vec![
                k.kernel.clone(),
                k.metric.clone(),
                k.n.to_string(),
                fmt_num(k.min),
                fmt_num(k.max),
                fmt_num(k.sum),
            ]
        })
        .collect();
    out.push('\n');
    out.push_str(&markdown_rows(&header, &totals));
    out
}
