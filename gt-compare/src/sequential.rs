//! Paired tests and a sequential decision rule that controls its error rate.
//!
//! Contract:
//! 1. `paired_t_p` (`gt-stats`', re-exported) and `wilcoxon_signed_rank_p` take per-pair
//!    differences (A_i - B_i, A and B booted at the same time, so host noise hits both); `None`
//!    where the test is undefined.
//! 2. [`Sequential`] decides "A and B differ" at overall level `alpha` however many times it is
//!    asked: look `k` (after `n_k` boots per kernel) rejects only if the fixed-n p-value is below
//!    `alpha*(t_k) - alpha*(t_{k-1})`, the increment of a Lan-DeMets O'Brien-Fleming-type
//!    spending function at information fraction `t = n / max_n`. The increments sum to at most
//!    `alpha` over all looks, so by the union bound the chance of any false rejection is at most
//!    `alpha`, whatever the correlation between looks (conservative, never anti-conservative).
//!    Repeated peeking at an unadjusted p-value has no such bound.
//! 3. Time and randomness are never read here: everything is a function of its inputs.

use serde::{Deserialize, Serialize};
use statrs::distribution::{ContinuousCDF, Normal};

/// Two-sided Wilcoxon signed-rank test on differences: exact (all 2^n sign patterns, by
/// counting) for n <= 30 after dropping zeros, normal approximation above. Ties get mid-ranks;
/// the exact distribution is then over doubled mid-ranks.
pub fn wilcoxon_signed_rank_p(d: &[f64]) -> Option<f64> {
    let mut v: Vec<f64> = d
        .iter()
        .copied()
        .filter(|x| x.is_finite() && *x != 0.0)
        .collect();
    let n = v.len();
    if n == 0 {
        return None;
    }
    v.sort_by(|a, b| a.abs().total_cmp(&b.abs()));
    // doubled mid-ranks (integers)
    let mut r2 = vec![0u64; n];
    let mut i = 0;
    while i < n {
        let mut j = i;
        while j + 1 < n && v[j + 1].abs() == v[i].abs() {
            j += 1;
        }
        let mid2 = (i + 1 + j + 1) as u64; // 2 * mean rank of i..=j
        for r in r2.iter_mut().take(j + 1).skip(i) {
            *r = mid2;
        }
        i = j + 1;
    }
    let w_plus2: u64 = v
        .iter()
        .zip(&r2)
        .filter(|(x, _)| **x > 0.0)
        .map(|(_, r)| *r)
        .sum();
    let total2: u64 = r2.iter().sum();
    if n <= 30 {
        // counts[s] = number of sign patterns with doubled W+ = s
        let mut counts = vec![0f64; total2 as usize + 1];
        counts[0] = 1.0;
        for &r in &r2 {
            for s in (r as usize..counts.len()).rev() {
                counts[s] += counts[s - r as usize];
            }
        }
        let all: f64 = counts.iter().sum();
        let lo = w_plus2.min(total2 - w_plus2) as usize;
        let tail: f64 = counts[..=lo].iter().sum::<f64>() / all;
        return Some((2.0 * tail).min(1.0));
    }
    let nf = n as f64;
    let mu = nf * (nf + 1.0) / 4.0;
    let sd = (nf * (nf + 1.0) * (2.0 * nf + 1.0) / 24.0).sqrt();
    let z = (w_plus2 as f64 / 2.0 - mu) / sd;
    let norm = Normal::new(0.0, 1.0).ok()?;
    Some((2.0 * norm.cdf(-z.abs())).min(1.0))
}

/// Cumulative type-I error spent at information fraction `t` (Lan-DeMets, O'Brien-Fleming
/// type): `2 - 2 Phi(z_{1-alpha/2} / sqrt(t))`.
pub fn obf_spent(alpha: f64, t: f64) -> f64 {
    if t <= 0.0 {
        return 0.0;
    }
    let norm = Normal::new(0.0, 1.0).expect("standard normal");
    let z = norm.inverse_cdf(1.0 - alpha / 2.0);
    (2.0 - 2.0 * norm.cdf(z / t.min(1.0).sqrt())).min(alpha)
}

/// What a look decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    /// Boot again.
    Continue,
    /// The kernels differ at the plan's overall level.
    Differ,
    /// The budget is spent without a rejection.
    Undecided,
}

impl Decision {
    /// The decision as index.json writes it (serde's snake_case name).
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Continue => "continue",
            Decision::Differ => "differ",
            Decision::Undecided => "undecided",
        }
    }
}

/// One look of a sequential plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Look {
    /// Boots per kernel at this look.
    pub n: usize,
    pub p: Option<f64>,
    /// The level this look tests at.
    pub nominal_alpha: f64,
    pub decision: Decision,
}

/// A sequential plan: overall `alpha`, at most `max_n` boots per kernel, first look at
/// `min_n`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sequential {
    pub alpha: f64,
    pub min_n: usize,
    pub max_n: usize,
    pub looks: Vec<Look>,
}

/// What the sequential test saw and decided: index.json's `sequential` record (written by the
/// matrix, read back by the report).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SequentialRecord {
    pub metric: String,
    pub test: String,
    pub plan: Sequential,
    /// Repeats (boots per kernel) when it stopped.
    pub boots_per_kernel: usize,
}

impl Sequential {
    pub fn new(alpha: f64, min_n: usize, max_n: usize) -> Self {
        Self {
            alpha,
            min_n: min_n.max(2),
            max_n: max_n.max(min_n.max(2)),
            looks: Vec::new(),
        }
    }

    /// The level a look at `n` boots per kernel tests at, given the looks already made.
    pub fn nominal(&self, n: usize) -> f64 {
        let prev = self.looks.last().map_or(0.0, |l| {
            obf_spent(self.alpha, l.n as f64 / self.max_n as f64)
        });
        let now = obf_spent(self.alpha, n as f64 / self.max_n as f64);
        (now - prev).max(0.0)
    }

    /// Records a look at `n` boots per kernel with fixed-n p-value `p`.
    pub fn look(&mut self, n: usize, p: Option<f64>) -> Decision {
        if self.decided() {
            return self.looks.last().map_or(Decision::Continue, |l| l.decision);
        }
        if n < self.min_n || self.looks.last().is_some_and(|l| l.n >= n) {
            return Decision::Continue;
        }
        let nominal_alpha = self.nominal(n);
        let decision = match p {
            Some(p) if p < nominal_alpha => Decision::Differ,
            _ if n >= self.max_n => Decision::Undecided,
            _ => Decision::Continue,
        };
        self.looks.push(Look {
            n,
            p,
            nominal_alpha,
            decision,
        });
        decision
    }

    pub fn decided(&self) -> bool {
        self.looks
            .last()
            .is_some_and(|l| l.decision != Decision::Continue)
    }

    /// Total level spent so far (at most `alpha`).
    pub fn spent(&self) -> f64 {
        self.looks.iter().map(|l| l.nominal_alpha).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gt_stats::welch_p;

    #[test]
    fn wilcoxon_exact_small_samples() {
        // All 6 differences positive: p = 2 / 2^6 = 0.03125 (scipy.stats.wilcoxon, exact).
        let p = wilcoxon_signed_rank_p(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]).unwrap();
        assert!((p - 0.031_25).abs() < 1e-12);
        // W+ = 1 of 10 (n = 4: signs - + + +, ranks 1..4): two-sided p = 2 * 2/16 = 0.25
        let p = wilcoxon_signed_rank_p(&[-1.0, 2.0, 3.0, 4.0]).unwrap();
        assert!((p - 0.25).abs() < 1e-12);
        assert_eq!(wilcoxon_signed_rank_p(&[0.0, 0.0]), None);
        // ties and large n do not panic
        let v: Vec<f64> = (0..40).map(|i| (i % 5) as f64 - 1.5).collect();
        assert!(wilcoxon_signed_rank_p(&v).is_some());
    }

    #[test]
    fn spending_is_monotone_and_bounded() {
        let a = 0.01;
        let mut last = 0.0;
        for k in 1..=10 {
            let s = obf_spent(a, k as f64 / 10.0);
            assert!(s >= last && s <= a + 1e-15);
            last = s;
        }
        assert!((obf_spent(a, 1.0) - a).abs() < 1e-9);
        let mut s = Sequential::new(a, 3, 10);
        for n in 3..=10 {
            s.look(n, Some(0.5));
        }
        assert!(s.spent() <= a + 1e-12);
        assert_eq!(s.looks.last().unwrap().decision, Decision::Undecided);
    }

    #[test]
    fn stops_early_on_a_large_effect_and_respects_the_budget() {
        let mut s = Sequential::new(0.001, 3, 12);
        let a = [9.1, 8.4, 10.2, 9.8, 8.9, 9.5, 9.9, 10.4];
        let b = [0.0, 0.1, 0.0, 0.05, 0.0, 0.0, 0.1, 0.0];
        let mut decided_at = None;
        for n in 2..=a.len() {
            if s.look(n, welch_p(&a[..n], &b[..n])) == Decision::Differ {
                decided_at = Some(n);
                break;
            }
        }
        let n = decided_at.expect("a 90x effect is decided within 8 boots");
        assert!(n < 8, "decided at {n}");
        // Looks after the decision change nothing.
        assert_eq!(s.look(n + 1, Some(0.9)), Decision::Differ);
    }

    /// Under H0 (both kernels from one distribution) the false-rejection rate of the whole
    /// sequential procedure stays at or below alpha; naive peeking at p < alpha exceeds it.
    #[test]
    fn type_one_error_is_controlled_where_naive_peeking_is_not() {
        // Seed 1: the state this simulation has always started from.
        let mut rng = gt_stats::testing::Rng::new(1);
        let (alpha, sims, max_n) = (0.05, 2000, 10);
        let (mut seq_rej, mut naive_rej) = (0, 0);
        for _ in 0..sims {
            let a: Vec<f64> = (0..max_n).map(|_| rng.normal(10.0, 1.0)).collect();
            let b: Vec<f64> = (0..max_n).map(|_| rng.normal(10.0, 1.0)).collect();
            let mut s = Sequential::new(alpha, 3, max_n);
            let mut naive = false;
            for n in 3..=max_n {
                let p = welch_p(&a[..n], &b[..n]);
                naive |= p.is_some_and(|p| p < alpha);
                if s.look(n, p) != Decision::Continue {
                    break;
                }
            }
            seq_rej += usize::from(s.looks.last().unwrap().decision == Decision::Differ);
            naive_rej += usize::from(naive);
        }
        let (seq, naive) = (seq_rej as f64 / sims as f64, naive_rej as f64 / sims as f64);
        assert!(seq <= alpha + 0.01, "sequential rejects {seq}");
        assert!(naive > alpha + 0.03, "naive peeking rejects only {naive}");
    }
}
