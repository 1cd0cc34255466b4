//! `guest-tests bisect` and `guest-tests judge`: arguments, their validation (nothing is built
//! or created before every name, tree, revision, patch and number is checked) and the commands.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

use crate::bisect::lab::{self, BootConfig};
use crate::bisect::{self, BisectAnswer, BisectConfig, BisectPlan, ClassifierPlan};
use gt_images::spec::KernelSpec;
use gt_results::results::load_runs;

/// How each boot runs and how steps are decided (shared by both commands).
#[derive(Args, Debug, Clone)]
pub struct StepArgs {
    #[arg(long)]
    suite: String,
    /// The metric that decides (default: the suite's `[judgement]` mechanism, else its
    /// primary_metric).
    #[arg(long)]
    metric: Option<String>,
    /// P(a good kernel is called bad) per step (Wald's bound of the SPRT).
    #[arg(long, default_value_t = 0.01)]
    alpha: f64,
    /// P(a bad kernel is called good) per step.
    #[arg(long, default_value_t = 0.01)]
    beta: f64,
    /// Boots before a step may be decided.
    #[arg(long, default_value_t = 2)]
    min_boots: usize,
    /// Boots after which an undecided step is skipped.
    #[arg(long, default_value_t = 6)]
    max_boots: usize,
    #[command(flatten)]
    boot: super::boot::BootArgs,
    #[command(flatten)]
    executor: super::executor::ExecutorArgs,
}

/// Arguments of `guest-tests bisect`.
#[derive(Args, Debug)]
pub struct BisectArgs {
    /// The kernel git tree (read only: a shared clone of it is built under the cache).
    #[arg(long)]
    tree: Option<PathBuf>,
    /// The good end: a revision of --tree (with --patches: the base revision).
    #[arg(long)]
    good: Option<String>,
    /// The bad end: a revision of --tree.
    #[arg(long, conflicts_with = "patches")]
    bad: Option<String>,
    /// Bisect this patch series (DIR/series, else DIR/*.patch by name) applied on the base:
    /// --tree at --good, or the variant --base-variant.
    #[arg(long)]
    patches: Option<PathBuf>,
    /// Base of --patches without --tree (a source variant of images/kernels.toml).
    #[arg(long, default_value = "rt", conflicts_with = "tree")]
    base_variant: String,
    /// Output directory (default: results/bisect-<suite>-<UTC time>); holding this
    /// bisection's journal.json, it is resumed.
    #[allow(rustdoc::invalid_html_tags)] // clap's --help text: <...> are placeholders, not HTML
    #[arg(long)]
    out: Option<PathBuf>,
    /// Boots of each end before bisecting.
    #[arg(long, default_value_t = 4)]
    ref_boots: usize,
    /// If the ends do not separate after --ref-boots, boot both on to this many and look once
    /// more (each look at half the separation p); = --ref-boots: one look.
    #[arg(long, default_value_t = 8)]
    max_ref_boots: usize,
    /// Boots of each end again at the end (host drift check; 0: none).
    #[arg(long, default_value_t = 2)]
    drift_boots: usize,
    /// Seconds per step (build + boots).
    #[arg(long, default_value_t = 240.0)]
    step_budget: f64,
    #[command(flatten)]
    step: StepArgs,
}

/// Arguments of `guest-tests judge` (for `git bisect run`).
#[derive(Args, Debug)]
pub struct JudgeArgs {
    /// Runs (results.json, e.g. `run --out` or a bisection's refs/good) of the good kernel.
    #[arg(long)]
    good: PathBuf,
    /// Runs of the bad kernel.
    #[arg(long)]
    bad: PathBuf,
    /// The tree whose checkout is built (default: the current directory, as `git bisect run`
    /// leaves it).
    #[arg(long, default_value = ".")]
    tree: PathBuf,
    /// Where the boots go, outside the tree (default: results/judge-<commit>-<UTC time> in
    /// this repository).
    #[allow(rustdoc::invalid_html_tags)] // clap's --help text: <...> are placeholders, not HTML
    #[arg(long)]
    out: Option<PathBuf>,
    #[command(flatten)]
    step: StepArgs,
}

fn stamp() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    super::run::utc_stamp(secs)
}

impl StepArgs {
    fn check(self) -> Result<(BootConfig, ClassifierPlan), String> {
        let boot = self.boot.check(&self.suite)?;
        let suite = &boot.suite;
        let metric = match self
            .metric
            .or_else(|| suite.spec.deciding_metric().map(str::to_string))
        {
            Some(m) => m,
            None => {
                return Err(format!(
                    "suite '{}' names neither a [judgement] nor a primary_metric: give --metric",
                    suite.name
                ))
            }
        };
        if gt_results::metrics::registry::find(&metric).is_none() {
            return Err(format!(
                "--metric '{metric}' is not a metric the registry knows"
            ));
        }
        for (what, v) in [("--alpha", self.alpha), ("--beta", self.beta)] {
            if !(v > 0.0 && v < 0.5) {
                return Err(format!("{what} {v} not in (0, 0.5)"));
            }
        }
        if self.min_boots < 1 || self.min_boots > self.max_boots || self.max_boots > 50 {
            return Err(format!(
                "--min-boots {} / --max-boots {}: need 1 <= min <= max <= 50",
                self.min_boots, self.max_boots
            ));
        }
        let plan = ClassifierPlan {
            alpha: self.alpha,
            beta: self.beta,
            min_boots: self.min_boots,
            max_boots: self.max_boots,
            ..Default::default()
        };
        let slurm = self.executor.slurm(false)?;
        Ok((
            BootConfig {
                settings: boot,
                metric,
                slurm,
            },
            plan,
        ))
    }
}

/// With `--executor slurm`: what `run --executor slurm` checks before anything is submitted.
fn check_executor(boot: &BootConfig, out: &std::path::Path) -> Result<(), String> {
    match &boot.slurm {
        Some(o) => crate::batch::check_slurm(out, boot.settings.host.backend_bin.as_deref(), o)
            .map(|_| ())
            .map_err(|e| e.to_string()),
        None => Ok(()),
    }
}

fn check_out(out: &std::path::Path) -> Result<(), String> {
    if out.display().to_string().contains(',') {
        return Err(format!(
            "--out {}: QEMU cannot take paths with ','",
            out.display()
        ));
    }
    Ok(())
}

impl TryFrom<BisectArgs> for BisectConfig {
    type Error = String;

    fn try_from(a: BisectArgs) -> Result<Self, String> {
        // A copy of the step's arguments: `candidates` below reads the rest of `a`.
        let (boot, classifier) = a.step.clone().check()?;
        if !(2..=50).contains(&a.ref_boots) || a.drift_boots > 50 {
            return Err(format!(
                "--ref-boots {} not in 2..=50 or --drift-boots {} over 50",
                a.ref_boots, a.drift_boots
            ));
        }
        if !(a.ref_boots..=50).contains(&a.max_ref_boots) {
            return Err(format!(
                "--max-ref-boots {} not in --ref-boots ({})..=50",
                a.max_ref_boots, a.ref_boots
            ));
        }
        if a.step_budget.is_nan() || a.step_budget <= 0.0 {
            return Err(format!("--step-budget {} must be positive", a.step_budget));
        }
        let cands = candidates(&a)?;
        if cands.len() < 2 {
            return Err("nothing to bisect: the good and bad ends are the same".into());
        }
        let out = a.out.unwrap_or_else(|| {
            PathBuf::from("results").join(format!(
                "bisect-{}-{}",
                boot.settings.suite.name,
                stamp()
            ))
        });
        check_out(&out)?;
        check_executor(&boot, &out)?;
        let cfg = BisectConfig {
            cands,
            boot,
            plan: BisectPlan {
                classifier,
                ref_boots: a.ref_boots,
                max_ref_boots: a.max_ref_boots,
                drift_boots: a.drift_boots,
                step_budget_s: a.step_budget,
            },
            out,
        };
        bisect::saved_events(&cfg.out, &cfg).map_err(|e| e.to_string())?;
        Ok(cfg)
    }
}

/// The candidates to bisect with their kernels: a patch series on its base (`--tree` at
/// `--good`, or `--base-variant`), or the commits between `--good` and `--bad` of `--tree`;
/// every tree, revision, patch and name checked.
fn candidates(a: &BisectArgs) -> Result<Vec<(bisect::Candidate, KernelSpec)>, String> {
    let manifest = gt_images::manifest::Manifest::load(&gt_images::manifest_path())
        .map_err(|e| e.to_string())?;
    let tree = match &a.tree {
        Some(t) => {
            gt_images::spec::check_tree(t, None).map_err(|e| format!("--tree: {e}"))?;
            Some(
                t.canonicalize()
                    .map_err(|e| format!("--tree {}: {e}", t.display()))?,
            )
        }
        None => None,
    };
    Ok(match (&a.patches, &tree) {
        (Some(dir), _) => {
            let files = lab::series(dir)?
                .into_iter()
                .map(|p| p.canonicalize().unwrap_or(p))
                .collect::<Vec<_>>();
            let text = match (&tree, &a.good) {
                (Some(t), Some(g)) => format!("base=tree:{}@{g}", t.display()),
                (Some(_), None) => {
                    return Err("--patches with --tree needs --good (the base revision)".into())
                }
                (None, Some(_)) => return Err("--good without --tree: give --tree".into()),
                (None, None) => format!("base={}", a.base_variant),
            };
            let base = KernelSpec::parse(&text)?;
            base.check(&manifest)?;
            lab::patch_candidates(&base, &files)
        }
        (None, Some(t)) => {
            let (Some(g), Some(b)) = (&a.good, &a.bad) else {
                return Err("bisect needs --good REV and --bad REV (or --patches DIR)".into());
            };
            let list = lab::commit_candidates(t, g, b)?;
            list.into_iter()
                .map(|c| {
                    let s = lab::commit_spec(t, &c);
                    (c, s)
                })
                .collect()
        }
        (None, None) => return Err("bisect needs --tree PATH (or --patches DIR)".into()),
    })
}

/// `guest-tests bisect`.
pub fn bisect_cmd(a: BisectArgs) -> ExitCode {
    let cfg = match BisectConfig::try_from(a) {
        Ok(c) => c,
        Err(e) => return super::fail(e, 2),
    };
    println!(
        "bisecting {} candidates ({} .. {}) on {}, output {}",
        cfg.cands.len(),
        cfg.cands[0].0.id,
        cfg.cands[cfg.cands.len() - 1].0.id,
        cfg.boot.metric,
        cfg.out.display()
    );
    match bisect::run(&cfg) {
        Ok(o) => {
            println!("\n{}", o.log.join("\n"));
            println!(
                "\n{} ({} decided steps, {} skipped; {})",
                bisect::answer_line(&o),
                o.decided_steps(),
                o.steps.len() - o.decided_steps(),
                cfg.out.join("bisect.md").display()
            );
            match (&o.answer, o.drift.as_ref().is_some_and(|d| d.drifted)) {
                (BisectAnswer::Found { .. }, false) => ExitCode::SUCCESS,
                _ => ExitCode::from(1),
            }
        }
        Err(e @ bisect::BisectError::Input(_)) => super::fail(e, 2),
        Err(e) => super::fail(e, 1),
    }
}

fn ref_values(dir: &std::path::Path, metric: &str, what: &str) -> Result<Vec<f64>, String> {
    if !dir.is_dir() {
        return Err(format!("--{what} {}: not a directory", dir.display()));
    }
    let v: Vec<f64> = load_runs(&[dir])
        .runs
        .iter()
        .filter(|r| r.status.is_ok())
        .filter_map(|r| r.metric(metric))
        .collect();
    if v.len() < 2 {
        return Err(format!(
            "--{what} {}: {} runs with {metric}, need at least 2",
            dir.display(),
            v.len()
        ));
    }
    Ok(v)
}

/// What `judge` needs, validated: the references, the plan and the lab of the checkout.
struct Judge {
    good: Vec<f64>,
    bad: Vec<f64>,
    plan: ClassifierPlan,
    lab: lab::RealLab,
}

fn prepare_judge(a: JudgeArgs) -> Result<Judge, String> {
    let (boot, plan) = a.step.check()?;
    let good = ref_values(&a.good, &boot.metric, "good")?;
    let bad = ref_values(&a.bad, &boot.metric, "bad")?;
    gt_images::spec::check_tree(&a.tree, None).map_err(|e| format!("--tree: {e}"))?;
    let tree = a.tree.canonicalize().map_err(|e| e.to_string())?;
    let head = gt_images::spec::resolve_rev(&tree, "HEAD")?;
    let spec = KernelSpec::parse(&format!("judge-{}=tree:{}", &head[..12], tree.display()))?;
    // Not under the cwd: `git bisect run` runs judge inside the tree, whose checkout must stay
    // clean (a results directory there would be built into the next kernel as a change).
    let out = a.out.clone().unwrap_or_else(|| {
        gt_suite::paths::repo_root().join("results").join(format!(
            "judge-{}-{}",
            &head[..12],
            stamp()
        ))
    });
    let abs_out = if out.is_absolute() {
        out.clone()
    } else {
        std::env::current_dir()
            .map_err(|e| e.to_string())?
            .join(&out)
    };
    if abs_out.starts_with(&tree) {
        return Err(format!(
            "--out {} is inside the tree {}: its checkout would no longer be clean",
            out.display(),
            tree.display()
        ));
    }
    check_out(&out)?;
    check_executor(&boot, &out)?;
    if std::fs::read_dir(&out).is_ok_and(|mut d| d.next().is_some()) {
        return Err(format!("--out {} exists and is not empty", out.display()));
    }
    let cand = bisect::Candidate {
        id: head,
        subject: String::new(),
    };
    let lab = lab::RealLab::new(vec![(cand, spec)], boot, out)?;
    Ok(Judge {
        good,
        bad,
        plan,
        lab,
    })
}

/// `guest-tests judge`: exit 0 good, 1 bad, 125 undecided or not built/booted, 2 bad arguments.
pub fn judge_cmd(a: JudgeArgs) -> ExitCode {
    let mut j = match prepare_judge(a) {
        Ok(j) => j,
        Err(e) => return super::fail(e, 2),
    };
    let (code, why) = bisect::judge(&j.good, &j.bad, j.plan, &mut j.lab);
    println!("judge: {why} -> exit {code}");
    ExitCode::from(code as u8)
}

#[cfg(test)]
mod tests;
