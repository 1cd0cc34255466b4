//! The LKMM's own litmus tests (`tools/memory-model/litmus-tests/*.litmus`, each with its
//! documented `Result:`), run before a model judges anything: the check that herd7 and the
//! model work here. A test passes on the terms of the kernel's own
//! tools/memory-model/scripts/judgelitmus.sh: its answer is the documented one (`Maybe`: any);
//! `DEADLOCK` wants `Never 0 0` and an undocumented `Never 0 0` fails; a documented `DATARACE`
//! and herd7's `Flag data-race` must come together, and when they do a different answer is
//! forgiven.
//!
//! A model directory in the cache (immutable: one per package version, or per commit) keeps a
//! stamp per herd7 version once every test passed, so later runs skip the ~1 s of herd7 runs;
//! [`selftest`] with `force` runs them again.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::herd::{Herd, Observation};
use super::litmus::{parse_header, Documented, Header};
use super::OrderingError;

/// One shipped test against its documented result.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Shipped {
    pub test: String,
    /// The header's `Result:` line's words (`Never`, `Sometimes DATARACE`), or `-`.
    pub documented: String,
    /// herd7's answer (`Sometimes 1 3`, `+ data-race`).
    pub got: String,
    pub ok: bool,
}

/// The self-test of one model.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct SelfTest {
    pub tests: usize,
    /// Each test's result (empty when the stamp said they passed before).
    pub results: Vec<Shipped>,
    pub secs: f64,
    /// The stamp of an earlier run was taken instead of running them.
    pub from_stamp: bool,
}

impl SelfTest {
    pub fn failures(&self) -> Vec<&Shipped> {
        self.results.iter().filter(|r| !r.ok).collect()
    }
}

/// Whether `got` is what `h` documents (module doc).
pub fn judge(h: &Header, got: &Observation) -> bool {
    if h.datarace != got.datarace && h.result.is_some() {
        return false;
    }
    match h.result {
        None | Some(Documented::Maybe) => true,
        Some(Documented::Deadlock) => got.vacuous(),
        Some(Documented::Answer(_)) if got.vacuous() => false,
        Some(Documented::Answer(v)) => v == got.verdict || got.datarace,
    }
}

fn documented(h: &Header) -> String {
    let word = match h.result {
        None => return "-".into(),
        Some(Documented::Maybe) => "Maybe".to_string(),
        Some(Documented::Deadlock) => "DEADLOCK".to_string(),
        Some(Documented::Answer(v)) => v.to_string(),
    };
    if h.datarace {
        format!("{word} DATARACE")
    } else {
        word
    }
}

fn shipped_tests(model: &Path) -> Result<Vec<PathBuf>, OrderingError> {
    let dir = model.join("litmus-tests");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map_err(|e| OrderingError::Input(format!("{}: {e}", dir.display())))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "litmus"))
        .collect();
    files.sort();
    if files.is_empty() {
        return Err(OrderingError::Input(format!(
            "{}: no shipped litmus tests",
            dir.display()
        )));
    }
    Ok(files)
}

/// Runs (or takes the stamp of) the shipped tests of the model in `model`; `stamp`: whether
/// this directory may keep a stamp (it lives in the cache).
pub fn selftest(
    herd: &Herd,
    model: &Path,
    stamp: bool,
    force: bool,
    timeout: Duration,
) -> Result<SelfTest, OrderingError> {
    let files = shipped_tests(model)?;
    let stamp_file = model.join(format!(".selftest-herd7-{}", herd.version));
    let want = format!("ok {}\n", files.len());
    if stamp && !force && std::fs::read_to_string(&stamp_file).ok().as_deref() == Some(&want) {
        return Ok(SelfTest {
            tests: files.len(),
            results: Vec::new(),
            secs: 0.0,
            from_stamp: true,
        });
    }
    let start = Instant::now();
    let mut results = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f)
            .map_err(|e| OrderingError::Input(format!("{}: {e}", f.display())))?;
        let h = parse_header(&text)
            .map_err(|e| OrderingError::Input(format!("{}: {e}", f.display())))?;
        let got = herd.check(model, f, timeout)?;
        let race = if got.datarace { " + data-race" } else { "" };
        results.push(Shipped {
            test: h.name.clone(),
            documented: documented(&h),
            got: format!("{} {} {}{race}", got.verdict, got.positive, got.negative),
            ok: judge(&h, &got),
        });
    }
    let st = SelfTest {
        tests: files.len(),
        results,
        secs: start.elapsed().as_secs_f64(),
        from_stamp: false,
    };
    if stamp && st.failures().is_empty() {
        let _ = std::fs::write(&stamp_file, want);
    }
    Ok(st)
}

#[cfg(test)]
mod tests {
    use super::super::litmus::ExistsAnswer;
    use super::*;

    fn obs(v: ExistsAnswer, p: u64, n: u64, race: bool) -> Observation {
        Observation {
            name: "t".into(),
            verdict: v,
            positive: p,
            negative: n,
            datarace: race,
        }
    }

    fn h(text: &str) -> Header {
        parse_header(&format!("C t\n(* {text} *)")).unwrap()
    }

    #[test]
    fn judges_as_the_kernels_script_does() {
        use ExistsAnswer::*;
        assert!(judge(&h("Result: Never"), &obs(Never, 0, 3, false)));
        assert!(!judge(&h("Result: Never"), &obs(Sometimes, 1, 3, false)));
        assert!(!judge(&h("Result: Sometimes"), &obs(Never, 0, 3, false)));
        assert!(judge(&h("Result: Always"), &obs(Always, 3, 0, false)));
        // Never 0 0: only a documented deadlock.
        assert!(!judge(&h("Result: Never"), &obs(Never, 0, 0, false)));
        assert!(judge(&h("Result: DEADLOCK"), &obs(Never, 0, 0, false)));
        assert!(!judge(&h("Result: DEADLOCK"), &obs(Never, 0, 2, false)));
        // Data races: both or neither; with both, the answer is forgiven.
        assert!(!judge(
            &h("Result: Sometimes DATARACE"),
            &obs(Sometimes, 1, 1, false)
        ));
        assert!(!judge(&h("Result: Sometimes"), &obs(Sometimes, 1, 1, true)));
        assert!(judge(
            &h("Result: Never DATARACE"),
            &obs(Sometimes, 1, 1, true)
        ));
        assert!(judge(&h("Result: Maybe"), &obs(Sometimes, 1, 1, false)));
        assert!(judge(&h("no result"), &obs(Sometimes, 1, 1, true)));
        assert_eq!(documented(&h("Result: Never DATARACE")), "Never DATARACE");
        assert_eq!(documented(&h("x")), "-");
    }
}
