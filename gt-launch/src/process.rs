//! A child process that is always torn down: SIGTERM, a grace period, then SIGKILL.

use std::fs::File;
use std::os::unix::process::CommandExt;
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
        let mut cmd = Command::new(&argv[0]);
        cmd.args(&argv[1..])
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err);
        // SAFETY: the closure runs in the child between fork and exec and only calls prctl(2),
        // which is async-signal-safe; it touches no memory of the parent.
        unsafe {
            cmd.pre_exec(|| {
                // If the harness dies (SIGKILL, CI timeout), QEMU and the backend die with it.
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) == -1 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = cmd.spawn()?;
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

    /// SIGKILL now (no grace: a crash as a drill makes it) and reap. Returns the exit status.
    pub fn kill(&mut self) -> Option<ExitStatus> {
        if let Some(st) = self.try_wait() {
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
        self.kill()
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
    #[ignore = "helper process for children_die_with_their_parent"]
    fn helper_spawn_then_exit() {
        let Some(dir) = std::env::var_os("VB_PDEATH_DIR") else {
            return;
        };
        let argv: Vec<String> = ["sleep", "30"].iter().map(|s| s.to_string()).collect();
        let g = Guarded::spawn("t", &argv, &std::path::Path::new(&dir).join("log")).unwrap();
        println!("CHILD={}", g.pid().unwrap());
        // Exit without running Drop: only PR_SET_PDEATHSIG can stop the child now.
        std::process::exit(0);
    }

    fn alive(pid: u32) -> bool {
        procfs::process::Process::new(pid as i32)
            .and_then(|p| p.stat())
            .is_ok_and(|s| s.state != 'Z')
    }

    #[test]
    fn children_die_with_their_parent() {
        let d = tempfile::tempdir().unwrap();
        let out = Command::new(std::env::current_exe().unwrap())
            .args([
                "--ignored",
                "--exact",
                "process::tests::helper_spawn_then_exit",
                "--nocapture",
            ])
            .env("VB_PDEATH_DIR", d.path())
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        let pid: u32 = text
            .lines()
            .find_map(|l| l.strip_prefix("CHILD="))
            .unwrap_or_else(|| panic!("helper printed no pid: {text}"))
            .trim()
            .parse()
            .unwrap();
        let t = Instant::now();
        while alive(pid) && t.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(!alive(pid), "child {pid} outlived its parent");
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
