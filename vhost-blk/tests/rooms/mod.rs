//! ARCHITECTURE.md's room list ("## Rooms"), read for the tests that hold the tree to it.
//!
//! 1. The list is the first fenced block after the `## Rooms` heading. A crate's section starts
//!    at an unindented line `<crate>/src/` and ends at the next unindented line.
//! 2. An entry starts at a line indented by exactly two spaces; its first word is its head (a
//!    path under `src/`: `units.rs`, `storage/`, `scsi/emulation/`). The lines indented deeper
//!    that follow are its text.
//! 3. The order of the heads is the crate's layering, bottom up: a room may import only rooms
//!    whose entries come earlier (several entries with one top-level module are one room).
//! 4. A path token is a word (stripped of surrounding punctuation) made of `[a-z0-9_]` segments
//!    joined by `/` and ending in `.rs` or `/`: `relay.rs`, `locks/`, `suite/cells.rs`. Other
//!    words (`kernels.toml`, `docs/restart.md`, `registry/catalog*.rs`) are prose.

#![allow(dead_code)] // each test crate uses its own part

use std::path::{Path, PathBuf};

/// One entry of a crate's section (rule 2).
#[derive(Debug)]
pub struct Entry {
    /// The head, as written (`scsi/emulation/`).
    pub head: String,
    /// The rest of the entry's lines.
    pub text: String,
}

/// The repository root (vhost-blk's parent).
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// ARCHITECTURE.md's text.
pub fn architecture() -> String {
    let p = repo().join("ARCHITECTURE.md");
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// The entries of `crate_dir`'s section (`"vhost-blk"`), in order.
pub fn entries(doc: &str, crate_dir: &str) -> Vec<Entry> {
    let block = rooms_block(doc);
    let header = format!("{crate_dir}/src/");
    let lines = block.lines().skip_while(|l| l.trim_end() != header).skip(1);
    let mut out: Vec<Entry> = Vec::new();
    for line in lines {
        if !line.starts_with(' ') && !line.trim().is_empty() {
            break;
        }
        if line.starts_with("  ") && !line.starts_with("   ") {
            let (head, text) = line
                .trim()
                .split_once(char::is_whitespace)
                .unwrap_or((line.trim(), ""));
            out.push(Entry {
                head: head.to_string(),
                text: text.trim().to_string(),
            });
        } else if let Some(last) = out.last_mut() {
            last.text.push('\n');
            last.text.push_str(line.trim());
        }
    }
    out
}

/// The fenced block after `## Rooms` (rule 1).
fn rooms_block(doc: &str) -> String {
    let after = doc
        .split_once("\n## Rooms\n")
        .map(|(_, a)| a)
        .expect("ARCHITECTURE.md has no '## Rooms' section");
    after
        .split("```")
        .nth(1)
        .expect("no fenced block under '## Rooms'")
        .to_string()
}

/// The path tokens of `text` (rule 4).
pub fn path_tokens(text: &str) -> Vec<String> {
    text.split_whitespace()
        .map(|w| w.trim_matches(|c: char| "()[],;:`'\"".contains(c)))
        .filter(|w| is_path_token(w))
        .map(String::from)
        .collect()
}

fn is_path_token(w: &str) -> bool {
    let body = if let Some(b) = w.strip_suffix(".rs") {
        b
    } else if let Some(b) = w.strip_suffix('/') {
        b
    } else {
        return false;
    };
    !body.is_empty()
        && body.split('/').all(|seg| {
            !seg.is_empty()
                && seg
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        })
}

/// The module path a token names (`scsi/emulation/` -> `["scsi", "emulation"]`,
/// `units.rs` -> `["units"]`).
pub fn module_path(token: &str) -> Vec<String> {
    let t = token.strip_suffix('/').unwrap_or(token);
    let t = t.strip_suffix(".rs").unwrap_or(t);
    t.split('/').map(String::from).collect()
}

/// The top-level modules in the order their entries come (rule 3), `bin` left out.
pub fn layers(entries: &[Entry]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for e in entries {
        let top = module_path(&e.head).remove(0);
        if top != "bin" && !out.contains(&top) {
            out.push(top);
        }
    }
    out
}
