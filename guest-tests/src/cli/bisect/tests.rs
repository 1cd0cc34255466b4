use super::*;
use crate::cli::{Cli, Cmd};
use clap::Parser;

fn tree() -> tempfile::TempDir {
    let d = gt_images::gitsrc::testtree::kernel_tree("good one");
    let git = |args: &[&str]| gt_images::gitsrc::testtree::git(d.path(), args);
    git(&["tag", "g"]);
    for i in 0..3 {
        std::fs::write(d.path().join("f.c"), format!("int x = {i};\n")).unwrap();
        git(&["add", "."]);
        git(&["commit", "-qm", &format!("change {i}")]);
    }
    d
}

fn cfg(extra: &[&str]) -> Result<BisectConfig, String> {
    let mut v = vec!["guest-tests", "bisect"];
    v.extend_from_slice(extra);
    match Cli::try_parse_from(v).unwrap().cmd {
        Cmd::Bisect(a) => BisectConfig::try_from(*a),
        _ => unreachable!(),
    }
}

#[test]
fn commits_are_listed_oldest_first_from_the_good_end() {
    let t = tree();
    let out = t.path().join("out");
    let tp = t.path().to_str().unwrap();
    let o = out.to_str().unwrap();
    let c = cfg(&[
        "--tree",
        tp,
        "--good",
        "g",
        "--bad",
        "HEAD",
        "--suite",
        "seed000-lockwait",
        "--out",
        o,
    ])
    .unwrap();
    let subjects: Vec<&str> = c.cands.iter().map(|(c, _)| c.subject.as_str()).collect();
    assert_eq!(subjects, ["good one", "change 0", "change 1", "change 2"]);
    assert!(c.cands[3].1.text.contains(&format!("@{}", c.cands[3].0.id)));
    assert_eq!(c.boot.metric, "rt-lock-randread.qlockaddr_count_per_kio");
    assert!(!out.exists(), "validation creates nothing");
}

#[test]
fn bad_bisect_input_is_one_line_and_creates_nothing() {
    let t = tree();
    let out = t.path().join("out");
    let tp = t.path().to_str().unwrap();
    let o = out.to_str().unwrap();
    let base = ["--tree", tp, "--suite", "seed000-lockwait", "--out", o];
    for (extra, needle) in [
        (vec!["--good", "g"], "needs --good REV and --bad REV"),
        (vec!["--good", "HEAD", "--bad", "g"], "not an ancestor"),
        (vec!["--good", "g", "--bad", "nope"], "is not a commit"),
        (vec!["--good", "g", "--bad", "g"], "nothing to bisect"),
        (
            vec!["--good", "g", "--bad", "HEAD", "--alpha", "0.7"],
            "--alpha",
        ),
        (
            vec![
                "--good",
                "g",
                "--bad",
                "HEAD",
                "--max-boots",
                "1",
                "--min-boots",
                "2",
            ],
            "--min-boots",
        ),
        (
            vec!["--good", "g", "--bad", "HEAD", "--metric", "nope"],
            "registry",
        ),
        (
            vec!["--good", "g", "--bad", "HEAD", "--ref-boots", "1"],
            "--ref-boots",
        ),
    ] {
        let mut e: Vec<&str> = base.to_vec();
        e.extend(extra.iter());
        let err = cfg(&e).err().unwrap();
        assert!(err.contains(needle), "{extra:?}: {err}");
        assert!(!err.contains('\n'));
        assert!(!out.exists());
    }
    let err = cfg(&["--suite", "seed000-lockwait", "--good", "g", "--bad", "h"])
        .err()
        .unwrap();
    assert!(err.contains("--tree"), "{err}");
    let p = t.path().join("empty-series");
    std::fs::create_dir(&p).unwrap();
    let err = cfg(&[
        "--suite",
        "seed000-lockwait",
        "--patches",
        p.to_str().unwrap(),
    ])
    .err()
    .unwrap();
    assert!(err.contains("no patches"), "{err}");
}

#[test]
fn bad_judge_input_is_one_line_and_creates_nothing() {
    let t = tree();
    let refs = tempfile::tempdir().unwrap();
    let metric = "rt-lock-randread.qlockaddr_count_per_kio";
    for (i, (k, v)) in [("g", 0.0), ("g", 0.0), ("b", 9.0), ("b", 14.0)]
        .iter()
        .enumerate()
    {
        let mut r = gt_compare::fixtures::run(k, None, &[(metric, *v)]);
        r.info.suite = "seed000-lockwait".into();
        r.info.repeat = i as u32;
        r.info.run_dir = refs.path().join(k).join(format!("r{i}"));
        r.write(&refs.path().join(k).join(format!("r{i}"))).unwrap();
    }
    let (g, b) = (refs.path().join("g"), refs.path().join("b"));
    let tp = t.path().to_str().unwrap();
    let judge = |extra: &[&str]| {
        let mut argv = vec!["guest-tests", "judge", "--suite", "seed000-lockwait"];
        argv.extend_from_slice(extra);
        match Cli::try_parse_from(argv).unwrap().cmd {
            Cmd::Judge(a) => prepare_judge(*a).map(|_| ()),
            _ => unreachable!(),
        }
    };
    let (gs, bs) = (g.to_str().unwrap(), b.to_str().unwrap());
    let inside = t.path().join("results-here");
    let outside = refs.path().join("out");
    for (extra, needle) in [
        (
            vec!["--good", gs, "--bad", "/nonexistent", "--tree", tp],
            "not a directory",
        ),
        (vec!["--good", gs, "--bad", gs, "--tree", "/"], "--tree"),
        (
            vec![
                "--good",
                gs,
                "--bad",
                bs,
                "--tree",
                tp,
                "--out",
                inside.to_str().unwrap(),
            ],
            "inside the tree",
        ),
    ] {
        let e = judge(&extra).unwrap_err();
        assert!(e.contains(needle), "{extra:?}: {e}");
        assert_eq!(e.lines().count(), 1, "{e}");
    }
    assert!(!inside.exists());
    judge(&[
        "--good",
        gs,
        "--bad",
        bs,
        "--tree",
        tp,
        "--out",
        outside.to_str().unwrap(),
    ])
    .unwrap();
}

#[test]
fn a_patch_series_gives_one_candidate_per_prefix() {
    let t = tree();
    let dir = t.path().join("queue");
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join("b.patch"), "Subject: [PATCH 2/2] second\n").unwrap();
    std::fs::write(dir.join("a.patch"), "Subject: [PATCH 1/2] first\n").unwrap();
    let out = t.path().join("out");
    let c = cfg(&[
        "--suite",
        "seed000-lockwait",
        "--patches",
        dir.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ])
    .unwrap();
    let ids: Vec<&str> = c.cands.iter().map(|(c, _)| c.id.as_str()).collect();
    assert_eq!(ids, ["base", "p01-a.patch", "p02-b.patch"]);
    assert_eq!(c.cands[1].0.subject, "[PATCH 1/2] first");
    assert_eq!(c.cands[2].1.patches.len(), 2);
    assert_eq!(c.cands[0].1.base_variant(), "rt");
    // A series file decides the order.
    std::fs::write(dir.join("series"), "# order\nb.patch\na.patch\n").unwrap();
    let c = cfg(&[
        "--suite",
        "seed000-lockwait",
        "--patches",
        dir.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ])
    .unwrap();
    assert_eq!(c.cands[1].0.id, "p01-b.patch");
}

#[test]
fn a_journal_of_another_bisection_is_refused() {
    let t = tree();
    let out = t.path().join("out");
    std::fs::create_dir(&out).unwrap();
    std::fs::write(out.join("other"), "").unwrap();
    let tp = t.path().to_str().unwrap();
    let o = out.to_str().unwrap();
    let args = [
        "--tree",
        tp,
        "--good",
        "g",
        "--bad",
        "HEAD",
        "--suite",
        "seed000-lockwait",
        "--out",
        o,
    ];
    let err = cfg(&args).err().unwrap();
    assert!(err.contains("holds no journal.json"), "{err}");
    std::fs::write(
        out.join("journal.json"),
        r#"{"fingerprint":{"candidates":["x"],"specs":[],"suite":"s","metric":"m","plan":{"classifier":{"alpha":0.01,"beta":0.01,"min_boots":2,"max_boots":6,"sd_floor":0.1,"separate_p":0.01},"ref_boots":4,"drift_boots":2,"step_budget_s":240.0}},"events":[]}"#,
    )
    .unwrap();
    let err = cfg(&args).err().unwrap();
    assert!(err.contains("another bisection"), "{err}");
}
