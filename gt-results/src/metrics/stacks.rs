//! `dstacks.<step>`: kernel stacks of the irq threads' switches into D, grouped by lock site.
//!
//! A block is `count=<n>` followed by one frame per line (`symbol+0xoff/0xlen`, optionally
//! prefixed by `=>` or an address in brackets, optionally suffixed by ` [module]`); blocks are
//! separated by blank lines. The lock site of a stack is its first frame that is not part of the
//! scheduler, of the tracing machinery or of a sleeping-lock slowpath: the frames whose symbol
//! starts with one of [`SLOWPATH_PREFIXES`]. For `rt_spin_lock` called from
//! `blk_mq_run_hw_queue`, the site is `blk_mq_run_hw_queue`: the `q->queue_lock` of seed 000.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::MetricsError;

/// The lock site that seed 000 removes.
pub const QUEUE_LOCK_SITE: &str = "blk_mq_run_hw_queue";

/// Frames skipped when looking for the lock site (prefix match on the symbol).
pub const SLOWPATH_PREFIXES: &[&str] = &[
    // scheduler
    "__schedule",
    "schedule",
    "preempt_schedule",
    "io_schedule",
    // PREEMPT_RT sleeping locks (spinlock_t, rwlock_t, local_lock) and rt_mutex
    "rtlock_",
    "rt_spin_",
    "rt_read_",
    "rt_write_",
    "rt_mutex",
    "__rt_mutex",
    "rwbase_",
    "_raw_spin_",
    "_raw_read_",
    "_raw_write_",
    "try_to_take_rt_mutex",
    "task_blocks_on_rt_mutex",
    // mutexes, rw semaphores
    "mutex_lock",
    "__mutex_lock",
    "down_read",
    "down_write",
    "rwsem_down_",
    "__down",
    // tracing (the stack trigger's own frames)
    "stack_trace_",
    "__traceiter_",
    "trace_",
    "__trace_",
    "ftrace_",
    "event_trigger",
    "event_hist_trigger",
    "perf_trace_",
];

/// D switches by lock site.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LockSites {
    /// Site -> D switches (stacks with no site left after skipping are under `(unknown)`).
    pub sites: BTreeMap<String, u64>,
    pub stacks: usize,
    pub bad_blocks: usize,
    /// `"<site> <- <caller>"` -> D switches: which path reached the lock (the frame after
    /// the site; `<site> <- ?` when the stack ends there).
    #[serde(default)]
    pub paths: BTreeMap<String, u64>,
}

impl LockSites {
    pub fn total(&self) -> u64 {
        self.sites.values().sum()
    }

    /// The most frequent caller of `site` and its share of the site's switches.
    pub fn main_path(&self, site: &str) -> Option<(&str, f64)> {
        let prefix = format!("{site} <- ");
        let total = *self.sites.get(site)?;
        let (p, n) = self
            .paths
            .iter()
            .filter(|(k, _)| k.starts_with(&prefix))
            .max_by_key(|(_, n)| **n)?;
        Some((&p[prefix.len()..], *n as f64 / total.max(1) as f64))
    }

    /// D switches waiting on the queue_lock in `blk_mq_run_hw_queue`.
    pub fn queue_lock(&self) -> u64 {
        self.sites.get(QUEUE_LOCK_SITE).copied().unwrap_or(0)
    }
}

/// `=> blk_mq_run_hw_queue+0x1a/0x40 [mod]` -> `blk_mq_run_hw_queue`; compiler suffixes
/// (`free_to_partial_list.constprop.0`, `.isra.0`, `.part.0`, `.cold`) are dropped.
fn symbol(frame: &str) -> Option<&str> {
    let mut f = frame.trim().trim_start_matches("=>").trim();
    if f.starts_with('[') {
        f = f.split_once(']').map_or("", |(_, r)| r.trim());
    }
    let f = f.split_whitespace().next()?;
    let sym = f.split('+').next()?.split('.').next()?.trim();
    (!sym.is_empty()).then_some(sym)
}

/// The lock site of a stack (frames innermost first).
pub fn lock_site<'a>(frames: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    site_and_caller(frames).map(|(s, _)| s)
}

fn site_and_caller<'a>(
    frames: impl IntoIterator<Item = &'a str>,
) -> Option<(&'a str, Option<&'a str>)> {
    let mut it = frames
        .into_iter()
        .filter_map(symbol)
        .skip_while(|s| SLOWPATH_PREFIXES.iter().any(|p| s.starts_with(p)));
    let site = it.next()?;
    Some((site, it.next()))
}

/// Parses a `dstacks.<step>` artefact.
pub fn parse_dstacks(text: &str) -> Result<LockSites, MetricsError> {
    let mut out = LockSites::default();
    let mut count: Option<u64> = None;
    let mut frames: Vec<&str> = Vec::new();
    let mut any = false;
    let mut flush = |count: &mut Option<u64>, frames: &mut Vec<&str>, out: &mut LockSites| {
        match count.take() {
            Some(n) => {
                let (site, caller) =
                    site_and_caller(frames.iter().copied()).unwrap_or(("(unknown)", None));
                let e = out.sites.entry(site.to_string()).or_default();
                *e = e.saturating_add(n);
                let path = format!("{site} <- {}", caller.unwrap_or("?"));
                let e = out.paths.entry(path).or_default();
                *e = e.saturating_add(n);
                out.stacks += 1;
                any = true;
            }
            None if !frames.is_empty() => out.bad_blocks += 1,
            None => {}
        }
        frames.clear();
    };
    for line in text.lines() {
        let t = line.trim();
        if t.is_empty() {
            flush(&mut count, &mut frames, &mut out);
        } else if let Some(c) = t.strip_prefix("count=") {
            flush(&mut count, &mut frames, &mut out);
            match c.trim().parse() {
                Ok(n) => count = Some(n),
                Err(_) => out.bad_blocks += 1,
            }
        } else {
            frames.push(t);
        }
    }
    flush(&mut count, &mut frames, &mut out);
    if !any {
        return Err(MetricsError::Empty);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn symbols() {
        assert_eq!(symbol("=> rt_spin_lock+0x3c/0x60"), Some("rt_spin_lock"));
        assert_eq!(
            symbol("  blk_mq_run_hw_queue+0x1a/0x40"),
            Some("blk_mq_run_hw_queue")
        );
        assert_eq!(
            symbol("[<ffffffff81234567>] virtscsi_req_done+0x2a/0x80 [virtio_scsi]"),
            Some("virtscsi_req_done")
        );
        assert_eq!(symbol("=>"), None);
        assert_eq!(
            symbol("free_to_partial_list.constprop.0+0x2d/0x130"),
            Some("free_to_partial_list")
        );
    }

    #[test]
    fn sites_from_fixture() {
        let p = format!(
            "{}/../guest-tests/tests/fixtures/artifacts/run-base/dstacks.1-randread.fio",
            env!("CARGO_MANIFEST_DIR")
        );
        let s = parse_dstacks(&std::fs::read_to_string(p).unwrap()).unwrap();
        assert_eq!(s.stacks, 6);
        assert_eq!(s.queue_lock(), 13 + 2);
        assert_eq!(s.sites["add_timer_randomness"], 5);
        assert_eq!(s.sites["__local_bh_disable_ip"], 4);
        assert_eq!(s.sites["virtscsi_req_done"], 3);
        assert_eq!(s.sites["(unknown)"], 1);
        assert_eq!(s.total(), 28);
        assert_eq!(s.bad_blocks, 0);
        assert_eq!(s.paths["blk_mq_run_hw_queue <- blk_mq_run_hw_queues"], 13);
        assert_eq!(
            s.paths["blk_mq_run_hw_queue <- blk_mq_delay_run_hw_queues"],
            2
        );
        assert_eq!(s.paths["virtscsi_req_done <- vring_interrupt"], 3);
        assert_eq!(s.paths["(unknown) <- ?"], 1);
        let (caller, share) = s.main_path("blk_mq_run_hw_queue").unwrap();
        assert_eq!(caller, "blk_mq_run_hw_queues");
        assert!((share - 13.0 / 15.0).abs() < 1e-12);
        assert_eq!(s.main_path("nowhere"), None);
    }

    #[test]
    fn malformed_blocks() {
        let s = parse_dstacks("frame_without_count+0x1/0x2\n\ncount=x\nfoo\n\ncount=2\n__schedule+0x1/0x2\nkmem_cache_free+0x1/0x9\n").unwrap();
        // orphan frames, an unparsable count, and that count's frames
        assert_eq!(s.bad_blocks, 3);
        assert_eq!(s.sites["kmem_cache_free"], 2);
        assert!(parse_dstacks("").is_err());
        assert!(parse_dstacks("\n\n\n").is_err());
    }
}
