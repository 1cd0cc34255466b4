//! Command line and TOML settings, validated into one [`Config`].
//!
//! [`Options`] declares every backend option once, read by clap from the command line and by
//! serde from the TOML file; [`Args`] adds the command-line-only flags and the completion
//! options ([`completion`]). [`Config::try_from`] merges them (command line wins) and validates
//! everything, so a bad setting is reported as one line before anything is created, opened or
//! deleted. Sizes and durations are parsed by [`vhost_blk_units`].

use std::path::{Path, PathBuf};

use clap::ValueEnum;
use serde::Deserialize;

pub mod completion;
mod options;

pub use completion::CompletionArgs;
pub use options::{Args, Options, TopologySetting};

use crate::device::MAX_VRINGS;
use vhost_blk_completion::CompletionModel;
use vhost_blk_scsi::topology::compact::parse_topology;
use vhost_blk_scsi::topology::TopologyConfig;
use vhost_blk_storage::StorageSpec;
use vhost_blk_units::Zero;

/// Settings errors. Each renders as one line; `main` exits with code 2.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ConfigError {
    #[error(
        "--socket-path is required (on the command line or as socket_path in the config file)"
    )]
    MissingSocket,
    #[error("no storage given: use --image PATH, --null SIZE or --mem SIZE")]
    MissingStorage,
    #[error("give only one of --image, --null, --null-untouched and --mem")]
    ConflictingStorage,
    /// A size or duration that does not parse (see [`vhost_blk_units`]).
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
    #[error("image {0:?} does not exist; pass --size to create it")]
    MissingImage(PathBuf),
    #[error("cannot read config file {path:?}: {reason}")]
    ConfigFile { path: PathBuf, reason: String },
    #[error("serial {0:?} is longer than 20 bytes")]
    SerialTooLong(String),
    #[error(
        "--direct, --read-only, --write-log, --syscall-trace and --test-fault are only for --image"
    )]
    FileOnlyOption,
    #[error("--writethrough is for the single disk; with --topology give each LUN wce=0")]
    WritethroughWithTopology,
    #[error("--test-fault breaks the image on purpose: only a debug build accepts it")]
    TestFaultInRelease,
    #[error("{0:?}: its directory does not exist (--write-log, --syscall-trace)")]
    WriteLogDirectory(PathBuf),
    #[error("the write log or syscall trace cannot be the image itself ({0:?})")]
    WriteLogIsImage(PathBuf),
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

/// `--test-fault`: a deliberately broken image (storage `TestFault`), debug builds only.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Deserialize, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum TestFaultArg {
    /// FLUSH calls no fdatasync.
    NoFlush,
    /// A write is acknowledged before it reaches the file.
    EarlyAck,
}

impl From<TestFaultArg> for vhost_blk_storage::TestFault {
    fn from(f: TestFaultArg) -> Self {
        match f {
            TestFaultArg::NoFlush => Self::NoFlush,
            TestFaultArg::EarlyAck => Self::EarlyAck,
        }
    }
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

/// `--sandbox`: whether the running backend confines itself (docs/sandbox.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum SandboxMode {
    /// seccomp per thread, Landlock, no new privileges (the default).
    #[default]
    On,
    /// Nothing confined: for debugging (strace of a new call, a core dump's full picture).
    Off,
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
    /// SCHED_FIFO priority of every backend thread (None: the host's default policy).
    pub rt_priority: Option<u8>,
    /// The single disk starts with its write cache off (`--writethrough`).
    pub writethrough: bool,
    /// The image's write log (`--write-log`; only with `--image`).
    pub write_log: Option<PathBuf>,
    /// The image's syscall trace (`--syscall-trace`; only with `--image`).
    pub syscall_trace: Option<PathBuf>,
    /// A deliberately broken image (`--test-fault`; debug builds, `--image` only).
    pub test_fault: Option<vhost_blk_storage::TestFault>,
    /// Confine the running backend (`--sandbox`, on unless `off`).
    pub sandbox: bool,
}

impl Config {
    /// What the image is opened with beyond its spec.
    pub fn instruments(&self) -> vhost_blk_storage::Instruments {
        vhost_blk_storage::Instruments {
            write_log: self.write_log.clone(),
            syscall_trace: self.syscall_trace.clone(),
            test_fault: self.test_fault,
        }
    }
}

/// Default serial: recognisable in the guest's sysfs.
pub const DEFAULT_SERIAL: &str = "VHOSTBLK-0001";

/// A storage size (zero is refused), see [`vhost_blk_units`].
pub fn parse_size(s: &str) -> Result<u64, ConfigError> {
    vhost_blk_units::parse_size(s, Zero::Rejected).map_err(|e| ConfigError::Unit(e.to_string()))
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

    /// Merges the command line over the settings file and checks every setting, in this
    /// order: socket, storage and topology, queues and threads, the disk's identity, the
    /// completion model, the SCSI and scheduling knobs.
    fn try_from(a: Args) -> Result<Self, ConfigError> {
        let o = merged(a.config.as_deref(), a.options)?;
        let socket_path = o.socket_path.clone().ok_or(ConfigError::MissingSocket)?;
        let device = o.device.unwrap_or_default();
        let (storage, topology) = storage_and_topology(&o, device)?;
        let write_log = side_file(o.write_log.clone(), storage.as_ref())?;
        let syscall_trace = side_file(o.syscall_trace.clone(), storage.as_ref())?;
        let test_fault = test_fault(&o, storage.as_ref())?;
        let writethrough = o.writethrough.unwrap_or(false);
        if writethrough && topology.is_some() {
            return Err(ConfigError::WritethroughWithTopology);
        }
        let (num_queues, queue_size, threads) = queue_layout(&o, device)?;
        let (block_size, serial) = disk_identity(&o)?;
        let mut completion = o.completion.clone().unwrap_or_default();
        a.completion.apply(&mut completion);
        completion
            .validate_for_queues(num_queues)
            .map_err(|e| ConfigError::Completion(e.to_string()))?;
        let cmd_per_lun = o.cmd_per_lun.unwrap_or(128);
        in_range("--cmd-per-lun", "1..=1024", cmd_per_lun.into(), 1, 1024)?;
        if let Some(p) = o.rt_priority {
            in_range("--rt-priority", "1..=99", p.into(), 1, 99)?;
        }
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
            rt_priority: o.rt_priority,
            writethrough,
            write_log,
            syscall_trace,
            test_fault,
            sandbox: o.sandbox.unwrap_or_default() == SandboxMode::On,
        })
    }
}

/// The command line's options over the settings file's. A storage choice on the command line
/// replaces the file's as a whole.
fn merged(config: Option<&std::path::Path>, cli: Options) -> Result<Options, ConfigError> {
    let mut f = match config {
        Some(p) => Options::load(p)?,
        None => Options::default(),
    };
    if cli.has_storage() {
        (f.image, f.null, f.mem, f.size) = (None, None, None, None);
        f.null_untouched = None;
    }
    Ok(cli.or(f))
}

/// The storage given as options, at most one kind (both null modes are one choice).
enum StorageChoice {
    Image(PathBuf),
    Null { size: String, untouched: bool },
    Mem(String),
}

fn storage_choice(o: &Options) -> Result<Option<StorageChoice>, ConfigError> {
    let null = match (&o.null, &o.null_untouched) {
        (Some(_), Some(_)) => return Err(ConfigError::ConflictingStorage),
        (Some(n), None) => Some((n.clone(), false)),
        (None, n) => n.clone().map(|n| (n, true)),
    };
    Ok(match (o.image.clone(), null, o.mem.clone()) {
        (None, None, None) => None,
        (Some(path), None, None) => Some(StorageChoice::Image(path)),
        (None, Some((size, untouched)), None) => Some(StorageChoice::Null { size, untouched }),
        (None, None, Some(m)) => Some(StorageChoice::Mem(m)),
        _ => return Err(ConfigError::ConflictingStorage),
    })
}

/// The disk (or LUN 0:0) and the virtio-scsi topology: one of them, checked against the device
/// and each other; options only for image files refused elsewhere.
fn storage_and_topology(
    o: &Options,
    device: DeviceKind,
) -> Result<(Option<StorageSpec>, Option<TopologyConfig>), ConfigError> {
    let choice = storage_choice(o)?;
    let topology = match &o.topology {
        Some(TopologySetting::Compact(t)) => {
            Some(parse_topology(t).map_err(|e| ConfigError::Topology(e.to_string()))?)
        }
        Some(TopologySetting::Table(t)) => Some(t.clone()),
        None => None,
    };
    if let Some(t) = &topology {
        if device != DeviceKind::Scsi {
            return Err(ConfigError::TopologyWithoutScsi);
        }
        if choice.is_some() {
            return Err(ConfigError::StorageAndTopology);
        }
        t.validate()
            .map_err(|e| ConfigError::Topology(e.to_string()))?;
    }
    let (direct, read_only) = (o.direct.unwrap_or(false), o.read_only.unwrap_or(false));
    let storage = match choice {
        None if topology.is_some() => None,
        None => return Err(ConfigError::MissingStorage),
        Some(StorageChoice::Image(path)) => {
            Some(image_spec(path, o.size.as_deref(), direct, read_only)?)
        }
        Some(StorageChoice::Null { size, untouched }) => {
            let size = parse_size(&size)?;
            Some(if untouched {
                StorageSpec::NullUntouched { size }
            } else {
                StorageSpec::Null { size }
            })
        }
        Some(StorageChoice::Mem(m)) => Some(StorageSpec::Mem {
            size: parse_size(&m)?,
        }),
    };
    if !matches!(storage, Some(StorageSpec::File { .. })) {
        if o.size.is_some() {
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
    Ok((storage, topology))
}

/// A file the backend writes beside the image (the write log, the syscall trace): only for an
/// image file, in a directory that exists, not the image itself.
fn side_file(
    log: Option<PathBuf>,
    storage: Option<&StorageSpec>,
) -> Result<Option<PathBuf>, ConfigError> {
    let Some(log) = log else {
        return Ok(None);
    };
    let Some(StorageSpec::File { path, .. }) = storage else {
        return Err(ConfigError::FileOnlyOption);
    };
    if log == *path {
        return Err(ConfigError::WriteLogIsImage(log));
    }
    let dir = match log.parent() {
        Some(d) if d.as_os_str().is_empty() => Path::new("."),
        Some(d) => d,
        None => return Err(ConfigError::WriteLogDirectory(log)),
    };
    if !dir.is_dir() {
        return Err(ConfigError::WriteLogDirectory(log));
    }
    Ok(Some(log))
}

/// `--test-fault`: an image file, and a debug build.
fn test_fault(
    o: &Options,
    storage: Option<&StorageSpec>,
) -> Result<Option<vhost_blk_storage::TestFault>, ConfigError> {
    let Some(f) = o.test_fault else {
        return Ok(None);
    };
    if !matches!(storage, Some(StorageSpec::File { .. })) {
        return Err(ConfigError::FileOnlyOption);
    }
    if !cfg!(debug_assertions) {
        return Err(ConfigError::TestFaultInRelease);
    }
    Ok(Some(f.into()))
}

/// An image file: it must exist unless a (whole-sector) size to create it with is given.
fn image_spec(
    path: PathBuf,
    size: Option<&str>,
    direct: bool,
    read_only: bool,
) -> Result<StorageSpec, ConfigError> {
    let create_size = size.map(parse_size).transpose()?;
    if create_size.is_none() && !path.exists() {
        return Err(ConfigError::MissingImage(path));
    }
    if let Some(s) = create_size.filter(|s| s % 512 != 0) {
        return Err(ConfigError::UnalignedSize(s));
    }
    Ok(StorageSpec::File {
        path,
        create_size,
        direct,
        read_only,
    })
}

/// Request queues (every vring's index must fit vhost-user's byte), descriptors per queue and
/// worker threads.
fn queue_layout(o: &Options, device: DeviceKind) -> Result<(u16, u16, u16), ConfigError> {
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
    Ok((num_queues, queue_size, threads))
}

/// Logical block size and serial number.
fn disk_identity(o: &Options) -> Result<(u32, String), ConfigError> {
    let block_size = o.block_size.unwrap_or(512);
    if block_size != 512 && block_size != 4096 {
        return Err(ConfigError::OutOfRange {
            what: "--block-size",
            expected: "512 or 4096",
            got: block_size.into(),
        });
    }
    let serial = o
        .serial
        .clone()
        .unwrap_or_else(|| DEFAULT_SERIAL.to_string());
    if serial.len() > 20 {
        return Err(ConfigError::SerialTooLong(serial));
    }
    Ok((block_size, serial))
}

impl Config {
    /// The vrings of each worker thread: queue `q` goes to thread `q % threads`.
    /// `first_request_queue` shifts the request queues (virtio-scsi has a control and an
    /// event queue before them, served by thread 0). Which threads vhost-user-backend runs and
    /// which vhost-blk runs itself is the device's business (device::workers).
    pub fn worker_groups(
        &self,
        total_queues: usize,
        first_request_queue: usize,
    ) -> Vec<Vec<usize>> {
        let threads = usize::from(self.threads).max(1);
        let owner = |q: usize| match q.checked_sub(first_request_queue) {
            Some(r) => r % threads,
            None => 0,
        };
        (0..threads)
            .map(|t| (0..total_queues).filter(|&q| owner(q) == t).collect())
            .collect()
    }
}

#[cfg(test)]
mod tests;

/// Parses a binary's command line, or exits: 0 after `--help` / `--version`, 2 with clap's
/// first line of the error (`PROG: ...`) on anything else. The one CLI rule of the project's
/// binaries (bad arguments: one clear line and exit code 2), in one place.
pub fn parse_args_or_exit<C: clap::Parser>(prog: &str) -> C {
    match C::try_parse() {
        Ok(c) => c,
        Err(e) if !e.use_stderr() => {
            let _ = e.print();
            std::process::exit(0);
        }
        Err(e) => {
            let text = e.render().to_string();
            let line = text
                .lines()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("invalid arguments");
            eprintln!("{prog}: {}", line.trim_start_matches("error: "));
            std::process::exit(2);
        }
    }
}
