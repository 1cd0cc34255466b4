//! vhost-blk-sandbox: the backend confines itself once started (docs/sandbox.md): no new privileges, Landlock on
//! its files, and a seccomp-bpf allow-list per thread kind, compiled by rust-vmm's
//! `seccompiler` from the lists in `lists.rs`.
//!
//! Rules:
//! 1. [`confine`] runs once, in the main thread, after every start-up step (storage opened or
//!    created, socket bound) and before any other thread exists: `PR_SET_NO_NEW_PRIVS`,
//!    Landlock (`files.rs`), the SIGSYS handler (`sigsys.rs`), then the process filter (every
//!    list) with TSYNC, so a thread started earlier by a library would be covered too. Every
//!    later thread inherits all of it (seccomp and Landlock are inherited by threads created
//!    after they are installed).
//! 2. A thread whose job is narrower calls [`enter`] with its [`ThreadKind`] where that job
//!    starts (the signal thread and the relay's threads at their start, vhost-blk's own
//!    workers at theirs, vhost-user-backend's workers at their first event, its handler at
//!    SET_FEATURES: the crate starts those threads, so no code of ours runs before that).
//!    The kind's filter is stacked on the process filter, once per thread. When the process
//!    is not confined (`--sandbox off`, the in-process tests, the fuzz targets), [`enter`]
//!    does nothing.
//! 3. A call outside a thread's lists traps: the SIGSYS handler writes one line naming the
//!    call and the thread and the process dies by SIGSYS (a crash the backend already
//!    survives: docs/restart.md). No call answers EPERM instead, with one exception: opening
//!    a file in a thread whose job opens none (queue workers, relay, handler) returns EACCES,
//!    because glibc's malloc opens /sys/devices/system/cpu/online when a thread makes its
//!    arena and copes with the failure.
//! 4. `clone3` returns ENOSYS in every thread (glibc then uses `clone`, whose flags a filter
//!    can read), and `clone` without `CLONE_THREAD` traps: the backend never creates a
//!    process. `execve` is in no list.
//! 5. The lists live in `lists.rs` only, one reason per call.
//! 6. No new privileges in every case: with `--sandbox off` the daemon still sets
//!    `PR_SET_NO_NEW_PRIVS` ([`no_new_privs`]).

// As vhost-blk's library: no unwrap, expect, panic, unreachable, indexing or slicing outside
// tests.
#![cfg_attr(
    not(test),
    deny(
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::panic,
        clippy::unreachable,
        clippy::indexing_slicing
    )
)]

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::OnceLock;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule,
};

mod files;
mod lists;
mod names;
#[cfg(feature = "test-hook")]
mod probe;
mod sigsys;

pub use files::Paths;

/// The kinds of thread with a filter narrower than the process's (rule 2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ThreadKind {
    /// The main thread: it has the process filter (rule 1) and stacks nothing.
    Main,
    /// SIGINT/SIGTERM and SIGUSR1 (statistics file, stall report).
    Signals,
    /// The vhost-user relay's two threads.
    Relay,
    /// vhost-user-backend's message handler.
    Handler,
    /// A queue worker (vhost-user-backend's or vhost-blk's own past vring 63).
    Worker,
}

/// Errors while confining; `daemon` reports them on one line and exits.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    #[error("seccomp filter: {0}")]
    Seccomp(#[from] seccompiler::BackendError),
    #[error("installing the seccomp filter: {0}")]
    Install(#[from] seccompiler::Error),
    #[error("Landlock: {0}")]
    Landlock(#[from] landlock::RulesetError),
    #[error("SIGSYS handler: {0}")]
    Signal(std::io::Error),
    #[error("seccomp is not supported on {0}")]
    Arch(&'static str),
}

/// What [`confine`] installed, for the start-up log line.
#[derive(Debug, Clone)]
pub struct Report {
    /// Landlock's state, in words (ABI level, enforced or not).
    pub landlock: String,
}

/// The compiled filters of a confined process (rule 2).
struct Filters {
    signals: BpfProgram,
    relay: BpfProgram,
    handler: BpfProgram,
    worker: BpfProgram,
    /// `openat`/`open` answer EACCES (rule 3's exception).
    no_open: BpfProgram,
}

static CONFINED: OnceLock<Filters> = OnceLock::new();

thread_local! {
    /// This thread's kind filter is installed (rule 2: once per thread).
    static ENTERED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Confines the process (rule 1). Call once, from the main thread, with no other thread
/// running yet.
pub fn confine(paths: &Paths) -> Result<Report, SandboxError> {
    let arch = std::env::consts::ARCH
        .try_into()
        .map_err(|_| SandboxError::Arch(std::env::consts::ARCH))?;
    let filters = Filters {
        signals: compile(Some(ThreadKind::Signals), arch)?,
        relay: compile(Some(ThreadKind::Relay), arch)?,
        handler: compile(Some(ThreadKind::Handler), arch)?,
        worker: compile(Some(ThreadKind::Worker), arch)?,
        no_open: errno_filter(&[libc::SYS_openat, libc::SYS_open], libc::EACCES, arch)?,
    };
    let process = compile(None, arch)?;
    let no_clone3 = errno_filter(&[libc::SYS_clone3], libc::ENOSYS, arch)?;
    // Landlock first: its own calls are in no list.
    let landlock = files::restrict(paths)?;
    sigsys::install().map_err(SandboxError::Signal)?;
    seccompiler::apply_filter_all_threads(&no_clone3)?;
    seccompiler::apply_filter_all_threads(&process)?;
    // Set once: a second confine would find it set and leave the filters as they are.
    let _ = CONFINED.set(filters);
    Ok(Report { landlock })
}

/// Stacks `kind`'s filter in this thread, once (rule 2); nothing when the process is not
/// confined. A failure is logged: the thread keeps the process filter.
pub fn enter(kind: ThreadKind) {
    if let Some(f) = CONFINED.get() {
        if !ENTERED.with(|e| e.replace(true)) {
            stack(f, kind);
        }
    }
    #[cfg(feature = "test-hook")]
    probe::run_in(kind);
}

fn stack(f: &Filters, kind: ThreadKind) {
    let (narrow, no_open) = match kind {
        ThreadKind::Main => return,
        ThreadKind::Signals => (&f.signals, false),
        ThreadKind::Relay => (&f.relay, true),
        ThreadKind::Handler => (&f.handler, true),
        ThreadKind::Worker => (&f.worker, true),
    };
    // The EACCES filter first: once the kind's filter is in, `seccomp` itself is refused.
    let r = if no_open {
        seccompiler::apply_filter(&f.no_open)
    } else {
        Ok(())
    };
    if let Err(e) = r.and_then(|()| seccompiler::apply_filter(narrow)) {
        tracing::error!(?kind, "sandbox: this thread keeps the process filter: {e}");
    }
}

/// `PR_SET_NO_NEW_PRIVS` alone, for `--sandbox off`: no new privileges in every case.
pub fn no_new_privs() -> std::io::Result<()> {
    // SAFETY: prctl with plain integer arguments; it changes only this thread's flag (and that
    // of threads it starts later).
    if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Whether [`confine`] ran in this process.
pub fn is_confined() -> bool {
    CONFINED.get().is_some()
}

/// The filter of `kind` (None: the process filter): its lists' union, a trap for the rest.
fn compile(
    kind: Option<ThreadKind>,
    arch: seccompiler::TargetArch,
) -> Result<BpfProgram, SandboxError> {
    // Per call: None = any arguments, else the alternatives.
    let mut calls: BTreeMap<i64, Option<Vec<SeccompRule>>> = BTreeMap::new();
    for &(nr, args, _why) in lists::groups(kind).iter().copied().flatten() {
        let rules = match args {
            lists::Args::Any => None,
            lists::Args::OneOf(i, values) => Some(
                values
                    .iter()
                    .map(|&v| cond(i, SeccompCmpOp::Eq, v))
                    .collect::<Result<Vec<_>, _>>()?,
            ),
            lists::Args::HasBits(i, mask) => {
                Some(vec![cond(i, SeccompCmpOp::MaskedEq(mask), mask)?])
            }
        };
        let slot = calls.entry(nr).or_insert_with(|| Some(Vec::new()));
        match (slot.as_mut(), rules) {
            (Some(v), Some(r)) => v.extend(r),
            _ => *slot = None,
        }
    }
    let rules = calls
        .into_iter()
        .map(|(nr, r)| (nr, r.unwrap_or_default()))
        .collect();
    let filter = SeccompFilter::new(rules, SeccompAction::Trap, SeccompAction::Allow, arch)?;
    Ok(filter.try_into()?)
}

/// One condition on argument `i` (32-bit compare for the values the lists use: ioctl
/// requests, flags, families, signal numbers).
fn cond(i: u8, op: SeccompCmpOp, v: u64) -> Result<SeccompRule, SandboxError> {
    let len = if matches!(op, SeccompCmpOp::MaskedEq(_)) {
        SeccompCmpArgLen::Qword
    } else {
        SeccompCmpArgLen::Dword
    };
    Ok(SeccompRule::new(vec![SeccompCondition::new(
        i, len, op, v,
    )?])?)
}

/// A filter that answers `errno` to `calls` and allows the rest (rules 3 and 4).
fn errno_filter(
    calls: &[i64],
    errno: i32,
    arch: seccompiler::TargetArch,
) -> Result<BpfProgram, SandboxError> {
    let rules = calls.iter().map(|&nr| (nr, Vec::new())).collect();
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(errno as u32),
        arch,
    )?;
    Ok(filter.try_into()?)
}

/// The socket's and the statistics file's folders, as the daemon will use them.
pub fn parent_dir(p: &std::path::Path) -> PathBuf {
    match p.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_owned(),
        _ => PathBuf::from("."),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_compiles_and_the_process_filter_is_the_union() {
        let arch = std::env::consts::ARCH.try_into().unwrap();
        for kind in [
            None,
            Some(ThreadKind::Signals),
            Some(ThreadKind::Relay),
            Some(ThreadKind::Handler),
            Some(ThreadKind::Worker),
        ] {
            assert!(!compile(kind, arch).unwrap().is_empty());
            for g in lists::groups(kind) {
                assert!(lists::groups(None).iter().any(|p| std::ptr::eq(*p, *g)));
            }
        }
    }

    #[test]
    fn no_list_allows_exec_or_a_new_process() {
        for g in lists::groups(None) {
            for (nr, args, why) in g.iter() {
                assert!(
                    ![
                        libc::SYS_execve,
                        libc::SYS_execveat,
                        libc::SYS_fork,
                        libc::SYS_vfork
                    ]
                    .contains(nr),
                    "{nr} ({why})"
                );
                if *nr == libc::SYS_clone {
                    assert!(
                        matches!(args, lists::Args::HasBits(0, m) if *m == libc::CLONE_THREAD as u64)
                    );
                }
                assert!(!why.is_empty());
            }
        }
    }
}
