//! The kill test's judgement: the guest's record of what was acknowledged (the `killwrite`
//! step's `kw` artefacts, images/agent/init) against the image file after the run
//! (`guest-tests check kills RUN_DIR`).
//!
//! Rules:
//! 1. The records are read in the order they reached the results file. A write's `A` record
//!    is sent after its O_DIRECT write returned, a flush's `F n start` before its fsync and
//!    `F n done` after, each on the one port: an `A` before `F n start` was acknowledged
//!    before flush n was sent.
//! 2. Covered writes: with the guest's write cache on, every write acknowledged before the
//!    start of the last flush that completed (rc 0); with it off (`cache=write_through`),
//!    every acknowledged write. A record cut short (QEMU killed while it arrived) counts as
//!    not sent: the guest's claim is only what reached the host.
//! 3. For each block with a covered write, the newest covered write `L` of that block: the
//!    block must hold, byte for byte, the pattern of `L` or of a later write of the block's
//!    writer (acknowledged or not: a write in flight at a kill may have reached the image).
//!    An older write's pattern, or zeros (the block as it was before any write), is a **lost**
//!    write; anything else is a **corrupt** block.
//! 4. Blocks with no covered write are not judged (zeros or any write of theirs may be there).

use std::collections::BTreeMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;

use serde::Serialize;

use gt_launch::agent;

/// Bytes per block the writer writes.
pub const BLOCK: u64 = 4096;

/// The 4096 bytes the writer writes as write `seq` of writer `w` to block `blk`.
pub fn pattern(blk: u64, seq: u64, w: u64) -> Vec<u8> {
    let line = format!("{:<63}\n", format!("vbkill blk={blk} seq={seq} w={w}"));
    line.repeat((BLOCK as usize) / line.len()).into_bytes()
}

/// (blk, seq, w) of a block's first line, if it is the writer's.
fn header(data: &[u8]) -> Option<(u64, u64, u64)> {
    let line = data.get(..63)?;
    let text = std::str::from_utf8(line).ok()?;
    let mut it = text.split_whitespace();
    if it.next()? != "vbkill" {
        return None;
    }
    let mut field = |k: &str| -> Option<u64> { it.next()?.strip_prefix(k)?.parse().ok() };
    Some((field("blk=")?, field("seq=")?, field("w=")?))
}

/// What the check found (`KILL-RESULT {json}`).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct KillReport {
    /// The guest's cache mode as it saw it (`write_back`, `write_through`).
    pub cache: String,
    pub writers: u64,
    pub writes_acked: u64,
    pub writes_failed: u64,
    pub flushes_completed: u64,
    /// Acknowledged writes that rule 2 covers.
    pub covered_writes: u64,
    /// Blocks judged (rule 3).
    pub blocks_checked: u64,
    /// Blocks holding an older write than the newest covered one, or zeros.
    pub lost: u64,
    /// Blocks holding neither.
    pub corrupt: u64,
    /// Blocks holding a write newer than the newest covered one (allowed).
    pub newer: u64,
    /// The writer finished (`D`): the run was not ended by a kill of QEMU.
    pub finished: bool,
    /// The first few problems, as text.
    pub problems: Vec<String>,
}

impl KillReport {
    pub fn ok(&self) -> bool {
        self.lost == 0 && self.corrupt == 0 && self.writes_failed == 0 && self.covered_writes > 0
    }
}

/// The records' state: acknowledged writes in order and where the covered ones end.
#[derive(Default)]
struct Records {
    report: KillReport,
    /// (block, seq, writer), in acknowledgement order.
    acks: Vec<(u64, u64, u64)>,
    /// Flush n -> acknowledgements before its start.
    starts: BTreeMap<u64, usize>,
    covered: usize,
}

impl Records {
    fn take(&mut self, line: &str) -> Result<(), String> {
        let w: Vec<&str> = line.split_whitespace().collect();
        let num = |i: usize| -> Result<u64, String> {
            w.get(i)
                .and_then(|v| v.parse().ok())
                .ok_or_else(|| format!("bad kw record {line:?}"))
        };
        match w.first().copied() {
            Some("S") => {
                for kv in w.iter().skip(1) {
                    match kv.split_once('=') {
                        Some(("writers", v)) => self.report.writers = v.parse().unwrap_or(0),
                        Some(("cache", v)) => self.report.cache = v.to_string(),
                        _ => {}
                    }
                }
            }
            Some("A") => {
                self.acks.push((num(3)?, num(2)?, num(1)?));
                self.report.writes_acked += 1;
            }
            Some("E") => self.report.writes_failed += 1,
            Some("F") if w.get(2) == Some(&"start") => {
                self.starts.insert(num(1)?, self.acks.len());
            }
            Some("F") if w.get(2) == Some(&"done") => {
                if w.get(3) == Some(&"rc=0") {
                    self.report.flushes_completed += 1;
                    if let Some(&n) = self.starts.get(&num(1)?) {
                        self.covered = self.covered.max(n);
                    }
                }
            }
            Some("D") => self.report.finished = true,
            _ => return Err(format!("bad kw record {line:?}")),
        }
        Ok(())
    }
}

/// Rules 1-4 on a run's results stream and its image.
pub fn judge(stream: &[u8], image: &Path) -> Result<KillReport, String> {
    let mut r = Records::default();
    for a in agent::parse_stream(stream) {
        if a.name == "kw" && a.complete {
            r.take(&a.text())?;
        }
    }
    if r.report.cache.is_empty() {
        return Err("no kill-test writer in this run (no `kw` S record)".into());
    }
    if r.report.cache == "write_through" {
        r.covered = r.acks.len();
    }
    r.report.covered_writes = r.covered as u64;
    // Rule 3: the newest covered write of each block, and the writer's seqs per block.
    let mut newest: BTreeMap<u64, (u64, u64)> = BTreeMap::new();
    for &(blk, seq, w) in r.acks.iter().take(r.covered) {
        newest.insert(blk, (seq, w));
    }
    let img = File::open(image).map_err(|e| format!("{}: {e}", image.display()))?;
    let mut rep = r.report;
    let mut buf = vec![0u8; BLOCK as usize];
    for (&blk, &(seq, w)) in &newest {
        rep.blocks_checked += 1;
        img.read_exact_at(&mut buf, blk * BLOCK)
            .map_err(|e| format!("{}: block {blk}: {e}", image.display()))?;
        let problem = match header(&buf) {
            Some((b, s, ww)) if b == blk && ww == w && buf == pattern(blk, s, w) => {
                if s < seq {
                    rep.lost += 1;
                    Some(format!(
                        "block {blk}: write {s} of writer {w}, the covered write {seq} lost"
                    ))
                } else {
                    rep.newer += u64::from(s > seq);
                    None
                }
            }
            _ if buf.iter().all(|&b| b == 0) => {
                rep.lost += 1;
                Some(format!(
                    "block {blk}: zeros, the covered write {seq} of writer {w} lost"
                ))
            }
            _ => {
                rep.corrupt += 1;
                let first = String::from_utf8_lossy(buf.get(..63).unwrap_or_default());
                Some(format!(
                    "block {blk}: neither write {seq} of writer {w} nor a later one: {:?}",
                    first.trim_end()
                ))
            }
        };
        if let Some(p) = problem.filter(|_| rep.problems.len() < 5) {
            rep.problems.push(p);
        }
    }
    Ok(rep)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(text: &str) -> Vec<u8> {
        format!("\n@@VB-BEGIN kw {}\n{text}\n@@VB-END kw\n", text.len()).into_bytes()
    }

    fn stream(lines: &[&str]) -> Vec<u8> {
        lines.iter().flat_map(|l| frame(l)).collect()
    }

    fn image(blocks: &[(u64, Vec<u8>)]) -> tempfile::NamedTempFile {
        let f = tempfile::NamedTempFile::new().unwrap();
        f.as_file().set_len(16 * BLOCK).unwrap();
        for (b, d) in blocks {
            f.as_file().write_all_at(d, b * BLOCK).unwrap();
        }
        f
    }

    const RUN: &[&str] = &[
        "S writers=2 blocks=16 secs=1 cache=write_back",
        "A 0 1 4",
        "A 1 1 5",
        "F 1 start",
        "A 0 2 4",
        "F 1 done rc=0",
        "A 1 2 7",
        "F 2 start",
    ];

    #[test]
    fn the_pattern_is_a_block_and_reads_back() {
        let p = pattern(12, 345, 2);
        assert_eq!(p.len() as u64, BLOCK);
        assert_eq!(header(&p), Some((12, 345, 2)));
        assert_eq!(header(&[0u8; 4096]), None);
    }

    #[test]
    fn covered_writes_must_be_there_and_newer_ones_may_be() {
        // Flush 1 covers writes 1 of blocks 4 and 5; block 4 holds the newer write 2 (allowed),
        // block 7's write came after the last completed flush (not judged).
        let img = image(&[(4, pattern(4, 2, 0)), (5, pattern(5, 1, 1))]);
        let r = judge(&stream(RUN), img.path()).unwrap();
        assert_eq!(
            (r.writes_acked, r.covered_writes, r.blocks_checked),
            (4, 2, 2)
        );
        assert_eq!((r.lost, r.corrupt, r.newer), (0, 0, 1));
        assert!(r.ok() && !r.finished, "{r:?}");
        // Block 5 still zero: its covered write is missing.
        let img = image(&[(4, pattern(4, 2, 0))]);
        let r = judge(&stream(RUN), img.path()).unwrap();
        assert_eq!((r.lost, r.corrupt), (1, 0));
        assert!(!r.ok());
        // An older write of block 4 than the covered one: lost.
        let mut s = stream(&RUN[..1]);
        s.extend(stream(&[
            "A 0 1 4",
            "A 0 2 4",
            "F 1 start",
            "F 1 done rc=0",
        ]));
        let img = image(&[(4, pattern(4, 1, 0))]);
        let r = judge(&s, img.path()).unwrap();
        assert_eq!((r.lost, r.corrupt, r.blocks_checked), (1, 0, 1), "{r:?}");
        // A torn block: the right header, another write's bytes after it.
        let mut torn = pattern(4, 2, 0);
        torn[2048..].copy_from_slice(&pattern(4, 1, 0)[2048..]);
        let img = image(&[(4, torn), (5, pattern(5, 1, 1))]);
        let r = judge(&stream(RUN), img.path()).unwrap();
        assert_eq!(r.corrupt, 1, "{r:?}");
    }

    #[test]
    fn write_through_covers_every_acknowledged_write_and_a_cut_record_is_not_sent() {
        let mut lines = RUN.to_vec();
        lines[0] = "S writers=2 blocks=16 secs=1 cache=write_through";
        let mut s = stream(&lines);
        // A record cut short by the kill: not counted.
        s.extend_from_slice(b"\n@@VB-BEGIN kw 7\nA 1 3 ");
        let img = image(&[(4, pattern(4, 2, 0)), (5, pattern(5, 1, 1))]);
        let r = judge(&s, img.path()).unwrap();
        assert_eq!((r.covered_writes, r.blocks_checked), (4, 3), "{r:?}");
        assert_eq!(r.lost, 1, "block 7's acknowledged write is missing");
        let img = image(&[
            (4, pattern(4, 2, 0)),
            (5, pattern(5, 1, 1)),
            (7, pattern(7, 2, 1)),
        ]);
        assert!(judge(&s, img.path()).unwrap().ok());
        assert!(judge(&frame("x"), img.path()).is_err());
        assert!(judge(&stream(&["S cache=write_back", "Q"]), img.path()).is_err());
    }
}
