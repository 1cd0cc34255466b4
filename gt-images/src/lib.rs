//! Guest images: kernels (prebuilt Debian RT or built from source with a patch stack) and the
//! reproducible initramfs with fio and the guest agent. Outputs are cached by content hash.
//!
//! Interface used by the harness (`launch`): [`ensure`] returns a booted-ready [`KernelImage`].
//! The CLI (`guest-tests images ...`) is in [`cli`].
//!
//! Cache layout (`$VB_CACHE` or `<repo>/.cache`):
//! - `debs/`                    downloaded .deb files (sha256-checked against the manifest)
//! - `apt/<hash>/`              private apt state of a manifest `apt` line (sources.list, lists)
//! - `kernel/<source>/`         work trees: `src/` (patched in place), `build/` (O=), `build.log`
//! - `kernels/<key>/`           finished kernels: `bzImage`, `config`, `kernel.json`
//! - `prebuilt/<pkg>_<ver>/`    an extracted prebuilt kernel (its package and `extra` packages)
//! - `fio/<version>/fio`        the static fio
//! - `initramfs/<sha256>.cpio`  base initramfs archives
//! - `lkmm/<pkg>_<ver>/`         a source's tools/memory-model (`lkmm.rs`, for `ordering`)
//! - `ccache/`                  the compiler cache

#![cfg_attr(test, allow(clippy::too_many_lines))]

pub mod apt;
pub mod cli;
pub mod compose;
pub mod cpio;
pub mod fio;
pub mod gitsrc;
pub mod initramfs;
pub mod job;
pub mod kernel;
pub mod lkmm;
pub mod manifest;
pub mod modules;
pub mod patches;
pub mod prebuilt;
pub mod spec;
mod util;

use std::path::{Path, PathBuf};

pub use cli::{cli_build, cli_list, ImagesArgs};
pub use util::{sha256_file, sha256_hex};

/// Bumped when a change in the builder changes its outputs; part of every cache key.
pub const BUILDER_VERSION: &str = "vb-images-2";

/// Everything the launcher needs to boot one kernel variant.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct KernelImage {
    /// Variant name from images/kernels.toml (e.g. `debian-rt`, `rt`, `rt+seed000`).
    pub variant: String,
    /// `uname -r` of the kernel.
    pub release: String,
    pub bzimage: PathBuf,
    pub bzimage_sha256: String,
    /// The base initramfs (busybox, fio, agent, modules). The launcher appends a job archive.
    pub initramfs: PathBuf,
    pub initramfs_sha256: String,
    /// Extra kernel command-line words this kernel needs (may be empty).
    pub cmdline: String,
    /// Traced suites enable their events from boot (`trace_event=`); false on kernel lines
    /// where that hangs the boot ([`manifest::Line::boot_trace_events`]).
    #[serde(default = "manifest::default_true")]
    pub boot_trace_events: bool,
    /// What it was built from: the `--kernels` element, then the cache key's input lines
    /// (source with a git tree's commit and dirty state, fragment, patches with sha256).
    #[serde(default)]
    pub inputs: Vec<String>,
}

/// Options for building or locating images.
#[derive(Debug, Clone, Default)]
pub struct ImageOptions {
    /// Cache directory (default: `$VB_CACHE` or `<repo>/.cache`).
    pub cache_dir: Option<PathBuf>,
    /// A developer's own kernel tree, used instead of Debian's linux-source.
    pub kernel_tree: Option<PathBuf>,
    /// The revision of `kernel_tree` to build (None: its checkout, uncommitted changes too).
    pub kernel_rev: Option<String>,
    /// Extra patches applied after the variant's own.
    pub extra_patches: Vec<PathBuf>,
    /// Show a progress bar.
    pub progress: bool,
}

/// Errors while building images.
#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    #[error("kernel '{name}': {why}")]
    UnknownVariant { name: String, why: String },
    #[error("manifest {path}: {msg}")]
    Manifest { path: PathBuf, msg: String },
    #[error("bad argument: {0}")]
    Usage(String),
    #[error("patch {patch} does not apply: {detail}")]
    PatchFailed { patch: PathBuf, detail: String },
    #[error(
        "kernel config: options requested by {fragments} did not survive in .config: {options}"
    )]
    ConfigDropped { fragments: String, options: String },
    #[error("{package} {version}: sha256 {got} does not match the manifest's {want}")]
    Checksum {
        package: String,
        version: String,
        got: String,
        want: String,
    },
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{what} failed (see {log})")]
    Command { what: String, log: PathBuf },
    #[error("{0}")]
    Tool(String),
}

impl ImageError {
    pub(crate) fn io(path: &Path, source: std::io::Error) -> Self {
        ImageError::Io {
            path: path.to_path_buf(),
            source,
        }
    }

    /// 2 for mistakes in the request (bad variant, argument or manifest), 1 for failures.
    pub fn exit_code(&self) -> i32 {
        match self {
            ImageError::UnknownVariant { .. }
            | ImageError::Manifest { .. }
            | ImageError::Usage(_) => 2,
            _ => 1,
        }
    }
}

/// The manifest path: `<repo>/images/kernels.toml`.
pub fn manifest_path() -> PathBuf {
    gt_suite::paths::repo_root().join("images/kernels.toml")
}

/// The cache directory for `opts`: its override, else [`gt_suite::paths::cache_dir`].
pub fn cache_dir(opts: &ImageOptions) -> PathBuf {
    opts.cache_dir
        .clone()
        .unwrap_or_else(gt_suite::paths::cache_dir)
}

/// Checks the request before anything is created: variant known, user files present.
fn check_request(
    m: &manifest::Manifest,
    variant: &str,
    opts: &ImageOptions,
) -> Result<(), ImageError> {
    let v = m.variant(variant)?;
    let prebuilt = matches!(m.source_of(&v), manifest::Source::DebianPrebuilt { .. });
    if prebuilt && (opts.kernel_tree.is_some() || !opts.extra_patches.is_empty()) {
        return Err(ImageError::Usage(format!(
            "kernel '{variant}' is prebuilt: --kernel-tree and --patch need a source line such as 'rt'"
        )));
    }
    for p in &opts.extra_patches {
        if !p.is_file() {
            return Err(ImageError::Usage(format!(
                "patch {} not found",
                p.display()
            )));
        }
    }
    if let Some(t) = &opts.kernel_tree {
        if !t.join("Makefile").is_file() || !t.join("Kconfig").is_file() {
            return Err(ImageError::Usage(format!(
                "--kernel-tree {} is not a kernel source tree (no Makefile/Kconfig)",
                t.display()
            )));
        }
    }
    Ok(())
}

/// Builds (or takes from the cache) what `kernel` (a variant name or an ad-hoc kernel of the
/// [`spec`] grammar) needs to boot.
pub fn ensure(kernel: &str, opts: &ImageOptions) -> Result<KernelImage, ImageError> {
    let m = manifest::Manifest::load(&manifest_path())?;
    let k = spec::KernelSpec::parse(kernel).map_err(ImageError::Usage)?;
    ensure_spec(&m, &k, opts)
}

/// [`ensure`] with an already loaded manifest.
pub fn ensure_with(
    m: &manifest::Manifest,
    variant: &str,
    opts: &ImageOptions,
) -> Result<KernelImage, ImageError> {
    check_request(m, variant, opts)?;
    let cache = cache_dir(opts);
    let ctx = util::Ctx::new(&cache, opts.progress)?;
    let v = m.variant(variant)?;
    let (kernel, mods) = match m.source_of(&v) {
        manifest::Source::DebianPrebuilt { .. } => {
            let pre = prebuilt::ensure(&ctx, m, &v)?;
            let mods = modules::resolve(&pre.modules_dir, &v.modules)?;
            (pre.kernel, mods)
        }
        manifest::Source::DebianSource { .. } | manifest::Source::GitTree { .. } => {
            let k = kernel::ensure(&ctx, m, &v, opts, false)?;
            (k, Vec::new())
        }
    };
    let (initramfs, initramfs_sha256) = initramfs::ensure(&ctx, m, &mods)?;
    Ok(KernelImage {
        variant: variant.to_string(),
        release: kernel.release,
        bzimage: kernel.bzimage,
        bzimage_sha256: kernel.bzimage_sha256,
        initramfs,
        initramfs_sha256,
        cmdline: v.cmdline.clone(),
        boot_trace_events: v.boot_trace_events,
        inputs: kernel.inputs,
    })
}

/// Builds (or takes from the cache) an element of `--kernels` (a variant name or an ad-hoc
/// kernel, [`spec`]); the image carries the spec's label as its variant name.
pub fn ensure_spec(
    m: &manifest::Manifest,
    k: &spec::KernelSpec,
    opts: &ImageOptions,
) -> Result<KernelImage, ImageError> {
    let mut o = opts.clone();
    if let spec::Base::Tree { path, rev } = &k.base {
        o.kernel_tree = Some(path.clone());
        o.kernel_rev = rev.clone();
    }
    o.extra_patches.extend(k.patches.iter().cloned());
    let mut img = ensure_with(m, k.base_variant(), &o)?;
    if !k.is_plain() {
        img.variant = k.label.clone();
        img.inputs.insert(0, format!("spec={}", k.text));
    }
    Ok(img)
}

/// One kernel line of [`list`] and whether its plain kernel is cached.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct LineStatus {
    pub name: String,
    pub source: String,
    pub description: String,
    /// The cached kernel (source lines) or extracted package (prebuilt) for the current inputs.
    pub cached_bzimage: Option<PathBuf>,
}

/// The manifest's lines and, for each, whether its plain kernel is cached for the current inputs.
pub fn list(m: &manifest::Manifest, opts: &ImageOptions) -> Result<Vec<LineStatus>, ImageError> {
    let cache = cache_dir(opts);
    let mut out = Vec::new();
    for l in &m.lines {
        let v = m.variant(&l.name)?;
        let cached = cached_bzimage(m, &v, &cache, opts)?;
        out.push(LineStatus {
            name: l.name.clone(),
            source: l.source.clone(),
            description: l.description.clone(),
            cached_bzimage: cached,
        });
    }
    Ok(out)
}

/// The cached bzImage of a kernel for its current inputs, if any (nothing is built).
pub fn cached_bzimage(
    m: &manifest::Manifest,
    v: &manifest::KernelBuild,
    cache: &Path,
    opts: &ImageOptions,
) -> Result<Option<PathBuf>, ImageError> {
    match m.source_of(v) {
        s @ manifest::Source::DebianPrebuilt { .. } => Ok(prebuilt::cached(cache, s)),
        manifest::Source::DebianSource { .. } | manifest::Source::GitTree { .. } => {
            kernel::cached(cache, m, v, opts)
        }
    }
}
