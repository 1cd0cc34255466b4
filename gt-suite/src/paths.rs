//! Where things live on the host: the repository's data (the suites, `images/kernels.toml` and
//! what it names: config fragments, patches, litmus tests, the guest agent) and the cache
//! directory. The one place that reads `VB_ROOT` and `VB_CACHE`; every stage asks here.
//!
//! Nothing is baked in at build time: the data is found when the program runs, the first of
//! these that applies (see [`locate`]):
//!
//! 1. `$VB_ROOT`, when set (taken as it is).
//! 2. The current directory, or the nearest directory above it, that holds [`MARKER`]: a
//!    command run anywhere inside a checkout uses that checkout.
//! 3. The same walk up from the running program's own directory: a binary built in a checkout
//!    (`target/debug/guest-tests`) and run from elsewhere, as `git bisect run` runs `judge`
//!    inside a kernel tree, uses the checkout it was built in.
//! 4. [`SHARE_DIR`], when it holds [`MARKER`]: the data installed beside an installed binary.
//! 5. None of them: the current directory, so that what is read from it fails naming its path.
//!
//! The cache directory is `$VB_CACHE`, else `.cache` under the root; for the installed data
//! (4), which is not the user's to write in, `$XDG_CACHE_HOME/vhost-blk`, else
//! `$HOME/.cache/vhost-blk`.

use std::path::{Path, PathBuf};

/// The file that marks a directory as holding the repository's data.
pub const MARKER: &str = "images/kernels.toml";

/// Where an installed copy of the repository's data lives (rule 4).
pub const SHARE_DIR: &str = "/usr/share/vhost-blk";

/// Which rule found the root.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Found {
    /// `$VB_ROOT` (rule 1).
    Env,
    /// Above the current directory (rule 2).
    CurrentDir,
    /// Above the running program (rule 3).
    Program,
    /// The installed data (rule 4).
    Installed,
    /// Nowhere: the current directory (rule 5).
    Nowhere,
}

/// What the search starts from: the process's environment, or a test's.
#[derive(Debug, Clone, Default)]
pub struct Origins {
    /// `$VB_ROOT`.
    pub env_root: Option<PathBuf>,
    /// The current directory.
    pub current_dir: Option<PathBuf>,
    /// The running program's path.
    pub program: Option<PathBuf>,
    /// The installed data's directory ([`SHARE_DIR`]).
    pub share_dir: PathBuf,
}

impl Origins {
    /// This process's.
    pub fn of_process() -> Origins {
        Origins {
            env_root: std::env::var_os("VB_ROOT").map(PathBuf::from),
            current_dir: std::env::current_dir().ok(),
            program: std::env::current_exe().ok(),
            share_dir: PathBuf::from(SHARE_DIR),
        }
    }
}

/// The nearest of `dir` and the directories above it that holds [`MARKER`].
fn marked_above(dir: &Path) -> Option<PathBuf> {
    dir.ancestors()
        .find(|d| d.join(MARKER).is_file())
        .map(Path::to_path_buf)
}

/// The repository root and the rule that found it (the module's rules 1-5).
pub fn locate(o: &Origins) -> (PathBuf, Found) {
    if let Some(root) = &o.env_root {
        return (root.clone(), Found::Env);
    }
    if let Some(root) = o.current_dir.as_deref().and_then(marked_above) {
        return (root, Found::CurrentDir);
    }
    let program_dir = o.program.as_deref().and_then(Path::parent);
    if let Some(root) = program_dir.and_then(marked_above) {
        return (root, Found::Program);
    }
    if o.share_dir.join(MARKER).is_file() {
        return (o.share_dir.clone(), Found::Installed);
    }
    let here = o.current_dir.clone().unwrap_or_else(|| PathBuf::from("."));
    (here, Found::Nowhere)
}

/// The repository root (canonicalised when it exists).
pub fn repo_root() -> PathBuf {
    let (root, _) = locate(&Origins::of_process());
    root.canonicalize().unwrap_or(root)
}

/// The cache directory for a root found by `found`, when `$VB_CACHE` is not set.
fn default_cache(root: &Path, found: Found) -> PathBuf {
    if found != Found::Installed {
        return root.join(".cache");
    }
    std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(std::env::temp_dir)
        .join("vhost-blk")
}

/// The cache directory: `$VB_CACHE`, else the root's `.cache` (the installed data's: the
/// user's cache directory).
pub fn cache_dir() -> PathBuf {
    if let Some(c) = std::env::var_os("VB_CACHE") {
        return PathBuf::from(c);
    }
    let (root, found) = locate(&Origins::of_process());
    let root = root.canonicalize().unwrap_or(root);
    default_cache(&root, found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repo_root_holds_the_workspace() {
        assert!(repo_root().join("guest-tests").join("Cargo.toml").is_file());
        assert!(cache_dir().is_absolute() || std::env::var_os("VB_CACHE").is_some());
    }

    /// A tree with a checkout (`co/`, marked), a directory outside it, and a share dir.
    fn tree() -> (tempfile::TempDir, PathBuf, PathBuf, PathBuf) {
        let t = tempfile::tempdir().unwrap();
        let co = t.path().join("co");
        std::fs::create_dir_all(co.join("images")).unwrap();
        std::fs::write(co.join(MARKER), "").unwrap();
        std::fs::create_dir_all(co.join("target/debug")).unwrap();
        std::fs::create_dir_all(co.join("guest-tests/suites")).unwrap();
        let elsewhere = t.path().join("linux");
        std::fs::create_dir_all(&elsewhere).unwrap();
        let share = t.path().join("share");
        std::fs::create_dir_all(share.join("images")).unwrap();
        (t, co, elsewhere, share)
    }

    #[test]
    fn the_rules_apply_in_order() {
        let (_t, co, elsewhere, share) = tree();
        let program = co.join("target/debug/guest-tests");
        let mut o = Origins {
            env_root: Some(PathBuf::from("/from/env")),
            current_dir: Some(co.join("guest-tests/suites")),
            program: Some(program.clone()),
            share_dir: share.clone(),
        };
        assert_eq!(locate(&o), (PathBuf::from("/from/env"), Found::Env));
        o.env_root = None;
        assert_eq!(locate(&o), (co.clone(), Found::CurrentDir));
        // judge under `git bisect run`: the current directory is a kernel tree.
        o.current_dir = Some(elsewhere.clone());
        assert_eq!(locate(&o), (co.clone(), Found::Program));
        // An installed binary, its data under the share directory.
        o.program = Some(PathBuf::from("/usr/bin/guest-tests"));
        assert_eq!(locate(&o), (elsewhere.clone(), Found::Nowhere));
        std::fs::write(share.join(MARKER), "").unwrap();
        assert_eq!(locate(&o), (share.clone(), Found::Installed));
        o.current_dir = None;
        o.share_dir = elsewhere.join("none");
        assert_eq!(locate(&o), (PathBuf::from("."), Found::Nowhere));
    }

    #[test]
    fn the_installed_data_caches_in_the_users_directory() {
        let root = Path::new("/x");
        assert_eq!(default_cache(root, Found::Program), root.join(".cache"));
        assert_eq!(default_cache(root, Found::Env), root.join(".cache"));
        let c = default_cache(Path::new(SHARE_DIR), Found::Installed);
        assert!(c.ends_with("vhost-blk"), "{}", c.display());
        assert!(!c.starts_with(SHARE_DIR), "{}", c.display());
    }
}
