//! A static fio built from Debian's source package, cached by source version.
//!
//! The source comes from `apt-get source` with a private sources list holding the manifest's one
//! `deb-src` line ([`super::apt::PrivateApt`]: the system's apt state is not touched).

use std::path::{Path, PathBuf};
use std::process::Command;

use indicatif::ProgressBar;

use super::apt::PrivateApt;
use super::manifest::FioRecipe;
use super::util::{self, Ctx, Lock};
use super::{ImageError, BUILDER_VERSION};

/// What a cached fio was built from, besides its source version (the directory name).
pub(crate) fn inputs(recipe: &FioRecipe) -> Result<String, ImageError> {
    Ok(format!(
        "deb_src={}\nconfigure={}\ntoolchain={}\nbuilder={BUILDER_VERSION}\n",
        recipe.deb_src,
        recipe.configure.join(" "),
        util::gcc_version()?
    ))
}

/// The cached, stripped static fio for `recipe` (cached by source version; rebuilt when the
/// configure options, compiler or builder change), building it if needed.
pub fn ensure(ctx: &Ctx, recipe: &FioRecipe) -> Result<PathBuf, ImageError> {
    let dir = ctx.cache.join("fio").join(util::safe_name(&recipe.version));
    let bin = dir.join("fio");
    let want = inputs(recipe)?;
    let fresh = || {
        bin.is_file()
            && std::fs::read_to_string(dir.join("inputs")).ok().as_deref() == Some(want.as_str())
    };
    if fresh() {
        return Ok(bin);
    }
    let _lock = Lock::take(&dir)?;
    if fresh() {
        return Ok(bin);
    }
    let built = build(ctx, recipe, &dir, "build")?;
    std::fs::rename(&built, &bin).map_err(|e| ImageError::io(&built, e))?;
    util::write_atomic(&dir.join("inputs"), want.as_bytes())?;
    Ok(bin)
}

/// Builds fio from source in `<dir>/<name>`; returns the stripped binary (inside `dir`).
pub fn build(ctx: &Ctx, recipe: &FioRecipe, dir: &Path, name: &str) -> Result<PathBuf, ImageError> {
    let log = dir.join("build.log");
    let apt = PrivateApt::at(&dir.join("apt"), &recipe.deb_src)?;
    let dl = dir.join("apt").join("dl");
    util::mkdirs(&dl)?;
    let pb = ctx.bar(4, "fio");
    let dsc = download_source(&apt, recipe, &dl, &log, &pb)?;
    let src = dir.join(name);
    if src.exists() {
        std::fs::remove_dir_all(&src).map_err(|e| ImageError::io(&src, e))?;
    }
    util::run_logged(
        Command::new("dpkg-source").arg("-x").arg(&dsc).arg(&src),
        "dpkg-source -x",
        &log,
        |_| {},
    )?;
    configure_and_make(&src, recipe, &log, &pb)?;
    let out = dir.join(format!("fio.{name}"));
    util::run_logged(
        Command::new("strip")
            .arg("-o")
            .arg(&out)
            .arg(src.join("fio")),
        "strip fio",
        &log,
        |_| {},
    )?;
    pb.finish_and_clear();
    let file =
        util::output(Command::new("file").arg("-b").arg(&out), "file fio").unwrap_or_default();
    if !file.contains("statically linked") {
        return Err(ImageError::Tool(format!(
            "fio built in {} is not static: {}",
            src.display(),
            file.trim()
        )));
    }
    let _ = std::fs::remove_dir_all(&src);
    // dpkg-source leaves the upstream tarball next to the tree it unpacked
    for e in std::fs::read_dir(dir)
        .map_err(|e| ImageError::io(dir, e))?
        .flatten()
    {
        if e.file_name().to_string_lossy().ends_with(".orig.tar.gz") {
            let _ = std::fs::remove_file(e.path());
        }
    }
    Ok(out)
}

/// The source package's .dsc in `dl`, downloaded (`apt-get source --download-only`
/// through the private sources list) unless already there.
fn download_source(
    apt: &PrivateApt,
    recipe: &FioRecipe,
    dl: &Path,
    log: &Path,
    pb: &ProgressBar,
) -> Result<PathBuf, ImageError> {
    pb.set_message("apt-get update (private deb-src list)");
    let dsc = dl.join(format!(
        "{}_{}.dsc",
        recipe.package,
        recipe
            .version
            .split_once(':')
            .map_or(recipe.version.as_str(), |(_, v)| v)
    ));
    if !dsc.is_file() {
        apt.update(log)?;
        pb.inc(1);
        pb.set_message("apt-get source");
        let mut c = apt.apt_get();
        c.current_dir(dl)
            .arg("source")
            .arg("--download-only")
            .arg(format!("{}={}", recipe.package, recipe.version));
        util::run_logged(&mut c, "apt-get source", log, |_| {})?;
    }
    pb.inc(1);
    Ok(dsc)
}

/// fio's `./configure` (with the recipe's options, no build path in the binary) and `make fio`
/// in `src`.
fn configure_and_make(
    src: &Path,
    recipe: &FioRecipe,
    log: &Path,
    pb: &ProgressBar,
) -> Result<(), ImageError> {
    pb.set_message("configure");
    util::run_logged(
        Command::new("./configure")
            .current_dir(src)
            .args(&recipe.configure)
            // The build directory must not leak into the binary (its build-id hashes the
            // debug info, which names the directory): two builds anywhere are bit-identical.
            .arg(format!(
                "--extra-cflags=-ffile-prefix-map={}=.",
                src.display()
            )),
        "fio configure",
        log,
        |_| {},
    )?;
    pb.inc(1);
    pb.set_message("make");
    let jobs = std::thread::available_parallelism().map_or(2, |n| n.get());
    util::run_logged(
        Command::new("make")
            .current_dir(src)
            .arg(format!("-j{jobs}"))
            .arg("fio")
            .env("SOURCE_DATE_EPOCH", "0")
            .env("LC_ALL", "C"),
        "fio make",
        log,
        |_| {},
    )?;
    Ok(())
}
