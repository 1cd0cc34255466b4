//! `lab drill kill|restart|reconnect|cost|sandbox`: the booted drills of `guest_tests::drill`, as the
//! experiment scripts run them (experiments/kill-experiment.sh, restart-experiment.sh,
//! reconnect-experiment.sh, scale-cost.sh, sandbox-status.sh).
//!
//! 1. The rig is one set of flags for every drill: `--kernel` (debian-rt), `--qemu` (the
//!    suite's choice), `--backend` (the vhost-blk next to this executable), `--accel` (tcg).
//! 2. Standard output carries the drill's record, one line with its prefix (`KILL-RESULT`,
//!    `RESTART-RESULT`, `RECONNECT-RESULT`, `COST-RESULT`, `SANDBOX-RESULT`), which the experiments' tables read;
//!    `cost` then prints its table of medians. Each failed check is a line on standard error.
//! 3. Exit 0: every check held; 1: a check failed (the record, when there is one, is still
//!    printed); 2: bad arguments, or what the drill needs (suite, kernel image, QEMU, backend)
//!    is missing: one line, nothing booted.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand, ValueEnum};
use gt_launch::qemu::Accel;
use gt_launch::restart::{RECONNECT_PREFIX, RESULT_PREFIX};
use guest_tests::drill::cost::{self, COST_PREFIX};
use guest_tests::drill::kill::{self, KillDrill, KILL_PREFIX};
use guest_tests::drill::reconnect::{self, ReconnectDrill};
use guest_tests::drill::restart::{self, RestartDrill};
use guest_tests::drill::sandbox::{self, SandboxDrill, SANDBOX_PREFIX};
use guest_tests::drill::{DrillError, Rig};
use serde::Serialize;

/// Runs one booted drill and prints its record.
#[derive(Debug, Parser)]
#[command(name = "lab-drill", bin_name = "lab drill")]
struct DrillArgs {
    #[command(subcommand)]
    drill: Drill,
}

#[derive(Debug, Subcommand)]
enum Drill {
    /// Kill the backend, QEMU or both mid-write and judge the image (a `kill-*` suite).
    Kill {
        #[arg(long)]
        suite: String,
        #[arg(long)]
        variant: Option<String>,
        /// The kill's random point.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// The run directory (emptied first).
        #[arg(long)]
        dir: PathBuf,
        #[command(flatten)]
        rig: RigArgs,
    },
    /// Kill and restart the backend mid-verify (a `restart-verify*` suite).
    Restart {
        #[arg(long)]
        suite: String,
        #[arg(long)]
        dir: PathBuf,
        /// The least chains resubmitted on request queues over all kills.
        #[arg(long, default_value_t = 1)]
        min_resubmitted: u64,
        #[command(flatten)]
        rig: RigArgs,
    },
    /// Kill and start QEMU again against one backend (a `reconnect-idle*` suite).
    Reconnect {
        #[arg(long)]
        suite: String,
        #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u64).range(1..))]
        connections: u64,
        #[arg(long)]
        dir: PathBuf,
        #[command(flatten)]
        rig: RigArgs,
    },
    /// Every backend thread's seccomp and no_new_privs under a booted guest (a vhost-blk
    /// suite; the `reconnect-idle*` ones boot fastest).
    Sandbox {
        #[arg(long)]
        suite: String,
        #[arg(long)]
        dir: PathBuf,
        #[command(flatten)]
        rig: RigArgs,
    },
    /// Boot time, memory, threads and descriptors at each cell of suite scale-cost.
    Cost {
        /// Boots per cell.
        #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u64).range(1..))]
        repeat: u64,
        /// Where the boots' run directories go.
        #[arg(long)]
        dir: PathBuf,
        #[command(flatten)]
        rig: RigArgs,
    },
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum AccelArg {
    Tcg,
    Kvm,
}

/// Rule 1.
#[derive(Debug, Args)]
struct RigArgs {
    #[arg(long, default_value = "debian-rt")]
    kernel: String,
    /// 7.2 (the system's), 10 (the pinned QEMU 10) or a path; default: the suite's need.
    #[arg(long)]
    qemu: Option<String>,
    /// The vhost-blk binary.
    #[arg(long)]
    backend: Option<PathBuf>,
    #[arg(long, value_enum, default_value_t = AccelArg::Tcg)]
    accel: AccelArg,
}

impl From<RigArgs> for Rig {
    fn from(a: RigArgs) -> Rig {
        Rig {
            kernel: a.kernel,
            qemu: a.qemu,
            backend_bin: a.backend,
            accel: match a.accel {
                AccelArg::Tcg => Accel::Tcg,
                AccelArg::Kvm => Accel::Kvm,
            },
        }
    }
}

/// `PREFIX{json}` on standard output.
fn print_record(prefix: &str, record: &impl Serialize) {
    match serde_json::to_string(record) {
        Ok(json) => println!("{prefix}{json}"),
        Err(e) => eprintln!("lab drill: the record does not serialize: {e}"),
    }
}

/// Rule 3, from the checks that failed.
fn verdict(failures: &[String]) -> ExitCode {
    for f in failures {
        eprintln!("lab drill: check failed: {f}");
    }
    if failures.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

fn run(drill: Drill) -> Result<ExitCode, DrillError> {
    match drill {
        Drill::Kill {
            suite,
            variant,
            seed,
            dir,
            rig,
        } => {
            let d = KillDrill {
                suite,
                variant,
                seed,
                dir,
            };
            let out = kill::run(&rig.into(), &d)?;
            print_record(KILL_PREFIX, &out);
            Ok(verdict(&out.failures))
        }
        Drill::Restart {
            suite,
            dir,
            min_resubmitted,
            rig,
        } => {
            let d = RestartDrill {
                suite,
                dir,
                min_resubmitted,
            };
            let out = restart::run(&rig.into(), &d)?;
            if let Some(r) = &out.result {
                print_record(RESULT_PREFIX, r);
            }
            Ok(verdict(&out.failures))
        }
        Drill::Reconnect {
            suite,
            connections,
            dir,
            rig,
        } => {
            let d = ReconnectDrill {
                suite,
                connections: connections as usize,
                dir,
            };
            let out = reconnect::run(&rig.into(), &d)?;
            if let Some(r) = &out.result {
                print_record(RECONNECT_PREFIX, r);
            }
            Ok(verdict(&out.failures))
        }
        Drill::Sandbox { suite, dir, rig } => {
            let out = sandbox::run(&rig.into(), &SandboxDrill { suite, dir })?;
            for t in &out.threads {
                println!(
                    "{:<26} tid {:>7} {:<16} Seccomp: {}  NoNewPrivs: {}  Seccomp_filters: {}",
                    out.suite, t.tid, t.name, t.seccomp, t.no_new_privs, t.filters
                );
            }
            print_record(SANDBOX_PREFIX, &out);
            Ok(verdict(&out.failures))
        }
        Drill::Cost { repeat, dir, rig } => {
            let rig: Rig = rig.into();
            let repeat = repeat as usize;
            let out = cost::run(&rig, repeat, &dir, &mut |l| print_record(COST_PREFIX, l))?;
            let s = guest_tests::drill::load_suite(cost::SUITE)?;
            println!();
            print!(
                "{}",
                cost::table(&rig.kernel, repeat, &cost::cell_queues(&s), &out.lines)
            );
            Ok(verdict(&out.failures))
        }
    }
}

/// `lab drill ARGS...` (`argv` starts at `drill`).
pub(crate) fn main(argv: impl IntoIterator<Item = std::ffi::OsString>) -> ExitCode {
    let args = match DrillArgs::try_parse_from(argv) {
        Ok(args) => args,
        Err(e) if !e.use_stderr() => {
            let _ = e.print();
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("lab drill: {}", crate::table::one_line(&e));
            return ExitCode::from(2);
        }
    };
    match run(args.drill) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("lab drill: {e}");
            ExitCode::from(2)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_arguments_are_refused_before_anything_boots() {
        let parse = |v: &[&str]| DrillArgs::try_parse_from(v.iter().copied());
        assert!(
            parse(&["drill", "kill", "--dir", "/tmp/x"]).is_err(),
            "no suite"
        );
        assert!(parse(&[
            "drill",
            "reconnect",
            "--suite",
            "s",
            "--dir",
            "d",
            "--connections",
            "0"
        ])
        .is_err());
        assert!(parse(&["drill", "cost", "--dir", "d", "--accel", "hvf"]).is_err());
        assert!(parse(&["drill", "cost", "--dir", "d", "--repeat", "0"]).is_err());
        let ok = parse(&[
            "drill",
            "restart",
            "--suite",
            "restart-verify",
            "--dir",
            "d",
            "--qemu",
            "10",
        ]);
        assert!(ok.is_ok(), "{ok:?}");
    }

    #[test]
    fn an_unknown_suite_is_exit_2_and_creates_nothing() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("run");
        let argv = [
            "drill",
            "kill",
            "--suite",
            "no-such-suite",
            "--dir",
            dir.to_str().unwrap(),
        ];
        let code = main(argv.iter().map(std::ffi::OsString::from));
        assert_eq!(code, ExitCode::from(2));
        assert!(!dir.exists());
    }
}
