//! Waiting for an array job and writing its `index.json` (rule 5 of [`super`]).

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use super::slurm::{self, JobState, TaskRow};
use super::{BatchError, Submitted, Task, TaskDone, TaskFile};
use crate::executor::run_info;
use crate::matrix::{self, Index};
use gt_results::results::{
    now_rfc3339, Provenance, RunResult, RunStatus, SchedulerInfo, Timings, RESULTS_FILE,
};

/// Polls in a row a task must be missing from squeue, without a result, to count as ended.
const GONE_POLLS: u32 = 2;
/// squeue failures in a row before waiting gives up (the job goes on; collect again later).
const SQUEUE_FAILURES: u32 = 20;

/// The status of a run whose task ended without writing its result, from Slurm's last word
/// on the task (`row`, None when neither sacct nor scontrol still knows it).
pub fn lost_status(task: usize, row: Option<&TaskRow>) -> RunStatus {
    match row {
        Some(r) if r.state == JobState::Timeout => RunStatus::TimedOut {
            after_s: r.elapsed_s.unwrap_or(0) as f64,
        },
        Some(r) => RunStatus::Failed {
            reason: format!(
                "slurm task {task} ended {} (exit {}){} without a result",
                r.state.name(),
                if r.detail.is_empty() { "?" } else { &r.detail },
                if r.node.is_empty() {
                    String::new()
                } else {
                    format!(" on {}", r.node)
                }
            ),
        },
        None => RunStatus::Failed {
            reason: format!(
                "slurm task {task} ended without a result; Slurm no longer knows its state \
                 (see slurm/task-{task}.log)"
            ),
        },
    }
}

/// Slurm's final word on the tasks of `job`: sacct, else the controller's memory.
fn final_rows(job: &str) -> BTreeMap<u32, TaskRow> {
    let rows = match slurm::run("sacct", &slurm::sacct_args(job)) {
        Ok(t) if !slurm::parse_sacct(&t, job).is_empty() => slurm::parse_sacct(&t, job),
        _ => {
            let args = ["-o", "show", "job", job].map(String::from);
            slurm::run("scontrol", &args)
                .map(|t| slurm::parse_scontrol(&t, job))
                .unwrap_or_default()
        }
    };
    rows.into_iter().map(|r| (r.task, r)).collect()
}

/// A results.json for each run of a task that left none, saying why.
fn record_lost(tf: &TaskFile, k: usize, t: &Task, row: Option<&TaskRow>) -> Vec<RunResult> {
    let status = lost_status(k, row);
    t.specs
        .iter()
        .zip(&t.planned)
        .enumerate()
        .map(|(i, (spec, p))| {
            if let Ok(r) = RunResult::read(&spec.run_dir.join(RESULTS_FILE)) {
                return r;
            }
            let prov = Provenance {
                accelerator: spec.accel.as_str().into(),
                started_at: now_rfc3339(),
                seeds: [("run".to_string(), spec.seed)].into_iter().collect(),
                scheduler: Some(SchedulerInfo {
                    name: "slurm".into(),
                    array_task_id: Some(k as u32),
                    partition: tf.partition.clone(),
                    node: row.map(|r| r.node.clone()).unwrap_or_default(),
                    exclusive: tf.exclusive,
                    ..Default::default()
                }),
                ..Default::default()
            };
            let mut r = RunResult::failed(
                run_info(spec, p.repeat, t.orderings.get(i).and_then(Option::as_ref)),
                prov,
                String::new(),
                Timings::default(),
            );
            r.status = status.clone();
            let _ = r.write(&spec.run_dir);
            r
        })
        .collect()
}

fn counts(rows: &[TaskRow]) -> String {
    let pending = rows.iter().filter(|r| r.state == JobState::Pending).count();
    let mut nodes: Vec<&str> = rows
        .iter()
        .filter(|r| r.state != JobState::Pending)
        .map(|r| r.node.as_str())
        .collect();
    nodes.sort();
    nodes.dedup();
    let running = rows.len() - pending;
    format!(
        "{pending} pending, {running} running{}",
        if nodes.is_empty() {
            String::new()
        } else {
            format!(" ({})", nodes.join(","))
        }
    )
}

/// Waits for the array job of the matrix in `out` (progress from squeue through `say`), then
/// writes and returns its `index.json`.
pub fn collect(
    out: &Path,
    poll: Duration,
    say: &mut dyn FnMut(String),
) -> Result<Index, BatchError> {
    let tf = TaskFile::read(out)?;
    let job = Submitted::read(out)?;
    let reported = wait_for_tasks(out, &tf, &job.job_id, poll, say)?;
    let lost: Vec<usize> = (0..tf.tasks.len()).filter(|k| !reported[*k]).collect();
    let finals = if lost.is_empty() {
        BTreeMap::new()
    } else {
        final_rows(&job.job_id)
    };
    let mut index = tf.index.clone();
    for (k, t) in tf.tasks.iter().enumerate() {
        let recs = task_records(out, &tf, k, t, finals.get(&(k as u32)), say)?;
        for (p, (r, a)) in t.planned.iter().zip(recs) {
            index.runs.push(matrix::index_entry(p, &r, a));
        }
    }
    index.write(out)?;
    Ok(index)
}

/// Polls squeue and the tasks' done files until every task has reported or has been missing
/// from squeue for [`GONE_POLLS`] polls; each finished run's line and each new squeue summary go
/// to `say`. Which tasks reported.
fn wait_for_tasks(
    out: &Path,
    tf: &TaskFile,
    job_id: &str,
    poll: Duration,
    say: &mut dyn FnMut(String),
) -> Result<Vec<bool>, BatchError> {
    let n = tf.tasks.len();
    let runs: usize = tf.tasks.iter().map(|t| t.planned.len()).sum();
    let mut reported = vec![false; n];
    let mut gone = vec![0u32; n];
    let mut failures = 0;
    let mut last = String::new();
    let mut shown = 0;
    loop {
        let rows = match slurm::run("squeue", &slurm::squeue_args(job_id)) {
            Ok(t) => {
                failures = 0;
                Some(slurm::parse_squeue(&t, job_id))
            }
            Err(e) => {
                failures += 1;
                if failures >= SQUEUE_FAILURES {
                    return Err(BatchError::Slurm(e));
                }
                None
            }
        };
        for k in 0..n {
            let done = TaskDone::read(out, k);
            if let (Some(d), false) = (&done, reported[k]) {
                reported[k] = true;
                for p in &tf.tasks[k].planned {
                    if let Ok(r) = RunResult::read(&out.join(&p.dir).join(RESULTS_FILE)) {
                        let line =
                            matrix::run_line(shown, runs, p, &r, tf.primary_metric.as_deref());
                        say(format!("{line} on {}", d.node));
                    }
                    shown += 1;
                }
            }
            match &rows {
                Some(rows) if done.is_none() && !rows.iter().any(|r| r.task as usize == k) => {
                    gone[k] += 1
                }
                Some(_) => gone[k] = 0,
                None => {}
            }
        }
        let finished = reported.iter().filter(|r| **r).count();
        if let Some(rows) = &rows {
            let line = format!(
                "slurm job {job_id}: {}, {finished}/{n} tasks done",
                counts(rows)
            );
            if line != last {
                say(line.clone());
                last = line;
            }
        }
        if (0..n).all(|k| reported[k] || gone[k] >= GONE_POLLS) {
            return Ok(reported);
        }
        std::thread::sleep(poll);
    }
}

/// Task `k`'s results with their attempt counts: those it wrote when it reported done, else
/// a failed result per run saying why (`row`: Slurm's last word on it), each announced to `say`.
fn task_records(
    out: &Path,
    tf: &TaskFile,
    k: usize,
    t: &Task,
    row: Option<&TaskRow>,
    say: &mut dyn FnMut(String),
) -> Result<Vec<(RunResult, u32)>, BatchError> {
    let Some(d) = TaskDone::read(out, k) else {
        let recs = record_lost(tf, k, t, row);
        for r in &recs {
            say(format!(
                "run {} failed: {:?}",
                r.info.run_dir.display(),
                r.status
            ));
        }
        return Ok(recs.into_iter().map(|r| (r, 1)).collect());
    };
    t.specs
        .iter()
        .zip(d.attempts.iter().copied().chain(std::iter::repeat(1)))
        .map(|(s, a)| {
            let r = RunResult::read(&s.run_dir.join(RESULTS_FILE)).map_err(|e| BatchError::Io {
                path: s.run_dir.clone(),
                msg: e.to_string(),
            })?;
            Ok((r, a))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(state: &str, node: &str, detail: &str, el: Option<u64>) -> TaskRow {
        TaskRow {
            task: 2,
            state: JobState::parse(state),
            node: node.into(),
            detail: detail.into(),
            elapsed_s: el,
        }
    }

    #[test]
    fn a_lost_task_is_failed_or_timed_out_as_locally() {
        assert_eq!(
            lost_status(2, Some(&row("TIMEOUT", "n1", "0:15", Some(780)))),
            RunStatus::TimedOut { after_s: 780.0 }
        );
        let RunStatus::Failed { reason } =
            lost_status(2, Some(&row("CANCELLED by 0", "n1", "0:15", Some(3))))
        else {
            panic!()
        };
        assert_eq!(
            reason,
            "slurm task 2 ended CANCELLED (exit 0:15) on n1 without a result"
        );
        let RunStatus::Failed { reason } = lost_status(2, Some(&row("NODE_FAIL", "", "", None)))
        else {
            panic!()
        };
        assert!(reason.contains("NODE_FAIL (exit ?) without"), "{reason}");
        let RunStatus::Failed { reason } = lost_status(5, None) else {
            panic!()
        };
        assert!(reason.contains("slurm/task-5.log"), "{reason}");
    }

    #[test]
    fn progress_counts_pending_and_running_nodes() {
        let rows = vec![
            row("PENDING", "", "Resources", None),
            row("RUNNING", "n2", "None", None),
            row("RUNNING", "n1", "None", None),
            row("COMPLETING", "n1", "None", None),
        ];
        assert_eq!(counts(&rows), "1 pending, 3 running (n1,n2)");
        assert_eq!(counts(&[]), "0 pending, 0 running");
    }
}
