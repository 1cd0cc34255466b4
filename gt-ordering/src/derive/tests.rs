use super::*;

fn point() -> Point {
    Point {
        name: "f/recheck".into(),
        file: "x.c".into(),
        after: "a = check(h);".into(),
        before: "a = check(h);".into(),
        about: String::new(),
    }
}

fn body(barrier: &str) -> String {
    csrc::normalize(&format!(
        "void f(int h)\n{{\n\ta = check(h);\n\tif (!a) {{\n\t\t{barrier}\n\t\ta = check(h);\n\t}}\n}}\n"
    ))
}

#[test]
fn the_primitive_at_a_point_is_read_and_the_rest_kept_apart() {
    let p = point();
    for (stmt, want) in [
        ("smp_mb();", Primitive::Full),
        ("mb();", Primitive::Full),
        ("smp_rmb();", Primitive::Read),
        ("smp_wmb();", Primitive::Write),
        ("smp_mb__after_atomic();", Primitive::AfterAtomic),
        ("smp_mb__before_atomic();", Primitive::BeforeAtomic),
        ("barrier();", Primitive::Nothing),
        ("", Primitive::Nothing),
    ] {
        let at = read_point(&body(stmt), &p).unwrap();
        assert_eq!(at.primitive, want, "{stmt}");
        assert_eq!(at.residue, "if(!a){", "{stmt}");
        assert_eq!(at.outside, read_point(&body(""), &p).unwrap().outside);
    }
    // Other code at the point stays in the residue: a template without it does not match.
    let at = read_point(&body("udelay(16); smp_mb();"), &p).unwrap();
    assert_eq!(
        (at.primitive, at.residue.as_str()),
        (Primitive::Full, "if(!a){udelay(16);")
    );
    // `my_smp_mb();` is not `smp_mb();`.
    let at = read_point(&body("my_smp_mb();"), &p).unwrap();
    assert_eq!(at.primitive, Primitive::Nothing);
    assert!(at.residue.contains("my_smp_mb();"));
    let e = read_point(&body("smp_rmb(); smp_wmb();"), &p).unwrap_err();
    assert!(e.contains("several barriers"), "{e}");
    let e = read_point("void f(){}", &p).unwrap_err();
    assert!(e.contains("not found"), "{e}");
}

const TEST: &str = "C t\n\n(*\n * Result: Never\n * Models: f\n *)\n\n{}\n\nP0(int *x)\n{\n\t/* point f/recheck */\n\tsmp_mb();\n\tr0 = READ_ONCE(*x);\n}\n";

#[test]
fn a_test_slot_is_read_and_rewritten_and_its_result_dropped() {
    let s = slots(TEST).unwrap();
    assert_eq!(s.get("f/recheck"), Some(&Primitive::Full));
    let prims = BTreeMap::from([("f/recheck".to_string(), Primitive::Read)]);
    let out = rewrite(TEST, &prims);
    assert!(
        out.contains("\t/* point f/recheck */\n\tsmp_rmb();\n\tr0"),
        "{out}"
    );
    let h = parse_header(&out).unwrap();
    assert_eq!(h.result, None);
    assert_eq!(h.models, ["f"]);
    let none = rewrite(
        TEST,
        &BTreeMap::from([("f/recheck".to_string(), Primitive::Nothing)]),
    );
    assert_eq!(slots(&none).unwrap()["f/recheck"], Primitive::Nothing);
    // A slot that holds no primitive is an error naming it, not a guess.
    let bad = TEST.replace("\tsmp_mb();", "\tr1 = 2;");
    assert!(slots(&bad).unwrap_err().contains("f/recheck"));
}

/// The real data: every point of the 6.12 and 7.3 lines is found in the code its template
/// tests model, with the primitive their slots hold (the `against` check, run on v7's code
/// against itself, would fail on stale anchors). Needs the Debian sources: cached by CI's
/// memory-model step, else skipped with a line.
#[test]
fn the_committed_points_parse_and_every_marked_slot_names_one() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../images/patches");
    for line in ["6.12", "7.3"] {
        let dir = root.join(line).join("litmus");
        let points = points_in(&dir).unwrap();
        assert!(!points.is_empty(), "{line}: no points.toml");
        let names: BTreeSet<&str> = points.iter().map(|p| p.name.as_str()).collect();
        let mut marked = 0;
        for e in std::fs::read_dir(&dir).unwrap() {
            let f = e.unwrap().path();
            if f.extension().is_none_or(|x| x != "litmus") {
                continue;
            }
            let s = slots(&std::fs::read_to_string(&f).unwrap()).unwrap();
            for k in s.keys() {
                assert!(
                    names.contains(k.as_str()),
                    "{}: {k} not in points.toml",
                    f.display()
                );
                marked += 1;
            }
        }
        assert!(marked > 0, "{line}: no test marks a point");
    }
}

fn code(f_body: &str, scope: &str) -> BTreeMap<String, String> {
    BTreeMap::from([(
        "x.c".to_string(),
        csrc::strip_comments(&format!(
            "{scope}\nvoid f(int h)\n{{\n\ta = check(h);\n\tif (!a) {{\n\t\t{f_body}\n\t\ta = check(h);\n\t}}\n}}\n\nint g(void)\n{{\n\treturn 1;\n}}\n"
        )),
    )])
}

/// Rule 3 on synthetic code: the template's tests model `f` (one point) and `g`.
#[test]
fn a_kernel_is_derived_only_where_its_code_is_the_templates_but_for_the_barrier() {
    let comp: Component = toml::from_str("name = \"fix\"\npatches = [\"fix.patch\"]").unwrap();
    let text = TEST.replace(" * Models: f", " * Models: f g");
    let t = Template {
        comp: &comp,
        tests: vec![(
            PathBuf::from("t.litmus"),
            text.clone(),
            slots(&text).unwrap(),
        )],
    };
    let points = [point()];
    let tmpl = code("smp_mb(); /* why */", "static int a;");
    // The same code but for the barrier (and a comment, and layout): derived, with its barrier.
    let k = code("smp_rmb();", "static  int a;");
    let got = against(&t, &points, &k, &tmpl).unwrap();
    assert_eq!(got["f/recheck"], Primitive::Read);
    // No barrier at all.
    assert_eq!(
        against(&t, &points, &code("", "static int a;"), &tmpl).unwrap()["f/recheck"],
        Primitive::Nothing
    );
    // Something else at the point: not derived.
    let e = against(
        &t,
        &points,
        &code("smp_mb(); udelay(1);", "static int a;"),
        &tmpl,
    )
    .unwrap_err();
    assert!(e.contains("differs beyond its barrier"), "{e}");
    // A modelled function changed elsewhere: not derived.
    let mut other = code("smp_mb();", "static int a;");
    for v in other.values_mut() {
        *v = v.replace("return 1;", "return 2;");
    }
    let e = against(&t, &points, &other, &tmpl).unwrap_err();
    assert!(e.contains("g differs outside its ordering points"), "{e}");
    // File scope changed: not derived.
    let e = against(&t, &points, &code("smp_mb();", "static long a;"), &tmpl).unwrap_err();
    assert!(e.contains("differs outside its functions"), "{e}");
    // The template's own code has another barrier than its slot says: stale data, not derived.
    let stale = code("smp_wmb();", "static int a;");
    let e = against(&t, &points, &k, &stale).unwrap_err();
    assert!(e.contains("stale"), "{e}");
}
