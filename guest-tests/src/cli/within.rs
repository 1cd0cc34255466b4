//! `compare --within-boot STEPS --metric M... DIR...`: per kernel and metric, the variance
//! components within and between boots (compare::components) of a metric measured in several
//! steps of each boot, as two tables (components; each boot's values) or JSON.

use std::path::PathBuf;
use std::process::ExitCode;

use gt_compare::components::{within_boot, WithinBoot};
use gt_report::markdown_rows;
use gt_results::results::load_runs;

use super::{fail, print_json};

/// The steps of `--within-boot`: comma-separated, at least two, none empty or twice.
fn parse_steps(s: &str) -> Result<Vec<String>, String> {
    let steps: Vec<String> = s.split(',').map(|x| x.trim().to_string()).collect();
    if steps.iter().any(String::is_empty) {
        return Err(format!("--within-boot {s:?}: an empty step name"));
    }
    if let Some((i, d)) = steps
        .iter()
        .enumerate()
        .find(|(i, x)| steps[..*i].contains(x))
    {
        return Err(format!(
            "--within-boot: step {d:?} given twice (entry {})",
            i + 1
        ));
    }
    if steps.len() < 2 {
        return Err(format!("--within-boot {s:?}: needs at least two steps"));
    }
    Ok(steps)
}

/// Prints the within-boot tables of `metrics` over the runs under `dirs`.
pub fn within_cmd(dirs: &[PathBuf], steps: &str, metrics: &[String], json: bool) -> ExitCode {
    let steps = match parse_steps(steps) {
        Ok(s) => s,
        Err(e) => return fail(e, 2),
    };
    if let Some(d) = dirs.iter().find(|d| !d.exists()) {
        return fail(format!("{}: no such file or directory", d.display()), 2);
    }
    let runs = load_runs(dirs).runs;
    if runs.is_empty() {
        return fail("no results.json under the given directories", 2);
    }
    let t = within_boot(&runs, &steps, metrics);
    if t.iter().all(|w| w.boots.is_empty()) {
        return fail(
            format!("no successful run has any of the metrics in steps {steps:?}"),
            2,
        );
    }
    if json {
        return print_json(&t);
    }
    print!("{}", tables(&t, &steps));
    ExitCode::SUCCESS
}

fn pct(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{:.0} %", v * 100.0))
}

fn tables(t: &[WithinBoot], steps: &[String]) -> String {
    let header = [
        "kernel",
        "metric",
        "boots",
        "values",
        "mean",
        "CV of one step",
        "within-boot CV",
        "between-boot CV",
        "CV of a boot's mean",
    ]
    .map(String::from);
    let rows: Vec<Vec<String>> = t
        .iter()
        .map(|w| {
            let c = w.components.as_ref();
            let cv = c.and_then(|c| c.cv);
            vec![
                w.kernel.clone(),
                w.metric.clone(),
                w.boots.len().to_string(),
                c.map_or("-".into(), |c| c.values.to_string()),
                c.map_or("-".into(), |c| format!("{:.2}", c.mean)),
                pct(cv.map(|v| v.step)),
                pct(cv.map(|v| v.within)),
                pct(cv.map(|v| v.between)),
                pct(cv.map(|v| v.boot_mean)),
            ]
        })
        .collect();
    let mut out = markdown_rows(&header, &rows);
    let mut header = ["kernel", "metric", "run"].map(String::from).to_vec();
    header.extend(steps.iter().cloned());
    let rows: Vec<Vec<String>> = t
        .iter()
        .flat_map(|w| {
            w.boots.iter().map(|b| {
                let mut r = vec![w.kernel.clone(), w.metric.clone(), b.run.clone()];
                r.extend(
                    b.values
                        .iter()
                        .map(|v| v.map_or("-".into(), |v| format!("{v:.2}"))),
                );
                r
            })
        })
        .collect();
    out.push('\n');
    out.push_str(&markdown_rows(&header, &rows));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_steps_are_one_line_errors() {
        for (s, needle) in [
            ("rr-a,,rr-c", "empty step"),
            ("rr-a,rr-b,rr-a", "given twice (entry 3)"),
            ("rr-a", "at least two"),
        ] {
            let e = parse_steps(s).unwrap_err();
            assert!(e.contains(needle), "{s}: {e}");
            assert!(!e.contains('\n'));
        }
        assert_eq!(parse_steps("a, b").unwrap(), ["a", "b"]);
    }
}
