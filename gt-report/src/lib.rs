//! Report: `report.md`, a self-contained `report.html` (inline SVG) and `plots/*.svg`, built
//! from the results.json files under a directory and nothing else, so a report can always be
//! rebuilt from results alone ([`build`]).

#![cfg_attr(test, allow(clippy::too_many_lines))]

mod block;
mod html;
pub mod judgement_words;
mod locksites;
mod lockwaits;
mod markdown;
mod model;
mod node_section;
mod plots;
pub mod pyfmt;
mod ranking;
mod tables;
mod verdict_words;

use std::path::{Path, PathBuf};

use gt_compare::{compare, CompareError, Comparison};
use gt_results::metrics::registry;
use gt_results::results::{load_runs, ResultsError, RunResult};

pub use judgement_words::{fill_reasons, judgement_lines, judgement_text};
pub use locksites::{lock_site_tables, LockSiteTable};
pub use lockwaits::{lock_wait_tables, LockWaitTable};
pub use model::{scan_model, ScanModel};
pub use node_section::{node_metrics, node_rows, node_table, NODE_NOTE};
pub use tables::{fmt_num, fmt_p, markdown_rows, markdown_table, table, table_where};
pub use verdict_words::{sequential_note, verdict_table, verdict_text, SequentialNote};

/// What to put in the report.
#[derive(Debug, Clone, Default)]
pub struct ReportOptions {
    /// Kernel order, first = baseline (default: the kernel of the earliest run).
    pub kernels: Vec<String>,
    /// Substrings selecting the metrics to plot (default: the registry's headline metrics,
    /// [`gt_results::metrics::registry::is_headline`], + flagged).
    pub plot_metrics: Vec<String>,
    /// Title line.
    pub title: Option<String>,
}

/// Errors building a report.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error("no results.json under {0}")]
    NoResults(PathBuf),
    #[error(transparent)]
    Results(#[from] ResultsError),
    #[error(transparent)]
    Compare(#[from] CompareError),
    #[error("plot {name}: {message}")]
    Plot { name: String, message: String },
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// A plot: file name under `plots/`, caption and SVG text.
#[derive(Debug, Clone)]
pub struct Plot {
    pub file: String,
    pub caption: String,
    pub svg: String,
}

/// Everything a report shows, computed from the runs.
#[derive(Debug)]
pub struct ReportData {
    /// The directory the runs were read from (run paths are shown relative to it).
    pub root: PathBuf,
    pub title: String,
    pub runs: Vec<RunResult>,
    /// Results files that could not be read.
    pub unreadable: Vec<String>,
    pub comparison: Comparison,
    pub lock_sites: Vec<LockSiteTable>,
    pub lock_waits: Vec<LockWaitTable>,
    pub plots: Vec<Plot>,
    /// The A/B verdict, when the runs name a primary metric.
    pub verdict: Option<gt_compare::verdict::Verdict>,
    pub sequential: Option<SequentialNote>,
    /// Seed 003's cost model, when the runs carry its factors.
    pub scan_model: Option<ScanModel>,
    /// Per-node split of the primary metrics (empty unless a scheduler or several hosts ran
    /// the runs).
    pub nodes: Vec<gt_compare::nodes::NodeRow>,
}

/// Paths written by [`build`].
#[derive(Debug, Clone, PartialEq)]
pub struct ReportFiles {
    pub markdown: PathBuf,
    pub html: PathBuf,
    pub plots: Vec<PathBuf>,
}

/// Builds the report for every results.json under `dir`, into `dir`.
pub fn build(dir: &Path) -> Result<ReportFiles, ReportError> {
    build_with(dir, &ReportOptions::default())
}

/// [`build`] with options.
pub fn build_with(dir: &Path, opts: &ReportOptions) -> Result<ReportFiles, ReportError> {
    let data = collect(dir, opts)?;
    write(dir, &data)
}

/// Reads the runs under `dir` and computes everything the report shows.
pub fn collect(dir: &Path, opts: &ReportOptions) -> Result<ReportData, ReportError> {
    let loaded = load_runs(&[dir]);
    if loaded.runs.is_empty() {
        return Err(ReportError::NoResults(dir.to_path_buf()));
    }
    let unreadable = loaded.unreadable.iter().map(|e| e.to_string()).collect();
    let runs = loaded.runs;
    let comparison = compare(&runs, &opts.kernels)?;
    let lock_sites = lock_site_tables(&runs, &comparison.kernels);
    let mut plots = plots::all(&comparison, &lock_sites, &opts.plot_metrics)?;
    let verdict = gt_compare::verdict::verdict(&comparison, &runs);
    let lock_waits = lock_wait_tables(&runs, &comparison.kernels);
    if let Some(step) = runs
        .iter()
        .find_map(|r| r.info.primary_metric.as_deref())
        .and_then(|m| m.split('.').next())
    {
        let threads = runs
            .iter()
            .find_map(|r| r.steps.iter().find_map(|s| s.locks.as_ref()).map(|_| r))
            .and_then(|r| r.guest.disk.get("request_vectors")?.parse().ok())
            .unwrap_or(8);
        if let Some(p) = lockwaits::blocked_plot(&runs, &comparison.kernels, step, threads)? {
            plots.push(p);
        }
    }
    let scan_model = scan_model(&runs, &comparison.kernels);
    let nodes = node_rows(&runs, &comparison);
    let title = opts.title.clone().unwrap_or_else(|| {
        let suites: std::collections::BTreeSet<&str> =
            runs.iter().map(|r| r.info.suite.as_str()).collect();
        format!(
            "{}: {}",
            suites.into_iter().collect::<Vec<_>>().join(", "),
            comparison.kernels.join(" vs ")
        )
    });
    Ok(ReportData {
        root: dir.to_path_buf(),
        title,
        runs,
        unreadable,
        comparison,
        lock_sites,
        lock_waits,
        plots,
        verdict,
        sequential: sequential_note(dir),
        scan_model,
        nodes,
    })
}

fn write(dir: &Path, data: &ReportData) -> Result<ReportFiles, ReportError> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| ReportError::Io { path, source }
    };
    let pdir = dir.join("plots");
    std::fs::create_dir_all(&pdir).map_err(io(&pdir))?;
    let mut plots = Vec::new();
    for p in &data.plots {
        let path = pdir.join(&p.file);
        std::fs::write(&path, &p.svg).map_err(io(&path))?;
        plots.push(path);
    }
    let md = dir.join("report.md");
    let md_text = markdown::render(data);
    std::fs::write(&md, &md_text).map_err(io(&md))?;
    let html = dir.join("report.html");
    std::fs::write(&html, html::render(&data.title, &md_text, &data.plots)).map_err(io(&html))?;
    Ok(ReportFiles {
        markdown: md,
        html,
        plots,
    })
}

/// The table printed after a matrix: the registry's headline metrics and the harness's.
pub fn headline_table(dir: &Path, kernels: &[String]) -> Result<String, ReportError> {
    let c = compare_dir(dir, kernels)?;
    let (h, r) = table_where(&c, |m| {
        registry::find(m).is_some_and(|r| r.is_headline() || r.is_harness())
    });
    Ok(markdown_rows(&h, &r))
}

fn compare_dir(dir: &Path, kernels: &[String]) -> Result<Comparison, ReportError> {
    let runs = load_runs(&[dir]).runs;
    if runs.is_empty() {
        return Err(ReportError::NoResults(dir.to_path_buf()));
    }
    Ok(compare(&runs, kernels)?)
}

/// A metric name made safe for a file name.
fn file_stem(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

#[cfg(test)]
mod tests;
