//! Prebuilt Debian kernels: `apt-get download` + `dpkg-deb -x` into the cache, never installed.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::kernel::BuiltKernel;
use super::manifest::{Manifest, Source, Variant};
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
    let root = dir_of(cache, s).join("root");
    find_vmlinuz(&root).ok().map(|(p, _)| p)
}

fn find_vmlinuz(root: &Path) -> Result<(PathBuf, String), ImageError> {
    let boot = root.join("boot");
    let rd = std::fs::read_dir(&boot).map_err(|e| ImageError::io(&boot, e))?;
    rd.filter_map(|e| e.ok())
        .find_map(|e| {
            let n = e.file_name().to_string_lossy().into_owned();
            n.strip_prefix("vmlinuz-")
                .map(|rel| (e.path(), rel.to_string()))
        })
        .ok_or_else(|| ImageError::Tool(format!("no vmlinuz-* in {}", boot.display())))
}

/// Downloads and extracts the variant's package (once) and returns its kernel.
pub fn ensure(ctx: &Ctx, m: &Manifest, v: &Variant) -> Result<Prebuilt, ImageError> {
    let s = m.source_of(v);
    let Some(sha256) = s.sha256() else {
        return Err(ImageError::Usage(format!(
            "variant '{}' is not a prebuilt kernel",
            v.name
        )));
    };
    let dir = dir_of(&ctx.cache, s);
    let _lock = Lock::take(&dir)?;
    let root = dir.join("root");
    if !dir.join("extracted").is_file() {
        let deb = util::download_deb(ctx, s.package(), s.version(), sha256)?;
        let tmp = dir.join("root.tmp");
        for p in [&tmp, &root] {
            if p.exists() {
                std::fs::remove_dir_all(p).map_err(|e| ImageError::io(p, e))?;
            }
        }
        let pb = ctx.bar(1, "extract");
        pb.set_message(s.package().to_string());
        util::output(
            Command::new("dpkg-deb").arg("-x").arg(&deb).arg(&tmp),
            "dpkg-deb -x",
        )?;
        pb.finish_and_clear();
        std::fs::rename(&tmp, &root).map_err(|e| ImageError::io(&tmp, e))?;
        util::write_atomic(&dir.join("extracted"), sha256.as_bytes())?;
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
        modules_dir: root.join("lib/modules").join(&release),
        kernel: BuiltKernel {
            release,
            bzimage: vmlinuz,
            bzimage_sha256: sha,
            inputs: Vec::new(),
        },
    })
}
