//! Statistical bisection of kernels: `guest-tests bisect` (commits of a git tree, or a patch
//! series on a base) and `guest-tests judge` (one step, for `git bisect run`).
//!
//! - [`classify`]: the step classifier (a truncated SPRT against the good and bad references);
//! - [`search`]: the bisection, pure, with builds/boots/clock injected ([`search::Lab`]);
//! - [`lab`]: the real lab (images + executor) and the candidate lists.
//!
//! Rules:
//! 1. Files in the output directory: `journal.json` (every build and boot, saved after each;
//!    a second run with the same arguments resumes from it), `bisect.json` (the [`BisectOutcome`]),
//!    `bisect.log` (`git bisect log` form), `bisect.md` (the steps with their measurements),
//!    `refs/`, `steps/`, `builds/`.
//! 2. A journal from other arguments (candidates, suite, metric, plan) is refused, nothing is
//!    overwritten.
//! 3. `judge` exits 0 (good), 1 (bad) or 125 (undecided, build or boot failed), as
//!    `git bisect run` expects; bad arguments exit 2 (which `git bisect run` would read as bad:
//!    run `judge` once by hand first).

pub mod boot;
pub mod classify;
pub mod lab;
mod onslurm;
pub mod search;
#[cfg(test)]
mod tests;

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

pub use classify::{Classifier, ClassifierPlan, Sample, StepClass};
pub use search::{BisectAnswer, BisectOutcome, BisectPlan, Candidate, Event, Mark};

use gt_images::spec::KernelSpec;

/// A validated `bisect` request.
#[derive(Debug, Clone)]
pub struct BisectConfig {
    pub cands: Vec<(Candidate, KernelSpec)>,
    pub boot: lab::BootConfig,
    pub plan: BisectPlan,
    pub out: PathBuf,
}

/// What identifies a bisection (rule 2).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Fingerprint {
    candidates: Vec<String>,
    specs: Vec<String>,
    suite: String,
    metric: String,
    plan: BisectPlan,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Journal {
    fingerprint: Fingerprint,
    events: Vec<Event>,
}

fn fingerprint(cfg: &BisectConfig) -> Fingerprint {
    Fingerprint {
        candidates: cfg.cands.iter().map(|(c, _)| c.id.clone()).collect(),
        specs: cfg.cands.iter().map(|(_, s)| s.text.clone()).collect(),
        suite: cfg.boot.settings.suite.name.clone(),
        metric: cfg.boot.metric.clone(),
        plan: cfg.plan,
    }
}

/// Errors of `bisect` (input errors exit 2).
#[derive(Debug, thiserror::Error)]
pub enum BisectError {
    #[error("{0}")]
    Input(String),
    #[error(transparent)]
    Search(#[from] search::SearchError),
    #[error("{path}: {msg}")]
    Io { path: PathBuf, msg: String },
}

fn io(path: &Path, e: impl std::fmt::Display) -> BisectError {
    BisectError::Io {
        path: path.to_path_buf(),
        msg: e.to_string(),
    }
}

/// The saved journal's events, if `out` holds this bisection's journal (rule 2).
pub fn saved_events(out: &Path, cfg: &BisectConfig) -> Result<Vec<Event>, BisectError> {
    let p = out.join("journal.json");
    let Ok(text) = std::fs::read_to_string(&p) else {
        if std::fs::read_dir(out).is_ok_and(|mut d| d.next().is_some()) {
            return Err(BisectError::Input(format!(
                "--out {} exists, is not empty and holds no journal.json",
                out.display()
            )));
        }
        return Ok(vec![]);
    };
    let j: Journal = serde_json::from_str(&text).map_err(|e| io(&p, e))?;
    if j.fingerprint != fingerprint(cfg) {
        return Err(BisectError::Input(format!(
            "{} is the journal of another bisection (other candidates, suite, metric or plan); use another --out",
            p.display()
        )));
    }
    Ok(j.events)
}

/// Runs or resumes the bisection; writes the files of rule 1.
pub fn run(cfg: &BisectConfig) -> Result<BisectOutcome, BisectError> {
    let events = saved_events(&cfg.out, cfg)?;
    if !events.is_empty() {
        println!(
            "resuming from {} ({} saved events)",
            cfg.out.join("journal.json").display(),
            events.len()
        );
    }
    std::fs::create_dir_all(&cfg.out).map_err(|e| io(&cfg.out, e))?;
    let cands: Vec<Candidate> = cfg.cands.iter().map(|(c, _)| c.clone()).collect();
    let mut lab = lab::RealLab::new(cfg.cands.clone(), cfg.boot.clone(), cfg.out.clone())
        .map_err(BisectError::Input)?;
    let fp = fingerprint(cfg);
    let jpath = cfg.out.join("journal.json");
    let mut save = |ev: &[Event]| {
        let j = Journal {
            fingerprint: fp.clone(),
            events: ev.to_vec(),
        };
        let tmp = jpath.with_extension("json.tmp");
        let ok = serde_json::to_vec_pretty(&j)
            .ok()
            .and_then(|b| std::fs::write(&tmp, b).ok())
            .and_then(|_| std::fs::rename(&tmp, &jpath).ok());
        if ok.is_none() {
            tracing::error!("could not save {}", jpath.display());
        }
    };
    let o = search::bisect(&cands, cfg.plan, &mut lab, events, &mut save)?;
    write_outcome(&cfg.out, &o, &cfg.boot.metric)?;
    Ok(o)
}

fn fmt_ci(s: &search::Step) -> String {
    match (s.sample.n, s.ci95) {
        (0, _) => "-".into(),
        (_, Some(ci)) => format!("{:.3} +- {:.3}", s.sample.mean, ci),
        (_, None) => format!("{:.3}", s.sample.mean),
    }
}

/// The Markdown account of a bisection.
pub fn markdown(o: &BisectOutcome, metric: &str) -> String {
    let mut t = String::from("# Bisection\n\n");
    let g = Sample::of(&o.good_refs);
    let b = Sample::of(&o.bad_refs);
    let ci = |s: &Sample| s.ci95().map_or(String::new(), |c| format!(" +- {c:.3}"));
    t.push_str(&format!(
        "Metric `{metric}`. References: good {:.3}{} (n={}), bad {:.3}{} (n={}); 95 % t CIs.\n",
        g.mean,
        ci(&g),
        g.n,
        b.mean,
        ci(&b),
        b.n
    ));
    if let Some(c) = &o.classifier {
        t.push_str(&format!(
            "Classifier: SPRT (unequal variances), sigma good {:.4} / bad {:.4}, alpha {} beta {}, thresholds {:.2} / {:.2}, {}..{} boots per step.\n",
            c.sigma_good, c.sigma_bad, c.plan.alpha, c.plan.beta, c.lower, c.upper, c.plan.min_boots, c.plan.max_boots
        ));
    }
    t.push_str("\n| step | candidate | subject | boots | mean +- 95 % CI | llr | verdict | wall s |\n|---|---|---|---|---|---|---|---|\n");
    for (i, s) in o.steps.iter().enumerate() {
        t.push_str(&format!(
            "| {} | {} | {} | {} | {} | {:.2} | {}{} | {:.0} |\n",
            i + 1,
            &s.id[..s.id.len().min(12)],
            s.subject.replace('|', "/"),
            s.values.len(),
            fmt_ci(s),
            s.llr,
            s.verdict.word(),
            if s.reason.is_empty() {
                String::new()
            } else {
                format!(" ({})", s.reason.replace('|', "/"))
            },
            s.wall_s
        ));
    }
    if let Some(d) = &o.drift {
        t.push_str(&format!(
            "\nRe-measure at the end: good {:?} -> {:?}, bad {:?} -> {:?}; {}\n",
            d.good_again,
            d.good_class,
            d.bad_again,
            d.bad_class,
            if d.drifted {
                "DRIFT: the answer is not trusted"
            } else {
                "no drift"
            }
        ));
    }
    t.push_str(&format!("\nAnswer: {}\n", answer_line(o)));
    t
}

/// One line: what was found.
pub fn answer_line(o: &BisectOutcome) -> String {
    match &o.answer {
        BisectAnswer::Found { id, subject, .. } => format!("first bad: {id} {subject}"),
        BisectAnswer::Ambiguous { cands } => format!(
            "first bad is one of: {}",
            cands
                .iter()
                .map(|c| o.candidates[*c].id.clone())
                .collect::<Vec<_>>()
                .join(", ")
        ),
        BisectAnswer::Stopped { why } => format!("stopped: {why}"),
    }
}

fn write_outcome(out: &Path, o: &BisectOutcome, metric: &str) -> Result<(), BisectError> {
    let w = |name: &str, data: Vec<u8>| {
        let p = out.join(name);
        std::fs::write(&p, data).map_err(|e| io(&p, e))
    };
    w(
        "bisect.json",
        serde_json::to_vec_pretty(o).map_err(|e| io(out, e))?,
    )?;
    w("bisect.log", (o.log.join("\n") + "\n").into_bytes())?;
    w("bisect.md", markdown(o, metric).into_bytes())
}

/// One `judge` verdict: the candidate's boots against the references.
pub fn judge(
    good: &[f64],
    bad: &[f64],
    plan: ClassifierPlan,
    lab: &mut dyn search::Lab,
) -> (i32, String) {
    if let Some(why) = classify::separation(good, bad, &plan, 1) {
        return (125, why);
    }
    let c = Classifier::new(good, bad, plan);
    if let Err(search::Failure::Skip(why) | search::Failure::Abort(why)) = lab.build(0) {
        return (125, format!("build failed: {why}"));
    }
    let mut xs = Vec::new();
    loop {
        match lab.boot(0) {
            Ok(v) => xs.push(v),
            Err(search::Failure::Skip(why) | search::Failure::Abort(why)) => {
                return (125, format!("boot failed: {why}"))
            }
        }
        let s = Sample::of(&xs);
        let what = format!(
            "{} boots, mean {:.4} (good {:.4}, bad {:.4}), llr {:.2}",
            xs.len(),
            s.mean,
            c.good.mean,
            c.bad.mean,
            c.llr(&xs)
        );
        match c.look(&xs) {
            StepClass::Good => return (0, format!("good: {what}")),
            StepClass::Bad => return (1, format!("bad: {what}")),
            StepClass::Undecided => return (125, format!("undecided: {what}")),
            StepClass::Continue => {}
        }
    }
}
