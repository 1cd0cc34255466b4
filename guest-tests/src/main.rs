//! `guest-tests`: boot kernels against a storage backend, run fio suites, compare kernels A/B.
//! The commands are in [`guest_tests::cli`].

use std::process::ExitCode;

use clap::Parser;

use guest_tests::cli::{self, Cli};

fn main() -> ExitCode {
    // `guest-tests compare DIR | head` ends quietly, as other Unix tools do, instead of
    // panicking on a closed stdout.
    // SAFETY: restoring the default disposition of SIGPIPE before any thread starts; no handler
    // and no memory is involved.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    let args = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) if e.use_stderr() => {
            return cli::fail(e.to_string().lines().next().unwrap_or(""), 2)
        }
        Err(e) => {
            let _ = e.print();
            return ExitCode::SUCCESS;
        }
    };
    cli::dispatch(args)
}
