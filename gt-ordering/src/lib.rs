//! Ordering by the kernel's own memory model: the litmus tests a kernel's parts carry, run with
//! herd7 against the LKMM (`tools/memory-model`) of the source the kernel is built from.
//!
//! [`check_kernel`] answers, for one kernel (a name of images/kernels.toml or an ad-hoc
//! `--kernels` element), each test's Never / Sometimes: can the outcome in its `exists` clause
//! (for the seed-000 tests: a request stays queued while no CPU runs the queue) happen under the
//! model. Which tests a kernel carries, and what it leaves unchecked, is [`plan`]'s; herd7 is
//! [`herd`]'s; tests derived from a kernel's own source for a patch that brings none are
//! [`derive`](mod@derive)'s; a litmus file's header is [`litmus`]'s; the LKMM's own shipped tests, run first
//! as the check that herd7 and the model work here, are [`selftest`]'s; the Markdown table of
//! docs/results/ordering is [`table`]'s.
//!
//! Rules:
//! 1. Before a model judges a kernel, every litmus test the LKMM ships must give its
//!    documented result; otherwise nothing is answered ([`OrderingError::Unsound`]).
//! 2. An answer comes from herd7's output or not at all: a test herd7 cannot run, a run past
//!    its timeout, a test no execution completes (`Never 0 0`) or one herd7 flags a data race
//!    in is an error, never a Never.
//! 3. herd7's `Always` is reported as Sometimes: the outcome can happen.

#![cfg_attr(test, allow(clippy::too_many_lines))]

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use gt_images::lkmm::{self, Lkmm};
use gt_images::manifest::Manifest;
use gt_images::spec::KernelSpec;
use gt_images::ImageError;

pub mod changes;
pub mod derive;
pub mod herd;
pub mod litmus;
pub mod plan;
pub mod selftest;
pub mod table;

use herd::Herd;
use litmus::{Documented, ExistsAnswer};
use plan::{ModelOf, Plan};
use selftest::SelfTest;

/// How long one herd7 run may take (each takes well under a second).
pub const TIMEOUT: Duration = Duration::from_secs(60);

/// Whether the outcome a litmus test asks about can happen under the model.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Answer {
    Never,
    Sometimes,
}

impl Answer {
    fn of(v: ExistsAnswer) -> Answer {
        match v {
            ExistsAnswer::Never => Answer::Never,
            ExistsAnswer::Sometimes | ExistsAnswer::Always => Answer::Sometimes,
        }
    }
}

impl std::fmt::Display for Answer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Answer::Never => "Never",
            Answer::Sometimes => "Sometimes",
        })
    }
}

/// One litmus test's answer.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct LitmusOutcome {
    /// The part that carries it: a component, the line's name for the line's own (base) tests,
    /// `patch:FILE` or `tree:PATH` for a user's.
    pub component: String,
    /// The file's stem.
    pub test: String,
    /// The kernel path it models (its header's `Path:`, e.g. `none`, `sched-dispatch`), or `-`.
    pub path: String,
    pub answer: Answer,
    /// What its header's `Result:` says it should give, if it says.
    pub expected: Option<Answer>,
}

/// A kernel's ordering check.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct OrderingCheck {
    pub kernel: String,
    /// The model: `LKMM of linux-source-6.12 6.12.117-1~deb12u1, herd7 7.58`.
    pub model: String,
    pub outcomes: Vec<LitmusOutcome>,
    /// Parts that change code and carry no litmus test: "ordering not checked" for them.
    pub unchecked: Vec<String>,
    /// Tests derived from the kernel's own source (`derive`): from whose, and the primitive
    /// read at each ordering point.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub derived: Option<String>,
}

impl OrderingCheck {
    /// The tests whose outcome can happen: any makes the kernel unsafe by the model.
    pub fn sometimes(&self) -> Vec<&LitmusOutcome> {
        self.outcomes
            .iter()
            .filter(|o| o.answer == Answer::Sometimes)
            .collect()
    }

    /// The tests whose answer is not the one their header documents (CI fails on any).
    pub fn unexpected(&self) -> Vec<&LitmusOutcome> {
        self.outcomes
            .iter()
            .filter(|o| o.expected.is_some_and(|e| e != o.answer))
            .collect()
    }
}

/// What went wrong.
#[derive(Debug, thiserror::Error)]
pub enum OrderingError {
    /// A bad kernel name, spec or litmus file: the request, not the machine.
    #[error("{0}")]
    Input(String),
    #[error("{0}")]
    NoHerd(String),
    #[error("the memory model: {0}")]
    Images(#[from] ImageError),
    #[error("herd7 on {}: {msg}", test.display())]
    Herd { test: PathBuf, msg: String },
    #[error("{model}: the LKMM's own litmus tests do not all give their documented result, so its answers are not used: {failures}")]
    Unsound { model: String, failures: String },
}

impl OrderingError {
    /// 2 for a bad request, 1 for everything else.
    pub fn exit_code(&self) -> u8 {
        match self {
            OrderingError::Input(_) => 2,
            OrderingError::Images(e) if e.exit_code() == 2 => 2,
            _ => 1,
        }
    }
}

/// A model in use: its files, its name in results, its self-test.
#[derive(Debug, Clone)]
pub struct Model {
    pub lkmm: Lkmm,
    /// `LKMM of <source>, herd7 <version>`.
    pub label: String,
    pub selftest: SelfTest,
}

/// Checks kernels one after another, each model self-tested once.
#[derive(Debug)]
pub struct Session {
    cache: PathBuf,
    force_selftest: bool,
    herd: Option<Herd>,
    models: Vec<Model>,
}

/// Checks one kernel (module doc): `kernel` is a kernel name of the manifest or an element of
/// `--kernels` (images/spec.rs); the LKMM comes into `cache` on first use, herd7 must be there
/// (ci/fetch-herd7.sh).
pub fn check_kernel(
    m: &Manifest,
    kernel: &str,
    cache: &Path,
) -> Result<OrderingCheck, OrderingError> {
    Session::new(cache, false).check(m, kernel)
}

impl Session {
    /// `force_selftest`: run the LKMM's shipped tests even where a stamp says they passed.
    pub fn new(cache: &Path, force_selftest: bool) -> Session {
        Session {
            cache: cache.to_path_buf(),
            force_selftest,
            herd: None,
            models: Vec::new(),
        }
    }

    /// The models used so far, in the order of first use.
    pub fn models(&self) -> &[Model] {
        &self.models
    }

    /// The kernel's tests, checked (nothing is built or booted).
    pub fn check(&mut self, m: &Manifest, kernel: &str) -> Result<OrderingCheck, OrderingError> {
        let spec = KernelSpec::parse(kernel).map_err(OrderingError::Input)?;
        spec.check(m).map_err(OrderingError::Input)?;
        let mut plan = plan::plan(m, &spec)?;
        self.derive(m, &mut plan);
        if plan.tests.is_empty() {
            return Ok(OrderingCheck {
                kernel: plan.kernel,
                model: "none: no litmus test to run".into(),
                outcomes: Vec::new(),
                unchecked: plan.unchecked,
                derived: plan.derived,
            });
        }
        let model = self.model(m, &plan)?;
        let outcomes = self.run(&plan, &model)?;
        Ok(OrderingCheck {
            kernel: plan.kernel,
            model: model.label,
            outcomes,
            unchecked: plan.unchecked,
            derived: plan.derived,
        })
    }

    /// `derive` for the plan's pending parts: on success their tests replace the ones that
    /// model what they changed and they leave `unchecked`; otherwise their entry says why no
    /// test could be derived.
    fn derive(&self, m: &Manifest, plan: &mut Plan) {
        let Some((line, source)) = plan.line.clone() else {
            return;
        };
        if plan.pending.is_empty() {
            return;
        }
        let req = derive::Request {
            kernel: &plan.kernel,
            line: &line,
            source: &source,
            code: plan.code.clone(),
            changed: plan
                .pending
                .iter()
                .flat_map(|p| p.functions.iter().cloned())
                .collect(),
            parts: plan.pending.iter().map(|p| p.label.clone()).collect(),
        };
        match derive::derive(&self.cache, m, &req) {
            Ok(d) => {
                plan.tests
                    .retain(|t| !t.header.models.iter().any(|f| req.changed.contains(f)));
                plan.tests.extend(d.tests);
                let gone: Vec<&str> = plan.pending.iter().map(|p| p.reason.as_str()).collect();
                plan.unchecked.retain(|u| !gone.contains(&u.as_str()));
                plan.derived = Some(format!(
                    "{}'s tests with the primitives this kernel's source has at their ordering points ({})",
                    d.template,
                    d.read.join(", ")
                ));
            }
            Err(why) => {
                for u in &mut plan.unchecked {
                    if let Some(p) = plan.pending.iter().find(|p| &p.reason == u) {
                        *u = format!(
                            "{} ({} changed; no test derived: {why})",
                            p.label,
                            p.functions.join(", ")
                        );
                    }
                }
            }
        }
    }

    fn herd(&mut self) -> Result<Herd, OrderingError> {
        if self.herd.is_none() {
            self.herd = Some(Herd::find(&self.cache)?);
        }
        self.herd
            .clone()
            .ok_or_else(|| OrderingError::NoHerd("herd7 not found".into()))
    }

    /// The plan's model, self-tested (rule 1).
    fn model(&mut self, m: &Manifest, plan: &Plan) -> Result<Model, OrderingError> {
        let herd = self.herd()?;
        let lkmm = match &plan.model {
            ModelOf::Source(name) => lkmm::ensure(&self.cache, m, name)?,
            ModelOf::Tree { path, rev } => lkmm::of_tree(&self.cache, path, rev.as_deref())?,
            ModelOf::Nothing => {
                return Err(OrderingError::Input(format!(
                    "kernel '{}' has no memory model",
                    plan.kernel
                )))
            }
        };
        if let Some(known) = self.models.iter().find(|x| x.lkmm == lkmm) {
            return Ok(known.clone());
        }
        let label = format!("LKMM of {}, herd7 {}", lkmm.label, herd.version);
        let in_cache = lkmm.dir.starts_with(&self.cache);
        let st = selftest::selftest(&herd, &lkmm.dir, in_cache, self.force_selftest, TIMEOUT)?;
        let failures: Vec<String> = st
            .failures()
            .iter()
            .map(|f| {
                format!(
                    "{} documents {}, herd7 says {}",
                    f.test, f.documented, f.got
                )
            })
            .collect();
        if !failures.is_empty() {
            return Err(OrderingError::Unsound {
                model: label,
                failures: failures.join("; "),
            });
        }
        let model = Model {
            lkmm,
            label,
            selftest: st,
        };
        self.models.push(model.clone());
        Ok(model)
    }

    /// herd7 on each of the plan's tests (rules 2 and 3).
    fn run(&mut self, plan: &Plan, model: &Model) -> Result<Vec<LitmusOutcome>, OrderingError> {
        let herd = self.herd()?;
        let mut out = Vec::new();
        for t in &plan.tests {
            let file = std::fs::canonicalize(&t.file)
                .map_err(|e| OrderingError::Input(format!("{}: {e}", t.file.display())))?;
            let o = herd.check(&model.lkmm.dir, &file, TIMEOUT)?;
            let fail = |msg: &str| OrderingError::Herd {
                test: file.clone(),
                msg: msg.to_string(),
            };
            if o.vacuous() {
                return Err(fail(
                    "no execution completes (Never 0 0): the test answers nothing",
                ));
            }
            if o.datarace {
                return Err(fail("herd7 flags a data race: mark the racing accesses (READ_ONCE/WRITE_ONCE) or model the lock"));
            }
            out.push(LitmusOutcome {
                component: t.component.clone(),
                test: t.stem(),
                path: t.header.path.clone().unwrap_or_else(|| "-".into()),
                answer: Answer::of(o.verdict),
                expected: match t.header.result {
                    Some(Documented::Answer(v)) => Some(Answer::of(v)),
                    _ => None,
                },
            });
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(answer: Answer, expected: Option<Answer>) -> LitmusOutcome {
        LitmusOutcome {
            component: "seed000".into(),
            test: "seed000-none".into(),
            path: "none".into(),
            answer,
            expected,
        }
    }

    #[test]
    fn sometimes_and_unexpected_pick_their_outcomes() {
        let c = OrderingCheck {
            kernel: "rt+seed000".into(),
            model: "LKMM of x, herd7 7.58".into(),
            outcomes: vec![
                outcome(Answer::Never, Some(Answer::Never)),
                outcome(Answer::Sometimes, Some(Answer::Sometimes)),
                outcome(Answer::Sometimes, Some(Answer::Never)),
                outcome(Answer::Never, None),
            ],
            unchecked: vec![],
            derived: None,
        };
        assert_eq!(c.sometimes().len(), 2);
        assert_eq!(c.unexpected().len(), 1);
        let json = serde_json::to_string(&c).unwrap();
        assert!(json.contains("\"answer\":\"Sometimes\""), "{json}");
        assert_eq!(serde_json::from_str::<OrderingCheck>(&json).unwrap(), c);
        assert_eq!(Answer::of(ExistsAnswer::Always), Answer::Sometimes);
    }

    #[test]
    fn bad_kernels_are_input_errors_before_anything_runs() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../images/kernels.toml");
        let m = Manifest::load(&path).unwrap();
        let cache = tempfile::tempdir().unwrap();
        for k in [
            "nope",
            "rt+nope",
            "rt+seed000-v8",
            "m=rt+patch:/nonexistent.patch",
            "a b",
        ] {
            let e = check_kernel(&m, k, cache.path()).unwrap_err();
            assert_eq!(e.exit_code(), 2, "{k}: {e}");
        }
        assert_eq!(
            std::fs::read_dir(cache.path()).unwrap().count(),
            0,
            "nothing created"
        );
        // A kernel with nothing to run needs no herd7: a user's tree without tests.
        let t = gt_images::gitsrc::testtree::kernel_tree("one");
        let c = check_kernel(
            &m,
            &format!("mine=tree:{}", t.path().display()),
            cache.path(),
        )
        .unwrap();
        assert!(c.outcomes.is_empty());
        assert_eq!(c.unchecked, [format!("tree:{}", t.path().display())]);
    }
}

/// What a run's results.json keeps of its kernel's check (`info.ordering`): the judgement
/// (compare::judgement) reads it, so a verdict is rebuilt from results alone.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum OrderingRecord {
    Checked(OrderingCheck),
    /// herd7 or the model could not run: the reason (the judgement says "ordering not
    /// checked").
    Failed {
        reason: String,
    },
}

/// The checks of `kernels` (names or `--kernels` elements) as runs record them, in order: one
/// session (the LKMM's own tests run once), an error recorded, never fatal.
pub fn records_for(kernels: &[String], opts: &gt_images::ImageOptions) -> Vec<OrderingRecord> {
    let cache = gt_images::cache_dir(opts);
    let manifest = match Manifest::load(&gt_images::manifest_path()) {
        Ok(m) => m,
        Err(e) => {
            let reason = e.to_string();
            return kernels
                .iter()
                .map(|_| OrderingRecord::Failed {
                    reason: reason.clone(),
                })
                .collect();
        }
    };
    let mut session = Session::new(&cache, false);
    kernels
        .iter()
        .map(|k| match session.check(&manifest, k) {
            Ok(c) => OrderingRecord::Checked(c),
            Err(e) => OrderingRecord::Failed {
                reason: e.to_string(),
            },
        })
        .collect()
}
