//! What ci/tree-kernel-smoke.sh asserts of its runs' results.json (`guest-tests check
//! tree-kernels` and `check storm`).
//!
//! Contract:
//! 1. The runs of a directory are its `*/results.json` (one level down, names not starting with
//!    a dot, as a shell glob sees them), in the order of those paths as text. A file that does
//!    not read as a [`RunResult`] is an error naming it.
//! 2. Tree kernels ([`check_tree_kernels`]): exactly 2 runs; in order, each must be `ok`, its
//!    kernel's inputs must have one starting `source=git head=HEAD dirty=false`, and it must
//!    have an input starting `patch=NAME sha256=SHA` exactly when its kernel variant is the
//!    patched one; each run that passed says `VARIANT RELEASE BZIMAGE[..12] ok`. Then the two
//!    bzImages' sha256 must differ.
//! 3. Storm ([`check_storm`]): the storm directory holds exactly 1 run, `ok`, with
//!    `quiesce-storm.storm_cycles` at least the minimum and `storm_stranded` and `storm_stuck`
//!    0; then the detect directory holds exactly 1 run, `failed` with a reason containing `not
//!    completed within`, `storm_stranded` and `storm_stuck` 1. A missing metric fails. The line
//!    said: `unfrozen storm: C cycles, I I/Os, no lost run; self-test caught after D cycles`
//!    (counts truncated to integers).
//! 4. The first condition that does not hold is the error (one line); the conditions and their
//!    order are those of the Python the script had before (issue 37).

use std::path::{Path, PathBuf};

use super::{RunResult, RunStatus, RESULTS_FILE};

/// The results.json files of `dir` (rule 1).
pub fn run_files(dir: &Path) -> Result<Vec<PathBuf>, String> {
    let rd = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut found: Vec<(String, PathBuf)> = Vec::new();
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let p = e.path().join(RESULTS_FILE);
        if !name.starts_with('.') && p.exists() {
            found.push((format!("{name}/{RESULTS_FILE}"), p));
        }
    }
    found.sort();
    Ok(found.into_iter().map(|(_, p)| p).collect())
}

/// Every run of `dir` (rule 1).
pub fn read_runs(dir: &Path) -> Result<Vec<RunResult>, String> {
    run_files(dir)?
        .iter()
        .map(|p| RunResult::read(p).map_err(|e| e.to_string()))
        .collect()
}

/// The one run of `dir` (rules 1, 3).
fn only_run(dir: &Path) -> Result<RunResult, String> {
    let mut runs = read_runs(dir)?;
    match runs.len() {
        1 => Ok(runs.remove(0)),
        n => Err(format!("{}: {n} runs, expected 1", dir.display())),
    }
}

/// What the tree kernels must show (rule 2).
#[derive(Debug, Clone)]
pub struct TreeKernels {
    /// The tree's commit.
    pub head: String,
    /// The patch's file name and sha256.
    pub patch: String,
    pub patch_sha256: String,
    /// The kernel variant built with the patch.
    pub patched_variant: String,
}

fn state(s: &RunStatus) -> String {
    match s {
        RunStatus::Ok => "ok".into(),
        RunStatus::Failed { reason } => format!("failed: {reason}"),
        RunStatus::TimedOut { after_s } => format!("timed out after {after_s} s"),
    }
}

/// Checks the tree kernels' runs (rule 2); `say` gets each passed run's line.
pub fn check_tree_kernels(
    runs: &[RunResult],
    want: &TreeKernels,
    say: &mut dyn FnMut(String),
) -> Result<(), String> {
    let [a, b] = runs else {
        return Err(format!("{} runs, expected 2", runs.len()));
    };
    let source = format!("source=git head={} dirty=false", want.head);
    let patch = format!("patch={} sha256={}", want.patch, want.patch_sha256);
    for r in [a, b] {
        let k = &r.provenance.kernel;
        if !r.status.is_ok() {
            return Err(format!("{}: not ok: {}", k.variant, state(&r.status)));
        }
        if !k.inputs.iter().any(|l| l.starts_with(&source)) {
            return Err(format!(
                "{}: no input `{source}` in {:?}",
                k.variant, k.inputs
            ));
        }
        let has_patch = k.inputs.iter().any(|l| l.starts_with(&patch));
        if has_patch != (k.variant == want.patched_variant) {
            let what = if has_patch { "has" } else { "lacks" };
            return Err(format!(
                "{}: {what} the input `{patch}` in {:?}",
                k.variant, k.inputs
            ));
        }
        let bz: String = k.bzimage_sha256.chars().take(12).collect();
        say(format!("{} {} {bz} ok", k.variant, k.release));
    }
    let sha = |r: &RunResult| r.provenance.kernel.bzimage_sha256.clone();
    if sha(a) == sha(b) {
        return Err(format!("both kernels have the bzImage sha256 {}", sha(a)));
    }
    Ok(())
}

const CYCLES: &str = "quiesce-storm.storm_cycles";
const STRANDED: &str = "quiesce-storm.storm_stranded";
const STUCK: &str = "quiesce-storm.storm_stuck";
const IOS: &str = "quiesce-storm.storm_ios";

fn metric(r: &RunResult, name: &str, which: &str) -> Result<f64, String> {
    r.metric(name)
        .ok_or_else(|| format!("{which} run: no metric {name}"))
}

/// A count as Python's `%d` prints a float: truncated (rule 3).
fn count(x: f64) -> Result<String, String> {
    if !x.is_finite() {
        return Err(format!("{x} is not a count"));
    }
    let t = x.trunc();
    Ok(if t == 0.0 {
        "0".into()
    } else {
        format!("{t:.0}")
    })
}

fn check_storm_run(s: &RunResult, min_cycles: f64) -> Result<(), String> {
    if !s.status.is_ok() {
        return Err(format!("storm run: not ok: {}", state(&s.status)));
    }
    let cycles = metric(s, CYCLES, "storm")?;
    if cycles < min_cycles || cycles.is_nan() {
        return Err(format!("storm run: {CYCLES} {cycles} < {min_cycles}"));
    }
    let (stranded, stuck) = (metric(s, STRANDED, "storm")?, metric(s, STUCK, "storm")?);
    if stranded != 0.0 || stuck != 0.0 {
        return Err(format!(
            "storm run: {STRANDED} {stranded}, {STUCK} {stuck}, expected 0 and 0"
        ));
    }
    Ok(())
}

fn check_detect_run(d: &RunResult) -> Result<(), String> {
    let RunStatus::Failed { reason } = &d.status else {
        return Err(format!("detect run: {}, expected failed", state(&d.status)));
    };
    let (stranded, stuck) = (metric(d, STRANDED, "detect")?, metric(d, STUCK, "detect")?);
    if stranded != 1.0 || stuck != 1.0 {
        return Err(format!(
            "detect run: {STRANDED} {stranded}, {STUCK} {stuck}, expected 1 and 1"
        ));
    }
    if !reason.contains("not completed within") {
        return Err(format!(
            "detect run: reason `{reason}` lacks `not completed within`"
        ));
    }
    Ok(())
}

/// Checks the storm and its detector's self-test (rule 3); the line to say.
pub fn check_storm(storm: &Path, detect: &Path, min_cycles: f64) -> Result<String, String> {
    let s = only_run(storm)?;
    check_storm_run(&s, min_cycles)?;
    let d = only_run(detect)?;
    check_detect_run(&d)?;
    Ok(format!(
        "unfrozen storm: {} cycles, {} I/Os, no lost run; self-test caught after {} cycles",
        count(metric(&s, CYCLES, "storm")?)?,
        count(metric(&s, IOS, "storm")?)?,
        count(metric(&d, CYCLES, "detect")?)?
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::{Provenance, RunInfo, Timings};

    const HEAD: &str = "0123456789abcdef0123456789abcdef01234567";
    const PSHA: &str = "aa00000000000000000000000000000000000000000000000000000000000000";

    fn run(status: RunStatus, metrics: &[(&str, f64)]) -> RunResult {
        let mut r = RunResult::failed(
            RunInfo::default(),
            Provenance::default(),
            "",
            Timings::default(),
        );
        r.set_status(status);
        r.metrics = metrics.iter().map(|(k, v)| (k.to_string(), *v)).collect();
        r
    }

    fn kernel(variant: &str, bz: &str, inputs: &[String]) -> RunResult {
        let mut r = run(RunStatus::Ok, &[]);
        let k = &mut r.provenance.kernel;
        k.variant = variant.into();
        k.release = "6.12.117".into();
        k.bzimage_sha256 = bz.into();
        k.inputs = inputs.to_vec();
        r
    }

    fn want() -> TreeKernels {
        TreeKernels {
            head: HEAD.into(),
            patch: "seed000.patch".into(),
            patch_sha256: PSHA.into(),
            patched_variant: "tree+seed000".into(),
        }
    }

    fn inputs(patch: bool) -> Vec<String> {
        let mut v = vec![
            "spec=tree:/x@HEAD".to_string(),
            format!("source=git head={HEAD} dirty=false changes=e3b0"),
        ];
        if patch {
            v.push(format!("patch=seed000.patch sha256={PSHA}"));
        }
        v
    }

    fn pair() -> Vec<RunResult> {
        vec![
            kernel("tree", "b0b0b0b0b0b0b0b0ffff", &inputs(false)),
            kernel("tree+seed000", "c1c1c1c1c1c1c1c1ffff", &inputs(true)),
        ]
    }

    fn check(runs: &[RunResult]) -> (Result<(), String>, Vec<String>) {
        let mut said = Vec::new();
        let r = check_tree_kernels(runs, &want(), &mut |l| said.push(l));
        (r, said)
    }

    #[test]
    fn good_tree_kernels_pass_and_say_each_run() {
        let (r, said) = check(&pair());
        assert_eq!(r, Ok(()));
        assert_eq!(
            said,
            [
                "tree 6.12.117 b0b0b0b0b0b0 ok",
                "tree+seed000 6.12.117 c1c1c1c1c1c1 ok"
            ]
        );
    }

    #[test]
    fn each_tree_condition_fails_alone() {
        let (r, said) = check(&pair()[..1]);
        assert_eq!(r.unwrap_err(), "1 runs, expected 2");
        assert!(said.is_empty());

        let mut p = pair();
        p[1].set_status(RunStatus::TimedOut { after_s: 600.0 });
        let (r, said) = check(&p);
        assert_eq!(
            r.unwrap_err(),
            "tree+seed000: not ok: timed out after 600 s"
        );
        assert_eq!(said.len(), 1);

        let mut p = pair();
        p[0].provenance.kernel.inputs[1] = format!("source=git head={HEAD} dirty=true");
        assert!(check(&p).0.unwrap_err().starts_with(
            "tree: no input `source=git head=0123456789abcdef0123456789abcdef01234567 dirty=false` in"
        ));

        let mut p = pair();
        p[0].provenance.kernel.inputs = inputs(true);
        assert!(check(&p)
            .0
            .unwrap_err()
            .starts_with("tree: has the input `patch="));
        let mut p = pair();
        p[1].provenance.kernel.inputs = inputs(false);
        assert!(check(&p)
            .0
            .unwrap_err()
            .starts_with("tree+seed000: lacks the input `patch=seed000.patch sha256=aa00"));
        // Another sha256 of the patch is not the patch.
        let mut p = pair();
        p[1].provenance.kernel.inputs[2] = "patch=seed000.patch sha256=bb".into();
        assert!(check(&p).0.is_err());

        let mut p = pair();
        p[1].provenance.kernel.bzimage_sha256 = "b0b0b0b0b0b0b0b0ffff".into();
        let (r, said) = check(&p);
        assert_eq!(
            r.unwrap_err(),
            "both kernels have the bzImage sha256 b0b0b0b0b0b0b0b0ffff"
        );
        assert_eq!(said.len(), 2);
    }

    fn storm_ok() -> RunResult {
        run(
            RunStatus::Ok,
            &[
                (CYCLES, 12345.0),
                (IOS, 67890.7),
                (STRANDED, 0.0),
                (STUCK, 0.0),
            ],
        )
    }

    fn detect_ok() -> RunResult {
        run(
            RunStatus::Failed {
                reason: "hctx 3: dispatch not completed within 5 s".into(),
            },
            &[(CYCLES, 42.0), (STRANDED, 1.0), (STUCK, 1.0)],
        )
    }

    /// Writes the runs as DIR/storm/r0 and DIR/detect/r0 and checks them.
    fn storm_check(storm: &RunResult, detect: &RunResult) -> Result<String, String> {
        let d = tempfile::tempdir().unwrap();
        storm.write(&d.path().join("storm/r0")).unwrap();
        detect.write(&d.path().join("detect/r0")).unwrap();
        check_storm(&d.path().join("storm"), &d.path().join("detect"), 10_000.0)
    }

    #[test]
    fn a_good_storm_and_a_caught_self_test_pass() {
        assert_eq!(
            storm_check(&storm_ok(), &detect_ok()).unwrap(),
            "unfrozen storm: 12345 cycles, 67890 I/Os, no lost run; self-test caught after 42 cycles"
        );
    }

    #[test]
    fn each_storm_condition_fails_alone() {
        let with = |r: &RunResult, k: &str, v: f64| {
            let mut r = r.clone();
            r.metrics.insert(k.into(), v);
            r
        };
        let without = |r: &RunResult, k: &str| {
            let mut r = r.clone();
            r.metrics.remove(k);
            r
        };
        // The minimum is inclusive.
        assert!(storm_check(&with(&storm_ok(), CYCLES, 10_000.0), &detect_ok()).is_ok());
        for (s, d, want) in [
            (
                with(&storm_ok(), CYCLES, 9_999.0),
                detect_ok(),
                "storm run: quiesce-storm.storm_cycles 9999 < 10000",
            ),
            (
                with(&storm_ok(), STRANDED, 1.0),
                detect_ok(),
                "storm run: quiesce-storm.storm_stranded 1, quiesce-storm.storm_stuck 0, expected 0 and 0",
            ),
            (
                with(&storm_ok(), STUCK, 2.0),
                detect_ok(),
                "storm run: quiesce-storm.storm_stranded 0, quiesce-storm.storm_stuck 2, expected 0 and 0",
            ),
            (
                without(&storm_ok(), IOS),
                detect_ok(),
                "storm run: no metric quiesce-storm.storm_ios",
            ),
            (
                without(&storm_ok(), CYCLES),
                detect_ok(),
                "storm run: no metric quiesce-storm.storm_cycles",
            ),
            (
                run(RunStatus::Failed { reason: "boot".into() }, &[]),
                detect_ok(),
                "storm run: not ok: failed: boot",
            ),
            (
                storm_ok(),
                run(RunStatus::Ok, &[(STRANDED, 1.0), (STUCK, 1.0)]),
                "detect run: ok, expected failed",
            ),
            (
                storm_ok(),
                with(&detect_ok(), STUCK, 0.0),
                "detect run: quiesce-storm.storm_stranded 1, quiesce-storm.storm_stuck 0, expected 1 and 1",
            ),
            (
                storm_ok(),
                without(&detect_ok(), STRANDED),
                "detect run: no metric quiesce-storm.storm_stranded",
            ),
            (
                storm_ok(),
                run(
                    RunStatus::Failed { reason: "fio failed".into() },
                    &[(CYCLES, 1.0), (STRANDED, 1.0), (STUCK, 1.0)],
                ),
                "detect run: reason `fio failed` lacks `not completed within`",
            ),
        ] {
            assert_eq!(storm_check(&s, &d).unwrap_err(), want);
        }
    }

    #[test]
    fn runs_are_the_first_level_results_in_path_text_order() {
        let d = tempfile::tempdir().unwrap();
        let r = storm_ok();
        for sub in ["b", "a", "a-b", ".hidden", "c/deeper"] {
            r.write(&d.path().join(sub)).unwrap();
        }
        r.write(d.path()).unwrap();
        std::fs::create_dir(d.path().join("empty")).unwrap();
        let names: Vec<String> = run_files(d.path())
            .unwrap()
            .iter()
            .map(|p| p.strip_prefix(d.path()).unwrap().display().to_string())
            .collect();
        // "a-b/" sorts before "a/" as text ('-' < '/'), as Python's sorted(glob) has it.
        assert_eq!(
            names,
            ["a-b/results.json", "a/results.json", "b/results.json"]
        );
        assert_eq!(
            check_storm(d.path(), d.path(), 1.0).unwrap_err(),
            format!("{}: 3 runs, expected 1", d.path().display())
        );
    }

    #[test]
    fn an_unreadable_results_file_is_named() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir(d.path().join("r0")).unwrap();
        let p = d.path().join("r0").join(RESULTS_FILE);
        std::fs::write(&p, "{").unwrap();
        let e = read_runs(d.path()).unwrap_err();
        assert!(e.starts_with(&p.display().to_string()), "{e}");
        let e = read_runs(&d.path().join("nope")).unwrap_err();
        assert!(
            e.starts_with(&d.path().join("nope").display().to_string()),
            "{e}"
        );
    }
}
