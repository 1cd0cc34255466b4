//! Command line and TOML settings, validated into one [`Config`].
//!
//! [`Options`] declares every backend option once, read by clap from the command line and by
//! serde from the TOML file; [`Args`] adds the command-line-only flags and the completion
//! options ([`completion`]). [`Config::try_from`] merges them (command line wins) and validates
//! everything, so a bad setting is reported as one line before anything is created, opened or
//! deleted. Sizes and durations are parsed by [`crate::units`].

use std::path::{Path, PathBuf};

use clap::{Parser, ValueEnum};
use serde::Deserialize;

pub mod completion;

pub use completion::CompletionArgs;

use crate::completion::CompletionModel;
use crate::device::MAX_VRINGS;
use crate::scsi::topology::compact::parse_topology;
use crate::scsi::topology::TopologyConfig;
use crate::storage::StorageSpec;
use crate::units::{self, Zero};

/// Settings errors. Each renders as one line; `main` exits with code 2.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ConfigError {
    #[error(
        "--socket-path is required (on the command line or as socket_path in the config file)"
    )]
    MissingSocket,
    #[error("no storage given: use --image PATH, --null SIZE or --mem SIZE")]
    MissingStorage,
    #[error("give only one of --image, --null and --mem")]
    ConflictingStorage,
    /// A size or duration that does not parse (see [`crate::units`]).
    #[error("{0}")]
    Unit(String),
    #[error("{what} must be {expected}, got {got}")]
    OutOfRange {
        what: &'static str,
        expected: &'static str,
        got: u64,
    },
    #[error("--size is only meaningful with --image")]
    SizeWithoutImage,
    #[error("image {0} does not exist; pass --size to create it")]
    MissingImage(PathBuf),
    #[error("cannot read config file {path}: {reason}")]
    ConfigFile { path: PathBuf, reason: String },
    #[error("serial '{0}' is longer than 20 bytes")]
    SerialTooLong(String),
    #[error("--direct and --read-only are only for --image")]
    FileOnlyOption,
    #[error("storage size {0} is not a multiple of 512 bytes")]
    UnalignedSize(u64),
    #[error("topology: {0}")]
    Topology(String),
    #[error("--topology is only for --device scsi")]
    TopologyWithoutScsi,
    #[error(
        "give either storage (--image/--null/--mem, served as LUN 0:0) or --topology, not both"
    )]
    StorageAndTopology,
    #[error("completion model: {0}")]
    Completion(String),
    #[error("--num-queues must be 1..={max}{}, got {got}", if *.extra > 0 { format!(" (the device adds {extra} vrings; at most {MAX_VRINGS} in all)") } else { String::new() })]
    QueueCount { max: u16, extra: u16, got: u16 },
    #[error("{0}")]
    Other(String),
}

/// Which device the backend emulates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Deserialize, Default, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum DeviceKind {
    /// virtio-blk.
    #[default]
    Blk,
    /// virtio-scsi (a SAS HBA with targets and LUNs).
    Scsi,
}

impl DeviceKind {
    /// Vrings the personality adds to the request queues (virtio-scsi: control and event).
    pub fn extra_vrings(self) -> u16 {
        match self {
            DeviceKind::Blk => 0,
            DeviceKind::Scsi => crate::scsi::EXTRA_VRINGS as u16,
        }
    }

    /// The most request queues: every vring must fit the vhost-user queue bitmask.
    pub fn max_request_queues(self) -> u16 {
        MAX_VRINGS as u16 - self.extra_vrings()
    }
}

/// `[topology]` in the settings file (a table, or a string in the compact form), or
/// `--topology` on the command line (the compact form).
#[derive(Debug, Clone, PartialEq)]
pub enum TopologySetting {
    /// The compact form, parsed when the settings are validated.
    Compact(String),
    /// A TOML table.
    Table(TopologyConfig),
}

fn compact_topology(s: &str) -> Result<TopologySetting, std::convert::Infallible> {
    Ok(TopologySetting::Compact(s.to_string()))
}

impl<'de> Deserialize<'de> for TopologySetting {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = TopologySetting;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a topology table or a compact topology string")
            }
            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<Self::Value, E> {
                Ok(TopologySetting::Compact(s.to_string()))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                m: A,
            ) -> Result<Self::Value, A::Error> {
                TopologyConfig::deserialize(serde::de::value::MapAccessDeserializer::new(m))
                    .map(TopologySetting::Table)
            }
        }
        d.deserialize_any(V)
    }
}

/// Declares the backend's options once: the struct (clap and serde read the same fields) and
/// [`Options::or`], the merge in which the command line wins field by field.
macro_rules! backend_options {
    (
        $(#[$sm:meta])*
        pub struct $name:ident {
            $( $(#[$fm:meta])* pub $field:ident : Option<$ty:ty>, )*
        }
    ) => {
        $(#[$sm])*
        pub struct $name {
            $( $(#[$fm])* pub $field: Option<$ty>, )*
        }

        impl $name {
            /// `self` (the command line) over `file`: each field set in `self` wins.
            pub fn or(self, file: Self) -> Self {
                Self { $( $field: self.$field.or(file.$field), )* }
            }
        }
    };
}

backend_options! {
    /// Every option of the backend, declared once: clap reads it from the command line
    /// (`--socket-path`), serde from the settings file (`socket_path`); unknown keys are errors.
    /// All raw and optional; [`Config::try_from`] merges and validates them.
    #[derive(Debug, Clone, Default, PartialEq, clap::Args, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct Options {
        /// vhost-user Unix socket to listen on.
        #[arg(long, value_name = "PATH")]
        pub socket_path: Option<PathBuf>,
        /// Device personality.
        #[arg(long, value_enum)]
        pub device: Option<DeviceKind>,
        /// Raw image file.
        #[arg(long, value_name = "PATH")]
        pub image: Option<PathBuf>,
        /// Create the image as a sparse file of this size if it does not exist.
        #[arg(long, value_name = "SIZE")]
        pub size: Option<String>,
        /// Open the image with O_DIRECT.
        #[arg(long, num_args = 0, default_missing_value = "true")]
        pub direct: Option<bool>,
        /// Expose the disk read-only.
        #[arg(long, num_args = 0, default_missing_value = "true")]
        pub read_only: Option<bool>,
        /// Null storage of this size: reads return zeros, writes are dropped.
        #[arg(long, value_name = "SIZE")]
        pub null: Option<String>,
        /// RAM disk of this size.
        #[arg(long, value_name = "SIZE")]
        pub mem: Option<String>,
        /// Number of request queues (MSI-X vectors), 1..=64 (virtio-scsi: 1..=62).
        #[arg(long)]
        pub num_queues: Option<u16>,
        /// Maximum descriptors per queue (power of two, 2..=32768).
        #[arg(long)]
        pub queue_size: Option<u16>,
        /// Worker threads; queues are spread over them round-robin (default: one per queue).
        #[arg(long)]
        pub threads: Option<u16>,
        /// Logical block size: 512 or 4096.
        #[arg(long)]
        pub block_size: Option<u32>,
        /// Serial number returned by GET_ID (at most 20 bytes).
        #[arg(long)]
        pub serial: Option<String>,
        /// Write per-queue statistics as JSON here at exit and on SIGUSR1.
        #[arg(long, value_name = "FILE")]
        pub stats_file: Option<PathBuf>,
        /// virtio-scsi targets and LUNs, e.g. `targets=16,luns=1,storage=null:1G` or
        /// `0:0=file:/a.img,3:1=mem:64M,max_target=15,inquiry_delay=2ms` (see the docs).
        #[arg(long, value_name = "SPEC", value_parser = compact_topology)]
        pub topology: Option<TopologySetting>,
        /// virtio-scsi cmd_per_lun: the guest's default LUN queue depth.
        #[arg(long)]
        pub cmd_per_lun: Option<u32>,
        /// `[completion]` of the settings file: the MSI-X latency / coalescing model (on the
        /// command line, [`CompletionArgs`] sets it field by field).
        #[arg(skip)]
        pub completion: Option<CompletionModel>,
    }
}

impl Options {
    /// Reads and parses a settings file.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError::ConfigFile {
            path: path.to_owned(),
            reason: e.to_string(),
        })?;
        toml::from_str(&text).map_err(|e| ConfigError::ConfigFile {
            path: path.to_owned(),
            reason: e.message().to_string(),
        })
    }

    fn has_storage(&self) -> bool {
        self.image.is_some() || self.null.is_some() || self.mem.is_some()
    }
}

/// vhost-user backend standing in for a multi-queue SAS controller.
#[derive(Debug, Parser, Default, Clone)]
#[command(name = "vhost-blk", version, about)]
pub struct Args {
    #[command(flatten)]
    pub options: Options,
    /// Print the vhost-user capabilities JSON (QEMU's vhost-user.rst) and exit.
    #[arg(long)]
    pub print_capabilities: bool,
    /// Settings file (TOML); command-line options override it.
    #[arg(long, short = 'c', value_name = "FILE")]
    pub config: Option<PathBuf>,
    #[command(flatten)]
    pub completion: CompletionArgs,
}

/// The validated settings the daemon runs with.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    pub socket_path: PathBuf,
    pub device: DeviceKind,
    /// The disk (virtio-blk), or LUN 0:0 when virtio-scsi has no explicit topology.
    pub storage: Option<StorageSpec>,
    /// virtio-scsi targets and LUNs (None: one LUN 0:0 on `storage`).
    pub topology: Option<TopologyConfig>,
    pub cmd_per_lun: u32,
    pub num_queues: u16,
    pub queue_size: u16,
    pub threads: u16,
    pub block_size: u32,
    pub serial: String,
    pub stats_file: Option<PathBuf>,
    pub completion: CompletionModel,
}

/// Default serial: recognisable in the guest's sysfs.
pub const DEFAULT_SERIAL: &str = "VHOSTBLK-0001";

/// A storage size (zero is refused), see [`crate::units`].
pub fn parse_size(s: &str) -> Result<u64, ConfigError> {
    units::parse_size(s, Zero::Rejected).map_err(|e| ConfigError::Unit(e.to_string()))
}

fn in_range(
    what: &'static str,
    expected: &'static str,
    v: u64,
    lo: u64,
    hi: u64,
) -> Result<(), ConfigError> {
    if (lo..=hi).contains(&v) {
        Ok(())
    } else {
        Err(ConfigError::OutOfRange {
            what,
            expected,
            got: v,
        })
    }
}

impl TryFrom<Args> for Config {
    type Error = ConfigError;

    fn try_from(a: Args) -> Result<Self, ConfigError> {
        let mut f = match &a.config {
            Some(p) => Options::load(p)?,
            None => Options::default(),
        };
        // Storage: a command-line choice replaces the file's as a whole.
        if a.options.has_storage() {
            (f.image, f.null, f.mem, f.size) = (None, None, None, None);
        }
        let o = a.options.or(f);
        let socket_path = o.socket_path.ok_or(ConfigError::MissingSocket)?;
        let device = o.device.unwrap_or_default();
        let (image, null, mem, size) = (o.image, o.null, o.mem, o.size);
        let direct = o.direct.unwrap_or(false);
        let read_only = o.read_only.unwrap_or(false);
        let chosen = [image.is_some(), null.is_some(), mem.is_some()]
            .iter()
            .filter(|&&b| b)
            .count();
        if chosen > 1 {
            return Err(ConfigError::ConflictingStorage);
        }
        let topology = match o.topology {
            Some(TopologySetting::Compact(t)) => {
                Some(parse_topology(&t).map_err(|e| ConfigError::Topology(e.to_string()))?)
            }
            Some(TopologySetting::Table(t)) => Some(t),
            None => None,
        };
        if let Some(t) = &topology {
            if device != DeviceKind::Scsi {
                return Err(ConfigError::TopologyWithoutScsi);
            }
            if chosen > 0 {
                return Err(ConfigError::StorageAndTopology);
            }
            t.validate()
                .map_err(|e| ConfigError::Topology(e.to_string()))?;
        }
        let storage = match (image, null, mem) {
            (None, None, None) if topology.is_some() => None,
            (Some(path), None, None) => {
                let create_size = size.as_deref().map(parse_size).transpose()?;
                if create_size.is_none() && !path.exists() {
                    return Err(ConfigError::MissingImage(path));
                }
                if let Some(s) = create_size {
                    if s % 512 != 0 {
                        return Err(ConfigError::UnalignedSize(s));
                    }
                }
                Some(StorageSpec::File {
                    path,
                    create_size,
                    direct,
                    read_only,
                })
            }
            (None, Some(n), None) => Some(StorageSpec::Null {
                size: parse_size(&n)?,
            }),
            (None, None, Some(m)) => Some(StorageSpec::Mem {
                size: parse_size(&m)?,
            }),
            _ => return Err(ConfigError::MissingStorage),
        };
        if !matches!(storage, Some(StorageSpec::File { .. })) {
            if size.is_some() {
                return Err(ConfigError::SizeWithoutImage);
            }
            if direct || read_only {
                return Err(ConfigError::FileOnlyOption);
            }
        }
        if let Some(s) = storage.as_ref().and_then(StorageSpec::declared_size) {
            if s % 512 != 0 {
                return Err(ConfigError::UnalignedSize(s));
            }
        }
        let num_queues = o.num_queues.unwrap_or(8);
        let max_queues = device.max_request_queues();
        if !(1..=max_queues).contains(&num_queues) {
            return Err(ConfigError::QueueCount {
                max: max_queues,
                extra: device.extra_vrings(),
                got: num_queues,
            });
        }
        let queue_size = o.queue_size.unwrap_or(256);
        if !queue_size.is_power_of_two() || queue_size < 2 {
            return Err(ConfigError::OutOfRange {
                what: "--queue-size",
                expected: "a power of two in 2..=32768",
                got: queue_size.into(),
            });
        }
        let threads = o.threads.unwrap_or(num_queues);
        if threads == 0 || threads > num_queues {
            return Err(ConfigError::OutOfRange {
                what: "--threads",
                expected: "1..=--num-queues",
                got: threads.into(),
            });
        }
        let block_size = o.block_size.unwrap_or(512);
        if block_size != 512 && block_size != 4096 {
            return Err(ConfigError::OutOfRange {
                what: "--block-size",
                expected: "512 or 4096",
                got: block_size.into(),
            });
        }
        let serial = o.serial.unwrap_or_else(|| DEFAULT_SERIAL.to_string());
        if serial.len() > 20 {
            return Err(ConfigError::SerialTooLong(serial));
        }
        let mut completion = o.completion.unwrap_or_default();
        a.completion.apply(&mut completion);
        completion
            .validate_for_queues(num_queues)
            .map_err(|e| ConfigError::Completion(e.to_string()))?;
        let cmd_per_lun = o.cmd_per_lun.unwrap_or(128);
        in_range("--cmd-per-lun", "1..=1024", cmd_per_lun.into(), 1, 1024)?;
        Ok(Config {
            topology,
            cmd_per_lun,
            completion,
            socket_path,
            device,
            storage,
            num_queues,
            queue_size,
            threads,
            block_size,
            serial,
            stats_file: o.stats_file,
        })
    }
}

impl Config {
    /// Queue masks for `VhostUserBackend::queues_per_thread`: queue `q` goes to thread
    /// `q % threads`. `first_request_queue` shifts the request queues (virtio-scsi has a
    /// control and an event queue before them, served by thread 0).
    pub fn thread_masks(&self, total_queues: usize, first_request_queue: usize) -> Vec<u64> {
        assert!(
            total_queues <= MAX_VRINGS,
            "validated: every vring fits the bitmask"
        );
        let threads = usize::from(self.threads);
        let mut masks = vec![0u64; threads];
        for q in 0..total_queues {
            let t = q.saturating_sub(first_request_queue) % threads;
            let t = if q < first_request_queue { 0 } else { t };
            masks[t] |= 1 << q;
        }
        masks
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(v: &[&str]) -> Args {
        let mut all = vec!["vhost-blk"];
        all.extend_from_slice(v);
        Args::try_parse_from(all).unwrap()
    }

    #[test]
    fn minimal_use_gives_eight_queues() {
        let dir = tempfile::tempdir().unwrap();
        let img = dir.path().join("disk.img");
        std::fs::write(&img, vec![0u8; 4096]).unwrap();
        let c = Config::try_from(args(&[
            "--socket-path",
            "/tmp/s",
            "--image",
            img.to_str().unwrap(),
        ]))
        .unwrap();
        assert_eq!(c.num_queues, 8);
        assert_eq!(c.threads, 8);
        assert_eq!(c.queue_size, 256);
        assert_eq!(c.device, DeviceKind::Blk);
        assert_eq!(c.serial, DEFAULT_SERIAL);
    }

    #[test]
    fn sizes_parse() {
        assert_eq!(parse_size("4096").unwrap(), 4096);
        assert_eq!(parse_size("1G").unwrap(), 1 << 30);
        assert_eq!(parse_size("64m").unwrap(), 64 << 20);
        for bad in ["", "G", "1X", "-1", "0", "99999999999T"] {
            assert!(parse_size(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn invalid_settings_are_rejected_with_a_reason() {
        let cases: &[(&[&str], &str)] = &[
            (&["--null", "1G"], "socket-path"),
            (&["--socket-path", "s"], "no storage"),
            (
                &["--socket-path", "s", "--null", "1G", "--mem", "1G"],
                "only one",
            ),
            (
                &["--socket-path", "s", "--null", "1G", "--num-queues", "0"],
                "1..=64",
            ),
            (
                &["--socket-path", "s", "--null", "1G", "--num-queues", "65"],
                "1..=64",
            ),
            (
                &["--socket-path", "s", "--null", "1G", "--queue-size", "100"],
                "power of two",
            ),
            (
                &["--socket-path", "s", "--null", "1G", "--threads", "9"],
                "--threads",
            ),
            (
                &["--socket-path", "s", "--null", "1G", "--block-size", "1024"],
                "512 or 4096",
            ),
            (&["--socket-path", "s", "--null", "1000"], "multiple of 512"),
            (
                &["--socket-path", "s", "--null", "1G", "--size", "1G"],
                "only meaningful",
            ),
            (
                &["--socket-path", "s", "--mem", "1G", "--read-only"],
                "only for --image",
            ),
            (
                &["--socket-path", "s", "--image", "/nonexistent/x.img"],
                "does not exist",
            ),
            (
                &[
                    "--socket-path",
                    "s",
                    "--null",
                    "1G",
                    "--serial",
                    "123456789012345678901",
                ],
                "20 bytes",
            ),
        ];
        for (a, want) in cases {
            let e = Config::try_from(args(a)).unwrap_err().to_string();
            assert!(e.contains(want), "{a:?}: {e}");
            assert!(!e.contains('\n'), "one line: {e}");
        }
    }

    #[test]
    fn missing_image_with_size_is_not_created_by_validation() {
        let dir = tempfile::tempdir().unwrap();
        let img = dir.path().join("new.img");
        let c = Config::try_from(args(&[
            "--socket-path",
            "s",
            "--image",
            img.to_str().unwrap(),
            "--size",
            "1M",
        ]))
        .unwrap();
        assert!(!img.exists(), "validation must not create files");
        assert_eq!(
            c.storage,
            Some(StorageSpec::File {
                path: img,
                create_size: Some(1 << 20),
                direct: false,
                read_only: false
            })
        );
    }

    #[test]
    fn toml_file_is_merged_and_cli_wins() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = dir.path().join("c.toml");
        std::fs::write(
            &cfg,
            "socket_path = \"/tmp/from-file\"\nnull = \"1G\"\nnum_queues = 4\nserial = \"FILE\"\n",
        )
        .unwrap();
        let c = Config::try_from(args(&["-c", cfg.to_str().unwrap(), "--serial", "CLI"])).unwrap();
        assert_eq!(c.socket_path, PathBuf::from("/tmp/from-file"));
        assert_eq!(c.num_queues, 4);
        assert_eq!(c.serial, "CLI");
        assert_eq!(c.storage, Some(StorageSpec::Null { size: 1 << 30 }));
        let c = Config::try_from(args(&["-c", cfg.to_str().unwrap(), "--mem", "64M"])).unwrap();
        assert_eq!(c.storage, Some(StorageSpec::Mem { size: 64 << 20 }));
    }

    #[test]
    fn unknown_toml_key_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = dir.path().join("c.toml");
        std::fs::write(&cfg, "socket_path = \"s\"\nnul = \"1G\"\n").unwrap();
        let e = Config::try_from(args(&["-c", cfg.to_str().unwrap()])).unwrap_err();
        assert!(matches!(e, ConfigError::ConfigFile { .. }), "{e}");
    }

    #[test]
    fn scsi_topology_replaces_the_single_disk() {
        let c = Config::try_from(args(&[
            "--socket-path",
            "s",
            "--device",
            "scsi",
            "--topology",
            "targets=16,luns=1,storage=null:1G,max_target=255",
        ]))
        .unwrap();
        assert_eq!(c.storage, None);
        let t = c.topology.unwrap();
        assert_eq!(t.targets.len(), 16);
        assert_eq!(t.max_target, Some(255));
        let c = Config::try_from(args(&[
            "--socket-path",
            "s",
            "--device",
            "scsi",
            "--null",
            "1G",
        ]))
        .unwrap();
        assert!(c.topology.is_none());
        assert_eq!(c.cmd_per_lun, 128);
    }

    #[test]
    fn queue_count_leaves_room_for_the_personalitys_vrings() {
        let base = ["--socket-path", "s", "--null", "1G", "--num-queues"];
        let run = |extra: &[&str]| Config::try_from(args(&[&base[..], extra].concat()));
        assert_eq!(run(&["64"]).unwrap().num_queues, 64);
        assert_eq!(run(&["62", "--device", "scsi"]).unwrap().num_queues, 62);
        for n in ["63", "64"] {
            let e = run(&[n, "--device", "scsi"]).unwrap_err();
            assert!(
                matches!(
                    e,
                    ConfigError::QueueCount {
                        max: 62,
                        extra: 2,
                        ..
                    }
                ),
                "{e}"
            );
            let text = e.to_string();
            assert!(text.contains("1..=62") && !text.contains('\n'), "{text}");
        }
        // The largest valid configuration of each device fits the u64 queue bitmask.
        let c = run(&["62", "--device", "scsi", "--threads", "3"]).unwrap();
        let masks = c.thread_masks(62 + 2, 2);
        assert_eq!(masks.iter().fold(0, |a, m| a | m), u64::MAX);
    }

    #[test]
    fn thread_masks_spread_queues() {
        let mut c = Config::try_from(args(&["--socket-path", "s", "--null", "1G"])).unwrap();
        assert_eq!(
            c.thread_masks(8, 0),
            (0..8).map(|q| 1u64 << q).collect::<Vec<_>>()
        );
        c.threads = 2;
        assert_eq!(c.thread_masks(8, 0), vec![0b0101_0101, 0b1010_1010]);
        // virtio-scsi: control + event on thread 0 with the first request queue.
        c.threads = 8;
        let m = c.thread_masks(10, 2);
        assert_eq!(m[0], 0b111);
        assert_eq!(m[7], 1 << 9);
    }
}
