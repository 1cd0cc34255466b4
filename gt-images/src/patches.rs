//! Patch stacks on a work tree, with GNU `patch -p1 --fuzz=0` (offsets are fine, fuzz is not: a
//! context mismatch means the patch was written for other code).
//!
//! A work tree remembers which patches are applied (a copy of each, so reverting never depends on
//! the original file still being the same). Switching to another stack reverts the applied patches
//! beyond the common prefix and applies the rest; every patch is dry-run first, so a patch that
//! does not apply leaves the tree as it was and the error names the patch, the file and the hunk.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::{sha256_hex, ImageError};

/// Where the applied copies live inside the work tree (outside the kernel's own files).
pub(crate) const STATE_DIR: &str = ".vb-applied";

/// One patch of a stack: its origin (for messages) and content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Patch {
    pub origin: PathBuf,
    pub content: Vec<u8>,
}

impl Patch {
    pub fn read(path: &Path) -> Result<Patch, ImageError> {
        let content = std::fs::read(path).map_err(|e| ImageError::io(path, e))?;
        Ok(Patch {
            origin: path.to_path_buf(),
            content,
        })
    }
    pub fn sha256(&self) -> String {
        sha256_hex(&self.content)
    }
}

/// Failed hunks reported by `patch`: `file: hunk #N FAILED at L` lines, or patch's own words
/// when it failed for another reason (missing file, garbage).
pub fn describe_failure(output: &str) -> String {
    let mut file = String::new();
    let mut found = Vec::new();
    let mut missing = false;
    for line in output.lines() {
        if let Some(f) = line
            .strip_prefix("checking file ")
            .or_else(|| line.strip_prefix("patching file "))
        {
            file = f.trim().to_string();
        } else if line.starts_with("Hunk #") && line.contains("FAILED") {
            let hunk = line.trim_end_matches('.').to_lowercase();
            found.push(format!("{file}: {hunk}"));
        } else if line.contains("can't find file to patch") {
            missing = true;
        } else if let (true, Some(f)) = (missing, line.strip_prefix("|+++ ")) {
            let f = f.split_whitespace().next().unwrap_or(f);
            let f = f.split_once('/').map_or(f, |(_, rest)| rest);
            found.push(format!("{f}: file to patch not found"));
            missing = false;
        } else if line.contains("Reversed (or previously applied) patch detected") {
            found.push(format!("{file}: already applied (reversed patch detected)"));
        } else if line.contains("malformed patch") || line.contains("Only garbage") {
            found.push(line.trim().to_string());
        }
    }
    if found.is_empty() {
        output
            .trim()
            .lines()
            .last()
            .unwrap_or("no output")
            .to_string()
    } else {
        found.join("; ")
    }
}

fn run_patch(
    tree: &Path,
    patch_file: &Path,
    reverse: bool,
    dry: bool,
) -> Result<(bool, String), ImageError> {
    let mut cmd = Command::new("patch");
    cmd.arg("-p1")
        .arg("--batch")
        .arg("--forward")
        .arg("--no-backup-if-mismatch")
        .arg("--fuzz=0")
        .arg("-r")
        .arg("-")
        .arg("-d")
        .arg(tree)
        .arg("-i")
        .arg(patch_file);
    if reverse {
        cmd.arg("-R");
    }
    if dry {
        cmd.arg("--dry-run");
    }
    let out = cmd
        .output()
        .map_err(|e| ImageError::Tool(format!("cannot run patch: {e}")))?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    Ok((out.status.success(), text))
}

fn state_dir(tree: &Path) -> PathBuf {
    tree.join(STATE_DIR)
}

/// The stored copies of the applied patches, in application order.
pub fn applied(tree: &Path) -> Result<Vec<PathBuf>, ImageError> {
    let dir = state_dir(tree);
    if !dir.exists() {
        return Ok(Vec::new());
    }
    let mut v: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map_err(|e| ImageError::io(&dir, e))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "patch"))
        .collect();
    v.sort();
    Ok(v)
}

fn stored_sha(p: &Path) -> String {
    // name: NNN-<sha256>.patch
    p.file_stem()
        .and_then(|s| s.to_str())
        .and_then(|s| s.split_once('-'))
        .map(|(_, sha)| sha.to_string())
        .unwrap_or_default()
}

fn revert_one(tree: &Path, stored: &Path) -> Result<(), ImageError> {
    let (ok, out) = run_patch(tree, stored, true, false)?;
    if !ok {
        return Err(ImageError::Tool(format!(
            "cannot revert {} in {} ({}); delete that work tree to start afresh",
            stored.display(),
            tree.display(),
            describe_failure(&out)
        )));
    }
    std::fs::remove_file(stored).map_err(|e| ImageError::io(stored, e))
}

/// Applies one patch on top of the current stack (dry run first).
fn apply_one(tree: &Path, index: usize, p: &Patch) -> Result<(), ImageError> {
    let dir = state_dir(tree);
    std::fs::create_dir_all(&dir).map_err(|e| ImageError::io(&dir, e))?;
    let stored = dir.join(format!("{index:03}-{}.patch", p.sha256()));
    std::fs::write(&stored, &p.content).map_err(|e| ImageError::io(&stored, e))?;
    let (ok, out) = run_patch(tree, &stored, false, true)?;
    if !ok {
        let _ = std::fs::remove_file(&stored);
        return Err(ImageError::PatchFailed {
            patch: p.origin.clone(),
            detail: describe_failure(&out),
        });
    }
    let (ok, out) = run_patch(tree, &stored, false, false)?;
    if !ok {
        return Err(ImageError::Tool(format!(
            "{} passed the dry run but failed to apply in {}: {}",
            p.origin.display(),
            tree.display(),
            describe_failure(&out)
        )));
    }
    Ok(())
}

/// Makes `tree` carry exactly `stack` (in order) on top of its pristine state. On a patch that
/// does not apply, the tree is brought back to the stack it had before and the error names it.
pub fn switch_stack(tree: &Path, stack: &[Patch]) -> Result<(), ImageError> {
    let current = applied(tree)?;
    let common = current
        .iter()
        .zip(stack)
        .take_while(|(c, p)| stored_sha(c) == p.sha256())
        .count();
    let mut old = Vec::new();
    for stored in &current[common..] {
        old.push(Patch::read(stored)?);
    }
    for stored in current[common..].iter().rev() {
        revert_one(tree, stored)?;
    }
    for (i, p) in stack.iter().enumerate().skip(common) {
        if let Err(e) = apply_one(tree, i, p) {
            // Back to the stack the tree had before this call.
            for stored in applied(tree)?[common..].iter().rev() {
                revert_one(tree, stored)?;
            }
            for (j, p) in old.iter().enumerate() {
                apply_one(tree, common + j, p)?;
            }
            return Err(e);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree() -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("block")).unwrap();
        let body: String = (1..=30).map(|i| format!("line {i}\n")).collect();
        std::fs::write(d.path().join("block/blk-mq.c"), body).unwrap();
        d
    }

    fn patch(name: &str, text: &str) -> Patch {
        Patch {
            origin: PathBuf::from(name),
            content: format!("Header text of {name}\n\n{text}").into_bytes(),
        }
    }

    fn p1() -> Patch {
        patch(
            "one.patch",
            "--- a/block/blk-mq.c\n+++ b/block/blk-mq.c\n@@ -4,3 +4,3 @@\n line 4\n-line 5\n+line five\n line 6\n",
        )
    }

    fn p2() -> Patch {
        // Needs p1 first.
        patch(
            "two.patch",
            "--- a/block/blk-mq.c\n+++ b/block/blk-mq.c\n@@ -4,4 +4,5 @@\n line 4\n line five\n+line five and a half\n line 6\n line 7\n",
        )
    }

    fn bad() -> Patch {
        patch(
            "bad.patch",
            "--- a/block/blk-mq.c\n+++ b/block/blk-mq.c\n@@ -20,3 +20,3 @@\n nothing\n-like this\n+here\n at all\n",
        )
    }

    fn file(t: &Path) -> String {
        std::fs::read_to_string(t.join("block/blk-mq.c")).unwrap()
    }

    #[test]
    fn applies_switches_and_reverts_stacks() {
        let t = tree();
        let pristine = file(t.path());
        switch_stack(t.path(), &[p1(), p2()]).unwrap();
        assert!(file(t.path()).contains("line five\nline five and a half\nline 6"));
        assert_eq!(applied(t.path()).unwrap().len(), 2);
        // Dropping the top patch reverts only it.
        switch_stack(t.path(), &[p1()]).unwrap();
        assert!(file(t.path()).contains("line five\nline 6"));
        assert_eq!(applied(t.path()).unwrap().len(), 1);
        switch_stack(t.path(), &[]).unwrap();
        assert_eq!(file(t.path()), pristine);
        assert!(applied(t.path()).unwrap().is_empty());
    }

    #[test]
    fn a_patch_that_does_not_apply_names_file_and_hunk_and_leaves_the_tree() {
        let t = tree();
        switch_stack(t.path(), &[p1()]).unwrap();
        let before = file(t.path());
        let e = switch_stack(t.path(), &[p1(), p2(), bad()]).unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains("bad.patch"), "{msg}");
        assert!(
            msg.contains("block/blk-mq.c: hunk #1 failed at 20"),
            "{msg}"
        );
        assert_eq!(file(t.path()), before);
        assert_eq!(applied(t.path()).unwrap().len(), 1);
        // A failure after reverting part of the old stack restores that part too.
        switch_stack(t.path(), &[p1(), p2()]).unwrap();
        let before = file(t.path());
        let e = switch_stack(t.path(), &[p1(), bad()])
            .unwrap_err()
            .to_string();
        assert!(e.contains("bad.patch"), "{e}");
        assert_eq!(file(t.path()), before);
        assert_eq!(applied(t.path()).unwrap().len(), 2);
    }

    #[test]
    fn a_stacked_patch_without_its_base_fails() {
        let t = tree();
        let e = switch_stack(t.path(), &[p2()]).unwrap_err().to_string();
        assert!(e.contains("two.patch") && e.contains("hunk #1"), "{e}");
        assert!(applied(t.path()).unwrap().is_empty());
    }

    #[test]
    fn a_patch_for_a_missing_file_says_so() {
        let t = tree();
        let p = patch(
            "missing.patch",
            "--- a/block/nothere.c\n+++ b/block/nothere.c\n@@ -1,1 +1,1 @@\n-a\n+b\n",
        );
        let e = switch_stack(t.path(), &[p]).unwrap_err().to_string();
        assert!(e.contains("missing.patch"), "{e}");
        assert!(
            e.contains("block/nothere.c: file to patch not found"),
            "{e}"
        );
    }
}
