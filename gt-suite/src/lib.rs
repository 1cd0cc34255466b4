//! Suites as data: a suite is `suites/<name>.toml` plus the fio job files it names.
//!
//! The TOML describes the device the guest sees (personality, backend, queues), what the guest
//! agent prepares and runs (docs/design/guest-protocol.md, `/job/job.env`), the hard timeout and
//! an optional sweep of variants. Unknown fields are errors; [`Suite::load`] validates everything
//! that can be checked before a boot.

#![cfg_attr(test, allow(clippy::too_many_lines))]

pub mod paths;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// Errors while finding, parsing or validating a suite.
#[derive(Debug, thiserror::Error)]
pub enum SuiteError {
    #[error("unknown suite '{name}' (known: {known})")]
    Unknown { name: String, known: String },
    #[error("cannot read suites in {dir}: {source}")]
    Dir {
        dir: PathBuf,
        source: std::io::Error,
    },
    #[error("suite {path}: {msg}")]
    Parse { path: PathBuf, msg: String },
    #[error("suite '{suite}': {msg}")]
    Invalid { suite: String, msg: String },
}

/// The guest's disk personality.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Device {
    Blk,
    Scsi,
}

impl Device {
    pub fn as_str(self) -> &'static str {
        match self {
            Device::Blk => "blk",
            Device::Scsi => "scsi",
        }
    }
}

/// Which process serves the disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum BackendKind {
    /// Our vhost-user backend (`vhost-blk`).
    VhostBlk,
    /// QEMU's own virtio-blk-pci / virtio-scsi-pci on a `null-co` node: the reference column.
    QemuBuiltin,
    /// `qemu-storage-daemon` exporting a vhost-user-blk device (blk only).
    QemuStorageDaemon,
}

impl BackendKind {
    pub fn as_str(self) -> &'static str {
        match self {
            BackendKind::VhostBlk => "vhost-blk",
            BackendKind::QemuBuiltin => "qemu-builtin",
            BackendKind::QemuStorageDaemon => "qemu-storage-daemon",
        }
    }
}

/// Firmware QEMU boots with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Bios {
    /// `/usr/share/qemu/qboot.rom`: no BIOS probe of the disk, faster boot.
    #[default]
    Qboot,
    /// QEMU's default SeaBIOS.
    Seabios,
}

/// What the guest agent prepares before the steps run (`VB_*` in job.env).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GuestSettings {
    /// Device path, or `auto` (default).
    pub disk: Option<String>,
    pub scheduler: Option<String>,
    pub queue_depth: Option<u32>,
    pub nr_requests: Option<u32>,
    pub expect_hctx: Option<u32>,
    pub expect_disks: Option<u32>,
    /// Checked on the host: request MSI-X vectors the guest counted in /proc/interrupts.
    pub expect_request_vectors: Option<u32>,
}

/// What backs the built-in / qemu-storage-daemon disks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Storage {
    /// `null-co`: writes dropped, reads zeroes (no data check possible).
    #[default]
    Null,
    /// A sparse raw file per disk in the run directory (`disk<i>.img`), deleted after the run.
    File,
}

/// Settings of the QEMU built-in device (`backend = "qemu-builtin"`) and qemu-storage-daemon.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BuiltinSettings {
    #[serde(default)]
    pub storage: Storage,
    /// Size of each null-co disk in MiB.
    #[serde(default = "default_size_mib")]
    pub size_mib: u64,
    /// null-co `latency-ns` (per-request service delay).
    #[serde(default)]
    pub latency_ns: u64,
    /// Number of disks (scsi-hd LUNs on target 0..n, or virtio-blk devices).
    #[serde(default = "one")]
    pub disks: u32,
}

impl Default for BuiltinSettings {
    fn default() -> Self {
        Self {
            storage: Storage::Null,
            size_mib: default_size_mib(),
            latency_ns: 0,
            disks: 1,
        }
    }
}

/// One point of a sweep: extra backend arguments (appended) and built-in latency.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Cell {
    pub name: String,
    #[serde(default)]
    pub backend_args: Vec<String>,
    /// Overrides `builtin.latency_ns` for this variant.
    pub builtin_latency_ns: Option<u64>,
    /// Position on the suite's `sweep_param` axis (for plots).
    pub value: Option<f64>,
    /// Overrides the suite's `num_queues` in this cell.
    pub num_queues: Option<u32>,
    /// Overrides the suite's `running_cpus` in this cell.
    pub running_cpus: Option<u32>,
}

/// A suite as written in TOML.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SuiteSpec {
    pub description: String,
    pub device: Device,
    pub backend: BackendKind,
    /// Passed verbatim to the backend after `--socket-path`, `--device`, `--stats-file`;
    /// `{seed}` is replaced by the run's seed, `{run_dir}` by the run directory.
    #[serde(default)]
    pub backend_args: Vec<String>,
    #[serde(default = "eight")]
    pub num_queues: u32,
    /// Virtqueue size (QEMU `virtqueue_size` / `queue-size`); the guest's tag depth per hctx.
    /// Default: QEMU's (128). Our backend must allow it (`--queue-size`).
    pub virtqueue_size: Option<u32>,
    /// Guest CPUs QEMU creates (`-smp`); read it through [`SuiteSpec::smp`]. Default 8, or one
    /// per request queue when `running_cpus` is set (then it may not be given).
    pub smp: Option<u32>,
    /// How many of the guest's CPUs Linux brings up (`maxcpus=`); the others stay possible
    /// but offline, their vCPU threads halted. With it, `smp` is `num_queues` (one possible
    /// CPU per hardware queue: virtio_scsi asks for min(queues, possible CPUs) hctx, and CPU i
    /// maps to hctx i), `guest.expect_hctx` defaults to `num_queues`, and the agent gives fio
    /// `FIO_JOBS` = this and `FIO_CPUS` = `0-(this-1)`.
    pub running_cpus: Option<u32>,
    /// CPUs the agent brings online after boot, beside the `running_cpus` (suite/cells.rs
    /// rule 7): their hctx are driven too (CPU i maps to hctx i), without booting every CPU
    /// of a 128-queue guest. fio's `FIO_JOBS` and `FIO_CPUS` then cover them.
    #[serde(default)]
    pub online_cpus: Vec<u32>,
    #[serde(default = "default_memory_mib")]
    pub memory_mib: u32,
    #[serde(default)]
    pub bios: Bios,
    /// Extra kernel command-line words (e.g. `initcall_debug`).
    #[serde(default)]
    pub cmdline: Vec<String>,
    #[serde(default = "default_timeout")]
    pub timeout_secs: u64,
    #[serde(default)]
    pub guest: GuestSettings,
    pub steps: Vec<String>,
    #[serde(default)]
    pub trace_irq: bool,
    #[serde(default)]
    pub trace_stacks: bool,
    /// Lock waits of the request irq threads from `lock:contention_*` (in-kernel histograms).
    #[serde(default)]
    pub trace_locks: bool,
    /// The metric an A/B verdict is about, exactly as compare prints it (checked against the
    /// metric registry when a matrix is planned).
    pub primary_metric: Option<String>,
    /// A second metric the verdict reports beside the primary one.
    pub secondary_metric: Option<String>,
    /// How the verdict judges each kernel against the baseline (`suite::judgement`).
    pub judgement: Option<JudgementSpec>,
    /// What the A/B verdict reports beside the primary metric (`suite::verdict`); required with
    /// a `primary_metric`.
    pub verdict: Option<VerdictSpec>,
    #[serde(default)]
    pub func_count: Vec<String>,
    #[serde(default)]
    pub builtin: BuiltinSettings,
    /// Name and unit of the sweep axis, e.g. `msix_latency_us`.
    pub sweep_param: Option<String>,
    #[serde(default)]
    pub variants: Vec<Cell>,
    /// A grid of cells (every `num_queues` x every `running_cpus`), expanded into `variants`
    /// named `q<queues>-c<cpus>` on the `hw_queues` axis when the suite is loaded.
    pub grid: Option<cells::Grid>,
    /// A one-axis sweep written once (`cells` rule 6), expanded into `variants` and
    /// `sweep_param` when the suite is loaded.
    pub sweep: Option<cells::Sweep>,
    /// Kill and restart the backend while the guest runs.
    pub restarts: Option<RestartSettings>,
    /// Oldest QEMU the suite runs on, `MAJOR.MINOR` (e.g. `8.2`: vhost-user-scsi reconnect);
    /// checked against the binary's version before a boot (launch::qemus, rule 3).
    pub min_qemu: Option<String>,
    /// Host commands run in order before the backend starts (argv each; `{run_dir}` and
    /// `{seed}` replaced), e.g. making a file system on the image; one that fails fails the run.
    #[serde(default)]
    pub prepare: Vec<Vec<String>>,
}

/// `[restarts]`: the external backend is SIGKILLed `kills` times while the guest runs and
/// started again on the same socket each time; QEMU's chardev gets `reconnect=1`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RestartSettings {
    pub kills: u32,
    /// Seconds from the first step's begin mark to the first kill.
    pub first_after_s: f64,
    /// Seconds from one restart to the next kill.
    pub every_s: f64,
    /// With N > 0, a due kill waits until the backend reports at least N requests taken and
    /// not completed (its stats file, rewritten on SIGUSR1), at most 10 s (launch::restart).
    #[serde(default)]
    pub in_flight_at_least: u32,
    /// What is killed: the backend (restarted each time), QEMU, or both at once (the run ends
    /// there; `kills` must be 1).
    #[serde(default)]
    pub target: KillTarget,
    /// Each kill happens up to this many seconds later than its schedule, uniformly at random
    /// (from the run's seed): kills at random points of the guest's work.
    #[serde(default)]
    pub jitter_s: f64,
}

/// What `[restarts]` kills.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KillTarget {
    /// The backend, started again on the same socket after each kill.
    #[default]
    Backend,
    /// QEMU (the guest dies; the backend serves on and is stopped with the run).
    Qemu,
    /// The backend and QEMU, one right after the other.
    Both,
}

fn default_size_mib() -> u64 {
    1024
}
fn one() -> u32 {
    1
}
fn eight() -> u32 {
    8
}
fn default_memory_mib() -> u32 {
    1024
}
fn default_timeout() -> u64 {
    180
}

/// A loaded, validated suite with the contents of its fio job files (serialised whole into a
/// batch executor's task file, so a node runs exactly what was planned).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Suite {
    pub name: String,
    pub dir: PathBuf,
    pub spec: SuiteSpec,
    /// (file name, contents) of every `fio:<file>` step, in step order, deduplicated.
    pub fio_files: Vec<(String, Vec<u8>)>,
}

/// The directory holding the suites: `$VB_SUITES`, else `guest-tests/suites` under the
/// repository root ([`paths::repo_root`], found at run time).
pub fn default_dir() -> PathBuf {
    std::env::var_os("VB_SUITES")
        .map(PathBuf::from)
        .unwrap_or_else(|| paths::repo_root().join("guest-tests/suites"))
}

/// Names of the suites in `dir` (the `*.toml` file stems), sorted.
pub fn list(dir: &Path) -> Result<Vec<String>, SuiteError> {
    let rd = std::fs::read_dir(dir).map_err(|source| SuiteError::Dir {
        dir: dir.to_path_buf(),
        source,
    })?;
    let mut names: Vec<String> = rd
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .filter_map(|p| p.file_stem().map(|s| s.to_string_lossy().into_owned()))
        .collect();
    names.sort();
    Ok(names)
}

fn safe_word(s: &str, extra: &str) -> bool {
    !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || extra.contains(c))
}

impl Suite {
    /// Loads and validates suite `name` from `dir`.
    pub fn load(dir: &Path, name: &str) -> Result<Suite, SuiteError> {
        let known = list(dir)?;
        if !safe_word(name, "-_.") || !known.iter().any(|k| k == name) {
            return Err(SuiteError::Unknown {
                name: name.into(),
                known: known.join(", "),
            });
        }
        let path = dir.join(format!("{name}.toml"));
        let text = std::fs::read_to_string(&path).map_err(|e| SuiteError::Parse {
            path: path.clone(),
            msg: e.to_string(),
        })?;
        let mut spec: SuiteSpec = toml::from_str(&text).map_err(|e| SuiteError::Parse {
            path: path.clone(),
            msg: e.message().to_string(),
        })?;
        cells::expand_grid(&mut spec)
            .and_then(|()| cells::expand_sweep(&mut spec))
            .map_err(|msg| SuiteError::Invalid {
                suite: name.into(),
                msg,
            })?;
        Self::from_spec(name, dir, spec)
    }

    /// Validates `spec` and reads the fio files it names from `dir`.
    pub fn from_spec(name: &str, dir: &Path, spec: SuiteSpec) -> Result<Suite, SuiteError> {
        let bad = |msg: String| SuiteError::Invalid {
            suite: name.into(),
            msg,
        };
        validate(&spec).map_err(bad)?;
        let mut fio_files: Vec<(String, Vec<u8>)> = Vec::new();
        for step in &spec.steps {
            if let Some(file) = step
                .strip_prefix("fio:")
                .or_else(|| step.strip_prefix("storm:"))
            {
                if fio_files.iter().any(|(f, _)| f == file) {
                    continue;
                }
                let data = std::fs::read(dir.join(file))
                    .map_err(|e| bad(format!("fio file '{file}': {e}")))?;
                fio_files.push((file.to_string(), data));
            }
        }
        Ok(Suite {
            name: name.into(),
            dir: dir.to_path_buf(),
            spec,
            fio_files,
        })
    }

    /// The variants to run: the declared sweep, or one unnamed default.
    pub fn variants(&self) -> Vec<Option<&Cell>> {
        if self.spec.variants.is_empty() {
            vec![None]
        } else {
            self.spec.variants.iter().map(Some).collect()
        }
    }

    /// Looks a variant up by name.
    pub fn variant(&self, name: &str) -> Option<&Cell> {
        self.spec.variants.iter().find(|v| v.name == name)
    }
}

fn validate(s: &SuiteSpec) -> Result<(), String> {
    cells::validate_shape(s)?;
    if s.memory_mib < 128 {
        return Err(format!("memory_mib {} is below 128", s.memory_mib));
    }
    if let Some(n) = s.virtqueue_size {
        // QEMU's limit for virtio-pci rings.
        if !n.is_power_of_two() || !(2..=1024).contains(&n) {
            return Err(format!(
                "virtqueue_size {n} is not a power of two in 2..=1024"
            ));
        }
    }
    if s.timeout_secs == 0 {
        return Err("timeout_secs must be positive".into());
    }
    if s.backend == BackendKind::QemuStorageDaemon && s.device != Device::Blk {
        return Err("qemu-storage-daemon exports vhost-user-blk only: use device = \"blk\"".into());
    }
    if s.backend == BackendKind::QemuBuiltin && !s.backend_args.is_empty() {
        return Err("backend_args need an external backend, not qemu-builtin".into());
    }
    if !(1..=64).contains(&s.builtin.disks) || s.builtin.size_mib == 0 {
        return Err("builtin: disks must be in 1..=64 and size_mib positive".into());
    }
    if s.builtin.storage == Storage::Null
        && s.steps.iter().any(|st| st == "verify")
        && s.backend != BackendKind::VhostBlk
    {
        return Err("step 'verify' needs data kept: set [builtin] storage = \"file\"".into());
    }
    validate_restarts(s)?;
    if let Some(v) = &s.min_qemu {
        let num = |x: &str| !x.is_empty() && x.bytes().all(|b| b.is_ascii_digit());
        if !v.split_once('.').is_some_and(|(a, b)| num(a) && num(b)) {
            return Err(format!("min_qemu {v:?} is not MAJOR.MINOR (e.g. \"8.2\")"));
        }
    }
    if let Some(j) = &s.judgement {
        j.validate()?;
    }
    match (&s.primary_metric, &s.verdict) {
        (Some(_), None) => return Err("a suite with a primary_metric declares a [verdict]".into()),
        (_, Some(v)) => v.validate()?,
        (None, None) => {}
    }
    validate_commands(s)?;
    validate_guest(s)?;
    validate_variants(s)
}

/// `[restarts]`: an external backend, kills in 1..=100, times in seconds (every_s > 0).
fn validate_restarts(s: &SuiteSpec) -> Result<(), String> {
    if let Some(r) = &s.restarts {
        if s.backend == BackendKind::QemuBuiltin {
            return Err("[restarts] needs an external backend".into());
        }
        let secs = |x: f64| x.is_finite() && (0.0..=3600.0).contains(&x);
        if !(1..=100).contains(&r.kills)
            || !secs(r.first_after_s)
            || !secs(r.every_s)
            || r.every_s <= 0.0
        {
            return Err(
                "[restarts]: kills in 1..=100, first_after_s and every_s seconds (every_s > 0)"
                    .into(),
            );
        }
        if !secs(r.jitter_s) {
            return Err("[restarts]: jitter_s in seconds".into());
        }
        if r.target != KillTarget::Backend && r.kills != 1 {
            return Err("[restarts]: a kill of QEMU ends the run: kills = 1".into());
        }
    }
    if s.prepare.iter().any(Vec::is_empty) {
        return Err("prepare: each command needs at least a program".into());
    }
    Ok(())
}

/// The guest's work: at least one step, each valid; kernel command-line words; function names
/// to count.
fn validate_commands(s: &SuiteSpec) -> Result<(), String> {
    if s.steps.is_empty() {
        return Err("no steps".into());
    }
    for step in &s.steps {
        validate_step(step)?;
    }
    for w in &s.cmdline {
        if w.is_empty() || w.chars().any(|c| c.is_whitespace() || c == '"') {
            return Err(format!(
                "cmdline word {w:?} must be one word without quotes"
            ));
        }
    }
    for f in &s.func_count {
        if !safe_word(f, "_.") {
            return Err(format!("func_count entry {f:?} is not a function name"));
        }
    }
    Ok(())
}

/// `[guest]`: the disk, the scheduler, positive queue settings (queue_depth on SCSI only).
fn validate_guest(s: &SuiteSpec) -> Result<(), String> {
    let g = &s.guest;
    if let Some(d) = &g.disk {
        if d != "auto" && !(d.starts_with("/dev/") && safe_word(&d[5..], "/-_")) {
            return Err(format!("guest.disk {d:?} must be 'auto' or a /dev path"));
        }
    }
    if let Some(sch) = &g.scheduler {
        if !safe_word(sch, "-_") {
            return Err(format!("guest.scheduler {sch:?} is not a scheduler name"));
        }
    }
    if g.queue_depth == Some(0) || g.nr_requests == Some(0) {
        return Err("guest.queue_depth and guest.nr_requests must be positive".into());
    }
    if g.queue_depth.is_some() && s.device != Device::Scsi {
        return Err("guest.queue_depth is a SCSI LUN setting: needs device = \"scsi\"".into());
    }
    Ok(())
}

/// Variants: sweep values with sweep_param, unique safe names, backend settings the backend
/// can take.
fn validate_variants(s: &SuiteSpec) -> Result<(), String> {
    if s.sweep_param.is_some() != s.variants.iter().any(|v| v.value.is_some())
        || (s.sweep_param.is_some() && s.variants.iter().any(|v| v.value.is_none()))
    {
        return Err("sweep_param and every variant's value go together".into());
    }
    let mut names = BTreeSet::new();
    for v in &s.variants {
        if !safe_word(&v.name, "-_.") {
            return Err(format!("variant name {:?} must be [A-Za-z0-9._-]+", v.name));
        }
        if !names.insert(&v.name) {
            return Err(format!("variant '{}' appears twice", v.name));
        }
        if s.backend == BackendKind::QemuBuiltin && !v.backend_args.is_empty() {
            return Err(format!(
                "variant '{}': backend_args need an external backend",
                v.name
            ));
        }
        if s.backend != BackendKind::QemuBuiltin && v.builtin_latency_ns.is_some() {
            return Err(format!(
                "variant '{}': builtin_latency_ns needs backend = \"qemu-builtin\"",
                v.name
            ));
        }
    }
    Ok(())
}

fn validate_step(step: &str) -> Result<(), String> {
    let (kind, arg) = step.split_once(':').unwrap_or((step, ""));
    let ok = match kind {
        "verify" => arg.is_empty(),
        "fio" | "storm" => safe_word(arg, "-_.") && !arg.starts_with('.'),
        "rescan" => arg.parse::<u32>().is_ok_and(|n| (1..=1000).contains(&n)),
        "sleep" => arg.parse::<u32>().is_ok_and(|n| n <= 3600),
        "killwrite" => arg.parse::<u32>().is_ok_and(|n| (1..=3600).contains(&n)),
        "fsload" => arg.parse::<u32>().is_ok_and(|n| (1..=100_000).contains(&n)),
        _ => false,
    };
    if ok {
        Ok(())
    } else {
        Err(format!(
            "bad step {step:?} (known: verify, fio:<file>, storm:<file>, rescan:<1..1000>, sleep:<secs>, killwrite:<secs>, fsload:<iterations>)"
        ))
    }
}

mod cells;
mod judgement;
mod verdict;
pub use cells::Grid;
pub use judgement::{JudgementSpec, JudgementWords};
pub use verdict::VerdictSpec;

#[cfg(test)]
mod tests;
