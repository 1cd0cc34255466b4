//! A child process that is always torn down: SIGTERM, a grace period, then SIGKILL.

use std::fs::File;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// A spawned child, stdout and stderr going to a log file. Dropping it stops it.
#[derive(Debug)]
pub struct Guarded {
    pub name: String,
    child: Option<Child>,
    status: Option<ExitStatus>,
}

impl Guarded {
    /// Spawns `argv` with stdin closed and both output streams appended to `log`.
    pub fn spawn(name: &str, argv: &[String], log: &Path) -> std::io::Result<Guarded> {
        let out = File::create(log)?;
        let err = out.try_clone()?;
        let child = Command::new(&argv[0])
            .args(&argv[1..])
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()?;
        Ok(Guarded {
            name: name.into(),
            child: Some(child),
            status: None,
        })
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(|c| c.id())
    }

    /// The exit status if the process has ended (non-blocking).
    pub fn try_wait(&mut self) -> Option<ExitStatus> {
        if self.status.is_none() {
            if let Some(c) = self.child.as_mut() {
                if let Ok(Some(st)) = c.try_wait() {
                    self.status = Some(st);
                }
            }
        }
        self.status
    }

    /// Waits up to `limit` for the process to end by itself.
    pub fn wait_for(&mut self, limit: Duration) -> Option<ExitStatus> {
        let start = Instant::now();
        loop {
            if let Some(st) = self.try_wait() {
                return Some(st);
            }
            if start.elapsed() >= limit {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// SIGTERM, wait up to `grace`, then SIGKILL. Returns the exit status.
    pub fn stop(&mut self, grace: Duration) -> Option<ExitStatus> {
        if let Some(st) = self.try_wait() {
            return Some(st);
        }
        if let Some(pid) = self.pid() {
            // SAFETY: kill(2) on the pid of our own child, which has not been reaped yet
            // (try_wait above returned None), so the pid cannot have been reused.
            unsafe {
                libc::kill(pid as libc::pid_t, libc::SIGTERM);
            }
        }
        if let Some(st) = self.wait_for(grace) {
            return Some(st);
        }
        if let Some(c) = self.child.as_mut() {
            let _ = c.kill();
            if let Ok(st) = c.wait() {
                self.status = Some(st);
            }
        }
        self.status
    }
}

impl Drop for Guarded {
    fn drop(&mut self) {
        self.stop(Duration::from_secs(3));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stop_escalates_to_sigkill_when_term_is_ignored() {
        let d = tempfile::tempdir().unwrap();
        let log = d.path().join("log");
        let argv: Vec<String> = ["sh", "-c", "trap '' TERM; echo up; sleep 30"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let mut g = Guarded::spawn("t", &argv, &log).unwrap();
        std::thread::sleep(Duration::from_millis(200));
        assert!(g.try_wait().is_none());
        let t = Instant::now();
        let st = g.stop(Duration::from_millis(300)).unwrap();
        assert!(!st.success());
        assert!(t.elapsed() < Duration::from_secs(5));
        assert_eq!(std::fs::read_to_string(&log).unwrap(), "up\n");
    }

    #[test]
    fn exited_process_reports_status() {
        let d = tempfile::tempdir().unwrap();
        let argv: Vec<String> = ["sh", "-c", "exit 3"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let mut g = Guarded::spawn("t", &argv, &d.path().join("log")).unwrap();
        let st = g.wait_for(Duration::from_secs(5)).unwrap();
        assert_eq!(st.code(), Some(3));
    }
}
