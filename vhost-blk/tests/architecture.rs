//! ARCHITECTURE.md's room list matches the tree of `vhost-blk/src`.
//!
//! 1. Every path the list names (an entry's head, and each path token of its text; see
//!    `rooms/mod.rs`) exists. A token without `/` names a file or folder of its entry's folder
//!    (`storage/` + `file.rs` = `src/storage/file.rs`), else of `src/`; one with `/` is under
//!    `src/`.
//! 2. Every room that exists is listed: each top-level module (`src/x.rs`, `src/x/`; not the
//!    crate roots `lib.rs`, `main.rs`, nor `src/bin/`) and each first-level submodule of a folder
//!    module (`src/x/y.rs`, `src/x/y/`), test modules aside (`tests.rs`, `*_tests.rs`, and any
//!    `mod y;` under `#[cfg(test)]`).

mod rooms;

use std::collections::BTreeSet;
use std::path::Path;

use rooms::{entries, module_path, path_tokens, Entry};

type ModPath = Vec<String>;

/// The modules the section names, and the tokens that name nothing.
fn listed(src: &Path, entries: &[Entry]) -> (BTreeSet<ModPath>, Vec<String>) {
    let (mut named, mut missing) = (BTreeSet::new(), Vec::new());
    for e in entries {
        let head_dir = e.head.strip_suffix('/').map_or_else(
            || e.head.strip_suffix(".rs").unwrap_or(&e.head).to_string(),
            String::from,
        );
        let mut found = |rel: String| {
            if src.join(&rel).exists() {
                if !rel.starts_with("bin/") {
                    named.insert(module_path(&rel));
                }
                true
            } else {
                false
            }
        };
        if !found(e.head.clone()) {
            missing.push(e.head.clone());
        }
        for t in path_tokens(&e.text) {
            let ok = if t.trim_end_matches('/').contains('/') {
                found(t.clone())
            } else {
                found(format!("{head_dir}/{t}")) || found(t.clone())
            };
            if !ok {
                missing.push(format!("{t} (in the entry of {})", e.head));
            }
        }
    }
    (named, missing)
}

/// The rooms of a crate's source tree (rule 2).
fn existing(src: &Path) -> BTreeSet<ModPath> {
    let mut out = BTreeSet::new();
    for (name, is_dir) in children(src) {
        if name == "bin" || name == "lib.rs" || name == "main.rs" {
            continue;
        }
        let top = name.strip_suffix(".rs").unwrap_or(&name).to_string();
        out.insert(vec![top.clone()]);
        if !is_dir {
            continue;
        }
        let folder = src.join(&top);
        let parent = [folder.join("mod.rs"), src.join(format!("{top}.rs"))]
            .iter()
            .filter_map(|p| std::fs::read_to_string(p).ok())
            .collect::<String>();
        let test_only = test_modules(&parent);
        for (child, _) in children(&folder) {
            let stem = child.strip_suffix(".rs").unwrap_or(&child);
            if stem == "mod"
                || stem == "tests"
                || stem.ends_with("_tests")
                || test_only.iter().any(|t| t == stem)
            {
                continue;
            }
            out.insert(vec![top.clone(), stem.to_string()]);
        }
    }
    out
}

/// The `.rs` files and folders in `dir`: (name, is a folder).
fn children(dir: &Path) -> Vec<(String, bool)> {
    std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir() || p.extension().is_some_and(|x| x == "rs"))
        .map(|p| {
            (
                p.file_name().unwrap().to_string_lossy().into_owned(),
                p.is_dir(),
            )
        })
        .collect()
}

/// The names of `mod y;` declarations under `#[cfg(test)]` (other attributes may come between).
fn test_modules(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut after_cfg_test = false;
    for line in text.lines().map(str::trim) {
        if line == "#[cfg(test)]" {
            after_cfg_test = true;
            continue;
        }
        if after_cfg_test && line.starts_with("#[") {
            continue;
        }
        if after_cfg_test {
            let decl = line.strip_prefix("pub(crate) ").unwrap_or(line);
            let decl = decl.strip_prefix("pub ").unwrap_or(decl);
            if let Some(name) = decl.strip_prefix("mod ").and_then(|d| d.strip_suffix(';')) {
                out.push(name.trim().to_string());
            }
        }
        after_cfg_test = false;
    }
    out
}

fn check(crate_dir: &str) {
    let src = rooms::repo().join(crate_dir).join("src");
    let entries = entries(&rooms::architecture(), crate_dir);
    assert!(
        entries.len() > 5,
        "{crate_dir}: too few entries: {entries:?}"
    );
    let (named, missing) = listed(&src, &entries);
    assert!(
        missing.is_empty(),
        "ARCHITECTURE.md names what {crate_dir}/src does not have: {missing:?}"
    );
    let found = existing(&src);
    assert!(
        found.len() > 20,
        "{crate_dir}: too few rooms found: {found:?}"
    );
    let unlisted: Vec<String> = found.difference(&named).map(|m| m.join("/")).collect();
    assert!(
        unlisted.is_empty(),
        "rooms of {crate_dir}/src that ARCHITECTURE.md does not list: {unlisted:?}"
    );
}

#[test]
fn architecture_md_lists_every_room_of_vhost_blk_and_nothing_else() {
    check("vhost-blk");
}

#[test]
fn path_tokens_are_told_from_prose() {
    let text = "(file.rs: image files), locks/, suite/cells.rs; kernels.toml docs/restart.md \
                registry/catalog*.rs READ/WRITE (10)/(16) `compare --each`";
    assert_eq!(
        path_tokens(text),
        ["file.rs", "locks/", "suite/cells.rs"],
        "{text}"
    );
    assert_eq!(module_path("scsi/emulation/"), ["scsi", "emulation"]);
}

#[test]
fn entries_and_layers_come_from_the_section() {
    let doc = "x\n## Rooms\n\n```\na/src/\n  units.rs     sizes, one rule\n  scsi/        \
               virtio.rs\n               control.rs\n  scsi/emulation/  target\n  bin/x/   y.rs\n\
               a/fuzz/  not.rs\n\nb/src/\n  other.rs  z\n```\n";
    let e = entries(doc, "a");
    let heads: Vec<&str> = e.iter().map(|e| e.head.as_str()).collect();
    assert_eq!(heads, ["units.rs", "scsi/", "scsi/emulation/", "bin/x/"]);
    assert_eq!(path_tokens(&e[1].text), ["virtio.rs", "control.rs"]);
    assert_eq!(rooms::layers(&e), ["units", "scsi"]);
    assert_eq!(entries(doc, "b")[0].head, "other.rs");
}

#[test]
fn a_missing_or_unlisted_room_is_caught() {
    let dir = std::env::temp_dir().join(format!("vb-arch-test-{}", std::process::id()));
    let src = dir.join("src");
    std::fs::create_dir_all(src.join("dev")).unwrap();
    for f in [
        "lib.rs",
        "units.rs",
        "dev/mod.rs",
        "dev/queue.rs",
        "dev/extra.rs",
        "dev/tests.rs",
    ] {
        std::fs::write(src.join(f), "").unwrap();
    }
    std::fs::write(
        src.join("dev/mod.rs"),
        "#[cfg(test)]\n#[path = \"x.rs\"]\nmod extra;\n",
    )
    .unwrap();
    std::fs::write(src.join("gone.rs"), "").unwrap();
    let doc = "x\n## Rooms\n```\nc/src/\n  units.rs  x\n  dev/  queue.rs, ghost.rs\n```\n";
    let (named, missing) = listed(&src, &entries(doc, "c"));
    assert_eq!(missing, ["ghost.rs (in the entry of dev/)"]);
    let unlisted: Vec<ModPath> = existing(&src).difference(&named).cloned().collect();
    std::fs::remove_dir_all(&dir).unwrap();
    // dev/extra.rs is test-only (cfg(test)), dev/tests.rs by its name: neither is a room.
    assert_eq!(unlisted, [vec!["gone".to_string()]]);
}
