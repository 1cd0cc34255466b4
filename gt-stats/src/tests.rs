//! Each rule's figures against reference values, and each edge case (one value, zero variance,
//! identical samples, zero and negative values) once. The reference figures are scipy 1.17.1's
//! (`ttest_ind(equal_var=False)`, `ttest_1samp`, `t.ppf`) on `testing`'s samples.

use super::testing::{close, Rng, A, A2, A3, B, B2, B3};
use super::*;

#[test]
fn rule_1_mean_and_variance_and_their_nans() {
    assert_eq!(mean(&[1.0, 2.0, 6.0]), 3.0);
    assert_eq!(variance(&[1.0, 2.0, 6.0]), 7.0);
    assert!(mean(&[]).is_nan());
    assert!(variance(&[3.0]).is_nan() && variance(&[]).is_nan());
}

#[test]
fn rule_2_t_quantiles() {
    assert!(close(
        t_quantile(0.975, 2.0).unwrap(),
        4.302652729749464,
        1e-9
    ));
    assert!(close(
        t_quantile(0.975, 5.0).unwrap(),
        2.5705818356363146,
        1e-9
    ));
    assert!(close(
        t_quantile(0.025, 5.0).unwrap(),
        -2.5705818356363146,
        1e-9
    ));
    // Infinite degrees of freedom: the standard normal.
    assert!(close(
        t_quantile(0.975, f64::INFINITY).unwrap(),
        1.959963984540054,
        1e-12
    ));
    // 1 - 0.05 / 2 is the very same double as 0.975.
    assert_eq!(t_quantile(1.0 - 0.05 / 2.0, 7.0), t_quantile(0.975, 7.0));
    for (p, df) in [
        (0.0, 3.0),
        (1.0, 3.0),
        (f64::NAN, 3.0),
        (0.9, 0.0),
        (0.9, f64::NAN),
    ] {
        assert_eq!(t_quantile(p, df), None, "{p} {df}");
    }
}

#[test]
fn rule_3_the_half_width_of_a_mean_in_both_forms() {
    let (n, sd) = (A.len(), variance(&A).sqrt());
    let h = mean_half_width_95(n, sd).unwrap();
    assert!(close(h, 2.1999802347256714, 1e-9), "{h}");
    let v = half_width_95(variance(&A) / n as f64, (n - 1) as f64).unwrap();
    assert!(close(v, h, 1e-12));
    let h3 = mean_half_width_95(B3.len(), variance(&B3).sqrt()).unwrap();
    assert!(close(h3, 2.5269985170607163, 1e-9));
}

#[test]
fn rule_3_one_value_has_no_interval() {
    assert_eq!(mean_half_width_95(1, 0.0), None);
    assert_eq!(half_width_95(0.5, 0.0), None);
}

#[test]
fn rule_3_zero_variance_is_a_point_and_bad_variances_none() {
    assert_eq!(mean_half_width_95(4, 0.0), Some(0.0));
    assert_eq!(half_width_95(0.0, 3.0), Some(0.0));
    assert_eq!(half_width_95(0.0, f64::INFINITY), Some(0.0));
    assert_eq!(half_width_95(-1.0, 3.0), None);
    assert_eq!(half_width_95(f64::NAN, 3.0), None);
    assert_eq!(mean_half_width_95(4, f64::INFINITY), None);
}

#[test]
fn rule_4_the_paired_t_test() {
    // mean 1.8, sd 1.0977, t = 3.667 on 4 df: two-sided p = 0.0214 (scipy.stats.ttest_1samp).
    let p = paired_t_p(&[1.0, 2.0, 2.5, 3.1, 0.4]).unwrap();
    assert!((p - 0.021_314).abs() < 2e-3, "{p}");
    assert!(close(
        paired_t_p(&[1.0, -1.0, 2.0, -2.0]).unwrap(),
        1.0,
        1e-12
    ));
}

#[test]
fn rule_4_one_value_zero_variance_and_non_finite_have_no_paired_test() {
    assert_eq!(paired_t_p(&[1.0]), None);
    assert_eq!(paired_t_p(&[2.0, 2.0, 2.0]), None);
    assert_eq!(paired_t_p(&[1.0, f64::INFINITY]), None);
}

#[test]
fn rule_5_welch_matches_reference() {
    assert!(close(
        welch_p(&A, &B).unwrap(),
        0.00030290431367790613,
        1e-6
    ));
    assert!(close(welch_p(&A2, &B2).unwrap(), 0.2745238314157138, 1e-6));
    assert!(close(welch_p(&A3, &B3).unwrap(), 0.07712906079705929, 1e-6));
    // The degrees of freedom are Welch-Satterthwaite's: (va + vb)^2 / (va^2 / 5 + vb^2 / 5).
    let (se2, df) = welch_terms(&A, &B).unwrap();
    let (va, vb) = (variance(&A) / 6.0, variance(&B) / 6.0);
    assert_eq!(se2, va + vb);
    assert_eq!(df, welch_df(va, 5.0, vb, 5.0));
    assert!(close(df, 5.694434011730483, 1e-12), "{df}");
}

#[test]
fn rule_5_the_interval_is_the_one_the_p_inverts() {
    let a = [10.0, 12.0, 11.5];
    let b = [7.0, 8.5, 7.5, 8.0];
    let (lo, hi) = welch_diff_ci95(&a, &b).unwrap();
    let d = 11.166666666666666 - 7.75;
    assert!(lo < d && d < hi && (d - lo - (hi - d)).abs() < 1e-9);
    // Shifting b by either end of the interval puts the difference on the 5 % boundary.
    for shift in [lo, hi] {
        let b2: Vec<f64> = b.iter().map(|x| x + shift).collect();
        assert!((welch_p(&a, &b2).unwrap() - 0.05).abs() < 1e-9, "{shift}");
    }
}

#[test]
fn rule_5_one_value_and_constant_samples_have_no_test() {
    assert_eq!(welch_terms(&[1.0], &B), None);
    assert_eq!(welch_p(&[1.0], &B), None);
    assert_eq!(welch_diff_ci95(&[1.0], &B), None);
    // Both constant: the standard error is 0, the degrees of freedom infinite, no t.
    assert_eq!(
        welch_terms(&[2.0, 2.0], &[3.0, 3.0]),
        Some((0.0, f64::INFINITY))
    );
    assert_eq!(welch_p(&[2.0, 2.0], &[3.0, 3.0]), None);
    assert_eq!(welch_diff_ci95(&[2.0, 2.0], &[2.0, 2.0]), None);
    // One constant side is enough to test.
    assert!(welch_p(&[2.0, 2.0], &[3.0, 4.0]).is_some());
}

#[test]
fn rule_6_a_geometric_mean_and_its_interval() {
    // Ratios 1.1 and 0.75: geometric mean sqrt(0.825); t(0.975, 1) = 12.706.
    let g = geo_mean(&[1.1, 0.75]).unwrap();
    assert!(close(g.geo_mean, 0.825f64.sqrt(), 1e-12));
    let (lo, hi) = g.ci95.unwrap();
    assert!(
        close(lo, 0.0797, 1e-2) && close(hi, 10.350, 1e-3),
        "{lo} {hi}"
    );
    assert!(close(lo * hi, 0.825, 1e-9), "symmetric on the logs");
    let one = geo_mean(&[1.1]).unwrap();
    assert_eq!((one.n, one.ci95), (1, None));
    let flat = geo_mean(&[2.0, 2.0, 2.0]).unwrap();
    assert_eq!(flat.ci95, Some((flat.geo_mean, flat.geo_mean)));
}

#[test]
fn rule_6_the_ratio_of_two_geometric_means() {
    let r = geo_ratio(&[10.0, 11.0, 9.0], &[5.0, 5.5, 4.5]).unwrap();
    assert!(close(r.ratio, 0.5, 1e-12) && close(r.log_ratio, 0.5f64.ln(), 1e-12));
    let (lo, hi) = r.ci95.unwrap();
    assert!(lo < 0.5 && hi > 0.5 && r.p.unwrap() < 0.01);
    assert!(
        close(r.log_var.0, r.log_var.1, 1e-9),
        "halving keeps the logs' spread"
    );
    // Identical samples: ratio 1, an interval around it, p = 1.
    let same = geo_ratio(&A, &A).unwrap();
    let (lo, hi) = same.ci95.unwrap();
    assert!(same.ratio == 1.0 && lo < 1.0 && hi > 1.0 && same.p == Some(1.0));
    // Both sides constant: a ratio, but no interval and no p.
    let flat = geo_ratio(&[2.0, 2.0], &[3.0, 3.0]).unwrap();
    assert!(close(flat.ratio, 1.5, 1e-12) && flat.ci95.is_none() && flat.p.is_none());
}

#[test]
fn rule_6_zero_negative_and_too_few_values_are_errors() {
    assert_eq!(logs(&[1.0, 0.0]), Err(GeoError::NotPositive));
    assert_eq!(
        geo_mean(&[1.0, -2.0]).map(|g| g.n),
        Err(GeoError::NotPositive)
    );
    assert_eq!(
        geo_mean(&[f64::INFINITY]).map(|g| g.n),
        Err(GeoError::NotPositive)
    );
    assert_eq!(
        geo_ratio(&[1.0, 2.0], &[0.0, 1.0]).map(|r| r.ratio),
        Err(GeoError::NotPositive)
    );
    assert_eq!(
        geo_mean(&[]).map(|g| g.n),
        Err(GeoError::TooFew { need: 1 })
    );
    assert_eq!(
        geo_ratio(&[1.0], &[1.0, 2.0]).map(|r| r.ratio),
        Err(GeoError::TooFew { need: 2 })
    );
    // Too few is said before a zero.
    assert_eq!(
        geo_ratio(&[0.0], &[1.0, 2.0]).map(|r| r.ratio),
        Err(GeoError::TooFew { need: 2 })
    );
    assert_eq!(
        GeoError::NotPositive.to_string(),
        "a value is zero, negative or not finite"
    );
}

#[test]
fn rule_7_the_generator_is_deterministic_and_roughly_normal() {
    let (mut a, mut b) = (Rng::new(7), Rng::new(7));
    let xs: Vec<f64> = (0..4000).map(|_| a.normal(10.0, 2.0)).collect();
    assert!(xs.iter().all(|x| *x == b.normal(10.0, 2.0)));
    assert!(close(mean(&xs), 10.0, 0.01) && close(variance(&xs).sqrt(), 2.0, 0.05));
    let u = Rng::new(0).uniform();
    assert!(
        u > 0.0 && u < 1.0,
        "seed 0 is made odd, never the stuck state 0"
    );
}
