//! Run orchestration: kernels x variants x repeats, one subdirectory per run plus
//! `index.json`; a failed run is recorded and the matrix goes on.
//!
//! Designs ([`Design`]): `interleaved` boots one guest at a time, A B A B ..., so host drift is
//! spread over all kernels; `paired` boots the kernels of one repeat at the same time, each with
//! its own backend, so host noise hits them alike and compare can use paired statistics (runs
//! carry their `pair`). With a [`SeqPlan`] the matrix stops as soon as the suite's primary
//! metric is decided by the sequential test of [`gt_compare::sequential`].

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

pub use crate::executor::{execute, execute_retrying, never_reached_agent};
use gt_compare::sequential::{Decision, Sequential, SequentialRecord};
pub use rerun::rerun;

mod rerun;
use gt_images::{ImageOptions, KernelImage};
use gt_launch::accel::{self, AccelChoice};
use gt_launch::qemu::{self, Accel};
use gt_launch::rerun_file::RerunInfo;
use gt_launch::settings::BootSettings;
use gt_launch::{host, RunSpec};
use gt_ordering::OrderingRecord;
use gt_results::metrics::registry;
use gt_results::results::{load_runs, RunResult};
use gt_suite::Suite;

mod plan;
pub use plan::{plan, Index, IndexEntry, Planned};

/// Errors that stop the whole matrix (before or between runs).
#[derive(Debug, thiserror::Error)]
pub enum MatrixError {
    /// Bad input: reported as one line, exit code 2.
    #[error("{0}")]
    Input(String),
    #[error("kernel '{kernel}': {msg}")]
    Image { kernel: String, msg: String },
    #[error("{path}: {msg}")]
    Io { path: PathBuf, msg: String },
}

/// A validated `run` request.
#[derive(Debug, Clone)]
pub struct MatrixConfig {
    /// Suite, QEMU, backend, seed and the rest of how every boot runs.
    pub boot: BootSettings,
    /// Kernel names as results carry them (an ad-hoc kernel's label).
    pub kernels: Vec<String>,
    /// The `--kernels` elements, in the same order (equal to `kernels` for variants).
    pub kernel_specs: Vec<String>,
    pub variants: Vec<Option<String>>,
    pub repeat: u32,
    pub out: PathBuf,
    /// Retries of a run that never reached the guest agent.
    pub retries: u32,
    pub images: ImageOptions,
    pub design: Design,
    /// Stop when the primary metric is decided (None: run every repeat).
    pub until_decided: Option<SeqPlan>,
    /// Appended to the suite's backend arguments (e.g. `--threads 2`).
    pub extra_backend_args: Vec<String>,
    /// Paired design with pinned vCPUs: the guest of the i-th kernel on host CPU i mod n.
    pub split_pairs: bool,
}

/// How the kernels of one repeat share the host.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Design {
    /// One guest at a time: A B A B ...
    #[default]
    Interleaved,
    /// The kernels of a repeat boot at the same time, each with its own backend.
    Paired,
}

impl std::str::FromStr for Design {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "interleaved" => Ok(Design::Interleaved),
            "paired" => Ok(Design::Paired),
            o => Err(format!(
                "unknown --design '{o}' (known: interleaved, paired)"
            )),
        }
    }
}

/// Sequential stopping on the suite's primary metric: first look after `min_n` repeats, at most
/// the matrix's `repeat`, overall level `alpha`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SeqPlan {
    pub alpha: f64,
    pub min_n: usize,
}

/// Builds or finds every kernel first: an unknown name fails before anything is created.
pub fn ensure_kernels(
    names: &[String],
    opts: &ImageOptions,
) -> Result<Vec<KernelImage>, MatrixError> {
    names
        .iter()
        .map(|k| {
            gt_images::ensure(k, opts).map_err(|e| match e {
                gt_images::ImageError::UnknownVariant { .. } => MatrixError::Input(e.to_string()),
                other => MatrixError::Image {
                    kernel: k.clone(),
                    msg: other.to_string(),
                },
            })
        })
        .collect()
}

/// Resolves the accelerator once for the whole matrix.
pub fn resolve_accel(
    choice: AccelChoice,
    qemu_bin: &Path,
    kernel: &KernelImage,
) -> Result<Accel, MatrixError> {
    let version = qemu::version(qemu_bin).map_err(MatrixError::Input)?;
    Ok(accel::resolve(
        choice,
        qemu_bin,
        &version,
        &host::host_release(),
        &kernel.bzimage,
        &gt_suite::paths::cache_dir(),
    ))
}

/// Appends `extra` (`--flag value` pairs) to the suite's backend arguments, replacing a flag
/// the suite already sets (e.g. `--threads`), so the backend never sees it twice.
fn with_extra_args(args: &mut Vec<String>, extra: &[String]) {
    for pair in extra.chunks(2) {
        if let Some(i) = args.iter().position(|a| *a == pair[0]) {
            args.drain(i..(i + 2).min(args.len()));
        }
        args.extend(pair.iter().cloned());
    }
}

/// A one-line account of a finished run, for logs (stdout not a terminal).
pub fn run_line(i: usize, n: usize, p: &Planned, rec: &RunResult, primary: Option<&str>) -> String {
    let state = if rec.status.is_ok() { "ok" } else { "FAILED" };
    let wall = rec.timings.total_wall_s.unwrap_or(0.0);
    let m = primary
        .and_then(|name| rec.metric(name).map(|v| format!(" {name}={v:.4}")))
        .unwrap_or_default();
    format!(
        "[{}/{n}] {} r{} {state} {wall:.0} s{m}",
        i + 1,
        p.kernel,
        p.repeat
    )
}

/// The p-value the sequential test looks at: paired t on per-pair differences (paired design),
/// else Welch; between the first two kernels, on the suite's primary metric.
fn primary_p(cfg: &MatrixConfig, metric: &str) -> (Option<f64>, usize, String) {
    let runs: Vec<RunResult> = load_runs(std::slice::from_ref(&cfg.out))
        .runs
        .into_iter()
        .filter(|r| r.status.is_ok())
        .collect();
    let Ok(c) = gt_compare::compare(&runs, &cfg.kernels) else {
        return (None, 0, String::new());
    };
    let Some(row) = c.metric(metric).next() else {
        return (None, 0, String::new());
    };
    let n = cfg
        .kernels
        .iter()
        .take(2)
        .map(|k| row.values.get(k).map_or(0, Vec::len))
        .min()
        .unwrap_or(0);
    let Some(v) = row.versus.first() else {
        return (None, n, String::new());
    };
    match (cfg.design, &v.paired) {
        (Design::Paired, Some(pd)) => (pd.t_p, pd.n, "paired t".into()),
        _ => (v.welch_p, n, "Welch t".into()),
    }
}

/// What every run of a matrix shares, prepared once before the first boot (or, for a batch
/// executor, before submission): the kernels built, the accelerator resolved, the suite with
/// the extra backend arguments applied.
#[derive(Debug, Clone)]
pub struct Prepared {
    pub kernels: Vec<KernelImage>,
    pub accel: Accel,
    pub suite: Suite,
    /// Each kernel's memory-model check (None: the suite has no `[judgement]`), in kernel order.
    pub ordering: Vec<Option<OrderingRecord>>,
}

/// Builds the kernels and resolves the accelerator (nothing is created under `cfg.out`).
pub fn prepare(cfg: &MatrixConfig) -> Result<Prepared, MatrixError> {
    let kernels = ensure_kernels(&cfg.kernel_specs, &cfg.images)?;
    let accel = resolve_accel(cfg.boot.accel, &cfg.boot.host.qemu_bin, &kernels[0])?;
    let mut suite = cfg.boot.suite.clone();
    with_extra_args(&mut suite.spec.backend_args, &cfg.extra_backend_args);
    let ordering = if suite.spec.judgement.is_some() {
        gt_ordering::records_for(&cfg.kernel_specs, &cfg.images)
            .into_iter()
            .map(Some)
            .collect()
    } else {
        vec![None; kernels.len()]
    };
    Ok(Prepared {
        kernels,
        accel,
        suite,
        ordering,
    })
}

/// The run spec of one planned run: the same for every executor.
pub fn run_spec(cfg: &MatrixConfig, prep: &Prepared, p: &Planned) -> Result<RunSpec, MatrixError> {
    let i = cfg
        .kernels
        .iter()
        .position(|n| *n == p.kernel)
        .ok_or_else(|| MatrixError::Input(format!("kernel {} vanished", p.kernel)))?;
    let kernel = prep
        .kernels
        .get(i)
        .cloned()
        .ok_or_else(|| MatrixError::Input(format!("kernel {} vanished", p.kernel)))?;
    let run_id = format!("{}-{}", cfg.boot.suite.name, p.dir);
    let base = cfg
        .boot
        .run_spec(run_id, &cfg.out.join(&p.dir), kernel, prep.accel, p.seed);
    Ok(RunSpec {
        suite: prep.suite.clone(),
        variant: p.variant.clone(),
        pair: (cfg.design == Design::Paired).then_some(p.repeat),
        pin_slot: pair_slot(cfg, p),
        ..base
    })
}

/// The memory-model check of `p`'s kernel made by [`prepare`] (None: the suite has no
/// `[judgement]`); it goes into the run's results.json beside the spec, not in it.
pub fn ordering_of(cfg: &MatrixConfig, prep: &Prepared, p: &Planned) -> Option<OrderingRecord> {
    let i = cfg.kernels.iter().position(|n| *n == p.kernel)?;
    prep.ordering.get(i).cloned().flatten()
}

/// `--vcpu-placement split`: a paired run's slot, the position of its kernel in the matrix
/// rotated by the repeat, so that each kernel runs on each host CPU in turn (a CPU that the
/// host's own work favours or burdens is not confounded with a kernel).
fn pair_slot(cfg: &MatrixConfig, p: &Planned) -> Option<u32> {
    if !(cfg.split_pairs && cfg.boot.host.pin_vcpus && cfg.design == Design::Paired) {
        return None;
    }
    rotated_slot(&cfg.kernels, &p.kernel, p.repeat)
}

fn rotated_slot(kernels: &[String], kernel: &str, repeat: u32) -> Option<u32> {
    let i = kernels.iter().position(|k| k == kernel)?;
    Some(((i + repeat as usize) % kernels.len()) as u32)
}

/// The runs that boot together: one run each (interleaved), or the kernels of one repeat and
/// variant (paired).
pub fn groups(design: Design, planned: &[Planned]) -> Vec<Vec<Planned>> {
    let mut groups: Vec<Vec<Planned>> = Vec::new();
    for p in planned {
        match groups.last_mut() {
            Some(g)
                if design == Design::Paired
                    && g[0].repeat == p.repeat
                    && g[0].variant == p.variant =>
            {
                g.push(p.clone())
            }
            _ => groups.push(vec![p.clone()]),
        }
    }
    groups
}

/// Boots one group (its runs at the same time when there are several); `orderings[i]` is
/// `specs[i]`'s kernel's memory-model check.
pub fn run_group(
    specs: &[RunSpec],
    reruns: Vec<RerunInfo>,
    orderings: &[Option<OrderingRecord>],
    retries: u32,
) -> Result<Vec<(RunResult, u32)>, MatrixError> {
    let ordering = |i: usize| orderings.get(i).and_then(Option::as_ref);
    if let ([spec], [ri]) = (specs, reruns.as_slice()) {
        return Ok(vec![execute_retrying(
            spec,
            ri.clone(),
            ordering(0),
            retries,
        )]);
    }
    std::thread::scope(|sc| {
        let hs: Vec<_> = specs
            .iter()
            .zip(reruns)
            .enumerate()
            .map(|(i, (spec, ri))| {
                sc.spawn(move || execute_retrying(spec, ri, ordering(i), retries))
            })
            .collect();
        hs.into_iter()
            .map(|h| {
                h.join()
                    .map_err(|_| MatrixError::Input("a run's thread panicked".into()))
            })
            .collect::<Result<Vec<_>, _>>()
    })
}

/// The `index.json` line of a finished run.
pub fn index_entry(p: &Planned, rec: &RunResult, attempts: u32) -> IndexEntry {
    IndexEntry {
        planned: p.clone(),
        status: rec.status.clone(),
        boot_to_fio_ready_s: rec.metric(registry::HARNESS_BOOT_TO_FIO_READY_S),
        total_s: rec.timings.total_wall_s.unwrap_or(0.0),
        attempts,
    }
}

/// The index of a matrix before its first run.
pub fn new_index(cfg: &MatrixConfig, accel: Accel) -> Index {
    Index {
        suite: cfg.boot.suite.name.clone(),
        kernels: cfg.kernels.clone(),
        repeat: cfg.repeat,
        accel,
        runs: vec![],
        design: cfg.design,
        sequential: None,
    }
}

/// Runs the whole matrix; returns the index (also written to `out/index.json`).
pub fn run(cfg: &MatrixConfig) -> Result<Index, MatrixError> {
    let prep = prepare(cfg)?;
    std::fs::create_dir_all(&cfg.out).map_err(|e| MatrixError::Io {
        path: cfg.out.clone(),
        msg: e.to_string(),
    })?;
    let planned = plan(&cfg.kernels, &cfg.variants, cfg.repeat, cfg.boot.seed);
    let mut index = new_index(cfg, prep.accel);
    index.write(&cfg.out)?;
    let tty = std::io::IsTerminal::is_terminal(&std::io::stdout());
    let bar = progress_bar(cfg.boot.progress && tty, planned.len());
    let say = |line: String| {
        if tty {
            bar.println(line)
        } else {
            println!("{line}")
        }
    };
    let primary = prep.suite.spec.primary_metric.clone();
    let mut seq = match (&cfg.until_decided, &primary) {
        (Some(sp), Some(m)) => Some((
            Sequential::new(sp.alpha, sp.min_n, cfg.repeat as usize),
            m.clone(),
        )),
        _ => None,
    };
    let mut failed = 0;
    let mut done = 0;
    for g in groups(cfg.design, &planned) {
        bar.set_message(format!("{} (failed so far: {failed})", g[0].dir));
        let specs: Vec<RunSpec> = g
            .iter()
            .map(|p| run_spec(cfg, &prep, p))
            .collect::<Result<_, _>>()?;
        let reruns = g.iter().map(|p| rerun_info(cfg, p)).collect();
        let orderings: Vec<_> = g.iter().map(|p| ordering_of(cfg, &prep, p)).collect();
        let recs = run_group(&specs, reruns, &orderings, cfg.retries)?;
        for (p, (rec, attempts)) in g.iter().zip(recs) {
            if !rec.status.is_ok() {
                failed += 1;
                say(format!("run {} failed: {:?}", p.dir, rec.status));
            }
            if !tty || !cfg.boot.progress {
                let deciding = prep.suite.spec.deciding_metric();
                say(run_line(done, planned.len(), p, &rec, deciding));
            }
            done += 1;
            index.runs.push(index_entry(p, &rec, attempts));
            bar.inc(1);
        }
        // A look after every complete round of all kernels.
        let round_done = g
            .last()
            .is_some_and(|p| p.kernel == *cfg.kernels.last().unwrap_or(&p.kernel));
        if let (Some((sq, metric)), true) = (seq.as_mut(), round_done) {
            let (d, record) = sequential_look(cfg, sq, metric, &say);
            index.sequential = Some(record);
            if d != Decision::Continue {
                index.write(&cfg.out)?;
                break;
            }
        }
        index.write(&cfg.out)?;
    }
    bar.finish_with_message(format!("done, {failed} failed"));
    Ok(index)
}

/// The matrix's progress bar over `len` runs (hidden unless `visible`).
fn progress_bar(visible: bool, len: usize) -> indicatif::ProgressBar {
    let bar = if visible {
        indicatif::ProgressBar::new(len as u64)
    } else {
        indicatif::ProgressBar::hidden()
    };
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{elapsed_precise} [{bar:30}] {pos}/{len} eta {eta} {msg}",
        )
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
        .progress_chars("=> "),
    );
    bar
}

/// `--until-decided`'s look after a complete round: the primary metric's p-value so far into
/// the sequential test `sq`, the look's line to `say`; the decision and the index's record.
fn sequential_look(
    cfg: &MatrixConfig,
    sq: &mut Sequential,
    metric: &str,
    say: &dyn Fn(String),
) -> (Decision, SequentialRecord) {
    let (p, n, test) = primary_p(cfg, metric);
    let d = sq.look(n, p);
    if let Some(l) = sq.looks.last().filter(|l| l.n == n) {
        say(format!(
            "sequential look at n={n} per kernel: {test} p={} vs level {:.2e} -> {:?}",
            p.map_or("n/a".into(), |p| format!("{p:.2e}")),
            l.nominal_alpha,
            d
        ));
    }
    let record = SequentialRecord {
        metric: metric.to_string(),
        test,
        plan: sq.clone(),
        boots_per_kernel: n,
    };
    (d, record)
}

/// The `rerun.json` of a planned run.
pub fn rerun_info(cfg: &MatrixConfig, p: &Planned) -> RerunInfo {
    let spec = cfg
        .kernels
        .iter()
        .position(|k| *k == p.kernel)
        .and_then(|i| cfg.kernel_specs.get(i))
        .filter(|s| **s != p.kernel)
        .cloned();
    RerunInfo {
        variant: p.variant.clone(),
        repeat: p.repeat,
        extra_backend_args: cfg.extra_backend_args.clone(),
        pin_slot: pair_slot(cfg, p),
        ..cfg.boot.rerun_info(p.kernel.clone(), spec, p.seed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_pairs_rotate_each_kernel_over_the_cpus() {
        let k = ["a".to_string(), "b".to_string()];
        let slots: Vec<_> = (0..4)
            .map(|r| (rotated_slot(&k, "a", r), rotated_slot(&k, "b", r)))
            .collect();
        assert_eq!(
            slots,
            [
                (Some(0), Some(1)),
                (Some(1), Some(0)),
                (Some(0), Some(1)),
                (Some(1), Some(0))
            ]
        );
        assert_eq!(rotated_slot(&k, "c", 0), None);
    }

    #[test]
    fn extra_backend_args_replace_the_suites_own() {
        let mut a: Vec<String> = ["--null", "1G", "--threads", "2", "--seed", "1"]
            .map(String::from)
            .to_vec();
        with_extra_args(&mut a, &["--threads".to_string(), "1".to_string()]);
        assert_eq!(a, ["--null", "1G", "--seed", "1", "--threads", "1"]);
        let mut b = vec!["--null".to_string(), "1G".to_string()];
        with_extra_args(&mut b, &["--threads".to_string(), "4".to_string()]);
        assert_eq!(b, ["--null", "1G", "--threads", "4"]);
    }
}
