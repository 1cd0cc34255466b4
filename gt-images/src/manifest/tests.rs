use super::*;

const SHA: &str = "e849faf31ca3555757f3a8877cb01af92122f744f75d1f3102734651c4e14703";

fn fixture() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    for sub in ["agent", "p/a", "p/b"] {
        std::fs::create_dir_all(d.path().join(sub)).unwrap();
    }
    std::fs::write(d.path().join("agent/init"), "#!/bin/sh\n").unwrap();
    std::fs::write(d.path().join("frag.config"), "CONFIG_SMP=y\n").unwrap();
    std::fs::write(d.path().join("wide.config"), "CONFIG_NR_CPUS=64\n").unwrap();
    for f in ["p/a/x.patch", "p/a/y.patch", "p/b/x.patch"] {
        std::fs::write(d.path().join(f), "").unwrap();
    }
    d
}

/// Two source lines (a: x and y, b: x only), a prebuilt line, components x, xy, y (absent on
/// b), wide (overlay), off (command line), an alias; `more` is appended.
fn text(more: &str) -> String {
    format!(
        r#"
[sources.src]
kind = "debian-source"
package = "linux-source-6.12"
version = "6.12.117-1~deb12u1"
sha256 = "{SHA}"
tarball = "usr/src/linux-source-6.12.tar.xz"
[sources.pre]
kind = "debian-prebuilt"
package = "linux-image-x"
version = "1"
sha256 = "{SHA}"
apt = "deb http://deb.debian.org/debian trixie-backports main"
extra = [{{ package = "linux-modules-x", sha256 = "{SHA}" }}]
[[line]]
name = "a"
source = "src"
fragment = "frag.config"
patch_dir = "p/a"
[[line]]
name = "b"
source = "src"
fragment = "frag.config"
renames = {{ CONFIG_OLD = "CONFIG_NEW" }}
patch_dir = "p/b"
[[line]]
name = "pre"
source = "pre"
modules = ["virtio_blk"]
cmdline = "log_buf_len=4M"
[[component]]
name = "x"
patches = ["x.patch"]
[[component]]
name = "xy"
patches = ["x.patch", "y.patch"]
absent = {{ b = "y was never ported" }}
[[component]]
name = "y"
patches = ["y.patch"]
absent = {{ b = "y was never ported" }}
[[component]]
name = "wide"
overlay = "wide.config"
[[component]]
name = "off"
cmdline = "mitigations=off"
[aliases]
a64 = "a+wide"
{more}
[initramfs]
busybox = "/bin/busybox"
sg3_utils = ["sg_inq"]
agent = "agent/init"
[initramfs.fio]
package = "fio"
version = "3.33-3"
deb_src = "deb-src http://deb.debian.org/debian bookworm main"
configure = ["--build-static"]
"#
    )
}

fn load(more: &str) -> (tempfile::TempDir, Manifest) {
    let d = fixture();
    let m = Manifest::parse(&text(more), d.path()).unwrap();
    (d, m)
}

fn err(edit: impl Fn(String) -> String) -> String {
    let d = fixture();
    Manifest::parse(&edit(text("")), d.path()).unwrap_err()
}

#[test]
fn names_compose_a_line_and_components_in_order() {
    let (_d, m) = load("");
    let v = m.variant("a+x+wide+off").unwrap();
    assert_eq!(v.source, "src");
    assert_eq!(v.fragment, Some(PathBuf::from("frag.config")));
    assert_eq!(v.overlays, vec![PathBuf::from("wide.config")]);
    assert_eq!(v.patches, vec![PathBuf::from("p/a/x.patch")]);
    assert_eq!(v.cmdline, "mitigations=off");
    // The same patch set on another line comes from that line's directory.
    let v = m.variant("b+x").unwrap();
    assert_eq!(v.patches, vec![PathBuf::from("p/b/x.patch")]);
    assert_eq!(
        v.renames.get("CONFIG_OLD").map(String::as_str),
        Some("CONFIG_NEW")
    );
    // An alias is its composition, with more components after it.
    let v = m.variant("a64+xy").unwrap();
    assert_eq!(v.overlays, vec![PathBuf::from("wide.config")]);
    assert_eq!(
        v.patches,
        vec![PathBuf::from("p/a/x.patch"), PathBuf::from("p/a/y.patch")]
    );
    assert_eq!(v.name, "a64+xy");
    // A command-line component works on a prebuilt line; words are appended.
    let v = m.variant("pre+off").unwrap();
    assert_eq!(v.cmdline, "log_buf_len=4M mitigations=off");
    assert_eq!(v.modules, vec!["virtio_blk".to_string()]);
    assert!(v.patches.is_empty() && v.overlays.is_empty());
    let Source::DebianPrebuilt { extra, apt, .. } = m.source_of(&v) else {
        panic!("prebuilt")
    };
    assert_eq!(extra[0].package, "linux-modules-x");
    assert!(apt.as_deref().unwrap().starts_with("deb "));
}

#[test]
fn a_name_that_cannot_be_built_is_an_error_with_the_reason() {
    let (_d, m) = load("");
    for (name, want) in [
        (
            "c",
            "'c' is not a kernel line (lines: a, b, pre; aliases: a64 = a+wide)",
        ),
        (
            "a+zz",
            "unknown component 'zz' (components: x, xy, y, wide, off)",
        ),
        ("a+x+x", "component 'x' is written twice"),
        ("a+x+xy", "would apply x.patch a second time"),
        ("a+", "an empty component"),
        (
            "b+y",
            "component 'y' does not exist on line 'b': y was never ported",
        ),
        (
            "pre+x",
            "'x' is a patch set and line 'pre' is a prebuilt kernel",
        ),
        (
            "pre+wide",
            "'wide' is a config overlay and line 'pre' is a prebuilt kernel",
        ),
    ] {
        let e = m.variant(name).unwrap_err();
        assert_eq!(e.exit_code(), 2, "{name}");
        let e = e.to_string();
        assert!(e.starts_with(&format!("kernel '{name}': ")), "{e}");
        assert!(e.contains(want), "{name}: {e}");
    }
}

#[test]
fn availability_lists_every_line() {
    let (_d, m) = load("");
    let y = m.component("y").unwrap();
    let a = m.availability(y);
    assert_eq!(a.len(), 3);
    assert!(a[0].1.is_ok());
    assert!(a[1].1.as_ref().unwrap_err().contains("never ported"));
    assert!(a[2].1.as_ref().unwrap_err().contains("prebuilt"));
}

/// A manifest edit and a phrase its error must contain.
type Case = (Box<dyn Fn(String) -> String>, &'static str);

#[test]
fn rejects_bad_manifests_with_a_reason() {
    let cases: Vec<Case> = vec![
        (
            Box::new(|t| {
                t.replace(
                    "source = \"src\"\nfragment = \"frag.config\"\npatch_dir = \"p/a\"",
                    "source = \"zz\"",
                )
            }),
            "line 'a': unknown source 'zz'",
        ),
        (
            Box::new(|t| {
                t.replace(
                    "fragment = \"frag.config\"\npatch_dir = \"p/a\"",
                    "patch_dir = \"p/a\"",
                )
            }),
            "needs a fragment",
        ),
        (
            Box::new(|t| t.replace("patch_dir = \"p/a\"", "patch_dir = \"p/none\"")),
            "patch_dir",
        ),
        (
            Box::new(|t| t.replace("modules = [\"virtio_blk\"]", "patch_dir = \"p/a\"")),
            "a prebuilt kernel takes no fragment",
        ),
        (
            Box::new(|t| t.replace("overlay = \"wide.config\"", "overlay = \"nope.config\"")),
            "nope.config not found",
        ),
        (
            Box::new(|t| {
                t.replace(
                    "cmdline = \"mitigations=off\"",
                    "cmdline = \"x\"\npatches = [\"x.patch\"]",
                )
            }),
            "exactly one of overlay, patches, cmdline",
        ),
        (
            // y.patch is missing on line b and nothing says why.
            Box::new(|t| t.replacen("absent = { b = \"y was never ported\" }\n", "", 1)),
            "component 'xy' on line 'b'",
        ),
        (
            Box::new(|t| {
                t.replace(
                    "absent = { b = \"y was never ported\" }",
                    "absent = { c = \"no\" }",
                )
            }),
            "absent.c must name a line",
        ),
        (
            Box::new(|t| t.replace("a64 = \"a+wide\"", "a64 = \"b+y\"")),
            "alias 'a64'",
        ),
        (
            Box::new(|t| t.replace("a64 = \"a+wide\"", "a64 = \"a64+x\"")),
            "starts with another alias",
        ),
        (
            Box::new(|t| t.replace("name = \"off\"", "name = \"x\"")),
            "defined twice",
        ),
        (
            Box::new(|t| t.replace("name = \"off\"", "name = \"o+ff\"")),
            "must be non-empty",
        ),
        (
            Box::new(|t| t.replace("patches = [\"x.patch\"]", "patches = [\"../x.patch\"]")),
            "file names in each line's patch_dir",
        ),
        (
            Box::new(|t| t.replace("CONFIG_NEW", "NEW")),
            "renames are CONFIG_OLD",
        ),
        (
            Box::new(|t| t.replace("apt = \"deb ", "apt = \"deb-src ")),
            "apt must be one `deb ...` line",
        ),
        (
            Box::new(|t| t.replacen(&format!("sha256 = \"{SHA}\""), "sha256 = \"abc\"", 1)),
            "sha256",
        ),
        (
            Box::new(|t| t.replace("name = \"off\"", "name = \"off\"\ncolour = 1")),
            "colour",
        ),
    ];
    for (edit, want) in cases {
        let e = err(edit);
        assert!(e.contains(want), "want '{want}' in: {e}");
    }
}

#[test]
fn a_git_tree_source_needs_no_sha256_but_a_fragment() {
    let tree = "[sources.tree]\nkind = \"git-tree\"\npath = \"/src/linux\"\nrev = \"v6.12.5\"\n[sources.pre]";
    let d = fixture();
    let t = text("").replacen("[sources.pre]", tree, 1).replacen(
        "source = \"src\"\nfragment = \"frag.config\"\npatch_dir = \"p/a\"",
        "source = \"tree\"\nfragment = \"frag.config\"\npatch_dir = \"p/a\"",
        1,
    );
    let m = Manifest::parse(&t, d.path()).unwrap();
    let v = m.variant("a+x").unwrap();
    assert_eq!(
        m.source_of(&v),
        &Source::GitTree {
            path: "/src/linux".into(),
            rev: Some("v6.12.5".into())
        }
    );
    assert!(m.source_of(&v).is_source());
}

/// (name, source, overlays, patch files) of every per-combination entry kernels.toml had before
/// kernel names composed: each name must still build exactly that kernel.
const BEFORE: &[(&str, &str, &[&str], &[&str])] = &[
    ("rt", "debian-6.12", &[], &[]),
    ("rt+seed000", "debian-6.12", &[], &["seed000"]),
    (
        "rt+seed000-paired",
        "debian-6.12",
        &[],
        &["seed000", "seed000-paired"],
    ),
    ("rt+seed000-v7", "debian-6.12", &[], &["seed000-v7"]),
    ("rt+nobarrier", "debian-6.12", &[], &["nobarrier"]),
    ("rt+storm", "debian-6.12", &[], &["storm-hook"]),
    (
        "rt+seed000+storm",
        "debian-6.12",
        &[],
        &["seed000", "storm-hook"],
    ),
    (
        "rt+seed000-paired+storm",
        "debian-6.12",
        &[],
        &["seed000", "seed000-paired", "storm-hook"],
    ),
    (
        "rt+seed000-v7+storm",
        "debian-6.12",
        &[],
        &["seed000-v7", "storm-hook"],
    ),
    (
        "rt+nobarrier+storm",
        "debian-6.12",
        &[],
        &["nobarrier", "storm-hook"],
    ),
    ("rt+seed003", "debian-6.12", &[], &["seed003"]),
    ("rt+noguard", "debian-6.12", &[], &["noguard"]),
    (
        "rt+noguard+seed003",
        "debian-6.12",
        &[],
        &["noguard", "seed003"],
    ),
    ("rt64", "debian-6.12", &["cpus64"], &[]),
    ("rt64+seed003", "debian-6.12", &["cpus64"], &["seed003"]),
    ("rt64+noguard", "debian-6.12", &["cpus64"], &["noguard"]),
    (
        "rt64+noguard+seed003",
        "debian-6.12",
        &["cpus64"],
        &["noguard", "seed003"],
    ),
    ("rt128", "debian-6.12", &["cpus128"], &[]),
];

#[test]
fn every_kernel_name_used_before_composition_means_the_same_kernel() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../images/kernels.toml");
    let m = Manifest::load(&path).unwrap();
    for (name, source, overlays, patches) in BEFORE {
        let v = m.variant(name).unwrap();
        assert_eq!(v.source, *source, "{name}");
        assert_eq!(
            v.fragment,
            Some(PathBuf::from("config/rt.config")),
            "{name}"
        );
        assert!(v.renames.is_empty(), "{name}");
        let o: Vec<PathBuf> = overlays
            .iter()
            .map(|o| PathBuf::from(format!("config/{o}.config")))
            .collect();
        assert_eq!(v.overlays, o, "{name}");
        let p: Vec<PathBuf> = patches
            .iter()
            .map(|p| PathBuf::from(format!("patches/6.12/{p}.patch")))
            .collect();
        assert_eq!(v.patches, p, "{name}");
        assert!(v.cmdline.is_empty() && v.modules.is_empty(), "{name}");
    }
    let modules: Vec<String> = [
        "virtio_pci",
        "virtio_console",
        "virtio_blk",
        "scsi_mod",
        "sd_mod",
        "sg",
        "virtio_scsi",
        // Since issue 48 (suite writelog-ext4): the same bzImage, ext4 and its dependencies
        // added to the initramfs.
        "ext4",
        "crc32c_generic",
    ]
    .map(String::from)
    .to_vec();
    for (name, cmdline) in [
        ("debian-rt", "log_buf_len=4M"),
        (
            "debian-rt+mitigations-off",
            "log_buf_len=4M mitigations=off",
        ),
    ] {
        let v = m.variant(name).unwrap();
        assert_eq!(v.source, "debian-rt-prebuilt");
        assert_eq!(v.modules, modules);
        assert_eq!(v.cmdline, cmdline);
    }
}

#[test]
fn the_7_3_line_has_every_seed_000_version_and_its_controls() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../images/kernels.toml");
    let m = Manifest::load(&path).unwrap();
    for name in [
        "rt73",
        "rt73+seed000",
        "rt73+seed000-paired",
        "rt73+seed000-v8",
        "rt73+nobarrier",
        "rt73+seed000-v8+storm",
        "rt73+seed000+storm",
        "rt73+nobarrier+storm",
        "rt73+storm",
        "rt73+seed003",
        "rt73+noguard+seed003",
        "rt73+cpus128+seed000-v8",
        "debian-rt73",
        "debian-rt73+mitigations-off",
    ] {
        let v = m.variant(name).unwrap();
        assert!(
            v.patches.iter().all(|p| p.starts_with("patches/7.3")),
            "{name}"
        );
    }
    assert_eq!(
        m.variant("rt73").unwrap().renames.get("CONFIG_PROC_SYSCTL"),
        Some(&"CONFIG_SYSCTL".to_string())
    );
    let e = m.variant("rt73+seed000-v7").unwrap_err().to_string();
    assert!(e.contains("on 7.3 use seed000-v8"), "{e}");
    let e = m.variant("rt+seed000-v8").unwrap_err().to_string();
    assert!(e.contains("on 6.12 use seed000-v7"), "{e}");
}

#[test]
fn litmus_fields_are_checked() {
    let d = fixture();
    for f in [
        "p/a/x.litmus",
        "p/b/x.litmus",
        "p/a/y.litmus",
        "base.litmus",
    ] {
        std::fs::write(d.path().join(f), "C t\n").unwrap();
    }
    let parse =
        |more: &str, edit: &dyn Fn(String) -> String| Manifest::parse(&edit(text(more)), d.path());
    let x = "name = \"x\"\npatches = [\"x.patch\"]";
    let with_x = |extra: &'static str| move |t: String| t.replace(x, &format!("{x}\n{extra}"));
    // Good: tests on a line and a component, an exemption, a prebuilt line's model.
    let m = parse("", &|t| {
        let t = with_x("litmus = [\"x.litmus\"]\nlitmus_supersedes = [\"base\", \"y\"]")(t);
        let t = t.replace(
            "patch_dir = \"p/a\"",
            "patch_dir = \"p/a\"\nlitmus = [\"base.litmus\"]",
        );
        let t = t.replace(
            "name = \"y\"\npatches = [\"y.patch\"]",
            "name = \"y\"\npatches = [\"y.patch\"]\nlitmus_exempt = \"why\"",
        );
        t.replace(
            "cmdline = \"log_buf_len=4M\"",
            "cmdline = \"log_buf_len=4M\"\nlkmm = \"src\"\nlitmus = [\"base.litmus\"]",
        )
    })
    .unwrap();
    assert_eq!(m.component("x").unwrap().litmus, ["x.litmus"]);
    let pre = m.line("pre").unwrap();
    assert_eq!(m.lkmm_source(pre).map(|s| s.0), Some("src"));
    assert_eq!(
        m.lkmm_source(m.line("b").unwrap()).map(|s| s.0),
        Some("src")
    );
    // Bad: each with its reason.
    let cases: Vec<Case> = vec![
        (
            Box::new(with_x("litmus = [\"nope.litmus\"]")),
            "nope.litmus not found",
        ),
        (
            Box::new(with_x("litmus = [\"../x.litmus\"]")),
            "relative to each line's patch_dir",
        ),
        (
            Box::new(with_x("litmus = [\"x.patch\"]")),
            "must be a .litmus file",
        ),
        (
            Box::new(with_x("litmus = [\"x.litmus\"]\nlitmus_exempt = \"why\"")),
            "not both",
        ),
        (Box::new(with_x("litmus_exempt = \" \"")), "must say why"),
        (
            Box::new(with_x("litmus_supersedes = [\"base\"]")),
            "needs litmus tests of its own",
        ),
        (
            Box::new(with_x(
                "litmus = [\"x.litmus\"]\nlitmus_supersedes = [\"zz\"]",
            )),
            "names 'zz'",
        ),
        (
            Box::new(with_x(
                "litmus = [\"x.litmus\"]\nlitmus_supersedes = [\"x\"]",
            )),
            "names 'x'",
        ),
        (
            Box::new(|t: String| {
                t.replace(
                    "overlay = \"wide.config\"",
                    "overlay = \"wide.config\"\nlitmus_exempt = \"w\"",
                )
            }),
            "only patch sets",
        ),
        (
            Box::new(|t: String| t.replace("name = \"off\"", "name = \"base\"")),
            "pick another name",
        ),
        (
            Box::new(|t: String| {
                t.replace(
                    "cmdline = \"log_buf_len=4M\"",
                    "cmdline = \"x\"\nlitmus = [\"base.litmus\"]",
                )
            }),
            "need a model",
        ),
        (
            Box::new(|t: String| {
                t.replace(
                    "cmdline = \"log_buf_len=4M\"",
                    "cmdline = \"x\"\nlkmm = \"pre\"",
                )
            }),
            "lkmm 'pre' must name a source built from source",
        ),
        (
            Box::new(|t: String| {
                t.replace(
                    "patch_dir = \"p/a\"",
                    "patch_dir = \"p/a\"\nlitmus = [\"gone.litmus\"]",
                )
            }),
            "gone.litmus not found",
        ),
    ];
    for (edit, want) in cases {
        let e = parse("", &*edit).unwrap_err();
        assert!(e.contains(want), "want '{want}' in: {e}");
    }
    // y.litmus exists on line a only: a component carrying it must be absent on b.
    let e = parse("", &|t| {
        t.replace(
            "name = \"y\"\npatches = [\"y.patch\"]\nabsent = { b = \"y was never ported\" }",
            "name = \"y\"\npatches = [\"x.patch\"]\nlitmus = [\"y.litmus\"]",
        )
    })
    .unwrap_err();
    assert!(e.contains("on line 'b'") && e.contains("y.litmus"), "{e}");
}
