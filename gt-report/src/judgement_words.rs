//! The judgement in words ([`gt_compare::judgement`] has the numbers): one reason line per
//! part and metric, the deciding one first, and the paragraph the verdict opens with.
//!
//! Contract:
//! 1. Every figure in a reason comes from the [`KernelJudgement`] it describes; a metric's words
//!    are its registry description, its numbers base -> other, the ratio with its 95 % CI.
//! 2. The first reason says what decided the judgement, in the terms of compare::judgement's
//!    rule 5; the others follow in the order mechanism, effects, ordering.
//! 3. The caveats are the method's own limits, printed with every judgement; nothing here claims
//!    what the data cannot show.

use gt_compare::judgement::{Class, Judged, Judgement, KernelJudgement, RatioCi, EFFECT_ALPHA};
use gt_compare::verdict::Verdict;
use gt_results::metrics::registry;
use gt_suite::JudgementSpec;

use super::tables::{fmt_num, fmt_p};

/// `0.53x (95 % CI 0.49-0.57, Welch p 1.2e-5)`.
fn ratio_words(r: Option<&RatioCi>) -> String {
    match r {
        Some(r) => format!(
            "{}x (95 % CI {}-{}, Welch p {})",
            fmt_num(r.ratio),
            fmt_num(r.lo),
            fmt_num(r.hi),
            fmt_p(r.p)
        ),
        None => "no interval (fewer than 2 boots on a side)".into(),
    }
}

/// What a metric is, in the registry's words.
fn what(metric: &str) -> String {
    registry::find(metric).map_or_else(
        || format!("`{metric}`"),
        |r| format!("{} (`{metric}`)", r.def.description),
    )
}

/// One metric's line: words, base -> other with the unit, ratio, class (`class` overrides the
/// class's own words).
fn metric_line(part: &str, j: &Judged, class: &str) -> String {
    let ratio = if j.ratio.is_none() && j.base_mean == 0.0 && j.base_n >= 2 {
        "no ratio (0 in every boot of the baseline)".to_string()
    } else {
        ratio_words(j.ratio.as_ref())
    };
    format!(
        "{part}: {}: {} -> {} {}, {ratio}: {class}",
        what(&j.metric),
        fmt_num(j.base_mean),
        fmt_num(j.other_mean),
        j.unit,
    )
}

/// A guard only matters when it increased (compare::judgement rule 2).
fn guard_words(c: Class) -> &'static str {
    match c {
        Class::Increased => "increased",
        Class::Reduced => "reduced",
        _ => "not increased",
    }
}

/// An effect's class, with the level it was tested at when it was not significant.
fn effect_words(c: Class, n_effects: usize) -> String {
    match c {
        Class::Same => format!(
            "not significant at p < {} (0.05 / {n_effects} effects)",
            fmt_num(EFFECT_ALPHA / n_effects.max(1) as f64)
        ),
        c => c.as_str().to_string(),
    }
}

/// The suite's words for the reasons (suite::judgement rule 6), `{base}` filled in; without
/// them, words that name the mechanism's metric.
struct Words {
    mechanism: String,
    increased: String,
    unsafe_reason: String,
    sometimes: String,
    never: String,
}

fn words(spec: &JudgementSpec, base: &str) -> Words {
    let fill = |t: &str| t.replace("{base}", base);
    match &spec.words {
        Some(w) => Words {
            mechanism: fill(&w.mechanism),
            increased: fill(&w.increased),
            unsafe_reason: fill(&w.unsafe_reason),
            sometimes: fill(&w.sometimes),
            never: fill(&w.never),
        },
        None => Words {
            mechanism: format!("`{}`", spec.mechanism),
            increased: format!("`{}` rose against {base}", spec.mechanism),
            unsafe_reason: "whatever the measurements say, a litmus test of this kernel's code \
                            allows the outcome it forbids"
                .into(),
            sometimes: "the outcome a litmus test forbids is allowed".into(),
            never: "no forbidden outcome".into(),
        },
    }
}

/// The ordering part's line.
fn ordering_line(k: &KernelJudgement, w: &Words) -> String {
    let o = &k.ordering;
    let model = o.model.as_deref().unwrap_or("no model");
    let mut line = match o.answer.as_str() {
        "sometimes" => format!(
            "ordering: the kernel memory model ({model}) says {}: Sometimes on {}",
            w.sometimes,
            o.sometimes.join(", ")
        ),
        "never" => format!(
            "ordering: Never on all {} litmus tests the kernel's components carry ({model})",
            o.tests
        ),
        _ => "ordering not checked".to_string(),
    };
    if let Some(d) = &o.derived {
        line.push_str(&format!(" (no test of its own; derived: {d})"));
    }
    if let Some(n) = &o.note {
        line.push_str(&format!(
            " ({n}: those tests do not vouch for this kernel's code)"
        ));
    }
    line
}

/// Rule 2 for the rules that read no interval: the boots, the kernel log, what was not measured.
fn decided_without_figures(k: &KernelJudgement, base: &str) -> Option<String> {
    let j = k.judgement.as_str();
    Some(match k.decided_by.as_str() {
        "baseline boots failed" => format!(
            "{j}: {} of {base}'s {} boots failed ({}): a failure of this kernel could not be told from the baseline's",
            k.base_boots.failed.len(),
            k.base_boots.boots,
            k.base_boots.failed.first().map_or("", |f| f.line.as_str())
        ),
        "boots failed" => format!(
            "{j}, decided by its boots: {} of {} failed or timed out where every boot of {base} ended; {}: {}",
            k.boots.failed.len(),
            k.boots.boots,
            k.boots.failed.first().map_or("", |f| f.run.as_str()),
            k.boots.failed.first().map_or("", |f| f.line.as_str())
        ),
        "kernel log" => format!(
            "{j}, decided by the kernel log: {} that no boot of {base} logged (in {} of {} boots): {}",
            k.boots.new_log.first().map_or("", |l| l.class.as_str()),
            k.boots.new_log.first().map_or(0, |l| l.boots),
            k.boots.boots,
            k.boots.new_log.first().map_or("", |l| l.line.as_str())
        ),
        "not measured" => format!(
            "{j}: not measured on a side, so not passed: {}",
            k.not_measured.join(", ")
        ),
        _ => return None,
    })
}

/// Rule 2: the deciding line.
fn decided_line(k: &KernelJudgement, spec: &JudgementSpec, w: &Words, base: &str) -> String {
    if let Some(line) = decided_without_figures(k, base) {
        return line;
    }
    let mech = k.mechanism_metrics.first();
    let mech_ratio = mech.map_or("-".into(), |m| ratio_words(m.ratio.as_ref()));
    let m = &w.mechanism;
    let floor = fmt_num(1.0 - spec.min_reduction);
    let worse: Vec<String> = k
        .effects
        .iter()
        .filter(|e| e.class == Class::Worse)
        .map(|e| format!("`{}` {}", e.metric, ratio_words(e.ratio.as_ref())))
        .collect();
    let j = k.judgement.as_str();
    match k.decided_by.as_str() {
        "ordering" => format!("{j}, decided by the memory model: {}", w.unsafe_reason),
        "effect" => format!(
            "{j}, decided by the effect: {} against {base}, beyond the {:.0} % margin",
            worse.join("; "),
            spec.effect_margin * 100.0
        ),
        "mechanism increased" => format!("{j}, decided by the mechanism: {}", w.increased),
        "too few boots" => format!("{j}: fewer than 2 successful boots of a kernel, no interval"),
        "ordering not checked" => format!(
            "{j}: {m} fell ({mech_ratio} of {base}'s), but the \
             memory model did not judge this kernel's code ({}): a litmus test beside the patch \
             (FILE.patch -> FILE.litmus, images/patches/README.md) would decide",
            k.ordering.note.as_deref().unwrap_or("no test ran")
        ),
        "effect not shown within the margin" => format!(
            "{j}: {m} fell ({mech_ratio} of {base}'s) and no effect \
             is significantly worse, but {} reach past the {:.0} % margin: these boots do not \
             show that nothing got worse",
            k.effects
                .iter()
                .filter(|e| e.within_margin != Some(true))
                .map(|e| format!("`{}` at {}", e.metric, ratio_words(e.ratio.as_ref())))
                .collect::<Vec<_>>()
                .join(" and "),
            spec.effect_margin * 100.0
        ),
        "effect unclear" => format!(
            "{j}: {m} fell ({mech_ratio} of {base}'s), but {} \
             beyond the {:.0} % margin at p < 0.05 (not after the correction for every effect): \
             these boots cannot rule out a loss",
            k.effects
                .iter()
                .filter(|e| e.class == Class::Unclear)
                .map(|e| format!("`{}` is at {}", e.metric, ratio_words(e.ratio.as_ref())))
                .collect::<Vec<_>>()
                .join(" and "),
            spec.effect_margin * 100.0
        ),
        "mechanism reduced" => format!(
            "{j}, decided by the mechanism: {m} at {mech_ratio} \
             of {base}'s, the interval below {floor} (a reduction counts from {:.0} %), every \
             effect's interval within the {:.0} % margin, no guard increased, every boot ended \
             with nothing new in the kernel log, and {} in the memory model on \
             this kernel's code",
            spec.min_reduction * 100.0,
            spec.effect_margin * 100.0,
            w.never
        ),
        "mechanism unchanged" => format!(
            "{j}, decided by the mechanism: {m} at {mech_ratio} \
             of {base}'s, the interval within {floor}-{}: no reduction that counts",
            fmt_num(1.0 / (1.0 - spec.min_reduction))
        ),
        _ => format!(
            "{j}: {m} at {mech_ratio} of {base}'s, the interval \
             straddles {floor} (or {}): these boots cannot tell a reduction that counts from none",
            fmt_num(1.0 / (1.0 - spec.min_reduction))
        ),
    }
}

/// The boots' line: how many ended, which failed and why, what the kernel log said.
fn boots_line(k: &KernelJudgement, base: &str) -> String {
    let b = &k.boots;
    let mut line = format!("boots: {} of {} ended", b.ok, b.boots);
    for f in &b.failed {
        line.push_str(&format!("; {} {} ({})", f.run, f.state, f.line));
    }
    if b.emulator > 0 {
        line.push_str(&format!(
            "; {} lost to TCG's stale int3 (the emulated machine's, not counted)",
            b.emulator
        ));
    }
    match (b.new_log.is_empty(), b.shared_log.is_empty()) {
        (true, true) => {
            line.push_str("; kernel log: no warning, BUG, Oops, panic, lockup, stall or hung task")
        }
        _ => {
            for l in &b.new_log {
                line.push_str(&format!(
                    "; kernel log, not in {base}'s: {} ({} of {} boots)",
                    l.line, l.boots, b.boots
                ));
            }
            for l in &b.shared_log {
                line.push_str(&format!(
                    "; kernel log, as in {base}'s: {} ({} of {} boots)",
                    l.line, l.boots, b.boots
                ));
            }
        }
    }
    line
}

/// Every reason of `k`, deciding one first (rules 1-2).
pub fn reasons(k: &KernelJudgement, spec: &JudgementSpec, base: &str) -> Vec<String> {
    let w = words(spec, base);
    let mut out = vec![decided_line(k, spec, &w, base), boots_line(k, base)];
    for (i, m) in k.mechanism_metrics.iter().enumerate() {
        out.push(if i == 0 {
            metric_line("mechanism (decides)", m, m.class.as_str())
        } else {
            metric_line("mechanism (guard)", m, guard_words(m.class))
        });
    }
    for l in &k.locks {
        out.push(metric_line("per lock", l, "figures only"));
    }
    for e in &k.effects {
        let margin = match e.within_margin {
            Some(true) => format!(
                "; interval within the {:.0} % margin",
                spec.effect_margin * 100.0
            ),
            _ => format!(
                "; interval reaches past the {:.0} % margin",
                spec.effect_margin * 100.0
            ),
        };
        out.push(metric_line(
            "effect",
            e,
            &(effect_words(e.class, k.effects.len()) + &margin),
        ));
    }
    if k.boots.ok == 0 {
        out.push(
            "not measured: no boot of this kernel ended, so no figure of the [judgement]".into(),
        );
    } else {
        for m in &k.not_measured {
            out.push(format!(
                "not measured: `{m}` has no value on one side: not passed"
            ));
        }
    }
    out.push(ordering_line(k, &w));
    out
}

/// Fills the reasons of every judgement of `v`, and `v.reasons` (those of its second kernel).
pub fn fill_reasons(v: &mut Verdict) {
    let Some(spec) = v.judgement_spec.clone() else {
        return;
    };
    for k in v.judgements.iter_mut() {
        k.reasons = reasons(k, &spec, &v.base);
    }
    v.reasons = v
        .judgements
        .iter()
        .find(|k| k.kernel == v.other)
        .map(|k| k.reasons.clone())
        .unwrap_or_default();
}

/// Rule 3: the caveats every verdict prints, around the suite's own (what its mechanism cannot
/// see).
pub const CAVEATS: &str = "How to read it: each kernel is compared with the baseline alone, \
every interval is a 95 % Welch interval on the logarithms (a ratio of geometric means); the \
effects decide `worse` at 0.05 divided by their number (Bonferroni), and `improved` needs each \
effect's interval on the good side of its margin; nothing is corrected across kernels. Every \
boot counts: a failed or timed-out boot, or a report in the kernel log that no baseline boot \
has, makes a kernel worse.";

/// The last of the caveats.
pub const CAVEAT_UNSAFE: &str = "`unsafe` comes only from the kernel memory model (herd7 on \
tools/memory-model of the kernel's own source), never from a measurement: an x86 guest cannot \
show a reordering that TSO forbids.";

/// The caveats of a verdict judged by `spec`: [`CAVEATS`], the suite's, [`CAVEAT_UNSAFE`].
pub fn caveats(spec: &JudgementSpec) -> String {
    match &spec.words {
        Some(w) => format!("{CAVEATS} {} {CAVEAT_UNSAFE}", w.caveat),
        None => format!("{CAVEATS} {CAVEAT_UNSAFE}"),
    }
}

/// The judgements of `v` as the Markdown the verdict opens with: one block per kernel.
pub fn judgement_text(v: &Verdict) -> String {
    let mut out = String::new();
    let Some(spec) = &v.judgement_spec else {
        return out;
    };
    let base = &v.base;
    for k in &v.judgements {
        out.push_str(&format!(
            "**{}: {}** (against {base})\n\n",
            k.kernel,
            k.judgement.as_str()
        ));
        for r in reasons(k, spec, base) {
            out.push_str(&format!("- {r}\n"));
        }
        out.push('\n');
    }
    if !v.judgements.is_empty() {
        out.push_str(&caveats(spec));
        out.push_str("\n\n");
    }
    out
}

/// One line per kernel: `KERNEL: judgement (decided by ...)`, for a terminal.
pub fn judgement_lines(js: &[KernelJudgement]) -> String {
    js.iter()
        .map(|k| {
            format!(
                "{}: {} ({})\n",
                k.kernel,
                k.judgement.as_str(),
                k.decided_by
            )
        })
        .collect()
}

/// The judgement that a kernel named `kernel` got, if any.
pub fn judgement_of(js: &[KernelJudgement], kernel: &str) -> Option<Judgement> {
    js.iter().find(|k| k.kernel == kernel).map(|k| k.judgement)
}
