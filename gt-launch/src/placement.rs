//! Where a guest's threads run on the host: each running vCPU on a host core of its own when
//! the host has enough cores, else the running vCPUs spread over the cores there are.
//!
//! Rules:
//! 1. The running vCPUs are QEMU's vCPU threads `CPU k/TCG` with k < `running` (Linux brings
//!    up CPUs 0..running-1 under `maxcpus=`); the others stay halted and need no core.
//! 2. Dedicated when the host CPUs this process may use number at least `running` +
//!    [`RESERVED_CORES`] (one core for the backend's workers, one for QEMU's own threads: the
//!    main loop injects every interrupt under TCG): running vCPU k gets `cpus[k]` alone, and
//!    the backend, QEMU's other threads and the halted vCPUs share the CPUs after them.
//! 3. Otherwise shared: vCPU k on `cpus[k mod n]` (the same in every boot); the backend and
//!    QEMU's other threads go where the host scheduler puts them.
//! 4. A paired run's slot (`--vcpu-placement split`) puts every vCPU of the guest on
//!    `cpus[slot mod n]` (shared).
//! 5. [`Placement::plan`] is pure (CPU list and counts in, plan out); [`apply_others`] and
//!    [`pin_vcpus`] carry it out on live threads.

use super::cpu::{threads, vcpu_index};

/// Pins each vCPU thread `k` of QEMU process `pid` to the host CPU the placement gives it (the
/// same in every boot). Returns how many vCPU threads are pinned.
pub fn pin_vcpus(pid: u32, p: &Placement) -> usize {
    threads(pid)
        .into_iter()
        .filter_map(|(tid, comm)| Some((tid, p.cpu_of_vcpu(vcpu_index(&comm)?)?)))
        .filter(|&(tid, cpu)| set_affinity(tid, &[cpu]))
        .count()
}

/// Host cores a dedicated placement keeps for the backend and QEMU's own threads (rule 2).
pub const RESERVED_CORES: usize = 2;

/// A placement plan (see the module rules).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    /// Rule 2 holds: each running vCPU has a host core of its own.
    pub dedicated: bool,
    /// Running vCPUs (rule 1).
    pub running: usize,
    /// Host CPU of vCPU k is `vcpu_cpus[k mod len]`.
    pub vcpu_cpus: Vec<usize>,
    /// Dedicated only: where the backend, QEMU's other threads and halted vCPUs run.
    pub other_cpus: Vec<usize>,
    /// Host CPUs the running vCPUs share (rules 2-4).
    pub vcpu_cores: usize,
}

impl Placement {
    /// The plan for `running` vCPUs on host CPUs `cpus` (rules 2-4).
    pub fn plan(cpus: &[usize], running: usize, slot: Option<u32>) -> Placement {
        let running = running.max(1);
        if let Some(j) = slot.filter(|_| !cpus.is_empty()) {
            let cpu = cpus[j as usize % cpus.len()];
            return Placement {
                dedicated: false,
                running,
                vcpu_cpus: vec![cpu],
                other_cpus: Vec::new(),
                vcpu_cores: 1,
            };
        }
        if cpus.len() >= running + RESERVED_CORES {
            return Placement {
                dedicated: true,
                running,
                vcpu_cpus: cpus[..running].to_vec(),
                other_cpus: cpus[running..].to_vec(),
                vcpu_cores: running,
            };
        }
        Placement {
            dedicated: false,
            running,
            vcpu_cpus: cpus.to_vec(),
            other_cpus: Vec::new(),
            vcpu_cores: running.min(cpus.len()).max(1),
        }
    }

    /// The host CPU of vCPU `k` (rules 1-4); None when there are no CPUs to place on.
    pub fn cpu_of_vcpu(&self, k: usize) -> Option<usize> {
        if self.dedicated && k >= self.running {
            return self
                .other_cpus
                .get(k % self.other_cpus.len().max(1))
                .copied();
        }
        if self.vcpu_cpus.is_empty() {
            return None;
        }
        Some(self.vcpu_cpus[k % self.vcpu_cpus.len()])
    }

    /// Running vCPUs per host core they run on.
    pub fn vcpus_per_core(&self) -> f64 {
        self.running as f64 / self.vcpu_cores.max(1) as f64
    }

    /// One line for logs and reports.
    pub fn describe(&self) -> String {
        if self.dedicated {
            format!(
                "dedicated: {} running vCPUs on host CPUs {:?}, one each; backend and QEMU's own threads on {:?}",
                self.running, self.vcpu_cpus, self.other_cpus
            )
        } else {
            format!(
                "shared: {} running vCPUs on {} host CPU(s) ({:.1} per core), with the backend and QEMU's own threads",
                self.running,
                self.vcpu_cores,
                self.vcpus_per_core()
            )
        }
    }
}

/// Sets the CPU affinity of thread `tid` to `cpus`; false when refused or `cpus` is empty.
pub fn set_affinity(tid: i32, cpus: &[usize]) -> bool {
    if cpus.is_empty() {
        return false;
    }
    // SAFETY: cpu_set_t is plain data; CPU_SET writes one bit inside it for each CPU (all below
    // CPU_SETSIZE, checked), and sched_setaffinity reads size_of::<cpu_set_t>() bytes of it.
    // tid is a thread of a child process of ours; a stale tid fails with ESRCH, returned false.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for &c in cpus {
            if c >= libc::CPU_SETSIZE as usize {
                return false;
            }
            libc::CPU_SET(c, &mut set);
        }
        libc::sched_setaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0
    }
}

/// Rule 2 on live threads: every thread of `pid` that is not a running vCPU goes to
/// `p.other_cpus`. Returns how many threads were moved; 0 for a shared placement.
pub fn apply_others(pid: u32, p: &Placement) -> usize {
    if !p.dedicated {
        return 0;
    }
    threads(pid)
        .into_iter()
        .filter(|(_, comm)| super::cpu::vcpu_index(comm).is_none_or(|k| k >= p.running))
        .filter(|(tid, _)| set_affinity(*tid, &p.other_cpus))
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_big_host_gives_each_running_vcpu_a_core_and_keeps_two_for_the_rest() {
        let cpus: Vec<usize> = (0..8).collect();
        let p = Placement::plan(&cpus, 4, None);
        assert!(p.dedicated);
        assert_eq!(p.vcpu_cpus, [0, 1, 2, 3]);
        assert_eq!(p.other_cpus, [4, 5, 6, 7]);
        assert_eq!((p.cpu_of_vcpu(0), p.cpu_of_vcpu(3)), (Some(0), Some(3)));
        // Halted vCPUs (offline guest CPUs) go with the backend, not onto a vCPU's core.
        assert_eq!(p.cpu_of_vcpu(4), Some(4));
        assert_eq!(p.cpu_of_vcpu(61), Some(5));
        assert!((p.vcpus_per_core() - 1.0).abs() < 1e-12);
        assert!(p.describe().starts_with("dedicated"));
        // Exactly enough: running + 2.
        assert!(Placement::plan(&[3, 5, 7, 9], 2, None).dedicated);
        assert_eq!(Placement::plan(&[3, 5, 7, 9], 2, None).vcpu_cpus, [3, 5]);
    }

    #[test]
    fn a_small_host_shares_its_cores() {
        // This project's 2-core machines: 2 running vCPUs, one per core, shared with the rest.
        let p = Placement::plan(&[0, 1], 2, None);
        assert!(!p.dedicated);
        assert_eq!((p.cpu_of_vcpu(0), p.cpu_of_vcpu(1)), (Some(0), Some(1)));
        assert_eq!(p.cpu_of_vcpu(2), Some(0));
        assert!((p.vcpus_per_core() - 1.0).abs() < 1e-12);
        // 8 running vCPUs on 2 cores: 4 per core.
        let p = Placement::plan(&[0, 1], 8, None);
        assert!((p.vcpus_per_core() - 4.0).abs() < 1e-12);
        assert!(p.describe().contains("4.0 per core"), "{}", p.describe());
        // One short of dedicated.
        assert!(!Placement::plan(&[0, 1, 2, 3, 4], 4, None).dedicated);
    }

    #[test]
    fn a_paired_slot_and_an_empty_cpu_list() {
        let p = Placement::plan(&(0..16).collect::<Vec<_>>(), 2, Some(5));
        assert!(!p.dedicated);
        assert_eq!((p.cpu_of_vcpu(0), p.cpu_of_vcpu(1)), (Some(5), Some(5)));
        assert!((p.vcpus_per_core() - 2.0).abs() < 1e-12);
        let e = Placement::plan(&[], 2, None);
        assert_eq!(e.cpu_of_vcpu(0), None);
        assert!(!set_affinity(0, &[]));
    }
}
