//! `vhost-blk`: parse the command line, validate it into a `Config`, run the daemon.

// As the library (lib.rs): no unwrap, expect, panic, unreachable, indexing or slicing outside
// tests.
#![cfg_attr(
    not(test),
    deny(
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::panic,
        clippy::unreachable,
        clippy::indexing_slicing
    )
)]

use vhost_blk::config::{Args, Config, DeviceKind};

fn main() {
    let args: Args = vhost_blk::config::parse_args_or_exit("vhost-blk");
    if args.print_capabilities {
        let ty = match args.options.device.unwrap_or_default() {
            DeviceKind::Blk => "block",
            DeviceKind::Scsi => "scsi",
        };
        println!("{{\n  \"type\": \"{ty}\"\n}}");
        return;
    }
    let config = match Config::try_from(args) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("vhost-blk: {e}");
            std::process::exit(2);
        }
    };
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        // No colour codes in a log file or the journal.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    if let Err(e) = vhost_blk::daemon::run(config) {
        eprintln!("vhost-blk: {e}");
        std::process::exit(e.exit_code());
    }
}
