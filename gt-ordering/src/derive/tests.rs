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
