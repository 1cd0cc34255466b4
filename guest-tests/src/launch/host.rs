//! Facts about the host and the source tree, recorded as provenance.

use std::path::{Path, PathBuf};
use std::process::Command;

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

/// `model name` from /proc/cpuinfo.
pub fn cpu_model() -> String {
    let t = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    parse_cpu_model(&t).unwrap_or_else(|| "unknown".into())
}

fn parse_cpu_model(cpuinfo: &str) -> Option<String> {
    cpuinfo
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split_once(':'))
        .map(|(_, v)| v.trim().to_string())
}

/// Online CPUs.
pub fn cores() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}

/// The 1, 5 and 15 minute load averages (-1 when unreadable).
pub fn loadavg() -> [f64; 3] {
    let t = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    parse_loadavg(&t).unwrap_or([-1.0; 3])
}

fn parse_loadavg(t: &str) -> Option<[f64; 3]> {
    let mut it = t.split_whitespace().map(|x| x.parse::<f64>().ok());
    Some([it.next()??, it.next()??, it.next()??])
}

/// `uname -r` of the host.
pub fn host_release() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into())
}

/// `git rev-parse HEAD` of the repository and whether the work tree has changes.
pub fn git_rev() -> (String, bool) {
    let root = repo_root();
    let rev = Command::new("git")
        .arg("-C")
        .arg(&root)
        .args(["rev-parse", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|| "unknown".into());
    let dirty = Command::new("git")
        .arg("-C")
        .arg(&root)
        .args(["status", "--porcelain", "--untracked-files=no"])
        .output()
        .ok()
        .is_some_and(|o| !o.stdout.is_empty());
    (rev, dirty)
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
    fn parses_cpuinfo_and_loadavg() {
        assert_eq!(
            parse_cpu_model("processor\t: 0\nmodel name\t: Foo CPU @ 2GHz\nflags: x\n").as_deref(),
            Some("Foo CPU @ 2GHz")
        );
        assert_eq!(parse_cpu_model("processor: 0\n"), None);
        assert_eq!(
            parse_loadavg("0.50 1.25 2.00 1/100 4242\n"),
            Some([0.5, 1.25, 2.0])
        );
        assert_eq!(parse_loadavg("garbage"), None);
    }

    #[test]
    fn live_host_values_are_sane() {
        assert!(cores() >= 1);
        assert!(loadavg()[0] >= 0.0);
        let (rev, _) = git_rev();
        assert!(rev == "unknown" || rev.len() == 40, "{rev}");
    }
}
