//! Blocked-thread concurrency: how many irq threads were waiting at the same moment, over the
//! step's window, from `[end - lat, end]` intervals.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::Wait;

/// Time-weighted concurrency of a set of intervals over a window.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Concurrency {
    /// Most intervals open at one moment.
    pub peak: u32,
    /// `share_ge[k-1]`: fraction of the window with at least `k` open (k = 1..=8).
    pub share_ge: Vec<f64>,
}

/// `+1` / `-1` edges of the `[end - lat, end]` intervals clipped to `window`, merged per
/// thread first (a thread is blocked once at a time; the tracing map occasionally pairs a
/// wakeup with an older switch, 19 of 580 D sleeps in the committed fixture, and a merged
/// union never counts one thread twice), sorted with ends before starts at the same instant.
fn edges<'a>(waits: impl IntoIterator<Item = &'a Wait>, window: (u64, u64)) -> Vec<(u64, i32)> {
    let (w0, w1) = window;
    let mut per: BTreeMap<u64, Vec<(u64, u64)>> = BTreeMap::new();
    for w in waits {
        let s = w.end_ns.saturating_sub(w.lat_ns).max(w0);
        let e = w.end_ns.min(w1);
        if e > s {
            per.entry(w.pid).or_default().push((s, e));
        }
    }
    let mut edges = Vec::new();
    for (_, mut v) in per {
        v.sort_unstable();
        let mut cur: Option<(u64, u64)> = None;
        for (s, e) in v {
            cur = match cur {
                Some((cs, ce)) if s <= ce => Some((cs, ce.max(e))),
                Some((cs, ce)) => {
                    edges.push((cs, 1));
                    edges.push((ce, -1));
                    Some((s, e))
                }
                None => Some((s, e)),
            };
        }
        if let Some((cs, ce)) = cur {
            edges.push((cs, 1));
            edges.push((ce, -1));
        }
    }
    edges.sort_by_key(|&(t, d)| (t, d));
    edges
}

/// Time-weighted concurrency of the intervals over `window`.
pub fn concurrency<'a>(
    waits: impl IntoIterator<Item = &'a Wait>,
    window: (u64, u64),
) -> Concurrency {
    let (w0, w1) = window;
    let edges = edges(waits, window);
    let mut level: i32 = 0;
    let mut peak = 0i32;
    let mut at_least = [0u64; 8];
    let mut last = w0;
    for (t, d) in edges {
        if level > 0 {
            for (k, slot) in at_least.iter_mut().enumerate() {
                if level > k as i32 {
                    *slot += t - last;
                }
            }
        }
        last = t;
        level += d;
        peak = peak.max(level);
    }
    let len = w1.saturating_sub(w0).max(1) as f64;
    Concurrency {
        peak: peak.max(0) as u32,
        share_ge: at_least.iter().map(|&n| n as f64 / len).collect(),
    }
}

/// The most intervals open at one moment within each `bin_ns` slice of the window (for the
/// blocked-threads picture).
pub fn peak_per_bin<'a>(
    waits: impl IntoIterator<Item = &'a Wait>,
    window: (u64, u64),
    bin_ns: u64,
) -> Vec<u8> {
    let (w0, w1) = window;
    let bin_ns = bin_ns.max(1);
    let nbins = (w1.saturating_sub(w0)).div_ceil(bin_ns).min(100_000) as usize;
    let edges = edges(waits, window);
    let mut bins = vec![0u8; nbins];
    let mut level = 0i32;
    let bin_of = |t: u64| (((t - w0) / bin_ns) as usize).min(nbins.saturating_sub(1));
    let mut last = w0;
    for (t, d) in edges {
        if level > 0 && nbins > 0 {
            // The level held over [last, t): up to the bin of the last ns before t.
            let upto = bin_of(t.saturating_sub(1).max(last));
            for b in bins.iter_mut().take(upto + 1).skip(bin_of(last)) {
                *b = (*b).max(level.min(255) as u8);
            }
        }
        last = t;
        level += d;
        if level > 0 && nbins > 0 {
            let b = &mut bins[bin_of(t)];
            *b = (*b).max(level.min(255) as u8);
        }
    }
    bins
}
