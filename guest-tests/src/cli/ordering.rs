//! `guest-tests ordering KERNEL...`: each kernel's litmus tests under its source's memory model
//! (the `ordering` room), as text, JSON (`--json`: the OrderingCheck of each) or the Markdown
//! table of docs/results/ordering (`--markdown`, with the quiesce storm's results beside the
//! model's answers: `--storm DIR`). Exit 0 when every kernel was checked, whatever the answers;
//! with `--check`, 1 when an answer is not the one its test documents (CI); 2 for bad input (one
//! line, nothing run).

use std::path::PathBuf;
use std::process::ExitCode;

use gt_compare::runs::runs_table;
use gt_images::manifest::Manifest;
use gt_images::spec::KernelSpec;
use gt_images::ImageOptions;
use gt_ordering::selftest::SelfTest;
use gt_ordering::{table, Answer, OrderingCheck, Session};
use gt_report::pyfmt::grouped;
use gt_results::results::load_runs;

use super::{fail, print_json};

/// Arguments of `guest-tests ordering`.
#[derive(Debug, Clone, clap::Args)]
pub struct OrderingArgs {
    /// Kernels: names of images/kernels.toml (LINE(+COMPONENT)*, an alias) or `--kernels`
    /// elements (LABEL=BASE+patch:FILE, LABEL=tree:PATH[@REV]; a user's tests beside the
    /// patch or tree: FILE.litmus, FILE.litmus.d/).
    #[arg(required_unless_present = "every_test")]
    pub kernels: Vec<String>,
    /// Add every line of the manifest that carries tests, and every line + component that
    /// carries tests of its own: each litmus test of images/patches once (what CI runs).
    #[arg(long)]
    pub every_test: bool,
    /// Print each kernel's OrderingCheck as JSON (a list).
    #[arg(long, conflicts_with = "markdown")]
    pub json: bool,
    /// Print the table of docs/results/ordering (one per model, a column per path).
    #[arg(long)]
    pub markdown: bool,
    /// With --markdown: results of the quiesce storm (suite quiesce-storm-unfrozen), shown
    /// beside each kernel K from the runs of K+storm (repeatable).
    #[arg(long, requires = "markdown")]
    pub storm: Vec<PathBuf>,
    /// Run the LKMM's shipped litmus tests again (not the stamp of an earlier pass) and list
    /// each with its documented and its herd7 result.
    #[arg(long)]
    pub selftest: bool,
    /// Exit 1 when a test's answer is not the Result: its header documents.
    #[arg(long)]
    pub check: bool,
    /// Cache directory (default: $VB_CACHE or <repo>/.cache): herd7 and the LKMM.
    #[arg(long)]
    pub cache: Option<PathBuf>,
}

/// Checks the request: the manifest loads, every kernel resolves, every storm directory exists.
/// Returns the manifest and the kernels to check.
fn validate(a: &OrderingArgs) -> Result<(Manifest, Vec<String>), String> {
    let m = Manifest::load(&gt_images::manifest_path()).map_err(|e| e.to_string())?;
    for k in &a.kernels {
        KernelSpec::parse(k).and_then(|s| s.check(&m))?;
    }
    if let Some(d) = a.storm.iter().find(|d| !d.is_dir()) {
        return Err(format!("--storm {}: not a directory", d.display()));
    }
    let mut kernels = a.kernels.clone();
    if a.every_test {
        kernels.extend(every_test(&m));
    }
    Ok((m, kernels))
}

/// `--every-test`: each line with tests, then each line + component with tests of its own.
pub fn every_test(m: &Manifest) -> Vec<String> {
    let mut out: Vec<String> = m
        .lines
        .iter()
        .filter(|l| !l.litmus.is_empty())
        .map(|l| l.name.clone())
        .collect();
    for l in m.lines.iter().filter(|l| l.patch_dir.is_some()) {
        for c in m.components.iter().filter(|c| !c.litmus.is_empty()) {
            let k = format!("{}+{}", l.name, c.name);
            if m.variant(&k).is_ok() {
                out.push(k);
            }
        }
    }
    out
}

/// Runs `guest-tests ordering` (module doc).
pub fn ordering_cmd(a: &OrderingArgs) -> ExitCode {
    let (m, kernels) = match validate(a) {
        Ok(x) => x,
        Err(e) => return fail(e, 2),
    };
    let cache = gt_images::cache_dir(&ImageOptions {
        cache_dir: a.cache.clone(),
        ..Default::default()
    });
    let text = !a.json && !a.markdown;
    let mut session = Session::new(&cache, a.selftest);
    let mut checks = Vec::new();
    for k in &kernels {
        let before = session.models().len();
        let c = match session.check(&m, k) {
            Ok(c) => c,
            Err(e) => return fail(format!("ordering of {k}: {e}"), e.exit_code()),
        };
        if text {
            for model in &session.models()[before..] {
                print_selftest(&model.label, &model.selftest, a.selftest);
            }
            print_check(&c);
        }
        checks.push(c);
    }
    if a.json {
        let code = print_json(&checks);
        if code != ExitCode::SUCCESS {
            return code;
        }
    } else if a.markdown {
        print!("{}", markdown(&checks, &a.storm));
    }
    let unexpected: Vec<String> = checks
        .iter()
        .flat_map(|c| c.unexpected().into_iter().map(move |o| (c, o)))
        .map(|(c, o)| {
            format!(
                "{} {}: {} (its header says {})",
                c.kernel,
                o.test,
                o.answer,
                o.expected.map_or("-".into(), |e| e.to_string())
            )
        })
        .collect();
    if a.check && !unexpected.is_empty() {
        return fail(
            format!(
                "answers differ from the committed ones: {}",
                unexpected.join("; ")
            ),
            1,
        );
    }
    ExitCode::SUCCESS
}

fn print_selftest(model: &str, st: &SelfTest, each: bool) {
    if st.from_stamp {
        println!("{model}: its {} shipped litmus tests gave their documented results before (stamp in the cache; --selftest runs them again)", st.tests);
        return;
    }
    println!(
        "{model}: {} of {} shipped litmus tests give their documented result ({:.1} s)",
        st.tests - st.failures().len(),
        st.tests,
        st.secs
    );
    if each {
        for r in &st.results {
            let mark = if r.ok { "ok  " } else { "FAIL" };
            println!(
                "  {mark} {:<60} documented {:<18} herd7 {}",
                r.test, r.documented, r.got
            );
        }
    }
}

fn print_check(c: &OrderingCheck) {
    println!("{}: {}", c.kernel, c.model);
    let w = c.outcomes.iter().map(|o| o.test.len()).max().unwrap_or(0);
    let wc = c
        .outcomes
        .iter()
        .map(|o| o.component.len())
        .max()
        .unwrap_or(0);
    for o in &c.outcomes {
        let mut line = format!(
            "  {:<wc$}  {:<w$}  {:<15} {}",
            o.component, o.test, o.path, o.answer
        );
        if o.answer == Answer::Sometimes {
            line.push_str("  (the model allows the tested outcome)");
        }
        if let Some(e) = o.expected.filter(|e| *e != o.answer) {
            line.push_str(&format!("  ** its header says {e} **"));
        }
        println!("{line}");
    }
    if let Some(d) = &c.derived {
        println!("  derived: {d}");
    }
    if !c.unchecked.is_empty() {
        println!(
            "  ordering not checked: {} (a part that changes code and carries no litmus test; \
             the tests above do not vouch for it)",
            c.unchecked.join("; ")
        );
    }
}

/// The docs table; with storm results, one more column per kernel from its `+storm` runs.
fn markdown(checks: &[OrderingCheck], storm: &[PathBuf]) -> String {
    if storm.is_empty() {
        return table::markdown(checks, &[], &|_| Vec::new());
    }
    let runs = load_runs(storm).runs;
    let metrics: Vec<String> = ["storm_cycles", "storm_stranded", "storm_stuck"]
        .iter()
        .map(|m| format!("quiesce-storm.{m}"))
        .collect();
    let t = runs_table(&runs, &metrics);
    let fill = |c: &OrderingCheck| {
        let k = if c.kernel.ends_with("+storm") {
            c.kernel.clone()
        } else {
            format!("{}+storm", c.kernel)
        };
        let sum = |m: &str| t.totals.iter().find(|x| x.kernel == k && x.metric == m);
        match (sum(&metrics[0]), sum(&metrics[1]), sum(&metrics[2])) {
            (Some(cy), lost, stuck) => vec![format!(
                "`{k}`: {} boots, {} cycles, {} lost runs, {} stuck I/Os",
                cy.n,
                grouped(cy.sum),
                lost.map_or("-".into(), |x| grouped(x.sum)),
                stuck.map_or("-".into(), |x| grouped(x.sum)),
            )],
            _ => vec!["not run".into()],
        }
    };
    let head = ["unfrozen quiesce storm (scheduler none)".to_string()];
    table::markdown(checks, &head, &fill)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn args(extra: &[&str]) -> Result<OrderingArgs, clap::Error> {
        let mut v = vec!["guest-tests", "ordering"];
        v.extend_from_slice(extra);
        match super::super::Cli::try_parse_from(v)?.cmd {
            super::super::Cmd::Ordering(a) => Ok(*a),
            other => panic!("not ordering: {other:?}"),
        }
    }

    #[test]
    fn bad_input_is_refused_before_anything_runs() {
        assert!(args(&[]).is_err(), "a kernel or --every-test is needed");
        assert!(
            args(&["rt", "--storm", "x"]).is_err(),
            "--storm needs --markdown"
        );
        assert!(args(&["rt", "--json", "--markdown"]).is_err());
        for (extra, want) in [
            (vec!["nope"], "not a kernel line"),
            (vec!["rt+seed000-v8"], "does not exist on line 'rt'"),
            (vec!["m=rt+patch:/nonexistent.patch"], "not found"),
            (
                vec!["rt", "--markdown", "--storm", "/nonexistent"],
                "not a directory",
            ),
        ] {
            let e = validate(&args(&extra).unwrap()).err().unwrap_or_default();
            assert!(e.contains(want), "{extra:?}: {e}");
            assert_eq!(e.lines().count(), 1, "{e}");
        }
    }

    #[test]
    fn every_test_names_each_carrier_once() {
        let (m, k) = validate(&args(&["--every-test"]).unwrap()).unwrap();
        for want in [
            "rt",
            "rt73",
            "debian-rt",
            "debian-rt73",
            "rt+seed000",
            "rt+seed000-paired",
            "rt+seed000-v7",
            "rt+nobarrier",
            "rt73+seed000",
            "rt73+seed000-paired",
            "rt73+seed000-v8",
            "rt73+nobarrier",
        ] {
            assert!(k.iter().any(|x| x == want), "{want} missing from {k:?}");
        }
        assert!(
            !k.iter()
                .any(|x| x == "rt+seed000-v8" || x.ends_with("+storm")),
            "{k:?}"
        );
        // Every litmus file of images/patches is reached by one of them.
        let mut reached = std::collections::BTreeSet::new();
        for name in &k {
            let p = gt_ordering::plan::plan(&m, &KernelSpec::parse(name).unwrap()).unwrap();
            reached.extend(p.tests.into_iter().map(|t| t.file));
        }
        for line in ["6.12", "7.3"] {
            let dir = m.dir.join("patches").join(line).join("litmus");
            for e in std::fs::read_dir(&dir).unwrap() {
                let f = e.unwrap().path();
                if f.extension().is_none_or(|x| x != "litmus") {
                    continue; // points.toml
                }
                assert!(
                    reached.contains(&f),
                    "{} not run by --every-test",
                    f.display()
                );
            }
        }
    }
}
