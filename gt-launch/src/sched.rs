//! Real-time host scheduling of a run's processes (`run --host-sched rt`): the guest is given
//! priority over whatever else the host runs (a kernel build on a developer's workstation), as
//! cyclictest is, so that unrelated load takes CPU from itself and not from the measurement.
//!
//! Contract:
//! 1. Only threads of the run's own children are changed (QEMU's and the external backend's,
//!    found under `/proc/PID/task`); the harness and the rest of the host keep their policy.
//! 2. The backend's threads get `SCHED_FIFO` [`BACKEND_FIFO`], QEMU's threads that are not
//!    vCPUs (main loop: interrupt injection, chardevs, timers) `SCHED_FIFO` [`QEMU_FIFO`], and
//!    QEMU's vCPU threads `SCHED_RR` [`VCPU_RR`]: a woken backend worker or main loop preempts
//!    a running vCPU at once (as a wake-up does under the fair scheduler), and vCPU threads
//!    that share a host CPU take turns every `sched_rr_timeslice_ms` (a host setting, read into
//!    the run's metrics by [`rr_timeslice_ms`]; this module never changes it).
//! 3. Threads created after a call inherit their creator's policy; callers repeat the call
//!    while a process may still create threads (QEMU's vCPU threads are created by its main
//!    thread, FIFO by then, and are moved to RR on the next call). Calls are idempotent.
//! 4. The kernel's real-time throttling (`sched_rt_runtime_us`, by default 95 % of each CPU)
//!    stays in force: the fair class keeps at least 5 %, so a busy guest cannot lock up the
//!    host. A thread that cannot be changed (EPERM without CAP_SYS_NICE, a real-time cgroup
//!    without runtime) is counted as not changed; nothing fails.
//! 5. `--host-sched nice` keeps the fair scheduler but gives every thread of QEMU and the
//!    backend nice [`NICE`]: a weight about 70 times a nice-0 thread's, so that unrelated
//!    nice-0 load gets a small share while wake-up preemption and slices stay the fair
//!    scheduler's ([`renice`]).
//! 6. `--host-sched short` is rule 5 plus the shortest slice the fair scheduler (EEVDF, Linux
//!    6.12 and later) lets a thread ask for, [`SHORT_SLICE_NS`], on every thread of QEMU and the
//!    backend (`sched_setattr` with `sched_runtime`; [`short_slice`]). Two vCPU threads that
//!    share a host CPU then take turns every 0.1 ms instead of every few ms (the default slice
//!    is 0.7 ms times 1 + log2(CPUs)), so a guest lock holder whose vCPU thread was preempted
//!    on the host is back sooner. A thread counts only when reading its attributes back shows
//!    the slice: a kernel without custom slices accepts the call and ignores the runtime.

use super::cpu::threads;

/// Priority of the backend's threads (SCHED_FIFO).
pub const BACKEND_FIFO: i32 = 3;
/// Priority of QEMU's threads that are not vCPUs (SCHED_FIFO).
pub const QEMU_FIFO: i32 = 2;
/// Priority of QEMU's vCPU threads (SCHED_RR).
pub const VCPU_RR: i32 = 1;
/// Nice value of every thread of QEMU and the backend under `--host-sched nice` (rule 5).
pub const NICE: i32 = -19;

/// Rule 5: every thread of `pid` to nice [`NICE`]. Returns how many threads have it.
pub fn renice(pid: u32) -> usize {
    threads(pid)
        .into_iter()
        .filter(|(tid, _)| {
            // SAFETY: setpriority takes plain integers; on Linux PRIO_PROCESS with a tid sets
            // that thread's nice value (a stale tid fails with ESRCH).
            unsafe { libc::setpriority(libc::PRIO_PROCESS, *tid as libc::id_t, NICE) == 0 }
        })
        .count()
}

/// The slice every thread asks for under `--host-sched short` (rule 6): EEVDF's minimum.
pub const SHORT_SLICE_NS: u64 = 100_000;

/// `struct sched_attr` as far as `SCHED_ATTR_SIZE_VER0` (48 bytes; the kernel accepts any
/// size it knows and zero-fills the rest).
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
struct SchedAttr {
    size: u32,
    sched_policy: u32,
    sched_flags: u64,
    sched_nice: i32,
    sched_priority: u32,
    sched_runtime: u64,
    sched_deadline: u64,
    sched_period: u64,
}

/// The fair-class slice (ns) of `tid` as the kernel reports it (`sched_getattr`'s
/// `sched_runtime`: the custom slice on Linux >= 6.12, 0 on older kernels), None when the
/// thread is gone.
pub fn thread_slice_ns(tid: i32) -> Option<u64> {
    let mut a = SchedAttr::default();
    let size = std::mem::size_of::<SchedAttr>() as libc::c_uint;
    // SAFETY: sched_getattr writes at most `size` bytes into `a`, a repr(C) struct of that
    // size on this stack; tid is a plain integer (a stale tid fails with ESRCH).
    let r = unsafe {
        libc::syscall(
            libc::SYS_sched_getattr,
            tid,
            &mut a as *mut SchedAttr,
            size,
            0,
        )
    };
    (r == 0).then_some(a.sched_runtime)
}

/// Rule 6 on one thread: SCHED_OTHER at nice [`NICE`] with slice [`SHORT_SLICE_NS`]; true
/// when the kernel reports the slice afterwards.
fn set_short_slice(tid: i32) -> bool {
    if thread_slice_ns(tid) == Some(SHORT_SLICE_NS) {
        return true;
    }
    let a = SchedAttr {
        size: std::mem::size_of::<SchedAttr>() as u32,
        sched_policy: libc::SCHED_OTHER as u32,
        sched_nice: NICE,
        sched_runtime: SHORT_SLICE_NS,
        ..SchedAttr::default()
    };
    // SAFETY: sched_setattr reads `a.size` bytes from `a`, a repr(C) struct of that size on
    // this stack; tid is a thread of a child process of ours (a stale tid fails with ESRCH).
    let r = unsafe { libc::syscall(libc::SYS_sched_setattr, tid, &a as *const SchedAttr, 0) };
    r == 0 && thread_slice_ns(tid) == Some(SHORT_SLICE_NS)
}

/// Rule 6: every thread of `pid` to nice [`NICE`] with slice [`SHORT_SLICE_NS`]. Returns how
/// many threads have the slice.
pub fn short_slice(pid: u32) -> usize {
    threads(pid)
        .into_iter()
        .filter(|(tid, _)| set_short_slice(*tid))
        .count()
}

/// Sets `policy` / `prio` on one thread; false when refused or the thread is gone.
fn set_thread(tid: i32, policy: i32, prio: i32) -> bool {
    // SAFETY: sched_getscheduler takes a tid and nothing else.
    let current = unsafe { libc::sched_getscheduler(tid) };
    let param = libc::sched_param {
        sched_priority: prio,
    };
    if current == policy {
        let mut now = libc::sched_param { sched_priority: 0 };
        // SAFETY: sched_getparam writes one sched_param into `now`, which lives on this stack.
        if unsafe { libc::sched_getparam(tid, &mut now) } == 0 && now.sched_priority == prio {
            return true;
        }
    }
    // SAFETY: sched_setscheduler reads one sched_param from `param`, which lives on this
    // stack; tid is a thread of a child process of ours (a stale tid fails with ESRCH).
    unsafe { libc::sched_setscheduler(tid, policy, &param) == 0 }
}

/// Rule 2 for the backend: every thread of `pid` to SCHED_FIFO [`BACKEND_FIFO`]. Returns how
/// many threads have it.
pub fn backend_realtime(pid: u32) -> usize {
    threads(pid)
        .into_iter()
        .filter(|(tid, _)| set_thread(*tid, libc::SCHED_FIFO, BACKEND_FIFO))
        .count()
}

/// Rule 2 for QEMU: vCPU threads to SCHED_RR [`VCPU_RR`], the others to SCHED_FIFO
/// [`QEMU_FIFO`]. Returns how many vCPU threads are real-time.
pub fn qemu_realtime(pid: u32) -> usize {
    let mut vcpus = 0;
    for (tid, comm) in threads(pid) {
        if super::cpu::is_vcpu(&comm) {
            vcpus += usize::from(set_thread(tid, libc::SCHED_RR, VCPU_RR));
        } else {
            set_thread(tid, libc::SCHED_FIFO, QEMU_FIFO);
        }
    }
    vcpus
}

/// The host's round-robin time slice, ms (`/proc/sys/kernel/sched_rr_timeslice_ms`).
pub fn rr_timeslice_ms() -> Option<f64> {
    std::fs::read_to_string("/proc/sys/kernel/sched_rr_timeslice_ms")
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// The fair scheduler's default base slice, ns (EEVDF: `sysctl_sched_base_slice`).
const FAIR_BASE_SLICE_NS: u64 = 750_000;

/// The time slice QEMU's threads had on the host, ms: the short slice when the kernel took it
/// (rule 6), the SCHED_RR slice under `rt` (rule 2), else the fair scheduler's default slice for
/// `host_cpus` CPUs: the base slice x (1 + log2 min(CPUs, 8)) (the real value sits in the
/// host's debugfs, which is usually not mounted).
pub fn slice_ms(kind: HostSched, short_threads: u32, rr_ms: Option<f64>, host_cpus: usize) -> f64 {
    match kind {
        HostSched::Short if short_threads > 0 => SHORT_SLICE_NS as f64 / 1e6,
        HostSched::Realtime if rr_ms.is_some() => rr_ms.unwrap_or_default(),
        _ => {
            let factor = 1 + host_cpus.clamp(1, 8).ilog2();
            (FAIR_BASE_SLICE_NS * u64::from(factor)) as f64 / 1e6
        }
    }
}

/// How a run's processes are scheduled on the host.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HostSched {
    /// The host's default (the fair scheduler).
    #[default]
    Normal,
    /// Rule 2.
    Realtime,
    /// Rule 5.
    Nice,
    /// Rule 6.
    Short,
}

impl std::str::FromStr for HostSched {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "normal" => Ok(HostSched::Normal),
            "rt" => Ok(HostSched::Realtime),
            "nice" => Ok(HostSched::Nice),
            "short" => Ok(HostSched::Short),
            o => Err(format!(
                "unknown --host-sched '{o}' (known: normal, rt, nice, short)"
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_slice_a_run_had() {
        assert_eq!(slice_ms(HostSched::Short, 12, None, 2), 0.1);
        // A kernel without custom slices ignored the request: the default for 2 CPUs.
        assert_eq!(slice_ms(HostSched::Short, 0, None, 2), 1.5);
        assert_eq!(slice_ms(HostSched::Realtime, 0, Some(100.0), 2), 100.0);
        assert_eq!(slice_ms(HostSched::Normal, 0, None, 1), 0.75);
        assert_eq!(slice_ms(HostSched::Nice, 0, None, 64), 3.0);
    }

    #[test]
    fn names_parse_and_a_process_without_vcpus_has_none() {
        assert_eq!("rt".parse::<HostSched>(), Ok(HostSched::Realtime));
        assert_eq!("normal".parse::<HostSched>(), Ok(HostSched::Normal));
        assert_eq!("nice".parse::<HostSched>(), Ok(HostSched::Nice));
        assert!("fifo"
            .parse::<HostSched>()
            .unwrap_err()
            .contains("known: normal, rt, nice, short"));
        assert_eq!("short".parse::<HostSched>(), Ok(HostSched::Short));
        assert!(rr_timeslice_ms().unwrap_or(1.0) > 0.0);
        assert_eq!(threads(u32::MAX).len(), 0);
    }

    /// A real child made real-time and its threads counted (skipped where the host refuses
    /// real-time policies to this process).
    #[test]
    fn a_child_gets_fifo() {
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        let pid = child.id();
        let n = backend_realtime(pid);
        if n > 0 {
            // SAFETY: sched_getscheduler takes a pid and nothing else.
            let policy = unsafe { libc::sched_getscheduler(pid as i32) };
            assert_eq!(policy, libc::SCHED_FIFO);
            assert_eq!(backend_realtime(pid), n, "idempotent");
        }
        assert_eq!(qemu_realtime(pid), 0, "sleep has no vCPU threads");
        if renice(pid) > 0 {
            // SAFETY: getpriority takes plain integers.
            let nice = unsafe { libc::getpriority(libc::PRIO_PROCESS, pid as libc::id_t) };
            assert_eq!(nice, NICE);
        }
        child.kill().unwrap();
        child.wait().unwrap();
    }

    /// Rule 6 on a real child: where the kernel has custom slices (Linux >= 6.12) the child
    /// reads back the 0.1 ms slice at nice -19; elsewhere nothing is counted.
    #[test]
    fn a_child_gets_the_short_slice_where_the_kernel_has_it() {
        assert_eq!(std::mem::size_of::<SchedAttr>(), 48, "SCHED_ATTR_SIZE_VER0");
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        let pid = child.id();
        let before = thread_slice_ns(pid as i32);
        assert!(before.is_some(), "a live thread has attributes");
        let n = short_slice(pid);
        if n > 0 {
            assert_eq!(n, 1, "sleep has one thread");
            assert_eq!(thread_slice_ns(pid as i32), Some(SHORT_SLICE_NS));
            // SAFETY: getpriority takes plain integers.
            let nice = unsafe { libc::getpriority(libc::PRIO_PROCESS, pid as libc::id_t) };
            assert_eq!(nice, NICE);
            assert_eq!(short_slice(pid), 1, "idempotent");
        } else {
            assert_ne!(thread_slice_ns(pid as i32), Some(SHORT_SLICE_NS));
        }
        child.kill().unwrap();
        child.wait().unwrap();
        assert_eq!(short_slice(u32::MAX), 0, "no such process");
    }
}
