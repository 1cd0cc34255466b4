//! Submission (checks, task file, sbatch) and the node's side of a task (`run-one`).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::slurm::{self, parse_sinfo_nodes, SlurmError, SlurmNode};
use super::{
    io_err, plan_tasks, read_json, scheduler_info, shared, write_json, BatchError, SlurmOptions,
    TaskDone, TaskFile, SLURM_DIR,
};
use crate::matrix::{self, Index, MatrixConfig};
use gt_results::results::RESULTS_FILE;

/// `OUT/slurm/job.json`: the submitted array job.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Submitted {
    pub job_id: String,
    pub partition: String,
    pub tasks: usize,
    pub submitted_at: String,
    pub sbatch_argv: Vec<String>,
}

impl Submitted {
    pub fn path(out: &Path) -> PathBuf {
        out.join(SLURM_DIR).join("job.json")
    }
    pub fn read(out: &Path) -> Result<Submitted, BatchError> {
        read_json(&Self::path(out))
    }
}

fn on_path(prog: &str) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::env::var_os("PATH").is_some_and(|p| {
        std::env::split_paths(&p).any(|d| {
            d.join(prog)
                .metadata()
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
    })
}

fn absolute(p: &Path) -> PathBuf {
    std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf())
}

fn input(e: SlurmError) -> BatchError {
    BatchError::Input(format!("--executor slurm: {e}"))
}

/// The partition to submit to and its nodes, after the checks of rule 3.
fn preflight(
    cfg: &MatrixConfig,
    opts: &SlurmOptions,
) -> Result<(String, Vec<SlurmNode>), BatchError> {
    check_slurm(&cfg.out, cfg.boot.host.backend_bin.as_deref(), opts)
}

/// What `submit` checks before anything is built or submitted, for any command that hands boots
/// to Slurm: the client tools, the partition and its nodes, and that `out`, the image cache,
/// the harness and the backend are on paths the nodes see. Returns the partition and its nodes.
pub fn check_slurm(
    out: &Path,
    backend_bin: Option<&Path>,
    opts: &SlurmOptions,
) -> Result<(String, Vec<SlurmNode>), BatchError> {
    for prog in ["sbatch", "squeue", "sinfo"] {
        if !on_path(prog) {
            return Err(BatchError::Input(format!(
                "--executor slurm: {prog} not found on PATH (install Slurm's client, e.g. slurm-client)"
            )));
        }
    }
    let parts = slurm::run("sinfo", &["-h".into(), "-o".into(), "%P".into()]).map_err(input)?;
    let known: Vec<String> = parts
        .lines()
        .map(|l| l.trim().trim_end_matches('*').to_string())
        .filter(|l| !l.is_empty())
        .collect();
    let partition = match &opts.partition {
        Some(p) if known.contains(p) => p.clone(),
        Some(p) => {
            return Err(BatchError::Input(format!(
                "--partition '{p}' does not exist (known: {})",
                known.join(", ")
            )))
        }
        None => slurm::default_partition(&parts).ok_or_else(|| {
            BatchError::Input(format!(
                "the cluster has no default partition: give --partition (known: {})",
                known.join(", ")
            ))
        })?,
    };
    let nodes: Vec<SlurmNode> =
        parse_sinfo_nodes(&slurm::run("sinfo", &slurm::sinfo_args()).map_err(input)?)
            .into_iter()
            .filter(|n| n.partition == partition)
            .collect();
    if nodes.is_empty() {
        return Err(BatchError::Input(format!(
            "--partition '{partition}' has no nodes"
        )));
    }
    let hostname = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_default();
    let exe = std::env::current_exe().map_err(|e| BatchError::Input(e.to_string()))?;
    let mut paths: Vec<(String, PathBuf)> = vec![
        ("--out".into(), absolute(out)),
        (
            "the image cache (VB_CACHE)".into(),
            absolute(&gt_suite::paths::cache_dir()),
        ),
        ("the harness".into(), exe),
    ];
    if let Some(b) = backend_bin {
        paths.push(("--backend-bin".into(), absolute(b)));
    }
    let typed: Vec<(String, &Path, Option<i64>)> = paths
        .iter()
        .map(|(w, p)| (w.clone(), p.as_path(), shared::fs_type(p)))
        .collect();
    shared::check(&nodes, &hostname, &typed).map_err(BatchError::Input)?;
    Ok((partition, nodes))
}

/// The task time limit: every boot a run may take (retries), each its timeout plus two
/// minutes for the initrd and the backend, in whole minutes.
fn time_limit_min(cfg: &MatrixConfig) -> u64 {
    let per_boot = cfg.boot.timeout.as_secs() + 120;
    (u64::from(cfg.retries) + 1) * per_boot / 60 + 1
}

/// The sbatch command line for `tasks` array tasks of the matrix in `out` (absolute).
pub fn sbatch_argv(
    opts: &SlurmOptions,
    partition: &str,
    out: &Path,
    suite: &str,
    tasks: usize,
    time_min: u64,
) -> Vec<String> {
    let dir = out.join(SLURM_DIR);
    let mut a = vec![
        "--parsable".to_string(),
        format!("--job-name=guest-tests-{suite}"),
        format!("--array=0-{}", tasks.saturating_sub(1)),
        format!("--partition={partition}"),
        format!("--output={}", dir.join("task-%a.log").display()),
        format!("--chdir={}", out.display()),
        "--nodes=1".to_string(),
        "--ntasks=1".to_string(),
    ];
    if opts.exclusive {
        a.push("--exclusive".into());
    }
    let has_time = opts
        .extra_args
        .iter()
        .any(|x| x == "-t" || x.starts_with("--time") || (x.starts_with("-t") && x.len() > 2));
    if !has_time {
        a.push(format!("--time={time_min}"));
    }
    a.extend(opts.extra_args.iter().cloned());
    a.push(dir.join("array.sh").display().to_string());
    a
}

/// What `run --executor slurm --dry-run` prints besides the plan.
pub fn dry_run_argv(cfg: &MatrixConfig, opts: &SlurmOptions) -> Vec<String> {
    let planned = matrix::plan(&cfg.kernels, &cfg.variants, cfg.repeat, cfg.boot.seed);
    let n = matrix::groups(cfg.design, &planned).len();
    let part = opts.partition.clone().unwrap_or_else(|| "<default>".into());
    let mut a = vec!["sbatch".to_string()];
    a.extend(sbatch_argv(
        opts,
        &part,
        &absolute(&cfg.out),
        &cfg.boot.suite.name,
        n,
        time_limit_min(cfg),
    ));
    a
}

fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// What happened to a submission.
#[derive(Debug)]
pub enum SubmitOutcome {
    Detached(Submitted),
    Finished(Index),
}

/// Checks, builds the images, writes the task file and submits the array (rule 1-3); waits
/// for it and collects unless `opts.detach`.
pub fn submit(
    cfg: &MatrixConfig,
    opts: &SlurmOptions,
    say: &mut dyn FnMut(String),
) -> Result<SubmitOutcome, BatchError> {
    let mut cfg = cfg.clone();
    cfg.out = absolute(&cfg.out);
    let (partition, nodes) = preflight(&cfg, opts)?;
    let mut prep = matrix::prepare(&cfg)?;
    for k in &mut prep.kernels {
        k.bzimage = absolute(&k.bzimage);
        k.initramfs = absolute(&k.initramfs);
    }
    let tasks = plan_tasks(&cfg, &prep)?;
    let dir = cfg.out.join(SLURM_DIR);
    std::fs::create_dir_all(dir.join("done")).map_err(io_err(&dir))?;
    let index = matrix::new_index(&cfg, prep.accel);
    index.write(&cfg.out)?;
    let tf = TaskFile {
        index,
        retries: cfg.retries,
        partition: partition.clone(),
        exclusive: opts.exclusive,
        primary_metric: prep.suite.spec.primary_metric.clone(),
        tasks,
    };
    write_json(&TaskFile::path(&cfg.out), &tf)?;
    write_array_script(&cfg.out, &dir)?;
    let argv = sbatch_argv(
        opts,
        &partition,
        &cfg.out,
        &cfg.boot.suite.name,
        tf.tasks.len(),
        time_limit_min(&cfg),
    );
    let job_id = slurm::parse_sbatch(&slurm::run("sbatch", &argv)?).ok_or_else(|| {
        BatchError::Slurm(SlurmError::Failed {
            prog: "sbatch".into(),
            msg: "no job id in its output".into(),
        })
    })?;
    let sub = Submitted {
        job_id,
        partition,
        tasks: tf.tasks.len(),
        submitted_at: gt_results::results::now_rfc3339(),
        sbatch_argv: argv,
    };
    write_json(&Submitted::path(&cfg.out), &sub)?;
    let names: Vec<&str> = nodes.iter().map(|n| n.name.as_str()).collect();
    say(format!(
        "slurm job {}: {} array tasks on partition {} (nodes {}){}",
        sub.job_id,
        sub.tasks,
        sub.partition,
        names.join(","),
        if opts.exclusive {
            ", one node each"
        } else {
            ""
        }
    ));
    if opts.detach {
        return Ok(SubmitOutcome::Detached(sub));
    }
    super::collect(&cfg.out, opts.poll, say).map(SubmitOutcome::Finished)
}

/// `<dir>/array.sh`, the array job's script: task K runs `guest-tests run-one OUT K` with this
/// cache.
fn write_array_script(out: &Path, dir: &Path) -> Result<(), BatchError> {
    let exe = std::env::current_exe().map_err(io_err(Path::new("/proc/self/exe")))?;
    let script = dir.join("array.sh");
    let text = format!(
        "#!/bin/sh\n\
         # Written by `guest-tests run --executor slurm`: array task K runs the planned runs of\n\
         # task K in tasks.json on the node Slurm gives it.\n\
         export VB_CACHE={}\n\
         exec {} run-one {} \"$SLURM_ARRAY_TASK_ID\"\n",
        sh_quote(
            &absolute(&gt_suite::paths::cache_dir())
                .display()
                .to_string()
        ),
        sh_quote(&exe.display().to_string()),
        sh_quote(&out.display().to_string()),
    );
    std::fs::write(&script, text).map_err(io_err(&script))?;
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .map_err(io_err(&script))?;
    Ok(())
}

/// Other jobs Slurm runs on `node` now (`id user name`), this task's own excluded.
fn other_jobs(node: &str, own: &str) -> Vec<String> {
    if node.is_empty() {
        return Vec::new();
    }
    let args = ["-h", "-w", node, "-t", "RUNNING", "-o", "%i|%u|%j"].map(String::from);
    match slurm::run("squeue", &args) {
        Ok(text) => text
            .lines()
            .filter_map(|l| {
                let f: Vec<&str> = l.trim().split('|').collect();
                (f.len() == 3 && f[0] != own).then(|| f.join(" "))
            })
            .collect(),
        Err(e) => vec![format!("unknown ({e})")],
    }
}

/// The node's side of array task `task`: boots its runs as the local executor would, adds the
/// scheduler's account to each results.json, then writes `done/K.json`.
pub fn run_one(out: &Path, task: usize) -> Result<(), BatchError> {
    let tf = TaskFile::read(out)?;
    let t = tf.tasks.get(task).ok_or_else(|| {
        BatchError::Input(format!(
            "task {task}: {} has {} tasks",
            TaskFile::path(out).display(),
            tf.tasks.len()
        ))
    })?;
    let env = |k: &str| std::env::var(k).ok();
    let mut sched = scheduler_info(&tf, &env);
    let own = format!(
        "{}_{}",
        sched.job_id,
        sched.array_task_id.map_or(String::new(), |t| t.to_string())
    );
    sched.other_jobs = other_jobs(&sched.node, &own);
    let recs = matrix::run_group(&t.specs, t.reruns.clone(), &t.orderings, tf.retries)?;
    let mut attempts = Vec::new();
    for (spec, (mut rec, n)) in t.specs.iter().zip(recs) {
        rec.provenance.scheduler = Some(sched.clone());
        rec.write(&spec.run_dir).map_err(|e| BatchError::Io {
            path: spec.run_dir.join(RESULTS_FILE),
            msg: e.to_string(),
        })?;
        println!(
            "{}: {:?} on {}",
            spec.run_dir.display(),
            rec.status,
            sched.node
        );
        attempts.push(n);
    }
    let done = TaskDone {
        task,
        node: sched.node.clone(),
        attempts,
    };
    write_json(&TaskDone::path(out, task), &done)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sbatch_argv_is_one_array_with_whole_nodes() {
        let o = SlurmOptions::new(None, Some("--qos=hi"), false, false).unwrap();
        let a = sbatch_argv(&o, "batch", Path::new("/shared/m"), "smoke", 4, 11);
        assert_eq!(a[0], "--parsable");
        assert!(a.contains(&"--array=0-3".to_string()));
        assert!(a.contains(&"--partition=batch".to_string()));
        assert!(a.contains(&"--output=/shared/m/slurm/task-%a.log".to_string()));
        assert!(a.contains(&"--exclusive".to_string()));
        assert!(a.contains(&"--time=11".to_string()));
        assert_eq!(a[a.len() - 2], "--qos=hi");
        assert_eq!(a.last().unwrap(), "/shared/m/slurm/array.sh");
        let shared = SlurmOptions::new(None, Some("-t 5"), false, true).unwrap();
        let b = sbatch_argv(&shared, "p", Path::new("/m"), "s", 1, 11);
        assert!(!b.contains(&"--exclusive".to_string()));
        assert!(b.contains(&"--array=0-0".to_string()));
        assert!(
            !b.iter().any(|x| x.starts_with("--time")),
            "the user's -t wins"
        );
    }

    #[test]
    fn quoting_survives_odd_paths() {
        assert_eq!(sh_quote("/a b/it's"), r"'/a b/it'\''s'");
        assert!(on_path("sh"));
        assert!(!on_path("no-such-program-here"));
    }
}
