//! Kernel modules for a prebuilt kernel's initramfs: the wanted modules and their dependencies
//! (from each module's own `.modinfo` `depends=`), in load order (dependencies first), skipping
//! what `modules.builtin` says the kernel already has. Compressed modules are decompressed on the
//! host, so busybox `insmod` can load them.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use super::ImageError;

/// A module ready for the initramfs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Module {
    /// Canonical name (`-` folded to `_`).
    pub name: String,
    /// Uncompressed `.ko` bytes.
    pub data: Vec<u8>,
}

fn canon(name: &str) -> String {
    name.replace('-', "_")
}

/// `kernel/drivers/scsi/sd_mod.ko` -> `sd_mod`.
fn name_of(rel: &str) -> String {
    let base = rel.rsplit('/').next().unwrap_or(rel);
    let stem = base.split(".ko").next().unwrap_or(base);
    canon(stem)
}

/// The value of `key=` in a module's `.modinfo` strings (NUL-separated `key=value`).
pub fn modinfo(ko: &[u8], key: &str) -> Option<String> {
    let needle = format!("{key}=");
    ko.split(|&b| b == 0)
        .find(|s| s.starts_with(needle.as_bytes()))
        .map(|s| String::from_utf8_lossy(&s[needle.len()..]).into_owned())
}

fn read_ko(path: &Path) -> Result<Vec<u8>, ImageError> {
    let name = path.to_string_lossy();
    let tool = if name.ends_with(".xz") {
        Some("xz")
    } else if name.ends_with(".zst") {
        Some("zstd")
    } else if name.ends_with(".gz") {
        Some("gzip")
    } else {
        None
    };
    match tool {
        None => std::fs::read(path).map_err(|e| ImageError::io(path, e)),
        Some(t) => {
            let out = Command::new(t)
                .arg("-dc")
                .arg(path)
                .output()
                .map_err(|e| ImageError::Tool(format!("cannot run {t}: {e}")))?;
            if !out.status.success() {
                return Err(ImageError::Tool(format!(
                    "{t} -dc {} failed: {}",
                    path.display(),
                    String::from_utf8_lossy(&out.stderr).trim()
                )));
            }
            Ok(out.stdout)
        }
    }
}

/// Resolves `wanted` in `dir` (a `lib/modules/<release>` directory).
pub fn resolve(dir: &Path, wanted: &[String]) -> Result<Vec<Module>, ImageError> {
    let read = |f: &str| {
        let p = dir.join(f);
        std::fs::read_to_string(&p).map_err(|e| ImageError::io(&p, e))
    };
    let builtin: BTreeSet<String> = read("modules.builtin")?.lines().map(name_of).collect();
    let paths: BTreeMap<String, String> = read("modules.order")?
        .lines()
        .map(|l| (name_of(l), l.trim().to_string()))
        .collect();
    let mut order = Vec::new();
    let mut done = BTreeSet::new();
    for w in wanted {
        visit(
            dir,
            &canon(w),
            &builtin,
            &paths,
            &mut done,
            &mut order,
            &mut Vec::new(),
        )?;
    }
    Ok(order)
}

fn locate(dir: &Path, rel: &str) -> Option<PathBuf> {
    ["", ".xz", ".zst", ".gz"]
        .iter()
        .map(|ext| dir.join(format!("{rel}{ext}")))
        .find(|p| p.is_file())
}

fn visit(
    dir: &Path,
    name: &str,
    builtin: &BTreeSet<String>,
    paths: &BTreeMap<String, String>,
    done: &mut BTreeSet<String>,
    order: &mut Vec<Module>,
    stack: &mut Vec<String>,
) -> Result<(), ImageError> {
    if done.contains(name) || builtin.contains(name) {
        return Ok(());
    }
    if stack.iter().any(|s| s == name) {
        return Err(ImageError::Tool(format!(
            "module dependency cycle: {} -> {name}",
            stack.join(" -> ")
        )));
    }
    let rel = paths.get(name).ok_or_else(|| {
        ImageError::Tool(format!(
            "module {name} is neither built in nor listed in {}/modules.order",
            dir.display()
        ))
    })?;
    let file = locate(dir, rel)
        .ok_or_else(|| ImageError::Tool(format!("module file {}/{rel} missing", dir.display())))?;
    let data = read_ko(&file)?;
    stack.push(name.to_string());
    let deps = modinfo(&data, "depends").unwrap_or_default();
    for d in deps.split(',').filter(|d| !d.is_empty()) {
        visit(dir, &canon(d), builtin, paths, done, order, stack)?;
    }
    stack.pop();
    done.insert(name.to_string());
    order.push(Module {
        name: name.to_string(),
        data,
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ko(name: &str, depends: &str) -> Vec<u8> {
        format!("\x7fELF junk\0license=GPL\0depends={depends}\0name={name}\0vermagic=6.12\0")
            .into_bytes()
    }

    fn fake_dir() -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        let p = d.path();
        std::fs::create_dir_all(p.join("kernel/drivers/scsi")).unwrap();
        std::fs::create_dir_all(p.join("kernel/drivers/block")).unwrap();
        std::fs::write(
            p.join("modules.builtin"),
            "kernel/drivers/virtio/virtio_pci.ko\nkernel/drivers/char/virtio_console.ko\n",
        )
        .unwrap();
        std::fs::write(
            p.join("modules.order"),
            "kernel/drivers/scsi/scsi_common.ko\nkernel/drivers/scsi/scsi_mod.ko\nkernel/drivers/scsi/sd_mod.ko\nkernel/drivers/scsi/virtio_scsi.ko\nkernel/drivers/block/virtio_blk.ko\n",
        )
        .unwrap();
        let w = |rel: &str, data: Vec<u8>| std::fs::write(p.join(rel), data).unwrap();
        w("kernel/drivers/scsi/scsi_common.ko", ko("scsi_common", ""));
        w(
            "kernel/drivers/scsi/scsi_mod.ko",
            ko("scsi_mod", "scsi_common"),
        );
        w(
            "kernel/drivers/scsi/sd_mod.ko",
            ko("sd_mod", "scsi_mod,scsi_common"),
        );
        w(
            "kernel/drivers/scsi/virtio_scsi.ko",
            ko("virtio_scsi", "scsi_mod"),
        );
        w("kernel/drivers/block/virtio_blk.ko", ko("virtio_blk", ""));
        d
    }

    fn names(v: &[Module]) -> Vec<&str> {
        v.iter().map(|m| m.name.as_str()).collect()
    }

    #[test]
    fn dependencies_come_first_and_builtins_are_skipped() {
        let d = fake_dir();
        let want: Vec<String> = ["virtio_pci", "virtio-blk", "virtio_scsi", "sd_mod"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let m = resolve(d.path(), &want).unwrap();
        assert_eq!(
            names(&m),
            vec![
                "virtio_blk",
                "scsi_common",
                "scsi_mod",
                "virtio_scsi",
                "sd_mod"
            ]
        );
        assert_eq!(modinfo(&m[0].data, "name").as_deref(), Some("virtio_blk"));
    }

    #[test]
    fn xz_modules_are_decompressed() {
        let d = fake_dir();
        let f = d.path().join("kernel/drivers/block/virtio_blk.ko");
        let st = Command::new("xz").arg(&f).status();
        if !st.is_ok_and(|s| s.success()) {
            return; // no xz on this machine: the plain-file path is covered above
        }
        assert!(!f.exists());
        let m = resolve(d.path(), &["virtio_blk".to_string()]).unwrap();
        assert_eq!(m[0].data, ko("virtio_blk", ""));
    }

    #[test]
    fn unknown_modules_and_cycles_are_errors() {
        let d = fake_dir();
        let e = resolve(d.path(), &["nosuch".to_string()]).unwrap_err();
        assert!(e.to_string().contains("nosuch"));
        std::fs::write(
            d.path().join("kernel/drivers/scsi/scsi_common.ko"),
            ko("scsi_common", "sd_mod"),
        )
        .unwrap();
        let e = resolve(d.path(), &["sd_mod".to_string()]).unwrap_err();
        assert!(e.to_string().contains("cycle"), "{e}");
    }
}
