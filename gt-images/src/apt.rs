//! A private apt configuration: one sources line (`deb ...` or `deb-src ...`) with its own
//! sources list, package lists and cache under a directory of the image cache.
//!
//! Rules:
//! 1. The host's apt state is never read for sources nor written: `Dir::Etc::SourceList` points
//!    at the private list, `Dir::Etc::SourceParts` at /dev/null, and the lists and archives live
//!    under the private directory. The host's dpkg status and trusted keys are used as they are
//!    (the `signed-by=` of the line names the keyring).
//! 2. One directory per sources line (its sha256 names it), so two lines never share lists.
//! 3. `apt-get update` runs when the private lists are missing, and once more when a download
//!    finds nothing (the suite's index may have moved on since the lists were fetched).

use std::path::{Path, PathBuf};
use std::process::Command;

use super::util::{self, Ctx};
use super::{sha256_hex, ImageError};

/// One private sources line and where its apt state lives.
#[derive(Debug, Clone)]
pub struct PrivateApt {
    dir: PathBuf,
    line: String,
}

impl PrivateApt {
    /// The private apt state of `line` at `dir` (created, with its sources.list).
    pub fn at(dir: &Path, line: &str) -> Result<PrivateApt, ImageError> {
        for sub in ["lists/partial", "cache/archives/partial"] {
            util::mkdirs(&dir.join(sub))?;
        }
        let list = dir.join("sources.list");
        let text = format!("{line}\n");
        if std::fs::read_to_string(&list).ok().as_deref() != Some(text.as_str()) {
            util::write_atomic(&list, text.as_bytes())?;
        }
        Ok(PrivateApt {
            dir: dir.to_path_buf(),
            line: line.to_string(),
        })
    }

    /// The private apt state of `line` under `<cache>/apt/` (rule 2).
    pub fn in_cache(ctx: &Ctx, line: &str) -> Result<PrivateApt, ImageError> {
        let name = util::short(&sha256_hex(line.as_bytes())).to_string();
        PrivateApt::at(&ctx.cache.join("apt").join(name), line)
    }

    /// `apt-get` pointed at the private state (rule 1).
    pub fn apt_get(&self) -> Command {
        let mut c = Command::new("apt-get");
        let opt = |c: &mut Command, kv: String| {
            c.arg("-o").arg(kv);
        };
        opt(
            &mut c,
            format!(
                "Dir::Etc::SourceList={}",
                self.dir.join("sources.list").display()
            ),
        );
        opt(&mut c, "Dir::Etc::SourceParts=/dev/null".into());
        opt(
            &mut c,
            format!("Dir::State::Lists={}", self.dir.join("lists").display()),
        );
        opt(
            &mut c,
            format!("Dir::Cache={}", self.dir.join("cache").display()),
        );
        c
    }

    fn has_lists(&self) -> bool {
        std::fs::read_dir(self.dir.join("lists")).is_ok_and(|d| {
            d.flatten()
                .any(|e| e.file_name().to_string_lossy().ends_with("_InRelease"))
        })
    }

    /// `apt-get update` on the private list, logged to `log`.
    pub fn update(&self, log: &Path) -> Result<(), ImageError> {
        util::run_logged(
            self.apt_get().arg("update"),
            &format!("apt-get update ({})", self.line),
            log,
            |_| {},
        )
    }

    /// Fetches the lists if there are none yet (rule 3).
    pub fn ensure_lists(&self, log: &Path) -> Result<(), ImageError> {
        if self.has_lists() {
            return Ok(());
        }
        self.update(log)
    }

    /// `apt-get download PACKAGE=VERSION` into `dest` (rule 3: one retry after an update).
    pub fn download(&self, spec: &str, dest: &Path) -> Result<(), ImageError> {
        let log = self.dir.join("apt.log");
        self.ensure_lists(&log)?;
        let run = || {
            util::output(
                self.apt_get().arg("download").arg(spec).current_dir(dest),
                &format!("apt-get download {spec} (private list: {})", self.line),
            )
        };
        match run() {
            Ok(_) => Ok(()),
            Err(_) => {
                self.update(&log)?;
                run().map(|_| ())
            }
        }
    }
}

/// `apt-get download PACKAGE=VERSION` into `<cache>/debs` (once), checked against `sha256`.
/// With `apt` (one `deb ...` line), from that private sources list ([`PrivateApt`]);
/// without, from the host's apt sources.
pub fn download_deb(
    ctx: &Ctx,
    package: &str,
    version: &str,
    sha256: &str,
    apt: Option<&str>,
) -> Result<PathBuf, ImageError> {
    let dir = ctx.cache.join("debs");
    util::mkdirs(&dir)?;
    let find = || -> Option<PathBuf> {
        let prefix = format!("{package}_");
        std::fs::read_dir(&dir)
            .ok()?
            .filter_map(|e| e.ok())
            .find_map(|e| {
                let n = e.file_name().to_string_lossy().into_owned();
                let ver = n
                    .strip_prefix(&prefix)?
                    .split('_')
                    .next()?
                    .replace("%3a", ":");
                (ver == version && n.ends_with(".deb")).then(|| e.path())
            })
    };
    let deb = match find() {
        Some(p) => p,
        None => {
            let spec = format!("{package}={version}");
            match apt {
                Some(line) => PrivateApt::in_cache(ctx, line)?.download(&spec, &dir)?,
                None => {
                    util::output(
                        Command::new("apt-get")
                            .arg("download")
                            .arg(&spec)
                            .current_dir(&dir),
                        &format!("apt-get download {spec}"),
                    )?;
                }
            }
            find().ok_or_else(|| {
                ImageError::Tool(format!(
                    "apt-get download {spec} left no .deb in {}",
                    dir.display()
                ))
            })?
        }
    };
    let got = util::sha256_file(&deb)?;
    if got != sha256 {
        return Err(ImageError::Checksum {
            package: package.into(),
            version: version.into(),
            got,
            want: sha256.into(),
        });
    }
    Ok(deb)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_private_state_never_names_the_hosts_sources() {
        let d = tempfile::tempdir().unwrap();
        let line = "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian trixie-backports main";
        let a = PrivateApt::at(d.path(), line).unwrap();
        assert_eq!(
            std::fs::read_to_string(d.path().join("sources.list")).unwrap(),
            format!("{line}\n")
        );
        let args: Vec<String> = a
            .apt_get()
            .get_args()
            .map(|s| s.to_string_lossy().into_owned())
            .collect();
        let dir = d.path().display().to_string();
        assert!(args.contains(&format!("Dir::Etc::SourceList={dir}/sources.list")));
        assert!(args.contains(&"Dir::Etc::SourceParts=/dev/null".to_string()));
        assert!(args.contains(&format!("Dir::State::Lists={dir}/lists")));
        assert!(args.contains(&format!("Dir::Cache={dir}/cache")));
        assert!(!a.has_lists());
        std::fs::write(
            d.path()
                .join("lists/deb.debian.org_debian_dists_trixie-backports_InRelease"),
            "",
        )
        .unwrap();
        assert!(a.has_lists());
    }

    #[test]
    fn each_line_has_its_own_directory() {
        let d = tempfile::tempdir().unwrap();
        let ctx = Ctx::new(d.path(), false).unwrap();
        let a = PrivateApt::in_cache(&ctx, "deb http://x/debian a main").unwrap();
        let b = PrivateApt::in_cache(&ctx, "deb http://x/debian b main").unwrap();
        assert_ne!(a.dir, b.dir);
        assert!(a.dir.starts_with(d.path().join("apt")));
    }
}
