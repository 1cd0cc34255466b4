//! Host facts the launcher needs (paths are in [`gt_suite::paths`], provenance helpers in
//! `results`).

use procfs::Current;

/// `uname -r` of the host.
pub fn host_release() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into())
}

/// The host's 1, 5 and 15 minute load averages from `/proc/loadavg`.
pub fn loadavg() -> Option<[f64; 3]> {
    procfs::LoadAverage::current().ok().map(|l| loadavg_f64(&l))
}

/// procfs keeps the load averages as f32; the kernel prints them with two decimals, which an
/// f32 holds exactly enough that its shortest decimal form is the printed one (up to 6
/// significant digits), so going through that form gives the f64 the printed text parses to,
/// not the f32's binary value widened (1.07, not 1.0700000524520874).
fn loadavg_f64(l: &procfs::LoadAverage) -> [f64; 3] {
    [l.one, l.five, l.fifteen].map(|x| x.to_string().parse().unwrap_or(f64::from(x)))
}

/// Seconds since the Unix epoch.
pub fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_facts_are_read() {
        assert!(!host_release().is_empty());
        assert!(unix_now() > 1.0e9);
        assert!(loadavg().is_some_and(|l| l.iter().all(|x| *x >= 0.0)));
    }

    #[test]
    fn load_averages_keep_their_printed_value() {
        use procfs::FromRead;
        let parse = |s: &str| procfs::LoadAverage::from_read(s.as_bytes()).map(|l| loadavg_f64(&l));
        assert_eq!(
            parse("1.50 0.75 0.25 2/300 1234\n").unwrap(),
            [1.5, 0.75, 0.25]
        );
        assert_eq!(
            parse("1.07 0.33 1234.56 1/90 7\n").unwrap(),
            [1.07, 0.33, 1234.56]
        );
        assert!(parse("1.0 x").is_err());
        // Every two-decimal value below 10,000 comes back as the f64 its text parses to.
        for i in 0..1_000_000u32 {
            let text = format!("{}.{:02}", i / 100, i % 100);
            let l = procfs::LoadAverage {
                one: text.parse().unwrap(),
                five: 0.0,
                fifteen: 0.0,
                cur: 0,
                max: 0,
                latest_pid: 0,
            };
            assert_eq!(loadavg_f64(&l)[0], text.parse::<f64>().unwrap(), "{text}");
        }
    }
}
