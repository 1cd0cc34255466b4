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
    /// The lock's address (lock waits recorded with it), named through [`LockWaits::naming`].
    pub lock: Option<u64>,
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
    /// CPU time per thread over the window, clock ticks (utime + stime of /proc/PID/stat,
    /// `## cputime P before=T after=T`).
    pub cpu_ticks: BTreeMap<u64, u64>,
    /// Failed trylocks of the irq threads over the window, per lock address (a return probe
    /// on the kernel's trylock functions, `## hist tryfail` minus `## hist tryfail-base`):
    /// waits the contention tracepoints never see (a trylock loop spins without them).
    pub tryfail: BTreeMap<u64, u64>,
    /// False when the kernel refused the trylock probe (the figures are then missing, not 0).
    pub tryfail_traced: bool,
    pub errors: Vec<String>,
    /// `warning=<text>` lines (e.g. an event that was not enabled at boot).
    pub warnings: Vec<String>,
    /// Cumulative hist totals when the step began (`## base k=v ...`): the triggers live for
    /// the whole boot, so a step's histogram figures are the totals minus these.
    pub base: BTreeMap<String, u64>,
    /// What names a lock by its address (`names`).
    pub naming: LockNaming,
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
            l.starts_with('{')
                .then(|| l.split_once('}').map_or("", |(_, r)| r))
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

/// A `vb_lockwait` event whose stack frames are still being read: pid, end ns, lat ns, lock
/// address, frames.
type Pending = Option<(u64, u64, u64, Option<u64>, Vec<String>)>;

/// The pending lock wait, if any, with its site and caller taken from its frames.
fn finish(p: &mut Pending, out: &mut LockWaits) {
    if let Some((pid, end_ns, lat_ns, lock, frames)) = p.take() {
        let site = lock_site(frames.iter().map(String::as_str)).map(str::to_string);
        let caller = site.as_ref().and_then(|s| {
            let names: Vec<&str> = frames
                .iter()
                .map(|f| {
                    f.split('+')
                        .next()
                        .unwrap_or("")
                        .split('.')
                        .next()
                        .unwrap_or("")
                })
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
            lock,
        });
    }
}

/// Parses a `locks.<step>` artefact.
pub fn parse_locks(text: &str) -> Result<LockWaits, MetricsError> {
    let mut out = LockWaits::default();
    let mut section = String::new();
    let mut hist: BTreeMap<String, String> = BTreeMap::new();
    let mut pending: Pending = None;
    let mut any = false;
    for raw in text.lines() {
        let line = raw.trim_end();
        if let Some(e) = line.trim().strip_prefix("error=") {
            out.errors.push(e.to_string());
            any = true;
            continue;
        }
        if let Some(e) = line.trim().strip_prefix("warning=") {
            out.warnings.push(e.to_string());
            continue;
        }
        if let Some(h) = line.strip_prefix("## ") {
            finish(&mut pending, &mut out);
            any = true;
            section = section_header(h, &mut out);
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
                Some(p) => p.4.push(f.trim().to_string()),
                None => out.bad_lines += 1,
            }
            continue;
        }
        finish(&mut pending, &mut out);
        trace_event(line, &mut pending, &mut out);
    }
    finish(&mut pending, &mut out);
    if !any {
        return Err(MetricsError::Empty);
    }
    hist_totals(&hist, &mut out);
    Ok(out)
}

/// A `## KIND ...` line (`h` is what follows `## `): its fields into `out`; the section it
/// opens (`hist NAME` for a histogram).
fn section_header(h: &str, out: &mut LockWaits) -> String {
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
        "cputime" => {
            let pid = w.next().and_then(|p| p.parse().ok());
            let rest = h.split_once(' ').map_or("", |x| x.1);
            if let (Some(pid), Some(b), Some(a)) =
                (pid, field(rest, "before"), field(rest, "after"))
            {
                out.cpu_ticks.insert(pid, a.saturating_sub(b));
            }
        }
        "base" => {
            for t in w {
                if let Some((k, v)) = t.split_once('=') {
                    if let Ok(v) = v.parse() {
                        out.base.insert(k.to_string(), v);
                    }
                }
            }
        }
        "hist" => return format!("hist {}", w.next().unwrap_or("")),
        "trace" | "end" => {}
        _ => {
            if out.naming.header(kind, w) != Some(true) {
                out.bad_lines += 1;
            }
        }
    }
    kind.to_string()
}

/// One recorded event of the `## trace` section (not a stack frame): a lock wait (pending until
/// its frames are read), a D sleep or a window marker; anything else is a bad line.
fn trace_event(line: &str, pending: &mut Pending, out: &mut LockWaits) {
    if let Some((ts, rest)) = event(line, "vb_lockwait") {
        match (ts, field(rest, "pid"), field(rest, "lat")) {
            (Some(end), Some(pid), Some(lat)) => {
                *pending = Some((pid, end, lat, field(rest, "lock"), Vec::new()))
            }
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
                lock: None,
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

/// The step's histogram totals (rule 2's cross-check): each hist's sums minus the step's base.
fn hist_totals(hist: &BTreeMap<String, String>, out: &mut LockWaits) {
    let base = |k: &str| out.base.get(k).copied().unwrap_or(0);
    let lockwait = hist.get("lockwait").map_or((0, 0), |h| {
        // The event has two hists (by stack, by pid): each sums every wait once.
        let (hits, lat) = hist_sums(h);
        (
            hits.saturating_sub(base("lockwait_hits")) / 2,
            lat.saturating_sub(base("lockwait_lat")) / 2,
        )
    });
    let dwait = hist.get("dwait-pid").map_or((0, 0), |h| {
        let (hits, lat) = hist_sums(h);
        (
            hits.saturating_sub(base("dwait_hits")),
            lat.saturating_sub(base("dwait_lat")),
        )
    });
    let begins = hist
        .get("begin")
        .map_or(0, |h| hist_sums(h).0.saturating_sub(base("begin_hits")));
    out.hist_lockwait = lockwait;
    out.hist_dwait = dwait;
    out.hist_begins = begins;
    if let Some(end) = hist.get("tryfail") {
        out.tryfail_traced = true;
        let before = hist.get("tryfail-base").map(|h| hist_by_key(h, "lock"));
        for (k, n) in hist_by_key(end, "lock") {
            let b = before
                .as_ref()
                .and_then(|m| m.get(&k))
                .copied()
                .unwrap_or(0);
            if n > b {
                out.tryfail.insert(k, n - b);
            }
        }
    }
}

/// Hitcounts of a hist keyed by one field printed in hex (`keys=lock.hex`: the kernel prints
/// `{ lock: ffff888004a3c080 } hitcount: 3`, no `0x`) -> key -> hits; entries that do not parse
/// are skipped.
fn hist_by_key(text: &str, key: &str) -> BTreeMap<u64, u64> {
    let mut m = BTreeMap::new();
    let pat = format!("{key}:");
    for line in text.lines() {
        let Some((k, vals)) = line
            .trim_start()
            .strip_prefix('{')
            .and_then(|l| l.split_once('}'))
        else {
            continue;
        };
        let toks: Vec<&str> = k.split_whitespace().collect();
        let Some(v) = toks
            .windows(2)
            .find(|w| w[0] == pat)
            .map(|w| w[1].trim_end_matches(','))
        else {
            continue;
        };
        let addr = u64::from_str_radix(v.strip_prefix("0x").unwrap_or(v), 16).ok();
        let hits = vals
            .split_whitespace()
            .collect::<Vec<_>>()
            .windows(2)
            .find(|w| w[0] == "hitcount:")
            .and_then(|w| w[1].parse::<u64>().ok());
        if let (Some(a), Some(h)) = (addr, hits) {
            let e = m.entry(a).or_insert(0u64);
            *e = e.saturating_add(h);
        }
    }
    m
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

/// Per-lock sums of the lock waits, each lock named by its address (`names`); waits recorded
/// without an address are left out.
pub fn by_lock(l: &LockWaits) -> BTreeMap<String, SiteWait> {
    let mut m: BTreeMap<String, SiteWait> = BTreeMap::new();
    for w in &l.lock_waits {
        if let Some(a) = w.lock {
            m.entry(l.naming.name(a)).or_default().add(w.lat_ns);
        }
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

mod figures;
mod names;
mod timeline;

pub use names::{LockNaming, QUEUE_LOCK};

pub use figures::{LockFigure, LockFigures, TIMELINE_BIN_MS};
pub use timeline::{concurrency, peak_per_bin, Concurrency};

#[cfg(test)]
mod tests;
