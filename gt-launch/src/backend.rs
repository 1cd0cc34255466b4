//! The external vhost-user backend: our `vhost-blk`, or `qemu-storage-daemon` as a reference.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::process::Guarded;
use super::LaunchError;
use gt_suite::{BackendKind, Cell, Suite};

/// Where the backend's per-queue stats go (vhost-blk `--stats-file`).
pub fn stats_file(run_dir: &Path) -> PathBuf {
    run_dir.join("backend-stats.json")
}

/// The `vhost-blk` binary next to the running executable (target/{debug,release}).
pub fn default_vhost_blk() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let mut dir = exe.parent()?.to_path_buf();
    // Test binaries live in target/<profile>/deps.
    if dir.file_name().is_some_and(|n| n == "deps") {
        dir.pop();
    }
    let cand = dir.join("vhost-blk");
    cand.is_file().then_some(cand)
}

/// `{seed}` and `{run_dir}` in a suite's argument.
pub fn subst(arg: &str, seed: u64, run_dir: &Path) -> String {
    arg.replace("{seed}", &seed.to_string())
        .replace("{run_dir}", &run_dir.display().to_string())
}

/// The backend's argv, or `None` for `qemu-builtin`.
pub fn argv(
    suite: &Suite,
    variant: Option<&Cell>,
    bin: Option<&Path>,
    socket: &Path,
    run_dir: &Path,
    seed: u64,
) -> Result<Option<Vec<String>>, LaunchError> {
    let s = &suite.spec;
    let extra = s
        .backend_args
        .iter()
        .chain(variant.map(|v| v.backend_args.iter()).into_iter().flatten())
        .map(|a| subst(a, seed, run_dir));
    let sock = socket.display().to_string();
    let mut a: Vec<String> = match s.backend {
        BackendKind::QemuBuiltin => return Ok(None),
        BackendKind::VhostBlk => {
            let bin = bin.ok_or_else(|| {
                LaunchError::Config(
                    "no vhost-blk binary: build it (`cargo build -p vhost-blk`) or pass --backend-bin"
                        .into(),
                )
            })?;
            vec![
                bin.display().to_string(),
                "--socket-path".into(),
                sock,
                "--device".into(),
                s.device.as_str().into(),
                "--stats-file".into(),
                stats_file(run_dir).display().to_string(),
                "--num-queues".into(),
                s.num_queues.to_string(),
            ]
        }
        BackendKind::QemuStorageDaemon => {
            let bin = bin.map(|b| b.display().to_string());
            vec![
                bin.unwrap_or_else(|| "qemu-storage-daemon".into()),
                "--blockdev".into(),
                super::qemu::blockdev(suite, run_dir, 0, 0),
                "--export".into(),
                format!(
                    "type=vhost-user-blk,id=e0,node-name=n0,addr.type=unix,addr.path={sock},num-queues={},writable=on",
                    s.num_queues
                ),
            ]
        }
    };
    a.extend(extra);
    Ok(Some(a))
}

/// First line of `<bin> --version` (both backends support it).
pub fn version(bin: &str) -> String {
    match std::process::Command::new(bin).arg("--version").output() {
        Ok(o) => {
            let t = String::from_utf8_lossy(&o.stdout);
            let line = t.lines().next().unwrap_or("").trim().to_string();
            if o.status.success() && !line.is_empty() {
                line
            } else {
                format!("unknown (--version exit {:?})", o.status.code())
            }
        }
        Err(e) => format!("unknown ({e})"),
    }
}

/// Starts the backend and waits (bounded) for its socket to appear.
pub fn start(
    argv: &[String],
    socket: &Path,
    log: &Path,
    limit: Duration,
) -> Result<Guarded, LaunchError> {
    let mut g = Guarded::spawn("backend", argv, log)
        .map_err(|e| LaunchError::Backend(format!("cannot start {}: {e}", argv[0])))?;
    let t = Instant::now();
    loop {
        if socket.exists() {
            return Ok(g);
        }
        if let Some(st) = g.try_wait() {
            return Err(LaunchError::Backend(format!(
                "{} exited ({st}) before creating its socket; log: {}",
                argv[0],
                tail(log, 5)
            )));
        }
        if t.elapsed() > limit {
            g.stop(Duration::from_secs(2));
            return Err(LaunchError::Backend(format!(
                "{} did not create {} within {:?}; log: {}",
                argv[0],
                socket.display(),
                limit,
                tail(log, 5)
            )));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The last `n` lines of a log, joined with " | ".
pub fn tail(path: &Path, n: usize) -> String {
    let t = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = t.lines().collect();
    lines[lines.len().saturating_sub(n)..].join(" | ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use gt_suite::SuiteSpec;

    fn suite(extra: &str) -> Suite {
        let spec: SuiteSpec = toml::from_str(&format!(
            "description = \"d\"\nsteps = [\"sleep:1\"]\n{extra}\n[[variants]]\nname = \"v\"\nbackend_args = [\"--msix-latency\", \"20us\"]"
        ))
        .unwrap();
        Suite::from_spec("t", Path::new("/x"), spec).unwrap()
    }

    #[test]
    fn vhost_blk_argv_has_fixed_flags_and_the_queue_count_then_suite_then_variant_args() {
        let s = suite("device = \"scsi\"\nbackend = \"vhost-blk\"\nbackend_args = [\"--null\", \"1G\", \"--seed\", \"{seed}\"]");
        let a = argv(
            &s,
            s.variant("v"),
            Some(Path::new("/b/vhost-blk")),
            Path::new("/t/s"),
            Path::new("/r"),
            42,
        )
        .unwrap()
        .unwrap();
        assert_eq!(
            a,
            [
                "/b/vhost-blk",
                "--socket-path",
                "/t/s",
                "--device",
                "scsi",
                "--stats-file",
                "/r/backend-stats.json",
                "--num-queues",
                "8",
                "--null",
                "1G",
                "--seed",
                "42",
                "--msix-latency",
                "20us"
            ]
        );
    }

    #[test]
    fn vhost_blk_without_binary_is_a_config_error() {
        let s = suite("device = \"blk\"\nbackend = \"vhost-blk\"");
        let e = argv(&s, None, None, Path::new("/t/s"), Path::new("/r"), 0).unwrap_err();
        assert!(e.to_string().contains("--backend-bin"), "{e}");
    }

    #[test]
    fn builtin_has_no_backend() {
        let s: SuiteSpec = toml::from_str("description = \"d\"\nsteps = [\"sleep:1\"]\ndevice = \"blk\"\nbackend = \"qemu-builtin\"").unwrap();
        let s = Suite::from_spec("t", Path::new("/x"), s).unwrap();
        assert!(argv(&s, None, None, Path::new("/t/s"), Path::new("/r"), 0)
            .unwrap()
            .is_none());
    }

    #[test]
    fn storage_daemon_creates_its_socket_and_stops() {
        let d = tempfile::tempdir().unwrap();
        let s =
            suite("device = \"blk\"\nbackend = \"qemu-storage-daemon\"\n[builtin]\nsize_mib = 16");
        let sock = d.path().join("vu.sock");
        let a = argv(&s, None, None, &sock, d.path(), 0).unwrap().unwrap();
        // The variant's args are appended; qsd would reject them, so drop them here.
        let a = a[..5].to_vec();
        let log = d.path().join("backend.log");
        let mut g = start(&a, &sock, &log, Duration::from_secs(10)).unwrap();
        assert!(sock.exists());
        assert!(g.try_wait().is_none());
        g.stop(Duration::from_secs(3)).unwrap();
        assert!(g.try_wait().is_some());
    }

    #[test]
    fn backend_that_dies_is_reported_with_its_log() {
        let d = tempfile::tempdir().unwrap();
        let a: Vec<String> = ["sh", "-c", "echo bad flag >&2; exit 2"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let e = start(
            &a,
            &d.path().join("s"),
            &d.path().join("l"),
            Duration::from_secs(5),
        )
        .unwrap_err();
        assert!(e.to_string().contains("bad flag"), "{e}");
    }
}
