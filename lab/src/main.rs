//! lab: the experiments' tables, built from a run's files in the text of the tables committed
//! under docs/results (`ci/check-reports.sh` rebuilds each and diffs it). Not part of the
//! product: the workspace does not build it by default (`cargo run -p lab -- table ...`).
//!
//! `lab table latency|profile|cyclictest|ab|syscalls|callgrind ...`: the backend benchmarks'
//! tables ([`table`]); `lab table kernel-lines|restart-goals|reconnects|bisect-run ...`: the
//! harness experiments' tables ([`harness`]). `lab drill kill|restart|reconnect|cost|sandbox ...`: the
//! booted drills the experiment scripts run ([`drill`]).

#![cfg_attr(test, allow(clippy::too_many_lines))]

mod bisect_run;
mod drill;
mod harness;
mod kernel_lines;
mod reconnects;
mod restart_goals;
mod table;

use std::process::ExitCode;

fn main() -> ExitCode {
    let argv: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    if argv.first().is_some_and(|a| a == "drill") {
        drill::main(argv)
    } else {
        table::main(argv)
    }
}
