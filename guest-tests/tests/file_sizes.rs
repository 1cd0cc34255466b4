//! No source file of guest-tests or vhost-blk over 600 lines, except test files (`tests.rs`,
//! `*_tests.rs`, and everything under `tests/`).

use std::path::{Path, PathBuf};

const MAX_LINES: usize = 600;

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

#[test]
fn no_source_file_is_over_600_lines() {
    let mut files = Vec::new();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    rust_files(&root.join("src"), &mut files);
    let n = files.len();
    assert!(n > 20);
    let blk = root.join("../vhost-blk/src");
    if blk.is_dir() {
        rust_files(&blk, &mut files);
        assert!(files.len() > n + 20);
    }
    let too_long: Vec<String> = files
        .iter()
        .filter(|p| {
            let name = p.file_name().unwrap().to_string_lossy();
            name != "tests.rs" && !name.ends_with("_tests.rs")
        })
        .filter_map(|p| {
            let n = std::fs::read_to_string(p).unwrap().lines().count();
            (n > MAX_LINES).then(|| format!("{}: {n} lines", p.display()))
        })
        .collect();
    assert!(too_long.is_empty(), "over {MAX_LINES} lines: {too_long:?}");
}
