//! The step classifier: is a candidate kernel's metric closer to the good or to the bad
//! reference? A truncated sequential probability ratio test (Wald's SPRT), decided boot by boot.
//!
//! Model and rules:
//! 1. The references are n_G boots of the good and n_B boots of the bad kernel (n >= 2 each).
//!    Their means m_G, m_B and standard deviations s_G, s_B are estimated once.
//! 2. The two simple hypotheses are H_good: x ~ N(m_G, sigma^2) and H_bad: x ~ N(m_B, sigma^2)
//!    with one common sigma = max(s_G, s_B) * sqrt(1 + 1/min(n_G, n_B)), floored at
//!    `sd_floor` x |m_B - m_G| (a reference whose boots are all equal, such as a lock-wait of
//!    exactly 0, would otherwise make one boot infinitely decisive). The inflation accounts,
//!    roughly, for the references' own estimation error.
//! 3. Each boot x adds llr(x) = (m_B - m_G) (x' - (m_G + m_B)/2) / sigma^2 to the log-likelihood
//!    ratio (bad over good), where x' is x clipped to [lo - gap/2, hi + gap/2] around the two
//!    means (one wild boot counts at most like a boot half a gap beyond a reference).
//! 4. After at least `min_boots` boots: bad when the sum >= ln((1 - beta) / alpha), good when
//!    <= ln(beta / (1 - alpha)). Wald's bounds then keep P(bad | the candidate is good) <= alpha
//!    and P(good | bad) <= beta, for known parameters; `tests` check the rate by simulation with
//!    estimated references.
//! 5. Not decided after `max_boots` boots (a candidate between the references, or too noisy):
//!    undecided, which bisection turns into `skip`.
//! 6. The references must separate first ([`separation`]): Welch p <= `separate_p` and the gap at
//!    least 2 sigma; else there is nothing to bisect.

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
pub enum Class {
    Good,
    Bad,
    /// Boot again.
    Continue,
    /// Budget spent without a decision.
    Undecided,
}

/// Mean, standard deviation and size of a sample.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    pub n: usize,
    pub mean: f64,
    pub sd: f64,
}

impl Sample {
    pub fn of(x: &[f64]) -> Sample {
        let n = x.len();
        let mean = if n == 0 {
            f64::NAN
        } else {
            x.iter().sum::<f64>() / n as f64
        };
        let sd = if n < 2 {
            0.0
        } else {
            (x.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1) as f64).sqrt()
        };
        Sample { n, mean, sd }
    }

    /// Half-width of the two-sided 95 % t confidence interval of the mean (None below n = 2).
    pub fn ci95(&self) -> Option<f64> {
        use statrs::distribution::{ContinuousCDF, StudentsT};
        if self.n < 2 {
            return None;
        }
        let t = StudentsT::new(0.0, 1.0, (self.n - 1) as f64).ok()?;
        Some(t.inverse_cdf(0.975) * self.sd / (self.n as f64).sqrt())
    }
}

/// The classifier built from the two references.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Classifier {
    pub good: Sample,
    pub bad: Sample,
    pub sigma: f64,
    pub upper: f64,
    pub lower: f64,
    pub plan: ClassifierPlan,
}

/// Why the references do not separate (None: they do).
pub fn separation(good: &[f64], bad: &[f64], plan: &ClassifierPlan) -> Option<String> {
    if good.len() < 2 || bad.len() < 2 {
        return Some(format!(
            "need at least 2 good and 2 bad reference boots (have {} and {})",
            good.len(),
            bad.len()
        ));
    }
    let c = Classifier::new(good, bad, *plan);
    let gap = (c.bad.mean - c.good.mean).abs();
    let p = crate::compare::welch_p(good, bad).unwrap_or(if gap > 0.0 { 0.0 } else { 1.0 });
    if p > plan.separate_p || gap < 2.0 * c.sigma {
        return Some(format!(
            "good {:.4} +- {:.4} (n={}) and bad {:.4} +- {:.4} (n={}) do not separate: Welch p {:.2e} (need <= {:.0e}), gap {:.2} sigma (need >= 2)",
            c.good.mean, c.good.sd, c.good.n, c.bad.mean, c.bad.sd, c.bad.n, p, plan.separate_p,
            gap / c.sigma
        ));
    }
    None
}

impl Classifier {
    pub fn new(good: &[f64], bad: &[f64], plan: ClassifierPlan) -> Classifier {
        let (g, b) = (Sample::of(good), Sample::of(bad));
        let gap = (b.mean - g.mean).abs();
        let n = g.n.min(b.n).max(1) as f64;
        let sigma = (g.sd.max(b.sd) * (1.0 + 1.0 / n).sqrt())
            .max(plan.sd_floor * gap)
            .max(f64::MIN_POSITIVE);
        Classifier {
            good: g,
            bad: b,
            sigma,
            upper: ((1.0 - plan.beta) / plan.alpha).ln(),
            lower: (plan.beta / (1.0 - plan.alpha)).ln(),
            plan,
        }
    }

    /// One boot's contribution to the log-likelihood ratio, bad over good (rule 3).
    pub fn llr_one(&self, x: f64) -> f64 {
        let (mg, mb) = (self.good.mean, self.bad.mean);
        let gap = (mb - mg).abs();
        let x = x.clamp(mg.min(mb) - gap / 2.0, mg.max(mb) + gap / 2.0);
        (mb - mg) * (x - (mg + mb) / 2.0) / (self.sigma * self.sigma)
    }

    pub fn llr(&self, xs: &[f64]) -> f64 {
        xs.iter().map(|&x| self.llr_one(x)).sum()
    }

    /// The look after `xs` (rules 4 and 5).
    pub fn look(&self, xs: &[f64]) -> Class {
        let n = xs.len();
        let l = self.llr(xs);
        if n >= self.plan.min_boots {
            if l >= self.upper {
                return Class::Bad;
            }
            if l <= self.lower {
                return Class::Good;
            }
        }
        if n >= self.plan.max_boots {
            Class::Undecided
        } else {
            Class::Continue
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A small deterministic generator (xorshift + Box-Muller), so the simulation is repeatable.
    pub(crate) struct Rng(u64);
    impl Rng {
        pub(crate) fn new(seed: u64) -> Rng {
            Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
        }
        fn uniform(&mut self) -> f64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            ((self.0 >> 11) as f64 + 0.5) / (1u64 << 53) as f64
        }
        pub(crate) fn normal(&mut self, mean: f64, sd: f64) -> f64 {
            let (u, v) = (self.uniform(), self.uniform());
            mean + sd * (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
        }
    }

    fn until_decided(c: &Classifier, mut draw: impl FnMut() -> f64) -> (Class, usize) {
        let mut xs = Vec::new();
        loop {
            xs.push(draw());
            match c.look(&xs) {
                Class::Continue => continue,
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
        assert!(separation(&good, &bad, &plan).is_none());
        let c = Classifier::new(&good, &bad, plan);
        assert_eq!(c.look(&[0.0]), Class::Continue, "one boot never decides");
        assert_eq!(c.look(&[0.0, 0.0]), Class::Good);
        assert_eq!(c.look(&[12.0, 9.5]), Class::Bad);
        // A candidate halfway between the references is never decided: undecided at the budget.
        let mid = vec![5.7; plan.max_boots];
        assert_eq!(c.look(&mid[..3]), Class::Continue);
        assert_eq!(c.look(&mid), Class::Undecided);
        // One wild boot is clipped: it cannot outweigh a clear good boot by itself.
        assert!(c.llr_one(1e9) <= c.llr_one(11.4 + 5.7) + 1e-9);
    }

    #[test]
    fn references_that_overlap_do_not_separate() {
        let plan = ClassifierPlan::default();
        let why = separation(&[10.0, 12.0, 9.0], &[11.0, 10.5, 12.5], &plan).unwrap();
        assert!(why.contains("do not separate"), "{why}");
        assert!(separation(&[1.0], &[5.0, 6.0], &plan)
            .unwrap()
            .contains("at least 2"));
        assert!(separation(&[1.0, 1.0], &[1.0, 1.0], &plan).is_some());
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
                (Class::Bad, false) | (Class::Good, true) => wrong += 1,
                (Class::Undecided, _) => undecided += 1,
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
    fn sample_ci_matches_the_t_table() {
        let s = Sample::of(&[1.0, 2.0, 3.0]);
        assert_eq!(s.mean, 2.0);
        assert!((s.sd - 1.0).abs() < 1e-12);
        // t(0.975, 2) = 4.3027
        assert!((s.ci95().unwrap() - 4.3027 / 3f64.sqrt()).abs() < 1e-3);
        assert!(Sample::of(&[1.0]).ci95().is_none());
    }
}
