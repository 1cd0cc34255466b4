//! Shared helpers: hashing, running tools with a log, downloading .debs, locks, progress.

use std::fs::File;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use indicatif::{ProgressBar, ProgressStyle};
use sha2::{Digest, Sha256};

use super::ImageError;

pub fn sha256_hex(data: &[u8]) -> String {
    hex::encode(Sha256::digest(data))
}

/// sha256 of a file, streamed.
pub fn sha256_file(path: &Path) -> Result<String, ImageError> {
    let mut f = File::open(path).map_err(|e| ImageError::io(path, e))?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f.read(&mut buf).map_err(|e| ImageError::io(path, e))?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Ok(hex::encode(h.finalize()))
}

/// Build context: the cache root and whether to draw progress bars.
#[derive(Debug, Clone)]
pub struct Ctx {
    pub cache: PathBuf,
    pub progress: bool,
}

impl Ctx {
    pub fn new(cache: &Path, progress: bool) -> Result<Ctx, ImageError> {
        mkdirs(cache)?;
        Ok(Ctx {
            cache: cache.to_path_buf(),
            progress,
        })
    }

    /// A spinner/bar on stderr, hidden unless progress was asked for.
    pub fn bar(&self, len: u64, what: &str) -> ProgressBar {
        if !self.progress {
            return ProgressBar::hidden();
        }
        let pb = ProgressBar::new(len);
        let style = ProgressStyle::with_template(
            "{prefix:>14} [{elapsed_precise}] {wide_bar} {pos}/{len} {msg:.dim}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar());
        pb.set_style(style);
        pb.set_prefix(what.to_string());
        pb
    }
}

pub fn mkdirs(p: &Path) -> Result<(), ImageError> {
    std::fs::create_dir_all(p).map_err(|e| ImageError::io(p, e))
}

/// Writes a file atomically (temp file + rename in the same directory).
pub fn write_atomic(path: &Path, data: &[u8]) -> Result<(), ImageError> {
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    std::fs::write(&tmp, data).map_err(|e| ImageError::io(&tmp, e))?;
    std::fs::rename(&tmp, path).map_err(|e| ImageError::io(path, e))
}

/// Runs `cmd` with stdout+stderr appended to `log`; calls `on_line` for each output line.
pub fn run_logged(
    cmd: &mut Command,
    what: &str,
    log: &Path,
    mut on_line: impl FnMut(&str),
) -> Result<(), ImageError> {
    let mut logf = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .map_err(|e| ImageError::io(log, e))?;
    let _ = writeln!(logf, "### {what}: {cmd:?}");
    tracing::debug!(?cmd, "running {what}");
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| ImageError::Tool(format!("{what}: cannot start {cmd:?}: {e}")))?;
    // stderr through a thread so neither pipe fills up.
    let stderr = child.stderr.take();
    let errlog = logf.try_clone().map_err(|e| ImageError::io(log, e))?;
    let t = std::thread::spawn(move || {
        let mut errlog = errlog;
        if let Some(s) = stderr {
            for line in BufReader::new(s).split(b'\n').map_while(Result::ok) {
                let _ = errlog.write_all(&line);
                let _ = errlog.write_all(b"\n");
            }
        }
    });
    if let Some(out) = child.stdout.take() {
        for line in BufReader::new(out).split(b'\n').map_while(Result::ok) {
            let _ = logf.write_all(&line);
            let _ = logf.write_all(b"\n");
            on_line(&String::from_utf8_lossy(&line));
        }
    }
    let _ = t.join();
    let status = child
        .wait()
        .map_err(|e| ImageError::Tool(format!("{what}: {e}")))?;
    if !status.success() {
        return Err(ImageError::Command {
            what: format!("{what} ({status})"),
            log: log.to_path_buf(),
        });
    }
    Ok(())
}

/// Runs a short command and returns its stdout; errors carry stderr.
pub fn output(cmd: &mut Command, what: &str) -> Result<String, ImageError> {
    let out = cmd
        .output()
        .map_err(|e| ImageError::Tool(format!("{what}: cannot start {cmd:?}: {e}")))?;
    if !out.status.success() {
        return Err(ImageError::Tool(format!(
            "{what} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// First line of `gcc --version`: part of every compiled output's cache key.
pub fn gcc_version() -> Result<String, ImageError> {
    let v = output(Command::new("gcc").arg("--version"), "gcc --version")?;
    Ok(v.lines().next().unwrap_or("").trim().to_string())
}

/// An exclusive advisory lock on `<dir>/.lock`, held while the value lives (the file is kept
/// open only for that).
#[derive(Debug)]
pub struct Lock(#[allow(dead_code)] File);

impl Lock {
    pub fn take(dir: &Path) -> Result<Lock, ImageError> {
        use std::os::fd::AsRawFd;
        mkdirs(dir)?;
        let p = dir.join(".lock");
        let f = File::create(&p).map_err(|e| ImageError::io(&p, e))?;
        // SAFETY: flock on a file descriptor we own and keep open for the lock's lifetime.
        let rc = unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) };
        if rc != 0 {
            return Err(ImageError::io(&p, std::io::Error::last_os_error()));
        }
        Ok(Lock(f))
    }
}

/// Short form of a key for directory names.
pub fn short(key: &str) -> &str {
    &key[..key.len().min(16)]
}

/// A file-system-friendly form of a package version (`1:2.3~x` -> `1_2.3_x`).
pub fn safe_name(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "+-.".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_and_names() {
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("f");
        write_atomic(&p, b"abc").unwrap();
        assert_eq!(sha256_file(&p).unwrap(), sha256_hex(b"abc"));
        assert_eq!(safe_name("6.12.117-1~deb12u1"), "6.12.117-1_deb12u1");
    }

    #[test]
    fn run_logged_reports_failure_with_the_log() {
        let d = tempfile::tempdir().unwrap();
        let log = d.path().join("log");
        let mut lines = Vec::new();
        run_logged(
            Command::new("sh").args(["-c", "echo one; echo two >&2"]),
            "t",
            &log,
            |l| lines.push(l.to_string()),
        )
        .unwrap();
        assert_eq!(lines, vec!["one"]);
        let e = run_logged(
            Command::new("sh").args(["-c", "exit 3"]),
            "bad",
            &log,
            |_| {},
        )
        .unwrap_err();
        assert!(e.to_string().contains("bad"));
        let text = std::fs::read_to_string(&log).unwrap();
        assert!(text.contains("two"));
    }
}
