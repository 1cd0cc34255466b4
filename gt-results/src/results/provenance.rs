//! Where a result came from: kernel, initramfs, backend, QEMU, host, seeds, time.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use procfs::Current;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// The host's load averages (read where the launcher reads its other host facts).
use gt_launch::host::loadavg;

/// Everything needed to say what produced a run (all fields default when absent on read).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Provenance {
    pub kernel: KernelProvenance,
    pub initramfs_sha256: String,
    pub backend: BackendProvenance,
    pub qemu: QemuProvenance,
    /// `tcg` or `kvm`: what actually ran.
    pub accelerator: String,
    pub host: HostInfo,
    /// Named seeds (latency model, fio `randseed`, ...).
    pub seeds: BTreeMap<String, u64>,
    /// RFC 3339 UTC, e.g. `2026-11-30T00:25:06Z`.
    pub started_at: String,
    pub guest_tests_version: String,
    /// The batch scheduler that placed the run (None: the local executor).
    pub scheduler: Option<SchedulerInfo>,
}

/// Where a batch scheduler ran a run, and what else it ran there.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SchedulerInfo {
    /// `slurm`.
    pub name: String,
    /// The array job and this run's task in it.
    pub job_id: String,
    pub array_task_id: Option<u32>,
    pub partition: String,
    /// The node (Slurm's name for it; `host.hostname` is the machine's own).
    pub node: String,
    /// CPUs the scheduler gave the task on that node.
    pub cpus_on_node: Option<u32>,
    /// Whether the task had the node to itself (`--exclusive`).
    pub exclusive: bool,
    /// Other jobs the scheduler ran on the node when the task started (`id user name`).
    pub other_jobs: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct KernelProvenance {
    /// Variant name from the kernel manifest (`base`, `seed000`, ...).
    pub variant: String,
    /// `uname -r` (filled from the guest's `meta` when the harness leaves it empty).
    pub release: String,
    pub bzimage_sha256: String,
    /// What the kernel was built from: an ad-hoc kernel's `spec=...`, then the build's inputs
    /// (`source=git head=<commit> dirty=<bool> changes=<hash>`, fragment, `patch=<name>
    /// sha256=<hash>`, toolchain); empty for a prebuilt kernel.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub inputs: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct BackendProvenance {
    /// `vhost-blk`, or `qemu-builtin` for QEMU's own device.
    pub name: String,
    pub version: String,
    pub git_rev: Option<String>,
    pub git_dirty: Option<bool>,
    pub argv: Vec<String>,
    /// The backend's effective configuration (TOML or JSON text).
    pub config: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct QemuProvenance {
    pub version: String,
    pub argv: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct HostInfo {
    pub cpu_model: String,
    pub cores: usize,
    /// 1, 5 and 15 minute load averages.
    pub loadavg_before: Option<[f64; 3]>,
    pub loadavg_after: Option<[f64; 3]>,
    /// Host `uname -r`.
    pub kernel: String,
    /// The host's name (`/proc/sys/kernel/hostname`): which node of a cluster ran the run.
    pub hostname: String,
}

/// The first CPU's `model name` (empty on hosts whose cpuinfo has none, e.g. arm64). procfs
/// keeps a value up to a second `:`, if a model name ever held one.
fn cpu_model(c: &procfs::CpuInfo) -> Option<String> {
    c.model_name(0).map(str::to_string)
}

impl HostInfo {
    /// Reads the CPU model, core count, load and kernel release of this host (best effort:
    /// fields it cannot read stay empty).
    pub fn probe() -> Self {
        let cpu_model = procfs::CpuInfo::current()
            .ok()
            .as_ref()
            .and_then(cpu_model)
            .unwrap_or_default();
        HostInfo {
            cpu_model,
            cores: std::thread::available_parallelism().map_or(0, |n| n.get()),
            loadavg_before: loadavg(),
            loadavg_after: None,
            kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
                .map(|s| s.trim().to_string())
                .unwrap_or_default(),
            hostname: std::fs::read_to_string("/proc/sys/kernel/hostname")
                .map(|s| s.trim().to_string())
                .unwrap_or_default(),
        }
    }
}

/// SHA-256 of a file, lower-case hex.
pub fn sha256_file(path: &Path) -> std::io::Result<String> {
    let mut f = std::fs::File::open(path)?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Ok(hex::encode(h.finalize()))
}

/// `t` as RFC 3339 UTC with second precision (`YYYY-MM-DDTHH:MM:SSZ`).
pub fn rfc3339_utc(t: SystemTime) -> String {
    let secs = t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (y, m, d) = civil_from_days(days as i64);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Now, as [`rfc3339_utc`].
pub fn now_rfc3339() -> String {
    rfc3339_utc(SystemTime::now())
}

/// Days since 1970-01-01 -> (year, month, day) in the proleptic Gregorian calendar
/// (Howard Hinnant's civil-from-days algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// `git rev-parse HEAD` and whether the work tree has changes, for the repository at `dir`
/// (None when git or the repository is unavailable).
pub fn git_state(dir: &Path) -> (Option<String>, Option<bool>) {
    let run = |args: &[&str]| {
        std::process::Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    let rev = run(&["rev-parse", "HEAD"]);
    let dirty = rev
        .as_ref()
        .and_then(|_| run(&["status", "--porcelain", "--untracked-files=no"]))
        .map(|s| !s.is_empty());
    (rev, dirty)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn rfc3339_known_instants() {
        assert_eq!(rfc3339_utc(UNIX_EPOCH), "1970-01-01T00:00:00Z");
        let at = |s| rfc3339_utc(UNIX_EPOCH + Duration::from_secs(s));
        // `date -u -d @951782400` = 2000-02-29 00:00:00 (leap day of a /400 year).
        assert_eq!(at(951_782_400), "2000-02-29T00:00:00Z");
        // `date -u -d @1795998372` = Mon Nov 30 00:26:12 UTC 2026 (the fio fixtures' timestamp).
        assert_eq!(at(1_795_998_372), "2026-11-30T00:26:12Z");
        assert_eq!(at(4_107_542_399), "2100-02-28T23:59:59Z");
        assert_eq!(at(4_107_542_400), "2100-03-01T00:00:00Z");
    }

    #[test]
    fn cpu_model_and_sha() {
        use procfs::FromRead;
        let text = "processor\t: 0\nvendor_id\t: GenuineIntel\n\
                    model name\t: Intel(R) Xeon(R) CPU @ 2.20GHz \nflags\t\t: fpu\n\n\
                    processor\t: 1\nmodel name\t: Intel(R) Xeon(R) CPU @ 2.20GHz\n";
        let c = procfs::CpuInfo::from_read(text.as_bytes()).unwrap();
        assert_eq!(
            cpu_model(&c).as_deref(),
            Some("Intel(R) Xeon(R) CPU @ 2.20GHz")
        );
        let arm = procfs::CpuInfo::from_read("processor\t: 0\nBogoMIPS\t: 50.00\n".as_bytes());
        assert_eq!(cpu_model(&arm.unwrap()), None);
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        std::fs::write(&p, b"abc").unwrap();
        assert_eq!(
            sha256_file(&p).unwrap(),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert!(sha256_file(&dir.path().join("missing")).is_err());
    }

    #[test]
    fn host_probe_reads_this_host() {
        let h = HostInfo::probe();
        assert!(h.cores >= 1);
        assert!(!h.kernel.is_empty());
        assert!(!h.hostname.is_empty());
        assert!(h.loadavg_before.is_some());
    }
}
