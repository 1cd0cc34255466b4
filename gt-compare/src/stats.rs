//! Sample summaries and the rank tests.
//!
//! - 95 % confidence interval of the mean: Student's t with n - 1 degrees of freedom
//!   (`gt_stats::mean_half_width_95`).
//! - Welch's t-test, the mean and the variance are `gt-stats`'s, re-exported here.
//! - Mann-Whitney U: two-sided. Exact (the full null distribution of U, counted) when there are
//!   no ties and n1 + n2 <= [`MWU_EXACT_MAX_N`]; otherwise the normal approximation with tie
//!   correction and continuity correction. This is what scipy's `mannwhitneyu` computes with
//!   `method="exact"` and `method="asymptotic"` respectively; the tests check both against it.

use serde::{Deserialize, Serialize};
use statrs::distribution::{ContinuousCDF, Normal};

use gt_results::metrics::{median_sorted, quantile_sorted};
use gt_stats::{mean, variance};

/// Largest n1 + n2 for which the exact Mann-Whitney distribution is used.
pub const MWU_EXACT_MAX_N: usize = 60;

/// Summary of one sample.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub n: usize,
    pub median: f64,
    pub mean: f64,
    /// Sample standard deviation (n - 1); 0 for n = 1.
    pub sd: f64,
    /// sd / mean (None when the mean is 0).
    pub cv: Option<f64>,
    /// 95 % CI of the mean (None for n < 2).
    pub ci95: Option<(f64, f64)>,
    pub min: f64,
    pub max: f64,
    /// First and third quartiles (linear interpolation, numpy's default).
    pub q1: f64,
    pub q3: f64,
}

/// Summarises a sample; None when it is empty or holds a non-finite value.
pub fn summarize(x: &[f64]) -> Option<Summary> {
    if x.is_empty() || x.iter().any(|v| !v.is_finite()) {
        return None;
    }
    let mut s = x.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    let m = mean(&s);
    let sd = if n > 1 { variance(&s).sqrt() } else { 0.0 };
    let ci95 = gt_stats::mean_half_width_95(n, sd).map(|h| (m - h, m + h));
    Some(Summary {
        n,
        median: median_sorted(&s),
        mean: m,
        sd,
        cv: (m != 0.0).then(|| sd / m.abs()),
        ci95,
        min: s[0],
        max: s[n - 1],
        q1: quantile_sorted(&s, 0.25),
        q3: quantile_sorted(&s, 0.75),
    })
}

/// Which Mann-Whitney computation was used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MwuMethod {
    Exact,
    Normal,
}

/// A Mann-Whitney U test result. `u` is the statistic of the first sample.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Mwu {
    pub u: f64,
    pub p: f64,
    pub method: MwuMethod,
}

/// Mid-ranks (1-based) of the pooled sample, and the tie groups' sizes.
fn ranks(pooled: &[f64]) -> (Vec<f64>, Vec<usize>) {
    let mut idx: Vec<usize> = (0..pooled.len()).collect();
    idx.sort_by(|&i, &j| pooled[i].total_cmp(&pooled[j]));
    let mut r = vec![0.0; pooled.len()];
    let mut ties = Vec::new();
    let mut i = 0;
    while i < idx.len() {
        let mut j = i;
        while j + 1 < idx.len() && pooled[idx[j + 1]] == pooled[idx[i]] {
            j += 1;
        }
        let mid = (i + j) as f64 / 2.0 + 1.0;
        for &k in &idx[i..=j] {
            r[k] = mid;
        }
        if j > i {
            ties.push(j - i + 1);
        }
        i = j + 1;
    }
    (r, ties)
}

/// Two-sided Mann-Whitney U test (None when either sample is empty or non-finite).
pub fn mann_whitney(a: &[f64], b: &[f64]) -> Option<Mwu> {
    if a.is_empty() || b.is_empty() || a.iter().chain(b).any(|v| !v.is_finite()) {
        return None;
    }
    let (n1, n2) = (a.len(), b.len());
    let pooled: Vec<f64> = a.iter().chain(b).copied().collect();
    let (r, ties) = ranks(&pooled);
    let r1: f64 = r[..n1].iter().sum();
    let u1 = r1 - (n1 * (n1 + 1)) as f64 / 2.0;
    let nn = (n1 * n2) as f64;
    let u_hi = u1.max(nn - u1);
    if ties.is_empty() && n1 + n2 <= MWU_EXACT_MAX_N {
        let p = 2.0 * exact_sf(u_hi.round() as usize, n1, n2);
        return Some(Mwu {
            u: u1,
            p: p.min(1.0),
            method: MwuMethod::Exact,
        });
    }
    let n = (n1 + n2) as f64;
    let tie_sum: f64 = ties.iter().map(|&t| (t * t * t - t) as f64).sum();
    let var = nn / 12.0 * ((n + 1.0) - tie_sum / (n * (n - 1.0)));
    let p = if var <= 0.0 {
        1.0 // every value equal
    } else {
        let z = (u_hi - nn / 2.0 - 0.5) / var.sqrt();
        let std = Normal::new(0.0, 1.0).ok()?;
        (2.0 * (1.0 - std.cdf(z))).min(1.0)
    };
    Some(Mwu {
        u: u1,
        p,
        method: MwuMethod::Normal,
    })
}

/// P(U >= u) under H0 for sample sizes n1, n2 without ties: the number of arrangements with
/// statistic k follows f(k; m, n) = f(k - n; m - 1, n) + f(k; m, n - 1).
fn exact_sf(u: usize, n1: usize, n2: usize) -> f64 {
    let max = n1 * n2;
    // counts[m][k] for the current n, built up n = 0..=n2.
    let mut prev: Vec<Vec<f64>> = (0..=n1)
        .map(|_| {
            let mut v = vec![0.0; max + 1];
            v[0] = 1.0;
            v
        })
        .collect();
    for n in 1..=n2 {
        let mut cur = vec![vec![0.0; max + 1]; n1 + 1];
        cur[0][0] = 1.0;
        for m in 1..=n1 {
            for k in 0..=m * n {
                let from_m = if k >= n { cur[m - 1][k - n] } else { 0.0 };
                cur[m][k] = from_m + prev[m][k];
            }
        }
        prev = cur;
    }
    let counts = &prev[n1];
    let total: f64 = counts.iter().sum();
    counts[u.min(max)..].iter().sum::<f64>() / total
}

/// LKP-style change flag: the medians differ by at least `threshold` (0.05 = 5 %) relative to
/// the baseline and the [min, max] ranges of the two samples do not overlap.
pub fn lkp_flag(base: &Summary, other: &Summary, threshold: f64) -> bool {
    let change = if base.median != 0.0 {
        (other.median / base.median - 1.0).abs()
    } else if other.median != 0.0 {
        f64::INFINITY
    } else {
        0.0
    };
    let disjoint = other.min > base.max || other.max < base.min;
    // One run per side has no range: two single values are always "disjoint".
    let repeated = base.n >= 2 && other.n >= 2;
    change >= threshold && disjoint && repeated
}

#[cfg(test)]
mod tests {
    use super::*;

    // Reference values from scipy 1.17.1 (stats.mannwhitneyu(alternative="two-sided",
    // method=...), stats.t.ppf(0.975, n - 1)) on gt-stats' reference samples.
    use gt_stats::testing::{close, A, A2, A3, B, B2, B3};

    #[test]
    fn summary_matches_reference() {
        let s = summarize(&A).unwrap();
        assert_eq!(s.n, 6);
        assert!(close(s.mean, 12.566666666666668, 1e-12));
        assert!(close(s.sd, 2.0963460274169115, 1e-12));
        assert_eq!(s.median, 12.25);
        let (lo, hi) = s.ci95.unwrap();
        assert!(
            close(hi - s.mean, 2.1999802347256714, 1e-9),
            "{}",
            hi - s.mean
        );
        assert!(close(s.mean - lo, 2.1999802347256714, 1e-9));
        assert_eq!((s.min, s.max), (9.8, 15.6));
        // numpy.percentile(A, [25, 75])
        assert!(close(s.q1, 11.424999999999999, 1e-12) && close(s.q3, 13.825000000000001, 1e-12));
        assert!(close(
            s.cv.unwrap(),
            2.0963460274169115 / 12.566666666666668,
            1e-12
        ));
        let s3 = summarize(&B3).unwrap();
        assert_eq!(s3.median, 6.0);
        assert!(close(s3.q1, 3.8, 1e-12) && close(s3.q3, 8.05, 1e-12));
        assert_eq!(summarize(&[3.0]).unwrap().sd, 0.0);
        assert!(summarize(&[]).is_none());
        assert!(summarize(&[1.0, f64::NAN]).is_none());
    }

    #[test]
    fn mann_whitney_exact_matches_reference() {
        let m = mann_whitney(&A, &B).unwrap();
        assert_eq!(m.method, MwuMethod::Exact);
        assert_eq!(m.u, 36.0);
        // No overlap, 6 + 6: 2 / C(12, 6).
        assert!(close(m.p, 2.0 / 924.0, 1e-12));
        assert!(close(m.p, 0.0021645021645021645, 1e-12));
        let m3 = mann_whitney(&A3, &B3).unwrap();
        assert_eq!(m3.u, 8.0);
        assert!(close(m3.p, 0.148989898989899, 1e-12));
        // Symmetric in its p-value.
        assert_eq!(mann_whitney(&B3, &A3).unwrap().p, m3.p);
    }

    #[test]
    fn mann_whitney_with_ties_uses_the_normal_approximation() {
        let m = mann_whitney(&A2, &B2).unwrap();
        assert_eq!(m.method, MwuMethod::Normal);
        assert_eq!(m.u, 36.0);
        assert!(close(m.p, 0.3040098383142099, 1e-9), "{}", m.p);
        let all_same = mann_whitney(&[1.0, 1.0], &[1.0, 1.0, 1.0]).unwrap();
        assert_eq!(all_same.p, 1.0);
        assert!(mann_whitney(&[], &[1.0]).is_none());
    }

    #[test]
    fn mann_whitney_larger_samples() {
        // 25 + 30 values without ties (numpy default_rng(7), rounded to 3 decimals).
        let a = [
            10.002, 10.597, 9.452, 8.219, 9.091, 8.017, 10.12, 12.68, 9.016, 8.759, 10.98, 10.714,
            10.211, 8.139, 9.941, 11.391, 7.312, 9.085, 6.198, 7.421, 6.317, 9.53, 7.465, 10.543,
            10.314,
        ];
        let b = [
            10.626, 5.966, 9.923, 10.903, 11.227, 7.94, 10.044, 9.043, 9.382, 13.122, 9.385,
            10.935, 12.769, 9.833, 10.777, 11.221, 11.128, 8.55, 11.152, 13.718, 7.906, 12.719,
            11.239, 9.717, 15.001, 12.525, 8.601, 11.149, 12.153, 10.622,
        ];
        let m = mann_whitney(&a, &b).unwrap();
        assert_eq!((m.u, m.method), (213.0, MwuMethod::Exact));
        assert!(close(m.p, 0.005665446313855862, 1e-9), "{}", m.p);
        // Appending a tie switches to the approximation.
        let mut b2 = b.to_vec();
        b2.push(a[0]);
        assert_eq!(mann_whitney(&a, &b2).unwrap().method, MwuMethod::Normal);
    }

    #[test]
    fn lkp_flag_needs_both_size_and_separation() {
        let base = summarize(&A).unwrap();
        // Single runs are never flagged.
        assert!(!lkp_flag(
            &summarize(&[1.0]).unwrap(),
            &summarize(&[2.0]).unwrap(),
            0.05
        ));
        assert!(lkp_flag(&base, &summarize(&B).unwrap(), 0.05));
        // Overlapping ranges: no flag even with a large median change.
        assert!(!lkp_flag(
            &base,
            &summarize(&[5.0, 10.0, 6.0]).unwrap(),
            0.05
        ));
        // Separated but only 2 % apart.
        let a = summarize(&[100.0, 100.5, 101.0]).unwrap();
        assert!(!lkp_flag(
            &a,
            &summarize(&[102.0, 103.0, 103.5]).unwrap(),
            0.05
        ));
        assert!(lkp_flag(&a, &summarize(&[106.5, 107.0]).unwrap(), 0.05));
    }
}
