//! `guest-tests check tree-kernels DIR ...` and `check storm STORM DETECT`: what
//! ci/tree-kernel-smoke.sh asserts of its runs (results::checks); `check judgement DIR --expect
//! KERNEL=J`: what the verdict's controls must get (ci/test.sh,
//! experiments/exp-verdict-controls.sh); `check kills RUN...`: the kill test's verdict on each
//! run's image (results::kills). Exit 0 when every condition
//! holds, 1 with the first that does not (or a directory or results.json that cannot be read,
//! named), 2 on bad arguments.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Subcommand;

use gt_results::results::checks::{check_storm, check_tree_kernels, read_runs, TreeKernels};

use super::fail;

#[derive(Subcommand, Debug)]
pub enum CheckCmd {
    /// Two runs of kernels built from a git tree, one with a patch: both ok, both built from
    /// HEAD with a clean tree, only the patched variant with the patch, different bzImages.
    TreeKernels {
        /// The matrix directory (its */results.json).
        dir: PathBuf,
        /// The tree's commit.
        #[arg(long, value_parser = hex_id)]
        head: String,
        /// The patch's file name.
        #[arg(long, value_parser = file_name)]
        patch: String,
        /// The patch's sha256.
        #[arg(long, value_parser = hex_id)]
        patch_sha256: String,
        /// The kernel variant built with the patch.
        #[arg(long)]
        patched_variant: String,
    },
    /// The unfrozen quiesce storm ran long enough with no lost run, and its detector's
    /// self-test failed that run with evidence.
    Storm {
        /// The storm matrix's directory (one run).
        storm: PathBuf,
        /// The self-test matrix's directory (one run).
        detect: PathBuf,
        /// The least storm cycles.
        #[arg(long, default_value_t = 10_000)]
        min_cycles: u64,
    },
    /// Each kernel of a run got one of the judgements expected of it (compare::judgement):
    /// prints every kernel's judgement, fails on the first that is not as expected.
    Judgement {
        /// The matrix directory (its runs carry a `[judgement]`).
        dir: PathBuf,
        /// Kernel order, first = baseline (default: the first kernel that ran).
        #[arg(long)]
        kernels: Option<String>,
        /// KERNEL=J[/J...][:RULE]: what KERNEL must get (improved, unchanged, worse, unsafe,
        /// undecided) and, with :RULE, the rule that must decide it (its `decided_by`, words
        /// joined by '-': `worse:kernel-log`, `worse:boots-failed`); repeatable.
        #[arg(long = "expect", value_parser = expectation, required = true)]
        expect: Vec<Expectation>,
    },
    /// Kill-test runs: every write the guest saw acknowledged before a completed flush (write
    /// cache off: every acknowledged write) is in the run's image, byte for byte. One
    /// `KILL-RESULT {json}` line per run.
    Kills {
        /// Run directories (each with results.bin and the image).
        #[arg(required = true)]
        runs: Vec<PathBuf>,
        /// The image's file name in each run directory.
        #[arg(long, default_value = "disk.img")]
        image: String,
    },
}

/// One `--expect`: the kernel, the judgements it may get, the rules one of which must decide.
pub type Expectation = (String, Vec<String>, Option<Vec<String>>);

/// `KERNEL=J[/J...][:RULE[,RULE...]]` with each J a judgement's name and each RULE a
/// `decided_by` with `-` for spaces.
fn expectation(s: &str) -> Result<Expectation, String> {
    let (k, rest) = s
        .split_once('=')
        .ok_or("must be KERNEL=JUDGEMENT[/JUDGEMENT...][:RULE]")?;
    let (js, rule) = match rest.split_once(':') {
        Some((js, r)) if !r.is_empty() && !r.split(',').any(str::is_empty) => (
            js,
            Some(
                r.split(',')
                    .map(|r| r.replace('-', " "))
                    .collect::<Vec<_>>(),
            ),
        ),
        Some(_) => return Err("an empty :RULE".into()),
        None => (rest, None),
    };
    let names = ["improved", "unchanged", "worse", "unsafe", "undecided"];
    let js: Vec<String> = js.split('/').map(str::to_string).collect();
    if k.is_empty() || js.iter().any(|j| !names.contains(&j.as_str())) {
        return Err(format!(
            "must be KERNEL=J[/J...][:RULE] with J one of {}",
            names.join(", ")
        ));
    }
    Ok((k.to_string(), js, rule))
}

/// `check judgement`.
fn check_judgement(
    dir: &std::path::Path,
    kernels: Option<&str>,
    expect: &[Expectation],
) -> Result<(), String> {
    let runs = read_runs(dir)?;
    let c =
        gt_compare::compare(&runs, &super::split_kernels(kernels)).map_err(|e| e.to_string())?;
    let js = gt_compare::judgement::judge_all(&c, &runs);
    if js.is_empty() {
        return Err(format!("{}: the runs carry no [judgement]", dir.display()));
    }
    print!("{}", gt_report::judgement_lines(&js));
    let spec = gt_compare::judgement::spec_of(&runs).map_or(0, |s| s.locks.len());
    // A kernel none of whose boots ended has no figures at all: its judgement says why.
    if let Some(k) = js.iter().find(|k| k.boots.ok > 0 && k.locks.len() < spec) {
        return Err(format!(
            "{}: {} of the suite's {spec} per-lock figures (the lock addresses were not recorded)",
            k.kernel,
            k.locks.len()
        ));
    }
    for k in &js {
        for l in &k.locks {
            println!(
                "  {}: `{}` {} -> {}",
                k.kernel,
                l.metric,
                gt_report::fmt_num(l.base_mean),
                gt_report::fmt_num(l.other_mean)
            );
        }
    }
    for (k, want, rule) in expect {
        let got = js
            .iter()
            .find(|j| &j.kernel == k)
            .ok_or_else(|| format!("{k}: not judged in {}", dir.display()))?;
        let rule_ok = rule.as_ref().is_none_or(|r| r.contains(&got.decided_by));
        if !want.iter().any(|w| w == got.judgement.as_str()) || !rule_ok {
            return Err(format!(
                "{k}: {} ({}), expected {}{}",
                got.judgement.as_str(),
                got.decided_by,
                want.join(" or "),
                rule.as_ref()
                    .map_or(String::new(), |r| format!(" ({})", r.join(" or ")))
            ));
        }
    }
    println!(
        "as expected: {}",
        expect
            .iter()
            .map(|(k, w, r)| match r {
                Some(r) => format!("{k} {} ({})", w.join("/"), r.join(" or ")),
                None => format!("{k} {}", w.join("/")),
            })
            .collect::<Vec<_>>()
            .join(", ")
    );
    Ok(())
}

/// `check kills`: one line per run; an error names the first run that is not ok.
fn check_kills(runs: &[PathBuf], image: &str) -> Result<(), String> {
    let mut bad = Vec::new();
    for dir in runs {
        let stream = std::fs::read(dir.join("results.bin"))
            .map_err(|e| format!("{}: {e}", dir.join("results.bin").display()))?;
        let r = gt_results::results::kills::judge(&stream, &dir.join(image))
            .map_err(|e| format!("{}: {e}", dir.display()))?;
        let mut v = serde_json::to_value(&r).map_err(|e| e.to_string())?;
        v["run"] = serde_json::Value::String(dir.display().to_string());
        v["ok"] = serde_json::Value::Bool(r.ok());
        println!("KILL-RESULT {v}");
        if !r.ok() {
            bad.push(dir.display().to_string());
        }
    }
    match bad.first() {
        None => Ok(()),
        Some(first) => Err(format!(
            "{} of {} runs lost or corrupted data, first {first}",
            bad.len(),
            runs.len()
        )),
    }
}

/// A commit id or sha256: 40 or 64 hex digits.
fn hex_id(s: &str) -> Result<String, String> {
    if [40, 64].contains(&s.len()) && s.chars().all(|c| c.is_ascii_hexdigit()) {
        Ok(s.to_string())
    } else {
        Err("must be 40 or 64 hex digits".into())
    }
}

/// A file name: non-empty, no `/`, no whitespace.
fn file_name(s: &str) -> Result<String, String> {
    if s.is_empty() || s.contains('/') || s.contains(char::is_whitespace) {
        Err("must be a file name (no /, no white space)".into())
    } else {
        Ok(s.to_string())
    }
}

/// Runs one `check` command.
pub fn check_cmd(c: CheckCmd) -> ExitCode {
    let r = match c {
        CheckCmd::TreeKernels {
            dir,
            head,
            patch,
            patch_sha256,
            patched_variant,
        } => {
            let want = TreeKernels {
                head,
                patch,
                patch_sha256,
                patched_variant,
            };
            read_runs(&dir)
                .and_then(|runs| check_tree_kernels(&runs, &want, &mut |l| println!("{l}")))
        }
        CheckCmd::Storm {
            storm,
            detect,
            min_cycles,
        } => check_storm(&storm, &detect, min_cycles as f64).map(|l| println!("{l}")),
        CheckCmd::Judgement {
            dir,
            kernels,
            expect,
        } => check_judgement(&dir, kernels.as_deref(), &expect),
        CheckCmd::Kills { runs, image } => check_kills(&runs, &image),
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(e, 1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{Cli, Cmd};
    use clap::Parser;

    #[test]
    fn arguments_are_checked() {
        let h = "0123456789abcdef0123456789abcdef01234567";
        let s = "aa".repeat(32);
        let parse = |extra: &[&str]| {
            let mut v = vec!["guest-tests", "check", "tree-kernels", "d"];
            v.extend_from_slice(extra);
            Cli::try_parse_from(v)
        };
        let good = [
            "--head",
            h,
            "--patch",
            "seed000.patch",
            "--patch-sha256",
            &s,
            "--patched-variant",
            "tree+seed000",
        ];
        match parse(&good).unwrap().cmd {
            Cmd::Check(CheckCmd::TreeKernels {
                head, patch_sha256, ..
            }) => assert_eq!((head.as_str(), patch_sha256), (h, s.clone())),
            c => panic!("{c:?}"),
        }
        for (i, bad) in [(1, "HEAD"), (3, "a/b.patch"), (5, "abc")] {
            let mut v = good;
            v[i] = bad;
            assert!(parse(&v).is_err(), "{bad}");
        }
        assert!(parse(&good[..6]).is_err());
        let storm = |m: &str| {
            Cli::try_parse_from(["guest-tests", "check", "storm", "a", "b", "--min-cycles", m])
        };
        assert!(storm("-1").is_err());
        match storm("5").unwrap().cmd {
            Cmd::Check(CheckCmd::Storm { min_cycles, .. }) => assert_eq!(min_cycles, 5),
            c => panic!("{c:?}"),
        }
    }
}

#[cfg(test)]
mod expect_tests {
    use super::expectation;

    #[test]
    fn an_expectation_names_judgements_and_any_of_several_rules() {
        let (k, js, rules) =
            expectation("a+fix=improved/undecided:mechanism-reduced,effect-unclear").unwrap();
        assert_eq!(k, "a+fix");
        assert_eq!(js, ["improved", "undecided"]);
        assert_eq!(rules.unwrap(), ["mechanism reduced", "effect unclear"]);
        assert_eq!(expectation("k=worse").unwrap().2, None);
        for bad in ["k=better", "=worse", "k=worse:", "k=worse:a,,b", "k"] {
            assert!(expectation(bad).is_err(), "{bad}");
        }
    }
}
