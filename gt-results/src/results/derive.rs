//! Artefacts -> [`RunResult`]: dispatch each artefact to its parser, attach it to its step,
//! and flatten the numbers compare needs into `metrics` (the derivations are the metric
//! registry's, [`crate::metrics::registry`]).

use std::collections::BTreeMap;

use crate::metrics::{self, registry, GuestStatus, InterruptCounts};
use gt_launch::agent::Artifact;

use super::{
    ArtifactRecord, GuestInfo, ParseIssue, Provenance, RunInfo, RunResult, RunStatus, StepResult,
    Timings, SCHEMA_VERSION,
};

/// The parsed value; or the error recorded as an issue of artefact `$name`, and a return from
/// the calling method.
macro_rules! parse {
    ($b:ident, $name:expr, $e:expr) => {
        match $e {
            Ok(v) => v,
            Err(e) => return $b.issue($name, e),
        }
    };
}

#[derive(Default)]
struct Builder {
    steps: Vec<StepResult>,
    before: BTreeMap<String, InterruptCounts>,
    after: BTreeMap<String, InterruptCounts>,
    guest: GuestInfo,
    rescans: Vec<(u64, metrics::Rescan)>,
    status: Option<GuestStatus>,
    issues: Vec<ParseIssue>,
    warnings: Vec<String>,
}

impl Builder {
    fn step(&mut self, label: &str) -> &mut StepResult {
        let i = match self.steps.iter().position(|s| s.label == label) {
            Some(i) => i,
            None => {
                self.steps.push(StepResult {
                    label: label.to_string(),
                    ..Default::default()
                });
                self.steps.len() - 1
            }
        };
        &mut self.steps[i]
    }

    fn issue(&mut self, artifact: &str, message: impl ToString) {
        self.issues.push(ParseIssue {
            artifact: artifact.to_string(),
            message: message.to_string(),
        });
    }

    fn take(&mut self, a: &Artifact) {
        let name = a.name.as_str();
        let text = a.text();
        if let Some(label) = name
            .strip_prefix("fio.")
            .and_then(|n| n.strip_suffix(".json"))
        {
            let v = parse!(self, name, metrics::parse_fio(&a.data));
            for e in &v.job_errors {
                self.warnings.push(format!("{name}: fio job error {e}"));
            }
            self.step(label).fio = Some(v);
        } else if let Some(label) = name
            .strip_prefix("fio.")
            .and_then(|n| n.strip_suffix(".stderr"))
        {
            // fio's warnings; keep the first lines next to the run.
            let first: String = text.lines().take(3).collect::<Vec<_>>().join(" / ");
            self.warnings.push(format!(
                "{name}: {}",
                first.chars().take(300).collect::<String>()
            ));
            self.step(label);
        } else if let Some(label) = name.strip_prefix("interrupts.before.") {
            let v = parse!(self, name, metrics::parse_interrupts(&text));
            self.before.insert(label.to_string(), v);
            self.step(label);
        } else if let Some(label) = name.strip_prefix("interrupts.after.") {
            let v = parse!(self, name, metrics::parse_interrupts(&text));
            self.after.insert(label.to_string(), v);
            self.step(label);
        } else if let Some(label) = name.strip_prefix("irqsw.") {
            self.take_irqsw(name, label, &text);
        } else if let Some(label) = name.strip_prefix("locks.") {
            self.take_locks(name, label, &text);
        } else if let Some(label) = name
            .strip_prefix("begin.")
            .or_else(|| name.strip_prefix("end."))
        {
            // Marks for the host's CPU sampling; the samples live in the launch's times.
            self.step(label);
        } else if let Some(label) = name.strip_prefix("dstacks.") {
            let v = parse!(self, name, metrics::parse_dstacks(&text));
            self.step(label).lock_sites = Some(v);
        } else if let Some(label) = name.strip_prefix("funcs.") {
            let (v, errors) = parse!(self, name, metrics::parse_funcs(&text));
            for e in errors {
                self.warnings.push(format!("{name}: {e}"));
            }
            self.step(label).funcs = Some(v);
        } else if name.starts_with("storm.") {
            self.take_storm(name, &text);
        } else if let Some(i) = name.strip_prefix("rescan.") {
            let Ok(i) = i.parse::<u64>() else {
                return self.issue(name, "rescan index is not a number");
            };
            let v = parse!(self, name, metrics::parse_rescan(&text));
            self.rescans.push((i, v));
        } else {
            self.take_guest(name, &text);
        }
    }

    /// `irqsw.<step>`: the irq threads' switches, with warnings for dropped events, a failed
    /// cross-check, agent errors and unparsed lines.
    fn take_irqsw(&mut self, name: &str, label: &str, text: &str) {
        let v = parse!(self, name, metrics::parse_irqsw(text));
        if v.dropped.unwrap_or(0) > 0 {
            self.warnings.push(format!(
                "{name}: ftrace dropped {} events; switch counts are low",
                v.dropped.unwrap_or(0)
            ));
        }
        if v.cross_check_ok() == Some(false) {
            self.warnings
                .push(format!("{name}: S + D != voluntary_ctxt_switches delta"));
        }
        for e in &v.errors {
            self.warnings.push(format!("{name}: agent: {e}"));
        }
        if v.bad_lines > 0 {
            self.warnings
                .push(format!("{name}: {} unparsed lines", v.bad_lines));
        }
        self.step(label).irq_switches = Some(v);
    }

    /// `locks.<step>`: the lock-wait figures, with warnings for agent errors, unparsed lines and
    /// recorded events that disagree with the histograms; no figures when the agent failed
    /// and recorded nothing.
    fn take_locks(&mut self, name: &str, label: &str, text: &str) {
        let v = parse!(self, name, metrics::parse_locks(text));
        for e in v.errors.iter().chain(&v.warnings) {
            self.warnings.push(format!("{name}: agent: {e}"));
        }
        if v.bad_lines > 0 {
            self.warnings
                .push(format!("{name}: {} unparsed lines", v.bad_lines));
        }
        if !v.consistent() && v.errors.is_empty() {
            self.warnings.push(format!(
                "{name}: recorded events ({} lock, {} D) differ from the histograms ({}, {}) or {} dropped",
                v.lock_waits.len(),
                v.d_waits.len(),
                v.hist_lockwait.0,
                v.hist_dwait.0,
                v.dropped
            ));
        }
        if v.errors.is_empty() || !v.lock_waits.is_empty() || v.window.is_some() {
            self.step(label).locks = Some(metrics::LockFigures::from_waits(&v));
        } else {
            self.step(label);
        }
    }

    /// `storm.<step>.stuck` (the evidence of a stuck I/O, pointed at by a warning) or
    /// `storm.<step>` (the storm's figures).
    fn take_storm(&mut self, name: &str, text: &str) {
        if let Some(label) = name
            .strip_prefix("storm.")
            .and_then(|n| n.strip_suffix(".stuck"))
        {
            // The evidence of a stuck I/O: kept verbatim in artifacts/, pointed at here.
            let first = text.lines().next().unwrap_or("").chars().take(200);
            self.warnings.push(format!(
                "{name}: stuck I/O, blk-mq debugfs dump kept ({})",
                first.collect::<String>()
            ));
            self.step(label);
        } else if let Some(label) = name.strip_prefix("storm.") {
            let v = parse!(self, name, metrics::parse_storm(text));
            if v.stuck {
                self.warnings
                    .push(format!("{name}: an I/O missed the storm's deadline"));
            }
            self.step(label).storm = Some(v);
        }
    }

    /// The guest-wide artefacts (meta, disk, scan, verify, status, steps); another name is an
    /// unknown artefact's warning.
    fn take_guest(&mut self, name: &str, text: &str) {
        match name {
            "meta" => self.guest.meta = parse!(self, name, metrics::parse_kv(text)),
            "disk" => self.guest.disk = parse!(self, name, metrics::parse_kv(text)),
            "scan" => self.guest.scan = Some(parse!(self, name, metrics::parse_scan(text))),
            "verify" => self.guest.verify = Some(parse!(self, name, metrics::parse_verify(text))),
            "status" => self.status = Some(parse!(self, name, metrics::parse_status(text))),
            "steps" => {
                for r in parse!(self, name, metrics::parse_steps(text)) {
                    let s = self.step(&r.step);
                    s.rc = Some(r.rc);
                    s.secs = r.secs;
                }
            }
            // dmesg: kept as it is. kw: the kill-test writer's records, one per acknowledged
            // write or flush, judged against the image by `results::kills`. fsload: what the
            // file-system workload did (its flushes are in the backend's write log).
            "dmesg" | "kw" | "kw.stderr" | "fsload" => {}
            _ => self.warnings.push(format!("unknown artefact {name:?}")),
        }
    }

    /// After the last artefact: interrupt deltas, steps in the agent's order with unique names,
    /// rescans in their order.
    fn finish_steps(&mut self) {
        // Interrupt deltas need both snapshots.
        let labels: Vec<String> = self.before.keys().cloned().collect();
        for l in labels {
            if let (Some(bef), Some(aft)) = (self.before.get(&l), self.after.get(&l)) {
                let d = metrics::interrupt_deltas(bef, aft);
                self.step(&l).interrupts = Some(d);
            }
        }
        // Agent order: by the step index that prefixes every label (stable for the rest).
        self.steps.sort_by_key(|s| {
            let digits: String = s.label.chars().take_while(char::is_ascii_digit).collect();
            digits.parse::<u64>().unwrap_or(u64::MAX)
        });
        let mut used = std::collections::BTreeSet::new();
        for s in &mut self.steps {
            let mut name = step_name(&s.label);
            if !used.insert(name.clone()) {
                name = step_name(&s.label.replace('-', "_"));
                name = format!("{name}_{}", used.len());
                used.insert(name.clone());
            }
            s.name = name;
        }
        self.rescans.sort_by_key(|(i, _)| *i);
        self.guest.rescans = self.rescans.drain(..).map(|(_, r)| r).collect();
    }

    /// The run's status: the guest's own, failed by a step that exited non-zero or a failed
    /// verify.
    fn run_status(&mut self) -> RunStatus {
        match self.status.take() {
            None => RunStatus::Failed {
                reason: "the guest sent no status artefact".into(),
            },
            Some(GuestStatus::Fail(r)) => RunStatus::Failed { reason: r },
            Some(GuestStatus::Ok) => {
                if let Some(s) = self.steps.iter().find(|s| s.rc.is_some_and(|rc| rc != 0)) {
                    RunStatus::Failed {
                        reason: format!("step {} exited {}", s.label, s.rc.unwrap_or(0)),
                    }
                } else if self.guest.verify.as_ref().is_some_and(|v| !v.ok) {
                    RunStatus::Failed {
                        reason: "verify failed".into(),
                    }
                } else {
                    RunStatus::Ok
                }
            }
        }
    }
}

/// `1-randread.fio` -> `randread`.
pub(super) fn step_name(label: &str) -> String {
    let s = label.trim_start_matches(|c: char| c.is_ascii_digit());
    let s = if s.len() < label.len() {
        s.strip_prefix('-').unwrap_or(s)
    } else {
        s
    };
    let s = s.strip_prefix("fio:").unwrap_or(s);
    let s = [".fio", ".ini", ".job"]
        .iter()
        .find_map(|e| s.strip_suffix(e))
        .unwrap_or(s);
    let s: String = s
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if s.is_empty() {
        "step".into()
    } else {
        s
    }
}

pub(super) fn build(
    info: RunInfo,
    mut provenance: Provenance,
    artifacts: &[Artifact],
    mut timings: Timings,
) -> RunResult {
    let mut b = Builder::default();
    let mut records = Vec::with_capacity(artifacts.len());
    for a in artifacts {
        records.push(ArtifactRecord {
            name: a.name.clone(),
            bytes: a.data.len(),
            complete: a.complete,
        });
        if a.complete {
            b.take(a);
        } else {
            b.issue(&a.name, "truncated: the stream ended inside this artefact");
        }
    }
    b.finish_steps();

    let mut m = BTreeMap::new();
    for s in &b.steps {
        registry::derive_step(&mut m, s);
    }
    registry::derive_guest(&mut m, &b.guest);

    if provenance.kernel.release.is_empty() {
        if let Some(r) = b.guest.meta.get("uname_r") {
            provenance.kernel.release = r.clone();
        }
    }
    if timings.boot_to_init_s.is_none() {
        timings.boot_to_init_s = b
            .guest
            .meta
            .get("init_uptime_s")
            .and_then(|v| v.parse::<f64>().ok())
            .filter(|v| v.is_finite());
    }
    let status = b.run_status();
    RunResult {
        schema_version: SCHEMA_VERSION,
        info,
        provenance,
        status,
        timings,
        steps: b.steps,
        metrics: m,
        guest: b.guest,
        artifacts: records,
        parse_errors: b.issues,
        warnings: b.warnings,
        kernel_log: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn step_names() {
        assert_eq!(step_name("1-randread.fio"), "randread");
        assert_eq!(step_name("12-fio:seq-write.fio"), "seq-write");
        assert_eq!(step_name("rescan"), "rescan");
        assert_eq!(step_name("3-a/b c"), "a_b_c");
        assert_eq!(step_name("7-"), "step");
    }
}
