//! `vhost-blk-replay`: the checker of vhost-blk's write log (`--write-log`, docs/write-log.md).
//!
//! A host tool, not part of the backend: the backend only appends the log (its format is
//! defined once, in the library's `storage::writelog`, which this binary reads through); the
//! replay, the file-system check and the self-test run here, after the guest is gone.
//!
//! ```text
//! vhost-blk-replay check    --image START --log LOG [--every N]   e2fsck at every flush point
//! vhost-blk-replay selftest --image START --log LOG [--points N] [--past N|all]
//!                                                                   one write moved past its flush
//! vhost-blk-replay crash    --image START --log LOG [--states N] [--seed S] [--drop-flushes]
//!                                                                   e2fsck in power-cut states
//! vhost-blk-replay dump     --log LOG                              what the log holds
//! ```
//!
//! `check` prints one line per flush point that is not clean and a summary line
//! (`REPLAY-RESULT {json}` last), and exits 0 when every flush point is clean, 1 otherwise.
//! `selftest` exits 0 when a moved write made the check fail (as it must), 1 when none did.
//! `crash` (replay.rs rule 5) prints each state that is not clean and `CRASH-RESULT {json}`,
//! and exits 0 when every state is clean, 1 otherwise (`--drop-flushes`, a device whose flush
//! does nothing, must give 1).
//! Bad arguments, an unreadable log or image, or e2fsck missing: one line, exit 2.

// As the library: no unwrap/expect/panic/unreachable, indexing or slicing outside tests.
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

mod replay;

use std::path::{Path, PathBuf};

use clap::{Parser, Subcommand};
use replay::{Checker, Log};
use vhost_blk_storage::writelog::{Kind, LogEnd};

#[derive(Debug, Parser)]
#[command(
    name = "vhost-blk-replay",
    version,
    about = "Replay a vhost-blk write log and check the file system at each flush point"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// Replay the log onto a copy of the starting image; e2fsck at every flush point.
    Check {
        #[arg(long)]
        image: PathBuf,
        #[arg(long)]
        log: PathBuf,
        /// Check only every N-th flush point (and the last).
        #[arg(long, default_value_t = 1)]
        every: usize,
        #[arg(long, default_value = "e2fsck")]
        e2fsck: PathBuf,
    },
    /// Move one write past the flush after it until the check fails at that flush point.
    Selftest {
        #[arg(long)]
        image: PathBuf,
        #[arg(long)]
        log: PathBuf,
        /// Flush points to try, the latest first.
        #[arg(long, default_value_t = 50)]
        points: usize,
        /// Flushes each write is moved past: a number, or `all` (the write never lands).
        #[arg(long, default_value = "1", value_parser = parse_past)]
        past: usize,
        #[arg(long, default_value = "e2fsck")]
        e2fsck: PathBuf,
    },
    /// Build crash states (everything before the last flush, any of the later writes whole,
    /// torn or absent) at seeded points of the log; e2fsck in each.
    Crash {
        #[arg(long)]
        image: PathBuf,
        #[arg(long)]
        log: PathBuf,
        #[arg(long, default_value_t = 100)]
        states: usize,
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Ignore the FLUSH records (nothing durable): the self-check, which must find damage.
        #[arg(long)]
        drop_flushes: bool,
        #[arg(long, default_value = "e2fsck")]
        e2fsck: PathBuf,
    },
    /// Count the log's records by kind and say how it ends.
    Dump {
        #[arg(long)]
        log: PathBuf,
    },
}

/// `--past`: a count of flushes (at least 1) or `all`.
fn parse_past(s: &str) -> Result<usize, String> {
    match s {
        "all" => Ok(usize::MAX),
        _ => match s.parse::<usize>() {
            Ok(n) if n >= 1 => Ok(n),
            _ => Err("a number of flushes (at least 1) or `all`".into()),
        },
    }
}

fn end_text(end: LogEnd) -> String {
    match end {
        LogEnd::Clean => "clean".into(),
        LogEnd::Truncated(at) => format!("cut short at byte {at}"),
        LogEnd::Corrupt(at) => format!("damaged record at byte {at}"),
    }
}

fn dump(log: &Log) {
    let count = |k: Kind| log.entries.iter().filter(|e| e.rec.kind == k).count();
    let bytes: u64 = log.entries.iter().map(|e| e.rec.data_len()).sum();
    println!(
        "image {} bytes; {} records: {} writes ({} bytes), {} flushes, {} discards, {} write-zeroes; end: {}",
        log.header.image_size,
        log.entries.len(),
        count(Kind::Write),
        bytes,
        count(Kind::Flush),
        count(Kind::Discard),
        count(Kind::WriteZeroes),
        end_text(log.end)
    );
}

fn check(image: &Path, log: &Log, every: usize, e2fsck: PathBuf) -> Result<bool, String> {
    let c = Checker::new(e2fsck)?;
    let t = std::time::Instant::now();
    let results = replay::check_all(&c, image, log, every, |r| {
        if !r.fsck.clean {
            println!(
                "flush point {} (record {}): NOT CLEAN, e2fsck status {:?}: {}",
                r.point, r.seq, r.fsck.status, r.fsck.output
            );
        }
    })?;
    let dirty: Vec<usize> = results
        .iter()
        .filter(|r| !r.fsck.clean)
        .map(|r| r.point)
        .collect();
    let flushes = log.flushes().len();
    println!(
        "{} flush points in the log, {} checked, {} clean, {} not clean ({:.1} s)",
        flushes,
        results.len(),
        results.len() - dirty.len(),
        dirty.len(),
        t.elapsed().as_secs_f64()
    );
    let json = serde_json::json!({
        "records": log.entries.len(),
        "flush_points": flushes,
        "checked": results.len(),
        "clean": results.len() - dirty.len(),
        "not_clean": dirty,
        "log_end": end_text(log.end),
    });
    println!("REPLAY-RESULT {json}");
    Ok(dirty.is_empty() && !results.is_empty())
}

fn selftest(
    image: &Path,
    log: &Log,
    (points, past): (usize, usize),
    e2fsck: PathBuf,
) -> Result<bool, String> {
    let c = Checker::new(e2fsck)?;
    let (found, tried) = replay::selftest(&c, image, log, points, past)?;
    let past_text = if past == usize::MAX {
        "every later flush (lost)".to_string()
    } else {
        format!("{past} flush(es)")
    };
    let past_json = if past == usize::MAX {
        serde_json::json!("all")
    } else {
        serde_json::json!(past)
    };
    let json = match &found {
        Some(m) => {
            println!(
                "write record {} ({} bytes at {}) moved past {past_text} from flush record {}: \
                 the check at flush point {} FAILS, as it must (e2fsck status {:?}: {}); {} moves tried",
                m.write_seq,
                m.len,
                m.offset,
                m.flush_seq,
                m.point,
                m.fsck.status,
                m.fsck.output,
                m.tried
            );
            serde_json::json!({"detected": true, "write_seq": m.write_seq, "past": past_json,
                "flush_seq": m.flush_seq, "point": m.point, "tried": m.tried})
        }
        None => {
            println!(
                "no write moved past {past_text} made the check fail ({tried} moves over {} flush points): the checker cannot tell",
                points.min(log.flushes().len())
            );
            serde_json::json!({"detected": false, "tried": tried,
                "past": past_json})
        }
    };
    println!("SELFTEST-RESULT {json}");
    Ok(found.is_some())
}

fn crash(
    image: &Path,
    log: &Log,
    (states, seed, drop_flushes): (usize, u64, bool),
    e2fsck: PathBuf,
) -> Result<bool, String> {
    let c = Checker::new(e2fsck)?;
    let t = std::time::Instant::now();
    let results = replay::crash_states(&c, image, log, (states, seed, drop_flushes), |r| {
        if !r.fsck.clean {
            println!(
                "crash before record {} ({} later writes whole, {} torn): NOT CLEAN, e2fsck status {:?}: {}",
                r.before, r.whole, r.torn, r.fsck.status, r.fsck.output
            );
        }
    })?;
    let dirty = results.iter().filter(|r| !r.fsck.clean).count();
    let first = results.iter().position(|r| !r.fsck.clean);
    println!(
        "{} crash states, {} clean, {} not clean ({:.1} s)",
        results.len(),
        results.len() - dirty,
        dirty,
        t.elapsed().as_secs_f64()
    );
    let json = serde_json::json!({
        "records": log.entries.len(),
        "flushes": log.flushes().len(),
        "states": results.len(),
        "clean": results.len() - dirty,
        "not_clean": dirty,
        "first_not_clean": first,
        "seed": seed,
        "drop_flushes": drop_flushes,
        "later_writes_whole": results.iter().map(|r| r.whole).sum::<usize>(),
        "later_writes_torn": results.iter().map(|r| r.torn).sum::<usize>(),
    });
    println!("CRASH-RESULT {json}");
    Ok(dirty == 0 && !results.is_empty())
}

fn run(cli: Cli) -> Result<bool, String> {
    match cli.cmd {
        Cmd::Dump { log } => {
            dump(&Log::load(&log)?);
            Ok(true)
        }
        Cmd::Check {
            image,
            log,
            every,
            e2fsck,
        } => {
            let log = Log::load(&log)?;
            dump(&log);
            check(&image, &log, every, e2fsck)
        }
        Cmd::Crash {
            image,
            log,
            states,
            seed,
            drop_flushes,
            e2fsck,
        } => {
            let log = Log::load(&log)?;
            dump(&log);
            crash(&image, &log, (states, seed, drop_flushes), e2fsck)
        }
        Cmd::Selftest {
            image,
            log,
            points,
            past,
            e2fsck,
        } => {
            let log = Log::load(&log)?;
            dump(&log);
            selftest(&image, &log, (points, past), e2fsck)
        }
    }
}

fn main() {
    let cli: Cli = vhost_blk::config::parse_args_or_exit("vhost-blk-replay");
    match run(cli) {
        Ok(true) => {}
        Ok(false) => std::process::exit(1),
        Err(e) => {
            eprintln!("vhost-blk-replay: {}", e.replace('\n', " "));
            std::process::exit(2);
        }
    }
}
