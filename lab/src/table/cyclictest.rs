//! cyclictest's histogram output (`-h US`: 1 us buckets) and the figures the tables take from it.
//!
//! 1. A line `BUCKET COUNT` (digits, white space, digits) is a bucket; a bucket the file does not
//!    hold counts 0 (experiments/bench-latency.sh keeps only the non-empty ones).
//! 2. `# Histogram Overflows:` gives the samples beyond the last bucket (summed over threads);
//!    `# Max Latencies:` cyclictest's max (the largest over threads). Other lines are ignored.
//! 3. n is the buckets' counts plus the overflows. A quantile q is the first bucket, in ascending
//!    order, whose cumulative count reaches q x n; when that is in the overflow, the max.
//! 4. No file, or no samples: no figures. A header line whose numbers do not parse is an error.
//! 5. `table cyclictest FILE` prints one histogram's figures (`p50 P us, p99 P us, max M us,
//!    n N`); a missing file or one without samples is an error there.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::{read_opt, TableError};

/// One histogram's figures, in microseconds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Figures {
    /// Samples: in the buckets and in the overflow.
    pub n: u64,
    pub p50: Option<u64>,
    pub p99: Option<u64>,
    /// cyclictest's max (`None` if the file does not say).
    pub max: Option<u64>,
    pub overflow: u64,
}

/// The numbers after the first `:` of a header line.
fn numbers(line: &str) -> Result<Vec<u64>, String> {
    let field = line.split(':').nth(1).unwrap_or_default();
    field
        .split_whitespace()
        .map(|x| x.parse().map_err(|_| format!("`{x}` is not a count")))
        .collect()
}

/// A bucket line: `(bucket, count)`.
fn bucket(line: &str) -> Option<(u64, u64)> {
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let (us, count) = line.trim_end().split_once(char::is_whitespace)?;
    let count = count.trim_start();
    (digits(us) && digits(count)).then_some((us.parse().ok()?, count.parse().ok()?))
}

/// The figures of a histogram's text (rules 1-4).
pub(crate) fn parse(text: &str) -> Result<Option<Figures>, String> {
    let mut counts = BTreeMap::new();
    let (mut overflow, mut max) = (0u64, None);
    for line in text.lines() {
        if let Some((us, count)) = bucket(line) {
            counts.insert(us, count);
        } else if line.starts_with("# Histogram Overflows:") {
            overflow = numbers(line)?.iter().sum();
        } else if line.starts_with("# Max Latencies:") {
            max = numbers(line)?.into_iter().max();
        }
    }
    let n = counts.values().sum::<u64>() + overflow;
    if n == 0 {
        return Ok(None);
    }
    let quantile = |q: f64| {
        let want = q * n as f64;
        let mut acc = 0u64;
        for (&us, &count) in &counts {
            acc += count;
            if acc as f64 >= want {
                return Some(us);
            }
        }
        max // in the overflow
    };
    Ok(Some(Figures {
        n,
        p50: quantile(0.5),
        p99: quantile(0.99),
        max,
        overflow,
    }))
}

/// The figures of the histogram file `path`; `None` without the file or samples.
pub(crate) fn read(path: &Path) -> Result<Option<Figures>, TableError> {
    match read_opt(path)? {
        None => Ok(None),
        Some(text) => parse(&text).map_err(|e| TableError::Content(path.into(), e)),
    }
}

#[derive(Debug, clap::Args)]
pub(crate) struct CyclictestArgs {
    /// cyclictest's output with its histogram (`-h US`).
    #[arg(value_name = "FILE")]
    file: PathBuf,
}

/// A count, or `-`.
pub(crate) fn int(x: Option<u64>) -> String {
    x.map_or_else(|| "-".into(), |x| x.to_string())
}

/// `table cyclictest`: the line of one histogram's figures (rule 5).
pub(crate) fn table(a: &CyclictestArgs) -> Result<String, TableError> {
    let f = read(&a.file)?
        .ok_or_else(|| TableError::Content(a.file.clone(), "no such file, or no samples".into()))?;
    Ok(format!(
        "p50 {} us, p99 {} us, max {} us, n {}\n",
        int(f.p50),
        int(f.p99),
        int(f.max),
        f.n
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEAD: &str = "# /dev/cpu_dma_latency set to 0us\n# Histogram\n";

    #[test]
    fn quantiles_from_sparse_buckets() {
        // 100 samples: 50 at 8 us, 49 at 12 us, 1 at 40 us; the zero buckets are absent.
        let text = format!(
            "{HEAD}000008 000050\n000012 000049\n000040 000001\n# Total: 000000100\n\
             # Max Latencies: 00040\n# Histogram Overflows: 00000\n\
             # Histogram Overflow at cycle number:\n# Thread 0:\n"
        );
        let f = parse(&text).unwrap().unwrap();
        assert_eq!(
            f,
            Figures {
                n: 100,
                p50: Some(8),
                p99: Some(12),
                max: Some(40),
                overflow: 0
            }
        );
    }

    #[test]
    fn a_quantile_in_the_overflow_is_the_max() {
        // 10 samples in buckets, 5 beyond them: p50 (7.5) reaches bucket 3; p99 is the max.
        let text = format!(
            "{HEAD}000001 000005\n000003 000005\n# Max Latencies: 25000 31000\n\
             # Histogram Overflows: 00002 00003\n"
        );
        let f = parse(&text).unwrap().unwrap();
        assert_eq!((f.n, f.overflow), (15, 5));
        assert_eq!((f.p50, f.p99, f.max), (Some(3), Some(31000), Some(31000)));
    }

    #[test]
    fn empty_missing_and_malformed() {
        assert_eq!(parse(HEAD), Ok(None));
        assert_eq!(parse("000005 000000\n# Histogram Overflows: 0\n"), Ok(None));
        assert!(parse("# Max Latencies: 12x\n").is_err());
        // Not bucket lines: a leading space, three fields, a letter.
        let f = parse(" 000001 000009\n000002 000001 7\n00000a 000009\n000004 000002\n").unwrap();
        assert_eq!(f.map(|f| (f.n, f.p50, f.max)), Some((2, Some(4), None)));
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("cyclictest.txt");
        assert_eq!(read(&file).unwrap(), None);
        let a = CyclictestArgs { file: file.clone() };
        assert!(table(&a)
            .unwrap_err()
            .to_string()
            .contains("cyclictest.txt"));
        std::fs::write(
            &file,
            "000003 000002\n000007 000002\n# Max Latencies: 00009\n",
        )
        .unwrap();
        assert_eq!(table(&a).unwrap(), "p50 3 us, p99 7 us, max 9 us, n 4\n");
    }
}
