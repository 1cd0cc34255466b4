//! Prebuilt Debian kernels: `apt-get download` + `dpkg-deb -x` into the cache, never installed.
//!
//! Rules:
//! 1. The source's package and its `extra` packages (same version) are extracted into one root,
//!    in order; each .deb is checked against its sha256 first.
//! 2. The kernel is `boot/vmlinuz-<release>` (Debian 12) or `usr/lib/modules/<release>/vmlinuz*`
//!    (Debian 13's split packages); the modules are under `lib/modules/<release>` or
//!    `usr/lib/modules/<release>`, whichever holds `modules.order`.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::apt;
use super::kernel::BuiltKernel;
use super::manifest::{KernelBuild, Manifest, Source};
use super::util::{self, Ctx, Lock};
use super::{sha256_file, ImageError};

/// An extracted prebuilt kernel.
#[derive(Debug, Clone)]
pub struct Prebuilt {
    pub kernel: BuiltKernel,
    /// `lib/modules/<release>` of the package.
    pub modules_dir: PathBuf,
}

fn dir_of(cache: &Path, s: &Source) -> PathBuf {
    cache
        .join("prebuilt")
        .join(format!("{}_{}", s.package(), util::safe_name(s.version())))
}

/// The bzImage of an already extracted package, if any.
pub fn cached(cache: &Path, s: &Source) -> Option<PathBuf> {
    let dir = dir_of(cache, s);
    if !dir.join("extracted").is_file() {
        return None;
    }
    find_vmlinuz(&dir.join("root")).ok().map(|(p, _)| p)
}

/// The kernel image and its release (rule 2).
fn find_vmlinuz(root: &Path) -> Result<(PathBuf, String), ImageError> {
    let entries = |d: &Path| -> Vec<(String, PathBuf)> {
        let mut v: Vec<(String, PathBuf)> = std::fs::read_dir(d)
            .map(|rd| {
                rd.filter_map(|e| e.ok())
                    .map(|e| (e.file_name().to_string_lossy().into_owned(), e.path()))
                    .collect()
            })
            .unwrap_or_default();
        v.sort();
        v
    };
    let boot = entries(&root.join("boot")).into_iter().find_map(|(n, p)| {
        n.strip_prefix("vmlinuz-")
            .map(|rel| (p.clone(), rel.to_string()))
    });
    let usr = || {
        entries(&root.join("usr/lib/modules"))
            .into_iter()
            .find_map(|(rel, dir)| {
                entries(&dir)
                    .into_iter()
                    .find(|(n, _)| n.starts_with("vmlinuz"))
                    .map(|(_, p)| (p, rel))
            })
    };
    boot.or_else(usr).ok_or_else(|| {
        ImageError::Tool(format!(
            "no boot/vmlinuz-* nor usr/lib/modules/*/vmlinuz* in {}",
            root.display()
        ))
    })
}

/// `lib/modules/<release>` or `usr/lib/modules/<release>`, whichever has modules.order.
fn modules_dir(root: &Path, release: &str) -> PathBuf {
    let usr = root.join("usr/lib/modules").join(release);
    if usr.join("modules.order").is_file() {
        usr
    } else {
        root.join("lib/modules").join(release)
    }
}

/// Downloads and extracts the variant's packages (once) and returns its kernel.
pub fn ensure(ctx: &Ctx, m: &Manifest, v: &KernelBuild) -> Result<Prebuilt, ImageError> {
    let s = m.source_of(v);
    let Source::DebianPrebuilt {
        package,
        version,
        sha256,
        apt,
        extra,
    } = s
    else {
        return Err(ImageError::Usage(format!(
            "kernel '{}' is not a prebuilt kernel",
            v.name
        )));
    };
    let dir = dir_of(&ctx.cache, s);
    let _lock = Lock::take(&dir)?;
    let root = dir.join("root");
    if !dir.join("extracted").is_file() {
        let mut debs = vec![(
            package.as_str(),
            apt::download_deb(ctx, package, version, sha256, apt.as_deref())?,
        )];
        for e in extra {
            let deb = apt::download_deb(ctx, &e.package, version, &e.sha256, apt.as_deref())?;
            debs.push((e.package.as_str(), deb));
        }
        let tmp = dir.join("root.tmp");
        for p in [&tmp, &root] {
            if p.exists() {
                std::fs::remove_dir_all(p).map_err(|e| ImageError::io(p, e))?;
            }
        }
        let pb = ctx.bar(debs.len() as u64, "extract");
        for (name, deb) in &debs {
            pb.set_message(name.to_string());
            util::output(
                Command::new("dpkg-deb").arg("-x").arg(deb).arg(&tmp),
                "dpkg-deb -x",
            )?;
            pb.inc(1);
        }
        pb.finish_and_clear();
        std::fs::rename(&tmp, &root).map_err(|e| ImageError::io(&tmp, e))?;
        let shas: Vec<&str> = std::iter::once(sha256.as_str())
            .chain(extra.iter().map(|e| e.sha256.as_str()))
            .collect();
        util::write_atomic(&dir.join("extracted"), shas.join("\n").as_bytes())?;
    }
    let (vmlinuz, release) = find_vmlinuz(&root)?;
    let sha_file = dir.join("bzImage.sha256");
    let sha = match std::fs::read_to_string(&sha_file) {
        Ok(s) if s.trim().len() == 64 => s.trim().to_string(),
        _ => {
            let s = sha256_file(&vmlinuz)?;
            util::write_atomic(&sha_file, s.as_bytes())?;
            s
        }
    };
    Ok(Prebuilt {
        modules_dir: modules_dir(&root, &release),
        kernel: BuiltKernel {
            release,
            bzimage: vmlinuz,
            bzimage_sha256: sha,
            inputs: Vec::new(),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_kernel_in_both_debian_layouts() {
        let d = tempfile::tempdir().unwrap();
        let old = d.path().join("old");
        std::fs::create_dir_all(old.join("boot")).unwrap();
        std::fs::create_dir_all(old.join("lib/modules/6.12.117+deb12-rt-amd64")).unwrap();
        std::fs::write(old.join("boot/vmlinuz-6.12.117+deb12-rt-amd64"), "k").unwrap();
        std::fs::write(old.join("boot/config-6.12.117+deb12-rt-amd64"), "c").unwrap();
        let (p, rel) = find_vmlinuz(&old).unwrap();
        assert_eq!(rel, "6.12.117+deb12-rt-amd64");
        assert!(p.ends_with("boot/vmlinuz-6.12.117+deb12-rt-amd64"));
        assert_eq!(
            modules_dir(&old, &rel),
            old.join("lib/modules/6.12.117+deb12-rt-amd64")
        );
        let new = d.path().join("new");
        let m = new.join("usr/lib/modules/7.3.4+deb13-rt-amd64");
        std::fs::create_dir_all(&m).unwrap();
        std::fs::write(m.join("vmlinuz.unsigned"), "k").unwrap();
        std::fs::write(m.join("modules.order"), "").unwrap();
        let (p, rel) = find_vmlinuz(&new).unwrap();
        assert_eq!(rel, "7.3.4+deb13-rt-amd64");
        assert_eq!(p, m.join("vmlinuz.unsigned"));
        assert_eq!(modules_dir(&new, &rel), m);
        let e = find_vmlinuz(&d.path().join("none"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("no boot/vmlinuz-*"), "{e}");
    }
}
