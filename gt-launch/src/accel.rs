//! Choosing the accelerator: KVM only if a short probe boot works (nested KVM hangs on some
//! hosts), else TCG. The verdict is cached per host kernel and QEMU version.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::process::Guarded;
use super::qemu::{Accel, QBOOT_ROM};

/// What the user asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AccelChoice {
    Tcg,
    Kvm,
    Auto,
}

impl std::str::FromStr for AccelChoice {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "tcg" => Ok(AccelChoice::Tcg),
            "kvm" => Ok(AccelChoice::Kvm),
            "auto" => Ok(AccelChoice::Auto),
            _ => Err(format!("unknown accelerator '{s}' (known: tcg, kvm, auto)")),
        }
    }
}

/// How long a KVM probe boot may take before KVM is declared unusable.
pub const PROBE_LIMIT: Duration = Duration::from_secs(8);

fn cache_file(cache_dir: &Path, host_release: &str, qemu_version: &str) -> PathBuf {
    let key: String = format!("{host_release}-{qemu_version}")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect();
    cache_dir.join("accel").join(format!("{key}.txt"))
}

/// Resolves `choice`. `Auto` reads the cached verdict or probes with `bzimage`.
pub fn resolve(
    choice: AccelChoice,
    qemu_bin: &Path,
    qemu_version: &str,
    host_release: &str,
    bzimage: &Path,
    cache_dir: &Path,
) -> Accel {
    match choice {
        AccelChoice::Tcg => return Accel::Tcg,
        AccelChoice::Kvm => return Accel::Kvm,
        AccelChoice::Auto => {}
    }
    let file = cache_file(cache_dir, host_release, qemu_version);
    match std::fs::read_to_string(&file).as_deref().map(str::trim) {
        Ok("kvm") => return Accel::Kvm,
        Ok("tcg") => return Accel::Tcg,
        _ => {}
    }
    let verdict = if kvm_usable() && probe(qemu_bin, bzimage, PROBE_LIMIT) {
        Accel::Kvm
    } else {
        Accel::Tcg
    };
    tracing::info!(accel = verdict.as_str(), cache = %file.display(), "accelerator probe");
    if let Some(dir) = file.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    let _ = std::fs::write(&file, verdict.as_str());
    verdict
}

fn kvm_usable() -> bool {
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/kvm")
        .is_ok()
}

/// Boots `bzimage` under KVM with no root: a working KVM reaches the "no root" panic and QEMU
/// exits (panic=-1, -no-reboot) well within `limit`.
pub fn probe(qemu_bin: &Path, bzimage: &Path, limit: Duration) -> bool {
    let Ok(dir) = tempdir() else { return false };
    let console = dir.join("console.log");
    let argv: Vec<String> = [
        qemu_bin.display().to_string(),
        "-accel".into(),
        "kvm".into(),
        "-cpu".into(),
        "host".into(),
        "-m".into(),
        "256M".into(),
        "-bios".into(),
        QBOOT_ROM.into(),
        "-display".into(),
        "none".into(),
        "-no-reboot".into(),
        "-nodefaults".into(),
        "-serial".into(),
        format!("file:{}", console.display()),
        "-kernel".into(),
        bzimage.display().to_string(),
        "-append".into(),
        "console=ttyS0 panic=-1 root=/dev/vb-probe-none".into(),
    ]
    .into();
    let ok = match Guarded::spawn("kvm-probe", &argv, &dir.join("qemu.log")) {
        Ok(mut g) => {
            let ended = g.wait_for(limit).is_some();
            g.stop(Duration::from_millis(500));
            let text = std::fs::read_to_string(&console).unwrap_or_default();
            ended && text.contains("Linux version")
        }
        Err(_) => false,
    };
    let _ = std::fs::remove_dir_all(&dir);
    ok
}

fn tempdir() -> std::io::Result<PathBuf> {
    let d = std::env::temp_dir().join(format!(
        "guest-tests-probe-{}-{}",
        std::process::id(),
        super::host::unix_now() as u64
    ));
    std::fs::create_dir_all(&d)?;
    Ok(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn explicit_choice_needs_no_probe() {
        let d = tempfile::tempdir().unwrap();
        let q = Path::new("/nonexistent/qemu");
        let k = Path::new("/nonexistent/bz");
        assert_eq!(
            resolve(AccelChoice::Tcg, q, "v", "r", k, d.path()),
            Accel::Tcg
        );
        assert_eq!(
            resolve(AccelChoice::Kvm, q, "v", "r", k, d.path()),
            Accel::Kvm
        );
        assert!(!d.path().join("accel").exists());
    }

    #[test]
    fn auto_uses_and_writes_the_cache() {
        let d = tempfile::tempdir().unwrap();
        let f = cache_file(d.path(), "6.1.0-x", "QEMU emulator version 7.2.x");
        std::fs::create_dir_all(f.parent().unwrap()).unwrap();
        std::fs::write(&f, "kvm\n").unwrap();
        let q = Path::new("/nonexistent/qemu");
        let k = Path::new("/nonexistent/bz");
        let a = resolve(
            AccelChoice::Auto,
            q,
            "QEMU emulator version 7.2.x",
            "6.1.0-x",
            k,
            d.path(),
        );
        assert_eq!(a, Accel::Kvm);
        // A different QEMU version misses the cache; the probe fails (no QEMU) -> tcg, cached.
        let a = resolve(AccelChoice::Auto, q, "other", "6.1.0-x", k, d.path());
        assert_eq!(a, Accel::Tcg);
        let f2 = cache_file(d.path(), "6.1.0-x", "other");
        assert_eq!(std::fs::read_to_string(f2).unwrap(), "tcg");
    }

    #[test]
    fn parses_choice() {
        assert_eq!("auto".parse::<AccelChoice>(), Ok(AccelChoice::Auto));
        assert!("hvf"
            .parse::<AccelChoice>()
            .unwrap_err()
            .contains("known: tcg, kvm, auto"));
    }
}
