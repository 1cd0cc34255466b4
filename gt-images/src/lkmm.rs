//! The Linux-kernel memory model of a kernel source: its `tools/memory-model` directory
//! (linux-kernel.cfg, .cat, .bell, .def and the shipped litmus-tests/), for `guest-tests
//! ordering`. A kernel is judged by the model of the source it is built from, so a 7.3 kernel by
//! 7.3's model.
//!
//! Rules:
//! 1. A Debian source package comes through the image builder's own download
//!    ([`apt::download_deb`]: the manifest's version and sha256, its private sources line); only
//!    `tools/memory-model` is taken out of the kernel tarball inside it, into
//!    `<cache>/lkmm/<package>_<version>/` (once; a stamp names the package, version and sha256).
//! 2. A git tree at a revision: `git archive` of that commit's `tools/memory-model` into
//!    `<cache>/lkmm/tree-<commit>/`; a tree's checkout (no revision) is read in place, uncommitted
//!    changes too.
//! 3. Whatever the route, the directory holds `linux-kernel.cfg`, or it is an error.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::manifest::{Manifest, Source};
use super::util::{self, Ctx, Lock};
use super::{apt, ImageError};

/// A kernel source's memory model, ready for herd7 (`-conf linux-kernel.cfg` in `dir`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lkmm {
    /// The `tools/memory-model` directory.
    pub dir: PathBuf,
    /// Where it comes from: `linux-source-6.12 6.12.117-1~deb12u1`, `tree /src/linux at v6.12.5
    /// (0123456789ab)`, `tree /src/linux (checkout)`.
    pub label: String,
}

impl Lkmm {
    fn checked(dir: PathBuf, label: String) -> Result<Lkmm, ImageError> {
        if !dir.join("linux-kernel.cfg").is_file() {
            return Err(ImageError::Tool(format!(
                "{label}: no tools/memory-model/linux-kernel.cfg (in {})",
                dir.display()
            )));
        }
        Ok(Lkmm { dir, label })
    }
}

/// The model of the manifest's source `name` (rules 1-3).
pub fn ensure(cache: &Path, m: &Manifest, name: &str) -> Result<Lkmm, ImageError> {
    let src = m.sources.get(name);
    if let Some(deb) = src.and_then(DebSource::of) {
        return from_deb(&Ctx::new(cache, false)?, &deb);
    }
    match src {
        Some(Source::GitTree { path, rev }) => of_tree(cache, &m.path(path), rev.as_deref()),
        Some(Source::DebianPrebuilt { .. } | Source::DebianSource { .. }) | None => {
            Err(ImageError::Usage(format!(
                "source '{name}' is not a kernel source (no tools/memory-model)"
            )))
        }
    }
}

struct DebSource<'a> {
    package: &'a str,
    version: &'a str,
    sha256: &'a str,
    tarball: &'a str,
    apt: Option<&'a str>,
}

impl<'a> DebSource<'a> {
    /// A manifest source's package fields, when it is a Debian source package.
    fn of(s: &'a Source) -> Option<DebSource<'a>> {
        match s {
            Source::DebianSource {
                package,
                version,
                sha256,
                tarball,
                apt,
            } => Some(DebSource {
                package,
                version,
                sha256,
                tarball,
                apt: apt.as_deref(),
            }),
            _ => None,
        }
    }
}

fn from_deb(ctx: &Ctx, s: &DebSource) -> Result<Lkmm, ImageError> {
    let top = ctx.cache.join("lkmm");
    let dest = top.join(format!("{}_{}", s.package, util::safe_name(s.version)));
    let label = format!("{} {}", s.package, s.version);
    let stamp = format!("{} {} sha256={}\n", s.package, s.version, s.sha256);
    let _lock = Lock::take(&top)?;
    if std::fs::read_to_string(dest.join(".source"))
        .ok()
        .as_deref()
        == Some(stamp.as_str())
    {
        return Lkmm::checked(dest, label);
    }
    let deb = apt::download_deb(ctx, s.package, s.version, s.sha256, s.apt)?;
    let tmp = top.join(format!(".extract-{}", std::process::id()));
    if tmp.exists() {
        std::fs::remove_dir_all(&tmp).map_err(|e| ImageError::io(&tmp, e))?;
    }
    util::mkdirs(&tmp)?;
    let script = format!(
        "dpkg-deb --fsys-tarfile '{}' | tar -xO './{}' | tar -xJ -C '{}' --wildcards '*/tools/memory-model/*'",
        deb.display(),
        s.tarball,
        tmp.display()
    );
    let got = util::output(
        Command::new("sh").arg("-c").arg(&script),
        &format!("extract tools/memory-model of {label}"),
    )
    .and_then(|_| memory_model_in(&tmp));
    let result = got.and_then(|mm| {
        if dest.exists() {
            std::fs::remove_dir_all(&dest).map_err(|e| ImageError::io(&dest, e))?;
        }
        std::fs::rename(&mm, &dest).map_err(|e| ImageError::io(&mm, e))?;
        util::write_atomic(&dest.join(".source"), stamp.as_bytes())
    });
    let _ = std::fs::remove_dir_all(&tmp);
    result?;
    Lkmm::checked(dest, label)
}

/// `<tmp>/<top>/tools/memory-model`, the one top directory of an extracted tarball.
fn memory_model_in(tmp: &Path) -> Result<PathBuf, ImageError> {
    let found: Vec<PathBuf> = std::fs::read_dir(tmp)
        .map_err(|e| ImageError::io(tmp, e))?
        .filter_map(|e| e.ok().map(|e| e.path().join("tools/memory-model")))
        .filter(|p| p.is_dir())
        .collect();
    match found.as_slice() {
        [one] => Ok(one.clone()),
        _ => Err(ImageError::Tool(format!(
            "the kernel tarball has {} tools/memory-model directories (want 1)",
            found.len()
        ))),
    }
}

/// The model of a git tree at `rev`, or of its checkout (rule 2).
pub fn of_tree(cache: &Path, path: &Path, rev: Option<&str>) -> Result<Lkmm, ImageError> {
    let Some(rev) = rev else {
        return Lkmm::checked(
            path.join("tools/memory-model"),
            format!("tree {} (checkout)", path.display()),
        );
    };
    let sha = super::spec::resolve_rev(path, rev).map_err(ImageError::Usage)?;
    let short = &sha[..12];
    let label = format!("tree {} at {rev} ({short})", path.display());
    let top = cache.join("lkmm");
    let dest = top.join(format!("tree-{sha}"));
    let _lock = Lock::take(&top)?;
    if dest.join("linux-kernel.cfg").is_file() {
        return Lkmm::checked(dest, label);
    }
    let tmp = top.join(format!(".tree-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    util::mkdirs(&tmp)?;
    let script = format!(
        "git -C '{}' archive --format=tar {sha} tools/memory-model | tar -x -C '{}'",
        path.display(),
        tmp.display()
    );
    let result = util::output(
        Command::new("sh").arg("-c").arg(&script),
        &format!("git archive tools/memory-model of {label}"),
    )
    .and_then(|_| {
        let mm = tmp.join("tools/memory-model");
        std::fs::rename(&mm, &dest).map_err(|e| ImageError::io(&mm, e))
    });
    let _ = std::fs::remove_dir_all(&tmp);
    result?;
    Lkmm::checked(dest, label)
}

/// Files of a manifest source as its tarball or tree has them (no patch applied), for the
/// ordering check's derived tests: `rels` (paths like `block/blk-mq.c`) land under the returned
/// directory, `<cache>/lkmm/<package>_<version>.src/` for a Debian source (taken out of the
/// tarball once, in one pass, like `tools/memory-model`), the tree itself or a `git archive` of
/// them for a git tree. A path the source does not have is simply absent there.
pub fn source_files(
    cache: &Path,
    m: &Manifest,
    name: &str,
    rels: &[String],
) -> Result<PathBuf, ImageError> {
    let src = m.sources.get(name);
    if let Some(deb) = src.and_then(DebSource::of) {
        return debian_files(cache, &deb, rels);
    }
    match src {
        Some(Source::GitTree { path, rev: None }) => Ok(m.path(path)),
        Some(Source::GitTree {
            path,
            rev: Some(rev),
        }) => {
            let path = m.path(path);
            let sha = super::spec::resolve_rev(&path, rev).map_err(ImageError::Usage)?;
            let dest = cache.join("lkmm").join(format!("tree-{sha}.src"));
            let tmp = cache
                .join("lkmm")
                .join(format!(".tree-src-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&tmp);
            util::mkdirs(&tmp)?;
            let all: Vec<&String> = rels.iter().collect();
            let script = format!(
                "for f in {}; do git -C '{}' archive --format=tar {sha} -- \"$f\" 2>/dev/null | tar -x -C '{}' || true; done",
                quoted(&all),
                path.display(),
                tmp.display()
            );
            let got = util::output(
                Command::new("sh").arg("-c").arg(&script),
                &format!("git archive source files of {}", path.display()),
            );
            let _ = std::fs::remove_dir_all(&dest);
            let r =
                got.and_then(|_| std::fs::rename(&tmp, &dest).map_err(|e| ImageError::io(&tmp, e)));
            let _ = std::fs::remove_dir_all(&tmp);
            r?;
            Ok(dest)
        }
        Some(Source::DebianPrebuilt { .. } | Source::DebianSource { .. }) | None => Err(
            ImageError::Usage(format!("source '{name}' is not a kernel source")),
        ),
    }
}

/// Paths as single-quoted shell words.
fn quoted(v: &[&String]) -> String {
    v.iter()
        .map(|r| format!("'{}'", r.replace('\'', "")))
        .collect::<Vec<_>>()
        .join(" ")
}

/// `source_files` for a Debian source package.
fn debian_files(cache: &Path, s: &DebSource, rels: &[String]) -> Result<PathBuf, ImageError> {
    let ctx = Ctx::new(cache, false)?;
    let top = ctx.cache.join("lkmm");
    let dest = top.join(format!("{}_{}.src", s.package, util::safe_name(s.version)));
    let _lock = Lock::take(&top)?;
    let missing: Vec<&String> = rels.iter().filter(|r| !dest.join(r).exists()).collect();
    let tried = dest.join(".tried");
    let known = std::fs::read_to_string(&tried).unwrap_or_default();
    let missing: Vec<&String> = missing
        .into_iter()
        .filter(|r| !known.lines().any(|l| l == r.as_str()))
        .collect();
    if missing.is_empty() {
        return Ok(dest);
    }
    let deb = apt::download_deb(&ctx, s.package, s.version, s.sha256, s.apt)?;
    let tmp = top.join(format!(".src-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    util::mkdirs(&tmp)?;
    let wild: Vec<String> = missing.iter().map(|r| format!("*/{r}")).collect();
    let wild: Vec<&String> = wild.iter().collect();
    // tar fails when a pattern matches nothing (a file the source does not have): what
    // was found is kept, the rest recorded as tried.
    let script = format!(
        "dpkg-deb --fsys-tarfile '{}' | tar -xO './{}' | tar -xJ -C '{}' --wildcards {} || true",
        deb.display(),
        s.tarball,
        tmp.display(),
        quoted(&wild)
    );
    let got = util::output(
        Command::new("sh").arg("-c").arg(&script),
        &format!("extract source files of {} {}", s.package, s.version),
    );
    let moved = got.and_then(|_| {
        let root = std::fs::read_dir(&tmp)
            .map_err(|e| ImageError::io(&tmp, e))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .find(|p| p.is_dir());
        for r in &missing {
            let from = root.as_ref().map(|d| d.join(r));
            if let Some(from) = from.filter(|f| f.is_file()) {
                let to = dest.join(r);
                util::mkdirs(to.parent().unwrap_or(&dest))?;
                std::fs::rename(&from, &to).map_err(|e| ImageError::io(&from, e))?;
            }
        }
        let mut all = known.clone();
        for r in &missing {
            all.push_str(r);
            all.push('\n');
        }
        util::mkdirs(&dest)?;
        util::write_atomic(&tried, all.as_bytes())
    });
    let _ = std::fs::remove_dir_all(&tmp);
    moved?;
    Ok(dest)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tree_checkout_is_read_in_place_and_a_revision_is_archived() {
        let t = crate::gitsrc::testtree::kernel_tree("one");
        let mm = t.path().join("tools/memory-model");
        std::fs::create_dir_all(&mm).unwrap();
        std::fs::write(mm.join("linux-kernel.cfg"), "model linux-kernel.cat\n").unwrap();
        let cache = tempfile::tempdir().unwrap();
        let l = of_tree(cache.path(), t.path(), None).unwrap();
        assert_eq!(l.dir, mm);
        assert!(l.label.ends_with("(checkout)"), "{}", l.label);
        // Not committed: the revision has no model.
        let e = of_tree(cache.path(), t.path(), Some("HEAD")).unwrap_err();
        assert!(e.to_string().contains("git archive"), "{e}");
        let git = |args: &[&str]| crate::gitsrc::testtree::git(t.path(), args);
        git(&["add", "tools"]);
        git(&["commit", "-qm", "mm"]);
        let l = of_tree(cache.path(), t.path(), Some("HEAD")).unwrap();
        assert!(l.dir.starts_with(cache.path().join("lkmm")));
        assert!(l.dir.join("linux-kernel.cfg").is_file());
        assert!(l.label.contains("at HEAD ("), "{}", l.label);
        // No tools/memory-model at all: an error naming the source.
        let bare = tempfile::tempdir().unwrap();
        let e = of_tree(cache.path(), bare.path(), None).unwrap_err();
        assert!(e.to_string().contains("linux-kernel.cfg"), "{e}");
    }
}
