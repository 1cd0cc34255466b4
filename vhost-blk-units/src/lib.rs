//! Sizes and durations as people type them: one parser for each, one rule for zero, one set of
//! error texts, used by the command line, the settings file, the compact topology form and the
//! bench.
//!
//! - Sizes ([`parse_size()`]): bytes or a binary suffix, case-insensitive: `4096`, `4k`, `64M`,
//!   `1G`, `2T` (parse-size with binary units, so `1KB` = `1KiB` = 1024).
//! - Durations ([`parse_duration_ns`]): a non-negative decimal number and one of the units `ns`,
//!   `us` (or `µs`), `ms`, `s`: `250ns`, `50us`, `1.5ms`, `2s`; a bare number needs a unit except
//!   `0`. At most [`MAX_DURATION_NS`] (60 s). humantime does the arithmetic; the unit set is
//!   restricted so that `5m` is refused instead of meaning five minutes.
//!
//! Whether zero is acceptable is the caller's decision ([`Zero`]), never a different parser.
//! Depends on nothing else in the crate.

// No panic on guest input, as in vhost-blk: `unwrap`, `expect`, `panic!`, `unreachable!`,
// indexing and slicing are errors outside tests (an exception is allowed in place, with its
// reason).
#![cfg_attr(
    not(test),
    deny(
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::panic,
        clippy::unreachable,
        clippy::indexing_slicing
    )
)]
#![cfg_attr(test, allow(clippy::too_many_lines))]

use thiserror::Error;

/// Largest duration accepted anywhere (60 s): beyond that a guest times out anyway.
pub const MAX_DURATION_NS: u64 = 60_000_000_000;

/// Whether a value of zero is acceptable at this call site.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Zero {
    Allowed,
    Rejected,
}

/// A size or duration that does not parse. Each renders as one line.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum UnitError {
    #[error("invalid size {0:?}: use bytes or a K/M/G/T suffix, e.g. 512M")]
    BadSize(String),
    #[error("empty duration")]
    EmptyDuration,
    #[error("duration {0:?} needs a unit (ns, us, ms, s)")]
    MissingUnit(String),
    #[error("duration {0:?}: unknown unit (use ns, us, ms or s)")]
    UnknownUnit(String),
    #[error("duration {0:?} is not a non-negative number")]
    BadNumber(String),
    #[error("duration {0:?} exceeds the 60 s limit")]
    TooLarge(String),
    #[error("{what} {text:?} must be greater than 0")]
    Zero { what: &'static str, text: String },
}

fn check_zero(v: u64, zero: Zero, what: &'static str, s: &str) -> Result<u64, UnitError> {
    if v == 0 && zero == Zero::Rejected {
        return Err(UnitError::Zero {
            what,
            text: s.trim().to_string(),
        });
    }
    Ok(v)
}

/// Parses a size in bytes: `4096`, `512K`, `64m`, `1G`, `2T` (binary units).
pub fn parse_size(s: &str, zero: Zero) -> Result<u64, UnitError> {
    let t = s.trim();
    // parse-size ignores blanks and underscores inside numbers; a size is one word here.
    if t.is_empty() || t.contains(|c: char| c.is_whitespace() || c == '_') {
        return Err(UnitError::BadSize(s.to_string()));
    }
    let v = parse_size::Config::new()
        .with_binary()
        .parse_size(t)
        .map_err(|_| UnitError::BadSize(s.to_string()))?;
    check_zero(v, zero, "size", s)
}

/// Parses a duration such as `0`, `250ns`, `50us`, `1.5ms` or `2s` into nanoseconds.
pub fn parse_duration_ns(s: &str, zero: Zero) -> Result<u64, UnitError> {
    let t = s.trim();
    if t.is_empty() {
        return Err(UnitError::EmptyDuration);
    }
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let value: f64 = num
        .parse()
        .map_err(|_| UnitError::BadNumber(t.to_string()))?;
    let unit = match unit.trim() {
        "" if value == 0.0 => return check_zero(0, zero, "duration", s),
        "" => return Err(UnitError::MissingUnit(t.to_string())),
        u @ ("ns" | "us" | "µs" | "ms" | "s") => u,
        _ => return Err(UnitError::UnknownUnit(t.to_string())),
    };
    let d = humantime::parse_duration(&format!("{num}{unit}"))
        .map_err(|_| UnitError::BadNumber(t.to_string()))?;
    let ns = u64::try_from(d.as_nanos())
        .ok()
        .filter(|&n| n <= MAX_DURATION_NS)
        .ok_or_else(|| UnitError::TooLarge(t.to_string()))?;
    check_zero(ns, zero, "duration", s)
}

/// Formats nanoseconds with the largest unit that keeps the value exact (parses back the same).
pub fn format_ns(ns: u64) -> String {
    match ns {
        0 => "0".to_string(),
        n if n % 1_000_000_000 == 0 => format!("{}s", n / 1_000_000_000),
        n if n % 1_000_000 == 0 => format!("{}ms", n / 1_000_000),
        n if n % 1_000 == 0 => format!("{}us", n / 1_000),
        n => format!("{n}ns"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse() {
        let size = |s| parse_size(s, Zero::Rejected);
        assert_eq!(size("4096").unwrap(), 4096);
        assert_eq!(size("1G").unwrap(), 1 << 30);
        assert_eq!(size("64m").unwrap(), 64 << 20);
        assert_eq!(size("4k").unwrap(), 4096);
        assert_eq!(size("2T").unwrap(), 2 << 40);
        for bad in ["", "G", "1X", "-1", "0", "99999999999T", "12Q", "1 G"] {
            assert!(size(bad).is_err(), "{bad}");
        }
        assert_eq!(parse_size("0", Zero::Allowed), Ok(0));
    }

    #[test]
    fn durations_parse_with_units() {
        let ns = |s| parse_duration_ns(s, Zero::Allowed);
        assert_eq!(ns("0"), Ok(0));
        assert_eq!(ns("250ns"), Ok(250));
        assert_eq!(ns("50us"), Ok(50_000));
        assert_eq!(ns("50µs"), Ok(50_000));
        assert_eq!(ns("1.5ms"), Ok(1_500_000));
        assert_eq!(ns("2s"), Ok(2_000_000_000));
        assert_eq!(ns("60s"), Ok(MAX_DURATION_NS));
        assert_eq!(ns("50"), Err(UnitError::MissingUnit("50".into())));
        assert!(matches!(ns("5m"), Err(UnitError::UnknownUnit(_))));
        assert!(matches!(ns("1h"), Err(UnitError::UnknownUnit(_))));
        assert!(matches!(ns("-5us"), Err(UnitError::BadNumber(_))));
        assert!(matches!(ns("xms"), Err(UnitError::BadNumber(_))));
        assert!(matches!(ns("61s"), Err(UnitError::TooLarge(_))));
        assert_eq!(ns(""), Err(UnitError::EmptyDuration));
    }

    #[test]
    fn zero_is_the_callers_choice_with_one_message() {
        let size = parse_size("0", Zero::Rejected).unwrap_err().to_string();
        let dur = parse_duration_ns("0us", Zero::Rejected)
            .unwrap_err()
            .to_string();
        assert_eq!(size, "size \"0\" must be greater than 0");
        assert_eq!(dur, "duration \"0us\" must be greater than 0");
        assert!(parse_duration_ns("0", Zero::Rejected).is_err());
        assert_eq!(parse_duration_ns("0ms", Zero::Allowed), Ok(0));
    }

    #[test]
    fn formatted_durations_parse_back() {
        for ns in [0, 1, 999, 1_000, 50_000, 1_500_000, 2_000_000_000] {
            assert_eq!(parse_duration_ns(&format_ns(ns), Zero::Allowed), Ok(ns));
        }
    }
}
