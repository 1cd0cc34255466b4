//! Command-line options of the completion model, ready to `#[command(flatten)]` into the
//! daemon's arguments. Every option overrides the same field of the settings file's
//! `[completion]` table ([`CompletionArgs::apply`]). The engine itself knows nothing of clap.

use clap::Args;

use vhost_blk_completion::model::parse_dist;
use vhost_blk_completion::{
    parse_duration_ns, Coalesce, CompletionModel, Distribution, ModelError, PerfMode,
    VectorOverride,
};

/// Completion latency and interrupt coalescing.
#[derive(Debug, Clone, Default, Args, PartialEq)]
pub struct CompletionArgs {
    /// Emulated device service time: 0, 50us, uniform:10us..100us, normal:100us,20us,
    /// lognormal:100us,0.5, lognormal:mean=100us,p99=1ms, exp:50us, table:p50=..,p100=..
    #[arg(long, value_name = "DIST")]
    pub service_latency: Option<Distribution>,
    /// Completion-to-interrupt (MSI-X) latency of every vector, same syntax.
    #[arg(long, value_name = "DIST")]
    pub msix_latency: Option<Distribution>,
    /// Interrupt coalescing: `off` or BATCH/DELAY (e.g. 16/50us).
    #[arg(long, value_name = "BATCH/DELAY")]
    pub coalesce: Option<Coalesce>,
    /// Release interrupts only on multiples of this period (CLOCK_MONOTONIC), e.g. 100us.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration_ns)]
    pub aligned_tick: Option<u64>,
    /// Wake this long before a deadline and spin the rest (default 20us).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration_ns)]
    pub spin: Option<u64>,
    /// Seed of the per-vector random streams.
    #[arg(long)]
    pub seed: Option<u64>,
    /// megaraid_sas-like preset: balanced, iops or latency.
    #[arg(long, value_name = "MODE")]
    pub perf_mode: Option<PerfMode>,
    /// Per-vector settings, repeatable: VECTOR:key=value;... (keys service, msix, coalesce),
    /// e.g. `3:msix=1ms`.
    #[arg(long, value_name = "SPEC", value_parser = parse_vector_override)]
    pub vector_override: Vec<(u16, VectorOverride)>,
    /// balanced: a queue coalesces while its completion rate reaches this (per second).
    #[arg(long, value_name = "IOPS")]
    pub balanced_threshold_iops: Option<u64>,
}

/// Parses `--vector-override VECTOR:key=value;key=value`, e.g.
/// `3:msix=1ms;service=normal:100us,20us;coalesce=8/50us`.
pub fn parse_vector_override(s: &str) -> Result<(u16, VectorOverride), ModelError> {
    let bad = || ModelError::BadOverride(s.to_string());
    let (vector, rest) = s.split_once(':').ok_or_else(bad)?;
    let vector: u16 = vector.trim().parse().map_err(|_| bad())?;
    let mut ov = VectorOverride::default();
    for kv in rest.split(';').filter(|kv| !kv.trim().is_empty()) {
        let (key, value) = kv.split_once('=').ok_or_else(bad)?;
        let field = |name: &str| format!("vector {vector} {name}");
        match key.trim() {
            "service" => ov.service = Some(parse_dist(&field("service"), value)?),
            "msix" => ov.msix = Some(parse_dist(&field("msix"), value)?),
            "coalesce" => ov.coalesce = Some(value.parse()?),
            _ => return Err(bad()),
        }
    }
    if ov == VectorOverride::default() {
        return Err(bad());
    }
    Ok((vector, ov))
}

impl CompletionArgs {
    /// Applies the options given on the command line over `model` (e.g. from the settings file).
    /// A vector override replaces the file's override of that vector field by field.
    pub fn apply(&self, model: &mut CompletionModel) {
        if let Some(d) = &self.service_latency {
            model.service = d.clone();
        }
        if let Some(d) = &self.msix_latency {
            model.msix = d.clone();
        }
        if let Some(c) = self.coalesce {
            model.coalesce = (!c.is_off()).then_some(c);
        }
        if let Some(t) = self.aligned_tick {
            model.aligned_tick_ns = Some(t);
        }
        if let Some(s) = self.spin {
            model.spin_ns = s;
        }
        if let Some(s) = self.seed {
            model.seed = s;
        }
        if let Some(p) = self.perf_mode {
            model.preset = Some(p);
        }
        if let Some(t) = self.balanced_threshold_iops {
            model.balanced_threshold_iops = t;
        }
        for (vector, ov) in &self.vector_override {
            let entry = model.overrides.entry(*vector).or_default();
            if ov.service.is_some() {
                entry.service = ov.service.clone();
            }
            if ov.msix.is_some() {
                entry.msix = ov.msix.clone();
            }
            if ov.coalesce.is_some() {
                entry.coalesce = ov.coalesce;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    const US: u64 = 1_000;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        completion: CompletionArgs,
    }

    fn parse(args: &[&str]) -> Result<CompletionArgs, clap::Error> {
        let argv = std::iter::once("test").chain(args.iter().copied());
        Cli::try_parse_from(argv).map(|c| c.completion)
    }

    #[test]
    fn options_override_the_file_model() {
        let mut model: CompletionModel =
            toml::from_str("msix = \"10us\"\nseed = 1\n[overrides.3]\nservice = \"5us\"").unwrap();
        let args = parse(&[
            "--msix-latency",
            "uniform:10us..20us",
            "--coalesce",
            "8/50us",
            "--aligned-tick",
            "100us",
            "--perf-mode",
            "iops",
            "--vector-override",
            "3:msix=1ms",
            "--vector-override",
            "5:coalesce=off",
        ])
        .unwrap();
        args.apply(&mut model);
        model.validate_for_queues(8).unwrap();
        assert_eq!(
            model.msix,
            Distribution::Uniform {
                lo: 10_000,
                hi: 20_000
            }
        );
        assert_eq!(
            model.seed, 1,
            "not given on the command line: file value kept"
        );
        assert_eq!(model.aligned_tick_ns, Some(100_000));
        assert_eq!(model.preset, Some(PerfMode::Iops));
        assert_eq!(
            model.overrides[&3].service,
            Some(Distribution::Fixed(5_000))
        );
        assert_eq!(
            model.overrides[&3].msix,
            Some(Distribution::Fixed(1_000_000))
        );
        assert_eq!(model.settings_for(5).coalesce, None);
        assert_eq!(model.settings_for(4).coalesce.unwrap().max_batch, 8);
    }

    #[test]
    fn bad_values_are_one_clear_error() {
        for (args, needle) in [
            (&["--msix-latency", "50"][..], "needs a unit"),
            (&["--coalesce", "8"][..], "BATCH/DELAY"),
            (&["--perf-mode", "fast"][..], "unknown perf mode"),
            (&["--vector-override", "3"][..], "VECTOR:key=value"),
            (&["--aligned-tick", "1x"][..], "unknown unit"),
        ] {
            let err = parse(args).unwrap_err().to_string();
            assert!(err.contains(needle), "{args:?}: {err}");
        }
    }

    #[test]
    fn vector_override_forms_parse_and_reject() {
        let (v, ov) = parse_vector_override("5:service=normal:100us,20us;coalesce=8/50us").unwrap();
        assert_eq!(v, 5);
        assert_eq!(
            ov.service,
            Some(Distribution::Normal {
                mean: 100 * US,
                sd: 20 * US
            })
        );
        assert_eq!(
            ov.coalesce,
            Some(Coalesce {
                max_batch: 8,
                max_delay_ns: 50 * US
            })
        );
        for bad in [
            "5",
            "x:msix=1ms",
            "5:",
            "5:speed=1ms",
            "5:msix=1",
            "5:coalesce=0/1us",
        ] {
            assert!(parse_vector_override(bad).is_err(), "accepted {bad}");
        }
    }
}
