//! What a run's artefacts said, per step and about the guest: the typed input of the metric
//! registry ([`super::registry`]). Stored in results.json (`steps`, `guest`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{
    FioSummary, InterruptCounts, IrqSwitches, LockFigures, LockSites, Rescan, ScanTimes, Storm,
    Verify,
};
use gt_launch::cpu::CpuWindow;

crate::step_figures! {
    /// Step metrics that rooms besides the registry name (the verdict's companions): fio's
    /// IOPS and what the host gave the guest during the step (`begin.`/`end.` marks).
    StepFigure:
    Iops = "iops",
    GuestCpuPerS = "guest_cpu_per_s",
    BackendCpuPerS = "backend_cpu_per_s",
    HostOtherCpuPerS = "host_other_cpu_per_s",
    HostStealCpuPerS = "host_steal_cpu_per_s",
}

/// One step the agent ran, with what its artefacts said.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct StepResult {
    /// As the agent names it: `1-randread.fio`.
    pub label: String,
    /// Metric prefix: `randread`.
    pub name: String,
    pub rc: Option<i64>,
    pub secs: Option<f64>,
    pub fio: Option<FioSummary>,
    /// Per-vector interrupt deltas over the step.
    pub interrupts: Option<InterruptCounts>,
    pub irq_switches: Option<IrqSwitches>,
    pub lock_sites: Option<LockSites>,
    pub funcs: Option<BTreeMap<String, u64>>,
    /// Lock waits and D sleeps of the request irq threads (`locks.<step>`).
    pub locks: Option<LockFigures>,
    /// What the host gave the guest between the step's begin and end marks.
    pub host_cpu: Option<CpuWindow>,
    /// What a quiesce storm step did (`storm.<step>`).
    pub storm: Option<Storm>,
}

/// What the guest reported about itself and its disk.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct GuestInfo {
    pub meta: BTreeMap<String, String>,
    pub disk: BTreeMap<String, String>,
    pub scan: Option<ScanTimes>,
    pub rescans: Vec<Rescan>,
    pub verify: Option<Verify>,
}
