//! Replaying a write log (vhost-blk's `storage::writelog`) onto the starting image, and the
//! file-system check at each flush point.
//!
//! Rules:
//! 1. Flush point k is the image with every record before the k-th FLUSH applied: what a crash
//!    right after that flush completed may leave at most and must leave at least (the log is
//!    in completion order, so every write the guest saw completed before it sent the flush
//!    is before it).
//! 2. Records: WRITE writes its data, WRITE_ZEROES and DISCARD write zeros (the backend's own
//!    discard reads back zeros; a guest may not rely on either).
//! 3. The check at a flush point: a copy of the image there, its journal replayed as a mount
//!    would (`e2fsck -E journal_only -y`), then `e2fsck -fn`: clean is exit status 0.
//! 4. The self-test: one write moved past the flush that follows it (the order a device that
//!    ignored the flush could leave), or past `past` flushes (`--past all`: past every later
//!    one: the write lost), for each write before a flush point, flush points latest first,
//!    until the check fails at the last flush point the write is missing from; the checker
//!    passes its self-test only if one does.
//! 5. Crash states (`crash`): a power cut just before record r leaves every record before the
//!    last FLUSH ahead of r (the log is in completion order: each of them completed before that
//!    flush was sent), and any of the records after it, each absent, whole, or torn at 512-byte
//!    sectors, in log order. Each state gets the check of rule 3.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use vhost_blk_storage::writelog::{Kind, LogEnd, LogHeader, LogReader, Record};

/// One record and its data.
pub struct Entry {
    pub rec: Record,
    pub data: Vec<u8>,
}

/// A log read whole.
pub struct Log {
    pub header: LogHeader,
    pub entries: Vec<Entry>,
    pub end: LogEnd,
}

impl Log {
    pub fn load(path: &Path) -> Result<Self, String> {
        let f = File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let mut r = LogReader::new(std::io::BufReader::new(f))
            .map_err(|e| format!("{}: {e}", path.display()))?;
        let mut entries = Vec::new();
        while let Some((rec, data)) = r.next_record().map_err(|e| e.to_string())? {
            entries.push(Entry { rec, data });
        }
        Ok(Self {
            header: r.header,
            entries,
            end: r.end().unwrap_or(LogEnd::Clean),
        })
    }

    /// Indices of the FLUSH records.
    pub fn flushes(&self) -> Vec<usize> {
        (0..self.entries.len())
            .filter(|&i| {
                self.entries
                    .get(i)
                    .is_some_and(|e| e.rec.kind == Kind::Flush)
            })
            .collect()
    }
}

/// Applies one record to the image (rule 2).
pub fn apply(img: &File, e: &Entry) -> std::io::Result<()> {
    match e.rec.kind {
        Kind::Write => img.write_all_at(&e.data, e.rec.offset),
        Kind::Flush => Ok(()),
        Kind::Discard | Kind::WriteZeroes => {
            let zeros = vec![0u8; 1 << 20];
            let (mut off, end) = (e.rec.offset, e.rec.offset + e.rec.len);
            while off < end {
                let n = (end - off).min(zeros.len() as u64) as usize;
                img.write_all_at(zeros.get(..n).unwrap_or_default(), off)?;
                off += n as u64;
            }
            Ok(())
        }
    }
}

/// What the file-system check said of one image.
#[derive(Debug)]
pub struct Fsck {
    pub clean: bool,
    pub status: Option<i32>,
    /// The first lines of e2fsck's output when not clean.
    pub output: String,
}

/// A scratch directory and the e2fsck to run.
pub struct Checker {
    pub e2fsck: PathBuf,
    pub dir: PathBuf,
}

impl Checker {
    pub fn new(e2fsck: PathBuf) -> Result<Self, String> {
        let dir = std::env::temp_dir().join(format!("vhost-blk-replay-{}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        Ok(Self { e2fsck, dir })
    }

    /// A fresh working copy of `from`.
    pub fn copy(&self, from: &Path, name: &str) -> Result<(PathBuf, File), String> {
        let to = self.dir.join(name);
        std::fs::copy(from, &to).map_err(|e| format!("copying {}: {e}", from.display()))?;
        let f = OpenOptions::new()
            .read(true)
            .write(true)
            .open(&to)
            .map_err(|e| format!("{}: {e}", to.display()))?;
        Ok((to, f))
    }

    fn run(&self, args: &[&str], img: &Path) -> Result<(Option<i32>, String), String> {
        let out = Command::new(&self.e2fsck)
            .args(args)
            .arg(img)
            .output()
            .map_err(|e| format!("cannot run {}: {e}", self.e2fsck.display()))?;
        let text = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
        Ok((out.status.code(), text))
    }

    /// Rule 3 on a copy of `img`.
    pub fn fsck(&self, img: &Path) -> Result<Fsck, String> {
        let (scratch, _) = self.copy(img, "fsck.img")?;
        let (replayed, text) = self.run(&["-E", "journal_only", "-y"], &scratch)?;
        // 0: nothing to do, 1: the journal was replayed; anything else is an error.
        if !matches!(replayed, Some(0 | 1)) {
            return Ok(Fsck {
                clean: false,
                status: replayed,
                output: head(&text),
            });
        }
        let (status, text) = self.run(&["-fn"], &scratch)?;
        Ok(Fsck {
            clean: status == Some(0),
            status,
            output: if status == Some(0) {
                String::new()
            } else {
                head(&text)
            },
        })
    }
}

impl Drop for Checker {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn head(text: &str) -> String {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .take(8)
        .collect::<Vec<_>>()
        .join(" | ")
}

/// One flush point's check.
pub struct PointResult {
    /// 1-based number of the flush point.
    pub point: usize,
    /// The FLUSH record's sequence number.
    pub seq: u64,
    pub fsck: Fsck,
}

/// Rule 1 and 3 at every flush point (`every`: each n-th only; the last is always checked).
pub fn check_all(
    c: &Checker,
    start: &Path,
    log: &Log,
    every: usize,
    mut progress: impl FnMut(&PointResult),
) -> Result<Vec<PointResult>, String> {
    let (work, img) = c.copy(start, "work.img")?;
    let flushes = log.flushes();
    let mut out = Vec::new();
    let mut next = 0;
    for (k, &fi) in flushes.iter().enumerate() {
        for e in log.entries.get(next..fi).unwrap_or_default() {
            apply(&img, e).map_err(|e| format!("replaying: {e}"))?;
        }
        next = fi;
        if (k + 1) % every.max(1) != 0 && k + 1 != flushes.len() {
            continue;
        }
        let seq = log.entries.get(fi).map_or(0, |e| e.rec.seq);
        let r = PointResult {
            point: k + 1,
            seq,
            fsck: c.fsck(&work)?,
        };
        progress(&r);
        out.push(r);
    }
    Ok(out)
}

/// What the self-test found: the write moved, the flush it was moved past, the check there.
pub struct Moved {
    pub write_seq: u64,
    pub offset: u64,
    pub len: u64,
    pub flush_seq: u64,
    /// The flush point checked (1-based).
    pub point: usize,
    pub fsck: Fsck,
    /// Moves tried.
    pub tried: usize,
}

/// Rule 4 over at most `max_points` flush points, the latest first: each write of the window
/// before a flush is moved past `past` flushes (usize::MAX: past every later one, i.e. lost)
/// and the check runs at the last flush point it is missing from. `Ok((None, tried))`: no
/// moved write was noticed.
pub fn selftest(
    c: &Checker,
    start: &Path,
    log: &Log,
    max_points: usize,
    past: usize,
) -> Result<(Option<Moved>, usize), String> {
    let flushes = log.flushes();
    let n = flushes.len();
    let mut tried = 0;
    for k in (0..n).rev().take(max_points) {
        let fi = flushes.get(k).copied().unwrap_or(0);
        let prev = k
            .checked_sub(1)
            .and_then(|p| flushes.get(p))
            .copied()
            .unwrap_or(0);
        let target = k.saturating_add(past.max(1) - 1).min(n - 1);
        let end = flushes.get(target).copied().unwrap_or(fi);
        let (base, bimg) = c.copy(start, "base.img")?;
        for e in log.entries.get(..prev).unwrap_or_default() {
            apply(&bimg, e).map_err(|e| format!("replaying: {e}"))?;
        }
        drop(bimg);
        let window = log.entries.get(prev..fi).unwrap_or_default();
        for (j, moved) in window.iter().enumerate().rev() {
            if moved.rec.kind != Kind::Write {
                continue;
            }
            tried += 1;
            let (cand, cimg) = c.copy(&base, "moved.img")?;
            let rest = log.entries.get(prev..end).unwrap_or_default();
            for (i, e) in rest.iter().enumerate() {
                if i != j {
                    apply(&cimg, e).map_err(|e| format!("replaying: {e}"))?;
                }
            }
            drop(cimg);
            let fsck = c.fsck(&cand)?;
            if !fsck.clean {
                let m = Moved {
                    write_seq: moved.rec.seq,
                    offset: moved.rec.offset,
                    len: moved.rec.len,
                    flush_seq: log.entries.get(fi).map_or(0, |e| e.rec.seq),
                    point: target + 1,
                    fsck,
                    tried,
                };
                return Ok((Some(m), tried));
            }
        }
    }
    Ok((None, tried))
}

/// One crash state's check (rule 5).
pub struct CrashResult {
    /// The crash came just before this record (its index in the log).
    pub before: usize,
    /// Writes after the last flush that this state kept whole, and torn.
    pub whole: usize,
    pub torn: usize,
    pub fsck: Fsck,
}

/// How the writes after the last completed flush land in one crash state.
#[derive(Clone, Copy)]
enum Landing {
    Absent,
    Whole,
    Torn,
}

/// Rule 5: `states` crash states at seeded positions of the log, each checked. With
/// `drop_flushes` the FLUSH records are ignored (a device whose flush does nothing: nothing is
/// durable), the self-check that the check can fail.
pub fn crash_states(
    c: &Checker,
    start: &Path,
    log: &Log,
    (states, seed, drop_flushes): (usize, u64, bool),
    mut progress: impl FnMut(&CrashResult),
) -> Result<Vec<CrashResult>, String> {
    use rand::{Rng, SeedableRng};
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let n = log.entries.len();
    let mut points: Vec<usize> = (0..states).map(|_| rng.gen_range(1..=n.max(1))).collect();
    points.sort_unstable();
    let (durable_path, durable) = c.copy(start, "durable.img")?;
    let mut applied = 0;
    let mut out = Vec::new();
    for before in points {
        // Everything before the last FLUSH record ahead of the crash is on the disk.
        let last_flush = (0..before)
            .rev()
            .find(|&i| {
                !drop_flushes
                    && log
                        .entries
                        .get(i)
                        .is_some_and(|e| e.rec.kind == Kind::Flush)
            })
            .map_or(0, |i| i + 1);
        for e in log
            .entries
            .get(applied..last_flush.max(applied))
            .unwrap_or_default()
        {
            apply(&durable, e).map_err(|e| format!("replaying: {e}"))?;
        }
        applied = applied.max(last_flush);
        let (state, img) = c.copy(&durable_path, "crash.img")?;
        let (mut whole, mut torn) = (0, 0);
        for e in log.entries.get(applied..before).unwrap_or_default() {
            let landing = match rng.gen_range(0..3) {
                0 => Landing::Absent,
                1 => Landing::Whole,
                _ => Landing::Torn,
            };
            match landing {
                Landing::Absent => {}
                Landing::Whole => {
                    whole += 1;
                    apply(&img, e).map_err(|e| format!("replaying: {e}"))?;
                }
                Landing::Torn => {
                    torn += 1;
                    apply_torn(&img, e, &mut rng).map_err(|e| format!("replaying: {e}"))?;
                }
            }
        }
        drop(img);
        let r = CrashResult {
            before,
            whole,
            torn,
            fsck: c.fsck(&state)?,
        };
        progress(&r);
        out.push(r);
    }
    Ok(out)
}

/// A write torn at 512-byte sectors: each sector lands or not (other records: whole or not).
fn apply_torn(img: &File, e: &Entry, rng: &mut impl rand::Rng) -> std::io::Result<()> {
    if e.rec.kind != Kind::Write {
        return if rng.gen_bool(0.5) {
            apply(img, e)
        } else {
            Ok(())
        };
    }
    for (i, sector) in e.data.chunks(512).enumerate() {
        if rng.gen_bool(0.5) {
            img.write_all_at(sector, e.rec.offset + (i * 512) as u64)?;
        }
    }
    Ok(())
}
