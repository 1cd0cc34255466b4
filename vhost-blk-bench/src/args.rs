//! The bench's command line: options and their parsers (sizes and durations by
//! `vhost_blk_units`).

use std::path::PathBuf;

use clap::Parser;
use vhost_blk_units::{UnitError, Zero};

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Pattern {
    Read,
    Write,
    RandRead,
    RandWrite,
    Flush,
    /// Random reads with this percentage, random writes otherwise.
    Mix(u8),
}

pub fn parse_pattern(s: &str) -> Result<Pattern, String> {
    Ok(match s {
        "read" => Pattern::Read,
        "write" => Pattern::Write,
        "randread" => Pattern::RandRead,
        "randwrite" => Pattern::RandWrite,
        "flush" => Pattern::Flush,
        _ => match s.strip_prefix("mix:").map(str::parse::<u8>) {
            Some(Ok(p)) if p <= 100 => Pattern::Mix(p),
            _ => {
                return Err(format!(
                    "`{s}`: expected read, write, randread, randwrite, flush or mix:READ_PERCENT"
                ))
            }
        },
    })
}

/// Which client drives the backend.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Client {
    /// This crate's in-process frontend (virtio-blk or virtio-scsi).
    Bench,
    /// libblkio's virtio-blk vhost-user driver (the `blkio` crate): an independent client.
    Blkio,
}

/// The device the backend exposes.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Device {
    Blk,
    /// virtio-scsi: request queues from vring 2, commands to LUN 0:0.
    Scsi,
}

/// A request size: a multiple of 512 up to 1 MiB (see `vhost_blk_units`).
pub fn parse_size(s: &str) -> Result<u32, String> {
    match vhost_blk_units::parse_size(s, Zero::Rejected) {
        Ok(n) if n % 512 == 0 && n <= 1 << 20 => Ok(n as u32),
        Ok(_) => Err(format!("`{s}`: a multiple of 512 up to 1m, e.g. 4k")),
        Err(e) => Err(e.to_string()),
    }
}

/// A run length: a duration greater than zero.
pub fn parse_duration(s: &str) -> Result<u64, UnitError> {
    vhost_blk_units::parse_duration_ns(s, Zero::Rejected)
}

/// Load generator for vhost-user-blk backends.
#[derive(Debug, Parser)]
#[command(
    name = "vhost-blk-bench",
    version,
    about,
    after_help = "An experiment's tables from its files: lab table --help"
)]
pub struct Args {
    /// The backend's vhost-user socket.
    #[arg(long, value_name = "PATH")]
    pub socket: PathBuf,
    /// Queues to drive (the backend must have at least this many).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=128))]
    pub queues: u16,
    /// Requests in flight per queue.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub qd: u16,
    /// Threads; queue i is driven by thread i % threads (default: one per queue).
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..=64))]
    pub threads: Option<u16>,
    /// read, write, randread, randwrite, flush or mix:READ_PERCENT.
    #[arg(long, default_value = "randread", value_parser = parse_pattern)]
    pub rw: Pattern,
    /// Request size.
    #[arg(long, default_value = "4k", value_parser = parse_size)]
    pub bs: u32,
    /// Measured run length.
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    pub duration: u64,
    /// Run this long first without recording.
    #[arg(long, default_value = "0", value_parser = |s: &str| vhost_blk_units::parse_duration_ns(s, Zero::Allowed))]
    pub ramp: u64,
    /// The client: `bench` (built in) or `blkio` (libblkio's virtio-blk-vhost-user driver).
    #[arg(long, value_enum, default_value_t = Client::Bench)]
    pub client: Client,
    /// The device behind the socket (`scsi`: only with `--client bench`).
    #[arg(long, value_enum, default_value_t = Device::Blk)]
    pub device: Device,
    /// virtio-scsi: use READ(16)/WRITE(16) instead of READ(10)/WRITE(10).
    #[arg(long)]
    pub cdb16: bool,
    /// Spin instead of sleeping and measure the used-entry-to-interrupt delay.
    #[arg(long)]
    pub measure_irq: bool,
    /// Descriptors per ring (at least qd * 3 without indirect descriptors).
    #[arg(long, default_value_t = 256)]
    pub queue_size: u16,
    /// Do not negotiate VIRTIO_RING_F_EVENT_IDX.
    #[arg(long)]
    pub no_event_idx: bool,
    /// Seed of the offsets.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Report this process's CPU time (the backend) over the measured run.
    #[arg(long, value_name = "PID")]
    pub backend_pid: Option<u32>,
    /// Also write the results as JSON here.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
}

impl Args {
    /// Combinations the options cannot express; one line for the user.
    pub fn check(&self) -> Result<(), String> {
        if self.queue_size < self.qd.saturating_mul(3) || !self.queue_size.is_power_of_two() {
            return Err(format!(
                "--queue-size {} must be a power of two and at least 3 x --qd ({})",
                self.queue_size, self.qd
            ));
        }
        if self.client == Client::Blkio {
            if self.device == Device::Scsi {
                return Err("--client blkio drives virtio-blk only (no --device scsi)".into());
            }
            if self.measure_irq {
                return Err("--measure-irq needs --client bench".into());
            }
        }
        if self.cdb16 && self.device != Device::Scsi {
            return Err("--cdb16 needs --device scsi".into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn option_parsers() {
        assert_eq!(parse_pattern("mix:70"), Ok(Pattern::Mix(70)));
        assert!(parse_pattern("mix:170").is_err() && parse_pattern("randrw").is_err());
        assert_eq!(parse_size("4k"), Ok(4096));
        assert_eq!(parse_size("1m"), Ok(1 << 20));
        assert!(
            parse_size("1000").is_err() && parse_size("2m").is_err() && parse_size("0").is_err()
        );
        assert_eq!(parse_duration("2s"), Ok(2_000_000_000));
        assert!(parse_duration("0").is_err());
    }

    #[test]
    fn option_combinations() {
        let parse = |extra: &[&str]| {
            let mut v = vec!["vhost-blk-bench", "--socket", "/s"];
            v.extend_from_slice(extra);
            Args::try_parse_from(v).unwrap().check()
        };
        assert!(parse(&[]).is_ok());
        assert!(parse(&["--device", "scsi", "--cdb16", "--queues", "8"]).is_ok());
        assert!(parse(&["--client", "blkio", "--queues", "8", "--qd", "16"]).is_ok());
        assert!(parse(&["--client", "blkio", "--device", "scsi"]).is_err());
        assert!(parse(&["--client", "blkio", "--measure-irq"]).is_err());
        assert!(parse(&["--cdb16"]).is_err());
        assert!(parse(&["--qd", "100"]).is_err());
    }
}
