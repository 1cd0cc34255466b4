//! What launch measured on the host (`harness.*`): wall times, how QEMU's threads were placed
//! and scheduled, and where the host's CPU went while the guest ran.

use super::{Better, Derive, Headline, MetricDef};

/// Measured by launch: host wall time from QEMU start to the guest's `disk` artefact.
pub const HARNESS_BOOT_TO_FIO_READY_S: &str = "harness.boot_to_fio_ready_s";
/// Measured by launch: host wall time QEMU ran.
pub const HARNESS_QEMU_WALL_S: &str = "harness.qemu_wall_s";

use Derive::Host;
use Headline::No;

/// The `harness.*` metrics.
pub static HOST_METRICS: &[MetricDef] = &[
    def!(
        HARNESS_BOOT_TO_FIO_READY_S,
        "s",
        Lower,
        "host",
        No,
        "host wall time from QEMU start to the guest's disk report",
        Host(|t, o| if let Some(v) = t.fio_ready_s {
            o.put(v)
        })
    ),
    def!(
        HARNESS_QEMU_WALL_S,
        "s",
        Neither,
        "host",
        No,
        "host wall time QEMU ran",
        Host(|t, o| if let Some(v) = t.qemu_s {
            o.put(v)
        })
    ),
    def!(
        "harness.vcpus_pinned",
        "threads",
        Neither,
        "host",
        No,
        "QEMU vCPU threads pinned to a fixed host CPU (run --pin-vcpus); 0 = the host scheduler placed them",
        Host(|t, o| o.put(t.vcpus_pinned as f64))
    ),
    def!(
        "harness.running_vcpus_per_core",
        "vCPUs",
        Lower,
        "host",
        No,
        "running guest vCPUs per host core they were pinned to (1 = each its own core; launch/placement.rs)",
        Host(|t, o| if let Some(p) = &t.placement {
            o.put(p.vcpus_per_core())
        })
    ),
    def!(
        "harness.vcpu_cores_dedicated",
        "bool",
        Neither,
        "host",
        No,
        "1 when each running vCPU had a host core of its own, the backend and QEMU's own threads kept off them (placement rule 2); 0 when they shared",
        Host(|t, o| if let Some(p) = &t.placement {
            o.put(f64::from(u8::from(p.dedicated)))
        })
    ),
    def!(
        "harness.host_slice_ms",
        "ms",
        Neither,
        "host",
        No,
        "time slice QEMU's threads had on the host: 0.1 with --host-sched short, the SCHED_RR slice with rt, else the fair scheduler's default for the host's CPU count",
        Host(|t, o| if let Some(v) = t.host_slice_ms {
            o.put(v)
        })
    ),
    def!(
        "harness.vcpus_realtime",
        "threads",
        Neither,
        "host",
        No,
        "QEMU vCPU threads under SCHED_RR (run --host-sched rt); 0 = the host's fair scheduler",
        Host(|t, o| o.put(t.vcpus_realtime as f64))
    ),
    def!(
        "harness.qemu_threads_reniced",
        "threads",
        Neither,
        "host",
        No,
        "QEMU threads at nice -19 (run --host-sched nice); 0 = not asked or refused",
        Host(|t, o| o.put(t.threads_reniced as f64))
    ),
    def!(
        "harness.qemu_threads_short_slice",
        "threads",
        Neither,
        "host",
        No,
        "QEMU threads at nice -19 with the fair scheduler's 0.1 ms slice (run --host-sched short, Linux >= 6.12); 0 = not asked or the kernel has no custom slices",
        Host(|t, o| o.put(t.threads_short_slice as f64))
    ),
    def!(
        "harness.host_rr_timeslice_ms",
        "ms",
        Neither,
        "host",
        No,
        "the host's SCHED_RR time slice between vCPU threads on one CPU, when the run was real-time (/proc/sys/kernel/sched_rr_timeslice_ms)",
        Host(|t, o| if let Some(v) = t.rr_timeslice_ms {
            o.put(v)
        })
    ),
    def!(
        "harness.guest_cpu_per_s",
        "CPU-s/s",
        Higher,
        "host /proc",
        No,
        "CPU time QEMU's vCPU threads got per wall second over the whole run",
        Host(|t, o| if let Some(w) = t.cpu_window("qemu-start", "qemu-end") {
            o.put(w.vcpu_per_s)
        })
    ),
    def!(
        "harness.host_steal_cpu_per_s",
        "CPU-s/s",
        Lower,
        "host /proc",
        No,
        "host CPU the hypervisor below this host kept from it per wall second over the whole run (/proc/stat steal)",
        Host(|t, o| if let Some(w) = t.cpu_window("qemu-start", "qemu-end") {
            o.put(w.steal_per_s)
        })
    ),
    def!(
        "harness.host_other_cpu_per_s",
        "CPU-s/s",
        Lower,
        "host /proc",
        No,
        "host CPU busy time not QEMU's or the backend's per wall second over the whole run (unrelated load)",
        Host(|t, o| if let Some(w) = t.cpu_window("qemu-start", "qemu-end") {
            o.put(w.other_load_per_s)
        })
    ),
];
