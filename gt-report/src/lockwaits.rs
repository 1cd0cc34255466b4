//! Where the request irq threads wait (`locks.<step>`: lock:contention_begin -> end), per lock
//! site and kernel, pooled over each kernel's runs; and the blocked-threads picture: request irq
//! threads in D over time, one run of the baseline beside one of the other kernel.

use std::collections::BTreeMap;

use plotters::prelude::*;

use super::plots::{color, err, render};
use super::{Plot, ReportError};
use gt_results::metrics::{SiteWait, TIMELINE_BIN_MS};
use gt_results::results::RunResult;

/// One kernel's pooled waits at one step.
#[derive(Debug, Clone, Default)]
pub struct KernelWaits {
    pub runs: usize,
    pub ios: u64,
    pub sites: BTreeMap<String, SiteWait>,
    pub paths: BTreeMap<String, u64>,
}

/// The lock-wait table of one (suite, step).
#[derive(Debug, Clone)]
pub struct LockWaitTable {
    pub suite: String,
    pub step: String,
    pub kernels: Vec<(String, KernelWaits)>,
}

impl LockWaitTable {
    /// Sites by total wait over all kernels, largest first.
    pub fn sites(&self) -> Vec<String> {
        let mut tot: BTreeMap<&str, u64> = BTreeMap::new();
        for (_, k) in &self.kernels {
            for (s, w) in &k.sites {
                *tot.entry(s).or_default() += w.total_ns;
            }
        }
        let mut v: Vec<(&str, u64)> = tot.into_iter().collect();
        v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        v.into_iter().map(|(s, _)| s.to_string()).collect()
    }

    /// The most frequent caller of `site` over all kernels and its share.
    pub fn main_path(&self, site: &str) -> Option<(String, f64)> {
        let prefix = format!("{site} <- ");
        let mut by: BTreeMap<&str, u64> = BTreeMap::new();
        for (_, k) in &self.kernels {
            for (p, n) in &k.paths {
                if let Some(c) = p.strip_prefix(&prefix) {
                    *by.entry(c).or_default() += n;
                }
            }
        }
        let total: u64 = by.values().sum();
        let (c, n) = by.into_iter().max_by_key(|(_, n)| *n)?;
        Some((c.to_string(), n as f64 / total.max(1) as f64))
    }
}

/// Tables for every (suite, step) that has lock data, kernels in `order`.
pub fn lock_wait_tables(runs: &[RunResult], order: &[String]) -> Vec<LockWaitTable> {
    let mut out: Vec<LockWaitTable> = Vec::new();
    for r in runs.iter().filter(|r| r.status.is_ok()) {
        for s in &r.steps {
            let Some(l) = &s.locks else { continue };
            let i = match out
                .iter()
                .position(|t| t.suite == r.info.suite && t.step == s.name)
            {
                Some(i) => i,
                None => {
                    out.push(LockWaitTable {
                        suite: r.info.suite.clone(),
                        step: s.name.clone(),
                        kernels: order
                            .iter()
                            .map(|k| (k.clone(), KernelWaits::default()))
                            .collect(),
                    });
                    out.len() - 1
                }
            };
            let Some((_, k)) = out[i].kernels.iter_mut().find(|(k, _)| *k == r.info.kernel) else {
                continue;
            };
            k.runs += 1;
            k.ios += s.fio.as_ref().map_or(0, |f| f.total_ios());
            for (site, w) in &l.sites {
                let e = k.sites.entry(site.clone()).or_default();
                e.count += w.count;
                e.total_ns = e.total_ns.saturating_add(w.total_ns);
                e.max_ns = e.max_ns.max(w.max_ns);
            }
            for (p, n) in &l.paths {
                *k.paths.entry(p.clone()).or_default() += n;
            }
        }
    }
    out
}

/// A run with its D and queue_lock timelines.
type Timeline<'a> = (&'a RunResult, &'a [u8], &'a [u8]);

/// The first successful run of `kernel` with lock data at `step`: its D and queue_lock
/// timelines.
fn timeline<'a>(runs: &'a [RunResult], kernel: &str, step: &str) -> Option<Timeline<'a>> {
    runs.iter()
        .filter(|r| r.status.is_ok() && r.info.kernel == kernel)
        .find_map(|r| {
            let s = r.steps.iter().find(|s| s.name == step)?;
            let l = s.locks.as_ref()?;
            (!l.timeline_d.is_empty()).then_some((
                r,
                l.timeline_d.as_slice(),
                l.timeline_qlock.as_slice(),
            ))
        })
}

/// Blocked request irq threads over time at `step`: one panel per kernel (the first two).
pub fn blocked_plot(
    runs: &[RunResult],
    kernels: &[String],
    step: &str,
    threads: u32,
) -> Result<Option<Plot>, ReportError> {
    let panels: Vec<(&String, Timeline)> = kernels
        .iter()
        .take(2)
        .filter_map(|k| Some((k, timeline(runs, k, step)?)))
        .collect();
    if panels.is_empty() {
        return Ok(None);
    }
    let name = format!("blocked-{step}");
    let ymax = threads.max(4) as f64;
    let svg = render(&name, (900, 260 * panels.len() as u32), |root| {
        let areas = root.split_evenly((panels.len(), 1));
        for (i, ((k, (r, d, q)), area)) in panels.iter().zip(areas.iter()).enumerate() {
            let secs = d.len() as f64 * TIMELINE_BIN_MS as f64 / 1000.0;
            let run = r
                .info
                .run_dir
                .file_name()
                .map_or(String::new(), |f| f.to_string_lossy().into_owned());
            let mut ch = ChartBuilder::on(area)
                .caption(
                    format!("{k} ({run}): request irq threads blocked at once, peak per {TIMELINE_BIN_MS} ms"),
                    ("sans-serif", 16),
                )
                .margin(8)
                .x_label_area_size(30)
                .y_label_area_size(40)
                .build_cartesian_2d(0f64..secs.max(0.01), 0f64..ymax + 0.5)
                .map_err(err(&name))?;
            ch.configure_mesh()
                .x_desc("seconds into the step")
                .y_desc("threads")
                .draw()
                .map_err(err(&name))?;
            let bin = TIMELINE_BIN_MS as f64 / 1000.0;
            let step_series = |v: &[u8]| -> Vec<(f64, f64)> {
                v.iter()
                    .enumerate()
                    .flat_map(|(j, n)| {
                        [
                            (j as f64 * bin, *n as f64),
                            ((j + 1) as f64 * bin, *n as f64),
                        ]
                    })
                    .collect()
            };
            ch.draw_series(LineSeries::new(step_series(d), color(i).stroke_width(1)))
                .map_err(err(&name))?
                .label("in D (any sleep; on RT: any sleeping lock)")
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], color(i)));
            ch.draw_series(LineSeries::new(step_series(q), BLACK.stroke_width(1)))
                .map_err(err(&name))?
                .label("waiting on the queue_lock")
                .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], BLACK));
            ch.configure_series_labels()
                .background_style(WHITE.mix(0.8))
                .border_style(BLACK)
                .draw()
                .map_err(err(&name))?;
        }
        Ok(())
    })?;
    Ok(Some(Plot {
        file: format!("{name}.svg"),
        caption: format!(
            "Request irq threads blocked at the same moment during `{step}`: the peak in each {TIMELINE_BIN_MS} ms bin of threads in D (switch into D to wakeup) and of threads waiting on seed 000's queue_lock (contention begin to end), one run of {} above one of {}.",
            kernels.first().map_or("", String::as_str),
            kernels.get(1).map_or("", String::as_str)
        ),
        svg,
    }))
}
