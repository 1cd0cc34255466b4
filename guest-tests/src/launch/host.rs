//! Paths and host facts the launcher needs (provenance helpers live in `results`).

use std::path::{Path, PathBuf};

/// The repository root (parent of the guest-tests crate).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."))
}

/// The cache directory: `$VB_CACHE`, else `<repo>/.cache`.
pub fn cache_dir() -> PathBuf {
    std::env::var_os("VB_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join(".cache"))
}

/// `uname -r` of the host.
pub fn host_release() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into())
}

/// Seconds since the Unix epoch.
pub fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repo_root_holds_the_workspace() {
        assert!(repo_root().join("guest-tests").join("Cargo.toml").is_file());
        assert!(!host_release().is_empty());
        assert!(unix_now() > 1.0e9);
    }
}
