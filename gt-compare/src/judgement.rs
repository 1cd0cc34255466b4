//! The judgement of each kernel against the baseline: `improved`, `unchanged`, `worse`,
//! `unsafe` or `undecided`, from three parts that can each fail (the suite's `[judgement]`,
//! `suite::judgement`, says which metrics and margins).
//!
//! Contract:
//! 1. Every ratio is other / baseline with a 95 % confidence interval: Welch's t on the
//!    logarithms (a ratio of geometric means, `gt_stats::geo_ratio`; none when both sides are
//!    constant) when every value is positive, else Welch's interval of the difference of means
//!    divided by the baseline's mean. Each kernel is compared with the baseline alone; nothing
//!    is corrected across kernels or metrics, and the words say so.
//! 2. Mechanism, per metric (lower is better): `reduced` when the CI lies below
//!    `1 - min_reduction`, `increased` when it lies above `1 / (1 - min_reduction)`,
//!    `unchanged` when it lies between the two, else `undecided`. The part is `increased` when
//!    any mechanism metric increased, `reduced` when the decision metric is reduced, else the
//!    decision metric's class.
//! 3. Effect, per metric (direction from the registry): `worse` when the ratio is on the bad side
//!    beyond the margin and Welch's p is below 0.05 / k (Bonferroni over the k effects: the
//!    chance that a kernel as good as the baseline is called worse stays below 5 %), `unclear`
//!    when it is on the bad side beyond the margin with p below 0.05 but not below 0.05 / k (a
//!    loss the test of that effect alone would report: these boots cannot rule it out),
//!    `better` when it is on the good side with p below 0.05 / k, else `same`. The interval
//!    shown stays the 95 % one.
//! 4. Ordering (the kernel memory model, recorded per run at `run` time): unsafe on any
//!    `Sometimes`; "not checked" when the runs carry no check or a component carries no test.
//!    The part is complete only when every test ran on this kernel's code: a part of the
//!    kernel that carries no test and changes what the tests model (`ordering::plan`, rule 5)
//!    leaves it incomplete ("ordering not checked: FUNCTION changed").
//! 5. The judgement, in this order: `unsafe` (ordering Sometimes); `undecided` when a baseline
//!    boot failed (nothing to compare a failure with); `worse` when a boot of the kernel failed
//!    or timed out, when its kernel log reports what no baseline boot's does (rule 6), when an
//!    effect is worse, or when the mechanism increased; `undecided` when either kernel has
//!    fewer than 2 successful boots, or a metric of the `[judgement]` was not measured on a
//!    side; then `improved` only when the mechanism is reduced, the ordering part is complete
//!    and Never, no effect is unclear and every effect's 95 % interval lies on the good side
//!    of its margin (non-inferiority: `within_margin`), else `undecided` saying which;
//!    `unchanged` (mechanism unchanged) or `undecided`. `decided_by` names the rule. `reasons`
//!    (one line each, the deciding one first) are words: the report fills them
//!    (`report::judgement_words::fill_reasons`), this module leaves them empty.
//! 6. Boots and the kernel log (`boots`): every boot of a kernel counts, failed ones included;
//!    a boot lost to the emulated machine (TCG's stale int3) is reported and not counted.
//! 7. A guard whose baseline is 0 in every boot (e.g. failed trylocks) has no ratio: it is
//!    `increased` when the kernel's 95 % interval of the mean lies above 0, `unchanged` when
//!    the kernel is 0 too, else `undecided`.

use gt_stats::GeoError;
use serde::{Deserialize, Serialize};

use super::{Comparison, MetricRow};
use gt_ordering::OrderingRecord;
use gt_results::metrics::registry::Better;
use gt_results::results::RunResult;
use gt_stats::{mean, variance, welch_diff_ci95, welch_p};
use gt_suite::JudgementSpec;

mod boots;

pub use boots::{boots_part, BootsPart, FailedBoot, LogLine};

/// The family-wise level of the effects' tests (rule 3).
pub const EFFECT_ALPHA: f64 = 0.05;

/// The five judgements.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Judgement {
    Improved,
    Unchanged,
    Worse,
    Unsafe,
    Undecided,
}

impl Judgement {
    pub fn as_str(self) -> &'static str {
        match self {
            Judgement::Improved => "improved",
            Judgement::Unchanged => "unchanged",
            Judgement::Worse => "worse",
            Judgement::Unsafe => "unsafe",
            Judgement::Undecided => "undecided",
        }
    }
}

/// A ratio other / baseline and its 95 % CI (rule 1).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RatioCi {
    pub ratio: f64,
    pub lo: f64,
    pub hi: f64,
    /// Welch's two-sided p of the same comparison.
    pub p: Option<f64>,
    /// True: on the logarithms (geometric means); false: difference over the baseline mean.
    pub log: bool,
}

/// A mechanism metric's class (rule 2) or an effect's (rule 3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Class {
    Reduced,
    Unchanged,
    Increased,
    Undecided,
    Better,
    Same,
    Unclear,
    Worse,
}

impl Class {
    pub fn as_str(self) -> &'static str {
        match self {
            Class::Reduced => "reduced",
            Class::Unchanged => "unchanged",
            Class::Increased => "increased",
            Class::Undecided => "undecided",
            Class::Better => "better",
            Class::Same => "not significantly different",
            Class::Unclear => {
                "worse beyond the margin at p < 0.05, not after the correction for every effect: \
                 a loss these boots cannot rule out"
            }
            Class::Worse => "worse",
        }
    }
}

/// One metric of the judgement for one kernel.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Judged {
    pub metric: String,
    pub unit: String,
    pub base_mean: f64,
    pub other_mean: f64,
    pub base_n: usize,
    pub other_n: usize,
    pub ratio: Option<RatioCi>,
    pub class: Class,
    /// Effects only: the 95 % interval lies on the good side of the margin (rule 5's
    /// non-inferiority); `None` for mechanism metrics.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub within_margin: Option<bool>,
}

/// The ordering part (rule 4).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OrderingPart {
    /// `never` (every test Never), `sometimes` or `not checked`.
    pub answer: String,
    /// The model and herd7 versions, when checked.
    pub model: Option<String>,
    /// `component/test (path)` of every Sometimes test.
    pub sometimes: Vec<String>,
    /// How many tests ran.
    pub tests: usize,
    /// Why it was not checked (or what was left unchecked).
    pub note: Option<String>,
    /// Every test ran on this kernel's code and nothing it models was changed untested.
    #[serde(default)]
    pub complete: bool,
    /// The tests were derived from the kernel's own source: from whose, what was read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub derived: Option<String>,
}

/// The judgement of one kernel against the baseline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KernelJudgement {
    pub kernel: String,
    pub judgement: Judgement,
    /// The rule that decided: `ordering`, `effect`, `mechanism increased`, `too few boots`,
    /// `mechanism reduced`, `mechanism unchanged`, `mechanism undecided`.
    pub decided_by: String,
    pub reasons: Vec<String>,
    /// The decision metric's class (rule 2).
    pub mechanism: Class,
    /// Mechanism metrics, decision metric first.
    pub mechanism_metrics: Vec<Judged>,
    /// Per-lock metrics (the suite's `locks`): figures only, their class as rule 2's.
    #[serde(default)]
    pub locks: Vec<Judged>,
    pub effects: Vec<Judged>,
    pub ordering: OrderingPart,
    /// The kernel's boots and kernel log (rule 6), and the baseline's.
    #[serde(default)]
    pub boots: BootsPart,
    #[serde(default)]
    pub base_boots: BootsPart,
    /// Metrics of the `[judgement]` without values on a side (rule 5: not measured is never
    /// passed).
    #[serde(default)]
    pub not_measured: Vec<String>,
}

/// Rule 1.
pub fn ratio_ci(base: &[f64], other: &[f64]) -> Option<RatioCi> {
    match gt_stats::geo_ratio(base, other) {
        Ok(g) => {
            let (lo, hi) = g.ci95?;
            Some(RatioCi {
                ratio: g.ratio,
                lo,
                hi,
                p: g.p,
                log: true,
            })
        }
        Err(GeoError::NotPositive) => ratio_of_means(base, other),
        Err(GeoError::TooFew { .. }) => None,
    }
}

/// Rule 1 where a value is not positive: Welch's interval of the difference of means over the
/// baseline's mean (None when that mean is not positive).
fn ratio_of_means(base: &[f64], other: &[f64]) -> Option<RatioCi> {
    let mb = mean(base);
    if mb <= 0.0 || !mb.is_finite() {
        return None;
    }
    let (a, b) = welch_diff_ci95(other, base)?;
    Some(RatioCi {
        ratio: mean(other) / mb,
        // A ratio of non-negative figures: the interval stops at 0.
        lo: (1.0 + a / mb).max(0.0),
        hi: 1.0 + b / mb,
        p: welch_p(other, base),
        log: false,
    })
}

/// Rule 2 for one interval.
pub fn mechanism_class(r: Option<&RatioCi>, min_reduction: f64) -> Class {
    let Some(r) = r else {
        return Class::Undecided;
    };
    let (floor, ceil) = (1.0 - min_reduction, 1.0 / (1.0 - min_reduction));
    if r.hi < floor {
        Class::Reduced
    } else if r.lo > ceil {
        Class::Increased
    } else if r.lo >= floor && r.hi <= ceil {
        Class::Unchanged
    } else {
        Class::Undecided
    }
}

/// Rule 3 for one interval of a metric whose better direction is `better`, at level `alpha`
/// (0.05 / the number of effects).
pub fn effect_class(r: Option<&RatioCi>, better: Better, margin: f64, alpha: f64) -> Class {
    let Some(r) = r else {
        return Class::Same;
    };
    let significant = r.p.is_some_and(|p| p < alpha);
    let suggested = r.p.is_some_and(|p| p < EFFECT_ALPHA);
    let (worse_side, beyond) = match better {
        Better::Lower => (r.ratio > 1.0, r.ratio > 1.0 + margin),
        _ => (r.ratio < 1.0, r.ratio < 1.0 - margin),
    };
    if significant && worse_side && beyond {
        Class::Worse
    } else if suggested && worse_side && beyond {
        Class::Unclear
    } else if significant && !worse_side {
        Class::Better
    } else {
        Class::Same
    }
}

/// Rule 5's non-inferiority: the 95 % interval on the good side of the margin.
pub fn within_margin(r: Option<&RatioCi>, better: Better, margin: f64) -> bool {
    r.is_some_and(|r| match better {
        Better::Lower => r.hi < 1.0 + margin,
        _ => r.lo > 1.0 - margin,
    })
}

/// Rule 7: a guard whose baseline is 0 in every boot.
fn from_zero_class(other: &[f64]) -> Class {
    if other.iter().all(|v| *v == 0.0) {
        return Class::Unchanged;
    }
    // One value has no interval (gt-stats rule 3): undecided.
    let n = other.len() as f64;
    match gt_stats::half_width_95(variance(other) / n, n - 1.0) {
        Some(h) if mean(other) - h > 0.0 => Class::Increased,
        _ => Class::Undecided,
    }
}

/// One metric's figures for `other` against the baseline.
fn judged(
    row: &MetricRow,
    base: &str,
    other: &str,
    class: impl Fn(Option<&RatioCi>, Better) -> Class,
) -> Option<Judged> {
    let b = row.values.get(base)?;
    let o = row.values.get(other)?;
    if b.is_empty() || o.is_empty() {
        return None;
    }
    let ratio = ratio_ci(b, o);
    let better = row.better.unwrap_or(Better::Neither);
    let zero_base = b.iter().all(|v| *v == 0.0) && better == Better::Lower;
    Some(Judged {
        metric: row.metric.clone(),
        unit: row.unit.clone(),
        base_mean: mean(b),
        other_mean: mean(o),
        base_n: b.len(),
        other_n: o.len(),
        class: if zero_base && ratio.is_none() {
            from_zero_class(o)
        } else {
            class(ratio.as_ref(), better)
        },
        ratio,
        within_margin: None,
    })
}

/// Rule 4: the ordering part of `kernel`, from its runs' records.
fn ordering_part(runs: &[RunResult], kernel: &str) -> OrderingPart {
    let rec = runs
        .iter()
        .filter(|r| r.info.kernel == kernel)
        .find_map(|r| r.info.ordering.as_ref());
    let unchecked = |note: String| OrderingPart {
        answer: "not checked".into(),
        model: None,
        sometimes: Vec::new(),
        tests: 0,
        note: Some(note),
        complete: false,
        derived: None,
    };
    match rec {
        None => unchecked("the runs carry no memory-model check".into()),
        Some(OrderingRecord::Failed { reason }) => unchecked(reason.clone()),
        Some(OrderingRecord::Checked(chk)) => {
            let sometimes: Vec<String> = chk
                .sometimes()
                .iter()
                .map(|o| format!("{}/{} ({})", o.component, o.test, o.path))
                .collect();
            let note = (!chk.unchecked.is_empty())
                .then(|| format!("not checked: {}", chk.unchecked.join("; ")));
            let answer = if !sometimes.is_empty() {
                "sometimes"
            } else if chk.outcomes.is_empty() {
                "not checked"
            } else {
                "never"
            };
            OrderingPart {
                answer: answer.into(),
                model: Some(chk.model.clone()),
                sometimes,
                tests: chk.outcomes.len(),
                complete: answer == "never" && note.is_none(),
                note,
                derived: chk.derived.clone(),
            }
        }
    }
}

/// The spec the runs carry (the first run that has one).
pub fn spec_of(runs: &[RunResult]) -> Option<&JudgementSpec> {
    runs.iter().find_map(|r| r.info.judgement.as_ref())
}

/// Judges every kernel of `c` after the first against the first (rule 5), when the runs carry
/// a `[judgement]`; empty otherwise.
pub fn judge_all(c: &Comparison, runs: &[RunResult]) -> Vec<KernelJudgement> {
    let Some(spec) = spec_of(runs) else {
        return Vec::new();
    };
    c.kernels
        .iter()
        .skip(1)
        .map(|k| judge(c, runs, spec, k))
        .collect()
}

/// The judgement of `other` (rule 5).
pub fn judge(
    c: &Comparison,
    runs: &[RunResult],
    spec: &JudgementSpec,
    other: &str,
) -> KernelJudgement {
    let base = c.baseline();
    let row = |m: &String| c.rows.iter().find(|r| &r.metric == m);
    let mut not_measured: Vec<String> = Vec::new();
    let mut judge_metric = |m: &String, class: &dyn Fn(Option<&RatioCi>, Better) -> Class| {
        let j = row(m).and_then(|r| judged(r, base, other, class));
        if j.is_none() {
            not_measured.push(m.clone());
        }
        j
    };
    let mech = |r: Option<&RatioCi>, _| mechanism_class(r, spec.min_reduction);
    let mechanism_metrics: Vec<Judged> = std::iter::once(&spec.mechanism)
        .chain(&spec.guards)
        .filter_map(|m| judge_metric(m, &mech))
        .collect();
    let alpha = EFFECT_ALPHA / spec.effects.len().max(1) as f64;
    let effect = |r: Option<&RatioCi>, b| effect_class(r, b, spec.effect_margin, alpha);
    let effects: Vec<Judged> = spec
        .effects
        .iter()
        .filter_map(|m| judge_metric(m, &effect))
        .map(|mut j| {
            let better = row(&j.metric)
                .and_then(|r| r.better)
                .unwrap_or(Better::Neither);
            j.within_margin = Some(within_margin(j.ratio.as_ref(), better, spec.effect_margin));
            j
        })
        .collect();
    // Per-lock figures decide nothing: one missing is not "not measured".
    let locks: Vec<Judged> = spec
        .locks
        .iter()
        .filter_map(|m| judged(row(m)?, base, other, mech))
        .collect();
    let decision = mechanism_metrics
        .first()
        .filter(|j| j.metric == spec.mechanism);
    let few = decision.is_none_or(|j| j.base_n < 2 || j.other_n < 2);
    let mechanism = if mechanism_metrics
        .iter()
        .any(|j| j.class == Class::Increased)
    {
        Class::Increased
    } else {
        decision.map_or(Class::Undecided, |j| j.class)
    };
    let mut k = KernelJudgement {
        kernel: other.to_string(),
        judgement: Judgement::Undecided,
        decided_by: String::new(),
        reasons: Vec::new(),
        mechanism,
        mechanism_metrics,
        locks,
        effects,
        ordering: ordering_part(runs, other),
        boots: boots_part(runs, other, base),
        base_boots: boots_part(runs, base, base),
        not_measured,
    };
    let (judgement, decided_by) = decide(&k, few);
    k.judgement = judgement;
    k.decided_by = decided_by.to_string();
    k
}

/// Rule 5's order.
fn decide(k: &KernelJudgement, few: bool) -> (Judgement, &'static str) {
    if !k.ordering.sometimes.is_empty() {
        return (Judgement::Unsafe, "ordering");
    }
    if !k.base_boots.failed.is_empty() {
        return (Judgement::Undecided, "baseline boots failed");
    }
    if !k.boots.failed.is_empty() {
        return (Judgement::Worse, "boots failed");
    }
    if !k.boots.new_log.is_empty() {
        return (Judgement::Worse, "kernel log");
    }
    if k.effects.iter().any(|e| e.class == Class::Worse) {
        return (Judgement::Worse, "effect");
    }
    if k.mechanism == Class::Increased {
        return (Judgement::Worse, "mechanism increased");
    }
    if few {
        return (Judgement::Undecided, "too few boots");
    }
    if !k.not_measured.is_empty() {
        return (Judgement::Undecided, "not measured");
    }
    match k.mechanism {
        Class::Reduced if !k.ordering.complete => (Judgement::Undecided, "ordering not checked"),
        Class::Reduced if k.effects.iter().any(|e| e.class == Class::Unclear) => {
            (Judgement::Undecided, "effect unclear")
        }
        Class::Reduced if k.effects.iter().any(|e| e.within_margin != Some(true)) => {
            (Judgement::Undecided, "effect not shown within the margin")
        }
        Class::Reduced => (Judgement::Improved, "mechanism reduced"),
        Class::Unchanged => (Judgement::Unchanged, "mechanism unchanged"),
        _ => (Judgement::Undecided, "mechanism undecided"),
    }
}

#[cfg(test)]
mod tests;
