//! The verdict in plain words and a small table ([`gt_compare::verdict`] has the numbers):
//! what the report opens with and what `compare --verdict` and the main job print.

use gt_compare::sequential::{Decision, SequentialRecord};
use gt_compare::verdict::{Faithfulness, KernelFigure, Verdict, VerdictRow};
use gt_results::metrics::{LockFigure, StepFigure};

use super::tables::{fmt_num, fmt_p};

/// The sequential test's outcome as index.json records it (read without the matrix types).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SequentialNote {
    pub metric: String,
    pub test: String,
    pub boots_per_kernel: usize,
    pub decision: String,
    pub alpha: f64,
    pub max_n: usize,
}

/// Reads `index.json`'s `sequential` record, if the matrix ran until decided (through its type,
/// [`SequentialRecord`]; the rest of index.json is not read here).
pub fn sequential_note(dir: &std::path::Path) -> Option<SequentialNote> {
    #[derive(serde::Deserialize)]
    struct IndexSequential {
        #[serde(default)]
        sequential: Option<SequentialRecord>,
    }
    let text = std::fs::read_to_string(dir.join("index.json")).ok()?;
    let s = serde_json::from_str::<IndexSequential>(&text)
        .ok()?
        .sequential?;
    let decision = s
        .plan
        .looks
        .last()
        .map_or(Decision::Continue, |l| l.decision);
    Some(SequentialNote {
        metric: s.metric,
        test: s.test,
        boots_per_kernel: s.boots_per_kernel,
        decision: decision.as_str().to_string(),
        alpha: s.plan.alpha,
        max_n: s.plan.max_n,
    })
}

fn pm(f: &KernelFigure) -> String {
    match f.ci95 {
        Some(h) if h.is_finite() => format!("{} ± {}", fmt_num(f.mean), fmt_num(h)),
        _ => fmt_num(f.mean),
    }
}

fn p_of(r: &VerdictRow) -> String {
    format!("{} p = {}", r.test, fmt_p(r.p))
}

fn mbps(kib: f64) -> f64 {
    kib * 1024.0 / 1e6
}

/// The verdict as Markdown paragraphs.
pub fn verdict_text(v: &Verdict, seq: Option<&SequentialNote>) -> String {
    let mut out = super::judgement_words::judgement_text(v);
    let (b, o) = (&v.base, &v.other);
    if let Some(p) = v.row("primary") {
        out.push_str(&primary_text(v, p));
    }
    if let Some(s) = v.row("secondary") {
        out.push_str(&secondary_text(s, b, o));
    }
    let fig = |f: LockFigure| v.rows.iter().find(|r| f.is(&r.metric));
    if let Some(d) = fig(LockFigure::DblockedPeak) {
        out.push_str(&blocked_text(
            v.observation.as_deref(),
            d,
            fig(LockFigure::QlockBlockedPeak),
            v.rows
                .iter()
                .find(|r| LockFigure::DblockedGePct.is_k(&r.metric, 4)),
            b,
            o,
        ));
    }
    for t in v.rows.iter().filter(|r| r.role == "throughput") {
        let rel = (t.base.mean != 0.0).then(|| 100.0 * (t.other.mean / t.base.mean - 1.0));
        out.push_str(&format!(
            "Throughput `{}`: {b} {} MB/s, {o} {} MB/s{}; {}.\n\n",
            t.metric,
            fmt_num(mbps(t.base.mean)),
            fmt_num(mbps(t.other.mean)),
            rel.map_or(String::new(), |r| format!(" ({r:+.1} %)")),
            p_of(t)
        ));
    }
    if let Some(c) = v
        .rows
        .iter()
        .find(|r| StepFigure::GuestCpuPerS.is(&r.metric))
    {
        out.push_str(&host_cpu_text(v, c));
    }
    if let Some(f) = &v.faithfulness {
        out.push_str(&faithfulness_text(f, b));
    }
    if let Some(s) = seq {
        out.push_str(&format!(
            "Sequential test on `{}` ({}, O'Brien-Fleming alpha spending, overall alpha {}): {} after {} boots per kernel (budget {}).\n\n",
            s.metric,
            s.test,
            s.alpha,
            s.decision,
            s.boots_per_kernel,
            s.max_n
        ));
    }
    out
}

/// The primary metric's sentence(s): queue_lock waiting per second of I/O or per 1,000 I/Os,
/// a throughput as a multiple, anything else as base -> other; with the p-value and the design.
fn primary_text(v: &Verdict, p: &VerdictRow) -> String {
    let mut out = String::new();
    let (b, o) = (&v.base, &v.other);
    let design = if v.paired {
        "paired boots, A and B at the same time"
    } else {
        "interleaved boots"
    };
    let n = format!("n = {}+{} boots, {design}", p.base.n, p.other.n);
    let per_s = v
        .rows
        .iter()
        .find(|r| LockFigure::QlockWaitMsPerS.is(&r.metric));
    let strong = p.p.is_some_and(|x| x < 1e-3);
    let word = if strong {
        ""
    } else {
        " (not separated at p < 0.001)"
    };
    match per_s {
        Some(s) if LockFigure::QlockWaitMsPerKio.is(&p.metric) => {
            let removed = s.base.mean - s.other.mean;
            out.push_str(&format!(
                "**{o} removes {} ms of queue_lock waiting per second of I/O** ({b}: {} ms/s, {o}: {} ms/s); \
                 {p_txt}; {n}{word}.\n\n",
                fmt_num(removed),
                pm(&s.base),
                pm(&s.other),
                p_txt = p_of(p),
            ));
            out.push_str(&format!(
                "Primary metric `{}`: {b} {} -> {o} {} {}.\n\n",
                p.metric,
                pm(&p.base),
                pm(&p.other),
                p.unit
            ));
        }
        _ if LockFigure::QlockContentionSharePct.is(&p.metric) => {
            out.push_str(&share_text(v, p, &n, word));
            return out;
        }
        _ if LockFigure::QlockWaitCountPerKio.is(&p.metric) => out.push_str(&format!(
            "**The request irq threads wait for queue_lock {} times per 1,000 I/Os on {b}, \
             {} times on {o}** (`{}`: {b} {} -> {o} {}); {}; {n}{word}.\n\n",
            fmt_num(p.base.mean),
            fmt_num(p.other.mean),
            p.metric,
            pm(&p.base),
            pm(&p.other),
            p_of(p)
        )),
        _ if higher_is_better(&p.metric) && p.base.mean > 0.0 => out.push_str(&format!(
            "**{o} gives {}x the {} of {b}**: `{}` {b} {} -> {o} {} {}; {}; {n}{word}.\n\n",
            fmt_num(p.other.mean / p.base.mean),
            p.unit,
            p.metric,
            pm(&p.base),
            pm(&p.other),
            p.unit,
            p_of(p)
        )),
        _ => out.push_str(&format!(
            "**`{}`: {b} {} -> {o} {} {}**; {}; {n}{word}.\n\n",
            p.metric,
            pm(&p.base),
            pm(&p.other),
            p.unit,
            p_of(p)
        )),
    }
    // The suite's caveat after the first sentence (share_text places its own).
    if let (Some(c), Some(i)) = (&v.caveat, out.find(".\n\n")) {
        out.insert_str(i + 1, &format!(" {c}"));
    }
    out
}

/// The primary sentence for queue_lock's share of the irq threads' lock contentions, with how
/// often they waited for it on the same step (its companion row) when that row is there.
fn share_text(v: &Verdict, p: &VerdictRow, n: &str, word: &str) -> String {
    let (b, o) = (&v.base, &v.other);
    let step = p
        .metric
        .trim_end_matches(LockFigure::QlockContentionSharePct.suffix());
    let count = v
        .rows
        .iter()
        .find(|r| r.metric == format!("{step}{}", LockFigure::QlockWaitCountPerKio.suffix()))
        .map_or(String::new(), |c| {
            format!(
                " They waited for it {} times per 1,000 I/Os on {b} (CV {}), {} on {o}.",
                fmt_num(c.base.mean),
                c.base
                    .cv
                    .map_or("-".into(), |x| format!("{:.0} %", x * 100.0)),
                fmt_num(c.other.mean)
            )
        });
    let caveat = v.caveat.as_ref().map_or(String::new(), |c| format!(" {c}"));
    format!(
        "**{} % of the request irq threads' lock contentions are on queue_lock on {b}, {} % on \
         {o}** (`{}`: {b} {} -> {o} {}); {}; {n}{word}.{caveat}{count}\n\n",
        fmt_num(p.base.mean),
        fmt_num(p.other.mean),
        p.metric,
        pm(&p.base),
        pm(&p.other),
        p_of(p)
    )
}

/// Request irq threads in D at once (peak, share of time at >= 4, on the queue_lock at once),
/// with the regression's own figure beside it when the suite quotes one.
fn blocked_text(
    observation: Option<&str>,
    d: &VerdictRow,
    q: Option<&VerdictRow>,
    ge4: Option<&VerdictRow>,
    b: &str,
    o: &str,
) -> String {
    let observation = observation.map_or(String::new(), |x| format!(" ({x})"));
    format!(
        "Request irq threads in D at the same moment{observation}: peak median {} on {b} \
         (range {}-{}), {} on {o} (range {}-{}){}{}.\n\n",
        fmt_num(d.base.median),
        fmt_num(d.base.min),
        fmt_num(d.base.max),
        fmt_num(d.other.median),
        fmt_num(d.other.min),
        fmt_num(d.other.max),
        ge4.map_or(String::new(), |g| {
            let [x, y] = both(g, |f| f.mean);
            format!("; >= 4 at once {x} % vs {y} % of the time")
        }),
        q.map_or(String::new(), |q| {
            let [x, y] = both(q, |f| f.median);
            format!("; waiting on the queue_lock at once: peak median {x} vs {y}")
        }),
    )
}

/// `stat` of the row's two kernels, formatted: `[base, other]`.
fn both(r: &VerdictRow, stat: fn(&KernelFigure) -> f64) -> [String; 2] {
    [fmt_num(stat(&r.base)), fmt_num(stat(&r.other))]
}

/// The host's side: the vCPUs' CPU time per second (`c`), unrelated host load, hypervisor steal
/// (only when there was any) and the starved runs.
fn host_cpu_text(v: &Verdict, c: &VerdictRow) -> String {
    let (b, o) = (&v.base, &v.other);
    let comp = |f: StepFigure| v.rows.iter().find(|r| f.is(&r.metric));
    let other_load = comp(StepFigure::HostOtherCpuPerS);
    // Shown only when the host is a VM whose hypervisor took CPU from it.
    let steal =
        comp(StepFigure::HostStealCpuPerS).filter(|s| s.base.max > 0.0 || s.other.max > 0.0);
    format!(
        "Host: the guest's vCPUs got {} ({b}) and {} ({o}) CPU-seconds per second during the step{}{}; {}.\n\n",
        fmt_num(c.base.mean),
        fmt_num(c.other.mean),
        other_load.map_or(String::new(), |l| {
            let [x, y] = both(l, |f| f.mean);
            format!(", unrelated host load {x} / {y} CPU-s/s")
        }),
        steal.map_or(String::new(), |l| {
            let ([x, y], [mx, my]) = (both(l, |f| f.mean), both(l, |f| f.max));
            format!(", CPU stolen by the hypervisor below the host {x} / {y} CPU-s/s (max {mx} / {my})")
        }),
        if v.starved.is_empty() {
            "no run was starved".to_string()
        } else {
            format!(
                "{} run(s) starved (< 60 % of the median vCPU time): {}",
                v.starved.len(),
                v.starved.join(", ")
            )
        }
    )
}

/// The secondary metric's sentence: a lock metric as "N x less", anything else (throughput) as
/// the other kernel's multiple of the baseline.
fn secondary_text(s: &VerdictRow, b: &str, o: &str) -> String {
    let ratio = if higher_is_better(&s.metric) {
        (s.base.mean != 0.0)
            .then(|| format!(" ({o}: {}x {b}'s)", fmt_num(s.other.mean / s.base.mean)))
    } else if s.other.mean == 0.0 && s.other.max == 0.0 {
        Some(format!(" (0 in every {o} boot)")).filter(|_| s.base.mean > 0.0)
    } else {
        (s.other.mean != 0.0).then(|| format!(" ({}x less)", fmt_num(s.base.mean / s.other.mean)))
    };
    let what = if LockFigure::LockwaitMsPerKio.is(&s.metric) {
        " (all lock sites)"
    } else if LockFigure::QlockWaitMsPerKio.is(&s.metric) {
        " (the request irq threads' queue_lock wait)"
    } else {
        ""
    };
    format!(
        "Secondary metric `{}`{}: {b} {} -> {o} {} {}{}; {}.\n\n",
        s.metric,
        what,
        pm(&s.base),
        pm(&s.other),
        s.unit,
        ratio.unwrap_or_default(),
        p_of(s)
    )
}

/// True when the registry says more of `metric` is better (throughput).
fn higher_is_better(metric: &str) -> bool {
    gt_results::metrics::registry::find(metric)
        .is_some_and(|r| r.def.better == gt_results::metrics::registry::Better::Higher)
}

/// How faithful the runs were (compare::verdict rule 4), in words.
fn faithfulness_text(f: &Faithfulness, base: &str) -> String {
    let place = if f.dedicated {
        "each running vCPU had a host core of its own (the backend and QEMU's own threads on other cores)"
            .to_string()
    } else {
        format!(
            "{} running vCPUs per host core, sharing the cores with the backend and QEMU's own threads",
            fmt_num(f.vcpus_per_core)
        )
    };
    let mut out = format!(
        "Faithfulness: {place}; host time slice {} ms.",
        fmt_num(f.host_slice_ms)
    );
    if let Some(w) = f.base_wait_mean_us {
        out.push_str(&format!(
            " Mean queue_lock wait per contention on {base}: {} us, {} host slices.",
            fmt_num(w),
            fmt_num(w / (f.host_slice_ms * 1e3))
        ));
    }
    out.push_str(if f.host_preemption_likely {
        " **Host preemption likely dominates the lock figures**: blk_mq_run_hw_queue holds \
         queue_lock for microseconds, so waits this long (or more vCPUs than cores) mean the \
         holder's vCPU was descheduled by the host.\n\n"
    } else {
        " The waits are shorter than half a host slice: they are the kernel's own lock \
         traffic, not a preempted holder.\n\n"
    });
    out
}

/// The verdict's metrics as a small Markdown table.
pub fn verdict_table(v: &Verdict) -> String {
    let (h, r) = verdict_rows(v);
    super::tables::markdown_rows(&h, &r)
}

/// The verdict's metrics as header and rows.
pub fn verdict_rows(v: &Verdict) -> (Vec<String>, Vec<Vec<String>>) {
    let header = vec![
        "role".to_string(),
        "metric".to_string(),
        format!("{} (mean ± 95 % CI, CV)", v.base),
        format!("{} (mean ± 95 % CI, CV)", v.other),
        "difference (95 % CI)".to_string(),
        "p".to_string(),
    ];
    let cell = |f: &KernelFigure| {
        format!(
            "{} (n={}, CV {})",
            pm(f),
            f.n,
            f.cv.map_or("–".into(), |c| format!("{:.0} %", c * 100.0))
        )
    };
    let rows: Vec<Vec<String>> = v
        .rows
        .iter()
        .map(|r| {
            let d = r.paired_diff.or(r.diff);
            vec![
                r.role.clone(),
                format!("`{}` ({})", r.metric, r.unit),
                cell(&r.base),
                cell(&r.other),
                d.map_or("–".into(), |d| {
                    format!("{} ± {}", fmt_num(d.mean), fmt_num(d.ci95))
                }),
                p_of(r),
            ]
        })
        .collect();
    (header, rows)
}
