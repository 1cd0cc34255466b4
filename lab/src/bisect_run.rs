//! One bisection as one line of experiments/exp-bisect.sh's `runs.tsv`
//! (docs/results/bisect/runs.tsv), from its `bisect.json` read as the [`BisectOutcome`] that
//! `bisect` wrote. `lab table bisect-run` prints it.
//!
//! Contract:
//! 1. The columns are [`HEADER`]'s, tab-separated: the run's name and seed as given, the
//!    secret's position counted from 1, the number of candidates, the answer (the first 12
//!    characters of the found commit's id, else the answer's kind: `ambiguous`, `stopped`),
//!    `FOUND` when the found id is the secret (the full id) else `WRONG`, the steps that ended
//!    good or bad, the skipped steps, each step's boots (comma-separated), their median, each
//!    step's wall seconds rounded to whole seconds (comma-separated), the run's total wall
//!    seconds as given, and whether the end re-measure saw drift (`True`, `False`, `None`
//!    when there was none).
//! 2. The median is that of Python's `statistics.median` over the integer boot counts: the
//!    middle count when there are an odd number of steps, the mean of the two middle ones as
//!    a float (`2.0`, `2.5`) when even, `-` without steps.
//! 3. The text is what the Python it replaced (exp-bisect.sh's inline script, issue 37)
//!    printed: the committed runs.tsv reads the same.

use std::path::Path;

use gt_report::pyfmt::repr;
use gt_results::metrics::median_sorted;
use guest_tests::bisect::search::{BisectAnswer, BisectOutcome};

/// The header line of runs.tsv (rule 1).
pub const HEADER: &str = "run\tseed\tposition\tcandidates\tfound\tverdict\tdecided_steps\tskipped\tboots_per_step\tmedian_boots\twall_per_step_s\ttotal_wall_s\tdrift";

/// What the experiment knows about a run besides its bisect.json.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunFacts {
    pub name: String,
    pub seed: String,
    /// The full id of the commit that really is the first bad one.
    pub secret: String,
    /// Its position among the branch's commits, from 0.
    pub position: u64,
    /// The run's wall seconds, from the script's start.
    pub total_wall_s: u64,
}

/// Reads a `bisect.json`; the error names the file.
pub fn read_outcome(path: &Path) -> Result<BisectOutcome, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))
}

/// The median of rule 2.
fn median(counts: &[usize]) -> String {
    let mut v: Vec<f64> = counts.iter().map(|&c| c as f64).collect();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => "-".into(),
        n if n % 2 == 1 => format!("{}", median_sorted(&v)),
        _ => repr(median_sorted(&v)),
    }
}

fn joined<T: ToString>(v: impl IntoIterator<Item = T>) -> String {
    v.into_iter()
        .map(|x| x.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

/// The run's line of runs.tsv, without its newline (rule 1).
pub fn summary_line(o: &BisectOutcome, f: &RunFacts) -> String {
    let found = match &o.answer {
        BisectAnswer::Found { id, .. } => id.as_str(),
        BisectAnswer::Ambiguous { .. } => "ambiguous",
        BisectAnswer::Stopped { .. } => "stopped",
    };
    let decided = o.decided_steps();
    let boots: Vec<usize> = o.steps.iter().map(|s| s.values.len()).collect();
    let drift = o
        .drift
        .as_ref()
        .map_or("None", |d| if d.drifted { "True" } else { "False" });
    [
        f.name.clone(),
        f.seed.clone(),
        (f.position + 1).to_string(),
        o.candidates.len().to_string(),
        found.chars().take(12).collect(),
        if found == f.secret { "FOUND" } else { "WRONG" }.into(),
        decided.to_string(),
        (o.steps.len() - decided).to_string(),
        joined(&boots),
        median(&boots),
        joined(o.steps.iter().map(|s| format!("{:.0}", s.wall_s))),
        f.total_wall_s.to_string(),
        drift.into(),
    ]
    .join("\t")
}

#[cfg(test)]
mod tests {
    use super::*;
    use guest_tests::bisect::search::{BisectPlan, Candidate, Drift, Mark, Step};
    use guest_tests::bisect::{Sample, StepClass};

    fn step(cand: usize, n: usize, verdict: Mark, wall_s: f64) -> Step {
        Step {
            cand,
            id: format!("{cand:040x}"),
            subject: format!("commit {cand}"),
            values: vec![1.0; n],
            sample: Sample::of(&vec![1.0; n]),
            ci95: None,
            llr: 0.0,
            verdict,
            reason: String::new(),
            wall_s,
        }
    }

    fn outcome(steps: Vec<Step>, answer: BisectAnswer, drift: Option<bool>) -> BisectOutcome {
        BisectOutcome {
            candidates: (0..8)
                .map(|i| Candidate {
                    id: format!("{i:040x}"),
                    subject: format!("commit {i}"),
                })
                .collect(),
            good_refs: vec![0.0; 4],
            bad_refs: vec![1.0; 4],
            classifier: None,
            steps,
            drift: drift.map(|drifted| Drift {
                good_again: vec![0.0],
                bad_again: vec![1.0],
                good_class: StepClass::Good,
                bad_class: StepClass::Bad,
                drifted,
            }),
            answer,
            log: vec![],
            plan: BisectPlan::default(),
        }
    }

    fn facts(secret: &str) -> RunFacts {
        RunFacts {
            name: "run-7-1".into(),
            seed: "7".into(),
            secret: secret.into(),
            position: 4,
            total_wall_s: 1234,
        }
    }

    fn found(cand: usize) -> BisectAnswer {
        BisectAnswer::Found {
            cand,
            id: format!("{cand:040x}"),
            subject: format!("commit {cand}"),
        }
    }

    #[test]
    fn a_found_answer_is_checked_against_the_full_secret() {
        let o = outcome(
            vec![
                step(4, 2, Mark::Bad, 93.4999),
                step(2, 3, Mark::Good, 80.5),
                step(3, 6, Mark::Skip, 81.5),
            ],
            found(4),
            Some(false),
        );
        let right = format!("{:040x}", 4);
        assert_eq!(
            summary_line(&o, &facts(&right)),
            "run-7-1\t7\t5\t8\t000000000000\tFOUND\t2\t1\t2,3,6\t3\t93,80,82\t1234\tFalse"
        );
        // Same 12-character prefix, another commit: WRONG.
        let other = format!("{}1", &right[..39]);
        assert!(summary_line(&o, &facts(&other)).contains("\tWRONG\t"));
    }

    #[test]
    fn an_even_number_of_steps_has_a_float_median() {
        let o = outcome(
            vec![step(4, 2, Mark::Bad, 1.0), step(2, 3, Mark::Good, 2.0)],
            found(4),
            Some(true),
        );
        let l = summary_line(&o, &facts("x"));
        assert_eq!(
            l,
            "run-7-1\t7\t5\t8\t000000000000\tWRONG\t2\t0\t2,3\t2.5\t1,2\t1234\tTrue"
        );
        let o = outcome(
            vec![step(4, 2, Mark::Bad, 1.0), step(2, 2, Mark::Good, 2.0)],
            found(4),
            None,
        );
        assert!(summary_line(&o, &facts("x")).ends_with("\t2,2\t2.0\t1,2\t1234\tNone"));
    }

    #[test]
    fn answers_without_an_id_print_their_kind() {
        let stopped = outcome(
            vec![],
            BisectAnswer::Stopped {
                why: "references do not separate".into(),
            },
            None,
        );
        assert_eq!(
            summary_line(&stopped, &facts(&format!("{:040x}", 4))),
            "run-7-1\t7\t5\t8\tstopped\tWRONG\t0\t0\t\t-\t\t1234\tNone"
        );
        let amb = outcome(
            vec![step(3, 6, Mark::Skip, 10.0)],
            BisectAnswer::Ambiguous { cands: vec![3, 4] },
            Some(false),
        );
        assert_eq!(
            summary_line(&amb, &facts(&format!("{:040x}", 4))),
            "run-7-1\t7\t5\t8\tambiguous\tWRONG\t0\t1\t6\t6\t10\t1234\tFalse"
        );
    }

    #[test]
    fn a_bad_file_is_named() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("bisect.json");
        let e = read_outcome(&p).unwrap_err();
        assert!(e.starts_with(&format!("{}: ", p.display())), "{e}");
        std::fs::write(&p, "{\"candidates\": 3}").unwrap();
        let e = read_outcome(&p).unwrap_err();
        assert!(e.starts_with(&format!("{}: ", p.display())), "{e}");
        assert!(!e.contains('\n'));
    }

    #[test]
    fn what_bisect_writes_reads_back() {
        let o = outcome(vec![step(4, 2, Mark::Bad, 5.0)], found(4), Some(false));
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("bisect.json");
        std::fs::write(&p, serde_json::to_vec_pretty(&o).unwrap()).unwrap();
        assert_eq!(read_outcome(&p).unwrap(), o);
    }
}
