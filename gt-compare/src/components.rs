//! Variance components of a metric measured in several steps of each boot (one-way random
//! effects, the boots as groups): how much of one step's spread comes from one stretch of I/O to
//! the next inside a boot and how much from one boot to the next. `compare --within-boot` prints
//! them (experiments/exp-within-boot.sh).
//!
//! Contract:
//! 1. The input is one vector per boot: the values its steps gave. A step a boot lacks is
//!    absent from its vector; a boot without values is left out.
//! 2. Within-boot variance: the pooled sample variance of the steps about their boot's mean,
//!    sum over boots of (n_i - 1) s_i^2 / sum of (n_i - 1). With k steps in every boot it is
//!    the mean of the boots' sample variances. A boot with one value adds nothing to it.
//! 3. Between-boot variance: var(boot means) - within x mean(1 / n_i), the method-of-moments
//!    estimate (mean(1 / n_i) = 1 / k when every boot has k steps), clamped at 0 when the
//!    boots' means vary less than the within-boot variance alone would make them.
//! 4. Coefficients of variation are standard deviations over the grand mean (the mean of all
//!    values): of one step (the sample sd of all values), within, between, and of a boot's
//!    mean (the sample sd of the boot means). None when the grand mean is 0.
//! 5. No components (None) with fewer than 2 boots or no boot of 2 values, or a non-finite
//!    value.
//! 6. [`within_boot`] reads the values from successful runs only, one table per kernel (in
//!    the order the kernels first appear) and metric; the value of metric M in step S is the
//!    run's metric `S.M`.

use serde::Serialize;

use gt_results::results::RunResult;
use gt_stats::{mean, variance};

/// The variance components of one metric over boots (rules 2-5).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Components {
    pub boots: usize,
    pub values: usize,
    /// The grand mean: of all values.
    pub mean: f64,
    pub within_var: f64,
    /// Clamped at 0 (rule 3).
    pub between_var: f64,
    pub cv: Option<Cvs>,
}

/// Coefficients of variation (rule 4), as fractions.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Cvs {
    pub step: f64,
    pub within: f64,
    pub between: f64,
    pub boot_mean: f64,
}

/// The components of `boots` (each boot's values; rules 1-5).
pub fn components(boots: &[Vec<f64>]) -> Option<Components> {
    let boots: Vec<&Vec<f64>> = boots.iter().filter(|b| !b.is_empty()).collect();
    let all: Vec<f64> = boots.iter().flat_map(|b| b.iter().copied()).collect();
    let df: usize = boots.iter().map(|b| b.len() - 1).sum();
    if boots.len() < 2 || df == 0 || all.iter().any(|v| !v.is_finite()) {
        return None;
    }
    let within_var = boots
        .iter()
        .filter(|b| b.len() > 1)
        .map(|b| variance(b) * (b.len() - 1) as f64)
        .sum::<f64>()
        / df as f64;
    let means: Vec<f64> = boots.iter().map(|b| mean(b)).collect();
    let inv_n = mean(
        &boots
            .iter()
            .map(|b| 1.0 / b.len() as f64)
            .collect::<Vec<_>>(),
    );
    let means_var = variance(&means);
    let between_var = (means_var - within_var * inv_n).max(0.0);
    let grand = mean(&all);
    let cv = (grand != 0.0).then(|| Cvs {
        step: variance(&all).sqrt() / grand,
        within: within_var.sqrt() / grand,
        between: between_var.sqrt() / grand,
        boot_mean: means_var.sqrt() / grand,
    });
    Some(Components {
        boots: boots.len(),
        values: all.len(),
        mean: grand,
        within_var,
        between_var,
        cv,
    })
}

/// One boot's values of one metric, a step at a time (None: the run lacks it).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BootValues {
    /// The run directory's last component.
    pub run: String,
    pub values: Vec<Option<f64>>,
}

/// One kernel's components of one metric over its boots (rule 6).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WithinBoot {
    pub kernel: String,
    pub metric: String,
    pub boots: Vec<BootValues>,
    pub components: Option<Components>,
}

fn boot_values(r: &RunResult, steps: &[String], metric: &str) -> BootValues {
    let dir = &r.info.run_dir;
    BootValues {
        run: dir.file_name().map_or_else(
            || dir.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        ),
        values: steps
            .iter()
            .map(|s| r.metrics.get(&format!("{s}.{metric}")).copied())
            .collect(),
    }
}

/// Per kernel and metric, each successful run's values in `steps` and their components
/// (rule 6). A run without any of the values is left out.
pub fn within_boot(runs: &[RunResult], steps: &[String], metrics: &[String]) -> Vec<WithinBoot> {
    let ok: Vec<&RunResult> = runs.iter().filter(|r| r.status.is_ok()).collect();
    let mut kernels: Vec<&str> = Vec::new();
    for r in &ok {
        if !kernels.contains(&r.info.kernel.as_str()) {
            kernels.push(&r.info.kernel);
        }
    }
    let mut out = Vec::new();
    for k in kernels {
        for m in metrics {
            let boots: Vec<BootValues> = ok
                .iter()
                .filter(|r| r.info.kernel == k)
                .map(|r| boot_values(r, steps, m))
                .filter(|b| b.values.iter().any(Option::is_some))
                .collect();
            let vecs: Vec<Vec<f64>> = boots
                .iter()
                .map(|b| b.values.iter().flatten().copied().collect())
                .collect();
            out.push(WithinBoot {
                kernel: k.to_string(),
                metric: m.clone(),
                components: components(&vecs),
                boots,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::run;
    use gt_results::results::RunStatus;

    fn close(a: f64, b: f64) {
        assert!((a - b).abs() < 1e-12, "{a} != {b}");
    }

    #[test]
    fn balanced_boots_by_hand() {
        // Boot means 2 and 5, each boot's variance 1: within 1; var(means) 4.5, so between
        // 4.5 - 1/3; all six values 1..6: mean 3.5, sample variance 3.5.
        let c = components(&[vec![1.0, 2.0, 3.0], vec![4.0, 5.0, 6.0]]).unwrap();
        assert_eq!((c.boots, c.values), (2, 6));
        close(c.mean, 3.5);
        close(c.within_var, 1.0);
        close(c.between_var, 4.5 - 1.0 / 3.0);
        let cv = c.cv.unwrap();
        close(cv.step, 3.5f64.sqrt() / 3.5);
        close(cv.within, 1.0 / 3.5);
        close(cv.between, (4.5f64 - 1.0 / 3.0).sqrt() / 3.5);
        close(cv.boot_mean, 4.5f64.sqrt() / 3.5);
    }

    #[test]
    fn between_is_clamped_at_zero() {
        // Equal boot means (3 and 3): var(means) 0, within (8 + 2) / 2 = 5, 0 - 5/2 < 0.
        let c = components(&[vec![1.0, 5.0], vec![2.0, 4.0]]).unwrap();
        close(c.within_var, 5.0);
        assert_eq!(c.between_var, 0.0);
        assert_eq!(c.cv.unwrap().between, 0.0);
        assert_eq!(c.cv.unwrap().boot_mean, 0.0);
    }

    #[test]
    fn a_boot_with_missing_steps_by_hand() {
        // n = 3, 2, 1: variances 1 and 2 pooled with 2 and 1 degrees of freedom: 4/3. Means
        // 2, 11, 7 (mean 20/3): var 366/9/2 = 61/3; mean(1/n) = 11/18; between
        // 61/3 - 4/3 * 11/18 = 527/27.
        let c = components(&[vec![1.0, 2.0, 3.0], vec![10.0, 12.0], vec![7.0], vec![]]).unwrap();
        assert_eq!((c.boots, c.values), (3, 6));
        close(c.mean, 35.0 / 6.0);
        close(c.within_var, 4.0 / 3.0);
        close(c.between_var, 527.0 / 27.0);
        close(
            c.cv.unwrap().boot_mean,
            (61.0f64 / 3.0).sqrt() / (35.0 / 6.0),
        );
    }

    #[test]
    fn too_little_data_or_a_zero_mean() {
        assert_eq!(components(&[vec![1.0, 2.0]]), None);
        assert_eq!(components(&[vec![1.0], vec![2.0]]), None);
        assert_eq!(components(&[vec![1.0, f64::NAN], vec![2.0, 3.0]]), None);
        let z = components(&[vec![0.0, 0.0], vec![0.0, 0.0]]).unwrap();
        assert_eq!((z.within_var, z.between_var, z.cv), (0.0, 0.0, None));
    }

    #[test]
    fn runs_grouped_by_kernel_failed_and_empty_runs_left_out() {
        let mut v = vec![
            run("a", None, &[("s1.m", 1.0), ("s2.m", 2.0), ("s3.m", 3.0)]),
            run("b", None, &[("s1.m", 9.0)]),
            run("a", None, &[("s1.m", 4.0), ("s3.m", 6.0)]),
            run("a", None, &[("s1.x", 4.0)]),
            run("a", None, &[("s1.m", 100.0), ("s2.m", 100.0)]),
        ];
        v[4].status = RunStatus::Failed {
            reason: "boot".into(),
        };
        let steps = ["s1", "s2", "s3"].map(String::from);
        let t = within_boot(&v, &steps, &["m".to_string()]);
        assert_eq!(t.len(), 2);
        assert_eq!((t[0].kernel.as_str(), t[0].boots.len()), ("a", 2));
        assert_eq!(t[0].boots[1].values, vec![Some(4.0), None, Some(6.0)]);
        // a: boots [1, 2, 3] and [4, 6]: within (2 * 1 + 1 * 2) / 3.
        close(t[0].components.as_ref().unwrap().within_var, 4.0 / 3.0);
        assert_eq!((t[1].kernel.as_str(), &t[1].components), ("b", &None));
    }
}
