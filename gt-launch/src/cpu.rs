//! What the guest really got from the host: CPU time of QEMU's vCPU threads, of QEMU's other
//! threads and of the backend, and the whole host's busy time, sampled from /proc so that a run
//! whose guest was starved by unrelated load can be seen and flagged.
//!
//! Contract:
//! 1. A sample is a plain snapshot of counters; [`CpuWindow::between`] turns two snapshots and
//!    the wall time between them into per-second rates. Nothing here sleeps or keeps state.
//! 2. A thread is a vCPU when its comm is QEMU's `CPU <n>/TCG` or `CPU <n>/KVM`.
//! 3. Per-thread CPU time comes from `/proc/PID/task/TID/schedstat` (ns), falling back to
//!    utime + stime of `stat` (clock ticks); a thread that exits between the listing and the read
//!    is skipped. Host busy time comes from the `cpu` line of `/proc/stat`. The procfs crate
//!    reads and parses these files; this module only adds them up.
//! 5. When the host is itself a virtual machine, `/proc/stat`'s steal column is CPU time the
//!    host wanted and its hypervisor gave to someone else. It is counted apart
//!    ([`CpuWindow::steal_per_s`]) and is not unrelated load on this host: a guest can lose
//!    CPU to it with no other process running here.
//! 4. A process's total also comes from `/proc/PID/stat`, which keeps the time of threads that
//!    have exited (QEMU's vCPU threads end before QEMU does): a window charges the process the
//!    larger of that total and the sum over its live threads, so a guest's last seconds are not
//!    counted as unrelated load. When vCPU threads have gone by the window's end, the
//!    process's growth not seen on its live non-vCPU threads is charged to the vCPUs (an upper
//!    bound: the time of QEMU's other exited threads lands there too).

use procfs::process::{Process, Schedstat, Stat};
use procfs::{CurrentSI, KernelStats};
use serde::{Deserialize, Serialize};

/// CPU seconds of one process, split into vCPU threads and the rest.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct ProcCpu {
    pub vcpu_s: f64,
    pub other_s: f64,
    pub vcpu_threads: u32,
    /// utime + stime of the whole process, exited threads included (rule 4).
    #[serde(default)]
    pub total_s: f64,
}

impl ProcCpu {
    /// The process's CPU seconds (rule 4).
    pub fn total(&self) -> f64 {
        self.total_s.max(self.vcpu_s + self.other_s)
    }
}

/// One snapshot: QEMU, the backend (if external), the host.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct CpuSample {
    pub qemu: ProcCpu,
    pub backend_s: f64,
    /// Host CPU seconds not idle (all CPUs, from /proc/stat), steal excluded.
    pub host_busy_s: f64,
    /// Host CPU seconds stolen by the hypervisor below this host (rule 5).
    #[serde(default)]
    pub host_steal_s: f64,
    /// 1-minute load average at the sample.
    pub loadavg_1m: f64,
}

/// Rates over a window between two samples, in CPU-seconds per wall second.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct CpuWindow {
    pub wall_s: f64,
    pub vcpu_per_s: f64,
    pub qemu_other_per_s: f64,
    pub backend_per_s: f64,
    /// Host busy time not accounted to QEMU or the backend: the unrelated load.
    pub other_load_per_s: f64,
    /// CPU-seconds per second the hypervisor below this host kept from it (rule 5).
    #[serde(default)]
    pub steal_per_s: f64,
    pub loadavg_start: f64,
    pub loadavg_end: f64,
}

impl CpuWindow {
    pub fn between(a: &CpuSample, b: &CpuSample, wall_s: f64) -> Option<CpuWindow> {
        if wall_s.is_nan() || wall_s <= 0.0 {
            return None;
        }
        let r = |x: f64, y: f64| ((y - x) / wall_s).max(0.0);
        let qother = r(a.qemu.other_s, b.qemu.other_s);
        let mut vcpu = r(a.qemu.vcpu_s, b.qemu.vcpu_s);
        let qemu = r(a.qemu.total(), b.qemu.total()).max(vcpu + qother);
        if b.qemu.vcpu_threads < a.qemu.vcpu_threads {
            vcpu = vcpu.max(qemu - qother);
        }
        let backend = r(a.backend_s, b.backend_s);
        let host = r(a.host_busy_s, b.host_busy_s);
        Some(CpuWindow {
            wall_s,
            vcpu_per_s: vcpu,
            qemu_other_per_s: qother,
            backend_per_s: backend,
            other_load_per_s: (host - qemu - backend).max(0.0),
            steal_per_s: r(a.host_steal_s, b.host_steal_s),
            loadavg_start: a.loadavg_1m,
            loadavg_end: b.loadavg_1m,
        })
    }
}

/// utime + stime of a process's or thread's `stat`, in seconds (`tck`: clock ticks per second).
pub fn stat_secs(stat: &Stat, tck: u64) -> f64 {
    (stat.utime + stat.stime) as f64 / tck as f64
}

/// Schedstat's time on CPU (ns), in seconds.
pub fn schedstat_secs(s: &Schedstat) -> f64 {
    s.sum_exec_runtime as f64 / 1e9
}

/// QEMU names its vCPU threads `CPU <n>/TCG` (or `/KVM`).
pub fn is_vcpu(comm: &str) -> bool {
    comm.starts_with("CPU ") && (comm.ends_with("/TCG") || comm.ends_with("/KVM"))
}

/// CPU time of every thread of `pid`, split by [`is_vcpu`] (rules 3 and 4).
pub fn proc_cpu(pid: u32) -> Option<ProcCpu> {
    let tck = procfs::ticks_per_second();
    let p = Process::new(i32::try_from(pid).ok()?).ok()?;
    let mut out = ProcCpu {
        total_s: p.stat().map_or(0.0, |s| stat_secs(&s, tck)),
        ..ProcCpu::default()
    };
    for t in p.tasks().ok()?.flatten() {
        let Ok(stat) = t.stat() else {
            continue;
        };
        let secs = t
            .schedstat()
            .map_or_else(|_| stat_secs(&stat, tck), |s| schedstat_secs(&s));
        if is_vcpu(&stat.comm) {
            out.vcpu_s += secs;
            out.vcpu_threads += 1;
        } else {
            out.other_s += secs;
        }
    }
    Some(out)
}

/// `/proc/stat`'s `cpu` line -> (busy, steal) seconds: busy is user + nice + system + irq +
/// softirq (idle and iowait are not busy; guest time is already inside user); steal is 0 when a
/// kernel does not report it.
pub fn host_busy_steal(k: &KernelStats, tck: u64) -> (f64, f64) {
    let t = &k.total;
    let busy = t.user + t.nice + t.system + t.irq.unwrap_or(0) + t.softirq.unwrap_or(0);
    (
        busy as f64 / tck as f64,
        t.steal.unwrap_or(0) as f64 / tck as f64,
    )
}

/// A snapshot now. `backend` is the external backend's pid, if any.
pub fn sample(qemu: u32, backend: Option<u32>) -> CpuSample {
    let (host_busy_s, host_steal_s) = KernelStats::current().map_or((0.0, 0.0), |k| {
        host_busy_steal(&k, procfs::ticks_per_second())
    });
    CpuSample {
        qemu: proc_cpu(qemu).unwrap_or_default(),
        backend_s: backend.and_then(proc_cpu).map_or(0.0, |p| p.total()),
        host_busy_s,
        host_steal_s,
        loadavg_1m: super::host::loadavg().map_or(f64::NAN, |l| l[0]),
    }
}

/// The host CPUs this process may run on, in order.
pub fn allowed_cpus() -> Vec<usize> {
    // SAFETY: cpu_set_t is plain data; sched_getaffinity writes at most size_of::<cpu_set_t>()
    // bytes into it and CPU_ISSET only reads it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return vec![0];
        }
        (0..libc::CPU_SETSIZE as usize)
            .filter(|&c| libc::CPU_ISSET(c, &set))
            .collect()
    }
}

/// `CPU 3/TCG` -> 3.
pub fn vcpu_index(comm: &str) -> Option<usize> {
    is_vcpu(comm).then(|| comm[4..].split('/').next()?.parse().ok())?
}

/// Every thread of `pid` with its comm (empty when the process is gone; a thread that exits
/// while it is listed is left out, or keeps an empty comm when it went after being opened).
pub fn threads(pid: u32) -> Vec<(i32, String)> {
    let Some(tasks) = i32::try_from(pid)
        .ok()
        .and_then(|pid| Process::new(pid).ok()?.tasks().ok())
    else {
        return Vec::new();
    };
    tasks
        .flatten()
        .map(|t| (t.tid, t.stat().map(|s| s.comm).unwrap_or_default()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A real `/proc/PID/task/TID/stat` line of a QEMU vCPU thread, utime 250 and stime 50.
    const VCPU_STAT: &str = "4242 (CPU 3/TCG) S 1 4230 4230 0 -1 4194624 152 0 0 0 250 50 0 0 \
        20 0 9 0 8802 1474355200 52741 18446744073709551615 1 1 0 0 0 0 0 4096 17636 0 0 0 -1 \
        1 0 0 0 0 0 0 0 0 0 0 0 0 0\n";

    fn kernel_stats(text: &str) -> KernelStats {
        let si = procfs::ExplicitSystemInfo {
            boot_time_secs: 1,
            ticks_per_second: 100,
            page_size: 4096,
            is_little_endian: true,
        };
        let full = format!("{text}ctxt 1\nbtime 1\nprocesses 1\n");
        <KernelStats as procfs::FromReadSI>::from_read(full.as_bytes(), &si).unwrap()
    }

    #[test]
    fn stat_times_and_comm_from_the_last_paren() {
        use procfs::FromRead;
        let st = Stat::from_read(VCPU_STAT.as_bytes()).unwrap();
        assert_eq!(st.comm, "CPU 3/TCG");
        assert!((stat_secs(&st, 100) - 3.0).abs() < 1e-12);
        assert!((stat_secs(&st, 250) - 1.2).abs() < 1e-12);
        assert!(is_vcpu(&st.comm));
        assert!(!is_vcpu("qemu-system-x86"));
        // A comm holding spaces and parens: the fields are counted from the last `)`.
        let odd = VCPU_STAT.replace("(CPU 3/TCG)", "(a) b (c))");
        let st = Stat::from_read(odd.as_bytes()).unwrap();
        assert_eq!(st.comm, "a) b (c)");
        assert!((stat_secs(&st, 100) - 3.0).abs() < 1e-12);
        assert!(Stat::from_read("garbage".as_bytes()).is_err());
        let ss = Schedstat::from_read("1500000000 20 30\n".as_bytes()).unwrap();
        assert_eq!(schedstat_secs(&ss), 1.5);
    }

    #[test]
    fn window_rates_and_unrelated_load() {
        let stat = kernel_stats("cpu  100 0 50 1000 10 0 0 0 0 0\ncpu0 1 2 3 4 5\n");
        assert_eq!(host_busy_steal(&stat, 100), (1.5, 0.0));
        // A host that is itself a VM: steal (column 8) is apart from busy time.
        let vm = kernel_stats("cpu  5695 0 3490 34236 356 0 129 709 0 0\n");
        assert_eq!(host_busy_steal(&vm, 100), (93.14, 7.09));
        // An old kernel without the steal column.
        let old = kernel_stats("cpu  1 2 3 4 5\n");
        assert_eq!(host_busy_steal(&old, 100), (0.06, 0.0));
        let a = CpuSample {
            qemu: ProcCpu {
                vcpu_s: 10.0,
                other_s: 1.0,
                vcpu_threads: 8,
                total_s: 0.0,
            },
            backend_s: 2.0,
            host_busy_s: 20.0,
            host_steal_s: 3.0,
            loadavg_1m: 1.0,
        };
        let mut b = a;
        b.qemu.vcpu_s = 25.0;
        b.qemu.other_s = 2.0;
        b.backend_s = 4.0;
        b.host_busy_s = 48.0;
        b.host_steal_s = 5.5;
        b.loadavg_1m = 3.0;
        let w = CpuWindow::between(&a, &b, 10.0).unwrap();
        assert!((w.steal_per_s - 0.25).abs() < 1e-12);
        assert!((w.vcpu_per_s - 1.5).abs() < 1e-12);
        assert!((w.backend_per_s - 0.2).abs() < 1e-12);
        assert!((w.other_load_per_s - (2.8 - 1.5 - 0.1 - 0.2)).abs() < 1e-12);
        assert!(CpuWindow::between(&a, &b, 0.0).is_none());

        // The vCPU threads exited before the last sample: their time is still in the process
        // total, and is not taken for unrelated load.
        let mut c = b;
        c.qemu.vcpu_s = 0.0;
        c.qemu.vcpu_threads = 0;
        c.qemu.total_s = 27.0;
        let mut a2 = a;
        a2.qemu.total_s = 11.0;
        let w = CpuWindow::between(&a2, &c, 10.0).unwrap();
        assert!(
            (w.other_load_per_s - (2.8 - 1.6 - 0.2)).abs() < 1e-12,
            "{w:?}"
        );
        assert!((w.vcpu_per_s - 1.5).abs() < 1e-12, "{w:?}");
    }

    #[test]
    fn samples_this_process() {
        let me = std::process::id();
        let p = proc_cpu(me).unwrap();
        assert_eq!(p.vcpu_threads, 0);
        // This test binary runs its tests on threads of its own.
        let ts = threads(me);
        assert!(ts.iter().any(|(tid, _)| *tid == me as i32), "{ts:?}");
        assert!(ts.iter().all(|(_, comm)| !comm.is_empty()), "{ts:?}");
        let s = sample(me, Some(me));
        assert!(s.host_busy_s > 0.0);
        assert!(s.loadavg_1m >= 0.0);
        assert!(threads(u32::MAX).is_empty());
        assert!(proc_cpu(u32::MAX).is_none());
    }

    #[test]
    fn vcpu_indices_and_allowed_cpus() {
        assert_eq!(vcpu_index("CPU 7/TCG"), Some(7));
        assert_eq!(vcpu_index("CPU 12/KVM"), Some(12));
        assert_eq!(vcpu_index("CPU x/TCG"), None);
        assert_eq!(vcpu_index("worker"), None);
        assert!(!allowed_cpus().is_empty());
        let p = super::super::placement::Placement::plan(&[0], 1, None);
        assert_eq!(
            super::super::placement::pin_vcpus(std::process::id(), &p),
            0
        );
    }
}
