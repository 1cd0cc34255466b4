//! The goal table of experiments/restart-experiment.sh (docs/results/restart-35/goals.txt), from
//! what it kept per run NAME (= DEVICE-qemuQEMU-runI) in its OUT directory. `lab table
//! restart-goals` prints it.
//!
//! Contract:
//! 1. A run is a `NAME.status.json` (the script's `{"run", "exit", "wall_s"}`); the runs come in
//!    the order of their file names. Beside it: `NAME.restarts.json` (the
//!    [`RestartRecord`]s) and `NAME.log` (the test's output with its [`RestartResult`] line).
//!    A file that is missing or does not parse counts as empty: its cells are `?`.
//! 2. A run meets its goals when the test exited 0 (fio exit 0, no job error or verify
//!    failure, no bad dmesg line, no hang: the test checks these), the killed instances' chains
//!    resubmitted on request queues add up to at least `min_resubmitted`, and over all
//!    instances the backend's fds and its private memory (`RssAnon`; the whole RSS for records
//!    made before it was kept) stay flat as `gt_launch::restart` defines it ([`fds_flat`],
//!    [`memory_flat`]; neither may be empty). A missed run says why when the log has a panic (the
//!    line after `panicked at`, at most 120 characters) or, if the log mentions `exit` but has
//!    no result line, `no result line`.
//! 3. Modes are the names without `-runI`, in the order they first appear; each gets a line
//!    with the runs that met every goal.
//! 4. The text is what the Python script it replaced (experiments/restart_goals.py, issue 37)
//!    printed: the committed goals.txt reads the same.

use std::fmt::Write as _;
use std::path::Path;

use serde::Deserialize;

use gt_launch::restart::{fds_flat, memory_flat, RestartRecord, RestartResult, RESULT_PREFIX};
use gt_report::pyfmt::repr;

/// `NAME.status.json`, as restart-experiment.sh writes it.
#[derive(Debug, Default, Deserialize)]
struct RunExit {
    #[serde(default)]
    exit: Option<i64>,
    #[serde(default)]
    wall_s: Option<serde_json::Number>,
}

fn read_json<T: for<'de> Deserialize<'de>>(p: &Path) -> Option<T> {
    serde_json::from_str(&std::fs::read_to_string(p).ok()?).ok()
}

/// The log's result line and, when the run failed, why (rule 2).
fn result_line(log: &str) -> (Option<RestartResult>, String) {
    let line = log.lines().find_map(|l| {
        let j = l.strip_prefix(RESULT_PREFIX)?;
        (j.starts_with('{') && j.ends_with('}')).then_some(j)
    });
    let res = line.and_then(|j| serde_json::from_str(j).ok());
    let panic = log
        .split_once("panicked at ")
        .and_then(|(_, rest)| rest.split_once('\n'))
        .map(|(_, after)| after.split('\n').next().unwrap_or(""));
    let why = match panic {
        Some(l) => l.trim().chars().take(120).collect(),
        None if log.contains("exit") && line.is_none() => "no result line".into(),
        None => String::new(),
    };
    (res, why)
}

/// The values are flat across instances (rule 2): fds within 2, RSS within +50 %.
fn joined<T: ToString>(v: impl IntoIterator<Item = T>) -> String {
    v.into_iter()
        .map(|x| x.to_string())
        .collect::<Vec<_>>()
        .join("/")
}

fn number(n: Option<&serde_json::Number>) -> String {
    match n {
        None => "?".into(),
        Some(n) if n.is_f64() => n.as_f64().map_or("?".into(), repr),
        Some(n) => n.to_string(),
    }
}

/// `first / last (max-min d)` of the backend's fds, `?` for none.
fn fds_cell(fds: &[u64]) -> String {
    match (fds.first(), fds.last(), fds.iter().min(), fds.iter().max()) {
        (Some(a), Some(b), Some(lo), Some(hi)) => format!("{a} / {b} (max-min {})", hi - lo),
        _ => "? / ? (max-min ?)".into(),
    }
}

/// One run's row and whether it met its goals (rules 1, 2).
fn run_row(out: &Path, name: &str, min_resubmitted: u64) -> (String, bool) {
    let st: RunExit = read_json(&out.join(format!("{name}.status.json"))).unwrap_or_default();
    let recs: Vec<RestartRecord> =
        read_json(&out.join(format!("{name}.restarts.json"))).unwrap_or_default();
    let log = std::fs::read(out.join(format!("{name}.log")))
        .map(|b| String::from_utf8_lossy(&b).into_owned());
    let (res, why) = log.map_or((None, String::new()), |l| result_line(&l));
    let killed: Vec<&RestartRecord> = recs.iter().filter(|r| r.killed).collect();
    let resub: Vec<u64> = killed.iter().map(|r| r.resubmitted.unwrap_or(0)).collect();
    let other = killed.iter().map(|r| r.resubmitted_other.unwrap_or(0));
    let inflight = killed
        .iter()
        .map(|r| r.in_flight.map_or("-".into(), |x| x.to_string()));
    let fds: Vec<u64> = recs
        .iter()
        .filter_map(|r| r.backend_fds.map(u64::from))
        .collect();
    let rss: Vec<u64> = recs.iter().filter_map(|r| r.backend_rss_kib).collect();
    // The private part when every instance has it (rule 2), else the whole resident set.
    let anon: Vec<u64> = recs.iter().filter_map(|r| r.backend_anon_kib).collect();
    let mem = if anon.len() == recs.len() {
        &anon
    } else {
        &rss
    };
    let total: u64 = resub.iter().sum();
    let ok = st.exit == Some(0) && total >= min_resubmitted && fds_flat(&fds) && memory_flat(mem);
    let (fio, dmesg) = res.as_ref().map_or(("?".into(), "?".into()), |r| {
        let rc = r.fio_rc.map_or("None".into(), |c| c.to_string());
        let fio = format!("rc {rc}, {} job err", r.fio_job_errors);
        (fio, r.dmesg_bad.to_string())
    });
    let q = |v: Option<&u64>| v.map_or("?".into(), u64::to_string);
    let row =
        format!(
        "| {name} | {} | {} | {} | **{total}** | {} | {fio} | {dmesg} | {} | {} / {} | {} | {} |",
        killed.len(),
        joined(inflight),
        joined(&resub),
        joined(other),
        fds_cell(&fds),
        q(rss.first()),
        q(rss.last()),
        number(st.wall_s.as_ref()),
        if ok { "met".into() } else { format!("MISSED {why}") },
    );
    (row, ok)
}

/// The runs of `out` (rule 1): the names of its `*.status.json` files, sorted.
pub fn run_names(out: &Path) -> std::io::Result<Vec<String>> {
    let mut names: Vec<String> = std::fs::read_dir(out)?
        .flatten()
        .filter_map(|e| {
            let n = e.file_name().to_string_lossy().into_owned();
            n.strip_suffix(".status.json").map(String::from)
        })
        .collect();
    names.sort();
    Ok(names)
}

const HEADER: &str = "| run | kills | in flight before each kill | chains resubmitted per kill \
    (request queues) | total | other queues (SCSI control/event) | fio (verify_fatal) | bad \
    dmesg lines | backend fds first / last | backend RSS KiB first / last | wall s | goals |";

/// The table and the per-mode lines for the runs `names` of `out` (rules 1-4).
pub fn goals_table(out: &Path, names: &[String], min_resubmitted: u64) -> String {
    let mut text = format!("{HEADER}\n|{}\n", "---|".repeat(12));
    let mut modes: Vec<(String, Vec<bool>)> = Vec::new();
    for name in names {
        let (row, ok) = run_row(out, name, min_resubmitted);
        let _ = writeln!(text, "{row}");
        let mode = name.rsplit_once("-run").map_or(name.as_str(), |(m, _)| m);
        match modes.iter_mut().find(|(m, _)| m == mode) {
            Some((_, oks)) => oks.push(ok),
            None => modes.push((mode.to_string(), vec![ok])),
        }
    }
    text.push('\n');
    for (mode, oks) in &modes {
        let met = oks.iter().filter(|o| **o).count();
        let _ = writeln!(
            text,
            "{mode}: goals met in {met} of {} runs (>= {min_resubmitted} chains resubmitted)",
            oks.len()
        );
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn result_line_and_why() {
        let ok = format!("x\n{RESULT_PREFIX}{{\"a\": 1}}\nexit 0\n");
        // A line that is no RestartResult parses to None, but it is a result line.
        assert_eq!(result_line(&ok), (None, String::new()));
        let panic = "thread 'x' panicked at tests/booted_restart.rs:9:5:\n  fio exit status  \n";
        assert_eq!(result_line(panic).1, "fio exit status");
        assert_eq!(
            result_line("name: 3 s wall, exit 101\n").1,
            "no result line"
        );
        assert_eq!(result_line("nothing").1, "");
        let long = format!("panicked at x\n{}\n", "é".repeat(200));
        assert_eq!(result_line(&long).1.chars().count(), 120);
    }

    #[test]
    fn missing_files_give_question_marks_and_a_missed_goal() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("blk-q-run1.status.json"), "{\"exit\": 0}").unwrap();
        let (row, ok) = run_row(d.path(), "blk-q-run1", 0);
        assert!(!ok);
        assert_eq!(
            row,
            "| blk-q-run1 | 0 |  |  | **0** |  | ? | ? | ? / ? (max-min ?) | ? / ? | ? | MISSED  |"
        );
        let names = run_names(d.path()).unwrap();
        let t = goals_table(d.path(), &names, 50);
        assert!(t.ends_with("\nblk-q: goals met in 0 of 1 runs (>= 50 chains resubmitted)\n"));
    }
}
