//! `guest-tests run`: its arguments and their validation into a [`MatrixConfig`] (every name
//! and number is checked before anything is built or created).

use std::path::PathBuf;

use clap::Args;

use crate::batch::SlurmOptions;
use crate::matrix::{self, MatrixConfig};
use gt_images::ImageOptions;
use gt_launch::settings::{BootSettings, HostSetup};
use gt_suite::{Bios, Suite};

#[derive(Args, Debug)]
pub struct RunArgs {
    /// Comma-separated kernels: LINE(+COMPONENT)* of images/kernels.toml (`images list`), or
    /// ad-hoc kernels `LABEL=tree:PATH[@REV][+patch:FILE]...` / `LABEL=KERNEL+patch:FILE...`.
    #[arg(long, default_value = "rt,rt+seed000")]
    kernels: String,
    #[arg(long, default_value = "seed000-rt-lock")]
    suite: String,
    /// Only this variant of a sweep suite.
    #[arg(long)]
    variant: Option<String>,
    #[arg(long, default_value_t = 5)]
    repeat: u32,
    /// Matrix directory (default: results/<suite>-<UTC time>); must not exist or be empty.
    #[allow(rustdoc::invalid_html_tags)] // clap's --help text: <...> are placeholders, not HTML
    #[arg(long)]
    out: Option<PathBuf>,
    /// qboot (fast, default from the suite) or seabios.
    #[arg(long)]
    bios: Option<String>,
    /// Retry a run that failed for the emulated machine's reasons (the guest never reached the
    /// agent, or died of TCG's stale-int3 Oops) up to N times; the failed attempts are kept as
    /// <run dir>.attempt<k>.
    #[allow(rustdoc::invalid_html_tags)] // clap's --help text: <...> are placeholders, not HTML
    #[arg(long, default_value_t = 1)]
    retries: u32,
    #[command(flatten)]
    boot: super::boot::BootArgs,
    /// Print the planned runs (order, directories, seeds) and exit: nothing is built or created.
    #[arg(long)]
    pub(super) dry_run: bool,
    /// interleaved (one guest at a time, A B A B ...) or paired (the kernels of a repeat boot
    /// at the same time, each with its own backend; compare adds paired statistics).
    #[arg(long, default_value = "interleaved")]
    design: String,
    /// Keep booting until the suite's primary metric is decided (a sequential test with
    /// O'Brien-Fleming alpha spending) or --max-repeat is reached.
    #[arg(long)]
    until_decided: bool,
    /// The budget with --until-decided (boots per kernel); replaces --repeat.
    #[arg(long)]
    max_repeat: Option<u32>,
    /// Overall false-decision rate of --until-decided.
    #[arg(long, default_value_t = 0.001)]
    alpha: f64,
    /// First look of --until-decided after this many boots per kernel.
    #[arg(long, default_value_t = 3)]
    min_repeat: u32,
    /// Worker threads of vhost-blk (`--threads N` appended to the suite's backend arguments).
    #[arg(long)]
    backend_threads: Option<u32>,
    /// Where QEMU's vCPU threads run: `pinned` (vCPU thread k on host CPU k mod n of the CPUs
    /// this process may use, the same placement in every boot; measured steadier, see
    /// docs/results/verdict), `host` (the host scheduler places them) or, with `--design
    /// paired`, `split` (all vCPUs of the i-th kernel's guest on host CPU i mod n, so that the
    /// guests of a pair do not share a CPU).
    #[arg(long, default_value = "pinned")]
    vcpu_placement: String,
    /// `normal` (the host's fair scheduler) or `rt`: QEMU's vCPU threads SCHED_RR 1, its other
    /// threads SCHED_FIFO 2, the backend SCHED_FIFO 3, so that unrelated host load does not
    /// take CPU from the guest (the slice between vCPUs on one CPU is the host's
    /// sched_rr_timeslice_ms; docs/results/verdict); `nice`: the fair scheduler with every
    /// thread of QEMU and the backend at nice -19; or `short`: `nice` plus the fair
    /// scheduler's shortest slice, 0.1 ms (Linux >= 6.12), so that a preempted vCPU thread
    /// gets its CPU back sooner.
    #[arg(long, default_value = "normal")]
    host_sched: String,
    #[command(flatten)]
    executor: super::executor::ExecutorArgs,
    /// Submit and return; `guest-tests collect OUT` waits and writes index.json.
    #[arg(long)]
    detach: bool,
}

/// The Slurm executor's options (None: the local executor); Slurm-only flags without it, and
/// what the Slurm executor cannot do, are refused.
pub(super) fn slurm_options(a: &RunArgs) -> Result<Option<SlurmOptions>, String> {
    let o = a.executor.slurm(a.detach)?;
    if o.is_some() && a.until_decided {
        return Err(
            "--until-decided needs each round's results before the next: \
                    not supported with --executor slurm"
                .into(),
        );
    }
    Ok(o)
}

/// Civil UTC date-time for directory names (no time-zone crate needed).
pub(super) fn utc_stamp(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Howard Hinnant's days_from_civil inverse.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}{m:02}{d:02}-{:02}{:02}{:02}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

impl TryFrom<RunArgs> for MatrixConfig {
    type Error = String;

    fn try_from(a: RunArgs) -> Result<Self, String> {
        let boot = a.boot.check(&a.suite)?;
        let suite = boot.suite.clone();
        let (kernel_specs, kernels) = check_kernels(&a.kernels)?;
        if a.retries > 5 {
            return Err(format!("--retries {} is more than 5", a.retries));
        }
        let design: matrix::Design = a.design.parse()?;
        if a.vcpu_placement == "split" && design != matrix::Design::Paired {
            return Err("--vcpu-placement split needs --design paired".into());
        }
        let repeat = match (a.until_decided, a.max_repeat) {
            (true, Some(m)) => m,
            (true, None) => return Err("--until-decided needs --max-repeat N".into()),
            (false, Some(_)) => return Err("--max-repeat goes with --until-decided".into()),
            (false, None) => a.repeat,
        };
        if !(1..=1000).contains(&repeat) {
            return Err(format!("--repeat {repeat} not in 1..=1000"));
        }
        check_suite_metrics(&suite)?;
        let until_decided = if a.until_decided {
            Some(sequential_plan(
                a.alpha,
                a.min_repeat,
                &suite,
                repeat,
                kernels.len(),
            )?)
        } else {
            None
        };
        let extra_backend_args = backend_threads_args(a.backend_threads, &suite)?;
        let bios = match a.bios.as_deref() {
            None => suite.spec.bios,
            Some("qboot") => Bios::Qboot,
            Some("seabios") => Bios::Seabios,
            Some(o) => return Err(format!("unknown --bios '{o}' (known: qboot, seabios)")),
        };
        let variants = pick_variants(a.variant.as_deref(), &suite)?;
        let out = out_dir(a.out, &suite.name)?;
        let pin_vcpus = match a.vcpu_placement.as_str() {
            "pinned" | "split" => true,
            "host" => false,
            o => {
                return Err(format!(
                    "unknown --vcpu-placement '{o}' (known: pinned, host, split)"
                ))
            }
        };
        Ok(MatrixConfig {
            images: ImageOptions {
                progress: boot.progress,
                ..Default::default()
            },
            boot: BootSettings {
                suite,
                host: HostSetup {
                    bios,
                    pin_vcpus,
                    host_sched: a.host_sched.parse()?,
                    ..boot.host
                },
                ..boot
            },
            kernels,
            kernel_specs,
            variants,
            repeat,
            out,
            retries: a.retries,
            design,
            until_decided,
            extra_backend_args,
            split_pairs: a.vcpu_placement == "split",
        })
    }
}

/// `--kernels`: each spec as given and its label, every name, tree and patch checked against
/// the manifest before any kernel is built or anything is created; no label twice.
fn check_kernels(list: &str) -> Result<(Vec<String>, Vec<String>), String> {
    let kernel_specs: Vec<String> = list.split(',').map(|k| k.trim().to_string()).collect();
    if kernel_specs.iter().any(|k| k.is_empty()) {
        return Err(format!("--kernels '{list}': empty kernel name"));
    }
    let manifest = gt_images::manifest::Manifest::load(&gt_images::manifest_path())
        .map_err(|e| e.to_string())?;
    let mut kernels = Vec::new();
    for k in &kernel_specs {
        let spec = gt_images::spec::KernelSpec::parse(k)?;
        spec.check(&manifest)?;
        kernels.push(spec.label);
    }
    let mut seen = std::collections::BTreeSet::new();
    if let Some(d) = kernels.iter().find(|k| !seen.insert(k.as_str())) {
        return Err(format!("--kernels: '{d}' appears twice"));
    }
    Ok((kernel_specs, kernels))
}

/// The suite's primary and secondary metrics, its `[judgement]` metrics and its `[verdict]`
/// companions, when named, are metrics the registry knows.
fn check_suite_metrics(suite: &Suite) -> Result<(), String> {
    let judged = suite.spec.judgement.iter().flat_map(|j| j.metrics());
    let named = [
        ("primary_metric", suite.spec.primary_metric.as_ref()),
        ("secondary_metric", suite.spec.secondary_metric.as_ref()),
    ];
    for (what, m) in named
        .into_iter()
        .chain(judged.map(|m| ("[judgement] metric", Some(m))))
    {
        if let Some(m) = m {
            if gt_results::metrics::registry::find(m).is_none() {
                return Err(format!(
                    "suite '{}': {what} '{m}' is not a metric the registry knows",
                    suite.name
                ));
            }
        }
    }
    // [verdict]'s companions, on the primary metric's step.
    let step = suite
        .spec
        .primary_metric
        .as_deref()
        .and_then(|p| p.split_once('.'))
        .map(|(step, _)| step);
    let companions = suite.spec.verdict.iter().flat_map(|v| &v.companions);
    for (step, c) in step
        .into_iter()
        .flat_map(|s| companions.clone().map(move |c| (s, c)))
    {
        let m = format!("{step}.{c}");
        if gt_results::metrics::registry::find(&m).is_none() {
            return Err(format!(
                "suite '{}': [verdict] companion '{m}' is not a metric the registry knows",
                suite.name
            ));
        }
    }
    Ok(())
}

/// `--until-decided`'s sequential plan: a primary metric, an alpha in (0, 0.5), a first look
/// (`min_repeat`) within the budget `repeat`, and two kernels.
fn sequential_plan(
    alpha: f64,
    min_repeat: u32,
    suite: &Suite,
    repeat: u32,
    n_kernels: usize,
) -> Result<matrix::SeqPlan, String> {
    if suite.spec.primary_metric.is_none() {
        return Err(format!(
            "--until-decided: suite '{}' names no primary_metric",
            suite.name
        ));
    }
    if !(alpha > 0.0 && alpha < 0.5) {
        return Err(format!("--alpha {alpha} not in (0, 0.5)"));
    }
    if min_repeat < 2 || min_repeat > repeat {
        return Err(format!(
            "--min-repeat {min_repeat} not in 2..={repeat} (--max-repeat)"
        ));
    }
    if n_kernels < 2 {
        return Err("--until-decided compares two kernels: give --kernels A,B".into());
    }
    Ok(matrix::SeqPlan {
        alpha,
        min_n: min_repeat as usize,
    })
}

/// `--backend-threads N` as the backend's `--threads N` (vhost-blk only, N >= 1).
fn backend_threads_args(threads: Option<u32>, suite: &Suite) -> Result<Vec<String>, String> {
    match threads {
        Some(0) => Err("--backend-threads must be at least 1".into()),
        Some(_) if suite.spec.backend != gt_suite::BackendKind::VhostBlk => {
            Err("--backend-threads applies to the vhost-blk backend only".into())
        }
        Some(t) => Ok(vec!["--threads".to_string(), t.to_string()]),
        None => Ok(Vec::new()),
    }
}

/// `--variant` (one the suite has) or all of the suite's variants.
fn pick_variants(variant: Option<&str>, suite: &Suite) -> Result<Vec<Option<String>>, String> {
    match variant {
        Some(v) if suite.variant(v).is_some() => Ok(vec![Some(v.to_string())]),
        Some(v) => {
            let known: Vec<&str> = suite
                .spec
                .variants
                .iter()
                .map(|x| x.name.as_str())
                .collect();
            Err(format!(
                "suite '{}' has no variant '{v}' (known: {})",
                suite.name,
                known.join(", ")
            ))
        }
        None => Ok(suite
            .variants()
            .into_iter()
            .map(|v| v.map(|v| v.name.clone()))
            .collect()),
    }
}

/// `--out`, or results/<suite>-<UTC time>: a path QEMU can take, absent or empty.
fn out_dir(out: Option<PathBuf>, suite_name: &str) -> Result<PathBuf, String> {
    let out = out.unwrap_or_else(|| {
        let secs = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        PathBuf::from("results").join(format!("{suite_name}-{}", utc_stamp(secs)))
    });
    if out.display().to_string().contains(',') {
        return Err(format!(
            "--out {}: QEMU cannot take paths with ','",
            out.display()
        ));
    }
    if std::fs::read_dir(&out).is_ok_and(|mut d| d.next().is_some()) {
        return Err(format!("--out {} exists and is not empty", out.display()));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every committed suite loads, and names only metrics the registry knows.
    #[test]
    fn every_suite_names_known_metrics() {
        let dir = gt_suite::default_dir();
        let names = gt_suite::list(&dir).unwrap();
        assert!(names.len() > 20, "{names:?}");
        for name in names {
            let suite = Suite::load(&dir, &name).unwrap();
            check_suite_metrics(&suite).unwrap();
        }
        let mut bad = Suite::load(&dir, "seed000-scale").unwrap();
        if let Some(v) = bad.spec.verdict.as_mut() {
            v.companions.push("no_such_figure".into());
        }
        let e = check_suite_metrics(&bad).unwrap_err();
        assert!(e.contains("scale-randread.no_such_figure"), "{e}");
    }
}
