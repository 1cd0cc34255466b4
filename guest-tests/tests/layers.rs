//! Which crate of the workspace may use which, checked against Cargo's own view of the
//! workspace (`cargo metadata --no-deps`), not against prose.
//!
//! The rules, over every workspace dependency of every kind (normal, dev, build, any target):
//!
//! 1. Every member of the workspace is in [`LAYERS`], and [`LAYERS`] names only members: a new
//!    crate gets its place here before anything can use it.
//! 2. A crate uses only crates of a lower layer. Two crates of one layer never use each other.
//! 3. A backend crate (`vhost-blk*`) uses no harness crate. A harness crate (`gt-*`,
//!    `guest-tests`, `lab`) uses a backend crate only through an edge of [`CROSSINGS`]: the
//!    harness drives the backend as a program, and shares types with it only where it reads
//!    a file the backend writes.
//!
//! The table is the one place the layering is declared; ARCHITECTURE.md describes it.

use std::collections::BTreeMap;
use std::process::Command;

use serde_json::{json, Value};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    Backend,
    Harness,
}

use Side::{Backend, Harness};

/// Each member of the workspace: its side and its layer (rules 1 and 2).
const LAYERS: &[(&str, Side, u8)] = &[
    // The backend's leaves: each uses no crate of the workspace.
    ("vhost-blk-units", Backend, 0),
    ("vhost-blk-storage", Backend, 0),
    ("vhost-blk-stats", Backend, 0),
    ("vhost-blk-sandbox", Backend, 0),
    ("vhost-blk-frontend", Backend, 0),
    // Over the leaves, not over each other.
    ("vhost-blk-completion", Backend, 1),
    ("vhost-blk-scsi", Backend, 1),
    // The backend library and the load generator: neither uses the other.
    ("vhost-blk", Backend, 2),
    ("vhost-blk-bench", Backend, 2),
    // The harness, one stage on the next.
    ("gt-suite", Harness, 0),
    ("gt-stats", Harness, 0),
    ("gt-images", Harness, 1),
    ("gt-ordering", Harness, 2),
    ("gt-launch", Harness, 3),
    ("gt-results", Harness, 4),
    ("gt-compare", Harness, 5),
    ("gt-report", Harness, 6),
    ("guest-tests", Harness, 7),
    ("lab", Harness, 8),
];

/// The harness's uses of backend crates (rule 3), each with its reason.
const CROSSINGS: &[(&str, &str, &str)] = &[
    (
        "gt-launch",
        "vhost-blk-stats",
        "reads the backend's --stats-file before a kill",
    ),
    (
        "lab",
        "vhost-blk-stats",
        "the benchmark tables read the backend's statistics",
    ),
    (
        "lab",
        "vhost-blk-bench",
        "the benchmark tables read vhost-blk-bench's --json reports",
    ),
];

/// A use of one workspace crate by another, as Cargo declares it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Edge {
    from: String,
    to: String,
    /// `normal`, `dev` or `build`.
    kind: String,
}

/// The members and the edges between them, from `cargo metadata --format-version 1 --no-deps`.
fn workspace_graph(metadata: &Value) -> Result<(Vec<String>, Vec<Edge>), String> {
    let packages = metadata["packages"]
        .as_array()
        .ok_or("metadata: no packages")?;
    let member_ids = metadata["workspace_members"]
        .as_array()
        .ok_or("metadata: no workspace_members")?;
    let mut members = Vec::new();
    for p in packages {
        if member_ids.contains(&p["id"]) {
            let name = p["name"]
                .as_str()
                .ok_or("metadata: a package without a name")?;
            members.push(name.to_string());
        }
    }
    let mut edges = Vec::new();
    for p in packages {
        let from = p["name"].as_str().unwrap_or_default();
        if !members.iter().any(|m| m == from) {
            continue;
        }
        for d in p["dependencies"]
            .as_array()
            .ok_or("metadata: no dependencies")?
        {
            let to = d["name"].as_str().unwrap_or_default();
            // A member reached by path; a registry crate of the same name would have a source.
            if members.iter().any(|m| m == to) && d["source"].is_null() {
                let kind = d["kind"].as_str().unwrap_or("normal").to_string();
                edges.push(Edge {
                    from: from.to_string(),
                    to: to.to_string(),
                    kind,
                });
            }
        }
    }
    Ok((members, edges))
}

/// Every broken rule, one line each; empty when the workspace keeps its layers.
fn violations(members: &[String], edges: &[Edge]) -> Vec<String> {
    let table: BTreeMap<&str, (Side, u8)> = LAYERS.iter().map(|&(n, s, l)| (n, (s, l))).collect();
    let mut out = Vec::new();
    for m in members {
        if !table.contains_key(m.as_str()) {
            out.push(format!("{m}: a member with no place in LAYERS (rule 1)"));
        }
    }
    for name in table.keys() {
        if !members.iter().any(|m| m == name) {
            out.push(format!("{name}: in LAYERS but not a member (rule 1)"));
        }
    }
    for e in edges {
        let (Some(&(from_side, from_layer)), Some(&(to_side, to_layer))) =
            (table.get(e.from.as_str()), table.get(e.to.as_str()))
        else {
            continue; // reported above
        };
        let what = format!("{} -> {} ({})", e.from, e.to, e.kind);
        match (from_side, to_side) {
            (Backend, Harness) => {
                out.push(format!("{what}: the backend uses the harness (rule 3)"))
            }
            (Harness, Backend) if !CROSSINGS.iter().any(|c| c.0 == e.from && c.1 == e.to) => {
                out.push(format!("{what}: not an edge of CROSSINGS (rule 3)"));
            }
            (Harness, Backend) => {}
            _ if to_layer >= from_layer => out.push(format!(
                "{what}: layer {from_layer} uses layer {to_layer} (rule 2)"
            )),
            _ => {}
        }
    }
    out
}

fn cargo_metadata() -> Value {
    let manifest = concat!(env!("CARGO_MANIFEST_DIR"), "/../Cargo.toml");
    let out = Command::new(env!("CARGO"))
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--manifest-path",
        ])
        .arg(manifest)
        .output()
        .expect("run cargo metadata");
    assert!(
        out.status.success(),
        "cargo metadata: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("cargo metadata's JSON")
}

#[test]
fn the_workspace_keeps_its_layers() {
    let (members, edges) = workspace_graph(&cargo_metadata()).unwrap();
    // Not vacuous: the graph was read (every crate above the leaves uses one below it).
    assert!(members.len() >= LAYERS.len(), "{members:?}");
    assert!(edges.len() > 30, "{edges:?}");
    let bad = violations(&members, &edges);
    assert!(
        bad.is_empty(),
        "the workspace breaks its layering:\n{}",
        bad.join("\n")
    );
}

#[test]
fn every_crossing_is_an_edge_of_today() {
    let (_, edges) = workspace_graph(&cargo_metadata()).unwrap();
    for (from, to, why) in CROSSINGS {
        assert!(
            edges.iter().any(|e| e.from == *from && e.to == *to),
            "CROSSINGS allows {from} -> {to} ({why}), which no manifest declares: remove it"
        );
    }
}

/// A package of a metadata fixture: name and its dependencies (name, kind, from a registry).
fn package(name: &str, deps: &[(&str, &str, bool)]) -> Value {
    let deps: Vec<Value> = deps
        .iter()
        .map(|&(d, kind, registry)| {
            json!({
                "name": d,
                "kind": if kind == "normal" { Value::Null } else { json!(kind) },
                // Any source at all: a crate from a registry, not a member.
                "source": if registry { json!("registry") } else { Value::Null },
            })
        })
        .collect();
    json!({ "name": name, "id": format!("path+file:///w/{name}#0.1.0"), "dependencies": deps })
}

/// Metadata of a workspace that is every member of LAYERS plus `extra`, with `edges`.
fn fixture(extra: &[&str], edges: &[(&str, &str, &str)]) -> Value {
    let mut names: Vec<&str> = LAYERS.iter().map(|l| l.0).collect();
    names.extend_from_slice(extra);
    let packages: Vec<Value> = names
        .iter()
        .map(|n| {
            let deps: Vec<(&str, &str, bool)> = edges
                .iter()
                .filter(|e| e.0 == *n)
                .map(|e| (e.1, e.2, false))
                .chain([("serde", "normal", true)])
                .collect();
            package(n, &deps)
        })
        .collect();
    let ids: Vec<Value> = packages.iter().map(|p| p["id"].clone()).collect();
    json!({ "packages": packages, "workspace_members": ids })
}

fn check(metadata: &Value) -> Vec<String> {
    let (members, edges) = workspace_graph(metadata).unwrap();
    violations(&members, &edges)
}

#[test]
fn allowed_edges_pass() {
    let ok = fixture(
        &[],
        &[
            ("vhost-blk", "vhost-blk-scsi", "normal"),
            ("vhost-blk", "vhost-blk-frontend", "dev"),
            ("vhost-blk-scsi", "vhost-blk-units", "normal"),
            ("gt-report", "gt-launch", "dev"),
            ("guest-tests", "gt-suite", "normal"),
            ("gt-launch", "vhost-blk-stats", "normal"),
            ("lab", "vhost-blk-bench", "normal"),
        ],
    );
    assert_eq!(check(&ok), Vec::<String>::new());
}

#[test]
fn each_forbidden_edge_fails() {
    let cases = [
        (
            ("gt-suite", "gt-launch", "normal"),
            "gt-suite -> gt-launch (normal): layer 0 uses layer 3 (rule 2)",
        ),
        (
            ("gt-images", "gt-ordering", "dev"),
            "gt-images -> gt-ordering (dev): layer 1 uses layer 2 (rule 2)",
        ),
        (
            ("vhost-blk-scsi", "vhost-blk-completion", "normal"),
            "vhost-blk-scsi -> vhost-blk-completion (normal): layer 1 uses layer 1 (rule 2)",
        ),
        (
            ("vhost-blk-bench", "vhost-blk", "normal"),
            "vhost-blk-bench -> vhost-blk (normal): layer 2 uses layer 2 (rule 2)",
        ),
        (
            ("vhost-blk", "gt-suite", "build"),
            "vhost-blk -> gt-suite (build): the backend uses the harness (rule 3)",
        ),
        (
            ("gt-results", "vhost-blk", "normal"),
            "gt-results -> vhost-blk (normal): not an edge of CROSSINGS (rule 3)",
        ),
        (
            ("guest-tests", "vhost-blk-stats", "dev"),
            "guest-tests -> vhost-blk-stats (dev): not an edge of CROSSINGS (rule 3)",
        ),
    ];
    for (edge, want) in cases {
        assert_eq!(check(&fixture(&[], &[edge])), [want], "{edge:?}");
    }
}

#[test]
fn a_crate_without_a_place_fails() {
    assert_eq!(
        check(&fixture(&["gt-new"], &[("gt-new", "gt-suite", "normal")])),
        ["gt-new: a member with no place in LAYERS (rule 1)"]
    );
    let mut gone = fixture(&[], &[]);
    gone["workspace_members"]
        .as_array_mut()
        .unwrap()
        .retain(|id| id != "path+file:///w/lab#0.1.0");
    assert_eq!(check(&gone), ["lab: in LAYERS but not a member (rule 1)"]);
}

#[test]
fn the_real_graph_with_one_bad_edge_fails() {
    let mut metadata = cargo_metadata();
    let packages = metadata["packages"].as_array_mut().unwrap();
    let suite = packages
        .iter_mut()
        .find(|p| p["name"] == "gt-suite")
        .unwrap();
    suite["dependencies"]
        .as_array_mut()
        .unwrap()
        .push(json!({ "name": "gt-report", "kind": null, "source": null }));
    assert_eq!(
        check(&metadata),
        ["gt-suite -> gt-report (normal): layer 0 uses layer 6 (rule 2)"]
    );
}
