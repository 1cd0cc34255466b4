//! The kernel manifest (`images/kernels.toml`): sources, variants and the initramfs recipe.
//! Parsing is strict (unknown keys are errors) and [`Manifest::load`] validates cross-references
//! and that every referenced file exists.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::ImageError;

/// Where a kernel comes from.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Source {
    /// A Debian `linux-image-*` package used as is (its modules go into the initramfs).
    DebianPrebuilt {
        package: String,
        version: String,
        sha256: String,
    },
    /// A Debian `linux-source-*` package: the kernel tarball inside it is built.
    DebianSource {
        package: String,
        version: String,
        sha256: String,
        tarball: String,
    },
    /// A developer's git tree (`path` relative to the manifest or absolute), at `rev` or, without
    /// it, the current checkout with its uncommitted changes. Built like a Debian source.
    GitTree {
        path: PathBuf,
        #[serde(default)]
        rev: Option<String>,
    },
}

impl Source {
    pub fn package(&self) -> &str {
        match self {
            Source::DebianPrebuilt { package, .. } | Source::DebianSource { package, .. } => {
                package
            }
            Source::GitTree { .. } => "git-tree",
        }
    }
    pub fn version(&self) -> &str {
        match self {
            Source::DebianPrebuilt { version, .. } | Source::DebianSource { version, .. } => {
                version
            }
            Source::GitTree { rev, .. } => rev.as_deref().unwrap_or("checkout"),
        }
    }
    /// The package's sha256 (None for a git tree, identified by its commit instead).
    pub fn sha256(&self) -> Option<&str> {
        match self {
            Source::DebianPrebuilt { sha256, .. } | Source::DebianSource { sha256, .. } => {
                Some(sha256)
            }
            Source::GitTree { .. } => None,
        }
    }
    /// Built from source (a Debian source package or a git tree).
    pub fn is_source(&self) -> bool {
        !matches!(self, Source::DebianPrebuilt { .. })
    }
}

/// One buildable kernel variant.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Variant {
    pub name: String,
    pub source: String,
    #[serde(default)]
    pub description: String,
    /// Config fragment merged onto tinyconfig (source builds only).
    pub fragment: Option<PathBuf>,
    /// More fragments merged after `fragment`, in order: an option set again overrides the
    /// earlier value (source builds only). A variant without them keeps its cache key.
    #[serde(default)]
    pub overlays: Vec<PathBuf>,
    #[serde(default)]
    pub patches: Vec<PathBuf>,
    /// Modules wanted in the initramfs (prebuilt kernels only).
    #[serde(default)]
    pub modules: Vec<String>,
    /// Extra kernel command-line words.
    #[serde(default)]
    pub cmdline: String,
}

/// How the static fio is built.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FioRecipe {
    pub package: String,
    pub version: String,
    /// The single `deb-src` line of the private sources list.
    pub deb_src: String,
    pub configure: Vec<String>,
}

/// What goes into the base initramfs.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InitramfsRecipe {
    pub busybox: PathBuf,
    pub sg3_utils: Vec<String>,
    pub agent: PathBuf,
    pub fio: FioRecipe,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Raw {
    sources: BTreeMap<String, Source>,
    #[serde(rename = "variant")]
    variants: Vec<Variant>,
    initramfs: InitramfsRecipe,
}

/// A validated manifest. Relative paths are resolved against `dir`.
#[derive(Debug, Clone)]
pub struct Manifest {
    pub dir: PathBuf,
    pub sources: BTreeMap<String, Source>,
    pub variants: Vec<Variant>,
    pub initramfs: InitramfsRecipe,
}

fn invalid(path: &Path, msg: String) -> ImageError {
    ImageError::Manifest {
        path: path.to_path_buf(),
        msg,
    }
}

fn is_sha256(s: &str) -> bool {
    s.len() == 64
        && s.bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
}

impl Manifest {
    /// Reads and validates `path`.
    pub fn load(path: &Path) -> Result<Manifest, ImageError> {
        let text = std::fs::read_to_string(path).map_err(|e| invalid(path, e.to_string()))?;
        let dir = path.parent().unwrap_or(Path::new(".")).to_path_buf();
        Self::parse(&text, &dir).map_err(|msg| invalid(path, msg))
    }

    /// Parses and validates manifest text whose relative paths live under `dir`.
    pub fn parse(text: &str, dir: &Path) -> Result<Manifest, String> {
        let raw: Raw = toml::from_str(text).map_err(|e| e.to_string())?;
        let m = Manifest {
            dir: dir.to_path_buf(),
            sources: raw.sources,
            variants: raw.variants,
            initramfs: raw.initramfs,
        };
        m.validate()?;
        Ok(m)
    }

    fn validate(&self) -> Result<(), String> {
        for (name, s) in &self.sources {
            if s.sha256().is_some_and(|h| !is_sha256(h)) {
                return Err(format!(
                    "source '{name}': sha256 must be 64 lowercase hex digits"
                ));
            }
            if s.package().is_empty() || s.version().is_empty() {
                return Err(format!("source '{name}': package and version must be set"));
            }
        }
        let mut seen = std::collections::BTreeSet::new();
        for v in &self.variants {
            let ok_name = !v.name.is_empty()
                && v.name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"+-_.".contains(&b));
            if !ok_name {
                return Err(format!(
                    "variant name '{}' must be non-empty [A-Za-z0-9+-_.]",
                    v.name
                ));
            }
            if !seen.insert(v.name.as_str()) {
                return Err(format!("variant '{}' is defined twice", v.name));
            }
            let Some(src) = self.sources.get(&v.source) else {
                return Err(format!(
                    "variant '{}': unknown source '{}'",
                    v.name, v.source
                ));
            };
            match src {
                Source::DebianPrebuilt { .. } => {
                    if v.fragment.is_some() || !v.overlays.is_empty() || !v.patches.is_empty() {
                        return Err(format!(
                            "variant '{}': a prebuilt kernel takes no fragment or patches",
                            v.name
                        ));
                    }
                }
                Source::DebianSource { .. } | Source::GitTree { .. } => {
                    if v.fragment.is_none() {
                        return Err(format!(
                            "variant '{}': a source build needs a fragment",
                            v.name
                        ));
                    }
                    if !v.modules.is_empty() {
                        return Err(format!(
                            "variant '{}': source builds have everything built in; drop `modules`",
                            v.name
                        ));
                    }
                }
            }
            for f in v.fragment.iter().chain(&v.overlays).chain(&v.patches) {
                if !self.dir.join(f).is_file() {
                    return Err(format!(
                        "variant '{}': file {} not found",
                        v.name,
                        self.dir.join(f).display()
                    ));
                }
            }
        }
        if !self.dir.join(&self.initramfs.agent).is_file() {
            return Err(format!(
                "initramfs agent {} not found",
                self.dir.join(&self.initramfs.agent).display()
            ));
        }
        if !self.initramfs.fio.deb_src.starts_with("deb-src ") {
            return Err("initramfs.fio.deb_src must be one `deb-src ...` line".into());
        }
        Ok(())
    }

    pub fn variant(&self, name: &str) -> Result<&Variant, ImageError> {
        self.variants
            .iter()
            .find(|v| v.name == name)
            .ok_or_else(|| ImageError::UnknownVariant {
                name: name.to_string(),
                known: self
                    .variants
                    .iter()
                    .map(|v| v.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
            })
    }

    pub fn source_of(&self, v: &Variant) -> &Source {
        // validate() guarantees the source exists.
        &self.sources[&v.source]
    }

    /// A path from the manifest, resolved against the manifest's directory.
    pub fn path(&self, p: &Path) -> PathBuf {
        self.dir.join(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHA: &str = "e849faf31ca3555757f3a8877cb01af92122f744f75d1f3102734651c4e14703";

    fn fixture() -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("agent")).unwrap();
        std::fs::write(d.path().join("agent/init"), "#!/bin/sh\n").unwrap();
        std::fs::write(d.path().join("frag.config"), "CONFIG_SMP=y\n").unwrap();
        std::fs::write(d.path().join("a.patch"), "").unwrap();
        d
    }

    fn text(variants: &str) -> String {
        format!(
            r#"
[sources.src]
kind = "debian-source"
package = "linux-source-6.12"
version = "6.12.117-1~deb12u1"
sha256 = "{SHA}"
tarball = "usr/src/linux-source-6.12.tar.xz"
[sources.pre]
kind = "debian-prebuilt"
package = "linux-image-x"
version = "1"
sha256 = "{SHA}"
{variants}
[initramfs]
busybox = "/bin/busybox"
sg3_utils = ["sg_inq"]
agent = "agent/init"
[initramfs.fio]
package = "fio"
version = "3.33-3"
deb_src = "deb-src http://deb.debian.org/debian bookworm main"
configure = ["--build-static"]
"#
        )
    }

    #[test]
    fn parses_a_valid_manifest() {
        let d = fixture();
        let m = Manifest::parse(
            &text(
                r#"
[[variant]]
name = "rt+a"
source = "src"
fragment = "frag.config"
patches = ["a.patch"]
[[variant]]
name = "pre"
source = "pre"
modules = ["virtio_blk"]
"#,
            ),
            d.path(),
        )
        .unwrap();
        assert_eq!(m.variants.len(), 2);
        let v = m.variant("rt+a").unwrap();
        assert_eq!(v.patches, vec![PathBuf::from("a.patch")]);
        assert!(matches!(m.source_of(v), Source::DebianSource { .. }));
        assert!(matches!(
            m.variant("nope"),
            Err(ImageError::UnknownVariant { known, .. }) if known == "rt+a, pre"
        ));
    }

    fn err(variants: &str) -> String {
        let d = fixture();
        Manifest::parse(&text(variants), d.path()).unwrap_err()
    }

    #[test]
    fn rejects_bad_manifests_with_a_reason() {
        assert!(
            err("[[variant]]\nname = \"x\"\nsource = \"zz\"\nfragment = \"frag.config\"")
                .contains("unknown source 'zz'")
        );
        assert!(err("[[variant]]\nname = \"x\"\nsource = \"src\"").contains("needs a fragment"));
        assert!(err(
            "[[variant]]\nname = \"x\"\nsource = \"src\"\nfragment = \"frag.config\"\npatches = [\"missing.patch\"]"
        )
        .contains("missing.patch not found"));
        assert!(
            err("[[variant]]\nname = \"x\"\nsource = \"pre\"\npatches = [\"a.patch\"]")
                .contains("takes no fragment or patches")
        );
        assert!(
            err("[[variant]]\nname = \"x\"\nsource = \"pre\"\noverlays = [\"frag.config\"]")
                .contains("takes no fragment or patches")
        );
        assert!(err(
            "[[variant]]\nname = \"x\"\nsource = \"src\"\nfragment = \"frag.config\"\noverlays = [\"nope.config\"]"
        )
        .contains("nope.config not found"));
        assert!(err("[[variant]]\nname = \"a b\"\nsource = \"pre\"").contains("must be non-empty"));
        assert!(err("[[variant]]\nname = \"x\"\nsource = \"pre\"\n[[variant]]\nname = \"x\"\nsource = \"pre\"")
            .contains("defined twice"));
        assert!(err("[[variant]]\nname = \"x\"\nsource = \"pre\"\ncolour = 1").contains("colour"));
    }

    #[test]
    fn a_git_tree_source_needs_no_sha256_but_a_fragment() {
        let d = fixture();
        let t = text("[[variant]]\nname = \"mine\"\nsource = \"tree\"\nfragment = \"frag.config\"")
            .replace("[sources.pre]", "[sources.tree]\nkind = \"git-tree\"\npath = \"/src/linux\"\nrev = \"v6.12.5\"\n[sources.pre]");
        let m = Manifest::parse(&t, d.path()).unwrap();
        let v = m.variant("mine").unwrap();
        assert_eq!(
            m.source_of(v),
            &Source::GitTree {
                path: "/src/linux".into(),
                rev: Some("v6.12.5".into())
            }
        );
        assert!(m.source_of(v).is_source());
        let t = text("[[variant]]\nname = \"mine\"\nsource = \"tree\"").replace(
            "[sources.pre]",
            "[sources.tree]\nkind = \"git-tree\"\npath = \"/x\"\n[sources.pre]",
        );
        assert!(Manifest::parse(&t, d.path())
            .unwrap_err()
            .contains("needs a fragment"));
    }

    #[test]
    fn rejects_a_malformed_sha256() {
        let d = fixture();
        let t = text("[[variant]]\nname = \"x\"\nsource = \"pre\"").replacen(SHA, "abc", 1);
        assert!(Manifest::parse(&t, d.path())
            .unwrap_err()
            .contains("sha256"));
    }

    #[test]
    fn the_repository_manifest_is_valid() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../images/kernels.toml");
        let m = Manifest::load(&path).unwrap();
        for name in [
            "debian-rt",
            "rt",
            "rt+seed000",
            "rt+seed000-paired",
            "rt+seed000-v7",
            "rt+nobarrier",
            "rt+seed003",
        ] {
            m.variant(name).unwrap();
        }
        assert_eq!(
            m.variant("rt+noguard+seed003").unwrap().patches,
            vec![
                PathBuf::from("patches/noguard.patch"),
                PathBuf::from("patches/seed003.patch")
            ]
        );
        let wide = m.variant("rt64+noguard").unwrap();
        assert_eq!(wide.fragment, m.variant("rt").unwrap().fragment);
        assert_eq!(wide.overlays, vec![PathBuf::from("config/cpus64.config")]);
        assert!(m.variant("rt").unwrap().overlays.is_empty());
    }
}
