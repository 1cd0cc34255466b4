//! Stand-alone front end of `guest-tests images` (until main.rs wires the subcommand):
//! `cargo run -p guest-tests --example vb-images -- build rt`.

use clap::Parser;

#[derive(Parser)]
#[command(name = "vb-images", about = "Build and list guest kernel images")]
struct Cli {
    #[command(flatten)]
    images: guest_tests::images::ImagesArgs,
}

fn main() {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    if let Err(e) = guest_tests::images::cli::run(&cli.images) {
        eprintln!("error: {e}");
        std::process::exit(e.exit_code());
    }
}
