//! Test-only (feature `test-hook`, vhost-blk's `sandbox-test-hook`; never in a release build): with
//! `VHOST_BLK_SANDBOX_PROBE=KIND:CALL`, the first thread of KIND to enter its sandbox tries
//! CALL and logs what came back, if anything did (vhost-blk/tests/sandbox.rs).
//!
//! KIND: `main`, `signals`, `relay`, `handler`, `worker` (vhost-user-backend's queue
//! workers, `vring_worker`), `own` (vhost-blk's workers past vring 63, `vring_own_N`).
//! CALL: `execve` (of a path that does not exist, so an unconfined backend gets ENOENT and
//! runs on), `socket` (AF_INET, closed at once), `open:PATH` (read-only, closed at once).
//! The probe also runs when the sandbox is off (`--sandbox off`), where each call is
//! expected to go through: the tests' control case.

use std::ffi::CString;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

use super::ThreadKind;

static DONE: AtomicBool = AtomicBool::new(false);
/// The variable's value, read once.
static SPEC: OnceLock<Option<String>> = OnceLock::new();

/// The probe for a thread of `kind` (its name tells `worker` from `own`).
pub(super) fn run_in(kind: ThreadKind) {
    if DONE.load(Ordering::Relaxed) || SPEC.get().is_some_and(Option::is_none) {
        return;
    }
    let name = std::thread::current().name().unwrap_or_default().to_owned();
    let k = match kind {
        ThreadKind::Main => "main",
        ThreadKind::Signals => "signals",
        ThreadKind::Relay => "relay",
        ThreadKind::Handler => "handler",
        ThreadKind::Worker if name.starts_with("vring_own") => "own",
        ThreadKind::Worker => "worker",
    };
    run(k);
}

/// Runs the probe if `kind` is the one asked for and no thread ran it yet.
fn run(kind: &str) {
    let spec = SPEC.get_or_init(|| std::env::var("VHOST_BLK_SANDBOX_PROBE").ok());
    let Some(spec) = spec else {
        return;
    };
    let Some((want, call)) = spec.split_once(':') else {
        return;
    };
    if want != kind || DONE.swap(true, Ordering::SeqCst) {
        return;
    }
    let result = attempt(call);
    let err = std::io::Error::last_os_error();
    eprintln!("vhost-blk: sandbox probe: {kind} {call} returned {result} ({err})");
}

fn attempt(call: &str) -> i64 {
    match call.split_once(':') {
        None if call == "execve" => {
            let path = c"/nonexistent/vhost-blk-sandbox-probe";
            let argv = [path.as_ptr(), std::ptr::null()];
            let envp = [std::ptr::null()];
            // SAFETY: a NUL-terminated path and two null-terminated pointer arrays that
            // live across the call; the path does not exist, so an unconfined process gets
            // ENOENT and runs on.
            unsafe { libc::execve(path.as_ptr(), argv.as_ptr(), envp.as_ptr()) }.into()
        }
        None if call == "socket" => {
            // SAFETY: plain integers; the descriptor, if any, is closed at once.
            let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0) };
            if fd >= 0 {
                // SAFETY: `fd` was just returned to us and is owned by nobody else.
                unsafe { libc::close(fd) };
            }
            fd.into()
        }
        Some(("open", path)) => {
            let Ok(p) = CString::new(path) else {
                return -1;
            };
            // SAFETY: a NUL-terminated path; the descriptor, if any, is closed at once.
            let fd = unsafe { libc::open(p.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
            if fd >= 0 {
                // SAFETY: `fd` was just returned to us and is owned by nobody else.
                unsafe { libc::close(fd) };
            }
            fd.into()
        }
        _ => -1,
    }
}
