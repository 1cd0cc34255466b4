//! The seccomp allow-lists, in one place: each entry is a system call, the arguments it may
//! take, and who needs it (docs/sandbox.md renders the same reasons per thread).
//!
//! Lists are groups of entries; a thread kind's filter allows the union of its groups
//! ([`groups`]), the process filter every group. A call allowed unconditionally in one group
//! is allowed with any arguments in the union; conditions of one call in several groups are
//! alternatives.
//!
//! Entries were found with `strace -f` on the backend serving vhost-blk-bench (both
//! personalities, 4, 8 and 126/128 queues, file, write-log, direct, memory and null storage,
//! the latency model, SIGUSR1, two connections, SIGTERM) and QEMU guests (the booted tests),
//! and by reading the code of the rare paths (inflight areas, write log, socket removal).

use super::ThreadKind;

/// The arguments an entry allows.
#[derive(Debug, Clone, Copy)]
pub(super) enum Args {
    /// Any.
    Any,
    /// Argument `i` (a 32-bit value) is one of the given values.
    OneOf(u8, &'static [u64]),
    /// Argument `i` has every bit of the mask set.
    HasBits(u8, u64),
}

/// One allowed call: number, arguments, who needs it.
pub(super) type Entry = (i64, Args, &'static str);

use Args::{Any, HasBits, OneOf};

// Block-device ioctls a file backend may use on a block-device image (<linux/fs.h>).
const BLKSSZGET: u64 = 0x1268;
const BLKDISCARD: u64 = 0x1277;
const BLKPBSZGET: u64 = 0x127b;
const BLKSECDISCARD: u64 = 0x127d;
const BLKZEROOUT: u64 = 0x127f;
const BLKGETSIZE64: u64 = 0x8008_1272;
const FIONBIO: u64 = 0x5421;
const FIOCLEX: u64 = 0x5451;
/// `ioctl` requests allowed (argument 1).
const IOCTLS: &[u64] = &[
    BLKSSZGET,
    BLKDISCARD,
    BLKPBSZGET,
    BLKSECDISCARD,
    BLKZEROOUT,
    BLKGETSIZE64,
    FIONBIO,
    FIOCLEX,
];

/// Every thread: memory, locks, time, its own exit, logging, the SIGSYS handler's calls.
pub(super) const COMMON: &[Entry] = &[
    (
        libc::SYS_read,
        Any,
        "eventfds (kick, exit, resume, timer), sockets, fdinfo",
    ),
    (
        libc::SYS_write,
        Any,
        "the log on stderr; eventfds (call, resume, exit)",
    ),
    (
        libc::SYS_writev,
        Any,
        "the log on stderr (std's vectored writes)",
    ),
    (
        libc::SYS_close,
        Any,
        "descriptors of a connection, a ring or a message",
    ),
    (
        libc::SYS_fcntl,
        OneOf(1, &[libc::F_GETFD as u64, libc::F_GETFL as u64]),
        "std's debug builds check a descriptor is open before closing it",
    ),
    (libc::SYS_brk, Any, "malloc, main arena"),
    (
        libc::SYS_mmap,
        Any,
        "malloc, thread arenas; guest memory and inflight areas",
    ),
    (
        libc::SYS_munmap,
        Any,
        "free; guest memory regions removed; thread stacks",
    ),
    (libc::SYS_mremap, Any, "realloc of large buffers"),
    (
        libc::SYS_mprotect,
        Any,
        "malloc growing a thread arena; thread guard pages",
    ),
    (
        libc::SYS_madvise,
        Any,
        "free trimming; a thread's stack at exit",
    ),
    (
        libc::SYS_futex,
        Any,
        "mutexes and condition variables of every queue and the relay",
    ),
    (
        libc::SYS_sched_yield,
        Any,
        "the completion timer's short spin; spin locks",
    ),
    (
        libc::SYS_sched_getaffinity,
        Any,
        "std and glibc at thread start",
    ),
    (libc::SYS_clock_gettime, Any, "time (vDSO fallback)"),
    (
        libc::SYS_clock_nanosleep,
        Any,
        "sleeps (std::thread::sleep)",
    ),
    (libc::SYS_nanosleep, Any, "sleeps"),
    (
        libc::SYS_getrandom,
        Any,
        "a thread's RNG seed (latency model, socket names)",
    ),
    (
        libc::SYS_rt_sigprocmask,
        Any,
        "glibc around thread start and exit",
    ),
    (libc::SYS_rt_sigreturn, Any, "return from a signal handler"),
    (
        libc::SYS_sigaltstack,
        Any,
        "std's stack-overflow guard per thread",
    ),
    (
        libc::SYS_getpid,
        Any,
        "the SIGSYS handler; temporary file names",
    ),
    (libc::SYS_gettid, Any, "the SIGSYS handler; glibc"),
    (
        libc::SYS_tgkill,
        OneOf(2, &[libc::SIGSYS as u64, libc::SIGABRT as u64]),
        "the SIGSYS handler re-raises SIGSYS; abort() raises SIGABRT",
    ),
    (
        libc::SYS_prctl,
        OneOf(0, &[libc::PR_SET_NAME as u64, libc::PR_GET_NAME as u64]),
        "thread names (std at thread start; the SIGSYS handler reads it)",
    ),
    (libc::SYS_exit, Any, "a thread ends"),
    (libc::SYS_exit_group, Any, "the process ends"),
];

/// The image, the RAM disk and the write log: what the requests of a queue do.
pub(super) const STORAGE: &[Entry] = &[
    (
        libc::SYS_preadv,
        Any,
        "reads into guest memory (file, memfd)",
    ),
    (
        libc::SYS_pwritev,
        Any,
        "writes from guest memory; the write log",
    ),
    (
        libc::SYS_preadv2,
        Any,
        "reads with flags (storage layer, reserved)",
    ),
    (
        libc::SYS_pwritev2,
        Any,
        "writes with flags, RWF_DSYNC (storage layer, reserved)",
    ),
    (
        libc::SYS_pread64,
        Any,
        "read-modify-write of unaligned O_DIRECT requests",
    ),
    (
        libc::SYS_pwrite64,
        Any,
        "read-modify-write; zero fill; the write log",
    ),
    (libc::SYS_readv, Any, "vectored reads (reserved)"),
    (libc::SYS_lseek, Any, "the write log's end"),
    (
        libc::SYS_fdatasync,
        Any,
        "FLUSH / SYNCHRONIZE CACHE; writethrough; the write log",
    ),
    (
        libc::SYS_fsync,
        Any,
        "flush of a file whose metadata changed",
    ),
    (
        libc::SYS_sync_file_range,
        Any,
        "write-back hints (storage layer, reserved)",
    ),
    (
        libc::SYS_fallocate,
        Any,
        "DISCARD / UNMAP (punch hole), WRITE ZEROES",
    ),
    (libc::SYS_fstat, Any, "a file's size"),
    (libc::SYS_newfstatat, Any, "a file's size (glibc fstat)"),
    (libc::SYS_statx, Any, "a file's size (std metadata)"),
    (
        libc::SYS_flock,
        Any,
        "image locking (storage layer, reserved)",
    ),
    (
        libc::SYS_fadvise64,
        Any,
        "access-pattern hints (storage layer, reserved)",
    ),
    (
        libc::SYS_fstatfs,
        Any,
        "the image's file system, e.g. O_DIRECT alignment (reserved)",
    ),
    (
        libc::SYS_ioctl,
        OneOf(1, IOCTLS),
        "block-device images: size, sector sizes, discard, zero-out; FIONBIO, FIOCLEX",
    ),
];

/// A queue worker's event loop (vhost-user-backend's and vhost-blk's own threads).
pub(super) const WORKER: &[Entry] = &[
    (libc::SYS_epoll_wait, Any, "the worker's event loop"),
    (
        libc::SYS_epoll_pwait,
        Any,
        "the worker's event loop (glibc variant)",
    ),
    (libc::SYS_epoll_ctl, Any, "a worker's listeners"),
    (
        libc::SYS_timerfd_settime,
        Any,
        "completion deadlines (the latency model)",
    ),
    (libc::SYS_timerfd_gettime, Any, "completion deadlines"),
];

/// vhost-user messages: the relay's two threads and vhost-user-backend's handler thread.
pub(super) const VHOST_USER: &[Entry] = &[
    (
        libc::SYS_recvmsg,
        Any,
        "messages and the descriptors sent with them",
    ),
    (libc::SYS_sendmsg, Any, "messages and descriptors passed on"),
    (libc::SYS_recvfrom, Any, "message payloads"),
    (libc::SYS_sendto, Any, "message payloads"),
    (
        libc::SYS_shutdown,
        Any,
        "either side closing closes the other",
    ),
    (
        libc::SYS_epoll_ctl,
        Any,
        "kick eventfds into a worker's epoll (SET_VRING_KICK)",
    ),
    (
        libc::SYS_fstat,
        Any,
        "a memory region's or inflight area's size",
    ),
    (
        libc::SYS_newfstatat,
        Any,
        "a memory region's or inflight area's size",
    ),
    (
        libc::SYS_statx,
        Any,
        "an inflight area's size (std metadata)",
    ),
    (libc::SYS_fcntl, Any, "descriptor flags of received fds"),
    (
        libc::SYS_fdatasync,
        Any,
        "a cache-mode switch to writethrough (config space)",
    ),
    (
        libc::SYS_fsync,
        Any,
        "a cache-mode switch to writethrough (config space)",
    ),
];

/// The relay answers GET_INFLIGHT_FD itself (docs/restart.md).
pub(super) const RELAY: &[Entry] = &[
    (
        libc::SYS_memfd_create,
        Any,
        "GET_INFLIGHT_FD: a new inflight area",
    ),
    (libc::SYS_ftruncate, Any, "GET_INFLIGHT_FD: the area's size"),
];

/// The signal thread: SIGINT/SIGTERM, SIGUSR1's statistics file and stall report.
pub(super) const SIGNALS: &[Entry] = &[
    (libc::SYS_rt_sigtimedwait, Any, "sigwait"),
    (
        libc::SYS_openat,
        Any,
        "the statistics file's temporary (Landlock: its folder only)",
    ),
    (
        libc::SYS_fsync,
        Any,
        "the statistics file on stable storage",
    ),
    (
        libc::SYS_rename,
        Any,
        "the statistics file replaced atomically",
    ),
    (
        libc::SYS_renameat,
        Any,
        "the statistics file replaced atomically",
    ),
    (
        libc::SYS_renameat2,
        Any,
        "the statistics file replaced atomically",
    ),
    (
        libc::SYS_unlink,
        Any,
        "a failed statistics temporary removed",
    ),
    (
        libc::SYS_unlinkat,
        Any,
        "a failed statistics temporary removed",
    ),
    (libc::SYS_fstat, Any, "std's file writes"),
    (libc::SYS_statx, Any, "std's file writes"),
    (
        libc::SYS_socket,
        OneOf(0, &[libc::AF_UNIX as u64]),
        "SIGTERM while waiting in accept: a connection of its own wakes the listener",
    ),
    (
        libc::SYS_connect,
        Any,
        "SIGTERM while waiting in accept (the listener's socket)",
    ),
    (
        libc::SYS_shutdown,
        Any,
        "SIGTERM: the connection's shutdown handle closes its socket",
    ),
];

/// The main thread, which every thread of a connection inherits its filter from: the
/// listener, each connection's set-up, and the way out.
pub(super) const MAIN: &[Entry] = &[
    (libc::SYS_accept4, Any, "the next frontend connection"),
    (libc::SYS_accept, Any, "the next frontend connection"),
    (
        libc::SYS_socket,
        OneOf(0, &[libc::AF_UNIX as u64]),
        "the private connection to vhost-user-backend's handler (abstract address)",
    ),
    (libc::SYS_bind, Any, "the private connection's listener"),
    (libc::SYS_listen, Any, "the private connection's listener"),
    (libc::SYS_connect, Any, "the private connection"),
    (
        libc::SYS_eventfd2,
        Any,
        "per connection: exit, resume and kick eventfds",
    ),
    (
        libc::SYS_timerfd_create,
        Any,
        "per connection: each queue's completion timer",
    ),
    (
        libc::SYS_epoll_create1,
        Any,
        "per connection: each worker's epoll",
    ),
    (
        libc::SYS_fcntl,
        Any,
        "F_DUPFD_CLOEXEC (vmm-sys-util try_clone)",
    ),
    (
        libc::SYS_openat,
        Any,
        "/proc/self/fdinfo (device::exit_events); the statistics file",
    ),
    (libc::SYS_unlink, Any, "the socket removed at exit"),
    (libc::SYS_rename, Any, "the statistics file at exit"),
    (
        libc::SYS_clone,
        HasBits(0, libc::CLONE_THREAD as u64),
        "threads of each connection (never a process: CLONE_THREAD required)",
    ),
    (
        libc::SYS_clone3,
        Any,
        "glibc's first try (the ENOSYS filter answers it, rule 4)",
    ),
    (libc::SYS_set_robust_list, Any, "a new thread (glibc)"),
    (
        libc::SYS_rt_sigaction,
        OneOf(0, &[32, 33]),
        "glibc's first thread start installs its internal SIGCANCEL/SIGSETXID handlers (never SIGSYS's)",
    ),
    (libc::SYS_rseq, Any, "a new thread (glibc)"),
    (
        libc::SYS_seccomp,
        OneOf(0, &[libc::SECCOMP_SET_MODE_FILTER as u64]),
        "a thread stacks its kind's narrower filter (only ever narrower)",
    ),
    (
        libc::SYS_prctl,
        OneOf(0, &[libc::PR_SET_NO_NEW_PRIVS as u64]),
        "seccompiler sets it again before each filter",
    ),
];

/// Let through this kind's filter so that the EACCES filter stacked under it answers them
/// (the parent's rule 3: seccomp returns the most severe action of a thread's filters, and a
/// trap outranks an error).
pub(super) const OPEN_REFUSED: &[Entry] = &[
    (
        libc::SYS_openat,
        Any,
        "answered EACCES: glibc's malloc reads the CPU count at a new arena",
    ),
    (libc::SYS_open, Any, "answered EACCES"),
];

/// The groups a thread kind's filter allows.
pub(super) fn groups(kind: Option<ThreadKind>) -> &'static [&'static [Entry]] {
    match kind {
        // The process filter: every thread starts under it.
        None | Some(ThreadKind::Main) => &[
            COMMON,
            STORAGE,
            WORKER,
            VHOST_USER,
            RELAY,
            SIGNALS,
            MAIN,
            OPEN_REFUSED,
        ],
        Some(ThreadKind::Signals) => &[COMMON, SIGNALS],
        Some(ThreadKind::Relay) => &[COMMON, VHOST_USER, RELAY, OPEN_REFUSED],
        Some(ThreadKind::Handler) => &[COMMON, VHOST_USER, OPEN_REFUSED],
        Some(ThreadKind::Worker) => &[COMMON, STORAGE, WORKER, OPEN_REFUSED],
    }
}
