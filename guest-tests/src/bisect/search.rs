//! The bisection itself, over an ordered list of candidates, with builds, boots and the clock
//! injected through [`Lab`] (the real one builds and boots kernels; tests feed synthetic streams).
//!
//! Rules:
//! 1. Candidate 0 is the good end, the last candidate the bad end. Both are built and booted
//!    `ref_boots` times each, interleaved (G B G B ...). They must separate
//!    ([`super::classify::separation`]). If they do not and `max_ref_boots` allows, both are
//!    booted on to `max_ref_boots` each and looked at a second time (each of the two looks at
//!    half of `separate_p`, so the pair stays within it); still not separated: the bisection
//!    stops and says why.
//! 2. Each step takes the untested, unskipped candidate nearest the middle of the open range
//!    (good, bad) (ties: the earlier one), builds it and boots it until the classifier decides
//!    or the step budget (boots, and seconds on the injected clock) is spent.
//! 3. A build that fails, a boot that fails and an undecided step are `skip`: the candidate is
//!    left out, as `git bisect skip` does. When only skipped candidates remain between the last
//!    good and the first bad, the answer is the set of them plus the first bad.
//! 4. At the end the good and bad ends are booted again (`drift_boots` each, interleaved; an
//!    end not yet decided is booted on up to the step's `max_boots`) and classified against the
//!    first references; if either is not classified as itself, the host drifted during the
//!    bisection and the answer is flagged.
//! 5. Every build and boot is an [`Event`] in a journal, saved after each one. Given the journal
//!    of an interrupted bisection, the driver replays it (no build, no boot) and goes on where
//!    it stopped: the decisions are a pure function of the events.
//! 6. The log has `git bisect` lines (`git bisect good|bad|skip <id>` with `# good: [id] subject`
//!    comments, as `git bisect log` writes them), so `git bisect replay` accepts it for a tree.

use serde::{Deserialize, Serialize};

use super::classify::{separation, Classifier, ClassifierPlan, Sample, StepClass};

/// One kernel to test: a commit (id = its sha) or a prefix of a patch series.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Candidate {
    pub id: String,
    pub subject: String,
}

/// Why a build or boot did not give a value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// This candidate cannot be built or booted: skip it (the reason is logged).
    Skip(String),
    /// Stop the whole bisection (interrupted, infrastructure gone); resumable.
    Abort(String),
}

/// Builds, boots and the clock.
pub trait Lab {
    fn build(&mut self, c: usize) -> Result<(), Failure>;
    /// One boot of candidate `c`: the metric's value.
    fn boot(&mut self, c: usize) -> Result<f64, Failure>;
    /// Seconds on a monotonic clock.
    fn now(&mut self) -> f64;
    /// A progress line.
    fn say(&mut self, _line: &str) {}
}

/// The journal's entries.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    Build {
        cand: usize,
        ok: bool,
        note: String,
    },
    Boot {
        cand: usize,
        value: Option<f64>,
        note: String,
    },
}

/// The bisection's knobs.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct BisectPlan {
    pub classifier: ClassifierPlan,
    pub ref_boots: usize,
    /// Reference boots per end after the second look (= `ref_boots`: one look only).
    #[serde(default)]
    pub max_ref_boots: usize,
    pub drift_boots: usize,
    /// Seconds per step (build + boots); the boot that crosses it is the step's last.
    pub step_budget_s: f64,
}

impl Default for BisectPlan {
    fn default() -> Self {
        BisectPlan {
            classifier: ClassifierPlan::default(),
            ref_boots: 4,
            max_ref_boots: 8,
            drift_boots: 2,
            step_budget_s: 240.0,
        }
    }
}

/// A step's verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mark {
    Good,
    Bad,
    Skip,
}

impl Mark {
    pub fn word(self) -> &'static str {
        match self {
            Mark::Good => "good",
            Mark::Bad => "bad",
            Mark::Skip => "skip",
        }
    }
}

/// One step of the bisection.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Step {
    pub cand: usize,
    pub id: String,
    pub subject: String,
    pub values: Vec<f64>,
    pub sample: Sample,
    pub ci95: Option<f64>,
    pub llr: f64,
    pub verdict: Mark,
    pub reason: String,
    pub wall_s: f64,
}

/// The good/bad re-measure at the end (rule 4).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Drift {
    pub good_again: Vec<f64>,
    pub bad_again: Vec<f64>,
    pub good_class: StepClass,
    pub bad_class: StepClass,
    pub drifted: bool,
}

/// What the bisection found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum BisectAnswer {
    /// The first bad candidate.
    Found {
        cand: usize,
        id: String,
        subject: String,
    },
    /// One of these (skipped ones, then the first bad) is the first bad.
    Ambiguous { cands: Vec<usize> },
    /// Stopped before bisecting (references do not separate, an end does not build).
    Stopped { why: String },
}

/// The whole record (`bisect.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BisectOutcome {
    pub candidates: Vec<Candidate>,
    pub good_refs: Vec<f64>,
    pub bad_refs: Vec<f64>,
    pub classifier: Option<Classifier>,
    pub steps: Vec<Step>,
    pub drift: Option<Drift>,
    pub answer: BisectAnswer,
    pub log: Vec<String>,
    pub plan: BisectPlan,
}

impl BisectOutcome {
    /// Steps that ended good or bad.
    pub fn decided_steps(&self) -> usize {
        self.steps
            .iter()
            .filter(|s| s.verdict != Mark::Skip)
            .count()
    }
}

/// Errors that stop a bisection (the journal so far is saved; it can be resumed).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SearchError {
    #[error("bisection aborted: {0} (resume with the same command)")]
    Aborted(String),
    #[error("saved state does not match this bisection at event {at}: {detail}")]
    Diverged { at: usize, detail: String },
    #[error("need at least 2 candidates (a good and a bad end), have {0}")]
    TooFew(usize),
}

/// Replays the journal, then calls the lab and appends (rule 5).
struct Recorder<'a, L: Lab> {
    lab: &'a mut L,
    events: Vec<Event>,
    pos: usize,
    save: &'a mut dyn FnMut(&[Event]),
}

impl<L: Lab> Recorder<'_, L> {
    fn replayed(&mut self) -> Option<Event> {
        let e = self.events.get(self.pos).cloned();
        if e.is_some() {
            self.pos += 1;
        }
        e
    }

    /// The replayed event just taken is not the one wanted.
    fn diverged(&self, detail: String) -> SearchError {
        SearchError::Diverged {
            at: self.pos.saturating_sub(1),
            detail,
        }
    }

    fn push(&mut self, e: Event) {
        self.events.push(e);
        self.pos = self.events.len();
        (self.save)(&self.events);
    }

    fn build(&mut self, cand: usize) -> Result<Result<(), String>, SearchError> {
        match self.replayed() {
            Some(Event::Build { cand: c, ok, note }) if c == cand => {
                return Ok(if ok { Ok(()) } else { Err(note) })
            }
            Some(other) => {
                return Err(self.diverged(format!("wanted build {cand}, saved {other:?}")))
            }
            None => {}
        }
        let (ok, note) = match self.lab.build(cand) {
            Ok(()) => (true, String::new()),
            Err(Failure::Skip(why)) => (false, why),
            Err(Failure::Abort(why)) => return Err(SearchError::Aborted(why)),
        };
        self.push(Event::Build {
            cand,
            ok,
            note: note.clone(),
        });
        Ok(if ok { Ok(()) } else { Err(note) })
    }

    fn boot(&mut self, cand: usize) -> Result<Result<f64, String>, SearchError> {
        match self.replayed() {
            Some(Event::Boot {
                cand: c,
                value,
                note,
            }) if c == cand => return Ok(value.ok_or(note)),
            Some(other) => {
                return Err(self.diverged(format!("wanted boot {cand}, saved {other:?}")))
            }
            None => {}
        }
        let (value, note) = match self.lab.boot(cand) {
            Ok(v) => (Some(v), String::new()),
            Err(Failure::Skip(why)) => (None, why),
            Err(Failure::Abort(why)) => return Err(SearchError::Aborted(why)),
        };
        self.push(Event::Boot {
            cand,
            value,
            note: note.clone(),
        });
        Ok(value.ok_or(note))
    }
}

fn log_line(log: &mut Vec<String>, word: &str, c: &Candidate) {
    log.push(format!("# {word}: [{}] {}", c.id, c.subject));
    log.push(format!("git bisect {word} {}", c.id));
}

/// The next candidate to test (rule 2).
pub fn next_candidate(lo: usize, hi: usize, skipped: &[usize]) -> Option<usize> {
    let mid = (lo + hi) as f64 / 2.0;
    ((lo + 1)..hi)
        .filter(|c| !skipped.contains(c))
        .min_by(|a, b| {
            let (da, db) = ((*a as f64 - mid).abs(), (*b as f64 - mid).abs());
            da.total_cmp(&db).then(a.cmp(b))
        })
}

/// Runs (or resumes, from `journal`) the bisection of `cands`; `save` gets the journal after
/// every new event.
pub fn bisect<L: Lab>(
    cands: &[Candidate],
    plan: BisectPlan,
    lab: &mut L,
    journal: Vec<Event>,
    save: &mut dyn FnMut(&[Event]),
) -> Result<BisectOutcome, SearchError> {
    let n = cands.len();
    if n < 2 {
        return Err(SearchError::TooFew(n));
    }
    let (g, b) = (0, n - 1);
    let mut rec = Recorder {
        lab,
        events: journal,
        pos: 0,
        save,
    };
    let mut log = vec!["git bisect start".to_string()];
    let mut out = BisectOutcome {
        candidates: cands.to_vec(),
        good_refs: vec![],
        bad_refs: vec![],
        classifier: None,
        steps: vec![],
        drift: None,
        answer: BisectAnswer::Stopped { why: String::new() },
        log: vec![],
        plan,
    };
    let stop = |mut out: BisectOutcome,
                log: Vec<String>,
                why: String|
     -> Result<BisectOutcome, SearchError> {
        out.answer = BisectAnswer::Stopped { why };
        out.log = log;
        Ok(out)
    };
    for (end, word) in [(b, "bad"), (g, "good")] {
        if let Err(why) = rec.build(end)? {
            return stop(out, log, format!("the {word} end does not build: {why}"));
        }
    }
    let verdict = match boot_references(&mut rec, &mut out, plan, g, b)? {
        Ok(verdict) => verdict,
        Err(why) => return stop(out, log, why),
    };
    log_line(&mut log, "bad", &cands[b]);
    log_line(&mut log, "good", &cands[g]);
    if let Some(why) = verdict {
        return stop(out, log, why);
    }
    let cl = Classifier::new(&out.good_refs, &out.bad_refs, plan.classifier);
    out.classifier = Some(cl);
    rec.lab.say(&format!(
        "references: good {:.4} (n={}, sigma {:.4}), bad {:.4} (n={}, sigma {:.4})",
        cl.good.mean, cl.good.n, cl.sigma_good, cl.bad.mean, cl.bad.n, cl.sigma_bad
    ));
    let (mut lo, mut hi) = (g, b);
    let mut skipped: Vec<usize> = Vec::new();
    while let Some(c) = next_candidate(lo, hi, &skipped) {
        let step = run_step(&mut rec, &cl, plan, &cands[c], c, out.steps.len() + 1)?;
        match step.verdict {
            Mark::Good => lo = c,
            Mark::Bad => hi = c,
            Mark::Skip => skipped.push(c),
        }
        log_line(&mut log, step.verdict.word(), &cands[c]);
        out.steps.push(step);
    }
    if plan.drift_boots > 0 {
        out.drift = Some(remeasure_ends(&mut rec, &cl, plan, g, b)?);
    }
    out.answer = answer(cands, lo, hi, &skipped, &mut log);
    if out.drift.as_ref().is_some_and(|d| d.drifted) {
        log.push("# WARNING: the good/bad re-measure at the end disagrees with the references (host drift); the answer is not trusted".into());
    }
    out.log = log;
    Ok(out)
}

/// Rule 1: boots both ends, interleaved, into `out.good_refs` / `out.bad_refs`, one or two looks.
/// `Ok(Err(why))`: a reference boot failed; `Ok(Ok(Some(why)))`: the ends do not separate.
fn boot_references<L: Lab>(
    rec: &mut Recorder<'_, L>,
    out: &mut BisectOutcome,
    plan: BisectPlan,
    g: usize,
    b: usize,
) -> Result<Result<Option<String>, String>, SearchError> {
    let looks = if plan.max_ref_boots > plan.ref_boots {
        2
    } else {
        1
    };
    let mut verdict = None;
    for (look, target) in [plan.ref_boots, plan.max_ref_boots.max(plan.ref_boots)]
        .into_iter()
        .take(looks)
        .enumerate()
    {
        while out.good_refs.len() < target {
            for end in [g, b] {
                match rec.boot(end)? {
                    Ok(v) if end == g => out.good_refs.push(v),
                    Ok(v) => out.bad_refs.push(v),
                    Err(why) => {
                        let word = if end == g { "good" } else { "bad" };
                        return Ok(Err(format!("a boot of the {word} end failed: {why}")));
                    }
                }
            }
        }
        verdict = separation(&out.good_refs, &out.bad_refs, &plan.classifier, looks);
        match &verdict {
            None => break,
            Some(why) if look + 1 < looks => rec.lab.say(&format!(
                "look {} of {looks}: {why}; booting both ends on to {} each",
                look + 1,
                plan.max_ref_boots
            )),
            Some(_) => {}
        }
    }
    Ok(Ok(verdict))
}

/// Rules 2 and 3: builds candidate `c` and boots it until the classifier decides or the step
/// budget is spent; `number` is the step's place in the progress line.
fn run_step<L: Lab>(
    rec: &mut Recorder<'_, L>,
    cl: &Classifier,
    plan: BisectPlan,
    cand: &Candidate,
    c: usize,
    number: usize,
) -> Result<Step, SearchError> {
    let t0 = rec.lab.now();
    let mut values = Vec::new();
    let (verdict, reason) = match rec.build(c)? {
        Err(why) => (Mark::Skip, format!("build failed: {why}")),
        Ok(()) => loop {
            match rec.boot(c)? {
                Err(why) => break (Mark::Skip, format!("boot failed: {why}")),
                Ok(v) => values.push(v),
            }
            match cl.look(&values) {
                StepClass::Good => break (Mark::Good, String::new()),
                StepClass::Bad => break (Mark::Bad, String::new()),
                StepClass::Undecided => {
                    break (
                        Mark::Skip,
                        format!("undecided after {} boots", values.len()),
                    )
                }
                StepClass::Continue if rec.lab.now() - t0 >= plan.step_budget_s => {
                    break (
                        Mark::Skip,
                        format!(
                            "undecided when the step budget of {} s was spent",
                            plan.step_budget_s
                        ),
                    )
                }
                StepClass::Continue => {}
            }
        },
    };
    let sample = Sample::of(&values);
    let step = Step {
        cand: c,
        id: cand.id.clone(),
        subject: cand.subject.clone(),
        ci95: sample.ci95(),
        sample,
        llr: cl.llr(&values),
        values,
        verdict,
        reason,
        wall_s: rec.lab.now() - t0,
    };
    rec.lab.say(&format!(
        "step {number}: {} {} -> {} ({} boots, llr {:.2}{}{})",
        &step.id,
        step.subject,
        verdict.word(),
        step.values.len(),
        step.llr,
        if step.reason.is_empty() { "" } else { "; " },
        step.reason
    ));
    Ok(step)
}

/// Rule 4: the ends again, interleaved; an end not yet decided is booted on, up to the step's
/// boot budget (undecided after 2 boots is no evidence of drift).
fn remeasure_ends<L: Lab>(
    rec: &mut Recorder<'_, L>,
    cl: &Classifier,
    plan: BisectPlan,
    g: usize,
    b: usize,
) -> Result<Drift, SearchError> {
    let (mut ga, mut ba) = (Vec::new(), Vec::new());
    for _ in 0..plan.drift_boots {
        for end in [g, b] {
            if let Ok(v) = rec.boot(end)? {
                if end == g {
                    ga.push(v)
                } else {
                    ba.push(v)
                }
            }
        }
    }
    for (end, vals) in [(g, &mut ga), (b, &mut ba)] {
        while cl.look(vals) == StepClass::Continue {
            match rec.boot(end)? {
                Ok(v) => vals.push(v),
                Err(_) => break,
            }
        }
    }
    let (gc, bc) = (cl.look(&ga), cl.look(&ba));
    Ok(Drift {
        good_again: ga,
        bad_again: ba,
        good_class: gc,
        bad_class: bc,
        drifted: gc != StepClass::Good || bc != StepClass::Bad,
    })
}

/// Rule 3's end: the first bad `hi`, or the skipped candidates in (lo, hi) plus `hi`; the
/// `git bisect` comment lines go to `log`.
fn answer(
    cands: &[Candidate],
    lo: usize,
    hi: usize,
    skipped: &[usize],
    log: &mut Vec<String>,
) -> BisectAnswer {
    let between: Vec<usize> = skipped
        .iter()
        .copied()
        .filter(|s| *s > lo && *s < hi)
        .collect();
    if between.is_empty() {
        log.push(format!(
            "# first bad commit: [{}] {}",
            cands[hi].id, cands[hi].subject
        ));
        return BisectAnswer::Found {
            cand: hi,
            id: cands[hi].id.clone(),
            subject: cands[hi].subject.clone(),
        };
    }
    let mut all = between;
    all.sort_unstable();
    all.push(hi);
    log.push("# only skipped commits left to test".into());
    for c in &all {
        log.push(format!(
            "# possible first bad commit: [{}] {}",
            cands[*c].id, cands[*c].subject
        ));
    }
    BisectAnswer::Ambiguous { cands: all }
}
