//! Slurm's commands as the batch executor uses them, and parsers of their output.
//!
//! 1. Every command runs with a bounded time ([`CMD_TIMEOUT`]); one that does not answer is
//!    killed and reported, never waited on forever.
//! 2. The parsers take the text of the formats given here (`-h`, `|`-separated, or
//!    `scontrol -o` key=value lines) and never panic: a line they cannot read is skipped.
//! 3. Array task states come from `squeue` while a task is queued or running, and from `sacct`
//!    (accounting) or else `scontrol show job` (the controller's memory) once it has ended.

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The longest any one Slurm client command may take.
pub const CMD_TIMEOUT: Duration = Duration::from_secs(60);

/// A Slurm client command that could not be run or failed.
#[derive(Debug, thiserror::Error)]
pub enum SlurmError {
    #[error("{prog} not found on PATH (is Slurm's client installed?)")]
    NotFound { prog: String },
    #[error("{prog}: {msg}")]
    Failed { prog: String, msg: String },
    #[error("{prog} did not answer within {secs} s")]
    TimedOut { prog: String, secs: u64 },
}

/// Runs `prog args`, returning its stdout (its first stderr line on a non-zero exit).
pub fn run(prog: &str, args: &[String]) -> Result<String, SlurmError> {
    run_bounded(prog, args, CMD_TIMEOUT)
}

fn run_bounded(prog: &str, args: &[String], limit: Duration) -> Result<String, SlurmError> {
    let failed = |msg: String| SlurmError::Failed {
        prog: prog.to_string(),
        msg,
    };
    let mut child = Command::new(prog)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => SlurmError::NotFound {
                prog: prog.to_string(),
            },
            _ => failed(e.to_string()),
        })?;
    let mut out = child.stdout.take();
    let mut err = child.stderr.take();
    let t_out = std::thread::spawn(move || {
        let mut s = String::new();
        if let Some(o) = out.as_mut() {
            let _ = o.read_to_string(&mut s);
        }
        s
    });
    let t_err = std::thread::spawn(move || {
        let mut s = String::new();
        if let Some(e) = err.as_mut() {
            let _ = e.read_to_string(&mut s);
        }
        s
    });
    let start = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(st)) => break st,
            Ok(None) if start.elapsed() >= limit => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(SlurmError::TimedOut {
                    prog: prog.to_string(),
                    secs: limit.as_secs(),
                });
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => return Err(failed(e.to_string())),
        }
    };
    let stdout = t_out.join().unwrap_or_default();
    let stderr = t_err.join().unwrap_or_default();
    if status.success() {
        Ok(stdout)
    } else {
        let line = stderr
            .lines()
            .map(str::trim)
            .find(|l| !l.is_empty())
            .unwrap_or("no message")
            .to_string();
        Err(failed(format!("{line} ({status})")))
    }
}

/// A job or array task state, as Slurm names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobState {
    Pending,
    Running,
    /// Still being set up or torn down (CONFIGURING, COMPLETING, SUSPENDED, REQUEUED...).
    Transient(String),
    Completed,
    Failed,
    Timeout,
    Cancelled,
    /// NODE_FAIL, OUT_OF_MEMORY, BOOT_FAIL, DEADLINE, PREEMPTED and names this parser does not
    /// know: ended without finishing.
    Ended(String),
}

impl JobState {
    pub fn parse(s: &str) -> JobState {
        // sacct writes `CANCELLED by <uid>`.
        let word = s.split_whitespace().next().unwrap_or("");
        match word {
            "PENDING" => JobState::Pending,
            "RUNNING" => JobState::Running,
            "CONFIGURING" | "COMPLETING" | "SUSPENDED" | "REQUEUED" | "REQUEUE_HOLD"
            | "REQUEUE_FED" | "RESIZING" | "SIGNALING" | "STAGE_OUT" | "STOPPED"
            | "RESV_DEL_HOLD" | "SPECIAL_EXIT" => JobState::Transient(word.to_string()),
            "COMPLETED" => JobState::Completed,
            "FAILED" => JobState::Failed,
            "TIMEOUT" => JobState::Timeout,
            "CANCELLED" => JobState::Cancelled,
            other => JobState::Ended(other.to_string()),
        }
    }

    /// Queued, running or between the two: the task may still write its result.
    pub fn is_active(&self) -> bool {
        matches!(
            self,
            JobState::Pending | JobState::Running | JobState::Transient(_)
        )
    }

    pub fn name(&self) -> String {
        match self {
            JobState::Pending => "PENDING".into(),
            JobState::Running => "RUNNING".into(),
            JobState::Completed => "COMPLETED".into(),
            JobState::Failed => "FAILED".into(),
            JobState::Timeout => "TIMEOUT".into(),
            JobState::Cancelled => "CANCELLED".into(),
            JobState::Transient(s) | JobState::Ended(s) => s.clone(),
        }
    }
}

/// One array task as a Slurm command reported it.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskRow {
    pub task: u32,
    pub state: JobState,
    /// The node it runs or ran on (empty while pending).
    pub node: String,
    /// squeue's reason (pending) or the exit code (`3:0`, `0:15`).
    pub detail: String,
    /// Run time so far or in all, when the command says.
    pub elapsed_s: Option<u64>,
}

/// The array task ids an id field names for `job`: `12_3` -> [3], `12_[3-5,7]` -> [3, 4, 5, 7]
/// (a `%limit` suffix ignored); another job's id -> none.
fn task_ids(field: &str, job: &str) -> Vec<u32> {
    let Some(rest) = field.strip_prefix(job).and_then(|r| r.strip_prefix('_')) else {
        return Vec::new();
    };
    let inner = rest
        .strip_prefix('[')
        .and_then(|r| r.strip_suffix(']'))
        .unwrap_or(rest);
    ranges(inner.split('%').next().unwrap_or(""))
}

/// `3-5,7` -> [3, 4, 5, 7]; at most 100,000 ids (Slurm's MaxArraySize limit is lower).
fn ranges(s: &str) -> Vec<u32> {
    let mut out = Vec::new();
    for part in s.split(',') {
        let (a, b) = match part.split_once('-') {
            Some((a, b)) => (a.trim().parse::<u32>(), b.trim().parse::<u32>()),
            None => (part.trim().parse::<u32>(), part.trim().parse::<u32>()),
        };
        if let (Ok(a), Ok(b)) = (a, b) {
            if b >= a && out.len() + ((b - a) as usize) < 100_000 {
                out.extend(a..=b);
            }
        }
    }
    out
}

/// `squeue -h -r -j JOB -o '%i|%T|%N|%r'`.
pub fn parse_squeue(text: &str, job: &str) -> Vec<TaskRow> {
    let mut out = Vec::new();
    for line in text.lines() {
        let f: Vec<&str> = line.trim().split('|').collect();
        if f.len() < 4 {
            continue;
        }
        for task in task_ids(f[0], job) {
            out.push(TaskRow {
                task,
                state: JobState::parse(f[1]),
                node: f[2].to_string(),
                detail: f[3].to_string(),
                elapsed_s: None,
            });
        }
    }
    out
}

/// The `squeue` arguments [`parse_squeue`] reads.
pub fn squeue_args(job: &str) -> Vec<String> {
    ["-h", "-r", "-j", job, "-o", "%i|%T|%N|%r"]
        .map(String::from)
        .to_vec()
}

/// `sacct -n -P -X -j JOB -o JobID,State,NodeList,ExitCode,ElapsedRaw`.
pub fn parse_sacct(text: &str, job: &str) -> Vec<TaskRow> {
    let mut out = Vec::new();
    for line in text.lines() {
        let f: Vec<&str> = line.trim().split('|').collect();
        if f.len() < 5 {
            continue;
        }
        let node = if f[2] == "None assigned" { "" } else { f[2] };
        for task in task_ids(f[0], job) {
            out.push(TaskRow {
                task,
                state: JobState::parse(f[1]),
                node: node.to_string(),
                detail: f[3].to_string(),
                elapsed_s: f[4].parse().ok(),
            });
        }
    }
    out
}

/// The `sacct` arguments [`parse_sacct`] reads.
pub fn sacct_args(job: &str) -> Vec<String> {
    [
        "-n",
        "-P",
        "-X",
        "-j",
        job,
        "-o",
        "JobID,State,NodeList,ExitCode,ElapsedRaw",
    ]
    .map(String::from)
    .to_vec()
}

/// `D-HH:MM:SS`, `HH:MM:SS` or `MM:SS` -> seconds.
fn run_time(s: &str) -> Option<u64> {
    let (days, hms) = match s.split_once('-') {
        Some((d, r)) => (d.parse::<u64>().ok()?, r),
        None => (0, s),
    };
    let parts: Vec<u64> = hms
        .split(':')
        .map(|p| p.parse().ok())
        .collect::<Option<_>>()?;
    let secs = match parts.as_slice() {
        [h, m, s] => h * 3600 + m * 60 + s,
        [m, s] => m * 60 + s,
        _ => return None,
    };
    Some(days * 86_400 + secs)
}

/// `scontrol -o show job JOB`: one line per array task (a pending remainder as one line with
/// `ArrayTaskId=4-9`).
pub fn parse_scontrol(text: &str, job: &str) -> Vec<TaskRow> {
    let mut out = Vec::new();
    for line in text.lines() {
        let kv = |key: &str| {
            line.split_whitespace()
                .find_map(|t| t.strip_prefix(key).and_then(|r| r.strip_prefix('=')))
        };
        if kv("ArrayJobId") != Some(job) {
            continue;
        }
        let (Some(ids), Some(state)) = (kv("ArrayTaskId"), kv("JobState")) else {
            continue;
        };
        let node = kv("NodeList").filter(|n| *n != "(null)").unwrap_or("");
        for task in ranges(ids.split('%').next().unwrap_or("")) {
            out.push(TaskRow {
                task,
                state: JobState::parse(state),
                node: node.to_string(),
                detail: kv("ExitCode").unwrap_or("").to_string(),
                elapsed_s: kv("RunTime").and_then(run_time),
            });
        }
    }
    out
}

/// `sbatch --parsable` prints `JOBID` or `JOBID;CLUSTER`.
pub fn parse_sbatch(text: &str) -> Option<String> {
    let id = text.trim().split(';').next()?.trim();
    (!id.is_empty() && id.chars().all(|c| c.is_ascii_digit())).then(|| id.to_string())
}

/// One node of a partition: its Slurm name, host name and address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlurmNode {
    pub name: String,
    pub hostname: String,
    pub addr: String,
    pub partition: String,
    pub state: String,
}

/// `sinfo -h -N -o '%N|%n|%o|%P|%T'`; the default partition carries a `*`, removed here.
pub fn parse_sinfo_nodes(text: &str) -> Vec<SlurmNode> {
    text.lines()
        .filter_map(|line| {
            let f: Vec<&str> = line.trim().split('|').collect();
            (f.len() >= 5 && !f[0].is_empty()).then(|| SlurmNode {
                name: f[0].to_string(),
                hostname: f[1].to_string(),
                addr: f[2].to_string(),
                partition: f[3].trim_end_matches('*').to_string(),
                state: f[4].to_string(),
            })
        })
        .collect()
}

/// The `sinfo` arguments [`parse_sinfo_nodes`] reads.
pub fn sinfo_args() -> Vec<String> {
    ["-h", "-N", "-o", "%N|%n|%o|%P|%T"]
        .map(String::from)
        .to_vec()
}

/// The default partition of `sinfo -h -o %P` output (the one marked `*`).
pub fn default_partition(text: &str) -> Option<String> {
    text.lines()
        .map(str::trim)
        .find_map(|l| l.strip_suffix('*'))
        .map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> String {
        let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/slurm")
            .join(name);
        std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
    }

    #[test]
    fn squeue_rows_of_a_running_array() {
        let rows = parse_squeue(&fixture("squeue-array.txt"), "1");
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].task, 3);
        assert_eq!(rows[0].state, JobState::Pending);
        assert_eq!(rows[0].detail, "Resources");
        assert_eq!((rows[1].task, rows[1].node.as_str()), (2, "vm"));
        assert_eq!(rows[1].state, JobState::Running);
        // Another job's rows and junk are skipped.
        assert!(parse_squeue(&fixture("squeue-array.txt"), "11").is_empty());
        assert!(parse_squeue("garbage\n|||\n1_x|RUNNING|n|r\n", "1").is_empty());
        let pending = parse_squeue("4_[2-4%1]|PENDING||JobArrayTaskLimit\n", "4");
        assert_eq!(
            pending.iter().map(|r| r.task).collect::<Vec<_>>(),
            [2, 3, 4]
        );
    }

    #[test]
    fn scontrol_lines_of_an_ended_array() {
        let rows = parse_scontrol(&fixture("scontrol-show-job-array.txt"), "7");
        let by = |t: u32| rows.iter().find(|r| r.task == t).unwrap();
        assert_eq!(rows.len(), 3);
        assert_eq!(by(0).state, JobState::Failed);
        assert_eq!(by(0).detail, "3:0");
        assert_eq!(by(0).node, "vm");
        assert_eq!(by(1).state, JobState::Cancelled);
        assert_eq!(by(1).elapsed_s, Some(3));
        assert_eq!(by(2).state, JobState::Cancelled);
        assert_eq!(by(2).node, "", "cancelled while pending: no node");
        assert!(parse_scontrol(&fixture("scontrol-show-job-array.txt"), "8").is_empty());
    }

    #[test]
    fn sacct_rows_and_states() {
        let rows = parse_sacct(&fixture("sacct-array.txt"), "12");
        let st: Vec<(u32, String)> = rows.iter().map(|r| (r.task, r.state.name())).collect();
        assert_eq!(
            st,
            [
                (3, "PENDING".into()),
                (4, "PENDING".into()),
                (0, "COMPLETED".into()),
                (1, "FAILED".into()),
                (2, "TIMEOUT".into()),
                (5, "CANCELLED".into()),
                (6, "RUNNING".into()),
            ]
        );
        assert_eq!(rows[0].node, "");
        assert_eq!(rows[4].elapsed_s, Some(600));
        assert!(rows[6].state.is_active() && !rows[4].state.is_active());
        assert_eq!(
            JobState::parse("NODE_FAIL"),
            JobState::Ended("NODE_FAIL".into())
        );
        assert!(JobState::parse("COMPLETING").is_active());
    }

    #[test]
    fn sinfo_sbatch_and_times() {
        let nodes = parse_sinfo_nodes(&fixture("sinfo-nodes.txt"));
        assert_eq!(nodes.len(), 1);
        assert_eq!(nodes[0].name, "vm");
        assert_eq!(nodes[0].partition, "vbtest");
        assert_eq!(
            default_partition("debug\nbatch*\n").as_deref(),
            Some("batch")
        );
        assert_eq!(default_partition("debug\n"), None);
        assert_eq!(parse_sbatch("42\n").as_deref(), Some("42"));
        assert_eq!(parse_sbatch("42;cluster1\n").as_deref(), Some("42"));
        assert_eq!(parse_sbatch("Submitted batch job 42"), None);
        assert_eq!(run_time("00:00:41"), Some(41));
        assert_eq!(run_time("1-02:00:00"), Some(93_600));
        assert_eq!(run_time("05:07"), Some(307));
        assert_eq!(run_time("UNLIMITED"), None);
        assert_eq!(ranges("9-3,x,2"), [2]);
    }

    #[test]
    fn commands_are_bounded_and_missing_ones_named() {
        let e = run("no-such-slurm-command", &[]).unwrap_err();
        assert!(matches!(e, SlurmError::NotFound { .. }), "{e}");
        let e = run_bounded("sleep", &["5".into()], Duration::from_millis(200)).unwrap_err();
        assert!(matches!(e, SlurmError::TimedOut { .. }), "{e}");
        let e = run("sh", &["-c".into(), "echo boom >&2; exit 3".into()]).unwrap_err();
        assert!(e.to_string().contains("boom"), "{e}");
        assert_eq!(run("echo", &["hi".into()]).unwrap(), "hi\n");
    }
}
