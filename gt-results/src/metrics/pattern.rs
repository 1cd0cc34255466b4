//! Metric-name patterns: `{step}.irq_d_per_kio`, `{step}{.dir}.clat_p99_us`,
//! `{step}.func.{func}_per_kio`, `scan.{initcall}_us`. One pattern both builds a metric's name
//! ([`fill`]) and recognises it ([`matches()`]), so the two cannot drift apart.
//!
//! Placeholders:
//! - `{step}`: a step name (`[A-Za-z0-9_-]+`, what `results` makes of a step label);
//! - `{dir}`: `read` or `write`; `{.dir}`: nothing, `.read` or `.write` (a single-direction
//!   job has no direction in its names);
//! - `{k}`: a non-negative integer (a threshold such as ">= k blocked");
//! - any other `{name}`: a non-empty string (function, initcall, lock site, ...).

/// Declares an enum of step-metric figures from `Variant = "suffix"` lines, so that each
/// suffix and its registry pattern `{step}.<suffix>` come from one literal: `suffix()`,
/// `pattern()`, `ALL`, `on(step)` (the name on a step) and `is(metric)` (a name ending in
/// `.<suffix>`). Other rooms name the variant, never the text.
#[macro_export]
macro_rules! step_figures {
    ($(#[$doc:meta])* $name:ident: $($fig:ident = $suffix:literal,)*) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum $name {
            $($fig,)*
        }

        impl $name {
            /// Every figure, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$fig,)*];

            /// The metric-name suffix after `{step}.`; a family's keeps its placeholder.
            pub const fn suffix(self) -> &'static str {
                match self {
                    $($name::$fig => $suffix,)*
                }
            }

            /// The registry's name pattern, `{step}.<suffix>`.
            pub const fn pattern(self) -> &'static str {
                match self {
                    $($name::$fig => concat!("{step}.", $suffix),)*
                }
            }

            /// The metric on `step`: `<step>.<suffix>`.
            pub fn on(self, step: &str) -> String {
                format!("{step}.{}", self.suffix())
            }

            /// True when `metric` is this figure on some step (its name ends in `.<suffix>`).
            pub fn is(self, metric: &str) -> bool {
                $crate::metrics::pattern::ends_in(metric, self.suffix())
            }
        }
    };
}

/// True when `metric` ends in `.<suffix>`.
pub fn ends_in(metric: &str, suffix: &str) -> bool {
    metric
        .strip_suffix(suffix)
        .is_some_and(|head| head.ends_with('.'))
}

/// Values of the placeholders a name matched with, in pattern order.
pub type Captures = Vec<(String, String)>;

#[derive(Debug, Clone, PartialEq)]
enum Seg<'p> {
    Lit(&'p str),
    Var(&'p str),
}

fn segments(pattern: &str) -> Vec<Seg<'_>> {
    let mut out = Vec::new();
    let mut rest = pattern;
    while let Some(i) = rest.find('{') {
        if i > 0 {
            out.push(Seg::Lit(&rest[..i]));
        }
        let end = rest[i..].find('}').map_or(rest.len(), |e| i + e);
        out.push(Seg::Var(&rest[i + 1..end]));
        rest = rest.get(end + 1..).unwrap_or("");
    }
    if !rest.is_empty() {
        out.push(Seg::Lit(rest));
    }
    out
}

fn var_ok(var: &str, value: &str) -> bool {
    match var {
        "step" => {
            !value.is_empty()
                && value
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        }
        "dir" => value == "read" || value == "write",
        ".dir" => matches!(value, "" | ".read" | ".write"),
        "k" => !value.is_empty() && value.chars().all(|c| c.is_ascii_digit()),
        _ => !value.is_empty(),
    }
}

fn go(segs: &[Seg], name: &str, caps: &mut Captures) -> bool {
    match segs.split_first() {
        None => name.is_empty(),
        Some((Seg::Lit(l), rest)) => name.strip_prefix(l).is_some_and(|n| go(rest, n, caps)),
        Some((Seg::Var(v), rest)) => {
            // Shortest value first: `{step}.func.{func}_per_kio` binds `{step}` to the first
            // dot-free run; `{func}` may contain dots.
            for end in 0..=name.len() {
                if !name.is_char_boundary(end) || !var_ok(v, &name[..end]) {
                    continue;
                }
                caps.push((v.to_string(), name[..end].to_string()));
                if go(rest, &name[end..], caps) {
                    return true;
                }
                caps.pop();
            }
            false
        }
    }
}

/// The placeholder values if `name` is an instance of `pattern`.
pub fn matches(pattern: &str, name: &str) -> Option<Captures> {
    let mut caps = Vec::new();
    go(&segments(pattern), name, &mut caps).then_some(caps)
}

/// `pattern` with its placeholders replaced; `{.dir}` takes the direction without the dot
/// (`read`) or an empty value. Unknown placeholders are left as they are.
pub fn fill(pattern: &str, vars: &[(&str, &str)]) -> String {
    let mut out = String::new();
    for s in segments(pattern) {
        match s {
            Seg::Lit(l) => out.push_str(l),
            Seg::Var(".dir") => match vars.iter().find(|(k, _)| *k == "dir") {
                Some((_, v)) if !v.is_empty() => {
                    out.push('.');
                    out.push_str(v);
                }
                _ => {}
            },
            Seg::Var(v) => match vars.iter().find(|(k, _)| *k == v) {
                Some((_, x)) => out.push_str(x),
                None => {
                    out.push('{');
                    out.push_str(v);
                    out.push('}');
                }
            },
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fill_and_match_are_inverse() {
        let p = "{step}{.dir}.clat_p99_us";
        assert_eq!(fill(p, &[("step", "rr"), ("dir", "")]), "rr.clat_p99_us");
        assert_eq!(
            fill(p, &[("step", "rr"), ("dir", "read")]),
            "rr.read.clat_p99_us"
        );
        assert!(matches(p, "rr.clat_p99_us").is_some());
        assert!(matches(p, "rr.read.clat_p99_us").is_some());
        assert!(matches(p, "rr.sideways.clat_p99_us").is_none());
        let f = "{step}.func.{func}_per_kio";
        let c = matches(f, "rand-read.func.blk_mq.isra.0_per_kio").unwrap();
        assert_eq!(c[0], ("step".into(), "rand-read".into()));
        assert_eq!(c[1], ("func".into(), "blk_mq.isra.0".into()));
        assert!(matches("{step}.iops", "a.read.iops").is_none());
        assert!(matches("{step}.{dir}.iops", "a.read.iops").is_some());
        assert!(matches("scan.{initcall}_us", "scan._us").is_none());
        assert!(matches("{step}.irq_blocked_ge{k}_share", "s.irq_blocked_ge4_share").is_some());
        assert!(matches("rescan.n", "rescan.n").is_some());
        assert!(matches("rescan.n", "rescan.nn").is_none());
    }
}
