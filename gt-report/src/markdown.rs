//! The report's content as a list of blocks, rendered to Markdown here; `html.rs` renders that
//! Markdown text, so both files always say the same thing.

use std::collections::BTreeSet;
use std::fmt::Write as _;

pub(super) use super::block::Block;
use super::lockwaits::KernelWaits;
use super::tables::{fmt_num, fmt_p, markdown_rows, table};
use super::{LockSiteTable, LockWaitTable, ReportData};
use gt_compare::Comparison;
use gt_results::results::{RunResult, RunStatus};

fn short(hash: &str) -> String {
    if hash.is_empty() {
        "–".into()
    } else {
        hash.chars().take(12).collect()
    }
}

fn status(s: &RunStatus) -> String {
    match s {
        RunStatus::Ok => "ok".into(),
        RunStatus::Failed { reason } => format!("failed: {reason}"),
        RunStatus::TimedOut { after_s } => format!("timed out after {after_s} s"),
    }
}

fn load(l: Option<[f64; 3]>) -> String {
    l.map_or("–".into(), |l| format!("{:.2}", l[0]))
}

/// The report as blocks.
pub(super) fn blocks(d: &ReportData) -> Vec<Block> {
    use Block::*;
    let c = &d.comparison;
    let ok = d.runs.iter().filter(|r| r.status.is_ok()).count();
    let mut b = vec![
        Heading(1, d.title.clone()),
        Para(format!(
            "Built from {} results.json files ({} successful, {} excluded, {} unreadable). \
             Baseline: **{}**. Every number below is read from those files; rebuild with \
             `guest-tests report <dir>`.",
            d.runs.len(),
            ok,
            c.excluded.len(),
            d.unreadable.len(),
            c.baseline()
        )),
    ];
    b.extend(verdict_blocks(d));
    b.extend(change_blocks(c));
    b.extend(super::ranking::blocks(c));
    if let Some(m) = &d.scan_model {
        b.extend(super::model::blocks(m));
    }
    for (ti, t) in d.lock_sites.iter().enumerate() {
        b.extend(lock_site_blocks(t, c.several_suites()));
        // Lock-site plots are made in the same order as the tables.
        if let Some(i) = d
            .plots
            .iter()
            .enumerate()
            .filter(|(_, p)| p.file.starts_with("locksites-"))
            .nth(ti)
            .map(|(i, _)| i)
        {
            b.push(Figure(i));
        }
    }
    for t in &d.lock_waits {
        b.extend(lock_wait_blocks(t));
    }
    b.push(Heading(2, "All metrics".into()));
    b.push(Para(
        "Median and 95 % CI of the mean (Student's t) per kernel, with n and the coefficient of \
         variation; ratio of medians against the baseline; Welch's t-test and Mann-Whitney U \
         (two-sided; exact without ties, normal approximation with tie correction marked \
         `approx`). Under TCG throughput follows host load: compare event counts."
            .into(),
    ));
    let (h, rows) = table(c, &[]);
    b.push(Table(h, rows));
    b.push(Heading(2, "Plots".into()));
    for (i, p) in d.plots.iter().enumerate() {
        if !p.file.starts_with("locksites-") && !p.file.starts_with("blocked-") {
            b.push(Figure(i));
        }
    }
    if !d.nodes.is_empty() {
        b.push(Heading(2, "Per-node effects".into()));
        b.push(Para(super::node_section::NODE_NOTE.into()));
        let (h, rows) = super::node_section::node_table(&d.nodes);
        b.push(Table(h, rows));
    }
    b.extend(provenance(d));
    b
}

/// The A/B verdict's words, its table and the blocked-threads figure (none without a verdict).
fn verdict_blocks(d: &ReportData) -> Vec<Block> {
    use Block::*;
    let Some(v) = &d.verdict else {
        return vec![];
    };
    let mut b = vec![Heading(2, "Verdict".into())];
    for para in super::verdict_words::verdict_text(v, d.sequential.as_ref()).split("\n\n") {
        if !para.trim().is_empty() {
            b.push(Para(para.trim().to_string()));
        }
    }
    let (h, rows) = super::verdict_words::verdict_rows(v);
    b.push(Table(h, rows));
    if let Some(i) = d.plots.iter().position(|p| p.file.starts_with("blocked-")) {
        b.push(Figure(i));
    }
    b
}

/// "Changes": the flagged metrics, one line each, or a sentence saying there are none.
fn change_blocks(c: &Comparison) -> Vec<Block> {
    use Block::*;
    let flagged: Vec<String> = c
        .rows
        .iter()
        .flat_map(|r| r.versus.iter().filter(|v| v.flag).map(move |v| (r, v)))
        .map(|(r, v)| {
            let med = |k: &str| r.summary(k).map_or("–".into(), |s| fmt_num(s.median));
            let cell = r.cell_label(c.several_suites());
            let variant = if cell.is_empty() {
                cell
            } else {
                format!(" ({cell})")
            };
            format!(
                "`{}`{variant}: {} {} → {} {} (ratio {}, Welch p {}, Mann-Whitney p {})",
                r.metric,
                c.baseline(),
                med(c.baseline()),
                v.kernel,
                med(&v.kernel),
                v.ratio.map_or("–".into(), |x| format!("{x:.3}")),
                fmt_p(v.welch_p),
                fmt_p(v.mwu.map(|m| m.p)),
            )
        })
        .collect();
    let mut b = vec![Heading(2, "Changes".into())];
    if flagged.is_empty() {
        b.push(Para(
            "No metric changed by 5 % or more with non-overlapping ranges.".into(),
        ));
    } else {
        b.push(Para(
            "Flagged (median change >= 5 %, the two kernels' min-max ranges do not overlap, at least 2 runs each):"
                .into(),
        ));
        b.push(List(flagged));
    }
    b
}

/// One "Where the irq threads block" section: heading, note and the per-site table.
fn lock_site_blocks(t: &LockSiteTable, several_suites: bool) -> Vec<Block> {
    use Block::*;
    let label = t.label(several_suites);
    let mut b = vec![Heading(2, format!("Where the irq threads block: {label}"))];
    b.push(Para(format!(
        "D switches of the request irq threads grouped by lock site (the first frame above \
         the scheduler and sleeping-lock slowpath), {}, pooled over each kernel's runs. \
         `blk_mq_run_hw_queue` is the `q->queue_lock` taken for idle hardware queues.",
        t.unit()
    )));
    let mut header = vec!["lock site".to_string()];
    header.extend(t.kernels.iter().map(|(k, _)| format!("{k}: rate (share)")));
    header.push("reached via (share)".into());
    let mut rows: Vec<Vec<String>> = t
        .sites
        .iter()
        .map(|s| {
            let mut row = vec![format!("`{s}`")];
            row.extend(t.kernels.iter().map(|(_, ks)| {
                let share = ks
                    .share(s)
                    .map_or(String::new(), |x| format!(" ({:.0} %)", x * 100.0));
                format!("{}{share}", fmt_num(ks.rate(s, t.per_kio)))
            }));
            row.push(t.main_path(s).map_or(String::new(), |(c, x)| {
                format!("`{c}` ({:.0} %)", x * 100.0)
            }));
            row
        })
        .collect();
    let mut total = vec!["**all sites**".to_string()];
    total.extend(t.kernels.iter().map(|(_, ks)| {
        let r = if t.per_kio && ks.ios > 0 {
            ks.total() as f64 * 1000.0 / ks.ios as f64
        } else {
            ks.total() as f64 / ks.runs.max(1) as f64
        };
        format!("{} ({} switches, {} runs)", fmt_num(r), ks.total(), ks.runs)
    }));
    total.push(String::new());
    rows.push(total);
    b.push(Table(header, rows));
    b
}

/// `x` per 1,000 of the kernel's I/Os (NaN without I/Os).
fn per_kio(k: &KernelWaits, x: f64) -> f64 {
    if k.ios > 0 {
        x * 1000.0 / k.ios as f64
    } else {
        f64::NAN
    }
}

/// One "Where the irq threads wait" section: heading, note and the per-site table.
fn lock_wait_blocks(t: &LockWaitTable) -> Vec<Block> {
    use Block::*;
    let mut b = vec![Heading(
        2,
        format!("Where the irq threads wait: {} ({})", t.step, t.suite),
    )];
    b.push(Para(
        "Lock waits of the request irq threads (lock:contention_begin to contention_end, \
         paired per thread and lock in the guest), grouped by lock site (the first frame above \
         the lock slowpath), pooled over each kernel's runs: contentions and wait per 1,000 \
         I/Os, longest wait. `blk_mq_run_hw_queue` is seed 000's `q->queue_lock`."
            .into(),
    ));
    let mut header = vec!["lock site".to_string()];
    header.extend(
        t.kernels
            .iter()
            .map(|(k, _)| format!("{k}: waits, ms per kio (max us)")),
    );
    header.push("reached via (share)".into());
    let mut rows: Vec<Vec<String>> = t
        .sites()
        .iter()
        .take(12)
        .map(|s| {
            let mut row = vec![format!("`{s}`")];
            row.extend(t.kernels.iter().map(|(_, k)| {
                let w = k.sites.get(s).copied().unwrap_or_default();
                format!(
                    "{}, {} ({})",
                    fmt_num(per_kio(k, w.count as f64)),
                    fmt_num(per_kio(k, w.total_ns as f64 / 1e6)),
                    fmt_num(w.max_ns as f64 / 1e3)
                )
            }));
            row.push(t.main_path(s).map_or(String::new(), |(c, x)| {
                format!("`{c}` ({:.0} %)", x * 100.0)
            }));
            row
        })
        .collect();
    let mut total = vec!["**all sites**".to_string()];
    total.extend(t.kernels.iter().map(|(_, k)| {
        let (n, ns) = k
            .sites
            .values()
            .fold((0u64, 0u64), |(n, ns), w| (n + w.count, ns + w.total_ns));
        format!(
            "{}, {} ({} runs, {} I/Os)",
            fmt_num(per_kio(k, n as f64)),
            fmt_num(per_kio(k, ns as f64 / 1e6)),
            k.runs,
            k.ios
        )
    }));
    total.push(String::new());
    rows.push(total);
    b.push(Table(header, rows));
    b
}

/// "Runs and provenance": the run table, hosts and versions, distinct command lines, and the
/// data-quality list.
fn provenance(d: &ReportData) -> Vec<Block> {
    use Block::*;
    let mut b = vec![Heading(2, "Runs and provenance".into())];
    let header = [
        "run",
        "kernel",
        "variant",
        "#",
        "status",
        "release",
        "bzImage",
        "initramfs",
        "backend",
        "QEMU",
        "accel",
        "host load before/after",
        "started",
    ]
    .map(String::from)
    .to_vec();
    let rows = d.runs.iter().map(|r| provenance_row(d, r)).collect();
    b.push(Table(header, rows));
    b.push(List(host_items(&d.runs)));
    let cmd = command_lines(&d.runs);
    if !cmd.is_empty() {
        b.push(Para("Distinct command lines and configurations:".into()));
        b.push(Code(cmd.trim_end().to_string()));
    }
    let mut issues = Vec::new();
    for r in &d.runs {
        let dir = r.info.run_dir.display();
        issues.extend(r.warnings.iter().map(|w| format!("{dir}: {w}")));
        issues.extend(
            r.parse_errors
                .iter()
                .map(|e| format!("{dir}: artefact `{}`: {}", e.artifact, e.message)),
        );
    }
    issues.extend(d.unreadable.iter().cloned());
    if !issues.is_empty() {
        b.push(Heading(2, "Data quality".into()));
        b.push(List(issues));
    }
    b
}

/// One run's row of the provenance table.
fn provenance_row(d: &ReportData, r: &RunResult) -> Vec<String> {
    let p = &r.provenance;
    let backend = format!(
        "{} {}{}{}",
        p.backend.name,
        p.backend.version,
        p.backend
            .git_rev
            .as_deref()
            .map_or(String::new(), |g| format!(" {}", short(g))),
        if p.backend.git_dirty == Some(true) {
            "+dirty"
        } else {
            ""
        }
    );
    let dir = &r.info.run_dir;
    vec![
        dir.strip_prefix(&d.root)
            .unwrap_or(dir)
            .display()
            .to_string(),
        r.info.kernel.clone(),
        r.info.variant.clone().unwrap_or_default(),
        r.info.repeat.to_string(),
        status(&r.status),
        p.kernel.release.clone(),
        short(&p.kernel.bzimage_sha256),
        short(&p.initramfs_sha256),
        backend.trim().to_string(),
        p.qemu.version.clone(),
        p.accelerator.clone(),
        format!(
            "{} / {}",
            load(p.host.loadavg_before),
            load(p.host.loadavg_after)
        ),
        p.started_at.clone(),
    ]
}

/// The distinct hosts, guest-tests versions and seeds of the runs.
fn host_items(runs: &[RunResult]) -> Vec<String> {
    let hosts: BTreeSet<String> = runs
        .iter()
        .map(|r| {
            let h = &r.provenance.host;
            format!("{} ({} cores), kernel {}", h.cpu_model, h.cores, h.kernel)
        })
        .collect();
    let versions: BTreeSet<String> = runs
        .iter()
        .map(|r| r.provenance.guest_tests_version.clone())
        .collect();
    let mut items: Vec<String> = hosts.into_iter().map(|h| format!("host: {h}")).collect();
    items.extend(versions.into_iter().map(|v| format!("guest-tests {v}")));
    let seeds: BTreeSet<String> = runs
        .iter()
        .flat_map(|r| r.provenance.seeds.iter().map(|(k, v)| format!("{k}={v}")))
        .collect();
    if !seeds.is_empty() {
        items.push(format!(
            "seeds: {}",
            seeds.into_iter().collect::<Vec<_>>().join(", ")
        ));
    }
    items
}

/// Each distinct QEMU and backend command line and backend configuration once, with the first
/// run that used it.
fn command_lines(runs: &[RunResult]) -> String {
    let mut cmd = String::new();
    let mut seen = BTreeSet::new();
    for r in runs {
        let p = &r.provenance;
        for (what, argv) in [("qemu", &p.qemu.argv), ("backend", &p.backend.argv)] {
            if !argv.is_empty() && seen.insert((what, argv.join(" "))) {
                let _ = writeln!(
                    cmd,
                    "# {what} ({}, run {})\n{}\n",
                    r.info.kernel,
                    r.info.run_dir.display(),
                    argv.join(" ")
                );
            }
        }
        if !p.backend.config.is_empty() && seen.insert(("config", p.backend.config.clone())) {
            let _ = writeln!(
                cmd,
                "# backend config (run {})\n{}\n",
                r.info.run_dir.display(),
                p.backend.config.trim_end()
            );
        }
    }
    cmd
}

/// report.md
pub(super) fn render(d: &ReportData) -> String {
    let mut out = String::new();
    for b in blocks(d) {
        match b {
            Block::Heading(l, t) => {
                let _ = writeln!(out, "{} {t}\n", "#".repeat(l as usize));
            }
            Block::Para(t) => {
                let _ = writeln!(out, "{t}\n");
            }
            Block::List(items) => {
                for i in items {
                    let _ = writeln!(out, "- {i}");
                }
                out.push('\n');
            }
            Block::Table(h, rows) => {
                let _ = writeln!(out, "{}", markdown_rows(&h, &rows));
            }
            Block::Figure(i) => {
                let p = &d.plots[i];
                let _ = writeln!(out, "![{}](plots/{})\n", p.caption, p.file);
            }
            Block::Code(t) => {
                let _ = writeln!(out, "```\n{t}\n```\n");
            }
        }
    }
    out
}
