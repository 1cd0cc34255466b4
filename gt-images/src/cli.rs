//! `guest-tests images build KERNEL... | list`: parsed arguments and the two commands.

use std::path::PathBuf;
use std::time::Instant;

use super::manifest::{Manifest, Source};
use super::util::{self, Ctx};
use super::{ensure_with, fio, initramfs, kernel, manifest_path, sha256_file, ImageError};
use super::{ImageOptions, KernelImage};

/// Arguments of `guest-tests images`.
#[derive(Debug, Clone, clap::Args)]
pub struct ImagesArgs {
    #[command(subcommand)]
    pub cmd: ImagesCmd,
}

#[derive(Debug, Clone, clap::Subcommand)]
pub enum ImagesCmd {
    /// Build (or take from the cache) what each kernel needs; print artefact paths and hashes.
    Build {
        /// Kernel names: LINE(+COMPONENT)* or an alias (images/kernels.toml; `images list`).
        #[arg(required = true)]
        variants: Vec<String>,
        /// Build this kernel git tree instead of the variant's Debian source.
        #[arg(long)]
        kernel_tree: Option<PathBuf>,
        /// The revision of --kernel-tree to build (default: its checkout, uncommitted changes too).
        #[arg(long, requires = "kernel_tree")]
        rev: Option<String>,
        /// A patch applied after the variant's own (repeatable, in order).
        #[arg(long = "patch")]
        patches: Vec<PathBuf>,
        /// Cache directory (default: $VB_CACHE or <repo>/.cache).
        #[allow(rustdoc::invalid_html_tags)] // clap's --help text: <...> are placeholders, not HTML
        #[arg(long)]
        cache: Option<PathBuf>,
        /// Also build every artefact a second time from scratch and check it is bit-identical.
        #[arg(long)]
        verify_reproducible: bool,
        /// No progress bars.
        #[arg(long)]
        quiet: bool,
    },
    /// Show the kernel lines, aliases and components, and what is cached.
    List {
        #[arg(long)]
        cache: Option<PathBuf>,
    },
}

/// Runs `guest-tests images ...`.
pub fn run(args: &ImagesArgs) -> Result<(), ImageError> {
    match &args.cmd {
        ImagesCmd::Build {
            variants,
            kernel_tree,
            rev,
            patches,
            cache,
            verify_reproducible,
            quiet,
        } => {
            let opts = ImageOptions {
                cache_dir: cache.clone(),
                kernel_tree: kernel_tree.clone(),
                kernel_rev: rev.clone(),
                extra_patches: patches.clone(),
                progress: !quiet,
            };
            cli_build(variants, &opts, *verify_reproducible).map(|_| ())
        }
        ImagesCmd::List { cache } => cli_list(&ImageOptions {
            cache_dir: cache.clone(),
            ..Default::default()
        }),
    }
}

fn print_image(k: &KernelImage, secs: f64) -> Result<(), ImageError> {
    let size = std::fs::metadata(&k.initramfs)
        .map_err(|e| ImageError::io(&k.initramfs, e))?
        .len();
    println!("{} ({}, {:.1} s)", k.variant, k.release, secs);
    println!(
        "  bzImage    {}  sha256={}",
        k.bzimage.display(),
        k.bzimage_sha256
    );
    println!(
        "  initramfs  {}  sha256={}  {:.1} MB",
        k.initramfs.display(),
        k.initramfs_sha256,
        size as f64 / 1e6
    );
    if !k.cmdline.is_empty() {
        println!("  cmdline    {}", k.cmdline);
    }
    Ok(())
}

/// Builds each kernel, prints its artefacts; with `verify`, rebuilds from scratch and compares.
pub fn cli_build(
    variants: &[String],
    opts: &ImageOptions,
    verify: bool,
) -> Result<Vec<KernelImage>, ImageError> {
    let m = Manifest::load(&manifest_path())?;
    for v in variants {
        m.variant(v)?;
    }
    let mut out = Vec::new();
    for v in variants {
        let t = Instant::now();
        let k = ensure_with(&m, v, opts)?;
        print_image(&k, t.elapsed().as_secs_f64())?;
        if verify {
            verify_variant(&m, v, opts, &k)?;
        }
        out.push(k);
    }
    Ok(out)
}

fn same(what: &str, a: &str, b: &str, secs: f64) -> Result<(), ImageError> {
    if a == b {
        println!("  reproducible {what}: bit-identical (second build {secs:.1} s, sha256={a})");
        Ok(())
    } else {
        Err(ImageError::Tool(format!(
            "{what} is not reproducible: first build sha256={a}, second build sha256={b}"
        )))
    }
}

fn verify_variant(
    m: &Manifest,
    name: &str,
    opts: &ImageOptions,
    k: &KernelImage,
) -> Result<(), ImageError> {
    let ctx = Ctx::new(&super::cache_dir(opts), opts.progress)?;
    let v = m.variant(name)?;
    if m.source_of(&v).is_source() {
        let t = Instant::now();
        let again = kernel::ensure(&ctx, m, &v, opts, true)?;
        same(
            "bzImage",
            &k.bzimage_sha256,
            &again.bzimage_sha256,
            t.elapsed().as_secs_f64(),
        )?;
    }
    let t = Instant::now();
    let dir = ctx
        .cache
        .join("fio")
        .join(util::safe_name(&m.initramfs.fio.version));
    let fio_again = fio::build(&ctx, &m.initramfs.fio, &dir, "verify")?;
    let cached = fio::ensure(&ctx, &m.initramfs.fio)?;
    let (a, b) = (sha256_file(&cached)?, sha256_file(&fio_again)?);
    let _ = std::fs::remove_file(&fio_again);
    same("fio", &a, &b, t.elapsed().as_secs_f64())?;
    let t = Instant::now();
    let mods = match m.source_of(&v) {
        Source::DebianPrebuilt { .. } => {
            let pre = super::prebuilt::ensure(&ctx, m, &v)?;
            super::modules::resolve(&pre.modules_dir, &v.modules)?
        }
        Source::DebianSource { .. } | Source::GitTree { .. } => Vec::new(),
    };
    let again = super::sha256_hex(&initramfs::assemble(&ctx, m, &mods)?.to_bytes());
    same(
        "initramfs",
        &k.initramfs_sha256,
        &again,
        t.elapsed().as_secs_f64(),
    )
}

/// Prints the kernel lines, aliases and components with their cache state and availability.
pub fn cli_list(opts: &ImageOptions) -> Result<(), ImageError> {
    let m = Manifest::load(&manifest_path())?;
    let cache = super::cache_dir(opts);
    let state = |p: Option<PathBuf>| match p {
        Some(p) => format!("cached {}", p.display()),
        None => "not built".to_string(),
    };
    println!(
        "kernel lines (a kernel is LINE(+COMPONENT)*, components applied in the order written):"
    );
    let rows = super::list(&m, opts)?;
    let w = rows.iter().map(|r| r.name.len()).max().unwrap_or(4);
    for r in rows {
        println!(
            "  {:w$}  {}  [{}]",
            r.name,
            r.source,
            state(r.cached_bzimage)
        );
        println!("  {:w$}  {}", "", r.description);
    }
    println!("aliases:");
    for (a, target) in &m.aliases {
        let v = m.variant(a)?;
        let cached = super::cached_bzimage(&m, &v, &cache, opts)?;
        println!("  {a} = {target}  [{}]", state(cached));
    }
    println!("components:");
    let w = m.components.iter().map(|c| c.name.len()).max().unwrap_or(4);
    for c in &m.components {
        let what = match (&c.overlay, &c.cmdline) {
            (Some(o), _) => format!("config overlay {}", o.display()),
            (None, Some(words)) => format!("command line '{words}'"),
            (None, None) => format!("patches {}", c.patches.join(" ")),
        };
        let avail = m.availability(c);
        let on: Vec<&str> = avail
            .iter()
            .filter(|(_, a)| a.is_ok())
            .map(|(l, _)| *l)
            .collect();
        println!("  {:w$}  {what}; lines: {}", c.name, on.join(", "));
        println!("  {:w$}  {}", "", c.description);
        for (l, why) in avail
            .iter()
            .filter_map(|(l, a)| a.as_ref().err().map(|e| (l, e)))
        {
            if c.absent.contains_key(*l) {
                println!("  {:w$}  not on {l}: {why}", "");
            }
        }
    }
    list_builds(&cache);
    let fio = cache
        .join("fio")
        .join(util::safe_name(&m.initramfs.fio.version))
        .join("fio");
    let state = if fio.is_file() {
        format!("cached {}", fio.display())
    } else {
        "not built".into()
    };
    println!("static fio {}: {state}", m.initramfs.fio.version);
    let n = std::fs::read_dir(cache.join("initramfs"))
        .map(|d| d.filter_map(|e| e.ok()).count())
        .unwrap_or(0);
    println!(
        "initramfs archives cached: {n} (in {})",
        cache.join("initramfs").display()
    );
    Ok(())
}

/// The kernels built so far (each under the name it was first built as).
fn list_builds(cache: &std::path::Path) {
    let dir = cache.join("kernels");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .map(|d| {
            d.flatten()
                .filter_map(|e| std::fs::read_to_string(e.path().join("kernel.json")).ok())
                .filter_map(|t| serde_json::from_str::<kernel::BuildRecord>(&t).ok())
                .map(|r| r.variant)
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    println!(
        "kernels built in {} ({}): {}",
        dir.display(),
        names.len(),
        names.join(" ")
    );
}
