//! `table syscalls`: experiments/syscalls-per-request.sh's table of one run (that script says
//! how each file is measured): what a request costs besides instructions, per path.
//!
//! 1. Files in OUT_DIR per path P, mode M (`bare`, `perf`) and round R, named `P-M-rR`: `.json`
//!    (the bench's `--json`) and `-ticks` (the backend's utime + stime over the client's run, in
//!    clock ticks, one integer), both required; in perf mode `-backend.perf` and
//!    `-client.perf` (`perf stat -x,` output), each may be absent (its counts are then 0).
//! 2. A perf line `COUNT,UNIT,EVENT,...` of an event in [`EVENTS`] gives its count; a count that
//!    is not digits (`<not counted>`) is 0; a later line of the same event wins.
//! 3. Per run, divided by the requests the client completed (the JSON's total ops; none is an
//!    error): IOPS; backend CPU us per request = ticks / HZ / ops x 1e6; completions per
//!    interrupt = ops / max(interrupts, 1); client p99; in perf mode every backend event and the
//!    client's switches and wake-ups.
//! 4. A cell is the median over the rounds with (min-max): IOPS and p99 to 0 places,
//!    completions per interrupt to 2, the rest to 4.
//! 5. Each path after the first: per round, the first path's CPU us per request over this
//!    path's (this path's ops per CPU-second relative to the first), 2 places, and their median.

use std::path::{Path, PathBuf};

use super::{load, median, read_opt, Names, TableError};
use gt_report::pyfmt::fixed;
use vhost_blk_bench::report::Report;

/// perf's events and the words of their rows; the last two are counted on the client too.
const EVENTS: [(&str, &str); 9] = [
    ("raw_syscalls:sys_enter", "syscalls"),
    ("syscalls:sys_enter_epoll_wait", "epoll_wait"),
    ("syscalls:sys_enter_sched_yield", "sched_yield"),
    ("syscalls:sys_enter_write", "write"),
    ("syscalls:sys_enter_read", "read"),
    ("syscalls:sys_enter_timerfd_settime", "timerfd_settime"),
    ("syscalls:sys_enter_ppoll", "ppoll (qemu's loop)"),
    ("sched:sched_switch", "switches"),
    ("sched:sched_wakeup", "wakeups given"),
];
/// The events counted on the client: the last ones of [`EVENTS`].
const CLIENT_EVENTS: usize = 2;

/// The rows every mode has: words and decimal places.
const BASE_ROWS: [(&str, usize); 4] = [
    ("IOPS", 0),
    ("backend CPU us per request", 4),
    ("completions per interrupt", 2),
    ("client latency p99 us", 0),
];
/// The row of backend CPU us per request (the ratios').
const US: usize = 1;

#[derive(Debug, clap::Args)]
pub(crate) struct SyscallsArgs {
    /// The run's directory (experiments/syscalls-per-request.sh's OUT_DIR).
    #[arg(value_name = "OUT_DIR", value_parser = super::run_dir)]
    dir: PathBuf,
    /// Rounds of the run (the script's ROUNDS).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=1000))]
    rounds: u32,
    /// Paths in the table's order, white-space separated; the first is the ratios' base (PATHS).
    #[arg(long, default_value = "blk scsi10 scsi16", value_parser = super::names)]
    paths: Names,
    /// The client the run used (CLIENT): the table names it.
    #[arg(long, default_value = "bench", value_parser = ["bench", "blkio"])]
    client: String,
    /// Clock ticks per second of the ticks files (`getconf CLK_TCK`).
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..))]
    hz: u32,
}

/// The counts of [`EVENTS`] in a perf file (rule 2); all 0 when there is no file.
fn perf_counts(path: &Path) -> Result<[f64; 9], TableError> {
    let mut counts = [0.0; 9];
    for line in read_opt(path)?.unwrap_or_default().lines() {
        let f: Vec<&str> = line.trim().split(',').collect();
        let (Some(count), Some(event)) = (f.first(), f.get(2)) else {
            continue;
        };
        if let Some(i) = EVENTS.iter().position(|(e, _)| e == event) {
            let digits = !count.is_empty() && count.bytes().all(|b| b.is_ascii_digit());
            if let Some(slot) = counts.get_mut(i) {
                *slot = if digits {
                    count.parse().unwrap_or(0.0)
                } else {
                    0.0
                };
            }
        }
    }
    Ok(counts)
}

/// One run's figures, in the order of [`rows`] (rule 3).
fn run(a: &SyscallsArgs, name: &str, perf: bool) -> Result<Vec<f64>, TableError> {
    let json = a.dir.join(format!("{name}.json"));
    let bench: Report =
        load(&json)?.ok_or_else(|| TableError::Content(json.clone(), "no such file".into()))?;
    let n = bench.total.ops as f64;
    if bench.total.ops == 0 {
        return Err(TableError::Content(json, "no request completed".into()));
    }
    let ticks_path = a.dir.join(format!("{name}-ticks"));
    let ticks: i64 = read_opt(&ticks_path)?
        .ok_or_else(|| TableError::Content(ticks_path.clone(), "no such file".into()))?
        .trim()
        .parse()
        .map_err(|e| TableError::Content(ticks_path.clone(), format!("not a tick count: {e}")))?;
    let mut figures = vec![
        bench.total.iops,
        ticks as f64 / f64::from(a.hz) / n * 1e6,
        n / bench.total.interrupts.max(1) as f64,
        bench.total.latency_us.p99,
    ];
    if perf {
        let backend = perf_counts(&a.dir.join(format!("{name}-backend.perf")))?;
        let client = perf_counts(&a.dir.join(format!("{name}-client.perf")))?;
        figures.extend(backend.iter().map(|c| c / n));
        figures.extend(
            client
                .iter()
                .skip(EVENTS.len() - CLIENT_EVENTS)
                .map(|c| c / n),
        );
    }
    Ok(figures)
}

/// The rows of a mode: words and decimal places.
fn rows(perf: bool) -> Vec<(String, usize)> {
    let mut rows: Vec<(String, usize)> = BASE_ROWS.iter().map(|&(w, p)| (w.into(), p)).collect();
    if perf {
        rows.extend(EVENTS.iter().map(|(_, w)| (format!("b {w}"), 4)));
        let client = EVENTS.iter().skip(EVENTS.len() - CLIENT_EVENTS);
        rows.extend(client.map(|(_, w)| (format!("c {w}"), 4)));
    }
    rows
}

/// The table (module docs).
pub(crate) fn table(a: &SyscallsArgs) -> Result<String, TableError> {
    let mut out = format!(
        "Client: {}. Median of {} interleaved rounds (min-max); each figure divided by the \
         requests the client completed over the same window.\n\n### Without tracing\n\n",
        a.client, a.rounds
    );
    out += &mode_table(a, false)?;
    out += "### With perf counting (slows both sides; compare the paths with each other, not \
            with the table above)\n\nb = backend process, c = client process (scheduler events \
            only).\n\n";
    out += &mode_table(a, true)?;
    Ok(out)
}

/// One mode's table and its ratio lines (rules 4, 5).
fn mode_table(a: &SyscallsArgs, perf: bool) -> Result<String, TableError> {
    let mode = if perf { "perf" } else { "bare" };
    // Per path, per round, the run's figures.
    let runs = a
        .paths
        .0
        .iter()
        .map(|p| {
            (1..=a.rounds)
                .map(|r| run(a, &format!("{p}-{mode}-r{r}"), perf))
                .collect::<Result<Vec<_>, _>>()
        })
        .collect::<Result<Vec<_>, _>>()?;
    let mut out = format!(
        "| per completed request | {} |\n|---|{}\n",
        a.paths.0.join(" | "),
        "---|".repeat(a.paths.0.len())
    );
    let column = |runs: &[Vec<f64>], k: usize| -> Vec<f64> {
        runs.iter().filter_map(|f| f.get(k).copied()).collect()
    };
    for (k, (words, places)) in rows(perf).into_iter().enumerate() {
        let cells: Vec<String> = runs
            .iter()
            .map(|path_runs| spread(&column(path_runs, k), places))
            .collect();
        out += &format!("| {words} | {} |\n", cells.join(" | "));
    }
    let (Some(base), Some(base_runs)) = (a.paths.0.first(), runs.first()) else {
        return Ok(out + "\n");
    };
    let base_us = column(base_runs, US);
    for (p, path_runs) in a.paths.0.iter().zip(&runs).skip(1) {
        let ratios: Vec<f64> = base_us
            .iter()
            .zip(column(path_runs, US))
            .map(|(b, x)| b / x)
            .collect();
        let text: Vec<String> = ratios.iter().map(|r| fixed(*r, 2)).collect();
        out += &format!(
            "\n{p} / {base}, ops per backend CPU-second, per round: {} (median {}x)\n",
            text.join(" "),
            fixed(
                median(ratios.iter().map(|r| Some(*r))).unwrap_or(f64::NAN),
                2
            )
        );
    }
    Ok(out + "\n")
}

/// `median (min-max)` of a row's values, each to `places`.
fn spread(v: &[f64], places: usize) -> String {
    let min = v.iter().copied().fold(f64::INFINITY, f64::min);
    let max = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let m = median(v.iter().map(|x| Some(*x))).unwrap_or(f64::NAN);
    format!(
        "{} ({}-{})",
        fixed(m, places),
        fixed(min, places),
        fixed(max, places)
    )
}

#[cfg(test)]
mod tests;
