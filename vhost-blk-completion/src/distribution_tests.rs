//! Parsing, validation and statistical checks of the distributions (fixed seeds: deterministic).

use super::*;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

const US: u64 = 1_000;
const N: usize = 100_000;

fn samples(d: &Distribution, seed: u64) -> Vec<u64> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    (0..N).map(|_| d.sample(&mut rng)).collect()
}

fn mean(v: &[u64]) -> f64 {
    v.iter().map(|&x| x as f64).sum::<f64>() / v.len() as f64
}

fn assert_close(got: f64, want: f64, rel: f64, what: &str) {
    assert!(
        (got - want).abs() <= rel * want,
        "{what}: got {got}, want {want} +- {}%",
        rel * 100.0
    );
}

#[test]
fn durations_parse_with_units() {
    assert_eq!(parse_duration_ns("0"), Ok(0));
    assert_eq!(parse_duration_ns("250ns"), Ok(250));
    assert_eq!(parse_duration_ns("50us"), Ok(50_000));
    assert_eq!(parse_duration_ns("50µs"), Ok(50_000));
    assert_eq!(parse_duration_ns("1.5ms"), Ok(1_500_000));
    assert_eq!(parse_duration_ns("2s"), Ok(2_000_000_000));
    assert_eq!(
        parse_duration_ns("50"),
        Err(DistributionError::MissingUnit("50".into()))
    );
    assert!(matches!(
        parse_duration_ns("5m"),
        Err(DistributionError::UnknownUnit(_))
    ));
    assert!(matches!(
        parse_duration_ns("-5us"),
        Err(DistributionError::BadNumber(_))
    ));
    assert!(matches!(
        parse_duration_ns("61s"),
        Err(DistributionError::TooLarge(_))
    ));
    assert_eq!(parse_duration_ns(""), Err(DistributionError::EmptyDuration));
}

#[test]
fn every_form_parses_and_round_trips() {
    let cases = [
        ("0", Distribution::Fixed(0)),
        ("50us", Distribution::Fixed(50 * US)),
        ("fixed:50us", Distribution::Fixed(50 * US)),
        (
            "uniform:10us..100us",
            Distribution::Uniform {
                lo: 10 * US,
                hi: 100 * US,
            },
        ),
        (
            "normal:100us,20us",
            Distribution::Normal {
                mean: 100 * US,
                sd: 20 * US,
            },
        ),
        (
            "lognormal:100us,0.5",
            Distribution::LogNormal {
                median: 100 * US,
                sigma: 0.5,
            },
        ),
        ("exp:50us", Distribution::Exp { mean: 50 * US }),
        (
            "table:p50=100us,p99.9=1ms,p100=2ms",
            Distribution::Table(vec![
                (0.0, 0),
                (50.0, 100 * US),
                (99.9, 1_000 * US),
                (100.0, 2_000 * US),
            ]),
        ),
    ];
    for (text, want) in cases {
        let got: Distribution = text.parse().unwrap_or_else(|e| panic!("{text}: {e}"));
        assert_eq!(got, want, "{text}");
        let again: Distribution = got.to_string().parse().unwrap();
        assert_eq!(again, got, "{text} -> {got}");
    }
}

#[test]
fn bad_strings_are_rejected_with_typed_errors() {
    let err = |s: &str| s.parse::<Distribution>().unwrap_err();
    assert!(matches!(
        err("gamma:1us"),
        DistributionError::UnknownKind(_)
    ));
    assert!(matches!(
        err("uniform:10us"),
        DistributionError::BadArguments { .. }
    ));
    assert!(matches!(
        err("uniform:10us..1us"),
        DistributionError::ReversedRange { .. }
    ));
    assert!(matches!(
        err("normal:10us"),
        DistributionError::BadArguments { .. }
    ));
    assert!(matches!(
        err("lognormal:100us,-1"),
        DistributionError::BadShape { .. }
    ));
    assert!(matches!(err("lognormal:0,0.5"), DistributionError::Zero(_)));
    assert!(matches!(
        err("lognormal:mean=1ms,p99=100us"),
        DistributionError::LognormalMeanP99 { .. }
    ));
    assert!(matches!(
        err("lognormal:mean=1us,p99=1s"),
        DistributionError::LognormalMeanP99 { .. }
    ));
    assert!(matches!(err("exp:0"), DistributionError::Zero(_)));
    assert!(matches!(
        err("table:p50=1us"),
        DistributionError::TableNoP100
    ));
    assert!(matches!(
        err("table:p50=1ms,p90=1us,p100=2ms"),
        DistributionError::TableNotMonotone(_)
    ));
    assert!(matches!(
        err("table:p90=1us,p50=2us,p100=3ms"),
        DistributionError::TableNotMonotone(_)
    ));
    assert!(matches!(
        err("table:p101=1us"),
        DistributionError::BadTablePoint(_)
    ));
    assert!(matches!(
        err("table:x50=1us,p100=2us"),
        DistributionError::BadTablePoint(_)
    ));
    assert!(matches!(err("fixed:10"), DistributionError::MissingUnit(_)));
    // The message names the problem.
    assert!(err("uniform:10us..1us").to_string().contains("reversed"));
}

#[test]
fn uniform_stays_in_range_with_the_right_mean() {
    let d: Distribution = "uniform:10us..100us".parse().unwrap();
    let v = samples(&d, 1);
    assert!(v.iter().all(|&x| (10 * US..=100 * US).contains(&x)));
    // Both ends are reached (closed range).
    assert!(*v.iter().min().unwrap() < 10 * US + 100);
    assert!(*v.iter().max().unwrap() > 100 * US - 100);
    assert_close(mean(&v), d.mean_ns(), 0.01, "uniform mean");
}

#[test]
fn normal_is_truncated_not_clamped() {
    // Mean 10 us, sd 20 us: a third of the untruncated mass is negative.
    let d: Distribution = "normal:10us,20us".parse().unwrap();
    let v = samples(&d, 2);
    let zeros = v.iter().filter(|&&x| x == 0).count();
    assert!(
        zeros < 10,
        "{zeros} zeros: negative draws were clamped, not redrawn"
    );
    // Truncated mean is 10 + 20 * pdf(-0.5)/(1 - cdf(-0.5)) = 10 + 20 * 0.3521/0.6915 = 20.18 us.
    assert_close(
        d.mean_ns(),
        20_184.0,
        0.002,
        "truncated-normal mean formula",
    );
    assert_close(mean(&v), d.mean_ns(), 0.02, "truncated-normal sample mean");
    // The inverse CDF of the truncated distribution against the samples' own quantiles.
    let mut sorted = v.clone();
    sorted.sort_unstable();
    for u in [0.1, 0.5, 0.9, 0.99] {
        let sample = sorted[(u * N as f64) as usize] as f64;
        assert_close(
            d.quantile(u) as f64,
            sample,
            0.03,
            "truncated-normal quantile",
        );
    }
    assert_eq!(d.quantile(0.0), 0);
    let wide: Distribution = "normal:100us,20us".parse().unwrap();
    assert_close(wide.quantile(0.5) as f64, 100_000.0, 1e-6, "normal median");
    // 100 + 20 * 1.959964 us: the 97.5th percentile of a normal far from 0.
    assert_close(wide.quantile(0.975) as f64, 139_199.3, 1e-5, "normal p97.5");
    assert_close(mean(&samples(&wide, 3)), 100_000.0, 0.01, "normal mean");
}

#[test]
fn lognormal_matches_median_mean_and_p99() {
    let d: Distribution = "lognormal:100us,0.5".parse().unwrap();
    let mut v = samples(&d, 4);
    assert_close(mean(&v), d.mean_ns(), 0.02, "lognormal mean");
    v.sort_unstable();
    assert_close(v[N / 2] as f64, 100_000.0, 0.02, "lognormal median");
    let fitted: Distribution = "lognormal:mean=100us,p99=500us".parse().unwrap();
    assert_close(fitted.mean_ns(), 100_000.0, 0.001, "fitted mean");
    assert_close(fitted.quantile(0.99) as f64, 500_000.0, 0.001, "fitted p99");
    let mut w = samples(&fitted, 5);
    w.sort_unstable();
    assert_close(w[N * 99 / 100] as f64, 500_000.0, 0.03, "fitted sample p99");
}

#[test]
fn exponential_mean() {
    let d: Distribution = "exp:50us".parse().unwrap();
    let v = samples(&d, 6);
    assert_close(mean(&v), 50_000.0, 0.02, "exp mean");
    let below = v.iter().filter(|&&x| x <= 50 * US).count() as f64 / N as f64;
    assert_close(below, 1.0 - (-1f64).exp(), 0.02, "exp cdf at the mean");
}

#[test]
fn table_inverse_cdf_is_monotone_and_interpolated() {
    let d: Distribution = "table:p50=100us,p90=300us,p99=1ms,p100=2ms"
        .parse()
        .unwrap();
    let mut last = 0;
    for i in 0..=1000 {
        let q = d.quantile(i as f64 / 1000.0);
        assert!(q >= last, "quantile decreased at {i}");
        last = q;
    }
    assert_eq!(d.quantile(0.0), 0);
    assert_eq!(d.quantile(0.5), 100 * US);
    assert_eq!(d.quantile(0.7), 200 * US);
    assert_eq!(d.quantile(1.0), 2_000 * US);
    let mut v = samples(&d, 7);
    assert!(v.iter().all(|&x| x <= 2_000 * US));
    assert_close(mean(&v), d.mean_ns(), 0.02, "table mean");
    v.sort_unstable();
    assert_close(v[N * 9 / 10] as f64, 300_000.0, 0.02, "table p90");
}

#[test]
fn fixed_never_draws_and_caps_hold() {
    struct Panics;
    impl rand::RngCore for Panics {
        fn next_u32(&mut self) -> u32 {
            panic!("fixed drew a random number")
        }
        fn next_u64(&mut self) -> u64 {
            panic!("fixed drew a random number")
        }
        fn fill_bytes(&mut self, _: &mut [u8]) {
            panic!("fixed drew a random number")
        }
        fn try_fill_bytes(&mut self, _: &mut [u8]) -> Result<(), rand::Error> {
            panic!("fixed drew a random number")
        }
    }
    assert_eq!(Distribution::Fixed(7).sample(&mut Panics), 7);
    // A heavy tail is capped at the 60 s limit instead of overflowing.
    let d = Distribution::LogNormal {
        median: 30_000_000_000,
        sigma: 5.0,
    };
    assert!(samples(&d, 8).iter().all(|&x| x <= MAX_NS));
}
