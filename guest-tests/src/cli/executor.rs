//! The executor flags, declared once for `run`, `bisect` and `judge`: where the boots happen
//! (here, or as Slurm jobs) and the Slurm options, validated into [`SlurmOptions`].

use clap::Args;

use crate::batch::SlurmOptions;

#[derive(Args, Debug, Clone, Default)]
pub struct ExecutorArgs {
    /// local (boot here) or slurm (the boots as Slurm jobs; the output directory and the image
    /// cache must be on a path the nodes share).
    #[arg(long, default_value = "local")]
    pub executor: String,
    /// Slurm partition (default: the cluster's default partition).
    #[arg(long)]
    pub partition: Option<String>,
    /// More sbatch options, split at whitespace (e.g. "--qos=high --account=lab").
    #[arg(long, allow_hyphen_values = true)]
    pub slurm_args: Option<String>,
    /// Let jobs share a node (no --exclusive): their guests then compete for its CPUs.
    #[arg(long)]
    pub slurm_share_node: bool,
}

impl ExecutorArgs {
    /// The Slurm executor's options (None: the local executor); Slurm-only flags without it
    /// are refused. `detach` is `run`'s own flag (the others need every result at once).
    pub fn slurm(&self, detach: bool) -> Result<Option<SlurmOptions>, String> {
        match self.executor.as_str() {
            "local" => {
                let given = [
                    ("--partition", self.partition.is_some()),
                    ("--slurm-args", self.slurm_args.is_some()),
                    ("--detach", detach),
                    ("--slurm-share-node", self.slurm_share_node),
                ];
                match given.iter().find(|(_, g)| *g) {
                    Some((f, _)) => Err(format!("{f} goes with --executor slurm")),
                    None => Ok(None),
                }
            }
            "slurm" => SlurmOptions::new(
                self.partition.clone(),
                self.slurm_args.as_deref(),
                detach,
                self.slurm_share_node,
            )
            .map(Some),
            o => Err(format!("unknown --executor '{o}' (known: local, slurm)")),
        }
    }
}
