//! Numbers in the text of Python's `format`, for tables that Python scripts printed first
//! (the ordering table and `lab table ...`; their committed copies must not change). The one
//! copy of these rules in the workspace.
//!
//! 1. [`general`] is `format(x, ".Pg")`: P significant digits (the double's exact decimal value,
//!    a tie to even, as Rust's `{:.N}` and `{:.Ne}` round), fixed notation when the rounded
//!    value's decimal exponent is in -4..P, else scientific with a signed exponent of at least
//!    two digits; trailing zeros (and a trailing point) removed; `inf`, `-inf`, `nan`.
//! 2. [`grouped`] is `format(x, ",.0f")`: no decimals, commas between groups of three digits.
//! 3. [`repr`] is `repr(x)` of a float: the shortest text that reads back as the same double,
//!    with `.0` on an integral value, scientific (`1e+16`, `1.5e-05`) when the decimal exponent
//!    is below -4 or at least 16.
//! 4. [`fixed`] is `format(x, ".Nf")` and [`signed`] `format(x, "+.Nf")`: the double's exact
//!    decimal value rounded to N places, a tie to even (Rust's `{:.N}` does the same); the sign
//!    of a negative zero is kept; infinities are `inf`, NaN is `nan` (`+nan` signed), as Python
//!    spells them.
//! 5. [`or_dash`] prints a missing figure as `-`.

fn special(x: f64) -> Option<String> {
    if x.is_nan() {
        Some("nan".into())
    } else if x.is_infinite() {
        Some(if x > 0.0 { "inf" } else { "-inf" }.into())
    } else {
        None
    }
}

fn strip_zeros(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

/// `m` and `exp` as Python writes a scientific number: `me+XX`.
fn sci(m: &str, exp: i32) -> String {
    let sign = if exp < 0 { '-' } else { '+' };
    format!("{m}e{sign}{:02}", exp.unsigned_abs())
}

/// Splits Rust's `{:e}` text into mantissa and exponent.
fn split_exp(s: &str) -> (&str, i32) {
    match s.split_once('e') {
        Some((m, e)) => (m, e.parse().unwrap_or(0)),
        None => (s, 0),
    }
}

/// `format(x, ".{digits}g")` (rule 1; `digits` 0 counts as 1, as in Python).
pub fn general(x: f64, digits: usize) -> String {
    if let Some(s) = special(x) {
        return s;
    }
    let p = digits.max(1);
    let e = format!("{x:.prec$e}", prec = p - 1);
    let (m, exp) = split_exp(&e);
    if (-4..p as i32).contains(&exp) {
        let places = (p as i32 - 1 - exp) as usize;
        strip_zeros(&format!("{x:.places$}")).to_string()
    } else {
        sci(strip_zeros(m), exp)
    }
}

/// `format(x, ",.0f")` (rule 2).
pub fn grouped(x: f64) -> String {
    grouped_fixed(x, 0)
}

/// `format(x, ",.{places}f")` (rule 2: the integer part grouped by thousands).
pub fn grouped_fixed(x: f64, places: usize) -> String {
    if let Some(s) = special(x) {
        return s;
    }
    let s = format!("{x:.places$}");
    let (sign, unsigned) = s.strip_prefix('-').map_or(("", s.as_str()), |d| ("-", d));
    let (digits, frac) = unsigned.split_at(unsigned.find('.').unwrap_or(unsigned.len()));
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    format!("{sign}{out}{frac}")
}

/// `repr(x)` of a float (rule 3).
pub fn repr(x: f64) -> String {
    if let Some(s) = special(x) {
        return s;
    }
    let e = format!("{x:e}");
    let (m, exp) = split_exp(&e);
    if (-4..16).contains(&exp) {
        let s = format!("{x}");
        if s.contains('.') {
            s
        } else {
            format!("{s}.0")
        }
    } else {
        sci(m, exp)
    }
}

/// `format(x, ".{places}f")`.
pub fn fixed(x: f64, places: usize) -> String {
    if x.is_nan() {
        "nan".into()
    } else {
        format!("{x:.places$}")
    }
}

/// `format(x, "+.{places}f")`.
pub fn signed(x: f64, places: usize) -> String {
    if x.is_nan() {
        "+nan".into()
    } else {
        format!("{x:+.places$}")
    }
}

/// `f(x)`, or `-` for a missing figure.
pub fn or_dash<T>(x: Option<T>, f: impl FnOnce(T) -> String) -> String {
    x.map_or_else(|| "-".into(), f)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn general_is_pythons_g() {
        // Each expected string is what Python 3 prints for format(x, ".Ng").
        for (x, p, want) in [
            (0.0, 3, "0"),
            (13.80297, 3, "13.8"),
            (5.23, 3, "5.23"),
            (472.4, 3, "472"),
            (999.7, 3, "1e+03"),
            (2.3e-06, 2, "2.3e-06"),
            (0.0034, 2, "0.0034"),
            (0.002, 2, "0.002"),
            (0.00012345, 3, "0.000123"),
            (0.000012345, 3, "1.23e-05"),
            (2.5, 1, "2"),
            (-17.25, 3, "-17.2"),
            (100.0, 3, "100"),
            (1234.5, 3, "1.23e+03"),
            (f64::NAN, 3, "nan"),
            (f64::NEG_INFINITY, 2, "-inf"),
        ] {
            assert_eq!(general(x, p), want, "{x} .{p}g");
        }
    }

    #[test]
    fn grouped_is_pythons_comma_format() {
        for (x, want) in [
            (0.0, "0"),
            (999.4, "999"),
            (1000.0, "1,000"),
            (2663.4, "2,663"),
            (4_021_344.0, "4,021,344"),
            (-1_234_567.5, "-1,234,568"),
            (2.5, "2"),
        ] {
            assert_eq!(grouped(x), want, "{x}");
        }
    }

    #[test]
    fn repr_is_pythons_float_repr() {
        for (x, want) in [
            (1.0, "1.0"),
            (12.5, "12.5"),
            (0.1, "0.1"),
            (0.0001, "0.0001"),
            (0.000015, "1.5e-05"),
            (1e16, "1e+16"),
            (123_456_789_012_345.6, "123456789012345.6"),
            (-0.0, "-0.0"),
        ] {
            assert_eq!(repr(x), want, "{x}");
        }
    }

    #[test]
    fn fixed_point_text_is_pythons() {
        // Each expected string is what Python 3.11 prints for the same call.
        assert_eq!(fixed(2.5, 0), "2");
        assert_eq!(fixed(3.5, 0), "4");
        assert_eq!(fixed(0.125, 2), "0.12");
        assert_eq!(fixed(0.375, 2), "0.38");
        assert_eq!(fixed(0.25, 1), "0.2");
        assert_eq!(fixed(1.005, 2), "1.00");
        assert_eq!(fixed(2.675, 2), "2.67");
        assert_eq!(fixed(12345.6789, 0), "12346");
        assert_eq!(signed(-0.04, 1), "-0.0");
        assert_eq!(signed(0.0, 2), "+0.00");
        assert_eq!(signed(-0.0, 2), "-0.00");
        assert_eq!(signed(1.234, 2), "+1.23");
        assert_eq!(signed(f64::INFINITY, 1), "+inf");
        assert_eq!(fixed(f64::NEG_INFINITY, 1), "-inf");
        assert_eq!(fixed(f64::NAN, 2), "nan");
        assert_eq!(signed(f64::NAN, 2), "+nan");
    }

    #[test]
    fn missing_figures_are_dashes() {
        assert_eq!(or_dash(None::<f64>, |x| fixed(x, 1)), "-");
        assert_eq!(or_dash(Some(1.25), |x| fixed(x, 1)), "1.2");
    }

    #[test]
    fn grouped_keeps_negative_zero_and_specials() {
        // Each expected string is what Python 3.11 prints for format(x, ",.0f").
        assert_eq!(grouped(0.0), "0");
        assert_eq!(grouped(999.5), "1,000");
        assert_eq!(grouped(2_531_169.4), "2,531,169");
        assert_eq!(grouped(123_456.5), "123,456");
        assert_eq!(grouped(-1_234_567.0), "-1,234,567");
        assert_eq!(grouped(-0.4), "-0");
        assert_eq!(grouped(f64::NAN), "nan");
        assert_eq!(grouped(f64::NEG_INFINITY), "-inf");
    }

    #[test]
    fn grouped_fixed_groups_the_integer_part_only() {
        // Each expected string is what Python 3.11 prints for format(x, ",.1f").
        assert_eq!(grouped_fixed(7685.4, 1), "7,685.4");
        assert_eq!(grouped_fixed(0.0, 1), "0.0");
        assert_eq!(grouped_fixed(1_234_567.891, 1), "1,234,567.9");
        assert_eq!(grouped_fixed(999.95, 1), "1,000.0");
        assert_eq!(grouped_fixed(-1234.56, 1), "-1,234.6");
        assert_eq!(grouped_fixed(f64::NAN, 1), "nan");
    }
}
