//! Per-lock-site breakdown of the irq threads' D switches, kernel by kernel.

use std::collections::BTreeMap;

use serde::Serialize;

use gt_results::results::RunResult;

/// One kernel's D switches for one step (and variant), pooled over its successful runs.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct KernelSites {
    pub runs: usize,
    /// fio I/Os of those runs (0 when the step had no fio output).
    pub ios: u64,
    pub per_site: BTreeMap<String, u64>,
    /// `"<site> <- <caller>"` -> D switches.
    pub paths: BTreeMap<String, u64>,
}

impl KernelSites {
    pub fn total(&self) -> u64 {
        self.per_site.values().sum()
    }

    /// D switches at `site` per 1,000 I/Os (`per_kio`), else per run.
    pub fn rate(&self, site: &str, per_kio: bool) -> f64 {
        let n = self.per_site.get(site).copied().unwrap_or(0) as f64;
        if per_kio && self.ios > 0 {
            n * 1000.0 / self.ios as f64
        } else if self.runs > 0 {
            n / self.runs as f64
        } else {
            0.0
        }
    }

    /// Share of this kernel's D switches at `site`.
    pub fn share(&self, site: &str) -> Option<f64> {
        let t = self.total();
        (t > 0).then(|| self.per_site.get(site).copied().unwrap_or(0) as f64 / t as f64)
    }
}

/// The breakdown for one step in one (suite, variant) cell.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LockSiteTable {
    pub suite: String,
    pub step: String,
    pub variant: Option<String>,
    /// Sites ordered by their largest rate over the kernels, descending.
    pub sites: Vec<String>,
    /// In kernel order.
    pub kernels: Vec<(String, KernelSites)>,
    /// Rates are per 1,000 I/Os (every kernel had fio I/Os) rather than per run.
    pub per_kio: bool,
}

impl LockSiteTable {
    /// `randread`, `randread (lat=0us)`, or with the suite when there are several.
    pub fn label(&self, several_suites: bool) -> String {
        let cell = match (several_suites, &self.variant) {
            (true, Some(v)) => format!("{} {v}", self.suite),
            (true, None) => self.suite.clone(),
            (false, Some(v)) => v.clone(),
            (false, None) => String::new(),
        };
        if cell.is_empty() {
            self.step.clone()
        } else {
            format!("{} ({cell})", self.step)
        }
    }

    /// The caller through which `site` was most often reached (all kernels pooled), with its
    /// share of the site's switches.
    pub fn main_path(&self, site: &str) -> Option<(String, f64)> {
        let prefix = format!("{site} <- ");
        let mut by: BTreeMap<&str, u64> = BTreeMap::new();
        for (_, ks) in &self.kernels {
            for (p, n) in &ks.paths {
                if let Some(c) = p.strip_prefix(&prefix) {
                    *by.entry(c).or_default() += n;
                }
            }
        }
        let total: u64 = by.values().sum();
        let (c, n) = by.into_iter().max_by_key(|(_, n)| *n)?;
        Some((c.to_string(), n as f64 / total.max(1) as f64))
    }

    pub fn unit(&self) -> &'static str {
        if self.per_kio {
            "D switches per 1,000 I/Os"
        } else {
            "D switches per run"
        }
    }
}

/// One table per (suite, step, variant) that has D stacks in any successful run.
pub fn lock_site_tables(runs: &[RunResult], kernels: &[String]) -> Vec<LockSiteTable> {
    type Key = (String, String, Option<String>);
    let mut acc: BTreeMap<Key, BTreeMap<String, KernelSites>> = BTreeMap::new();
    for r in runs.iter().filter(|r| r.status.is_ok()) {
        for s in &r.steps {
            let Some(ls) = &s.lock_sites else { continue };
            let ks = acc
                .entry((r.info.suite.clone(), s.name.clone(), r.info.variant.clone()))
                .or_default()
                .entry(r.info.kernel.clone())
                .or_default();
            ks.runs += 1;
            ks.ios += s.fio.as_ref().map_or(0, |f| f.total_ios());
            for (site, n) in &ls.sites {
                *ks.per_site.entry(site.clone()).or_default() += n;
            }
            for (path, n) in &ls.paths {
                *ks.paths.entry(path.clone()).or_default() += n;
            }
        }
    }
    acc.into_iter()
        .map(|((suite, step, variant), mut by_kernel)| {
            let kernels: Vec<(String, KernelSites)> = kernels
                .iter()
                .map(|k| (k.clone(), by_kernel.remove(k).unwrap_or_default()))
                .collect();
            let mut sites: Vec<String> = kernels
                .iter()
                .flat_map(|(_, ks)| ks.per_site.keys().cloned())
                .collect();
            sites.sort();
            sites.dedup();
            let per_kio = kernels.iter().all(|(_, k)| k.runs == 0 || k.ios > 0);
            let top = |s: &String| {
                kernels
                    .iter()
                    .map(|(_, ks)| ks.rate(s, per_kio))
                    .fold(0.0, f64::max)
            };
            sites.sort_by(|a, b| top(b).total_cmp(&top(a)).then(a.cmp(b)));
            LockSiteTable {
                suite,
                step,
                variant,
                sites,
                kernels,
                per_kio,
            }
        })
        .collect()
}
