//! The step classifier: is a candidate kernel's metric closer to the good or to the bad
//! reference? A truncated sequential probability ratio test (Wald's SPRT), decided boot by boot.
//!
//! Model and rules:
//! 1. The references are n_G boots of the good and n_B boots of the bad kernel (n >= 2 each).
//!    Their means m_G, m_B and standard deviations s_G, s_B are estimated once.
//! 2. The two simple hypotheses are H_good: x ~ N(m_G, sigma_G^2) and H_bad: x ~ N(m_B,
//!    sigma_B^2), each sigma its reference's s * sqrt(1 + 1/n) (roughly, the reference's own
//!    estimation error), floored at `sd_floor` x |m_B - m_G| (a reference whose boots are all
//!    equal, such as a lock wait of exactly 0, would otherwise make one boot infinitely
//!    decisive). The variances are not pooled: on the seed-000 metrics the fixed kernel is
//!    exactly 0 and the broken one spreads with a CV of 25-65 %.
//! 3. Each boot x adds to the log-likelihood ratio (bad over good)
//!    llr(x) = ln(sigma_G / sigma_B) + (x' - m_G)^2 / (2 sigma_G^2) - (x' - m_B)^2 / (2 sigma_B^2),
//!    with x' the boot clipped to the segment between the two means. On that segment llr is increasing in
//!    x, so a boot beyond a reference counts as that reference's mean: one wild boot can not
//!    outweigh the others, and a boot far on the good side never votes bad (which the
//!    unclipped quadratic would do when sigma_G < sigma_B).
//! 4. After at least `min_boots` boots: bad when the sum >= ln((1 - beta) / alpha), good when
//!    <= ln(beta / (1 - alpha)). Wald's bounds then keep P(bad | the candidate is good) <= alpha
//!    and P(good | bad) <= beta, for known parameters; `tests` check the rate by simulation with
//!    estimated references.
//! 5. Not decided after `max_boots` boots (a candidate between the references, or too noisy):
//!    undecided, which bisection turns into `skip`.
//! 6. The references must separate first ([`separation`]): Welch p <= the look's share of
//!    `separate_p` (see [`separation`]), and under each reference's own distribution the
//!    expected llr of `max_boots` boots reaches that reference's bound, so a candidate that is
//!    like one end is decided within the step's budget.

use serde::{Deserialize, Serialize};

/// How steps are decided.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ClassifierPlan {
    /// P(classified bad | good), Wald's bound.
    pub alpha: f64,
    /// P(classified good | bad).
    pub beta: f64,
    pub min_boots: usize,
    pub max_boots: usize,
    /// Lower bound of sigma as a fraction of the gap between the references.
    pub sd_floor: f64,
    /// Welch p the references must reach to separate.
    pub separate_p: f64,
}

impl Default for ClassifierPlan {
    fn default() -> Self {
        ClassifierPlan {
            alpha: 0.01,
            beta: 0.01,
            min_boots: 2,
            max_boots: 6,
            sd_floor: 0.1,
            separate_p: 0.01,
        }
    }
}

/// What one look says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StepClass {
    Good,
    Bad,
    /// Boot again.
    Continue,
    /// Budget spent without a decision.
    Undecided,
}

/// Mean, standard deviation and size of a sample. The mean of no values (a skipped step: its
/// boot failed) is NaN, which JSON writes as `null`; reading reads `null` back as NaN, so a
/// bisect.json with a skipped step can be read again (`lab table bisect-run`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    pub n: usize,
    #[serde(deserialize_with = "nan_if_null")]
    pub mean: f64,
    #[serde(deserialize_with = "nan_if_null")]
    pub sd: f64,
}

fn nan_if_null<'de, D: serde::Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::NAN))
}

impl Sample {
    pub fn of(x: &[f64]) -> Sample {
        let n = x.len();
        let mean = gt_stats::mean(x);
        let sd = if n < 2 {
            0.0
        } else {
            gt_stats::variance(x).sqrt()
        };
        Sample { n, mean, sd }
    }

    /// Half-width of the two-sided 95 % t confidence interval of the mean (gt-stats rule 3:
    /// None below n = 2).
    pub fn ci95(&self) -> Option<f64> {
        gt_stats::mean_half_width_95(self.n, self.sd)
    }
}

/// The classifier built from the two references.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Classifier {
    pub good: Sample,
    pub bad: Sample,
    pub sigma_good: f64,
    pub sigma_bad: f64,
    pub upper: f64,
    pub lower: f64,
    pub plan: ClassifierPlan,
}

/// Why the references do not separate (None: they do). `look` of `looks` (1-based): the
/// references may be measured in more than one batch, each batch a look at the Welch p; the
/// threshold of every look is `separate_p / looks` (Bonferroni), so the chance of calling two
/// equal kernels separated stays <= `separate_p` over all looks.
pub fn separation(
    good: &[f64],
    bad: &[f64],
    plan: &ClassifierPlan,
    looks: usize,
) -> Option<String> {
    if good.len() < 2 || bad.len() < 2 {
        return Some(format!(
            "need at least 2 good and 2 bad reference boots (have {} and {})",
            good.len(),
            bad.len()
        ));
    }
    let c = Classifier::new(good, bad, *plan);
    let gap = (c.bad.mean - c.good.mean).abs();
    let p = gt_stats::welch_p(good, bad).unwrap_or(if gap > 0.0 { 0.0 } else { 1.0 });
    let need = plan.separate_p / looks.max(1) as f64;
    let (eg, eb) = (c.expected_llr(false), c.expected_llr(true));
    let k = plan.max_boots as f64;
    let reach = eg * k <= c.lower && eb * k >= c.upper;
    if p > need || !reach {
        return Some(format!(
            "good {:.4} +- {:.4} (n={}) and bad {:.4} +- {:.4} (n={}) do not separate: Welch p {:.2e} (need <= {:.1e}); expected llr of {} boots {:.1} for a good and {:.1} for a bad candidate (need <= {:.1} and >= {:.1})",
            c.good.mean, c.good.sd, c.good.n, c.bad.mean, c.bad.sd, c.bad.n, p, need,
            plan.max_boots, eg * k, eb * k, c.lower, c.upper
        ));
    }
    None
}

impl Classifier {
    pub fn new(good: &[f64], bad: &[f64], plan: ClassifierPlan) -> Classifier {
        let (g, b) = (Sample::of(good), Sample::of(bad));
        let gap = (b.mean - g.mean).abs();
        let sigma = |s: &Sample| {
            (s.sd * (1.0 + 1.0 / s.n.max(1) as f64).sqrt())
                .max(plan.sd_floor * gap)
                .max(f64::MIN_POSITIVE)
        };
        Classifier {
            good: g,
            bad: b,
            sigma_good: sigma(&g),
            sigma_bad: sigma(&b),
            upper: ((1.0 - plan.beta) / plan.alpha).ln(),
            lower: (plan.beta / (1.0 - plan.alpha)).ln(),
            plan,
        }
    }

    /// One boot's contribution to the log-likelihood ratio, bad over good (rule 3).
    pub fn llr_one(&self, x: f64) -> f64 {
        let (mg, mb) = (self.good.mean, self.bad.mean);
        let (sg, sb) = (self.sigma_good, self.sigma_bad);
        let x = if x.is_nan() {
            (mg + mb) / 2.0
        } else {
            x.clamp(mg.min(mb), mg.max(mb))
        };
        (sg / sb).ln() + (x - mg).powi(2) / (2.0 * sg * sg) - (x - mb).powi(2) / (2.0 * sb * sb)
    }

    /// The expected llr of one boot drawn from the bad (`true`) or the good reference's normal
    /// (rule 2), by the midpoint rule over +-6 sigma.
    pub fn expected_llr(&self, bad: bool) -> f64 {
        let (m, s) = if bad {
            (self.bad.mean, self.sigma_bad)
        } else {
            (self.good.mean, self.sigma_good)
        };
        const N: usize = 2400;
        let h = 12.0 * s / N as f64;
        let norm = 1.0 / (s * (2.0 * std::f64::consts::PI).sqrt());
        (0..N)
            .map(|i| {
                let x = m - 6.0 * s + (i as f64 + 0.5) * h;
                let z = (x - m) / s;
                norm * (-0.5 * z * z).exp() * h * self.llr_one(x)
            })
            .sum()
    }

    /// The value at which one boot is no evidence either way (llr = 0), found by bisection on
    /// the segment between the means (llr increases there, rule 3); None when llr keeps one
    /// sign on the whole segment.
    pub fn indifference_point(&self) -> Option<f64> {
        let (mut lo, mut hi) = (self.good.mean, self.bad.mean);
        if (self.llr_one(lo) > 0.0) == (self.llr_one(hi) > 0.0) {
            return None;
        }
        for _ in 0..200 {
            let mid = (lo + hi) / 2.0;
            if (self.llr_one(mid) > 0.0) == (self.llr_one(hi) > 0.0) {
                hi = mid;
            } else {
                lo = mid;
            }
        }
        Some((lo + hi) / 2.0)
    }

    pub fn llr(&self, xs: &[f64]) -> f64 {
        xs.iter().map(|&x| self.llr_one(x)).sum()
    }

    /// The look after `xs` (rules 4 and 5).
    pub fn look(&self, xs: &[f64]) -> StepClass {
        let n = xs.len();
        let l = self.llr(xs);
        if n >= self.plan.min_boots {
            if l >= self.upper {
                return StepClass::Bad;
            }
            if l <= self.lower {
                return StepClass::Good;
            }
        }
        if n >= self.plan.max_boots {
            StepClass::Undecided
        } else {
            StepClass::Continue
        }
    }
}

#[cfg(test)]
mod tests {
    use gt_stats::testing::Rng;

    use super::*;

    fn until_decided(c: &Classifier, mut draw: impl FnMut() -> f64) -> (StepClass, usize) {
        let mut xs = Vec::new();
        loop {
            xs.push(draw());
            match c.look(&xs) {
                StepClass::Continue => continue,
                d => return (d, xs.len()),
            }
        }
    }

    #[test]
    fn the_seed000_shape_decides_in_min_boots() {
        // Good: exactly 0 every boot; bad: ~11 with CV 24 %.
        let good = [0.0; 4];
        let bad = [11.4, 8.2, 14.0, 10.9];
        let plan = ClassifierPlan::default();
        assert!(separation(&good, &bad, &plan, 1).is_none());
        let c = Classifier::new(&good, &bad, plan);
        assert_eq!(
            c.look(&[0.0]),
            StepClass::Continue,
            "one boot never decides"
        );
        assert_eq!(c.look(&[0.0, 0.0]), StepClass::Good);
        assert_eq!(c.look(&[12.0, 9.5]), StepClass::Bad);
        // A candidate at the point of no evidence is never decided: undecided at the budget.
        // With the good end's spread at its floor that point is near the good end, not halfway.
        let x0 = c.indifference_point().unwrap();
        assert!(x0 > 0.0 && x0 < 11.1 / 2.0, "{x0}");
        assert!(c.llr_one(x0).abs() < 1e-9);
        let mid = vec![x0; plan.max_boots];
        assert_eq!(c.look(&mid[..3]), StepClass::Continue);
        assert_eq!(c.look(&mid), StepClass::Undecided);
        // One wild boot is clipped: it counts as the bad mean, and a boot below the good end
        // counts as the good mean.
        assert_eq!(c.llr_one(1e9), c.llr_one(c.bad.mean));
        assert_eq!(c.llr_one(-50.0), c.llr_one(0.0));
        assert!(c.llr_one(f64::NAN).is_finite());
    }

    #[test]
    fn the_measured_rt_spread_separates_at_8_boots_not_at_4() {
        // qlock_wait_ms_per_kio of the bisection experiment's first tries
        // (experiments/exp-bisect.sh, 2026-12-01): good exactly 0, bad with a CV of 49 %.
        let plan = ClassifierPlan::default();
        let good4 = [0.0; 4];
        let bad4 = [8.85, 16.60, 5.94, 18.66];
        let why = separation(&good4, &bad4, &plan, 1).unwrap();
        assert!(why.contains("Welch p 2.6"), "{why}");
        let good8 = [0.0; 8];
        let bad8 = [8.85, 16.60, 5.94, 18.66, 28.57, 14.76, 10.93, 24.07];
        assert!(separation(&good8, &bad8, &plan, 2).is_none());
        // And a step then needs 2 boots either way.
        let c = Classifier::new(&good8, &bad8, plan);
        assert_eq!(c.look(&[0.0, 0.0]), StepClass::Good);
        assert_eq!(c.look(&[6.0, 7.0]), StepClass::Bad);
        assert!(c.expected_llr(false) < 0.0 && c.expected_llr(true) > 0.0);
    }

    #[test]
    fn llr_is_monotone_between_the_means_with_unequal_sigmas() {
        let c = Classifier::new(
            &[0.0, 0.1, -0.1],
            &[10.0, 20.0, 5.0],
            ClassifierPlan::default(),
        );
        assert!(c.sigma_good < c.sigma_bad);
        let xs: Vec<f64> = (0..=100).map(|i| -20.0 + i as f64 * 0.6).collect();
        for w in xs.windows(2) {
            assert!(c.llr_one(w[1]) >= c.llr_one(w[0]), "{w:?}");
        }
    }

    #[test]
    fn references_that_overlap_do_not_separate() {
        let plan = ClassifierPlan::default();
        let why = separation(&[10.0, 12.0, 9.0], &[11.0, 10.5, 12.5], &plan, 1).unwrap();
        assert!(why.contains("do not separate"), "{why}");
        assert!(separation(&[1.0], &[5.0, 6.0], &plan, 1)
            .unwrap()
            .contains("at least 2"));
        assert!(separation(&[1.0, 1.0], &[1.0, 1.0], &plan, 1).is_some());
        // Bonferroni over looks: a p that passes one look fails the second of two.
        let (g, b) = ([0.0, 0.5, -0.5, 0.2], [2.0, 1.2, 2.9, 1.6]);
        let p = gt_stats::welch_p(&g, &b).unwrap();
        assert!(p < 0.01 && p > 0.005, "{p}");
        assert!(separation(&g, &b, &plan, 1).is_none());
        assert!(separation(&g, &b, &plan, 2).is_some());
    }

    #[test]
    fn misclassification_rate_is_within_the_planned_error_with_estimated_references() {
        // References of 4 boots each drawn afresh every trial (their estimation error included),
        // a 3-sigma gap, alpha = beta = 0.05 so that the rate is measurable in 4000 trials.
        let plan = ClassifierPlan {
            alpha: 0.05,
            beta: 0.05,
            min_boots: 1,
            max_boots: 12,
            ..Default::default()
        };
        let (mg, mb, sd) = (10.0, 16.0, 2.0);
        let mut rng = Rng::new(7);
        let trials = 4000;
        let (mut wrong, mut undecided, mut boots) = (0, 0, 0);
        for t in 0..trials {
            let good: Vec<f64> = (0..4).map(|_| rng.normal(mg, sd)).collect();
            let bad: Vec<f64> = (0..4).map(|_| rng.normal(mb, sd)).collect();
            let c = Classifier::new(&good, &bad, plan);
            let truth_bad = t % 2 == 1;
            let m = if truth_bad { mb } else { mg };
            let (d, n) = until_decided(&c, || rng.normal(m, sd));
            boots += n;
            match (d, truth_bad) {
                (StepClass::Bad, false) | (StepClass::Good, true) => wrong += 1,
                (StepClass::Undecided, _) => undecided += 1,
                _ => {}
            }
        }
        let rate = wrong as f64 / trials as f64;
        assert!(rate <= 0.05, "misclassified {wrong} of {trials}");
        assert!(undecided < trials / 10, "undecided {undecided}");
        let mean_boots = boots as f64 / trials as f64;
        assert!(mean_boots < 4.0, "mean boots {mean_boots}");
    }

    #[test]
    fn a_sample_is_its_mean_and_sd() {
        let s = Sample::of(&[1.0, 2.0, 3.0]);
        assert_eq!((s.n, s.mean, s.sd), (3, 2.0, 1.0));
        assert_eq!(Sample::of(&[1.0]).sd, 0.0);
    }

    #[test]
    fn a_skipped_steps_empty_sample_reads_back() {
        // A step whose boot failed has no values: mean NaN, written as null (bisect.json).
        let text = serde_json::to_string(&Sample::of(&[])).unwrap();
        assert_eq!(text, r#"{"n":0,"mean":null,"sd":0.0}"#);
        let back: Sample = serde_json::from_str(&text).unwrap();
        assert_eq!(back.n, 0);
        assert!(back.mean.is_nan());
        let full: Sample = serde_json::from_str(r#"{"n":2,"mean":1.5,"sd":0.5}"#).unwrap();
        assert_eq!((full.mean, full.sd), (1.5, 0.5));
    }
}
