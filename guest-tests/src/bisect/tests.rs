//! The bisection on synthetic measurement streams: the culprit found at every position, skips
//! honoured, drift detected, budgets respected, an interrupted bisection resumed.

use gt_stats::testing::Rng;

use super::classify::StepClass;
use super::search::*;

/// Candidates >= `culprit` read like the bad kernel. Time advances by `build_s` per real build
/// and `boot_s` per boot.
struct Synth {
    culprit: usize,
    good: (f64, f64),
    bad: (f64, f64),
    rng: Rng,
    clock: f64,
    boot_s: f64,
    build_s: f64,
    unbuildable: Vec<usize>,
    unbootable: Vec<usize>,
    /// Candidates whose value sits at `middle_value`.
    middle: Vec<usize>,
    /// Where a boot is no evidence either way for references like `good` and `bad`.
    middle_value: f64,
    /// From this boot on, every kernel reads like the bad one (the host changed).
    drift_from: Option<usize>,
    abort_at: Option<usize>,
    boots: usize,
}

impl Synth {
    fn new(culprit: usize, seed: u64) -> Synth {
        Synth {
            culprit,
            good: (0.0, 0.0),
            bad: (11.0, 2.6),
            rng: Rng::new(seed),
            clock: 0.0,
            boot_s: 35.0,
            build_s: 13.0,
            unbuildable: vec![],
            unbootable: vec![],
            middle: vec![],
            middle_value: indifferent(&[0.0; 4], &[11.0, 8.4, 13.6, 11.0]),
            drift_from: None,
            abort_at: None,
            boots: 0,
        }
    }
}

impl Lab for Synth {
    fn build(&mut self, c: usize) -> Result<(), Failure> {
        self.clock += self.build_s;
        if self.unbuildable.contains(&c) {
            return Err(Failure::Skip("make bzImage failed (see build.log)".into()));
        }
        Ok(())
    }
    fn boot(&mut self, c: usize) -> Result<f64, Failure> {
        if self.abort_at == Some(self.boots) {
            return Err(Failure::Abort("interrupted".into()));
        }
        self.boots += 1;
        self.clock += self.boot_s;
        if self.unbootable.contains(&c) {
            return Err(Failure::Skip("guest never reached the agent".into()));
        }
        let (m, s) = if self.drift_from.is_some_and(|d| self.boots > d) || c >= self.culprit {
            self.bad
        } else if self.middle.contains(&c) {
            // Steadily where a boot says nothing (a noisy one may be decided either way).
            (self.middle_value, 0.02)
        } else {
            self.good
        };
        Ok(self.rng.normal(m, s).max(0.0))
    }
    fn now(&mut self) -> f64 {
        self.clock
    }
}

/// The classifier's point of no evidence for these references.
fn indifferent(good: &[f64], bad: &[f64]) -> f64 {
    super::Classifier::new(good, bad, super::ClassifierPlan::default())
        .indifference_point()
        .unwrap()
}

fn cands(n: usize) -> Vec<Candidate> {
    (0..n)
        .map(|i| Candidate {
            id: format!("{i:040x}"),
            subject: format!("commit {i}"),
        })
        .collect()
}

fn run(lab: &mut Synth, n: usize, plan: BisectPlan) -> BisectOutcome {
    bisect(&cands(n), plan, lab, vec![], &mut |_| {}).unwrap()
}

fn median(mut v: Vec<usize>) -> f64 {
    v.sort_unstable();
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2] as f64
    } else {
        (v[n / 2 - 1] + v[n / 2]) as f64 / 2.0
    }
}

#[test]
fn finds_the_culprit_at_every_position_within_the_step_and_boot_goals() {
    // Never a wrong answer. References drawn from 4 boots can fail to separate by chance (a
    // bad sample with a wide spread): then the bisection stops and says so, which is allowed
    // here for at most 2 of the 31 positions.
    let n = 32;
    let mut stopped = 0;
    for culprit in 1..n {
        let mut lab = Synth::new(culprit, culprit as u64);
        let o = run(&mut lab, n, BisectPlan::default());
        if let BisectAnswer::Stopped { why } = &o.answer {
            assert!(why.contains("do not separate"), "{why}");
            stopped += 1;
            continue;
        }
        assert_eq!(
            o.answer,
            BisectAnswer::Found {
                cand: culprit,
                id: format!("{culprit:040x}"),
                subject: format!("commit {culprit}")
            },
            "culprit {culprit}: {:?}",
            o.steps
        );
        let bound = ((n - 1) as f64).log2().ceil() as usize + 2;
        assert!(o.decided_steps() <= bound, "{} steps", o.decided_steps());
        let boots: Vec<usize> = o.steps.iter().map(|s| s.values.len()).collect();
        assert!(median(boots) <= 4.0);
        assert!(
            !o.drift.as_ref().unwrap().drifted,
            "{:?} {:?}",
            o.drift,
            o.classifier
        );
        assert!(o
            .log
            .iter()
            .any(|l| l == &format!("git bisect bad {culprit:040x}")));
        assert_eq!(o.log[0], "git bisect start");
        assert!(o.log.last().unwrap().starts_with("# first bad commit: ["));
    }
    assert!(stopped <= 2, "{stopped} of 31 stopped");
}

#[test]
fn works_with_noisy_good_references_too() {
    for culprit in [3, 17, 30] {
        let mut lab = Synth::new(culprit, 99 + culprit as u64);
        lab.good = (3.0, 1.0);
        let o = run(&mut lab, 32, BisectPlan::default());
        assert!(
            matches!(o.answer, BisectAnswer::Found { cand, .. } if cand == culprit),
            "{:?}",
            o.answer
        );
    }
}

#[test]
fn build_and_boot_failures_are_skipped_and_logged() {
    let mut lab = Synth::new(20, 1);
    // Steps: 15 good, 23 does not build, 22 bad, 18 does not boot, 19 good, 20 bad.
    lab.unbuildable = vec![23];
    lab.unbootable = vec![18];
    let o = run(&mut lab, 32, BisectPlan::default());
    assert!(
        matches!(o.answer, BisectAnswer::Found { cand: 20, .. }),
        "{:?}",
        o.answer
    );
    let skipped: Vec<usize> = o
        .steps
        .iter()
        .filter(|s| s.verdict == Mark::Skip)
        .map(|s| s.cand)
        .collect();
    assert_eq!(skipped, [23, 18]);
    for s in o.steps.iter().filter(|s| s.verdict == Mark::Skip) {
        assert!(o.log.contains(&format!("git bisect skip {}", s.id)));
        assert!(s.reason.contains("failed"), "{}", s.reason);
    }
    // The culprit itself does not build: the answer names it among the possible ones.
    let mut lab = Synth::new(20, 2);
    lab.unbuildable = vec![20];
    let o = run(&mut lab, 32, BisectPlan::default());
    assert_eq!(
        o.answer,
        BisectAnswer::Ambiguous {
            cands: vec![20, 21]
        }
    );
    assert!(o
        .log
        .iter()
        .any(|l| l.contains("only skipped commits left")));
}

#[test]
fn a_candidate_between_the_references_is_skipped_within_the_boot_and_time_budgets() {
    // The first step (15) reads at the point of no evidence of the references this seed
    // measures (a first pass learns them; the second, same seed, measures the same ones):
    // skipped; the next (16) goes on.
    let plan = BisectPlan::default();
    let refs = run(&mut Synth::new(25, 3), 32, plan).classifier.unwrap();
    let mut lab = Synth::new(25, 3);
    lab.middle = vec![15];
    lab.middle_value = refs.indifference_point().unwrap();
    let o = run(&mut lab, 32, plan);
    let s = o.steps.iter().find(|s| s.cand == 15).unwrap();
    assert_eq!(s.verdict, Mark::Skip);
    assert!(s.values.len() <= plan.classifier.max_boots);
    assert!(matches!(o.answer, BisectAnswer::Found { cand: 25, .. }));
    // A time budget of 100 s with 35 s boots and a 13 s build: at most 3 boots.
    let mut lab = Synth::new(25, 3);
    lab.middle = vec![15];
    lab.middle_value = refs.indifference_point().unwrap();
    let o = run(
        &mut lab,
        32,
        BisectPlan {
            step_budget_s: 100.0,
            ..plan
        },
    );
    let s = o.steps.iter().find(|s| s.cand == 15).unwrap();
    assert_eq!(s.verdict, Mark::Skip);
    assert!(s.values.len() <= 3, "{} boots", s.values.len());
    assert!(s.reason.contains("budget"), "{}", s.reason);
    assert!(o.steps.iter().all(|s| s.wall_s <= 100.0 + 35.0 + 13.0));
}

#[test]
fn host_drift_is_detected_by_the_final_re_measure() {
    let mut lab = Synth::new(10, 4);
    // Everything reads bad from the 13th boot on: the steps after it go wrong, and the
    // re-measured good end is no longer good.
    lab.drift_from = Some(12);
    let o = run(&mut lab, 32, BisectPlan::default());
    let d = o.drift.unwrap();
    assert!(d.drifted);
    assert_ne!(d.good_class, StepClass::Good);
    assert!(o.log.last().unwrap().contains("host drift"));
}

#[test]
fn references_that_do_not_separate_stop_the_bisection() {
    let mut lab = Synth::new(40, 5); // no candidate is bad: the bad end reads good
    lab.good = (10.0, 2.0);
    let o = run(&mut lab, 32, BisectPlan::default());
    assert!(matches!(&o.answer, BisectAnswer::Stopped { why } if why.contains("do not separate")));
    assert!(o.steps.is_empty());
    let mut lab = Synth::new(5, 5);
    lab.unbuildable = vec![31];
    let o = run(&mut lab, 32, BisectPlan::default());
    assert!(
        matches!(&o.answer, BisectAnswer::Stopped { why } if why.contains("bad end does not build"))
    );
}

#[test]
fn an_interrupted_bisection_resumes_from_its_journal_without_repeating_work() {
    let mut saved = Vec::new();
    let mut lab = Synth::new(13, 6);
    lab.abort_at = Some(14);
    let e = bisect(
        &cands(32),
        BisectPlan::default(),
        &mut lab,
        vec![],
        &mut |ev| saved = ev.to_vec(),
    )
    .unwrap_err();
    assert!(matches!(e, SearchError::Aborted(_)));
    let boots_saved = saved
        .iter()
        .filter(|e| matches!(e, Event::Boot { .. }))
        .count();
    assert_eq!(boots_saved, 14);
    let mut lab2 = Synth::new(13, 7);
    let mut all = Vec::new();
    let o = bisect(
        &cands(32),
        BisectPlan::default(),
        &mut lab2,
        saved.clone(),
        &mut |ev| all = ev.to_vec(),
    )
    .unwrap();
    assert!(matches!(o.answer, BisectAnswer::Found { cand: 13, .. }));
    let boots_all = all
        .iter()
        .filter(|e| matches!(e, Event::Boot { .. }))
        .count();
    assert_eq!(
        lab2.boots,
        boots_all - boots_saved,
        "replayed boots are not booted again"
    );
    assert_eq!(&all[..saved.len()], &saved[..]);
    // A journal from another bisection is refused.
    let mut lab3 = Synth::new(13, 8);
    let mut wrong = saved.clone();
    wrong[0] = Event::Build {
        cand: 5,
        ok: true,
        note: String::new(),
    };
    let e = bisect(
        &cands(32),
        BisectPlan::default(),
        &mut lab3,
        wrong,
        &mut |_| {},
    )
    .unwrap_err();
    assert!(matches!(e, SearchError::Diverged { at: 0, .. }), "{e:?}");
}

#[test]
fn next_candidate_is_the_middle_and_avoids_skips() {
    assert_eq!(next_candidate(0, 31, &[]), Some(15));
    assert_eq!(next_candidate(0, 31, &[15]), Some(16));
    assert_eq!(next_candidate(0, 31, &[15, 16]), Some(14));
    assert_eq!(next_candidate(3, 4, &[]), None);
    assert_eq!(next_candidate(3, 5, &[4]), None);
}

#[test]
fn judge_exits_as_git_bisect_run_expects() {
    let good = [0.0, 0.0, 0.0, 0.0];
    let bad = [11.0, 9.0, 13.5, 10.2];
    let plan = super::ClassifierPlan::default();
    // Synth's candidate 0 is bad when the culprit is 0, good otherwise.
    let (code, why) = super::judge(&good, &bad, plan, &mut Synth::new(0, 1));
    assert_eq!(code, 1, "{why}");
    let (code, why) = super::judge(&good, &bad, plan, &mut Synth::new(1, 1));
    assert_eq!(code, 0, "{why}");
    let mut lab = Synth::new(1, 1);
    lab.unbuildable = vec![0];
    assert_eq!(super::judge(&good, &bad, plan, &mut lab).0, 125);
    let mut lab = Synth::new(1, 1);
    lab.unbootable = vec![0];
    assert_eq!(super::judge(&good, &bad, plan, &mut lab).0, 125);
    let mut lab = Synth::new(1, 1);
    lab.middle = vec![0];
    lab.middle_value = indifferent(&good, &bad);
    let (code, why) = super::judge(&good, &bad, plan, &mut lab);
    assert_eq!(code, 125, "{why}");
    assert_eq!(lab.boots, plan.max_boots);
    // References that do not separate: cannot decide.
    assert_eq!(
        super::judge(&good, &good, plan, &mut Synth::new(1, 1)).0,
        125
    );
}
