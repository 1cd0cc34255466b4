//! `locks.<step>`: lock waits and D sleeps of the request irq threads, measured in the guest
//! with in-kernel histograms and two small synthetic events (images/agent/init, `locks_start`).
//!
//! The agent pairs `lock:contention_begin` with `lock:contention_end` per (pid, lock address)
//! into `vb_lockwait(pid, lat ns, stack)`, and a `sched_switch` into D with the thread's next
//! `sched_wakeup` into `vb_dwait(pid, lat ns)`. Both events are summed in hist triggers and also
//! recorded (a few thousand small events, read after fio). The artefact is sections:
//! `## pids P...`, `## comm P NAME`, `## dropped N`, `## clock NAME`, `## ctxsw P k=v...`,
//! `## hist <name>` (a hist file as the kernel prints it), `## trace` (the recorded events and
//! the `vb-window-start` / `vb-window-end` markers), `## end`; `error=<text>` lines anywhere.
//!
//! Contract:
//! 1. The parser never panics on guest text; lines it does not understand are counted in
//!    `bad_lines`, never fatal.
//! 2. Per-site figures come from the recorded events (exact count, total, max); the histogram
//!    totals are kept beside them as a cross-check ([`LockWaits::consistent`]).
//! 3. A wait's interval is `[end - lat, end]` on the trace clock; concurrency is computed over
//!    the window between the two markers, intervals clipped to it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::stacks::lock_site;
use super::MetricsError;

/// Sums for one lock site.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct SiteWait {
    pub count: u64,
    pub total_ns: u64,
    pub max_ns: u64,
}

impl SiteWait {
    fn add(&mut self, ns: u64) {
        self.count += 1;
        self.total_ns = self.total_ns.saturating_add(ns);
        self.max_ns = self.max_ns.max(ns);
    }
}

/// One recorded wait: which thread, when it ended, how long, and (lock waits) where.
#[derive(Debug, Clone, PartialEq)]
pub struct Wait {
    pub pid: u64,
    pub end_ns: u64,
    pub lat_ns: u64,
    /// Lock site (first frame outside the lock slowpath), `None` for D sleeps.
    pub site: Option<String>,
    /// The frame after the site (who took the lock).
    pub caller: Option<String>,
}

/// The parsed artefact.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LockWaits {
    pub pids: Vec<u64>,
    pub comms: BTreeMap<u64, String>,
    pub dropped: u64,
    pub clock: String,
    /// Trace-clock ns of the two markers.
    pub window: Option<(u64, u64)>,
    pub lock_waits: Vec<Wait>,
    pub d_waits: Vec<Wait>,
    /// From the histograms: (hits, sum of lat ns) of vb_lockwait and vb_dwait, and the
    /// number of contention_begin events seen.
    pub hist_lockwait: (u64, u64),
    pub hist_dwait: (u64, u64),
    pub hist_begins: u64,
    /// Voluntary context switches per thread over the window (from /proc/PID/status).
    pub voluntary: BTreeMap<u64, u64>,
    pub errors: Vec<String>,
    pub bad_lines: usize,
}

/// `12.345678:` -> ns.
fn parse_ts(tok: &str) -> Option<u64> {
    let t = tok.trim().trim_end_matches(':');
    let (s, frac) = t.split_once('.')?;
    let s: u64 = s.parse().ok()?;
    if frac.is_empty() || frac.len() > 9 || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let f: u64 = frac.parse().ok()?;
    let scale = 10u64.pow(9 - frac.len() as u32);
    s.checked_mul(1_000_000_000)?.checked_add(f * scale)
}

/// `key=value` fields after the event name.
fn field(rest: &str, key: &str) -> Option<u64> {
    rest.split_whitespace()
        .find_map(|t| t.strip_prefix(key)?.strip_prefix('='))
        .and_then(|v| v.parse().ok())
}

/// Splits a trace line at `: <event>:` -> (timestamp ns, the event's fields).
/// The event name may carry a symbol offset (`tracing_mark_write+0xd7/0x270:` with
/// `options/sym-offset`).
fn event<'a>(line: &'a str, name: &str) -> Option<(Option<u64>, &'a str)> {
    let pat = format!(" {name}");
    let mut from = 0;
    while let Some(j) = line.get(from..)?.find(&pat) {
        let i = from + j;
        let after = &line[i + pat.len()..];
        let tail = if let Some(t) = after.strip_prefix(": ") {
            Some(t)
        } else if after.starts_with('+') {
            after.split_once(": ").map(|(_, t)| t)
        } else {
            None
        };
        if let Some(t) = tail {
            let ts = line[..i].split_whitespace().last().and_then(parse_ts);
            return Some((ts, t));
        }
        from = i + pat.len();
    }
    None
}

/// Totals of a hist file: the sum over entries of `hitcount` and of `lat`.
fn hist_sums(text: &str) -> (u64, u64) {
    let (mut hits, mut lat) = (0u64, 0u64);
    for line in text.lines() {
        let Some(vals) = line.trim_start().strip_prefix('}').or_else(|| {
            // single-line entry: `{ pid: 12 } hitcount: 3 lat: 9`
            let l = line.trim_start();
            l.starts_with('{').then(|| l.split_once('}').map_or("", |(_, r)| r))
        }) else {
            continue;
        };
        let toks: Vec<&str> = vals.split_whitespace().collect();
        for w in toks.windows(2) {
            let v: u64 = w[1].parse().unwrap_or(0);
            match w[0] {
                "hitcount:" => hits = hits.saturating_add(v),
                "lat:" => lat = lat.saturating_add(v),
                _ => {}
            }
        }
    }
    (hits, lat)
}

/// Parses a `locks.<step>` artefact.
pub fn parse_locks(text: &str) -> Result<LockWaits, MetricsError> {
    let mut out = LockWaits::default();
    let mut section = String::new();
    let mut hist: BTreeMap<String, String> = BTreeMap::new();
    let mut pending: Option<(u64, u64, u64, Vec<String>)> = None; // pid, end, lat, frames
    let mut any = false;
    let finish = |p: &mut Option<(u64, u64, u64, Vec<String>)>, out: &mut LockWaits| {
        if let Some((pid, end_ns, lat_ns, frames)) = p.take() {
            let site = lock_site(frames.iter().map(String::as_str)).map(str::to_string);
            let caller = site.as_ref().and_then(|s| {
                let names: Vec<&str> = frames
                    .iter()
                    .map(|f| f.split('+').next().unwrap_or("").split('.').next().unwrap_or(""))
                    .collect();
                let i = names.iter().position(|n| n == s)?;
                names.get(i + 1).map(|c| c.to_string())
            });
            out.lock_waits.push(Wait {
                pid,
                end_ns,
                lat_ns,
                site: Some(site.unwrap_or_else(|| "(unknown)".into())),
                caller,
            });
        }
    };
    for raw in text.lines() {
        let line = raw.trim_end();
        if let Some(e) = line.trim().strip_prefix("error=") {
            out.errors.push(e.to_string());
            any = true;
            continue;
        }
        if let Some(h) = line.strip_prefix("## ") {
            finish(&mut pending, &mut out);
            any = true;
            let mut w = h.split_whitespace();
            let kind = w.next().unwrap_or("");
            match kind {
                "pids" => out.pids = w.filter_map(|p| p.parse().ok()).collect(),
                "comm" => {
                    if let (Some(Ok(p)), Some(c)) = (w.next().map(str::parse), w.next()) {
                        out.comms.insert(p, c.to_string());
                    }
                }
                "dropped" => out.dropped = w.next().and_then(|v| v.parse().ok()).unwrap_or(0),
                "clock" => out.clock = w.next().unwrap_or("").to_string(),
                "ctxsw" => {
                    let pid = w.next().and_then(|p| p.parse().ok());
                    let rest = h.split_once(' ').map_or("", |x| x.1);
                    if let (Some(pid), Some(b), Some(a)) =
                        (pid, field(rest, "vol_before"), field(rest, "vol_after"))
                    {
                        out.voluntary.insert(pid, a.saturating_sub(b));
                    }
                }
                "hist" => {
                    section = format!("hist {}", w.next().unwrap_or(""));
                    continue;
                }
                "trace" | "end" => {}
                _ => out.bad_lines += 1,
            }
            section = kind.to_string();
            continue;
        }
        if let Some(name) = section.strip_prefix("hist ") {
            let e = hist.entry(name.to_string()).or_default();
            e.push_str(line);
            e.push('\n');
            continue;
        }
        if section != "trace" || line.trim().is_empty() {
            continue;
        }
        if let Some(f) = line.trim().strip_prefix("=> ") {
            match pending.as_mut() {
                Some(p) => p.3.push(f.trim().to_string()),
                None => out.bad_lines += 1,
            }
            continue;
        }
        finish(&mut pending, &mut out);
        if let Some((ts, rest)) = event(line, "vb_lockwait") {
            match (ts, field(rest, "pid"), field(rest, "lat")) {
                (Some(end), Some(pid), Some(lat)) => pending = Some((pid, end, lat, Vec::new())),
                _ => out.bad_lines += 1,
            }
        } else if let Some((ts, rest)) = event(line, "vb_dwait") {
            match (ts, field(rest, "pid"), field(rest, "lat")) {
                (Some(end_ns), Some(pid), Some(lat_ns)) => out.d_waits.push(Wait {
                    pid,
                    end_ns,
                    lat_ns,
                    site: None,
                    caller: None,
                }),
                _ => out.bad_lines += 1,
            }
        } else if let Some((ts, rest)) = event(line, "tracing_mark_write") {
            match (rest.trim(), ts) {
                ("vb-window-start", Some(t)) => out.window = Some((t, t)),
                ("vb-window-end", Some(t)) => {
                    if let Some(w) = out.window.as_mut() {
                        w.1 = t;
                    }
                }
                _ => out.bad_lines += 1,
            }
        } else {
            out.bad_lines += 1;
        }
    }
    finish(&mut pending, &mut out);
    if !any {
        return Err(MetricsError::Empty);
    }
    out.hist_lockwait = hist.get("lockwait").map_or((0, 0), |h| {
        // The event has two hists (by stack, by pid): each sums every wait once.
        let (hits, lat) = hist_sums(h);
        (hits / 2, lat / 2)
    });
    out.hist_dwait = hist.get("dwait-pid").map_or((0, 0), |h| hist_sums(h));
    out.hist_begins = hist.get("begin").map_or(0, |h| hist_sums(h).0);
    Ok(out)
}

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
pub fn concurrency<'a>(waits: impl IntoIterator<Item = &'a Wait>, window: (u64, u64)) -> Concurrency {
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

/// Per-site sums of the lock waits.
pub fn by_site(l: &LockWaits) -> BTreeMap<String, SiteWait> {
    let mut m: BTreeMap<String, SiteWait> = BTreeMap::new();
    for w in &l.lock_waits {
        m.entry(w.site.clone().unwrap_or_default())
            .or_default()
            .add(w.lat_ns);
    }
    m
}

impl LockWaits {
    /// The recorded events agree with the histograms and nothing was dropped.
    pub fn consistent(&self) -> bool {
        self.dropped == 0
            && self.hist_lockwait.0 == self.lock_waits.len() as u64
            && self.hist_dwait.0 == self.d_waits.len() as u64
    }

    /// The window length in seconds (0 when the markers are missing).
    pub fn window_s(&self) -> f64 {
        self.window
            .map_or(0.0, |(a, b)| b.saturating_sub(a) as f64 / 1e9)
    }
}

/// The lock site seed 000 is about.
pub use super::stacks::QUEUE_LOCK_SITE;

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
        self.sites.values().fold(SiteWait::default(), |a, s| SiteWait {
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
                if s.count > 0 { ms * 1000.0 / s.count as f64 } else { 0.0 },
            );
            put(&format!("{p}_max_us"), s.max_ns as f64 / 1e3);
        }
        put("dsleep_per_kio", self.d_sleeps.count as f64 / kio);
        put("dsleep_ms_per_kio", self.d_sleeps.total_ns as f64 / 1e6 / kio);
        put("dblocked_peak", self.d_blocked.peak as f64);
        for (k, share) in self.d_blocked.share_ge.iter().enumerate() {
            put(&format!("dblocked_ge{}_pct", k + 1), share * 100.0);
        }
        put("lockblocked_peak", self.lock_blocked.peak as f64);
        put("qlock_blocked_peak", self.qlock_blocked.peak as f64);
        put("qlock_blocked_ge2_pct", self.qlock_blocked.share_ge.get(1).copied().unwrap_or(0.0) * 100.0);
        m
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "## pids 101 102
## comm 101 irq/27-virtio1-req.0
## comm 102 irq/28-virtio1-req.1
## dropped 0
## clock mono
## ctxsw 101 vol_before=10 vol_after=25 nonvol_before=0 nonvol_after=1
## hist lockwait
# event histogram
#
# trigger info: hist:keys=stack.stacktrace:vals=hitcount,lat:sort=hitcount.descending:size=4096 [active]
#

{ stack.stacktrace:
         rt_spin_lock+0x3c/0x60
         blk_mq_run_hw_queue+0x1a/0x140
         blk_mq_run_hw_queues+0x40/0x90
} hitcount:          2  lat:       3000
{ stack.stacktrace:
         rtlock_slowlock_locked+0x1/0x2
         rt_spin_lock+0x3c/0x60
         free_to_partial_list+0x2d/0x130
} hitcount:          1  lat:        500

Totals:
    Hits: 3
    Entries: 2
    Dropped: 0

# event histogram
{ pid:        101 } hitcount:          2  lat:       2500
{ pid:        102 } hitcount:          1  lat:       1000
## hist dwait-pid
{ pid:        101 } hitcount:          1  lat:       4000
## hist begin
{ common_pid:        101, lock_addr: 18446612682 } hitcount:          2
{ common_pid:        102, lock_addr: 18446612690 } hitcount:          1
## trace
            fio-1 [000] .....   10.000000: tracing_mark_write: vb-window-start
 irq/27-virtio1-101 [001] d..2.   10.000002: vb_lockwait: pid=101 lat=1000 stack=STACK:
=> rt_spin_lock+0x3c/0x60
=> blk_mq_run_hw_queue+0x1a/0x140
=> blk_mq_run_hw_queues+0x40/0x90
 irq/28-virtio1-102 [002] d..2.   10.000002: vb_lockwait: pid=102 lat=1500 stack=STACK:
=> rt_spin_lock+0x3c/0x60
=> blk_mq_run_hw_queue+0x1a/0x140
=> blk_mq_run_hw_queues+0x40/0x90
 irq/27-virtio1-101 [001] d..2.   10.000005: vb_lockwait: pid=101 lat=500 stack=STACK:
=> rtlock_slowlock_locked+0x1/0x2
=> rt_spin_lock+0x3c/0x60
=> free_to_partial_list+0x2d/0x130
          <idle>-0 [003] d..2.   10.000009: vb_dwait: pid=101 lat=4000
garbage line
            fio-1 [000] .....   10.000010: tracing_mark_write: vb-window-end
## end
";

    #[test]
    fn parses_sections_events_and_hists() {
        let l = parse_locks(SAMPLE).unwrap();
        assert_eq!(l.pids, vec![101, 102]);
        assert_eq!(l.comms[&102], "irq/28-virtio1-req.1");
        assert_eq!(l.clock, "mono");
        assert_eq!(l.window, Some((10_000_000_000, 10_000_010_000)));
        assert_eq!(l.lock_waits.len(), 3);
        assert_eq!(l.d_waits.len(), 1);
        assert_eq!(l.hist_lockwait, (3, 3500));
        assert_eq!(l.hist_dwait, (1, 4000));
        assert_eq!(l.hist_begins, 3);
        assert_eq!(l.voluntary[&101], 15);
        assert_eq!(l.bad_lines, 1);
        assert!(!l.consistent() || l.lock_waits.len() == 3);
        let s = by_site(&l);
        assert_eq!(s["blk_mq_run_hw_queue"].count, 2);
        assert_eq!(s["blk_mq_run_hw_queue"].total_ns, 2500);
        assert_eq!(s["blk_mq_run_hw_queue"].max_ns, 1500);
        assert_eq!(s["free_to_partial_list"].count, 1);
        assert_eq!(l.lock_waits[0].caller.as_deref(), Some("blk_mq_run_hw_queues"));
        assert!((l.window_s() - 10e-6).abs() < 1e-12);
    }

    #[test]
    fn concurrency_of_overlapping_waits() {
        let l = parse_locks(SAMPLE).unwrap();
        let w = l.window.unwrap();
        // waits: 101 [1000, 2000] (+ [4500, 5000]), 102 [500, 2000] in ns after the start
        let c = concurrency(&l.lock_waits, w);
        assert_eq!(c.peak, 2);
        assert!((c.share_ge[0] - 2000.0 / 10_000.0).abs() < 1e-12);
        assert!((c.share_ge[1] - 1000.0 / 10_000.0).abs() < 1e-12);
        assert_eq!(c.share_ge[2], 0.0);
        let d = concurrency(&l.d_waits, w);
        assert_eq!(d.peak, 1);
        assert!((d.share_ge[0] - 0.4).abs() < 1e-12);
        let bins = peak_per_bin(&l.lock_waits, w, 2500);
        assert_eq!(bins, vec![2, 1, 0, 0]);
    }

    #[test]
    fn touching_intervals_do_not_overlap_and_clipping_holds() {
        let mk = |end_ns, lat_ns| Wait {
            pid: 1,
            end_ns,
            lat_ns,
            site: None,
            caller: None,
        };
        let v = [mk(20, 10), mk(30, 10), mk(200, 50), mk(5, 50)];
        let c = concurrency(&v, (0, 100));
        assert_eq!(c.peak, 1);
        assert!((c.share_ge[0] - 0.25).abs() < 1e-12);
        assert_eq!(concurrency(&[], (5, 5)).peak, 0);
        // One thread's overlapping intervals count once.
        let same = [mk(50, 40), mk(40, 10)];
        assert_eq!(concurrency(&same, (0, 100)).peak, 1);
        assert!((concurrency(&same, (0, 100)).share_ge[0] - 0.4).abs() < 1e-12);
    }

    #[test]
    fn error_only_and_hostile_input_never_panic() {
        let l = parse_locks("error=kernel has no lock/contention_begin event\n").unwrap();
        assert_eq!(l.errors.len(), 1);
        assert!(parse_locks("").is_err());
        for t in [
            "## trace\n=> orphan\n x: vb_lockwait: pid=a lat=1\n 99999999999999999999.1: vb_dwait: pid=1 lat=2\n",
            "## hist lockwait\n} hitcount: x lat: 18446744073709551615\n} hitcount: 18446744073709551615\n",
            "## comm\n## ctxsw\n## pids x y\n## weird\n",
            " 1.0000000001: vb_dwait: pid=1 lat=1\n",
        ] {
            let _ = parse_locks(t);
        }
        assert_eq!(parse_ts("1.5:"), Some(1_500_000_000));
        assert_eq!(parse_ts("12.000001"), Some(12_000_001_000));
        assert_eq!(parse_ts("x.1"), None);
    }

    #[test]
    fn real_guest_artefact() {
        // Captured from an 8-vCPU `rt` guest (6.12.117 PREEMPT_RT, TCG) running the seed-000
        // randread job on vhost-blk's SCSI personality, host under load.
        let dir = format!("{}/tests/fixtures/artifacts/locks", env!("CARGO_MANIFEST_DIR"));
        let l = parse_locks(&std::fs::read_to_string(format!("{dir}/rt.locks")).unwrap()).unwrap();
        assert_eq!(l.pids.len(), 8);
        assert_eq!(l.dropped, 0);
        assert_eq!(l.bad_lines, 0);
        assert_eq!(l.hist_begins, 868);
        assert_eq!(l.lock_waits.len(), 868);
        assert_eq!(l.d_waits.len(), 580);
        assert!(l.consistent());
        let (a, b) = l.window.unwrap();
        assert!(b > a);
        let f = LockFigures::from_waits(&l);
        // The in-kernel histogram, summed by hand over the stacks whose site is the queue_lock:
        // 641 via blk_mq_run_hw_queues (760,862,969 ns) + 5 via __blk_mq_free_request.
        assert_eq!(f.queue_lock().count, 646);
        assert_eq!(f.queue_lock().total_ns, 763_401_958);
        assert_eq!(f.paths["blk_mq_run_hw_queue <- blk_mq_run_hw_queues"], 641);
        assert_eq!(f.paths["blk_mq_run_hw_queue <- __blk_mq_free_request"], 5);
        assert!(f.sites.contains_key("free_to_partial_list"));
        // Only the four irq threads of the queues fio drives contend.
        assert!(f.d_blocked.peak >= 2 && f.d_blocked.peak <= 4, "{:?}", f.d_blocked);
        assert!(f.qlock_blocked.peak >= 2);
        let fio = crate::metrics::parse_fio(&std::fs::read(format!("{dir}/rt.fio.json")).unwrap()).unwrap();
        let m: BTreeMap<String, f64> = f
            .metrics(fio.total_ios() as f64, fio.read.as_ref().unwrap().runtime_ms as f64 / 1e3)
            .into_iter()
            .collect();
        let kio = fio.total_ios() as f64 / 1e3;
        assert!((m["qlock_wait_ms_per_kio"] - 763.401_958 / kio).abs() < 1e-9);
        assert!(m["lockwait_ms_per_kio"] > m["qlock_wait_ms_per_kio"]);
        assert_eq!(m["dblocked_peak"], f.d_blocked.peak as f64);
        assert!(m["dblocked_ge1_pct"] >= m["dblocked_ge2_pct"]);
    }
}
