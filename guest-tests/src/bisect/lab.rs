//! The real [`Lab`]: candidates from git (`--good`/`--bad`) or a patch series (`--patches`),
//! built with [`gt_images`] in one build directory per tree, booted with
//! [`crate::executor`], measured on one metric.
//!
//! Rules:
//! 1. Commits: the first-parent line from the good commit to the bad one (`git rev-list
//!    --first-parent good..bad`, oldest first); good must be an ancestor of bad.
//! 2. Patches: `DIR/series` (one file name a line, `#` comments) when present, else the
//!    directory's `*.patch` / `*.diff` files by name. Candidate k is the base with the first k
//!    patches applied; the good end is the base, the bad end the whole series.
//! 3. A kernel that does not build is a skip; its build log is kept as
//!    `<out>/builds/<candidate>.log`. A boot that fails (after one retry of a guest that never
//!    reached its agent) or lacks the metric is a skip; its run directory is kept.
//! 4. Runs go to `<out>/refs/good/`, `<out>/refs/bad/` (usable as `judge --good/--bad`) and
//!    `<out>/steps/`. With `--executor slurm` each boot is a one-task Slurm job array
//!    (`super::onslurm`) whose matrix directory is that run directory.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use super::search::{Candidate, Failure, Lab};
use crate::matrix;
use gt_images::manifest::Manifest;
use gt_images::spec::{Base, KernelSpec};
use gt_images::{ImageError, ImageOptions, KernelImage};
use gt_launch::qemu::Accel;

pub use super::boot::BootConfig;

fn git(tree: &Path, args: &[&str]) -> Result<String, String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(tree)
        .args(args)
        .output()
        .map_err(|e| format!("git: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "git {} in {}: {}",
            args.join(" "),
            tree.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Rule 1: the good commit, then every first-parent commit up to the bad one.
pub fn commit_candidates(tree: &Path, good: &str, bad: &str) -> Result<Vec<Candidate>, String> {
    let g = gt_images::spec::resolve_rev(tree, good)?;
    let b = gt_images::spec::resolve_rev(tree, bad)?;
    if git(tree, &["merge-base", "--is-ancestor", &g, &b]).is_err() {
        return Err(format!("--good {good} is not an ancestor of --bad {bad}"));
    }
    let line = |l: &str| {
        let (id, subject) = l.split_once('\t').unwrap_or((l, ""));
        Candidate {
            id: id.to_string(),
            subject: subject.to_string(),
        }
    };
    let mut out = vec![line(
        git(tree, &["log", "-1", "--format=%H%x09%s", &g])?.trim(),
    )];
    let range = format!("{g}..{b}");
    let list = git(
        tree,
        &[
            "log",
            "--first-parent",
            "--reverse",
            "--format=%H%x09%s",
            &range,
        ],
    )?;
    out.extend(list.lines().filter(|l| !l.is_empty()).map(line));
    Ok(out)
}

/// Rule 2: the patch files of a series, in order.
pub fn series(dir: &Path) -> Result<Vec<PathBuf>, String> {
    let listed = dir.join("series");
    let files: Vec<PathBuf> = if listed.is_file() {
        std::fs::read_to_string(&listed)
            .map_err(|e| format!("{}: {e}", listed.display()))?
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
            .map(|l| dir.join(l))
            .collect()
    } else {
        let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
            .map_err(|e| format!("--patches {}: {e}", dir.display()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "patch" || x == "diff"))
            .collect();
        v.sort();
        v
    };
    if files.is_empty() {
        return Err(format!("--patches {}: no patches", dir.display()));
    }
    if let Some(missing) = files.iter().find(|p| !p.is_file()) {
        return Err(format!("patch {} not found", missing.display()));
    }
    Ok(files)
}

/// A patch's subject (its `Subject:` line, else its file name).
fn patch_subject(p: &Path) -> String {
    let name = p
        .file_name()
        .map_or(String::new(), |n| n.to_string_lossy().into_owned());
    std::fs::read_to_string(p)
        .ok()
        .and_then(|t| {
            t.lines()
                .find_map(|l| l.strip_prefix("Subject:").map(|s| s.trim().to_string()))
        })
        .unwrap_or(name)
}

/// Rule 2: candidate k = base + the first k patches.
pub fn patch_candidates(base: &KernelSpec, patches: &[PathBuf]) -> Vec<(Candidate, KernelSpec)> {
    (0..=patches.len())
        .map(|k| {
            let mut s = base.clone();
            s.patches.extend(patches[..k].iter().cloned());
            s.label = format!("{}+p{k:02}", base.label);
            s.text = format!("{}={}", s.label, spec_text(&s));
            let (id, subject) = match k {
                0 => ("base".to_string(), format!("base {}", spec_text(base))),
                _ => (
                    format!(
                        "p{k:02}-{}",
                        patches[k - 1]
                            .file_name()
                            .unwrap_or_default()
                            .to_string_lossy()
                    ),
                    patch_subject(&patches[k - 1]),
                ),
            };
            (Candidate { id, subject }, s)
        })
        .collect()
}

/// The spec's base and patches in the `--kernels` grammar (without the label).
pub fn spec_text(s: &KernelSpec) -> String {
    let mut t = match &s.base {
        Base::Variant(v) => v.clone(),
        Base::Tree { path, rev } => match rev {
            Some(r) => format!("tree:{}@{r}", path.display()),
            None => format!("tree:{}", path.display()),
        },
    };
    for p in &s.patches {
        t.push_str(&format!("+patch:{}", p.display()));
    }
    t
}

/// A commit of `tree` as a kernel spec.
pub fn commit_spec(tree: &Path, c: &Candidate) -> KernelSpec {
    let label = format!("c-{}", &c.id[..c.id.len().min(12)]);
    let base = Base::Tree {
        path: tree.to_path_buf(),
        rev: Some(c.id.clone()),
    };
    let mut s = KernelSpec {
        label,
        base,
        patches: vec![],
        text: String::new(),
    };
    s.text = format!("{}={}", s.label, spec_text(&s));
    s
}

/// Builds and boots candidates (rule 3, 4).
pub struct RealLab {
    pub cands: Vec<(Candidate, KernelSpec)>,
    pub boot: BootConfig,
    pub out: PathBuf,
    manifest: Manifest,
    built: Vec<Option<KernelImage>>,
    accel: Option<Accel>,
    boots: usize,
    clock: Instant,
}

impl RealLab {
    pub fn new(
        cands: Vec<(Candidate, KernelSpec)>,
        boot: BootConfig,
        out: PathBuf,
    ) -> Result<RealLab, String> {
        let manifest = Manifest::load(&gt_images::manifest_path()).map_err(|e| e.to_string())?;
        Ok(RealLab {
            built: vec![None; cands.len()],
            cands,
            boot,
            out,
            manifest,
            accel: None,
            boots: 0,
            clock: Instant::now(),
        })
    }

    /// One boot of candidate `c` on this host.
    fn boot_here(
        &self,
        c: usize,
        kernel: KernelImage,
        accel: Accel,
        run_dir: &Path,
        seed: u64,
    ) -> gt_results::results::RunResult {
        let b = &self.boot.settings;
        let run_id = format!(
            "{}-bisect-{}",
            b.suite.name,
            run_dir.file_name().unwrap_or_default().to_string_lossy()
        );
        let spec = b.run_spec(run_id, run_dir, kernel, accel, seed);
        let spec_text = &self.cands[c].1.text;
        let rerun = b.rerun_info(self.cands[c].1.label.clone(), Some(spec_text.clone()), seed);
        matrix::execute_retrying(&spec, rerun, None, 1).0
    }

    fn run_dir(&self, c: usize) -> PathBuf {
        let last = self.cands.len() - 1;
        let sub = match c {
            _ if last == 0 => PathBuf::from("boots"),
            0 => PathBuf::from("refs/good"),
            c if c == last => PathBuf::from("refs/bad"),
            _ => PathBuf::from("steps"),
        };
        let mut k = 0;
        loop {
            let d = self
                .out
                .join(&sub)
                .join(format!("{:03}-{}-b{k}", c, self.cands[c].1.label));
            if !d.exists() && !PathBuf::from(format!("{}.attempt1", d.display())).exists() {
                return d;
            }
            k += 1;
        }
    }
}

impl Lab for RealLab {
    fn build(&mut self, c: usize) -> Result<(), Failure> {
        let (cand, spec) = &self.cands[c];
        let opts = ImageOptions {
            progress: self.boot.settings.progress,
            ..Default::default()
        };
        let t = Instant::now();
        match gt_images::ensure_spec(&self.manifest, spec, &opts) {
            Ok(k) => {
                println!(
                    "built {} ({}) in {:.0} s: {}",
                    cand.id,
                    cand.subject,
                    t.elapsed().as_secs_f64(),
                    k.bzimage.display()
                );
                self.built[c] = Some(k);
                Ok(())
            }
            Err(e) => {
                let keep = self.out.join("builds").join(format!("{}.log", cand.id));
                if let ImageError::Command { log, .. } = &e {
                    let _ = std::fs::create_dir_all(self.out.join("builds"));
                    let _ = std::fs::copy(log, &keep);
                }
                Err(Failure::Skip(format!(
                    "{e} (log kept as {})",
                    keep.display()
                )))
            }
        }
    }

    fn boot(&mut self, c: usize) -> Result<f64, Failure> {
        let kernel = match &self.built[c] {
            Some(k) => k.clone(),
            None => {
                self.build(c)?;
                self.built[c]
                    .clone()
                    .ok_or_else(|| Failure::Skip("not built".into()))?
            }
        };
        let accel = match self.accel {
            Some(a) => a,
            None => {
                let a = matrix::resolve_accel(
                    self.boot.settings.accel,
                    &self.boot.settings.host.qemu_bin,
                    &kernel,
                )
                .map_err(|e| Failure::Abort(e.to_string()))?;
                self.accel = Some(a);
                a
            }
        };
        let run_dir = self.run_dir(c);
        if let Some(p) = run_dir.parent() {
            std::fs::create_dir_all(p)
                .map_err(|e| Failure::Abort(format!("{}: {e}", p.display())))?;
        }
        let seed = self.boot.settings.seed + self.boots as u64;
        self.boots += 1;
        let t = Instant::now();
        let rec = match &self.boot.slurm {
            Some(o) => super::onslurm::boot(&self.boot, &self.cands[c].1, &run_dir, seed, o)?,
            None => self.boot_here(c, kernel, accel, &run_dir, seed),
        };
        let wall = t.elapsed().as_secs_f64();
        let b = &self.boot;

        if !rec.status.is_ok() {
            return Err(Failure::Skip(format!(
                "{:?} (run kept in {})",
                rec.status,
                run_dir.display()
            )));
        }
        match rec.metric(&b.metric) {
            Some(v) => {
                println!(
                    "  boot {} {}: {} = {v:.4} ({wall:.0} s)",
                    c, self.cands[c].0.id, b.metric
                );
                Ok(v)
            }
            None => Err(Failure::Skip(format!(
                "no value of {} in {}",
                b.metric,
                run_dir.display()
            ))),
        }
    }

    fn now(&mut self) -> f64 {
        self.clock.elapsed().as_secs_f64()
    }

    fn say(&mut self, line: &str) {
        println!("{line}");
    }
}
