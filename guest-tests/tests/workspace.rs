//! The workspace's house rules (the layering is `tests/layers.rs`'s):
//!
//! 1. Each crate of the workspace (Cargo.toml's `members`) has a README.md saying what it owns
//!    and what it uses.
//! 2. No source file is over 600 lines, test files aside (`tests.rs`, `*_tests.rs`, `tests/`).
//! 3. No crate is over 8,000 non-test lines (`cargo test -p guest-tests --test workspace --
//!    --nocapture` prints the table). Non-test lines: every line of `src/**/*.rs` except test
//!    files (rule 2) and `#[cfg(test)]` items (a `mod x;` line, or a block up to its closing
//!    brace in column 0).

use std::path::{Path, PathBuf};

const MAX_FILE_LINES: usize = 600;
const MAX_CRATE_LINES: usize = 8_000;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The workspace's members, from the root Cargo.toml.
fn members() -> Vec<String> {
    let text = std::fs::read_to_string(repo().join("Cargo.toml")).unwrap();
    let doc: toml::Table = text.parse().unwrap();
    doc["workspace"]["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m.as_str().unwrap().to_string())
        .collect()
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

fn is_test_file(p: &Path) -> bool {
    let name = p.file_name().unwrap().to_string_lossy();
    name == "tests.rs" || name.ends_with("_tests.rs")
}

/// The lines of `text` outside `#[cfg(test)]` items (rule 3).
fn non_test_lines(text: &str) -> usize {
    let mut lines = text.lines();
    let mut n = 0;
    while let Some(line) = lines.next() {
        if line.trim() != "#[cfg(test)]" {
            n += 1;
            continue;
        }
        let Some(item) = lines.next() else { break };
        if item.trim_end().ends_with('{') {
            for l in lines.by_ref() {
                if l.starts_with('}') {
                    break;
                }
            }
        }
    }
    n
}

#[test]
fn each_crate_has_a_readme() {
    let members = members();
    assert!(members.len() >= 8, "{members:?}");
    for m in &members {
        assert!(
            repo().join(m).join("README.md").is_file(),
            "{m} has no README.md"
        );
    }
}

#[test]
fn no_source_file_is_over_600_lines() {
    let mut files = Vec::new();
    for m in members() {
        rust_files(&repo().join(m).join("src"), &mut files);
    }
    assert!(files.len() > 100, "{}", files.len());
    let too_long: Vec<String> = files
        .iter()
        .filter(|p| !is_test_file(p))
        .filter_map(|p| {
            let n = std::fs::read_to_string(p).unwrap().lines().count();
            (n > MAX_FILE_LINES).then(|| format!("{}: {n} lines", p.display()))
        })
        .collect();
    assert!(
        too_long.is_empty(),
        "over {MAX_FILE_LINES} lines: {too_long:?}"
    );
}

#[test]
fn no_crate_is_over_8000_non_test_lines() {
    let mut over = Vec::new();
    println!("{:<20} {:>7} {:>7}", "crate", "files", "lines");
    for m in members() {
        let mut files = Vec::new();
        rust_files(&repo().join(&m).join("src"), &mut files);
        files.retain(|p| !is_test_file(p));
        let lines: usize = files
            .iter()
            .map(|p| non_test_lines(&std::fs::read_to_string(p).unwrap()))
            .sum();
        println!("{m:<20} {:>7} {lines:>7}", files.len());
        if lines > MAX_CRATE_LINES {
            over.push(format!("{m}: {lines}"));
        }
    }
    assert!(
        over.is_empty(),
        "over {MAX_CRATE_LINES} non-test lines: {over:?}"
    );
}

#[test]
fn test_items_are_not_counted() {
    let text = "fn a() {}\n#[cfg(test)]\nmod tests;\nfn b() {}\n#[cfg(test)]\nmod t {\n    \
                fn x() {\n    }\n}\nfn c() {}\n";
    assert_eq!(non_test_lines(text), 3);
}
