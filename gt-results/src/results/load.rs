//! Loading a matrix: every results.json under one or more directories, in one order, with one
//! baseline rule. Compare, report and the CLI all load runs through [`load_runs`].

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use super::{ResultsError, RunResult};

/// The runs under some directories.
#[derive(Debug, Default)]
pub struct LoadedRuns {
    /// Chronological: by `provenance.started_at`, then repeat index, then run directory. The
    /// same run reached through two of the given paths appears once.
    pub runs: Vec<RunResult>,
    /// Results files that could not be read.
    pub unreadable: Vec<ResultsError>,
}

impl LoadedRuns {
    /// The kernel order, first = baseline (see [`kernel_order`]).
    pub fn kernels(&self, requested: &[String]) -> Vec<String> {
        kernel_order(&self.runs, requested)
    }
}

/// Every results.json under `dirs` (recursively), sorted chronologically (see
/// [`LoadedRuns::runs`]).
pub fn load_runs<P: AsRef<Path>>(dirs: &[P]) -> LoadedRuns {
    let mut out = LoadedRuns::default();
    let mut keyed = Vec::new();
    for d in dirs {
        for (file, r) in RunResult::find_all_at(d.as_ref()) {
            match r {
                Ok(r) => keyed.push((dedup_key(&file, &r), r)),
                Err(e) => out.unreadable.push(e),
            }
        }
    }
    let mut seen = BTreeSet::new();
    keyed.retain(|(k, _)| seen.insert(k.clone()));
    out.runs = keyed.into_iter().map(|(_, r)| r).collect();
    sort_runs(&mut out.runs);
    out
}

/// What makes two results files the same run: the run directory the harness recorded, except
/// for a kept failed attempt (`<dir>.attempt<k>`, which records the directory of the run that
/// replaced it): that one is its own run, so the run that replaced it is never dropped for it.
fn dedup_key(file: &Path, r: &RunResult) -> PathBuf {
    let parent = file.parent().unwrap_or(Path::new(""));
    let is_attempt = parent
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| n.rsplit_once(".attempt"))
        .is_some_and(|(_, k)| !k.is_empty() && k.bytes().all(|b| b.is_ascii_digit()));
    if is_attempt {
        parent
            .canonicalize()
            .unwrap_or_else(|_| parent.to_path_buf())
    } else {
        r.info.run_dir.clone()
    }
}

/// The one run order: `started_at`, then repeat, then run directory.
pub fn sort_runs(runs: &mut [RunResult]) {
    runs.sort_by(|a, b| {
        a.provenance
            .started_at
            .cmp(&b.provenance.started_at)
            .then(a.info.repeat.cmp(&b.info.repeat))
            .then_with(|| a.info.run_dir.cmp(&b.info.run_dir))
    });
}

/// The baseline rule: `requested` when given, else the kernels of the successful runs in order
/// of first appearance (so the kernel of the earliest successful run is the baseline), then the
/// kernels none of whose runs succeeded, in the same order: a kernel that failed every boot is
/// still a kernel of the run, to be judged on its failures.
pub fn kernel_order(runs: &[RunResult], requested: &[String]) -> Vec<String> {
    if !requested.is_empty() {
        return requested.to_vec();
    }
    let mut order: Vec<String> = Vec::new();
    let ok_first = runs
        .iter()
        .filter(|r| r.status.is_ok())
        .chain(runs.iter().filter(|r| !r.status.is_ok()));
    for r in ok_first {
        if !order.contains(&r.info.kernel) {
            order.push(r.info.kernel.clone());
        }
    }
    order
}
