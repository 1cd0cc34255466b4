//! The kernel manifest (`images/kernels.toml`): sources, kernel lines, components, aliases and
//! the initramfs recipe.
//!
//! Rules:
//! 1. Parsing is strict: unknown keys are errors.
//! 2. [`Manifest::load`] validates cross-references and that every referenced file exists:
//!    a line's source, fragment and patch directory; a component's overlay; every patch file of
//!    every patch component on every source line, unless the component says in `absent` why it
//!    does not exist on that line; every alias.
//! 3. A kernel name is `LINE(+COMPONENT)*` or an alias followed by more components; it is
//!    resolved into a [`KernelBuild`] by [`Manifest::variant`] (`compose.rs`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::ImageError;

/// One more package of a prebuilt kernel, extracted into the same root as the first.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExtraPackage {
    pub package: String,
    pub sha256: String,
}

/// Where a kernel comes from.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Source {
    /// A Debian kernel image package used as is (its modules go into the initramfs). `extra`
    /// packages of the same version are extracted into the same root (newer Debian kernels
    /// ship the image, the modules and modules.builtin/order in separate packages).
    DebianPrebuilt {
        package: String,
        version: String,
        sha256: String,
        /// One `deb ...` line: fetch from this private sources list, not the host's.
        #[serde(default)]
        apt: Option<String>,
        #[serde(default)]
        extra: Vec<ExtraPackage>,
    },
    /// A Debian `linux-source-*` package: the kernel tarball inside it is built.
    DebianSource {
        package: String,
        version: String,
        sha256: String,
        tarball: String,
        /// One `deb ...` line: fetch from this private sources list, not the host's.
        #[serde(default)]
        apt: Option<String>,
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
    /// The private `deb ...` line the packages come from (None: the host's apt sources).
    pub fn apt(&self) -> Option<&str> {
        match self {
            Source::DebianPrebuilt { apt, .. } | Source::DebianSource { apt, .. } => apt.as_deref(),
            Source::GitTree { .. } => None,
        }
    }
    /// Built from source (a Debian source package or a git tree).
    pub fn is_source(&self) -> bool {
        !matches!(self, Source::DebianPrebuilt { .. })
    }
}

/// A kernel line: a source and how it is configured (source builds) or booted (prebuilt).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Line {
    pub name: String,
    pub source: String,
    #[serde(default)]
    pub description: String,
    /// Config fragment merged onto tinyconfig (source lines only).
    pub fragment: Option<PathBuf>,
    /// Options this line's kernel knows under another name: `OLD = NEW` rewrites the fragment's
    /// `CONFIG_OLD` lines before the merge (and the check), for this line only.
    #[serde(default)]
    pub renames: BTreeMap<String, String>,
    /// The directory of this line's patch files (source lines only).
    pub patch_dir: Option<PathBuf>,
    /// Modules wanted in the initramfs (prebuilt lines only).
    #[serde(default)]
    pub modules: Vec<String>,
    /// Extra kernel command-line words.
    #[serde(default)]
    pub cmdline: String,
    /// Whether traced suites may enable their events from boot (`trace_event=` on the command
    /// line; the default). False where that hangs the boot (7.3 under TCG,
    /// docs/results/kernel-lines): the guest agent then enables them itself before the first
    /// step, which patches the tracepoints into running kernel text.
    #[serde(default = "default_true")]
    pub boot_trace_events: bool,
    /// The litmus tests of this line's own code (paths relative to the manifest): what a kernel
    /// of this line with no ordering-relevant component is checked against (`guest-tests
    /// ordering`; the component they are reported under is the line's name).
    #[serde(default)]
    pub litmus: Vec<PathBuf>,
    /// The source whose `tools/memory-model` (the LKMM) judges this line's litmus tests; by
    /// default the line's own source when it is built from source. A prebuilt line names the
    /// source package of the same kernel.
    #[serde(default)]
    pub lkmm: Option<String>,
}

/// serde's default for boolean facts that hold unless a file says otherwise.
pub(crate) fn default_true() -> bool {
    true
}

/// A named piece a kernel name adds to its line: a config overlay, a patch set (file names in
/// the line's patch directory, applied in order) or command-line words. Exactly one of the three.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Component {
    pub name: String,
    #[serde(default)]
    pub description: String,
    /// A config fragment merged after the line's fragment (source lines only).
    pub overlay: Option<PathBuf>,
    #[serde(default)]
    pub patches: Vec<String>,
    pub cmdline: Option<String>,
    /// Source lines on which this patch set deliberately does not exist, with the reason.
    #[serde(default)]
    pub absent: BTreeMap<String, String>,
    /// Litmus tests of the code this patch set leaves (file names in each line's patch_dir, like
    /// `patches`): what `guest-tests ordering` runs for it.
    #[serde(default)]
    pub litmus: Vec<String>,
    /// Whose litmus tests this component's replace in a kernel that has both: `base` (the line's
    /// own tests) or component names. The tests of the final code judge a stacked kernel.
    #[serde(default)]
    pub litmus_supersedes: Vec<String>,
    /// Why this patch set needs no litmus test (it changes no ordering the tests are about).
    /// A patch set with neither `litmus` nor this is "ordering not checked".
    #[serde(default)]
    pub litmus_exempt: Option<String>,
}

impl Component {
    /// `overlay`, `patches` or `cmdline`.
    pub fn kind(&self) -> &'static str {
        if self.overlay.is_some() {
            "overlay"
        } else if !self.patches.is_empty() {
            "patches"
        } else {
            "cmdline"
        }
    }
}

/// One buildable kernel: a line with its components resolved (see `compose.rs`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelBuild {
    pub name: String,
    pub source: String,
    pub description: String,
    /// Config fragment merged onto tinyconfig (source builds only).
    pub fragment: Option<PathBuf>,
    /// The line's option renames (see [`Line::renames`]).
    pub renames: BTreeMap<String, String>,
    /// More fragments merged after `fragment`, in order: an option set again overrides the
    /// earlier value (source builds only). A kernel without them keeps its cache key.
    pub overlays: Vec<PathBuf>,
    pub patches: Vec<PathBuf>,
    /// Modules wanted in the initramfs (prebuilt kernels only).
    pub modules: Vec<String>,
    /// Extra kernel command-line words.
    pub cmdline: String,
    /// See [`Line::boot_trace_events`].
    pub boot_trace_events: bool,
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
    #[serde(rename = "line")]
    lines: Vec<Line>,
    #[serde(rename = "component", default)]
    components: Vec<Component>,
    #[serde(default)]
    aliases: BTreeMap<String, String>,
    initramfs: InitramfsRecipe,
}

/// A validated manifest. Relative paths are resolved against `dir`.
#[derive(Debug, Clone)]
pub struct Manifest {
    pub dir: PathBuf,
    pub sources: BTreeMap<String, Source>,
    pub lines: Vec<Line>,
    pub components: Vec<Component>,
    /// `NAME = "LINE+COMPONENT..."`: a short name for a composition.
    pub aliases: BTreeMap<String, String>,
    pub initramfs: InitramfsRecipe,
}

fn invalid(path: &Path, msg: String) -> ImageError {
    ImageError::Manifest {
        path: path.to_path_buf(),
        msg,
    }
}

pub(crate) fn is_sha256(s: &str) -> bool {
    s.len() == 64
        && s.bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
}

/// A line, component or alias name: non-empty `[A-Za-z0-9-_.]` (no `+`, the separator).
pub(crate) fn is_part_name(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
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
            lines: raw.lines,
            components: raw.components,
            aliases: raw.aliases,
            initramfs: raw.initramfs,
        };
        m.validate()?;
        Ok(m)
    }

    fn validate(&self) -> Result<(), String> {
        for (name, s) in &self.sources {
            validate_source(name, s)?;
        }
        let mut seen = std::collections::BTreeSet::new();
        let names = self.lines.iter().map(|l| ("line", &l.name));
        let names = names.chain(self.components.iter().map(|c| ("component", &c.name)));
        for (what, n) in names.chain(self.aliases.keys().map(|a| ("alias", a))) {
            if !is_part_name(n) {
                return Err(format!(
                    "{what} name '{n}' must be non-empty [A-Za-z0-9-_.]"
                ));
            }
            if !seen.insert(n.as_str()) {
                return Err(format!("the name '{n}' is defined twice"));
            }
        }
        for l in &self.lines {
            self.validate_line(l)?;
        }
        for c in &self.components {
            self.validate_component(c)?;
        }
        self.validate_litmus()?;
        for (alias, target) in &self.aliases {
            let first = target.split('+').next().unwrap_or_default();
            if self.aliases.contains_key(first) {
                return Err(format!(
                    "alias '{alias}': '{target}' starts with another alias"
                ));
            }
            self.variant(target)
                .map_err(|e| format!("alias '{alias}': {e}"))?;
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

    fn validate_line(&self, l: &Line) -> Result<(), String> {
        let Some(src) = self.sources.get(&l.source) else {
            return Err(format!("line '{}': unknown source '{}'", l.name, l.source));
        };
        if src.is_source() {
            if l.fragment.is_none() {
                return Err(format!(
                    "line '{}': a source build needs a fragment",
                    l.name
                ));
            }
            if !l.modules.is_empty() {
                return Err(format!(
                    "line '{}': source builds have everything built in; drop `modules`",
                    l.name
                ));
            }
        } else if l.fragment.is_some() || l.patch_dir.is_some() || !l.renames.is_empty() {
            return Err(format!(
                "line '{}': a prebuilt kernel takes no fragment, renames or patch_dir",
                l.name
            ));
        }
        for (old, new) in &l.renames {
            if !old.starts_with("CONFIG_") || !new.starts_with("CONFIG_") {
                return Err(format!(
                    "line '{}': renames are CONFIG_OLD = \"CONFIG_NEW\" ({old} = {new})",
                    l.name
                ));
            }
        }
        if let Some(f) = &l.fragment {
            self.need_file(&l.name, f)?;
        }
        if let Some(d) = &l.patch_dir {
            if !self.dir.join(d).is_dir() {
                return Err(format!(
                    "line '{}': patch_dir {} not found",
                    l.name,
                    self.dir.join(d).display()
                ));
            }
        }
        Ok(())
    }

    fn validate_component(&self, c: &Component) -> Result<(), String> {
        let kinds = [
            c.overlay.is_some(),
            !c.patches.is_empty(),
            c.cmdline.is_some(),
        ];
        if kinds.iter().filter(|k| **k).count() != 1 {
            return Err(format!(
                "component '{}': give exactly one of overlay, patches, cmdline",
                c.name
            ));
        }
        if let Some(o) = &c.overlay {
            self.need_file(&c.name, o)?;
        }
        if c.patches.iter().any(|p| p.contains('/') || p.is_empty()) {
            return Err(format!(
                "component '{}': patches are file names in each line's patch_dir",
                c.name
            ));
        }
        for (line, why) in &c.absent {
            if !self.lines.iter().any(|l| l.name == *line) || why.trim().is_empty() {
                return Err(format!(
                    "component '{}': absent.{line} must name a line and say why",
                    c.name
                ));
            }
        }
        if c.patches.is_empty() {
            return Ok(());
        }
        for l in &self.lines {
            let Some(dir) = &l.patch_dir else { continue };
            let have: Vec<bool> = c
                .patches
                .iter()
                .map(|p| self.dir.join(dir).join(p).is_file())
                .collect();
            if c.absent.contains_key(&l.name) || have.iter().all(|h| *h) {
                continue;
            }
            return Err(format!(
                "component '{}' on line '{}': {} not found (add it, or say in absent.{} why it does not exist there)",
                c.name,
                l.name,
                c.patches
                    .iter()
                    .zip(&have)
                    .filter(|(_, h)| !**h)
                    .map(|(p, _)| self.dir.join(dir).join(p).display().to_string())
                    .collect::<Vec<_>>()
                    .join(", "),
                l.name
            ));
        }
        Ok(())
    }

    fn need_file(&self, who: &str, f: &Path) -> Result<(), String> {
        if self.dir.join(f).is_file() {
            Ok(())
        } else {
            Err(format!(
                "'{who}': file {} not found",
                self.dir.join(f).display()
            ))
        }
    }

    pub fn line(&self, name: &str) -> Option<&Line> {
        self.lines.iter().find(|l| l.name == name)
    }

    pub fn component(&self, name: &str) -> Option<&Component> {
        self.components.iter().find(|c| c.name == name)
    }

    pub fn source_of(&self, v: &KernelBuild) -> &Source {
        // validate() guarantees every line's source exists, and variants come from lines.
        &self.sources[&v.source]
    }

    /// A path from the manifest, resolved against the manifest's directory.
    pub fn path(&self, p: &Path) -> PathBuf {
        self.dir.join(p)
    }
}

fn validate_source(name: &str, s: &Source) -> Result<(), String> {
    if s.sha256().is_some_and(|h| !is_sha256(h)) {
        return Err(format!(
            "source '{name}': sha256 must be 64 lowercase hex digits"
        ));
    }
    if s.package().is_empty() || s.version().is_empty() {
        return Err(format!("source '{name}': package and version must be set"));
    }
    if s.apt().is_some_and(|a| !a.starts_with("deb ")) {
        return Err(format!("source '{name}': apt must be one `deb ...` line"));
    }
    if let Source::DebianPrebuilt { extra, .. } = s {
        if let Some(e) = extra
            .iter()
            .find(|e| e.package.is_empty() || !is_sha256(&e.sha256))
        {
            return Err(format!(
                "source '{name}': extra package '{}' needs a name and a 64-hex-digit sha256",
                e.package
            ));
        }
    }
    Ok(())
}

pub mod litmus;
#[cfg(test)]
mod tests;
