//! `table latency`: experiments/bench-latency.sh's table of one run (that script says how each
//! file is measured).
//!
//! 1. Files in OUT_DIR: `cyclictest.txt` and `cyclictest-<T>us.txt` (histograms, the 200 us
//!    floor and each target's own); per target T `ours-msix-<T>us.json` and
//!    `ours-rt-msix-<T>us.json` (the bench with --measure-irq), each with its `-stats.json` (the
//!    backend's --stats-file), and `qsd-latency-<T>us.json`; per round R and efficiency row
//!    `eff-r<R>-<row>.json`; `placement.txt` and `failures.txt` as text.
//! 2. Latency rows: timer-only error is the backend's irq_error (its p50 negated when the backend
//!    counted more early signals than late ones); end to end is the bench's irq_delay - T; the
//!    p99 excess is divided by cyclictest's p99 at T's own interval and at 200 us.
//! 3. Efficiency rows: medians over the rounds present; ratios of the medians and per-round
//!    paired ratios of ops per backend CPU-second (a missing or zero figure is left out of a
//!    ratio).
//! 4. Goals: efficiency >= 2.0x qemu-storage-daemon; median error <= 2 us and p99 excess <=
//!    1.5x cyclictest's p99 at the target's interval; SCSI within 15 % of the blk path.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use vhost_blk_stats::DeviceStats;

use super::cyclictest::{self, int, Figures};
use super::{load, median, read_opt, TableError};
use gt_report::pyfmt::{fixed, or_dash, signed};
use vhost_blk_bench::report::Report;

/// Latency targets in microseconds.
#[derive(Debug, Clone)]
pub(crate) struct Targets(Vec<u64>);

/// White-space separated whole microseconds above 0, e.g. `10 50 200 1000`.
fn parse_targets(s: &str) -> Result<Targets, String> {
    let targets = s
        .split_whitespace()
        .map(|t| {
            t.parse::<u64>()
                .ok()
                .filter(|&t| t > 0)
                .ok_or_else(|| format!("`{t}` is not a whole number of microseconds above 0"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    if targets.is_empty() {
        return Err("no target given".into());
    }
    Ok(Targets(targets))
}

#[derive(Debug, clap::Args)]
pub(crate) struct LatencyArgs {
    /// The run's directory (experiments/bench-latency.sh's OUT_DIR).
    #[arg(value_name = "OUT_DIR", value_parser = super::run_dir)]
    dir: PathBuf,
    /// MSI-X latency targets, microseconds, white-space separated (the script's TARGETS_US).
    #[arg(long, default_value = "10 50 200 1000", value_parser = parse_targets)]
    targets: Targets,
    /// Interleaved efficiency rounds (ROUNDS).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=1000))]
    rounds: u32,
    /// Queues of the efficiency runs (QUEUES).
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u16).range(1..))]
    queues: u16,
    /// Requests in flight per queue of the efficiency runs (QD).
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u16).range(1..))]
    qd: u16,
    /// Client threads of the efficiency runs (THREADS).
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u16).range(1..))]
    threads: u16,
}

/// Backend modes of the latency rows: file prefix and the words of the table. `ours-msix`: the
/// host's fair scheduler (the backend's default); `ours-rt-msix`: --rt-priority 80, the policy
/// and priority cyclictest's floor is measured with.
const MODES: [(&str, &str); 2] = [
    ("ours-msix", "fair (default)"),
    ("ours-rt-msix", "SCHED_FIFO 80"),
];

/// Efficiency rows: file name, backend, client.
const ROWS: [(&str, &str, &str); 12] = [
    ("ours-bench", "ours, virtio-blk", "vhost-blk-bench"),
    ("qsd-bench", "qemu-storage-daemon", "vhost-blk-bench"),
    ("ours-blkio", "ours, virtio-blk", "blkio"),
    ("qsd-blkio", "qemu-storage-daemon", "blkio"),
    (
        "ours-untouched-bench",
        "ours, --null-untouched (no zero fill)",
        "vhost-blk-bench",
    ),
    (
        "ours-untouched-blkio",
        "ours, --null-untouched (no zero fill)",
        "blkio",
    ),
    ("ours-t1-bench", T1, "vhost-blk-bench"),
    ("ours-t1-blkio", T1, "blkio"),
    ("ours-t2-bench", "ours, --threads 2", "vhost-blk-bench"),
    ("ours-t2-blkio", "ours, --threads 2", "blkio"),
    (
        "ours-scsi10-bench",
        "ours, virtio-scsi READ(10)",
        "vhost-blk-bench",
    ),
    (
        "ours-scsi16-bench",
        "ours, virtio-scsi READ(16)",
        "vhost-blk-bench",
    ),
];
const T1: &str = "ours, --threads 1 (one worker, as qsd's one iothread)";

/// Ratios of ops per backend CPU-second: row a / row b, and the words.
const RATIOS: [(&str, &str, &str); 10] = [
    (
        "ours-bench",
        "qsd-bench",
        "ours / qemu-storage-daemon, vhost-blk-bench client",
    ),
    (
        "ours-blkio",
        "qsd-blkio",
        "ours / qemu-storage-daemon, blkio client",
    ),
    (
        "ours-untouched-bench",
        "qsd-bench",
        "ours untouched / qemu-storage-daemon, vhost-blk-bench",
    ),
    (
        "ours-untouched-blkio",
        "qsd-blkio",
        "ours untouched / qemu-storage-daemon, blkio",
    ),
    (
        "ours-t1-bench",
        "qsd-bench",
        "ours --threads 1 / qemu-storage-daemon, vhost-blk-bench",
    ),
    (
        "ours-t1-blkio",
        "qsd-blkio",
        "ours --threads 1 / qemu-storage-daemon, blkio",
    ),
    (
        "ours-t2-bench",
        "qsd-bench",
        "ours --threads 2 / qemu-storage-daemon, vhost-blk-bench",
    ),
    (
        "ours-t2-blkio",
        "qsd-blkio",
        "ours --threads 2 / qemu-storage-daemon, blkio",
    ),
    (
        "ours-scsi10-bench",
        "ours-bench",
        "ours SCSI READ(10) / ours blk",
    ),
    (
        "ours-scsi16-bench",
        "ours-bench",
        "ours SCSI READ(16) / ours blk",
    ),
];

/// Efficiency goals (>= 2.0x qemu-storage-daemon): row and words; the `ours-t1` ones are left
/// out when their ratio is missing.
const EFF_GOALS: [(&str, &str); 4] = [
    ("ours-bench", "vhost-blk-bench client"),
    ("ours-blkio", "blkio client"),
    (
        "ours-t1-bench",
        "vhost-blk-bench client, ours with one worker (--threads 1)",
    ),
    (
        "ours-t1-blkio",
        "blkio client, ours with one worker (--threads 1)",
    ),
];

const HOW: &str = "Timer-only: the backend's signal time - due time (its irq_error statistics). \
    End to end: used entry seen by the bench -> call eventfd seen by the bench, - target. \
    Ratio: end-to-end p99 excess / cyclictest p99.\n";
const FLOOR: &str = "The goal's floor is cyclictest's p99 at the target's own interval \
    (cyclictest-<t>us.txt: a longer sleep can wake later on a host whose CPUs idle deeper, e.g. \
    a VM whose vCPU the hypervisor deschedules); the 200 us floor is shown beside it. The floor \
    is measured at SCHED_FIFO 80 only, also for the fair rows: cyclictest's thread under the \
    fair scheduler sleeps with the default 50 us timer slack; the backend's worker waits on a \
    timerfd, which has none.\n";
const LATENCY_HEAD: &str = "| target us | backend threads | timer-only median error \
    | timer-only p99 | end-to-end median error | end-to-end p99 excess \
    | cyclictest p99 at this interval | p99 excess / cyclictest p99 (this interval) \
    | p99 excess / cyclictest p99 (200 us) | request p50 - target \
    | qemu-storage-daemon request p50 - target |\n|---|---|---|---|---|---|---|---|---|---|---|";

/// One run's directory.
struct Run<'a>(&'a Path);

impl Run<'_> {
    fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
    fn bench(&self, name: &str) -> Result<Option<Report>, TableError> {
        load(&self.path(name))
    }
    fn cyclictest(&self, name: &str) -> Result<Option<Figures>, TableError> {
        cyclictest::read(&self.path(name))
    }
}

/// A latency row's figures for the goals.
struct LatencyGoal {
    target: u64,
    mode: &'static str,
    e2e_median: f64,
    ratio: Option<f64>,
    ratio200: Option<f64>,
}

/// `a / b` when there is a `b` other than zero.
fn over(a: f64, b: Option<u64>) -> Option<f64> {
    b.filter(|&b| b != 0).map(|b| a / b as f64)
}

/// A figure other than zero (the scripts' truth test).
fn nonzero(x: Option<f64>) -> Option<f64> {
    x.filter(|&x| x != 0.0)
}

/// The table (module docs).
pub(crate) fn table(a: &LatencyArgs) -> Result<String, TableError> {
    let run = Run(&a.dir);
    let floor = run.cyclictest("cyclictest.txt")?;
    let mut out = vec!["# Backend benchmark (ci/bench-latency.sh)\n".to_string()];
    out.push(match &floor {
        Some(f) => format!(
            "Host floor, cyclictest (SCHED_FIFO 80, 200 us interval, {} wake-ups, from its \
             histogram): p50 {} us, p99 {} us, max {} us\n",
            f.n,
            int(f.p50),
            int(f.p99),
            int(f.max)
        ),
        None => "Host floor: n/a (cyclictest not installed)\n".into(),
    });
    out.push("## Latency accuracy (1 queue, QD1)\n".into());
    if let Some(placement) = read_opt(&run.path("placement.txt"))? {
        out.push(format!("{}\n", placement.trim()));
    }
    out.extend([HOW, FLOOR, LATENCY_HEAD].map(String::from));
    let mut goals = Vec::new();
    for &t in &a.targets.0 {
        let qsd = run.bench(&format!("qsd-latency-{t}us.json"))?;
        let same = run.cyclictest(&format!("cyclictest-{t}us.txt"))?;
        for (prefix, mode) in MODES {
            let qsd = qsd.as_ref().filter(|_| prefix == "ours-msix");
            let floors = (floor.as_ref(), same.as_ref());
            if let Some((row, goal)) = latency_row(&run, t, (prefix, mode), floors, qsd)? {
                out.push(row);
                goals.push(goal);
            }
        }
    }
    let ratios = efficiency(&mut out, a, &run)?;
    if let Some(failures) = read_opt(&run.path("failures.txt"))? {
        out.push("\nFailed runs (left out of the medians):\n".into());
        out.extend(failures.lines().map(|l| format!("- {}", l.trim())));
    }
    out.push("\n## Goals\n".into());
    goal_lines(&mut out, &ratios, &goals);
    Ok(out.join("\n") + "\n")
}

/// The row of one target and mode, if the run has it. `floors`: cyclictest at 200 us and at the
/// target's interval; `qsd`: qemu-storage-daemon's run at the target (fair rows only).
fn latency_row(
    run: &Run,
    t: u64,
    (prefix, mode): (&str, &'static str),
    (floor, same): (Option<&Figures>, Option<&Figures>),
    qsd: Option<&Report>,
) -> Result<Option<(String, LatencyGoal)>, TableError> {
    let name = format!("{prefix}-{t}us.json");
    let Some(ours) = run.bench(&name)? else {
        return Ok(None);
    };
    let tu = t as f64;
    let delay = ours.total.irq_delay_us.as_ref().ok_or_else(|| {
        TableError::Content(
            run.path(&name),
            "no irq_delay_us (run without --measure-irq)".into(),
        )
    })?;
    let (e2e_median, e2e_p99) = (delay.p50 - tu, delay.p99 - tu);
    let stats: Option<DeviceStats> = load(&run.path(&format!("{prefix}-{t}us-stats.json")))?;
    // irq_error is |signal - due|; the engine never signals early outside a flush, and the
    // early count says whether it did.
    let timer = stats.map(|st| {
        let (e, early) = (
            &st.total.irq_error_us,
            st.total.irq_early > st.total.irq_late,
        );
        (if early { -e.p50 } else { e.p50 }, e.p99)
    });
    let ratio200 = over(e2e_p99, floor.and_then(|f| f.p99));
    let ratio = over(e2e_p99, same.and_then(|f| f.p99));
    let row = format!(
        "| {t} | {mode} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
        or_dash(timer.map(|x| x.0), |x| signed(x, 2)),
        or_dash(timer.map(|x| x.1), |x| fixed(x, 1)),
        signed(e2e_median, 2),
        signed(e2e_p99, 1),
        int(same.and_then(|f| f.p99)),
        or_dash(ratio, |x| fixed(x, 2)),
        or_dash(ratio200, |x| fixed(x, 2)),
        signed(ours.total.latency_us.p50 - tu, 1),
        or_dash(qsd.map(|q| q.total.latency_us.p50 - tu), |x| signed(x, 1)),
    );
    let goal = LatencyGoal {
        target: t,
        mode,
        e2e_median,
        ratio,
        ratio200,
    };
    Ok(Some((row, goal)))
}

/// Every efficiency row's runs, round by round (`None`: no file).
type Rounds = BTreeMap<&'static str, Vec<Option<Report>>>;

/// Ops per backend CPU-second of a run.
fn eff(j: &Option<Report>) -> Option<f64> {
    j.as_ref().and_then(|j| j.ops_per_backend_cpu_second)
}

/// The efficiency section; the ratio of medians of each pair in [`RATIOS`].
fn efficiency(
    out: &mut Vec<String>,
    a: &LatencyArgs,
    run: &Run,
) -> Result<BTreeMap<&'static str, Option<f64>>, TableError> {
    out.push(format!(
        "\n## Efficiency: 4k randread, null storage, {} queues x QD{}, {} client threads, {} \
         interleaved rounds\n",
        a.queues, a.qd, a.threads, a.rounds
    ));
    let mut rounds = Rounds::new();
    for (name, _, _) in ROWS {
        let runs = (1..=a.rounds).map(|r| run.bench(&format!("eff-r{r}-{name}.json")));
        rounds.insert(name, runs.collect::<Result<_, _>>()?);
    }
    out.push(
        "| backend | client | IOPS (median) | ops per backend CPU-second: median (runs) \
         | client latency p50 / p99 us (median) |\n|---|---|---|---|---|"
            .into(),
    );
    let mut medians = BTreeMap::new();
    for (name, backend, client) in ROWS {
        let js = rounds.get(name).map(Vec::as_slice).unwrap_or_default();
        if let Some((row, m)) = efficiency_row(backend, client, js) {
            out.push(row);
            medians.insert(name, m);
        }
    }
    out.push(
        "\n| ratio (ops per backend CPU-second) | ratio of medians | per-round paired ratios |\n\
         |---|---|---|"
            .into(),
    );
    let mut ratios = BTreeMap::new();
    for (a, b, label) in RATIOS {
        let effs = |name| rounds.get(name).into_iter().flatten().map(eff);
        let paired: Vec<String> = effs(a)
            .zip(effs(b))
            .filter_map(|(x, y)| Some(fixed(nonzero(x)? / nonzero(y)?, 2)))
            .collect();
        let median_of = |name| nonzero(medians.get(name).copied().flatten());
        let rm = median_of(a).zip(median_of(b)).map(|(x, y)| x / y);
        ratios.insert(a, rm);
        if let Some(rm) = rm {
            out.push(format!(
                "| {label} | {}x | {} |",
                fixed(rm, 2),
                paired.join(" ")
            ));
        }
    }
    Ok(ratios)
}

/// An efficiency row and its median ops per backend CPU-second; `None` without any run.
fn efficiency_row(
    backend: &str,
    client: &str,
    js: &[Option<Report>],
) -> Option<(String, Option<f64>)> {
    if js.iter().all(Option::is_none) {
        return None;
    }
    let effs: Vec<Option<f64>> = js.iter().map(eff).collect();
    let m = median(effs.iter().copied());
    let of_runs = |f: fn(&Report) -> f64| median(js.iter().flatten().map(|j| Some(f(j))));
    let iops = of_runs(|j| j.total.iops);
    let p50 = of_runs(|j| j.total.latency_us.p50);
    let p99 = of_runs(|j| j.total.latency_us.p99);
    let runs: Vec<String> = effs
        .iter()
        .map(|x| or_dash(*x, |x| format!("{}M", fixed(x / 1e6, 2))))
        .collect();
    let row = format!(
        "| {backend} | {client} | {} | {}M ({}) | {} / {} |",
        or_dash(iops, |x| fixed(x, 0)),
        or_dash(m, |x| fixed(x / 1e6, 2)),
        runs.join(" / "),
        or_dash(p50, |x| fixed(x, 1)),
        or_dash(p99, |x| fixed(x, 1)),
    );
    Some((row, m))
}

fn verdict(ok: Option<bool>) -> &'static str {
    match ok {
        None => "n/a",
        Some(true) => "met",
        Some(false) => "NOT met",
    }
}

/// The goals section (module docs, rule 4).
fn goal_lines(
    out: &mut Vec<String>,
    ratios: &BTreeMap<&'static str, Option<f64>>,
    goals: &[LatencyGoal],
) {
    let ratio = |a: &str| ratios.get(a).copied().flatten();
    for (a, label) in EFF_GOALS {
        let rm = ratio(a);
        if rm.is_none() && a.starts_with("ours-t1") {
            continue;
        }
        out.push(format!(
            "- Efficiency >= 2.0x qemu-storage-daemon, {label}: {}x: {}",
            or_dash(rm, |x| fixed(x, 2)),
            verdict(rm.map(|r| r >= 2.0))
        ));
    }
    for g in goals {
        let t = g.target;
        out.push(format!(
            "- Median latency error <= 2 us at {t} us (end to end, backend {}): {} us: {}; p99 \
             excess <= 1.5x cyclictest p99 at {t} us: {}x: {} (against the 200 us floor: {}x)",
            g.mode,
            signed(g.e2e_median, 2),
            verdict(Some(g.e2e_median.abs() <= 2.0)),
            or_dash(g.ratio, |x| fixed(x, 2)),
            verdict(g.ratio.map(|r| r <= 1.5)),
            or_dash(g.ratio200, |x| fixed(x, 2)),
        ));
    }
    for (a, label) in [
        ("ours-scsi10-bench", "READ(10)"),
        ("ours-scsi16-bench", "READ(16)"),
    ] {
        let rm = ratio(a);
        out.push(format!(
            "- SCSI {label} ops per CPU-second within 15 % of the blk path: {}x: {}",
            or_dash(rm, |x| fixed(x, 2)),
            verdict(rm.map(|r| r >= 0.85))
        ));
    }
}

#[cfg(test)]
mod tests;
