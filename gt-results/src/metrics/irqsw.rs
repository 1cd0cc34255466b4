//! `irqsw.<step>`: the request irq threads' context switches tallied by `prev_state`.
//!
//! Lines: `pid=P comm=C state=S count=N` (one per thread and state),
//! `pid=P comm=C vol_before=N vol_after=N nonvol_before=N nonvol_after=N` (one per thread) and
//! `dropped=N`. On PREEMPT_RT a wait for a sleeping spinlock shows as `D`. Cross-check: for
//! every thread, S + D switches equal the delta of `voluntary_ctxt_switches`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::text::kv_pairs;
use super::MetricsError;

/// One irq thread.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct IrqThread {
    pub pid: u64,
    pub comm: String,
    /// prev_state -> switches.
    pub states: BTreeMap<String, u64>,
    pub voluntary_delta: Option<u64>,
    pub nonvoluntary_delta: Option<u64>,
}

impl IrqThread {
    /// Switches whose state starts with `prefix` (`D`, `S`, `R` ...).
    pub fn in_state(&self, prefix: char) -> u64 {
        self.states
            .iter()
            .filter(|(s, _)| s.starts_with(prefix))
            .map(|(_, n)| *n)
            .sum()
    }

    /// S + D == voluntary delta (None when the thread has no status line).
    pub fn cross_check(&self) -> Option<bool> {
        self.voluntary_delta
            .map(|v| self.in_state('S') + self.in_state('D') == v)
    }
}

/// The whole artefact.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct IrqSwitches {
    /// Keyed by pid.
    pub threads: BTreeMap<u64, IrqThread>,
    /// Ring-buffer overruns reported by ftrace; must be 0 for the counts to be exact.
    pub dropped: Option<u64>,
    pub bad_lines: usize,
    /// `error=<text>` lines: the agent could not trace.
    #[serde(default)]
    pub errors: Vec<String>,
}

impl IrqSwitches {
    pub fn total(&self) -> u64 {
        self.threads.values().flat_map(|t| t.states.values()).sum()
    }

    pub fn in_state(&self, prefix: char) -> u64 {
        self.threads.values().map(|t| t.in_state(prefix)).sum()
    }

    /// prev_state -> switches over all threads.
    pub fn by_state(&self) -> BTreeMap<String, u64> {
        let mut m = BTreeMap::new();
        for t in self.threads.values() {
            for (s, n) in &t.states {
                *m.entry(s.clone()).or_default() += n;
            }
        }
        m
    }

    /// True when every thread with a status line passes its cross-check (and at least one has).
    pub fn cross_check_ok(&self) -> Option<bool> {
        let checks: Vec<bool> = self
            .threads
            .values()
            .filter_map(IrqThread::cross_check)
            .collect();
        (!checks.is_empty()).then(|| checks.iter().all(|&c| c))
    }
}

fn delta(kv: &BTreeMap<&str, &str>, before: &str, after: &str) -> Option<u64> {
    let b: u64 = kv.get(before)?.parse().ok()?;
    let a: u64 = kv.get(after)?.parse().ok()?;
    Some(a.saturating_sub(b))
}

/// Parses an `irqsw.<step>` artefact.
pub fn parse_irqsw(text: &str) -> Result<IrqSwitches, MetricsError> {
    let mut out = IrqSwitches::default();
    let mut any = false;
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        if let Some(e) = line.trim().strip_prefix("error=") {
            out.errors.push(e.chars().take(300).collect());
            continue;
        }
        let kv = kv_pairs(line);
        if let Some(d) = kv.get("dropped") {
            match d.parse::<u64>() {
                Ok(n) => {
                    *out.dropped.get_or_insert(0) += n;
                    any = true;
                }
                Err(_) => out.bad_lines += 1,
            }
            continue;
        }
        let Some(pid) = kv.get("pid").and_then(|p| p.parse::<u64>().ok()) else {
            out.bad_lines += 1;
            continue;
        };
        let comm = kv.get("comm").copied().unwrap_or_default();
        if let (Some(state), Some(count)) = (
            kv.get("state"),
            kv.get("count").and_then(|c| c.parse::<u64>().ok()),
        ) {
            let t = thread(&mut out, pid, comm);
            let e = t.states.entry(state.to_string()).or_default();
            *e = e.saturating_add(count);
            any = true;
        } else if kv.contains_key("vol_before") {
            let vol = delta(&kv, "vol_before", "vol_after");
            let nonvol = delta(&kv, "nonvol_before", "nonvol_after");
            if vol.is_none() {
                out.bad_lines += 1;
                continue;
            }
            let t = thread(&mut out, pid, comm);
            t.voluntary_delta = vol;
            t.nonvoluntary_delta = nonvol;
            any = true;
        } else {
            out.bad_lines += 1;
        }
    }
    if !any {
        return Err(match out.errors.first() {
            Some(e) => MetricsError::Structure(format!("agent: {e}")),
            None => MetricsError::Empty,
        });
    }
    Ok(out)
}

fn thread<'a>(out: &'a mut IrqSwitches, pid: u64, comm: &str) -> &'a mut IrqThread {
    let t = out.threads.entry(pid).or_insert_with(|| IrqThread {
        pid,
        ..Default::default()
    });
    if t.comm.is_empty() {
        t.comm = comm.to_string();
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "pid=301 comm=irq/30-virtio2-request.0 state=S count=120
pid=301 comm=irq/30-virtio2-request.0 state=D count=14
pid=301 comm=irq/30-virtio2-request.0 state=R+ count=3
pid=302 comm=irq/31-virtio2-request.1 state=S count=80
pid=302 comm=irq/31-virtio2-request.1 state=D count=6
pid=301 comm=irq/30-virtio2-request.0 vol_before=1000 vol_after=1134 nonvol_before=5 nonvol_after=8
pid=302 comm=irq/31-virtio2-request.1 vol_before=50 vol_after=136 nonvol_before=0 nonvol_after=0
dropped=0
";

    #[test]
    fn tallies_and_cross_check() {
        let s = parse_irqsw(SAMPLE).unwrap();
        assert_eq!(s.threads.len(), 2);
        assert_eq!(s.in_state('D'), 20);
        assert_eq!(s.in_state('S'), 200);
        assert_eq!(s.total(), 223);
        assert_eq!(s.by_state()["R+"], 3);
        assert_eq!(s.dropped, Some(0));
        assert_eq!(s.threads[&301].voluntary_delta, Some(134));
        assert_eq!(s.threads[&301].nonvoluntary_delta, Some(3));
        assert_eq!(s.threads[&301].comm, "irq/30-virtio2-request.0");
        assert_eq!(s.cross_check_ok(), Some(true));
        assert_eq!(s.bad_lines, 0);
    }

    #[test]
    fn cross_check_mismatch_is_detected() {
        let s = parse_irqsw(&SAMPLE.replace("vol_after=136", "vol_after=140")).unwrap();
        assert_eq!(s.threads[&302].cross_check(), Some(false));
        assert_eq!(s.threads[&301].cross_check(), Some(true));
        assert_eq!(s.cross_check_ok(), Some(false));
    }

    #[test]
    fn odd_lines_are_counted_not_fatal() {
        let s = parse_irqsw("pid=x state=D count=1\npid=4 state=D count=zz\nhello\npid=4 comm=a state=D count=2\ndropped=7\n").unwrap();
        assert_eq!(s.bad_lines, 3);
        assert_eq!(s.in_state('D'), 2);
        assert_eq!(s.dropped, Some(7));
        assert_eq!(s.cross_check_ok(), None);
        assert!(parse_irqsw("").is_err());
        assert_eq!(
            parse_irqsw("error=no request irq threads or no sched_switch event\n"),
            Err(MetricsError::Structure(
                "agent: no request irq threads or no sched_switch event".into()
            ))
        );
        assert!(parse_irqsw("\u{0}\u{1}garbage").is_err());
    }
}
