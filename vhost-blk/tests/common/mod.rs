//! Shared helpers: run the real `vhost-blk` binary on a temporary socket. vhost-blk's tests use
//! them, and vhost-blk-bench's (`#[path]`), which drive the same binary.

#![allow(dead_code)]

pub mod disk;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The `vhost-blk` binary: cargo's own for vhost-blk's tests; for another crate's tests, built
/// by cargo (same profile, same target directory) on first use.
pub fn backend_bin() -> PathBuf {
    if let Some(p) = option_env!("CARGO_BIN_EXE_vhost-blk") {
        return p.into();
    }
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            // target/<profile>/deps/<test binary>
            let exe = std::env::current_exe().unwrap();
            let profile_dir = exe.parent().and_then(Path::parent).unwrap().to_path_buf();
            let mut cargo = Command::new(env!("CARGO"));
            cargo.args(["build", "-q", "-p", "vhost-blk", "--bin", "vhost-blk"]);
            if profile_dir.file_name().is_some_and(|n| n == "release") {
                cargo.arg("--release");
            }
            let ok = cargo.status().expect("run cargo").success();
            assert!(ok, "cargo build -p vhost-blk failed");
            profile_dir.join("vhost-blk")
        })
        .clone()
}

/// A backend process; SIGTERM on drop.
pub struct Backend {
    pub child: Child,
    pub socket: PathBuf,
    pub dir: tempfile::TempDir,
}

impl Backend {
    /// Starts `vhost-blk --socket-path <tmp>/vhost.sock <args>` and waits for the socket.
    pub fn start(args: &[&str]) -> Backend {
        let dir = tempfile::tempdir().unwrap();
        Self::start_in(dir, args)
    }

    pub fn start_in(dir: tempfile::TempDir, args: &[&str]) -> Backend {
        Self::start_env(dir, args, &[])
    }

    /// As [`start_in`](Self::start_in), with more environment variables (an LD_PRELOAD).
    pub fn start_env(dir: tempfile::TempDir, args: &[&str], env: &[(&str, &str)]) -> Backend {
        let socket = dir.path().join("vhost.sock");
        let child = Command::new(backend_bin())
            .arg("--socket-path")
            .arg(&socket)
            .args(args)
            .envs(env.iter().copied())
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .spawn()
            .expect("spawn vhost-blk");
        let b = Backend { child, socket, dir };
        b.wait_for_socket();
        b
    }

    fn wait_for_socket(&self) {
        let t = Instant::now();
        while !self.socket.exists() {
            assert!(
                t.elapsed() < Duration::from_secs(10),
                "backend did not create its socket"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Sends `sig` and waits (bounded) for the exit status.
    pub fn signal_and_wait(&mut self, sig: i32) -> ExitStatus {
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(self.child.id() as i32, sig) };
        wait_bounded(&mut self.child, Duration::from_secs(10))
    }
}

impl Drop for Backend {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            // SAFETY: kill(2) on our own child's pid.
            unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
            let _ = wait_bounded(&mut self.child, Duration::from_secs(5));
        }
    }
}

/// Waits for `child`, killing it after `limit`.
pub fn wait_bounded(child: &mut Child, limit: Duration) -> ExitStatus {
    let t = Instant::now();
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s;
        }
        if t.elapsed() > limit {
            let _ = child.kill();
            return child.wait().unwrap();
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A deterministic pattern for block `lba` tagged with `tag`.
pub fn pattern(lba: u64, tag: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (lba as u8).wrapping_mul(13) ^ (i as u8).wrapping_mul(7) ^ tag)
        .collect()
}

pub fn file_bytes(path: &Path, off: u64, len: usize) -> Vec<u8> {
    use std::os::unix::fs::FileExt;
    let f = std::fs::File::open(path).unwrap();
    let mut b = vec![0u8; len];
    f.read_exact_at(&mut b, off).unwrap();
    b
}
