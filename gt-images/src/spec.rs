//! Ad-hoc kernels: the `--kernels` grammar for a developer's own tree and patches.
//!
//! ```text
//! KERNEL := NAME                         a kernel of images/kernels.toml: LINE(+COMPONENT)* or
//!                                        an alias (rt, rt+seed000, rt73+seed000-v8+storm, rt64;
//!                                        the grammar is in `compose.rs`)
//!         | LABEL=BASE(+patch:FILE)*     an ad-hoc kernel, named LABEL in results
//! BASE   := NAME                         a source kernel, its fragment, overlays and patches
//!         | tree:PATH[@REV]              a git tree: REV (any git revision), or the current
//!                                        checkout with its uncommitted changes when no @REV
//! ```
//!
//! Examples: `mine=tree:/src/linux@v6.12.5`, `mine+fix=tree:/src/linux@v6.12.5+patch:~/fix.patch`,
//! `rt+mine=rt+patch:/tmp/x.patch`, `v8fix=rt73+seed000-v8+patch:~/fix.patch`.
//!
//! Rules:
//! 1. A tree is built with the config fragment, overlays and patch stack of
//!    [`TREE_BASE_VARIANT`] (`rt128`: `rt` with NR_CPUS=128, so that a tree runs every cell of
//!    seed000-scale, up to the series' 120 hardware queues), then the spec's patches in order;
//!    the build is the same code path as a named variant, and shares ccache's objects with
//!    rt128's builds of the same source.
//! 2. LABEL is [A-Za-z0-9+-_.] and must not be a kernel name the manifest resolves (a result's
//!    kernel name means one thing).
//! 3. `~/` at the start of a path is the home directory. Paths may not contain `,` (the list
//!    separator) nor `+patch:`. The text after the last `@` is a revision unless it holds a `/`
//!    (then it is part of the path; write `refs/...` for such a revision).
//! 4. [`KernelSpec::parse`] checks only the grammar; [`KernelSpec::check`] checks that the files,
//!    the tree and the revision exist, before anything is built or created.

use std::path::{Path, PathBuf};

/// The variant whose fragment and patch stack a `tree:` kernel is built with.
pub const TREE_BASE_VARIANT: &str = "rt128";

/// What an ad-hoc kernel starts from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Base {
    Variant(String),
    Tree { path: PathBuf, rev: Option<String> },
}

/// One element of `--kernels`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelSpec {
    /// The name results carry (the variant's name for a plain variant).
    pub label: String,
    pub base: Base,
    pub patches: Vec<PathBuf>,
    /// The text it was parsed from (recorded in rerun.json and provenance).
    pub text: String,
}

fn valid_name(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"+-_.".contains(&b))
}

fn expand_home(p: &str) -> PathBuf {
    match (p.strip_prefix("~/"), std::env::var_os("HOME")) {
        (Some(rest), Some(home)) => PathBuf::from(home).join(rest),
        _ => PathBuf::from(p),
    }
}

impl KernelSpec {
    /// Parses one element of `--kernels` (grammar only; see the module doc).
    pub fn parse(text: &str) -> Result<KernelSpec, String> {
        let text = text.trim();
        let Some((label, rest)) = text.split_once('=') else {
            if !valid_name(text) {
                return Err(format!("kernel '{text}': not a kernel name nor LABEL=..."));
            }
            return Ok(KernelSpec {
                label: text.to_string(),
                base: Base::Variant(text.to_string()),
                patches: vec![],
                text: text.to_string(),
            });
        };
        if !valid_name(label) {
            return Err(format!(
                "kernel '{text}': label '{label}' must be non-empty [A-Za-z0-9+-_.]"
            ));
        }
        let mut parts = rest.split("+patch:");
        let base_text = parts.next().unwrap_or_default();
        let patches: Vec<PathBuf> = parts.map(expand_home).collect();
        if patches.iter().any(|p| p.as_os_str().is_empty()) {
            return Err(format!("kernel '{text}': empty +patch: path"));
        }
        let base = if let Some(t) = base_text.strip_prefix("tree:") {
            let (path, rev) = match t.rsplit_once('@') {
                Some((p, r)) if (!r.is_empty() && !r.contains('/')) || r.starts_with("refs/") => {
                    (p, Some(r.to_string()))
                }
                Some((_, "")) => return Err(format!("kernel '{text}': empty @REV")),
                _ => (t, None),
            };
            if path.is_empty() {
                return Err(format!("kernel '{text}': tree: needs a path"));
            }
            Base::Tree {
                path: expand_home(path),
                rev,
            }
        } else if valid_name(base_text) {
            Base::Variant(base_text.to_string())
        } else {
            return Err(format!(
                "kernel '{text}': base '{base_text}' is neither a kernel name nor tree:PATH[@REV]"
            ));
        };
        Ok(KernelSpec {
            label: label.to_string(),
            base,
            patches,
            text: text.to_string(),
        })
    }

    /// True for a plain manifest kernel (no label of its own, no tree, no patches).
    pub fn is_plain(&self) -> bool {
        matches!(&self.base, Base::Variant(v) if *v == self.label) && self.patches.is_empty()
    }

    /// The manifest kernel it is built as ([`TREE_BASE_VARIANT`] for a tree).
    pub fn base_variant(&self) -> &str {
        match &self.base {
            Base::Variant(v) => v,
            Base::Tree { .. } => TREE_BASE_VARIANT,
        }
    }

    /// Checks the names, files, tree and revision (nothing is built or created).
    pub fn check(&self, m: &super::manifest::Manifest) -> Result<(), String> {
        m.variant(self.base_variant()).map_err(|e| e.to_string())?;
        if !self.is_plain() && m.variant(&self.label).is_ok() {
            return Err(format!(
                "kernel '{}': label '{}' is a kernel of images/kernels.toml; pick another",
                self.text, self.label
            ));
        }
        for p in &self.patches {
            if !p.is_file() {
                return Err(format!(
                    "kernel '{}': patch {} not found",
                    self.text,
                    p.display()
                ));
            }
        }
        if let Base::Tree { path, rev } = &self.base {
            check_tree(path, rev.as_deref()).map_err(|e| format!("kernel '{}': {e}", self.text))?;
        }
        Ok(())
    }
}

/// A git work tree holding a kernel (and `rev`, when given, resolves to a commit in it).
pub fn check_tree(path: &Path, rev: Option<&str>) -> Result<(), String> {
    if !path.join("Makefile").is_file() || !path.join("Kconfig").is_file() {
        return Err(format!(
            "{} is not a kernel source tree (no Makefile/Kconfig)",
            path.display()
        ));
    }
    if let Some(r) = rev {
        resolve_rev(path, r)?;
    } else {
        resolve_rev(path, "HEAD")?;
    }
    Ok(())
}

/// The full commit id of `rev` in the git tree at `path`.
pub fn resolve_rev(path: &Path, rev: &str) -> Result<String, String> {
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(path)
        .args(["rev-parse", "--verify", "--quiet"])
        .arg(format!("{rev}^{{commit}}"))
        .output()
        .map_err(|e| format!("git: {e}"))?;
    let sha = String::from_utf8_lossy(&out.stdout).trim().to_string();
    if !out.status.success() || sha.len() != 40 {
        return Err(format!(
            "'{rev}' is not a commit in the git tree {}",
            path.display()
        ));
    }
    Ok(sha)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_documented_forms() {
        let k = KernelSpec::parse("rt+seed000").unwrap();
        assert!(k.is_plain());
        assert_eq!(k.base_variant(), "rt+seed000");
        let k = KernelSpec::parse("mine=tree:/src/linux@v6.12.5").unwrap();
        assert_eq!(
            k.base,
            Base::Tree {
                path: "/src/linux".into(),
                rev: Some("v6.12.5".into())
            }
        );
        assert_eq!(k.base_variant(), TREE_BASE_VARIANT);
        let k =
            KernelSpec::parse("mine+fix=tree:/src/linux@HEAD~3+patch:/a/fix.patch+patch:b.patch")
                .unwrap();
        assert_eq!(k.label, "mine+fix");
        assert_eq!(
            k.patches,
            vec![PathBuf::from("/a/fix.patch"), "b.patch".into()]
        );
        let k = KernelSpec::parse("x=tree:/src/linux").unwrap();
        assert_eq!(
            k.base,
            Base::Tree {
                path: "/src/linux".into(),
                rev: None
            }
        );
        let k = KernelSpec::parse("y=rt+patch:/tmp/p.patch").unwrap();
        assert_eq!(k.base, Base::Variant("rt".into()));
        assert!(!k.is_plain());
        // An @ inside a directory name is not a revision.
        let k = KernelSpec::parse("z=tree:/a@b/linux").unwrap();
        assert!(matches!(k.base, Base::Tree { rev: None, .. }));
    }

    #[test]
    fn rejects_bad_forms_with_a_reason() {
        for (s, want) in [
            ("a b", "not a kernel name"),
            ("=tree:/x", "label"),
            ("m=tree:", "needs a path"),
            ("m=tree:/x@", "empty @REV"),
            ("m=tree:/x+patch:", "empty +patch"),
            ("m=what ever", "neither a kernel"),
        ] {
            let e = KernelSpec::parse(s).unwrap_err();
            assert!(e.contains(want), "{s}: {e}");
        }
    }

    #[test]
    fn check_finds_missing_trees_revisions_and_label_clashes() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../images/kernels.toml");
        let m = super::super::manifest::Manifest::load(&path).unwrap();
        let e = KernelSpec::parse("rt=rt+patch:/nonexistent.patch")
            .unwrap()
            .check(&m)
            .unwrap_err();
        assert!(e.contains("is a kernel of"), "{e}");
        let e = KernelSpec::parse("m=rt+patch:/nonexistent.patch")
            .unwrap()
            .check(&m)
            .unwrap_err();
        assert!(e.contains("not found"), "{e}");
        // A composed name is checked like any manifest kernel, before anything is built.
        KernelSpec::parse("rt73+seed000-v8+storm")
            .unwrap()
            .check(&m)
            .unwrap();
        let e = KernelSpec::parse("rt+seed000-v8")
            .unwrap()
            .check(&m)
            .unwrap_err();
        assert!(e.contains("does not exist on line 'rt'"), "{e}");
        let e = KernelSpec::parse("rt73+seed000-v8=rt73+patch:/nonexistent.patch")
            .unwrap()
            .check(&m)
            .unwrap_err();
        assert!(e.contains("is a kernel of"), "{e}");
        let e = KernelSpec::parse("m=nope").unwrap().check(&m).unwrap_err();
        assert!(e.contains("'nope' is not a kernel line"), "{e}");
        let d = tempfile::tempdir().unwrap();
        let e = KernelSpec::parse(&format!("m=tree:{}", d.path().display()))
            .unwrap()
            .check(&m)
            .unwrap_err();
        assert!(e.contains("not a kernel source tree"), "{e}");
        let d = crate::gitsrc::testtree::kernel_tree("one");
        let ok = KernelSpec::parse(&format!("m=tree:{}@HEAD", d.path().display())).unwrap();
        ok.check(&m).unwrap();
        let e = KernelSpec::parse(&format!("m=tree:{}@nosuchref", d.path().display()))
            .unwrap()
            .check(&m)
            .unwrap_err();
        assert!(e.contains("is not a commit"), "{e}");
    }
}
