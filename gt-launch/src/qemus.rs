//! Which QEMU runs a guest: the system's (Debian 12: 7.2, the default) or QEMU 10 from
//! bookworm-backports, unpacked into the cache by `ci/fetch-qemu10.sh` (version and package
//! checksums pinned in this crate's `qemu10.pin`, compiled in; the script sources the same
//! file).
//!
//! Rules:
//! 1. `--qemu 7.2` (or `system`) is `qemu-system-x86_64` from `PATH`; `--qemu 10` (`10.0`, or
//!    the pinned version) is `$VB_CACHE/qemu/<version>/usr/bin/qemu-system-x86_64`, which must
//!    exist (else one line saying how to fetch it). `--qemu-bin PATH` names any binary.
//! 2. A binary at `<root>/usr/bin/` with a `<root>/usr/share/qemu/` of its own (an unpacked
//!    package) gets `-L <that dir>` and its own `qboot.rom`: its option ROMs (linuxboot_dma,
//!    kvmvapic) and firmware match it. Anything else finds its firmware where it was built to.
//! 3. A suite may need a minimum version (`min_qemu = "8.2"`); the version is read from the
//!    binary's `-version` line (`QEMU emulator version X.Y.Z ...`), which every result records.
//!
//! What needs which QEMU: vhost-user-scsi reconnects and sends the inflight messages from 8.2
//! on (backend restarts under a SCSI guest); vhost-user-blk does both on 7.2 already.

use std::path::{Path, PathBuf};

/// `gt-launch/qemu10.pin`, the pinned QEMU 10 (shell assignments).
const PIN: &str = include_str!("../qemu10.pin");

/// The system QEMU (rule 1).
pub const SYSTEM_QEMU: &str = "qemu-system-x86_64";

/// A value of `qemu10.pin`.
fn pin(key: &str) -> Option<&'static str> {
    PIN.lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .find_map(|l| l.strip_prefix(key)?.strip_prefix('='))
        .map(str::trim)
}

/// The pinned QEMU 10's upstream version, e.g. `10.0.2`.
pub fn pinned_version() -> &'static str {
    pin("QEMU10_VERSION").unwrap_or("10")
}

/// Where `ci/fetch-qemu10.sh` unpacks the pinned QEMU under `cache`.
pub fn pinned_binary(cache: &Path) -> PathBuf {
    cache
        .join("qemu")
        .join(pinned_version())
        .join("usr/bin/qemu-system-x86_64")
}

/// The binary `--qemu CHOICE` names (rule 1).
pub fn resolve(choice: &str, cache: &Path) -> Result<PathBuf, String> {
    let pinned = pinned_version();
    let major = pinned.split('.').next().unwrap_or(pinned);
    let minor = pinned.rsplit_once('.').map_or(pinned, |(mm, _)| mm);
    match choice {
        "7.2" | "system" => Ok(PathBuf::from(SYSTEM_QEMU)),
        c if c == major || c == minor || c == pinned => {
            let bin = pinned_binary(cache);
            if bin.is_file() {
                Ok(bin)
            } else {
                Err(format!(
                    "--qemu {c}: QEMU {pinned} is not in the cache ({}): run ci/fetch-qemu10.sh",
                    bin.display()
                ))
            }
        }
        c => Err(format!(
            "--qemu {c}: known are 7.2 (the system's) and {major} ({pinned}, ci/fetch-qemu10.sh)"
        )),
    }
}

/// The firmware directory of an unpacked QEMU (rule 2), if `qemu_bin` has one of its own.
pub fn own_data_dir(qemu_bin: &Path) -> Option<PathBuf> {
    let bin_dir = qemu_bin.parent()?;
    if !bin_dir.ends_with("usr/bin") {
        return None;
    }
    let dir = bin_dir.parent()?.join("share/qemu");
    let system = Path::new("/usr/share/qemu");
    (dir != system && dir.join("qboot.rom").is_file()).then_some(dir)
}

/// `(major, minor)` of a `-version` line or of a `min_qemu` value such as `8.2`.
pub fn parse_version(text: &str) -> Option<(u32, u32)> {
    let v = match text.find("version ") {
        Some(i) => &text[i + "version ".len()..],
        None => text,
    };
    let v = v.split_whitespace().next()?;
    let mut parts = v.split('.');
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next().map_or(Some(0), |m| m.parse().ok())?;
    Some((major, minor))
}

/// Rule 3: `Err` with one line when the QEMU of `version_line` is older than `min`.
pub fn check_min(suite: &str, min: Option<&str>, version_line: &str) -> Result<(), String> {
    let Some(min) = min else { return Ok(()) };
    let need = parse_version(min).ok_or_else(|| format!("suite '{suite}': min_qemu {min:?}"))?;
    match parse_version(version_line) {
        Some(have) if have >= need => Ok(()),
        Some(_) => Err(format!(
            "suite '{suite}' needs QEMU >= {min}; this one is '{version_line}' (try --qemu 10)"
        )),
        None => Err(format!(
            "suite '{suite}' needs QEMU >= {min}; cannot read the version of '{version_line}'"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pin_file_names_a_version_and_three_checksums() {
        assert_eq!(parse_version(pinned_version()).map(|v| v.0), Some(10));
        for p in ["x86", "common", "data"] {
            let sha = pin(&format!("QEMU10_SHA256_qemu_system_{p}")).unwrap();
            assert_eq!(sha.len(), 64, "{p}");
        }
    }

    #[test]
    fn choices_resolve_to_the_system_or_the_cached_binary() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(resolve("7.2", dir.path()).unwrap(), Path::new(SYSTEM_QEMU));
        let e = resolve("10", dir.path()).unwrap_err();
        assert!(e.contains("ci/fetch-qemu10.sh"), "{e}");
        assert!(resolve("9", dir.path()).unwrap_err().contains("known are"));
        let bin = pinned_binary(dir.path());
        std::fs::create_dir_all(bin.parent().unwrap()).unwrap();
        std::fs::write(&bin, b"").unwrap();
        for c in ["10", "10.0", pinned_version()] {
            assert_eq!(resolve(c, dir.path()).unwrap(), bin, "{c}");
        }
        // Its own firmware once the data package is unpacked beside it.
        assert_eq!(own_data_dir(&bin), None);
        let data = dir
            .path()
            .join("qemu")
            .join(pinned_version())
            .join("usr/share/qemu");
        std::fs::create_dir_all(&data).unwrap();
        std::fs::write(data.join("qboot.rom"), b"").unwrap();
        assert_eq!(own_data_dir(&bin), Some(data));
        assert_eq!(own_data_dir(Path::new(SYSTEM_QEMU)), None);
        assert_eq!(own_data_dir(Path::new("/usr/bin/qemu-system-x86_64")), None);
    }

    #[test]
    fn minimum_versions_compare_major_then_minor() {
        let v72 = "QEMU emulator version 7.2.22 (Debian 1:7.2+dfsg-7+deb12u18+b3)";
        let v10 = "QEMU emulator version 10.0.2 (Debian 1:10.0.2+ds-2+deb13u1~bpo12+1)";
        assert_eq!(parse_version(v72), Some((7, 2)));
        assert_eq!(parse_version(v10), Some((10, 0)));
        assert_eq!(parse_version("8.2"), Some((8, 2)));
        assert_eq!(parse_version("10"), Some((10, 0)));
        assert_eq!(parse_version("garbage"), None);
        assert!(check_min("s", None, v72).is_ok());
        assert!(check_min("s", Some("8.2"), v10).is_ok());
        let e = check_min("s", Some("8.2"), v72).unwrap_err();
        assert!(
            e.contains("needs QEMU >= 8.2") && e.contains("7.2.22"),
            "{e}"
        );
        assert!(check_min("s", Some("7.2"), v72).is_ok());
        assert!(check_min("s", Some("8.2"), "nonsense").is_err());
    }
}
