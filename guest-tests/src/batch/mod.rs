//! Batch executors: a matrix handed to a scheduler instead of booted here. Slurm is the one
//! there is: the planned runs become one job array, submitted with `sbatch`.
//!
//! 1. The plan, seeds and run specs are those of the local executor ([`matrix::plan`],
//!    [`matrix::run_spec`]); they are computed here, before submission, and written whole to
//!    `OUT/slurm/tasks.json`, so a node runs exactly what was planned. Kernels and the initramfs
//!    are built before submission, never per task.
//! 2. One array task = one group of [`matrix::groups`]: one run directory in the interleaved
//!    design, the kernels of one repeat (booted together on one node) in the paired design. A
//!    task runs `guest-tests run-one OUT K` on its node ([`run_one`]).
//! 3. Bad input (no Slurm client, an unknown partition, a path the nodes cannot see, options
//!    the executor owns) is found before anything is built, created or submitted.
//! 4. By default every task asks for a whole node (`--exclusive`); each result's provenance
//!    names the node, what else Slurm ran there, and the host's load before and after.
//! 5. `index.json` is written by [`collect`] exactly as the local executor writes it, from each
//!    run's results.json; a task that ended without one (cancelled, killed at its time limit,
//!    node failure) becomes a failed (or timed-out) run with a results.json that says why.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::matrix::{self, Index, MatrixConfig, MatrixError, Planned};
use gt_launch::rerun_file::RerunInfo;
use gt_launch::RunSpec;
use gt_ordering::OrderingRecord;
use gt_results::results::SchedulerInfo;

mod collect;
pub mod shared;
pub mod slurm;
mod submit;

pub use collect::{collect, lost_status};
pub use submit::{
    check_slurm, dry_run_argv, run_one, sbatch_argv, submit, SubmitOutcome, Submitted,
};

/// The executor's own files, under the matrix directory.
pub const SLURM_DIR: &str = "slurm";

/// Errors of a batch executor.
#[derive(Debug, thiserror::Error)]
pub enum BatchError {
    /// Bad input: one line, exit code 2, nothing submitted.
    #[error("{0}")]
    Input(String),
    #[error(transparent)]
    Matrix(#[from] MatrixError),
    #[error(transparent)]
    Slurm(#[from] slurm::SlurmError),
    #[error("{path}: {msg}")]
    Io { path: PathBuf, msg: String },
}

impl BatchError {
    /// Exit code 2 (bad input) or 1.
    pub fn exit_code(&self) -> u8 {
        match self {
            BatchError::Input(_) | BatchError::Matrix(MatrixError::Input(_)) => 2,
            _ => 1,
        }
    }
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> BatchError {
    let path = path.to_path_buf();
    move |e| BatchError::Io {
        path,
        msg: e.to_string(),
    }
}

/// Options of `run --executor slurm`.
#[derive(Debug, Clone, PartialEq)]
pub struct SlurmOptions {
    /// None: the cluster's default partition.
    pub partition: Option<String>,
    /// Passed to sbatch before the script (`--slurm-args`).
    pub extra_args: Vec<String>,
    /// Submit and return; `guest-tests collect OUT` waits and writes index.json.
    pub detach: bool,
    /// Every task asks for a whole node (`--exclusive`).
    pub exclusive: bool,
    /// How often squeue is asked while waiting.
    pub poll: Duration,
}

/// sbatch options the executor sets itself (a user's copy would break the array).
const OWNED: &[&str] = &[
    "--array",
    "-a",
    "--output",
    "-o",
    "--error",
    "-e",
    "--chdir",
    "-D",
    "--parsable",
    "--wrap",
    "--job-name",
    "-J",
];

impl SlurmOptions {
    /// Validates `--slurm-args` (split at whitespace) and the rest.
    pub fn new(
        partition: Option<String>,
        slurm_args: Option<&str>,
        detach: bool,
        share_node: bool,
    ) -> Result<Self, String> {
        if partition
            .as_deref()
            .is_some_and(|p| p.is_empty() || p.contains(char::is_whitespace))
        {
            return Err("--partition: give one partition name".into());
        }
        let extra_args: Vec<String> = slurm_args
            .unwrap_or("")
            .split_whitespace()
            .map(String::from)
            .collect();
        for a in &extra_args {
            let flag = a.split('=').next().unwrap_or(a);
            if OWNED.contains(&flag) {
                return Err(format!(
                    "--slurm-args: {flag} is set by the executor (one array task per planned run)"
                ));
            }
            if flag == "--exclusive" && share_node {
                return Err("--slurm-args --exclusive contradicts --slurm-share-node".into());
            }
            if flag == "-p" || flag == "--partition" {
                return Err("--slurm-args: give the partition with --partition".into());
            }
        }
        Ok(SlurmOptions {
            partition,
            extra_args,
            detach,
            exclusive: !share_node,
            poll: Duration::from_secs(3),
        })
    }
}

/// One array task: the runs it boots (one, or the kernels of a paired repeat).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Task {
    pub planned: Vec<Planned>,
    pub specs: Vec<RunSpec>,
    pub reruns: Vec<RerunInfo>,
    /// Each run's kernel's memory-model check, for its results.json (`matrix::ordering_of`).
    #[serde(default)]
    pub orderings: Vec<Option<OrderingRecord>>,
}

/// `OUT/slurm/tasks.json`: everything the nodes and [`collect`] need.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TaskFile {
    /// The index as the local executor starts it (no runs yet).
    pub index: Index,
    pub retries: u32,
    pub partition: String,
    pub exclusive: bool,
    pub primary_metric: Option<String>,
    pub tasks: Vec<Task>,
}

fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T, BatchError> {
    let text = std::fs::read_to_string(path).map_err(io_err(path))?;
    serde_json::from_str(&text).map_err(|e| BatchError::Io {
        path: path.to_path_buf(),
        msg: e.to_string(),
    })
}

/// Writes `value` as JSON atomically (a reader on another node never sees half a file).
fn write_json<T: Serialize>(path: &Path, value: &T) -> Result<(), BatchError> {
    let text = serde_json::to_string_pretty(value).map_err(|e| BatchError::Io {
        path: path.to_path_buf(),
        msg: e.to_string(),
    })?;
    let tmp = path.with_extension("json.tmp");
    std::fs::write(&tmp, text + "\n").map_err(io_err(&tmp))?;
    std::fs::rename(&tmp, path).map_err(io_err(path))
}

impl TaskFile {
    pub fn path(out: &Path) -> PathBuf {
        out.join(SLURM_DIR).join("tasks.json")
    }
    pub fn read(out: &Path) -> Result<TaskFile, BatchError> {
        read_json(&Self::path(out))
    }
}

/// `OUT/slurm/done/K.json`: written by task K after its runs' results.json.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskDone {
    pub task: usize,
    pub node: String,
    /// Boots each run took, in the task's order.
    pub attempts: Vec<u32>,
}

impl TaskDone {
    pub fn path(out: &Path, task: usize) -> PathBuf {
        out.join(SLURM_DIR)
            .join("done")
            .join(format!("{task}.json"))
    }
    pub fn read(out: &Path, task: usize) -> Option<TaskDone> {
        read_json(&Self::path(out, task)).ok()
    }
}

/// The tasks of a matrix: the local executor's groups, each with its run specs.
pub fn plan_tasks(cfg: &MatrixConfig, prep: &matrix::Prepared) -> Result<Vec<Task>, BatchError> {
    let planned = matrix::plan(&cfg.kernels, &cfg.variants, cfg.repeat, cfg.boot.seed);
    matrix::groups(cfg.design, &planned)
        .into_iter()
        .map(|g| {
            let specs = g
                .iter()
                .map(|p| matrix::run_spec(cfg, prep, p))
                .collect::<Result<Vec<_>, _>>()?;
            // rerun.json as the local executor writes it; the specs carry the accelerator
            // resolved here, once for the matrix.
            let reruns = g.iter().map(|p| matrix::rerun_info(cfg, p)).collect();
            let orderings = g
                .iter()
                .map(|p| matrix::ordering_of(cfg, prep, p))
                .collect();
            Ok(Task {
                planned: g,
                specs,
                reruns,
                orderings,
            })
        })
        .collect()
}

/// The scheduler's account of the task running in this process (Slurm's environment).
pub fn scheduler_info(tf: &TaskFile, env: &dyn Fn(&str) -> Option<String>) -> SchedulerInfo {
    SchedulerInfo {
        name: "slurm".into(),
        job_id: env("SLURM_ARRAY_JOB_ID")
            .or_else(|| env("SLURM_JOB_ID"))
            .unwrap_or_default(),
        array_task_id: env("SLURM_ARRAY_TASK_ID").and_then(|s| s.parse().ok()),
        partition: env("SLURM_JOB_PARTITION").unwrap_or_else(|| tf.partition.clone()),
        node: env("SLURMD_NODENAME").unwrap_or_default(),
        cpus_on_node: env("SLURM_CPUS_ON_NODE").and_then(|s| s.parse().ok()),
        exclusive: tf.exclusive,
        other_jobs: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slurm_options_refuse_what_the_executor_owns() {
        for (args, needle) in [
            ("--array=0-3", "--array is set by the executor"),
            ("--qos=x -o /tmp/log", "-o is set"),
            ("--wrap true", "--wrap"),
            ("-p other", "--partition"),
        ] {
            let e = SlurmOptions::new(None, Some(args), false, false).unwrap_err();
            assert!(e.contains(needle), "{args}: {e}");
            assert!(!e.contains('\n'));
        }
        let e = SlurmOptions::new(None, Some("--exclusive"), false, true).unwrap_err();
        assert!(e.contains("contradicts"), "{e}");
        assert!(SlurmOptions::new(Some("a b".into()), None, false, false).is_err());
        let o =
            SlurmOptions::new(Some("p".into()), Some(" --qos=hi  --mem=8G "), true, false).unwrap();
        assert_eq!(o.extra_args, ["--qos=hi", "--mem=8G"]);
        assert!(o.exclusive && o.detach);
        assert!(
            !SlurmOptions::new(None, None, false, true)
                .unwrap()
                .exclusive
        );
    }

    #[test]
    fn scheduler_info_reads_slurms_environment() {
        let tf = TaskFile {
            index: Index {
                suite: "s".into(),
                kernels: vec![],
                repeat: 1,
                accel: gt_launch::qemu::Accel::Tcg,
                runs: vec![],
                design: matrix::Design::Interleaved,
                sequential: None,
            },
            retries: 1,
            partition: "batch".into(),
            exclusive: true,
            primary_metric: None,
            tasks: vec![],
        };
        let env = |k: &str| {
            match k {
                "SLURM_ARRAY_JOB_ID" => Some("41"),
                "SLURM_JOB_ID" => Some("44"),
                "SLURM_ARRAY_TASK_ID" => Some("3"),
                "SLURMD_NODENAME" => Some("n7"),
                "SLURM_CPUS_ON_NODE" => Some("64"),
                _ => None,
            }
            .map(String::from)
        };
        let s = scheduler_info(&tf, &env);
        assert_eq!(s.job_id, "41");
        assert_eq!(s.array_task_id, Some(3));
        assert_eq!(s.node, "n7");
        assert_eq!(s.partition, "batch");
        assert_eq!(s.cpus_on_node, Some(64));
        assert!(s.exclusive);
    }
}
