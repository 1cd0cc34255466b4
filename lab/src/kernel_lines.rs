//! The kernel-lines table (docs/results/kernel-lines, experiments/exp-kernel-lines.sh): per
//! kernel line, the base kernel and each seed-000 fix, from seed000-lockwait matrices and a
//! quiesce-storm-unfrozen matrix. `lab table kernel-lines` prints it.
//!
//! Contract:
//! 1. A line is `LABEL=BASE:LOCKWAIT_DIR[+DIR...][:STORM_DIR]`. Its kernels: BASE, then every
//!    kernel of the lock-wait matrices whose name starts with `BASE+`, in the order they first
//!    appear in the runs `DIR/*/results.json` (paths sorted, the directories in order).
//! 2. Every statistic comes from [`gt_compare::compare`] over the lock-wait matrices with those
//!    kernels (BASE the baseline): n, mean and CV of the metrics of `rt-lock-randread`, the
//!    boots whose queue_lock wait is 0, Welch's p of the queue_lock wait against BASE, the
//!    mean of `seqread-4j.bw_kib_s` in MiB/s. When a metric has several rows (cells), the last
//!    counts.
//! 3. The storm columns sum the storm matrix's runs `STORM_DIR/*/results.json` of kernel
//!    `K+storm`: successful and failed boots, the smallest and the total `storm_cycles` of the
//!    successful ones, and their lost runs, stuck I/Os and kernel warnings (a missing value
//!    counts 0). `-` when the kernel has no successful storm boot.
//! 4. Numbers are in the text of the Python script this replaces ([`gt_report::pyfmt`]), so the
//!    table in the README stays as committed.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use gt_compare::{MetricRow, Summary};
use gt_report::pyfmt::{general, grouped};
use gt_results::results::{load_runs, RunResult};

const STEP: &str = "rt-lock-randread.";
const QLOCK_WAIT: &str = "rt-lock-randread.qlock_wait_ms_per_kio";
const SEQ: &str = "seqread-4j.bw_kib_s";
const STORM: &str = "quiesce-storm.";
const COLS: [(&str, &str); 4] = [
    ("qlock_wait_count_per_kio", "queue_lock contentions / kio"),
    ("qlock_wait_ms_per_kio", "queue_lock wait ms / kio"),
    ("lockwait_ms_per_kio", "all-site lock wait ms / kio"),
    ("iops", "randread IOPS"),
];

/// One line of the table (rule 1).
#[derive(Debug, Clone, PartialEq)]
pub struct LineSpec {
    pub label: String,
    pub base: String,
    pub lock_dirs: Vec<PathBuf>,
    pub storm_dir: Option<PathBuf>,
}

impl std::str::FromStr for LineSpec {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || format!("bad line {s:?} (want LABEL=BASE:LOCKWAIT_DIR[+DIR...][:STORM_DIR])");
        let (label, rest) = s.split_once('=').ok_or_else(bad)?;
        let parts: Vec<&str> = rest.split(':').collect();
        let (base, lock) = match parts.as_slice() {
            [b, l] | [b, l, _] => (*b, *l),
            _ => return Err(bad()),
        };
        let lock_dirs: Vec<PathBuf> = lock.split('+').map(PathBuf::from).collect();
        let storm_dir = parts.get(2).map(PathBuf::from);
        let empty = |p: &PathBuf| p.as_os_str().is_empty();
        if label.is_empty() || base.is_empty() || lock_dirs.iter().any(empty) {
            return Err(bad());
        }
        if storm_dir.as_ref().is_some_and(empty) {
            return Err(bad());
        }
        Ok(LineSpec {
            label: label.into(),
            base: base.into(),
            lock_dirs,
            storm_dir,
        })
    }
}

/// The runs `dir/*/results.json` (one level down, paths sorted); unreadable ones are skipped.
fn runs_one_down(dir: &Path) -> Vec<RunResult> {
    RunResult::find_all_at(dir)
        .into_iter()
        .filter(|(f, _)| f.parent().and_then(Path::parent) == Some(dir))
        .filter_map(|(_, r)| r.ok())
        .collect()
}

fn kernels_of(dirs: &[PathBuf]) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for r in dirs.iter().flat_map(|d| runs_one_down(d)) {
        if !names.contains(&r.info.kernel) {
            names.push(r.info.kernel);
        }
    }
    names
}

/// One kernel's storm boots (rule 3).
#[derive(Debug, Default, Clone, PartialEq)]
struct Storm {
    failed: usize,
    cycles: Vec<f64>,
    stranded: f64,
    stuck: f64,
    warnings: f64,
}

fn storm(dir: &Path) -> BTreeMap<String, Storm> {
    let mut per: BTreeMap<String, Storm> = BTreeMap::new();
    for r in runs_one_down(dir) {
        let s = per.entry(r.info.kernel.clone()).or_default();
        if !r.status.is_ok() {
            s.failed += 1;
            continue;
        }
        let m = |k: &str| r.metric(&format!("{STORM}{k}")).unwrap_or(0.0);
        s.cycles.push(m("storm_cycles"));
        s.stranded += m("storm_stranded");
        s.stuck += m("storm_stuck");
        s.warnings += m("storm_kernel_warnings");
    }
    per
}

fn fmt(v: Option<f64>, digits: usize) -> String {
    match v {
        None => "-".into(),
        Some(v) if v.abs() >= 1000.0 => grouped(v),
        Some(v) => general(v, digits),
    }
}

fn cell(s: Option<&Summary>) -> String {
    match s {
        None => "-".into(),
        Some(s) => match s.cv {
            None => fmt(Some(s.mean), 3),
            Some(cv) => format!("{} (CV {:.0} %)", fmt(Some(s.mean), 3), cv * 100.0),
        },
    }
}

fn storm_cells(s: Option<&Storm>) -> [String; 2] {
    match s {
        Some(s) if !s.cycles.is_empty() => {
            let min = s.cycles.iter().copied().fold(f64::INFINITY, f64::min);
            let sum: f64 = s.cycles.iter().sum();
            [
                format!(
                    "{} ok, {} failed; {} / {}",
                    s.cycles.len(),
                    s.failed,
                    grouped(min),
                    grouped(sum)
                ),
                format!("{:.0} / {:.0} / {:.0}", s.stranded, s.stuck, s.warnings),
            ]
        }
        _ => ["-".into(), "-".into()],
    }
}

/// The header of the table.
pub fn header() -> Vec<String> {
    let mut h: Vec<String> = vec!["line".into(), "kernel".into(), "boots".into()];
    h.extend(COLS.iter().map(|(_, t)| t.to_string()));
    h.extend(
        [
            "boots with 0 queue_lock wait",
            "Welch p (queue_lock wait vs base)",
            "seqread MiB/s",
            "unfrozen storm: boots; cycles min per boot / in all",
            "lost runs / stuck I/Os / warnings",
        ]
        .map(String::from),
    );
    h
}

/// One kernel's row: `rows` are the comparison's rows by metric (rule 2).
fn kernel_row(
    spec: &LineSpec,
    k: &str,
    rows: &BTreeMap<&str, &MetricRow>,
    st: &BTreeMap<String, Storm>,
) -> Result<Vec<String>, String> {
    let main = rows
        .get(QLOCK_WAIT)
        .ok_or_else(|| format!("line {}: no {QLOCK_WAIT} in its runs", spec.label))?;
    let (s, values) = main
        .summary(k)
        .zip(main.values.get(k))
        .ok_or_else(|| format!("line {}: kernel {k} has no {QLOCK_WAIT}", spec.label))?;
    let mut cells = vec![spec.label.clone(), format!("`{k}`"), s.n.to_string()];
    for (metric, _) in COLS {
        let r = rows.get(format!("{STEP}{metric}").as_str());
        cells.push(cell(r.and_then(|r| r.summary(k))));
    }
    let zeros = values.iter().filter(|v| **v == 0.0).count();
    cells.push(format!("{zeros}/{}", values.len()));
    cells.push(if k == spec.base {
        "base".into()
    } else {
        let p = main.versus.iter().find(|v| v.kernel == k);
        fmt(p.and_then(|v| v.welch_p), 2)
    });
    let seq = rows.get(SEQ).and_then(|r| r.summary(k));
    cells.push(seq.map_or("-".into(), |s| format!("{:.0}", s.mean / 1024.0)));
    cells.extend(storm_cells(st.get(&format!("{k}+storm"))));
    Ok(cells)
}

/// The rows of one line (rules 1-3).
pub fn line_rows(spec: &LineSpec) -> Result<Vec<Vec<String>>, String> {
    let prefix = format!("{}+", spec.base);
    let mut kernels = vec![spec.base.clone()];
    kernels.extend(
        kernels_of(&spec.lock_dirs)
            .into_iter()
            .filter(|k| k.starts_with(&prefix)),
    );
    let runs = load_runs(&spec.lock_dirs).runs;
    let c =
        gt_compare::compare(&runs, &kernels).map_err(|e| format!("line {}: {e}", spec.label))?;
    let rows: BTreeMap<&str, &MetricRow> = c.rows.iter().map(|r| (r.metric.as_str(), r)).collect();
    let st = spec.storm_dir.as_deref().map(storm).unwrap_or_default();
    kernels
        .iter()
        .map(|k| kernel_row(spec, k, &rows, &st))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_specs_parse_and_bad_ones_are_one_line_errors() {
        let s: LineSpec = "7.3=rt73:a+b:c".parse().unwrap();
        assert_eq!((s.label.as_str(), s.base.as_str()), ("7.3", "rt73"));
        assert_eq!(s.lock_dirs, [PathBuf::from("a"), PathBuf::from("b")]);
        assert_eq!(s.storm_dir, Some(PathBuf::from("c")));
        let s: LineSpec = "6.12 (same run)=rt:a".parse().unwrap();
        assert_eq!((s.label.as_str(), s.storm_dir), ("6.12 (same run)", None));
        for bad in [
            "rt:a",
            "x=rt",
            "x=rt:a:b:c",
            "=rt:a",
            "x=:a",
            "x=rt:a+",
            "x=rt:a:",
        ] {
            let e = bad.parse::<LineSpec>().unwrap_err();
            assert!(e.contains("LABEL=BASE") && !e.contains('\n'), "{bad}: {e}");
        }
    }

    #[test]
    fn numbers_as_the_table_prints_them() {
        assert_eq!(fmt(None, 3), "-");
        assert_eq!(fmt(Some(2663.4), 3), "2,663");
        assert_eq!(fmt(Some(13.80297), 3), "13.8");
        assert_eq!(fmt(Some(2.3e-6), 2), "2.3e-06");
        let mut s = gt_compare::summarize(&[10.0, 14.0]).unwrap();
        assert_eq!(cell(Some(&s)), "12 (CV 24 %)");
        s.cv = None;
        assert_eq!(cell(Some(&s)), "12");
    }

    #[test]
    fn storm_cells_sum_successful_boots_and_count_failed_ones() {
        let s = Storm {
            failed: 1,
            cycles: vec![190_668.0, 1_000_728.0],
            stranded: 0.0,
            stuck: 2.0,
            warnings: 0.0,
        };
        assert_eq!(
            storm_cells(Some(&s)),
            ["2 ok, 1 failed; 190,668 / 1,191,396", "0 / 2 / 0"]
        );
        let only_failed = Storm {
            failed: 3,
            ..Storm::default()
        };
        assert_eq!(storm_cells(Some(&only_failed)), ["-", "-"]);
        assert_eq!(storm_cells(None), ["-", "-"]);
    }
}
