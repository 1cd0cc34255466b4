//! Guest images: kernels (prebuilt Debian RT or built from source with a patch stack) and the
//! reproducible initramfs with fio and the guest agent. Outputs are cached by content hash.
//!
//! Interface used by the harness (`launch`): [`ensure`] returns a booted-ready [`KernelImage`].

pub mod cpio;

use std::path::PathBuf;

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
}

/// Options for building or locating images.
#[derive(Debug, Clone, Default)]
pub struct ImageOptions {
    /// Cache directory (default: `$VB_CACHE` or `<repo>/.cache`).
    pub cache_dir: Option<PathBuf>,
    /// A developer's own kernel tree, used instead of Debian's linux-source.
    pub kernel_tree: Option<PathBuf>,
    /// Extra patches applied after the variant's own.
    pub extra_patches: Vec<PathBuf>,
    /// Show a progress bar.
    pub progress: bool,
}

/// Errors while building images.
#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    #[error("unknown kernel variant '{name}' (known: {known})")]
    UnknownVariant { name: String, known: String },
    #[error("{0}")]
    Other(String),
}

/// Builds (or takes from the cache) what `variant` needs to boot.
pub fn ensure(variant: &str, _opts: &ImageOptions) -> Result<KernelImage, ImageError> {
    Err(ImageError::Other(format!(
        "image builder not written yet for {variant}"
    )))
}
