//! Where things live on the host: the repository root and the cache directory. The one place
//! that reads `VB_ROOT` and `VB_CACHE`; every stage asks here.

use std::path::{Path, PathBuf};

/// The repository root: `$VB_ROOT`, else the directory above this crate (canonicalised when
/// it exists).
pub fn repo_root() -> PathBuf {
    let root = std::env::var_os("VB_ROOT")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join(".."));
    root.canonicalize().unwrap_or(root)
}

/// The cache directory: `$VB_CACHE`, else `<repo>/.cache`.
pub fn cache_dir() -> PathBuf {
    std::env::var_os("VB_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join(".cache"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repo_root_holds_the_workspace() {
        assert!(repo_root().join("guest-tests").join("Cargo.toml").is_file());
        assert!(cache_dir().is_absolute() || std::env::var_os("VB_CACHE").is_some());
    }
}
