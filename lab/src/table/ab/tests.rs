use clap::Parser;

use super::*;
use crate::table::fixtures::{report, write, write_report};

/// A report with IOPS and ops per backend CPU-second.
fn run(iops: f64, eff: Option<f64>) -> Report {
    report(iops, (20.0, 90.0), None, eff)
}

/// Configuration `cfg`, 5 rounds: B's round 2 has zero ops per CPU-second, A's round 4 and B's
/// round 5 have no file, A's round 5 no CPU figure; so rounds 1 and 3 are the pairs.
fn fixture(dir: &Path) {
    let runs = [
        ("r1-cfg-A", 1500.5, Some(100.0)),
        ("r1-cfg-B", 1000.0, Some(110.0)),
        ("r2-cfg-A", 2500.0, Some(200.0)),
        ("r2-cfg-B", 2000.0, Some(0.0)),
        ("r3-cfg-A", 1_234_567.0, Some(400.0)),
        ("r3-cfg-B", 3500.0, Some(300.0)),
        ("r4-cfg-B", 4000.0, Some(90.0)),
        ("r5-cfg-A", 0.0, None),
        ("r1-lonely-A", 10.0, Some(10.0)),
    ];
    for (name, iops, eff) in runs {
        write_report(dir, &format!("{name}.json"), &run(iops, eff));
    }
}

fn args(v: &[&str]) -> AbArgs {
    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        ab: AbArgs,
    }
    Cli::try_parse_from(std::iter::once("ab").chain(v.iter().copied()))
        .unwrap()
        .ab
}

#[test]
fn a_table_from_a_small_run() {
    let dir = tempfile::tempdir().unwrap();
    fixture(dir.path());
    let d = dir.path().to_str().unwrap();
    let text = table(&args(&[d, "--rounds", "5", "--configs", "cfg lonely none"])).unwrap();
    // The figures as Python computed them from the same numbers (the script's former code):
    // pairs (100, 110) and (400, 300); medians 250 and 205; ratios 1.1 and 0.75, geometric
    // mean sqrt(0.825), its 95 % t interval (1 degree of freedom, t = 12.706) 0.080..10.350;
    // IOPS medians of 1500.5 2500 1234567 and of 1000 2000 3500 4000.
    assert_eq!(
        text,
        format!(
            "{HEAD}\n\
             | cfg | 250 | 205 | 0.820 | 0.908 (0.750..1.100) | 0.080..10.350 | 2,500 | 2,750 | 2 |\n\
             | lonely | - | - | - | - | - | - | - | 0 |\n\
             | none | - | - | - | - | - | - | - | 0 |\n"
        )
    );
    // Only the rounds asked for are read: with 1 round, one pair (no interval).
    let one = table(&args(&[d, "--rounds", "1", "--configs", "cfg"])).unwrap();
    assert!(
        one.ends_with(
            "| cfg | 100 | 110 | 1.100 | 1.100 (1.100..1.100) | - | 1,500 | 1,000 | 1 |\n"
        ),
        "{one}"
    );
}

#[test]
fn a_broken_file_is_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "r1-cfg-B.json", "{\"socket\": 1");
    let d = dir.path().to_str().unwrap();
    let err = table(&args(&[d, "--rounds", "1", "--configs", "cfg"])).unwrap_err();
    assert!(err.to_string().contains("r1-cfg-B.json"), "{err}");
}
