//! `vhost-blk-replay` on a committed write log (docs/write-log.md): an ext4 made on the host
//! (`tests/data/writelog-ext4.start.img.gz`) and the log of a guest using it
//! (`tests/data/writelog-ext4.log.gz`, suite writelog-ext4, recorded by `--write-log`).
//! - `check`: e2fsck is clean at every flush point of the log;
//! - `selftest --past all`: one write moved past every later flush (lost) makes the check fail,
//!   as it must. (Moved past only the next flush, none of this log's 433 writes does: ext4's
//!   journal replay repairs any single write one flush late; docs/write-log.md.)
//! - `crash`: e2fsck is clean in 40 power-cut states, and finds damage when the flushes are
//!   ignored;
//! - `check` fails on a log whose first flush point has a garbage superblock (the checker can
//!   say no), and a log cut short is replayed up to its last whole record.
//!
//! Needs gzip and e2fsck (e2fsprogs, ci/install-deps.sh); without them the test fails.

use std::path::{Path, PathBuf};
use std::process::Command;

use vhost_blk_storage::writelog::{crc32c, Kind, LogHeader, Record};

const BIN: &str = env!("CARGO_BIN_EXE_vhost-blk-replay");

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
}

fn gunzip(from: &Path, to: &Path) {
    let out = Command::new("gzip")
        .arg("-dc")
        .arg(from)
        .output()
        .expect("gzip");
    assert!(out.status.success(), "gzip -dc {}", from.display());
    std::fs::write(to, out.stdout).unwrap();
}

fn replay(args: &[&str]) -> (Option<i32>, String) {
    let out = Command::new(BIN).args(args).output().unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.code(), text)
}

/// The committed starting image and log, unpacked into `dir`.
fn committed(dir: &Path) -> (String, String) {
    let (img, log) = (dir.join("start.img"), dir.join("write.log"));
    gunzip(&data("writelog-ext4.start.img.gz"), &img);
    gunzip(&data("writelog-ext4.log.gz"), &log);
    (img.display().to_string(), log.display().to_string())
}

fn result(text: &str, prefix: &str) -> serde_json::Value {
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix(prefix))
        .unwrap_or_else(|| panic!("no {prefix} line in:\n{text}"));
    serde_json::from_str(line).unwrap()
}

#[test]
fn the_committed_log_is_clean_at_every_flush_point() {
    let dir = tempfile::tempdir().unwrap();
    let (img, log) = committed(dir.path());
    let (code, text) = replay(&["check", "--image", &img, "--log", &log]);
    eprintln!("{text}");
    assert_eq!(code, Some(0), "{text}");
    let r = result(&text, "REPLAY-RESULT ");
    assert!(r["flush_points"].as_u64().unwrap() >= 20, "{r}");
    assert_eq!(r["checked"], r["flush_points"]);
    assert_eq!(r["not_clean"], serde_json::json!([]));
}

#[test]
fn a_lost_write_fails_the_check() {
    let dir = tempfile::tempdir().unwrap();
    let (img, log) = committed(dir.path());
    let (code, text) = replay(&["selftest", "--image", &img, "--log", &log, "--past", "all"]);
    eprintln!("{text}");
    assert_eq!(code, Some(0), "{text}");
    assert_eq!(result(&text, "SELFTEST-RESULT ")["detected"], true);
}

#[test]
fn crash_states_of_the_committed_log_are_clean_and_without_flushes_they_are_not() {
    // Power-cut states (replay.rs rule 5): everything before the last flush, any later write
    // whole, torn at 512 bytes or absent. ext4 must come back clean in each.
    let dir = tempfile::tempdir().unwrap();
    let (img, log) = committed(dir.path());
    let (code, text) = replay(&["crash", "--image", &img, "--log", &log, "--states", "40"]);
    assert_eq!(code, Some(0), "{text}");
    let r = result(&text, "CRASH-RESULT ");
    assert_eq!(
        (r["states"].as_u64(), r["not_clean"].as_u64()),
        (Some(40), Some(0)),
        "{r}"
    );
    // A device whose flush does nothing: the same check finds damage within 10 states.
    let args = [
        "crash",
        "--image",
        &img,
        "--log",
        &log,
        "--states",
        "10",
        "--drop-flushes",
    ];
    let (code, text) = replay(&args);
    assert_eq!(code, Some(1), "{text}");
    let r = result(&text, "CRASH-RESULT ");
    assert!(r["not_clean"].as_u64().unwrap() > 0, "{r}");
}

#[test]
fn a_broken_flush_point_fails_and_a_cut_log_replays_its_whole_records() {
    let dir = tempfile::tempdir().unwrap();
    let (img, _) = committed(dir.path());
    let size = std::fs::metadata(&img).unwrap().len();
    // Garbage over the superblock (bytes 1024..2048), then a flush, then half a record.
    let mut v = LogHeader { image_size: size }.encode().to_vec();
    let junk = vec![0xa5u8; 1024];
    let recs = [(Kind::Write, 1024, &junk[..]), (Kind::Flush, 0, &[][..])];
    for (seq, (kind, offset, d)) in recs.into_iter().enumerate() {
        let r = Record {
            kind,
            seq: seq as u64,
            offset,
            len: d.len() as u64,
            data_crc: if d.is_empty() { 0 } else { crc32c(0, d) },
        };
        v.extend_from_slice(&r.encode());
        v.extend_from_slice(d);
    }
    v.extend_from_slice(&[0x52, 0x57, 0x42, 0x56, 1]);
    let bad = dir.path().join("bad.log");
    std::fs::write(&bad, v).unwrap();
    let (code, text) = replay(&["check", "--image", &img, "--log", bad.to_str().unwrap()]);
    assert_eq!(code, Some(1), "{text}");
    assert!(text.contains("cut short"), "{text}");
    let r = result(&text, "REPLAY-RESULT ");
    assert_eq!(r["not_clean"], serde_json::json!([1]), "{r}");
    // Bad arguments: one line, exit 2.
    let (code, text) = replay(&["check", "--image", &img, "--log", "/nonexistent.log"]);
    assert_eq!(code, Some(2));
    assert_eq!(text.trim().lines().count(), 1, "{text}");
}
