//! Per-step figures from one `locks.<step>` artefact: per-site sums, concurrency, the
//! blocked-threads timeline, and the flat metrics they give per 1,000 I/Os and per second.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{by_site, concurrency, peak_per_bin, Concurrency, LockWaits, SiteWait, Wait};

/// The lock site seed 000 is about.
pub use crate::metrics::QUEUE_LOCK_SITE;

/// Width of the bins of the blocked-threads picture.
pub const TIMELINE_BIN_MS: u64 = 10;

/// Per-step figures derived from one artefact, normalised by the step's I/Os and seconds.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LockFigures {
    /// Per-site sums (lock waits).
    pub sites: BTreeMap<String, SiteWait>,
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
}

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
            paths,
            d_sleeps: d,
            d_blocked: concurrency(&l.d_waits, w),
            lock_blocked: concurrency(&l.lock_waits, w),
            qlock_blocked: concurrency(q.iter().copied(), w),
            timeline_d: peak_per_bin(&l.d_waits, w, bin),
            timeline_qlock: peak_per_bin(q.iter().copied(), w, bin),
            window_s: l.window_s(),
            consistent: l.consistent(),
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
        let mut m = Vec::new();
        let kio = ios / 1000.0;
        let mut put = |k: &str, v: f64| {
            if v.is_finite() {
                m.push((k.to_string(), v));
            }
        };
        for (p, s) in [("lockwait", self.all()), ("qlock_wait", self.queue_lock())] {
            let ms = s.total_ns as f64 / 1e6;
            put(&format!("{p}_count_per_kio"), s.count as f64 / kio);
            put(&format!("{p}_ms_per_kio"), ms / kio);
            put(&format!("{p}_ms_per_s"), ms / secs);
            put(
                &format!("{p}_mean_us"),
                if s.count > 0 {
                    ms * 1000.0 / s.count as f64
                } else {
                    0.0
                },
            );
            put(&format!("{p}_max_us"), s.max_ns as f64 / 1e3);
        }
        let (all, q) = (self.all(), self.queue_lock());
        put("qlock_wait_share_pct", pct(q.total_ns, all.total_ns));
        put("qlock_contention_share_pct", pct(q.count, all.count));
        put("dsleep_per_kio", self.d_sleeps.count as f64 / kio);
        put(
            "dsleep_ms_per_kio",
            self.d_sleeps.total_ns as f64 / 1e6 / kio,
        );
        put("dblocked_peak", self.d_blocked.peak as f64);
        for (k, share) in self.d_blocked.share_ge.iter().enumerate() {
            put(&format!("dblocked_ge{}_pct", k + 1), share * 100.0);
        }
        put("lockblocked_peak", self.lock_blocked.peak as f64);
        put("qlock_blocked_peak", self.qlock_blocked.peak as f64);
        put(
            "qlock_blocked_ge2_pct",
            self.qlock_blocked.share_ge.get(1).copied().unwrap_or(0.0) * 100.0,
        );
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
