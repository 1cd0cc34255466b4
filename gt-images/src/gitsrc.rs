//! A developer's git tree as a kernel source: its identity (for the cache key and provenance)
//! and the incremental sync of the build's work tree to one commit of it.
//!
//! Rules:
//! 1. The work tree `<work>/src` is a `git clone --shared` of the developer's tree (objects are
//!    read from it, nothing is written to it). Switching commits is `git checkout --force` there,
//!    which rewrites only the files that differ, so `make` in the one build directory
//!    `<work>/build` rebuilds only what changed (with ccache for the rest).
//! 2. A sync first undoes the work tree's patch stack (checkout --force restores every file and
//!    the stack's record is dropped); the caller applies the wanted stack afterwards.
//! 3. Without a revision the current checkout is built *with* its uncommitted changes
//!    (`git diff HEAD --binary` applied, untracked files copied); its identity then carries a
//!    hash of those changes and `dirty=true`.
//! 4. SOURCE_DATE_EPOCH is the commit time of the built commit.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::util;
use super::{sha256_hex, ImageError};

/// A git tree at one commit, resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GitSource {
    pub path: PathBuf,
    pub commit: String,
    /// Build the checkout's uncommitted changes too (no revision given).
    pub with_changes: bool,
    /// `head=<commit> dirty=<bool> changes=<hash>`: the cache key's source line.
    pub identity: String,
}

fn git(path: &Path, args: &[&str]) -> Result<String, ImageError> {
    util::output(
        Command::new("git").arg("-C").arg(path).args(args),
        &format!("git {} in {}", args.join(" "), path.display()),
    )
    .map_err(|_| {
        ImageError::Usage(format!(
            "{} must be a git work tree (git {} failed)",
            path.display(),
            args.join(" ")
        ))
    })
}

/// The uncommitted changes of the checkout at `path`: tracked diff plus untracked files.
fn changes(path: &Path) -> Result<(bool, Vec<u8>), ImageError> {
    let status = git(path, &["status", "--porcelain=v1", "--untracked-files=all"])?;
    let diff = git(path, &["diff", "HEAD", "--binary"])?;
    let mut all = format!("{status}\0{diff}").into_bytes();
    // Untracked files by content too (status names them, diff does not show them).
    for f in untracked(path)? {
        all.extend_from_slice(f.as_bytes());
        all.extend(std::fs::read(path.join(&f)).unwrap_or_default());
    }
    Ok((!status.trim().is_empty(), all))
}

fn untracked(path: &Path) -> Result<Vec<String>, ImageError> {
    Ok(
        git(path, &["ls-files", "-z", "--others", "--exclude-standard"])?
            .split('\0')
            .filter(|f| !f.is_empty())
            .map(String::from)
            .collect(),
    )
}

impl GitSource {
    /// `rev` given: that commit, clean. None: the checkout with its uncommitted changes.
    pub fn resolve(path: &Path, rev: Option<&str>) -> Result<GitSource, ImageError> {
        let path = path.canonicalize().map_err(|e| ImageError::io(path, e))?;
        let commit =
            super::spec::resolve_rev(&path, rev.unwrap_or("HEAD")).map_err(ImageError::Usage)?;
        let (dirty, hash) = match rev {
            Some(_) => (false, "none".to_string()),
            None => {
                let (dirty, all) = changes(&path)?;
                (dirty, sha256_hex(&all)[..16].to_string())
            }
        };
        Ok(GitSource {
            identity: format!("head={commit} dirty={dirty} changes={hash}"),
            path,
            commit,
            with_changes: rev.is_none(),
        })
    }

    /// Makes `<work>/src` hold this commit (rules 1-3); returns SOURCE_DATE_EPOCH.
    pub fn sync(&self, work: &Path, log: &Path) -> Result<i64, ImageError> {
        let src = work.join("src");
        if !src.join(".git").exists() {
            for d in ["src", "build"] {
                let p = work.join(d);
                if p.exists() {
                    std::fs::remove_dir_all(&p).map_err(|e| ImageError::io(&p, e))?;
                }
            }
            util::mkdirs(work)?;
            util::run_logged(
                Command::new("git")
                    .args(["clone", "-q", "--shared", "--no-checkout"])
                    .arg(&self.path)
                    .arg(&src),
                "git clone --shared",
                log,
                |_| {},
            )?;
        }
        let state = src.join(super::patches::STATE_DIR);
        if state.exists() {
            std::fs::remove_dir_all(&state).map_err(|e| ImageError::io(&state, e))?;
        }
        let run = |args: &[&str], what: &str| {
            util::run_logged(
                Command::new("git").arg("-C").arg(&src).args(args),
                what,
                log,
                |_| {},
            )
        };
        run(
            &["checkout", "-q", "--force", "--detach", &self.commit],
            "git checkout",
        )?;
        run(&["clean", "-q", "-f", "-d"], "git clean")?;
        if self.with_changes {
            let diff = Command::new("git")
                .arg("-C")
                .arg(&self.path)
                .args(["diff", "HEAD", "--binary"])
                .output()
                .map_err(|e| ImageError::io(&self.path, e))?;
            if !diff.stdout.is_empty() {
                let p = work.join("changes.diff");
                std::fs::write(&p, &diff.stdout).map_err(|e| ImageError::io(&p, e))?;
                let abs = p.display().to_string();
                run(
                    &["apply", "--binary", &abs],
                    "git apply (uncommitted changes)",
                )?;
            }
            for f in untracked(&self.path)? {
                let to = src.join(&f);
                if let Some(dir) = to.parent() {
                    util::mkdirs(dir)?;
                }
                std::fs::copy(self.path.join(&f), &to).map_err(|e| ImageError::io(&to, e))?;
            }
        }
        let ct = git(&src, &["log", "-1", "--format=%ct"])?;
        Ok(ct.trim().parse().unwrap_or(0))
    }
}

/// Test helpers: git in a directory (fixed identity), and a minimal kernel-looking tree (for
/// other crates' tests: cargo feature `fixtures`).
#[cfg(any(test, feature = "fixtures"))]
#[allow(clippy::unwrap_used)]
pub mod testtree {
    use std::path::Path;
    use std::process::Command;

    /// Runs `git -C dir args...`, asserting that it succeeds.
    pub fn git(dir: &Path, args: &[&str]) {
        let ok = Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(["-c", "user.name=t", "-c", "user.email=t@t"])
            .args(args)
            .output()
            .unwrap()
            .status
            .success();
        assert!(ok, "git {args:?}");
    }

    /// A git repository with a Makefile and a Kconfig, committed as `subject`.
    pub fn kernel_tree(subject: &str) -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("Makefile"), "all:\n").unwrap();
        std::fs::write(d.path().join("Kconfig"), "\n").unwrap();
        git(d.path(), &["init", "-q"]);
        git(d.path(), &["add", "."]);
        git(d.path(), &["commit", "-qm", subject]);
        d
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repo() -> (tempfile::TempDir, impl Fn(&[&str])) {
        let d = testtree::kernel_tree("one");
        let p = d.path().to_path_buf();
        (d, move |args: &[&str]| testtree::git(&p, args))
    }

    #[test]
    fn identity_follows_commits_and_uncommitted_changes() {
        let (d, git) = repo();
        let a = GitSource::resolve(d.path(), None).unwrap();
        assert_eq!(a, GitSource::resolve(d.path(), None).unwrap());
        assert!(a.identity.contains("dirty=false"));
        std::fs::write(d.path().join("Makefile"), "all: x\n").unwrap();
        let b = GitSource::resolve(d.path(), None).unwrap();
        assert_ne!(
            a.identity, b.identity,
            "an uncommitted edit changes the identity"
        );
        assert!(b.identity.contains("dirty=true"));
        std::fs::write(d.path().join("new.c"), "int x;\n").unwrap();
        let c = GitSource::resolve(d.path(), None).unwrap();
        assert_ne!(b.identity, c.identity, "an untracked file too");
        std::fs::write(d.path().join("new.c"), "int y;\n").unwrap();
        assert_ne!(
            c.identity,
            GitSource::resolve(d.path(), None).unwrap().identity,
            "and its content"
        );
        // A revision is clean whatever the checkout holds.
        let r = GitSource::resolve(d.path(), Some("HEAD")).unwrap();
        assert_eq!(r.commit, a.commit);
        assert!(r.identity.ends_with("dirty=false changes=none"));
        git(&["add", "."]);
        git(&["commit", "-qm", "two"]);
        assert_ne!(
            GitSource::resolve(d.path(), Some("HEAD")).unwrap().commit,
            a.commit
        );
        let e = GitSource::resolve(&d.path().join("nope"), None).unwrap_err();
        assert!(matches!(e, ImageError::Io { .. }));
    }

    #[test]
    fn sync_switches_commits_touching_only_changed_files() {
        let (d, git) = repo();
        std::fs::write(d.path().join("same.c"), "int s;\n").unwrap();
        std::fs::write(d.path().join("moves.c"), "int m = 1;\n").unwrap();
        git(&["add", "."]);
        git(&["commit", "-qm", "files"]);
        let first = GitSource::resolve(d.path(), Some("HEAD")).unwrap();
        std::fs::write(d.path().join("moves.c"), "int m = 2;\n").unwrap();
        git(&["commit", "-qam", "change"]);
        let second = GitSource::resolve(d.path(), Some("HEAD")).unwrap();
        let w = tempfile::tempdir().unwrap();
        let log = w.path().join("log");
        first.sync(w.path(), &log).unwrap();
        let src = w.path().join("src");
        assert_eq!(
            std::fs::read_to_string(src.join("moves.c")).unwrap(),
            "int m = 1;\n"
        );
        let t0 = std::fs::metadata(src.join("same.c"))
            .unwrap()
            .modified()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
        // A leftover patch record and an edited file are cleaned up by the next sync.
        std::fs::create_dir_all(src.join(super::super::patches::STATE_DIR)).unwrap();
        std::fs::write(src.join("moves.c"), "patched\n").unwrap();
        second.sync(w.path(), &log).unwrap();
        assert_eq!(
            std::fs::read_to_string(src.join("moves.c")).unwrap(),
            "int m = 2;\n"
        );
        let t1 = std::fs::metadata(src.join("same.c"))
            .unwrap()
            .modified()
            .unwrap();
        assert_eq!(
            t0, t1,
            "an unchanged file keeps its mtime (make stays incremental)"
        );
        assert!(!src.join(super::super::patches::STATE_DIR).exists());
        // The checkout with uncommitted and untracked changes.
        std::fs::write(d.path().join("moves.c"), "int m = 3;\n").unwrap();
        std::fs::write(d.path().join("extra.c"), "int e;\n").unwrap();
        let dirty = GitSource::resolve(d.path(), None).unwrap();
        dirty.sync(w.path(), &log).unwrap();
        assert_eq!(
            std::fs::read_to_string(src.join("moves.c")).unwrap(),
            "int m = 3;\n"
        );
        assert_eq!(
            std::fs::read_to_string(src.join("extra.c")).unwrap(),
            "int e;\n"
        );
        second.sync(w.path(), &log).unwrap();
        assert!(
            !src.join("extra.c").exists(),
            "untracked copies are cleaned"
        );
    }
}
