use super::*;

const SHA: &str = "e849faf31ca3555757f3a8877cb01af92122f744f75d1f3102734651c4e14703";

fn litmus(name: &str, extra: &str) -> String {
    format!("C {name}\n\n(*\n * Result: Never\n * Path: none\n{extra} *)\n\n{{}}\n")
}

/// Line `a` (tests: base) and `b` (none), components x (supersedes base), y (supersedes base
/// and x), z (no tests), e (exempt), o (overlay).
fn fixture() -> (tempfile::TempDir, Manifest) {
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    for sub in ["agent", "p/a/litmus", "p/b/litmus"] {
        std::fs::create_dir_all(p.join(sub)).unwrap();
    }
    std::fs::write(p.join("agent/init"), "").unwrap();
    std::fs::write(p.join("frag.config"), "").unwrap();
    std::fs::write(p.join("o.config"), "").unwrap();
    for line in ["a", "b"] {
        for f in ["x", "y", "z", "e"] {
            std::fs::write(p.join(format!("p/{line}/{f}.patch")), "").unwrap();
        }
        for t in ["x", "y"] {
            std::fs::write(p.join(format!("p/{line}/litmus/{t}.litmus")), litmus(t, "")).unwrap();
        }
    }
    std::fs::write(p.join("p/a/litmus/base.litmus"), litmus("base", "")).unwrap();
    let text = format!(
        r#"
[sources.src]
kind = "debian-source"
package = "linux-source-6.12"
version = "6.12.117-1~deb12u1"
sha256 = "{SHA}"
tarball = "usr/src/linux-source-6.12.tar.xz"
[[line]]
name = "a"
source = "src"
fragment = "frag.config"
patch_dir = "p/a"
litmus = ["p/a/litmus/base.litmus"]
[[line]]
name = "b"
source = "src"
fragment = "frag.config"
patch_dir = "p/b"
[[component]]
name = "x"
patches = ["x.patch"]
litmus = ["litmus/x.litmus"]
litmus_supersedes = ["base"]
[[component]]
name = "y"
patches = ["y.patch"]
litmus = ["litmus/y.litmus"]
litmus_supersedes = ["base", "x"]
[[component]]
name = "z"
patches = ["z.patch"]
[[component]]
name = "e"
patches = ["e.patch"]
litmus_exempt = "a debugfs hook"
[[component]]
name = "o"
overlay = "o.config"
[initramfs]
busybox = "/bin/busybox"
sg3_utils = []
agent = "agent/init"
[initramfs.fio]
package = "fio"
version = "3.33-3"
deb_src = "deb-src http://deb.debian.org/debian bookworm main"
configure = []
"#
    );
    let m = Manifest::parse(&text, p).unwrap();
    (d, m)
}

fn of(m: &Manifest, kernel: &str) -> (Vec<String>, Vec<String>) {
    let spec = KernelSpec::parse(kernel).unwrap();
    spec.check(m).unwrap();
    let p = plan(m, &spec).unwrap();
    assert_eq!(p.model, ModelOf::Source("src".into()));
    let tests = p
        .tests
        .iter()
        .map(|t| format!("{}/{}", t.component, t.stem()))
        .collect();
    // The part's label, without the reason rule 5 adds.
    let unchecked = p
        .unchecked
        .iter()
        .map(|u| u.split(" (").next().unwrap_or(u).to_string())
        .collect();
    (tests, unchecked)
}

#[test]
fn a_stacked_kernel_is_judged_by_the_tests_of_its_final_code() {
    let (_d, m) = fixture();
    let none: Vec<String> = Vec::new();
    assert_eq!(of(&m, "a"), (vec!["a/base".to_string()], none.clone()));
    assert_eq!(of(&m, "a+x"), (vec!["x/x".to_string()], none.clone()));
    assert_eq!(of(&m, "a+x+y"), (vec!["y/y".to_string()], none.clone()));
    assert_eq!(
        of(&m, "a+y+x"),
        (vec!["y/y".to_string()], none.clone()),
        "order does not matter"
    );
    assert_eq!(
        of(&m, "a+o"),
        (vec!["a/base".to_string()], none.clone()),
        "an overlay changes no code"
    );
    assert_eq!(
        of(&m, "a+e"),
        (vec!["a/base".to_string()], none.clone()),
        "exempt"
    );
    assert_eq!(
        of(&m, "a+z"),
        (vec!["a/base".to_string()], vec!["z".to_string()])
    );
    assert_eq!(
        of(&m, "a+x+z+e"),
        (vec!["x/x".to_string()], vec!["z".to_string()])
    );
    // A line without tests of its own is not checked, unless a component supersedes it.
    assert_eq!(of(&m, "b"), (vec![], vec!["b".to_string()]));
    assert_eq!(of(&m, "b+x"), (vec!["x/x".to_string()], none));
}

#[test]
fn a_users_patch_carries_the_tests_beside_it() {
    let (d, m) = fixture();
    let fix = d.path().join("fix.patch");
    std::fs::write(&fix, "").unwrap();
    let k = format!("mine=a+x+patch:{}", fix.display());
    let label = format!("patch:{}", fix.display());
    assert_eq!(of(&m, &k), (vec!["x/x".to_string()], vec![label.clone()]));
    std::fs::write(d.path().join("fix.litmus"), litmus("fix", "")).unwrap();
    assert_eq!(
        of(&m, &k),
        (vec!["x/x".to_string(), format!("{label}/fix")], vec![])
    );
    let dir = d.path().join("fix.litmus.d");
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join("b.litmus"), litmus("b", " * Supersedes: x\n")).unwrap();
    std::fs::write(dir.join("a.litmus"), litmus("a", "")).unwrap();
    std::fs::write(dir.join("notes.txt"), "").unwrap();
    assert_eq!(
        of(&m, &k),
        (
            vec![
                format!("{label}/fix"),
                format!("{label}/a"),
                format!("{label}/b")
            ],
            vec![]
        ),
        "its header's Supersedes drops x's tests; a dir's tests in name order"
    );
    std::fs::write(dir.join("bad.litmus"), "not litmus").unwrap();
    let spec = KernelSpec::parse(&k).unwrap();
    let e = plan(&m, &spec).unwrap_err().to_string();
    assert!(
        e.contains("bad.litmus") && e.contains("not a C litmus"),
        "{e}"
    );
}

#[test]
fn a_tree_carries_only_its_own_tests_and_its_own_model() {
    let (_d, m) = fixture();
    let t = gt_images::gitsrc::testtree::kernel_tree("one");
    let spec = KernelSpec::parse(&format!("mine=tree:{}@HEAD", t.path().display())).unwrap();
    let p = plan(&m, &spec).unwrap();
    assert!(p.tests.is_empty());
    assert_eq!(p.unchecked, [format!("tree:{}", t.path().display())]);
    assert!(matches!(&p.model, ModelOf::Tree { rev: Some(r), .. } if r == "HEAD"));
    std::fs::write(t.path().with_extension("litmus"), litmus("t", "")).unwrap();
    let p = plan(&m, &spec).unwrap();
    let _ = std::fs::remove_file(t.path().with_extension("litmus"));
    assert_eq!(p.tests.len(), 1);
    assert!(p.unchecked.is_empty());
}

#[test]
fn resolve_drops_superseded_parts_even_without_tests() {
    let part = |label: &str, tests: usize, sup: &[&str]| Part {
        label: label.into(),
        key: label.into(),
        tests: (0..tests)
            .map(|i| Test {
                component: label.into(),
                file: format!("{label}{i}.litmus").into(),
                header: parse_header("C t").unwrap(),
            })
            .collect(),
        supersedes: sup.iter().map(|s| s.to_string()).collect(),
        exempt: false,
        patches: Vec::new(),
    };
    // `q` changes code without tests, but `r` models the code after it: nothing unchecked.
    let Resolved {
        tests, unchecked, ..
    } = resolve(vec![part("q", 0, &[]), part("r", 2, &["q"])]);
    assert_eq!(tests.len(), 2);
    assert!(unchecked.is_empty());
    // A part without tests supersedes nothing.
    let Resolved {
        tests, unchecked, ..
    } = resolve(vec![part("q", 1, &[]), part("r", 0, &["q"])]);
    assert_eq!((tests.len(), unchecked), (1, vec!["r".to_string()]));
}

/// The real manifest: every version of seed 000 and the controls carry tests on both lines, a
/// stacked test hook keeps its fix's tests, and every litmus file there is used.
#[test]
fn the_real_manifest_carries_a_test_per_version_and_path() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../images/kernels.toml");
    let m = Manifest::load(&path).unwrap();
    let paths = ["none", "sched-dispatch", "sched-queued"];
    for (line, v) in [("rt", "seed000-v7"), ("rt73", "seed000-v8")] {
        for (kernel, owner, prefix) in [
            (line.to_string(), line, "base"),
            (format!("{line}+seed000"), "seed000", "seed000"),
            (
                format!("{line}+seed000-paired"),
                "seed000-paired",
                "seed000-paired",
            ),
            (format!("{line}+{v}"), v, "seed000-atomic"),
            (format!("{line}+nobarrier"), "nobarrier", "nobarrier"),
            (format!("{line}+seed000+storm"), "seed000", "seed000"),
            (format!("{line}+cpus128+{v}"), v, "seed000-atomic"),
        ] {
            let spec = KernelSpec::parse(&kernel).unwrap();
            let p = plan(&m, &spec).unwrap();
            let want: Vec<String> = paths
                .iter()
                .map(|x| format!("{owner}/{prefix}-{x}"))
                .collect();
            let got: Vec<String> = p
                .tests
                .iter()
                .map(|t| format!("{}/{}", t.component, t.stem()))
                .collect();
            assert_eq!(got, want, "{kernel}");
            assert!(p.unchecked.is_empty(), "{kernel}: {:?}", p.unchecked);
            for t in &p.tests {
                assert!(t.header.result.is_some(), "{}: no Result", t.file.display());
                let path = t.header.path.as_deref().unwrap_or_default();
                assert!(
                    t.stem().ends_with(path),
                    "{}: Path {path}",
                    t.file.display()
                );
            }
        }
        // Seed 003's test of the tag-table clear supersedes noguard's (the clear they leave
        // differs); the line's quiesce tests stay.
        let p = plan(
            &m,
            &KernelSpec::parse(&format!("{line}+noguard+seed003")).unwrap(),
        )
        .unwrap();
        assert!(p.unchecked.is_empty(), "{:?}", p.unchecked);
        let got: Vec<String> = p
            .tests
            .iter()
            .map(|t| format!("{}/{}", t.component, t.stem()))
            .collect();
        assert_eq!(got.len(), 4, "{got:?}");
        assert_eq!(got[3], "seed003/seed003-flushrq", "{got:?}");
    }
    for (line, src) in [
        ("debian-rt", "debian-6.12"),
        ("debian-rt73", "debian-7.3"),
        ("rt", "debian-6.12"),
        ("rt73", "debian-7.3"),
    ] {
        let p = plan(&m, &KernelSpec::parse(line).unwrap()).unwrap();
        assert_eq!(p.model, ModelOf::Source(src.into()), "{line}");
        assert_eq!(p.tests.len(), 3, "{line}");
    }
    // No orphans: every litmus file in a line's patch directory is carried by something.
    let mut used = BTreeSet::new();
    for l in &m.lines {
        used.extend(l.litmus.iter().map(|f| m.path(f)));
        let Some(dir) = &l.patch_dir else { continue };
        for c in &m.components {
            used.extend(c.litmus.iter().map(|f| m.path(dir).join(f)));
        }
    }
    for l in &m.lines {
        let Some(dir) = &l.patch_dir else { continue };
        for e in std::fs::read_dir(m.path(dir).join("litmus")).unwrap() {
            let f = e.unwrap().path();
            if f.extension().is_none_or(|x| x != "litmus") {
                continue; // points.toml (derive.rs)
            }
            assert!(
                used.contains(&f),
                "{} is carried by no line or component",
                f.display()
            );
        }
    }
}

/// Rule 5 on the real manifest: a patch set without tests is checked by the line's tests only
/// where it leaves the functions they model alone.
#[test]
fn a_part_without_tests_that_changes_a_modelled_function_is_not_checked() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../images/kernels.toml");
    let m = Manifest::load(&path).unwrap();
    let of = |k: &str| plan(&m, &KernelSpec::parse(k).unwrap()).unwrap();
    // v7's code with the reader's barrier weakened, no test given: blk_mq_run_hw_queue (and
    // v7's other functions) changed, the line's tests superseded by nothing.
    let p = of("rt+wrongbarrier");
    assert_eq!(p.unchecked.len(), 1, "{:?}", p.unchecked);
    assert!(
        p.unchecked[0].starts_with("wrongbarrier (")
            && p.unchecked[0].contains("blk_mq_run_hw_queue"),
        "{:?}",
        p.unchecked
    );
    // noguard carries its own test (the clear it lets run), and changes no function the line's
    // tests model: all four stand for this kernel's code.
    let p = of("rt+noguard");
    assert!(p.unchecked.is_empty(), "{:?}", p.unchecked);
    assert_eq!(p.tests.len(), 4);
    // hostlock is exempt and its diff has file-scope lines (a static lock): still checked, by
    // the line's tests, since it changes no function they model.
    let p = of("rt+hostlock");
    assert!(p.unchecked.is_empty(), "{:?}", p.unchecked);
    assert_eq!(p.tests.len(), 3);
    // An exempt hook that calls the modelled functions without changing them stays exempt.
    let p = of("rt+seed000-v7+storm");
    assert!(p.unchecked.is_empty(), "{:?}", p.unchecked);
    // A user's patch that changes a modelled function, with no test beside it.
    let dir = tempfile::tempdir().unwrap();
    let fix = dir.path().join("fix.patch");
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../images/patches/6.12/wrongbarrier.patch"),
        &fix,
    )
    .unwrap();
    let p = of(&format!("mine=rt+patch:{}", fix.display()));
    assert!(
        p.unchecked
            .iter()
            .any(|u| u.contains("blk_mq_run_hw_queue changed")),
        "{:?}",
        p.unchecked
    );
    assert_eq!(
        p.tests.len(),
        3,
        "the line's tests still run; they no longer vouch for it"
    );
    // A user's patch whose hunk names no function: what it changed is unknown, so not checked.
    let bare = dir.path().join("bare.patch");
    std::fs::write(
        &bare,
        "--- a/block/blk-mq.c\n+++ b/block/blk-mq.c\n@@ -1,3 +1,3 @@\n a\n-b\n+c\n d\n",
    )
    .unwrap();
    let p = of(&format!("bare=rt+patch:{}", bare.display()));
    assert_eq!(p.unchecked.len(), 1, "{:?}", p.unchecked);
}
