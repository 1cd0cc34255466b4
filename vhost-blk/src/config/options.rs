//! The backend's options, declared once ([`Options`]: clap reads them from the command line,
//! serde from the settings file), the command-line-only flags ([`Args`]), and the merge in which
//! the command line wins. Raw and unvalidated: see [`super::Config`].

use std::path::{Path, PathBuf};

use clap::Parser;
use serde::Deserialize;

use super::{CompletionArgs, ConfigError, DeviceKind, SandboxMode};
use vhost_blk_completion::CompletionModel;
use vhost_blk_scsi::topology::TopologyConfig;

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
    /// All raw and optional; [`Config::try_from`](super::Config::try_from) merges and validates
    /// them.
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
        /// Start with the write cache off (virtio-blk writeback 0, SCSI WCE 0): every write is
        /// on stable storage before it completes (docs/data-guarantees.md). The guest may
        /// switch it.
        #[arg(long, num_args = 0, default_missing_value = "true")]
        pub writethrough: Option<bool>,
        /// Append every write, flush, discard and write-zeroes of the image, in completion
        /// order, to this log (docs/write-log.md; `vhost-blk-replay` checks it). A test tool:
        /// it serializes the image's modifying requests.
        #[arg(long, value_name = "PATH")]
        pub write_log: Option<PathBuf>,
        /// Record the image's writes and syncs at the system-call boundary to this file, for
        /// the power-loss simulator (docs/data-guarantees.md, "Power loss"). A test tool: every
        /// write is copied into it. Only with --image.
        #[arg(long, value_name = "PATH")]
        pub syscall_trace: Option<PathBuf>,
        /// Break the image on purpose (no-flush, early-ack) for the simulator's self-checks.
        /// Debug builds only: a release build refuses it.
        #[arg(long, value_enum, hide = true)]
        pub test_fault: Option<super::TestFaultArg>,
        /// Null storage of this size: reads return zeros, writes are dropped.
        #[arg(long, value_name = "SIZE")]
        pub null: Option<String>,
        /// Null storage of this size whose reads leave the guest's buffers untouched (no zero
        /// fill; like null_blk without memory backing): a benchmark mode.
        #[arg(long, value_name = "SIZE")]
        pub null_untouched: Option<String>,
        /// RAM disk of this size.
        #[arg(long, value_name = "SIZE")]
        pub mem: Option<String>,
        /// Number of request queues (MSI-X vectors), 1..=256 (virtio-scsi: 1..=254, two of its
        /// vrings are control and event); default 8.
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
        /// Run every thread of the backend SCHED_FIFO at this priority (1..=99), as cyclictest
        /// runs: completion deadlines then do not wait behind the host's other runnable
        /// threads. Needs CAP_SYS_NICE (refused before anything is created otherwise).
        #[arg(long)]
        pub rt_priority: Option<u8>,
        /// Confine the running backend (docs/sandbox.md): a seccomp allow-list per thread,
        /// Landlock on its files, no new privileges. `off` is for debugging only.
        #[arg(long, value_enum, value_name = "on|off")]
        pub sandbox: Option<SandboxMode>,
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
        Self::parse(&text).map_err(|reason| ConfigError::ConfigFile {
            path: path.to_owned(),
            reason,
        })
    }

    /// Parses a settings file's text. The error is where (line and column, when TOML says) and
    /// TOML's message, on one line (a key or value it quotes may hold a newline: control
    /// characters come back escaped), never empty (TOML gives no message for some errors, e.g.
    /// a key without a value at the end of the file).
    pub fn parse(text: &str) -> Result<Self, String> {
        toml::from_str(text).map_err(|e| {
            let msg = escape_controls(e.message().trim());
            let msg = if msg.is_empty() {
                "not valid TOML".into()
            } else {
                msg
            };
            match e.span() {
                Some(s) => format!("{}: {msg}", line_col(text, s.start)),
                None => msg,
            }
        })
    }

    pub(super) fn has_storage(&self) -> bool {
        self.image.is_some()
            || self.null.is_some()
            || self.null_untouched.is_some()
            || self.mem.is_some()
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

/// `text` with each control character (a newline above all) written as its Rust escape.
fn escape_controls(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_control() {
                c.escape_default().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}

/// `line L, column C` (1-based; the column in bytes) of byte `offset` of `text`.
fn line_col(text: &str, offset: usize) -> String {
    let before = text.as_bytes().get(..offset).unwrap_or(text.as_bytes());
    let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
    let col = before.len()
        - before
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |i| i + 1)
        + 1;
    format!("line {line}, column {col}")
}
