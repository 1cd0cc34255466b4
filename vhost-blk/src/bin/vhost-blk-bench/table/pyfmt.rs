//! Numbers as the tables print them: the text of Python's `format` and `statistics.median`,
//! which wrote the committed tables first.
//!
//! 1. [`fixed`] is `format(x, ".Nf")` and [`signed`] `format(x, "+.Nf")`: the double's exact
//!    decimal value rounded to N places, a tie to even (Rust's `{:.N}` does the same); the sign
//!    of a negative zero is kept; infinities are `inf`, NaN is `nan` (`+nan` signed), as Python
//!    spells them.
//! 2. [`grouped`] is `format(x, ",.0f")`: [`fixed`] to no places, a comma between groups of
//!    three digits of the integer part.
//! 3. [`or_dash`] prints a missing figure as `-`.
//! 4. [`median`] is `statistics.median` of the values present: the middle of the sorted values,
//!    the mean of the two middle ones for an even count; `None` for none.

/// `format(x, ".{places}f")`.
pub(crate) fn fixed(x: f64, places: usize) -> String {
    if x.is_nan() {
        "nan".into()
    } else {
        format!("{x:.places$}")
    }
}

/// `format(x, "+.{places}f")`.
pub(crate) fn signed(x: f64, places: usize) -> String {
    if x.is_nan() {
        "+nan".into()
    } else {
        format!("{x:+.places$}")
    }
}

/// `format(x, ",.0f")`.
pub(crate) fn grouped(x: f64) -> String {
    let text = fixed(x, 0);
    let (sign, digits) = match text.strip_prefix('-') {
        Some(rest) => ("-", rest),
        None => ("", text.as_str()),
    };
    if !digits.bytes().all(|b| b.is_ascii_digit()) {
        return text; // inf, nan
    }
    let mut out = String::from(sign);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// `f(x)`, or `-` for a missing figure.
pub(crate) fn or_dash<T>(x: Option<T>, f: impl FnOnce(T) -> String) -> String {
    x.map_or_else(|| "-".into(), f)
}

/// The median of the values present, as `statistics.median`.
pub(crate) fn median(xs: impl IntoIterator<Item = Option<f64>>) -> Option<f64> {
    let mut v: Vec<f64> = xs.into_iter().flatten().collect();
    v.sort_by(f64::total_cmp);
    let mid = v.len() / 2;
    if v.len() % 2 == 1 {
        v.get(mid).copied()
    } else {
        let (a, b) = (v.get(mid.checked_sub(1)?)?, v.get(mid)?);
        Some((a + b) / 2.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn grouped_text_is_pythons_comma_format() {
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
    fn missing_figures_are_dashes() {
        assert_eq!(or_dash(None::<f64>, |x| fixed(x, 1)), "-");
        assert_eq!(or_dash(Some(1.25), |x| fixed(x, 1)), "1.2");
    }

    #[test]
    fn median_is_statistics_median() {
        assert_eq!(median([Some(3.0), Some(1.0), Some(2.0)]), Some(2.0));
        assert_eq!(
            median([Some(3.0), None, Some(1.0), Some(2.0), Some(10.0)]),
            Some(2.5)
        );
        // (0.1 + 0.2) / 2 in doubles, as Python computes it.
        assert_eq!(
            median([Some(0.2), Some(0.1)]),
            Some(0.150_000_000_000_000_02)
        );
        assert_eq!(median([None, None]), None);
        assert_eq!(median([]), None);
    }
}
