//! Per-step figures from one `locks.<step>` artefact: per-site sums, concurrency, the
//! blocked-threads timeline, and the flat metrics they give per 1,000 I/Os and per second.
//!
//! Contract:
//! 1. Each flat metric's name suffix is written once, in [`LockFigure`]'s declaration; the
//!    registry (`{step}.<suffix>` via [`LockFigure::pattern`]), compare and report name the
//!    variant, never the text.
//! 2. [`LockFigures::metrics`] gives every figure (the [`LockFigure::DblockedGePct`] family for
//!    each `k` the concurrency has), each under its suffix; a non-finite value is left out.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{
    by_lock, by_site, concurrency, peak_per_bin, Concurrency, LockWaits, SiteWait, Wait, QUEUE_LOCK,
};
use crate::metrics::pattern;

crate::step_figures! {
    /// One flat lock metric of a step, named `{step}.<suffix>` (descriptions and units are the
    /// registry's, `metrics/registry/catalog_locks.rs`).
    LockFigure:
    QlockWaitMsPerKio = "qlock_wait_ms_per_kio",
    QlockWaitMsPerS = "qlock_wait_ms_per_s",
    QlockWaitCountPerKio = "qlock_wait_count_per_kio",
    QlockWaitMeanUs = "qlock_wait_mean_us",
    QlockWaitMaxUs = "qlock_wait_max_us",
    QlockWaitSharePct = "qlock_wait_share_pct",
    QlockContentionSharePct = "qlock_contention_share_pct",
    LockwaitMsPerKio = "lockwait_ms_per_kio",
    LockwaitMsPerS = "lockwait_ms_per_s",
    LockwaitCountPerKio = "lockwait_count_per_kio",
    LockwaitMeanUs = "lockwait_mean_us",
    LockwaitMaxUs = "lockwait_max_us",
    QlockAddrCountPerKio = "qlockaddr_count_per_kio",
    QlockAddrWaitMsPerKio = "qlockaddr_wait_ms_per_kio",
    OtherLocksCountPerKio = "otherlocks_count_per_kio",
    OtherLocksWaitMsPerKio = "otherlocks_wait_ms_per_kio",
    DsleepPerKio = "dsleep_per_kio",
    DsleepMsPerKio = "dsleep_ms_per_kio",
    DblockedPeak = "dblocked_peak",
    DblockedGePct = "dblocked_ge{k}_pct",
    LockblockedPeak = "lockblocked_peak",
    QlockBlockedPeak = "qlock_blocked_peak",
    TryfailPerKio = "tryfail_per_kio",
    QlockAddrTryfailPerKio = "qlockaddr_tryfail_per_kio",
    IrqCpuMsPerKio = "irqcpu_ms_per_kio",
}

impl LockFigure {
    /// The suffix of a family member: `{k}` filled in (`dblocked_ge4_pct`).
    pub fn with_k(self, k: usize) -> String {
        pattern::fill(self.suffix(), &[("k", &k.to_string())])
    }

    /// True when `metric` is member `k` of this family on some step.
    pub fn is_k(self, metric: &str, k: usize) -> bool {
        pattern::ends_in(metric, &self.with_k(k))
    }
}

/// The lock site seed 000 is about.
pub use crate::metrics::QUEUE_LOCK_SITE;

/// Width of the bins of the blocked-threads picture.
pub const TIMELINE_BIN_MS: u64 = 10;

/// Per-step figures derived from one artefact, normalised by the step's I/Os and seconds.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LockFigures {
    /// Per-site sums (lock waits).
    pub sites: BTreeMap<String, SiteWait>,
    /// Per-lock sums, each lock named by its address (`names`); empty when the waits carry no
    /// address (an older agent).
    #[serde(default)]
    pub locks: BTreeMap<String, SiteWait>,
    /// `"<site> <- <caller>"` -> waits.
    pub paths: BTreeMap<String, u64>,
    /// D sleeps of the irq threads (count, total).
    pub d_sleeps: SiteWait,
    /// Concurrency: irq threads in D at once; lock waits at once; queue_lock waits at once.
    pub d_blocked: Concurrency,
    pub lock_blocked: Concurrency,
    pub qlock_blocked: Concurrency,
    /// Peak per [`TIMELINE_BIN_MS`] bin over the window: D-blocked threads, queue_lock waiters.
    pub timeline_d: Vec<u8>,
    pub timeline_qlock: Vec<u8>,
    pub window_s: f64,
    /// Events recorded == histogram hits, nothing dropped.
    pub consistent: bool,
    /// Failed trylocks of the irq threads per lock, named like `locks`; `None` when the kernel
    /// did not let the agent trace them (an older agent, a refused probe).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tryfail: Option<BTreeMap<String, u64>>,
    /// The irq threads' CPU time over the window, clock ticks; `None` when not reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub irq_cpu_ticks: Option<u64>,
}

/// Linux's clock tick as /proc/PID/stat reports it (USER_HZ, 100 on every architecture's ABI
/// the guests run).
pub const USER_HZ: f64 = 100.0;

impl LockFigures {
    pub fn from_waits(l: &LockWaits) -> LockFigures {
        let w = l.window.unwrap_or((0, 0));
        let q: Vec<&Wait> = l
            .lock_waits
            .iter()
            .filter(|x| x.site.as_deref() == Some(QUEUE_LOCK_SITE))
            .collect();
        let mut paths: BTreeMap<String, u64> = BTreeMap::new();
        for x in &l.lock_waits {
            let k = format!(
                "{} <- {}",
                x.site.as_deref().unwrap_or("(unknown)"),
                x.caller.as_deref().unwrap_or("?")
            );
            *paths.entry(k).or_default() += 1;
        }
        let mut d = SiteWait::default();
        for x in &l.d_waits {
            d.add(x.lat_ns);
        }
        let bin = TIMELINE_BIN_MS * 1_000_000;
        LockFigures {
            sites: by_site(l),
            locks: by_lock(l),
            paths,
            d_sleeps: d,
            d_blocked: concurrency(&l.d_waits, w),
            lock_blocked: concurrency(&l.lock_waits, w),
            qlock_blocked: concurrency(q.iter().copied(), w),
            timeline_d: peak_per_bin(&l.d_waits, w, bin),
            timeline_qlock: peak_per_bin(q.iter().copied(), w, bin),
            window_s: l.window_s(),
            consistent: l.consistent(),
            tryfail: l.tryfail_traced.then(|| {
                let mut m: BTreeMap<String, u64> = BTreeMap::new();
                for (a, n) in &l.tryfail {
                    *m.entry(l.naming.name(*a)).or_default() += n;
                }
                m
            }),
            irq_cpu_ticks: (!l.cpu_ticks.is_empty()).then(|| l.cpu_ticks.values().sum()),
        }
    }

    /// All sites together.
    pub fn all(&self) -> SiteWait {
        self.sites
            .values()
            .fold(SiteWait::default(), |a, s| SiteWait {
                count: a.count + s.count,
                total_ns: a.total_ns.saturating_add(s.total_ns),
                max_ns: a.max_ns.max(s.max_ns),
            })
    }

    pub fn queue_lock(&self) -> SiteWait {
        self.sites.get(QUEUE_LOCK_SITE).copied().unwrap_or_default()
    }

    /// `(metric suffix, value)` for a step with `ios` I/Os over `secs` seconds of fio.
    pub fn metrics(&self, ios: f64, secs: f64) -> Vec<(String, f64)> {
        use LockFigure as F;
        let mut m = Vec::new();
        let kio = ios / 1000.0;
        let mut put = |k: String, v: f64| {
            if v.is_finite() {
                m.push((k, v));
            }
        };
        let sums = [
            (
                self.all(),
                [
                    F::LockwaitCountPerKio,
                    F::LockwaitMsPerKio,
                    F::LockwaitMsPerS,
                    F::LockwaitMeanUs,
                    F::LockwaitMaxUs,
                ],
            ),
            (
                self.queue_lock(),
                [
                    F::QlockWaitCountPerKio,
                    F::QlockWaitMsPerKio,
                    F::QlockWaitMsPerS,
                    F::QlockWaitMeanUs,
                    F::QlockWaitMaxUs,
                ],
            ),
        ];
        for (s, [count, ms_kio, ms_s, mean, max]) in sums {
            let ms = s.total_ns as f64 / 1e6;
            put(count.suffix().into(), s.count as f64 / kio);
            put(ms_kio.suffix().into(), ms / kio);
            put(ms_s.suffix().into(), ms / secs);
            put(
                mean.suffix().into(),
                if s.count > 0 {
                    ms * 1000.0 / s.count as f64
                } else {
                    0.0
                },
            );
            put(max.suffix().into(), s.max_ns as f64 / 1e3);
        }
        let (all, q) = (self.all(), self.queue_lock());
        if !self.locks.is_empty() {
            let qa = self.locks.get(QUEUE_LOCK).copied().unwrap_or_default();
            let ms = |s: &SiteWait| s.total_ns as f64 / 1e6 / kio;
            put(
                F::QlockAddrCountPerKio.suffix().into(),
                qa.count as f64 / kio,
            );
            put(F::QlockAddrWaitMsPerKio.suffix().into(), ms(&qa));
            let rest = all.count.saturating_sub(qa.count);
            put(F::OtherLocksCountPerKio.suffix().into(), rest as f64 / kio);
            let rest_ns = all.total_ns.saturating_sub(qa.total_ns);
            put(
                F::OtherLocksWaitMsPerKio.suffix().into(),
                rest_ns as f64 / 1e6 / kio,
            );
        }
        for (k, v) in self.spin_figures(kio) {
            put(k, v);
        }
        let mut fig = |f: F, v: f64| put(f.suffix().into(), v);
        fig(F::QlockWaitSharePct, pct(q.total_ns, all.total_ns));
        fig(F::QlockContentionSharePct, pct(q.count, all.count));
        fig(F::DsleepPerKio, self.d_sleeps.count as f64 / kio);
        fig(F::DsleepMsPerKio, self.d_sleeps.total_ns as f64 / 1e6 / kio);
        fig(F::DblockedPeak, self.d_blocked.peak as f64);
        fig(F::LockblockedPeak, self.lock_blocked.peak as f64);
        fig(F::QlockBlockedPeak, self.qlock_blocked.peak as f64);
        for (k, share) in self.d_blocked.share_ge.iter().enumerate() {
            put(F::DblockedGePct.with_k(k + 1), share * 100.0);
        }
        m
    }
}

impl LockFigures {
    /// The waits the contention tracepoints miss, per 1,000 I/Os: failed trylocks (all locks,
    /// and the queue_lock by address) and the irq threads' CPU time; none when not traced.
    fn spin_figures(&self, kio: f64) -> Vec<(String, f64)> {
        use LockFigure as F;
        let mut m = Vec::new();
        if let Some(t) = &self.tryfail {
            let all = t.values().sum::<u64>() as f64;
            m.push((F::TryfailPerKio.suffix().into(), all / kio));
            let q = t.get(QUEUE_LOCK).copied().unwrap_or(0) as f64;
            m.push((F::QlockAddrTryfailPerKio.suffix().into(), q / kio));
        }
        if let Some(t) = self.irq_cpu_ticks {
            let ms = t as f64 * 1000.0 / USER_HZ;
            m.push((F::IrqCpuMsPerKio.suffix().into(), ms / kio));
        }
        m
    }
}

/// `100 * part / whole`; 0 when there was nothing at all (no contention: none on queue_lock).
fn pct(part: u64, whole: u64) -> f64 {
    if whole > 0 {
        100.0 * part as f64 / whole as f64
    } else {
        0.0
    }
}
