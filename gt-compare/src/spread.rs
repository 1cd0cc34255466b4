//! Reproducibility across matrices: the same A/B experiment run several times, each into its
//! own directory (`compare --each DIR...`, ci/reproduce-verdict.sh).
//!
//! Rules:
//! 1. Each directory is judged alone, exactly as `compare --verdict` judges it: its primary
//!    metric's baseline and other-kernel summaries and the verdict's p-value and test.
//! 2. The spread is over the matrices' baseline means of the primary metric (a summary of those
//!    means: mean, CV, range) and over their p-values (largest and smallest): how far one
//!    machine's or one hour's verdict can be from another's.
//! 3. A matrix "separates" when its primary p is below the threshold the caller gives (the
//!    issue's goal: 1e-4 idle, 1e-3 busy); the spread counts them.

use serde::{Deserialize, Serialize};

use super::stats::{summarize, Summary};
use super::verdict::Verdict;

/// One matrix's verdict, as a row (rule 1).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MatrixRow {
    pub dir: String,
    pub metric: String,
    pub base_n: usize,
    pub base_mean: f64,
    pub base_cv: Option<f64>,
    pub other_mean: f64,
    pub p: Option<f64>,
    pub test: String,
}

/// Rules 2 and 3.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Spread {
    pub rows: Vec<MatrixRow>,
    /// Summary of the baseline means over the matrices.
    pub base_means: Option<Summary>,
    pub p_max: Option<f64>,
    pub p_min: Option<f64>,
    pub threshold: f64,
    /// Matrices whose p is below `threshold`.
    pub separated: usize,
}

/// The row of one matrix's verdict; None when it has no primary metric.
pub fn matrix_row(dir: &str, v: &Verdict) -> Option<MatrixRow> {
    let p = v.row("primary")?;
    Some(MatrixRow {
        dir: dir.to_string(),
        metric: p.metric.clone(),
        base_n: p.base.n,
        base_mean: p.base.mean,
        base_cv: p.base.cv,
        other_mean: p.other.mean,
        p: p.p,
        test: p.test.clone(),
    })
}

/// The spread over `rows` (rules 2, 3).
pub fn spread(rows: Vec<MatrixRow>, threshold: f64) -> Spread {
    let means: Vec<f64> = rows.iter().map(|r| r.base_mean).collect();
    let ps: Vec<f64> = rows.iter().filter_map(|r| r.p).collect();
    Spread {
        base_means: summarize(&means),
        p_max: ps.iter().copied().reduce(f64::max),
        p_min: ps.iter().copied().reduce(f64::min),
        threshold,
        separated: ps.iter().filter(|&&p| p < threshold).count(),
        rows,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(dir: &str, mean: f64, p: Option<f64>) -> MatrixRow {
        MatrixRow {
            dir: dir.into(),
            metric: "m".into(),
            base_n: 6,
            base_mean: mean,
            base_cv: Some(0.1),
            other_mean: 0.0,
            p,
            test: "Welch t".into(),
        }
    }

    #[test]
    fn spread_of_three_matrices() {
        let s = spread(
            vec![
                row("a", 10.0, Some(1e-5)),
                row("b", 12.0, Some(2e-4)),
                row("c", 14.0, None),
            ],
            1e-4,
        );
        let m = s.base_means.as_ref().unwrap();
        assert_eq!(m.n, 3);
        assert!((m.mean - 12.0).abs() < 1e-12);
        assert!((m.cv.unwrap() - 2.0 / 12.0).abs() < 1e-12);
        assert_eq!((s.p_min, s.p_max), (Some(1e-5), Some(2e-4)));
        // A matrix without a p-value does not count as separated.
        assert_eq!(s.separated, 1);
        let empty = spread(vec![], 1e-4);
        assert!(empty.base_means.is_none() && empty.p_max.is_none());
    }
}
