//! `compare --each DIR...`: every directory judged alone, then the spread of the verdicts
//! (gt_compare::spread), as a table or JSON.

use std::path::PathBuf;
use std::process::ExitCode;

use gt_compare::spread;
use gt_report::{fmt_num, fmt_p, markdown_rows};
use gt_results::results::load_runs;

use super::{fail, print_json, split_kernels};

/// Judges each of `dirs` alone and prints the rows and their spread.
pub fn each_cmd(dirs: &[PathBuf], kernels: Option<&str>, threshold: f64, json: bool) -> ExitCode {
    let mut rows = Vec::new();
    for d in dirs {
        let runs = load_runs(std::slice::from_ref(d)).runs;
        let Ok(c) = gt_compare::compare(&runs, &split_kernels(kernels)) else {
            return fail(format!("{}: no runs to compare", d.display()), 2);
        };
        let Some(row) = gt_compare::verdict::verdict(&c, &runs)
            .and_then(|v| spread::matrix_row(&d.display().to_string(), &v))
        else {
            return fail(
                format!(
                    "{}: no verdict (no primary metric, or one kernel)",
                    d.display()
                ),
                2,
            );
        };
        rows.push(row);
    }
    let s = spread::spread(rows, threshold);
    if json {
        return print_json(&s);
    }
    print!("{}", table(&s));
    ExitCode::SUCCESS
}

fn table(s: &spread::Spread) -> String {
    let header: Vec<String> = [
        "matrix",
        "primary metric",
        "baseline mean (CV, n)",
        "other mean",
        "p",
    ]
    .map(String::from)
    .to_vec();
    let rows: Vec<Vec<String>> = s
        .rows
        .iter()
        .map(|r| {
            vec![
                r.dir.clone(),
                format!("`{}`", r.metric),
                format!(
                    "{} (CV {}, n={})",
                    fmt_num(r.base_mean),
                    r.base_cv
                        .map_or("–".into(), |c| format!("{:.0} %", c * 100.0)),
                    r.base_n
                ),
                fmt_num(r.other_mean),
                format!("{} ({})", fmt_p(r.p), r.test),
            ]
        })
        .collect();
    let mut out = markdown_rows(&header, &rows);
    if let Some(m) = &s.base_means {
        out.push_str(&format!(
            "\nBaseline mean of the primary metric over {} matrices: {} (CV {}, range {} to {}); \
             p from {} to {}; {} of {} below {}.\n",
            m.n,
            fmt_num(m.mean),
            m.cv.map_or("–".into(), |c| format!("{:.0} %", c * 100.0)),
            fmt_num(m.min),
            fmt_num(m.max),
            fmt_p(s.p_min),
            fmt_p(s.p_max),
            s.separated,
            s.rows.len(),
            s.threshold
        ));
    }
    out
}
