//! The comparison as tables: number formatting, the per-metric table shared by the
//! `compare` command's stdout and the report, and Markdown rendering of any table.

use std::fmt::Write as _;

use gt_compare::{Comparison, MwuMethod, Summary};

/// A number with about 4 significant digits, no exponent for everyday magnitudes.
pub fn fmt_num(v: f64) -> String {
    let a = v.abs();
    if v == 0.0 {
        "0".into()
    } else if !v.is_finite() {
        format!("{v}")
    } else if !(1e-3..1e7).contains(&a) {
        format!("{v:.3e}")
    } else if a >= 1000.0 {
        format!("{v:.0}")
    } else if a >= 100.0 {
        format!("{v:.1}")
    } else if a >= 10.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}

/// A p-value: 4 decimals, or 2 significant digits below 0.001.
pub fn fmt_p(p: Option<f64>) -> String {
    match p {
        None => "–".into(),
        Some(p) if p < 1e-3 => format!("{p:.1e}"),
        Some(p) => format!("{p:.4}"),
    }
}

fn cell(s: Option<&Summary>) -> String {
    match s {
        None => "–".into(),
        Some(s) => {
            let ci = s.ci95.map_or(String::new(), |(lo, hi)| {
                format!(" [{}, {}]", fmt_num(lo), fmt_num(hi))
            });
            let cv =
                s.cv.map_or(String::new(), |c| format!(", CV {:.0} %", c * 100.0));
            format!("{}{ci} (n={}{cv})", fmt_num(s.median), s.n)
        }
    }
}

/// The comparison as a header and rows of cells; `filter` keeps the metrics named exactly
/// when any filter is a metric's exact name, else those whose name contains one of the
/// substrings (all when empty). Shared by the stdout table and the report.
pub fn table(c: &Comparison, filter: &[String]) -> (Vec<String>, Vec<Vec<String>>) {
    let exact = c.rows.iter().any(|r| filter.contains(&r.metric));
    table_where(c, |m| {
        filter.is_empty()
            || if exact {
                filter.iter().any(|f| f == m)
            } else {
                filter.iter().any(|f| m.contains(f.as_str()))
            }
    })
}

/// The comparison's table, rows of the metrics `keep` accepts.
pub fn table_where(c: &Comparison, keep: impl Fn(&str) -> bool) -> (Vec<String>, Vec<Vec<String>>) {
    let base = c.baseline();
    let header = [
        "metric",
        if c.several_suites() {
            "suite / variant"
        } else {
            "variant"
        },
        &format!("{base} median [95 % CI of mean]"),
        "kernel",
        "median [95 % CI of mean]",
        "ratio",
        "Welch p",
        "Mann-Whitney p",
        "flag",
    ]
    .map(String::from)
    .to_vec();
    let mut rows = Vec::new();
    for r in &c.rows {
        if !keep(&r.metric) {
            continue;
        }
        let variant = r.cell_label(c.several_suites());
        let bcell = cell(r.summary(base));
        if r.versus.is_empty() {
            let mut row = vec![r.metric.clone(), variant.clone(), bcell.clone()];
            row.resize(header.len(), String::new());
            rows.push(row);
        }
        for v in &r.versus {
            let mwu = v.mwu.map_or_else(
                || "–".to_string(),
                |m| {
                    let tag = if m.method == MwuMethod::Exact {
                        ""
                    } else {
                        " (approx)"
                    };
                    format!("{}{tag}", fmt_p(Some(m.p)))
                },
            );
            rows.push(vec![
                r.metric.clone(),
                variant.clone(),
                bcell.clone(),
                v.kernel.clone(),
                cell(r.summary(&v.kernel)),
                v.ratio.map_or("–".into(), |x| format!("{x:.3}")),
                fmt_p(v.welch_p),
                mwu,
                if v.flag {
                    "**CHANGED**".into()
                } else {
                    String::new()
                },
            ]);
        }
    }
    (header, rows)
}

/// Renders a header and rows as a Markdown table (`|` in cells escaped).
pub fn markdown_rows(header: &[String], rows: &[Vec<String>]) -> String {
    let esc = |s: &String| s.replace('|', "\\|");
    let mut out = String::new();
    let _ = writeln!(
        out,
        "| {} |",
        header.iter().map(esc).collect::<Vec<_>>().join(" | ")
    );
    let _ = writeln!(out, "|{}", "---|".repeat(header.len()));
    for r in rows {
        let _ = writeln!(
            out,
            "| {} |",
            r.iter().map(esc).collect::<Vec<_>>().join(" | ")
        );
    }
    out
}

/// The comparison as a Markdown table (see [`table`]).
pub fn markdown_table(c: &Comparison, filter: &[String]) -> String {
    let (h, r) = table(c, filter);
    markdown_rows(&h, &r)
}

#[cfg(test)]
mod tests {
    use super::*;
    use gt_compare::fixtures::ab_runs;
    use gt_compare::{compare, MetricRow};

    #[test]
    fn markdown_table_shows_the_numbers() {
        let c = compare(&ab_runs(), &[]).unwrap();
        let t = markdown_table(&c, &["irq_d".into()]);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 3, "{t}");
        assert!(lines[0].starts_with("| metric |") && lines[0].contains("base median"));
        let row = lines[2];
        assert!(row.contains("| rr.irq_d_per_kio |"), "{row}");
        assert!(row.contains("12.25 [10.37, 14.77] (n=6, CV 17 %)"), "{row}");
        assert!(row.contains("| 0.469 |"), "{row}");
        assert!(row.contains("| 3.0e-4 |"), "{row}");
        assert!(row.contains("| 0.0022 |"), "{row}");
        assert!(row.contains("**CHANGED**"), "{row}");
        assert_eq!(markdown_table(&c, &[]).lines().count(), 4);
    }

    #[test]
    fn number_formatting() {
        assert_eq!(fmt_num(12.25), "12.25");
        assert_eq!(fmt_num(5033.4), "5033");
        assert_eq!(fmt_num(0.5), "0.500");
        assert_eq!(fmt_num(0.0), "0");
        assert_eq!(fmt_num(1.5e-5), "1.500e-5");
        assert_eq!(fmt_p(Some(0.00065)), "6.5e-4");
        assert_eq!(fmt_p(Some(0.0022)), "0.0022");
        assert_eq!(fmt_p(Some(4e-7)), "4.0e-7");
        assert_eq!(fmt_p(None), "–");
    }

    #[test]
    fn suites_are_never_pooled() {
        let mut runs = ab_runs();
        for r in runs.iter_mut().take(4) {
            r.info.suite = "other".into();
        }
        let c = compare(&runs, &[]).unwrap();
        assert_eq!(c.suites, ["other", "t"]);
        let rows: Vec<&MetricRow> = c.metric("rr.iops").collect();
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].suite, "other");
        assert_eq!(rows[0].summary("base").unwrap().n, 2);
        assert_eq!(rows[1].summary("base").unwrap().n, 4);
        assert_eq!(rows[1].cell_label(c.several_suites()), "t");
        let t = markdown_table(&c, &["iops".into()]);
        assert!(t.starts_with("| metric | suite / variant |"), "{t}");
        assert!(t.contains("| rr.iops | other |"), "{t}");
    }
}
