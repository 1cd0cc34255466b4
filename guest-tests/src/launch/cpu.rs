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
//!    is skipped. Host busy time comes from the first line of `/proc/stat`.
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

use std::path::Path;

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

fn clk_tck() -> f64 {
    // SAFETY: sysconf only reads a configuration value; no memory is passed.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as f64
    } else {
        100.0
    }
}

/// `(comm) state ... utime stime` -> (comm, seconds). The comm may hold spaces and parens, so
/// the fields are counted from the last `)`.
pub fn parse_stat(text: &str, tck: f64) -> Option<(String, f64)> {
    let open = text.find('(')?;
    let close = text.rfind(')')?;
    let comm = text.get(open + 1..close)?.to_string();
    let rest: Vec<&str> = text.get(close + 1..)?.split_whitespace().collect();
    // rest[0] is field 3 (state); utime and stime are fields 14 and 15.
    let ut: f64 = rest.get(11)?.parse().ok()?;
    let st: f64 = rest.get(12)?.parse().ok()?;
    Some((comm, (ut + st) / tck))
}

/// `/proc/PID/task/TID/schedstat`: first field, ns on CPU.
pub fn parse_schedstat(text: &str) -> Option<f64> {
    text.split_whitespace()
        .next()?
        .parse::<u64>()
        .ok()
        .map(|ns| ns as f64 / 1e9)
}

/// QEMU names its vCPU threads `CPU <n>/TCG` (or `/KVM`).
pub fn is_vcpu(comm: &str) -> bool {
    comm.starts_with("CPU ") && (comm.ends_with("/TCG") || comm.ends_with("/KVM"))
}

/// CPU time of every thread of `pid`, split by [`is_vcpu`].
pub fn proc_cpu(pid: u32) -> Option<ProcCpu> {
    let tck = clk_tck();
    let dir = format!("/proc/{pid}/task");
    let mut out = ProcCpu {
        total_s: std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|s| parse_stat(&s, tck))
            .map_or(0.0, |(_, secs)| secs),
        ..ProcCpu::default()
    };
    for e in std::fs::read_dir(&dir).ok()?.flatten() {
        let t = e.path();
        let Ok(stat) = std::fs::read_to_string(t.join("stat")) else {
            continue;
        };
        let Some((comm, ticks_s)) = parse_stat(&stat, tck) else {
            continue;
        };
        let secs = std::fs::read_to_string(t.join("schedstat"))
            .ok()
            .and_then(|s| parse_schedstat(&s))
            .unwrap_or(ticks_s);
        if is_vcpu(&comm) {
            out.vcpu_s += secs;
            out.vcpu_threads += 1;
        } else {
            out.other_s += secs;
        }
    }
    Some(out)
}

/// `cpu  user nice system idle iowait irq softirq steal ...` -> (busy, steal) seconds: busy is
/// all of the first seven columns but idle and iowait; steal is the eighth (0 when a kernel
/// does not report it).
pub fn parse_proc_stat(text: &str, tck: f64) -> Option<(f64, f64)> {
    let line = text.lines().find(|l| l.starts_with("cpu "))?;
    let v: Vec<f64> = line
        .split_whitespace()
        .skip(1)
        .take(8)
        .map(|x| x.parse().ok())
        .collect::<Option<_>>()?;
    if v.len() < 5 {
        return None;
    }
    let first7 = &v[..v.len().min(7)];
    let busy: f64 = first7.iter().sum::<f64>() - v[3] - v[4];
    let steal = v.get(7).copied().unwrap_or(0.0);
    Some((busy / tck, steal / tck))
}

fn loadavg_1m(root: &Path) -> f64 {
    std::fs::read_to_string(root.join("loadavg"))
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(f64::NAN)
}

/// A snapshot now. `backend` is the external backend's pid, if any.
pub fn sample(qemu: u32, backend: Option<u32>) -> CpuSample {
    let root = Path::new("/proc");
    let (host_busy_s, host_steal_s) = std::fs::read_to_string(root.join("stat"))
        .ok()
        .and_then(|s| parse_proc_stat(&s, clk_tck()))
        .unwrap_or((0.0, 0.0));
    CpuSample {
        qemu: proc_cpu(qemu).unwrap_or_default(),
        backend_s: backend.and_then(proc_cpu).map_or(0.0, |p| p.total()),
        host_busy_s,
        host_steal_s,
        loadavg_1m: loadavg_1m(root),
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
/// while it is listed keeps an empty comm).
pub fn threads(pid: u32) -> Vec<(i32, String)> {
    let Ok(rd) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    rd.flatten()
        .filter_map(|e| {
            let tid = e.file_name().to_str()?.parse::<i32>().ok()?;
            let comm = std::fs::read_to_string(e.path().join("comm")).unwrap_or_default();
            Some((tid, comm.trim().to_string()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_are_counted_from_the_last_paren() {
        let s = "4242 (CPU 3/TCG) S 1 2 3 4 5 6 7 8 9 10 250 50 0 0 20 0 1 0 100 0 0";
        let (comm, secs) = parse_stat(s, 100.0).unwrap();
        assert_eq!(comm, "CPU 3/TCG");
        assert!((secs - 3.0).abs() < 1e-12);
        assert!(is_vcpu(&comm));
        assert!(!is_vcpu("qemu-system-x86"));
        let odd = "7 (a) b (c)) R 1 2 3 4 5 6 7 8 9 10 1 1 0";
        assert_eq!(parse_stat(odd, 100.0).unwrap().0, "a) b (c)");
        assert!(parse_stat("garbage", 100.0).is_none());
        assert_eq!(parse_schedstat("1500000000 20 30\n"), Some(1.5));
    }

    #[test]
    fn window_rates_and_unrelated_load() {
        let stat = "cpu  100 0 50 1000 10 0 0 0 0 0\ncpu0 1 2 3 4 5\n";
        assert_eq!(parse_proc_stat(stat, 100.0), Some((1.5, 0.0)));
        // A host that is itself a VM: steal (column 8) is apart from busy time.
        let vm = "cpu  5695 0 3490 34236 356 0 129 709 0 0\n";
        assert_eq!(parse_proc_stat(vm, 100.0), Some((93.14, 7.09)));
        // An old kernel without the steal column.
        assert_eq!(
            parse_proc_stat("cpu  1 2 3 4 5\n", 100.0),
            Some((0.06, 0.0))
        );
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
        let s = sample(me, Some(me));
        assert!(s.host_busy_s > 0.0);
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
