//! One ordering rule for every modifying O_DIRECT operation: a table of locked block ranges.
//!
//! Rules:
//! 1. With O_DIRECT, every write (aligned, or a read-modify-write through the bounce buffer),
//!    WRITE ZEROES and DISCARD of an image holds the range of whole 4 KiB blocks it touches
//!    for the whole operation ([`RangeLocks::lock`]); operations on overlapping ranges run one
//!    after the other, on disjoint ranges in parallel. Without it, a read-modify-write could put
//!    back old sectors over a write, WRITE ZEROES (or SCSI WRITE SAME) or discard that another
//!    queue completed on the same block meanwhile: a completed write lost with no crash.
//! 2. Through the page cache the kernel orders overlapping writes itself (no read-modify-write
//!    happens here): no range is locked.
//! 3. A holder releases its range when its guard drops, panicking or not; waiters are woken
//!    then. The table holds at most one range per queue thread, so a linear scan is enough.

use std::sync::{Condvar, Mutex};

/// Held ranges `[start, end)` in bytes (rule 1).
#[derive(Debug, Default)]
pub(crate) struct RangeLocks {
    held: Mutex<Vec<(u64, u64)>>,
    freed: Condvar,
}

/// A held range; released on drop.
pub(crate) struct RangeGuard<'a> {
    locks: &'a RangeLocks,
    range: (u64, u64),
}

impl RangeLocks {
    /// Waits until no held range overlaps `[start, end)`, then holds it.
    pub(crate) fn lock(&self, start: u64, end: u64) -> RangeGuard<'_> {
        // The table is a plain list of ranges: a panicking holder left it whole.
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        while held.iter().any(|&(s, e)| s < end && start < e) {
            held = self.freed.wait(held).unwrap_or_else(|e| e.into_inner());
        }
        held.push((start, end));
        RangeGuard {
            locks: self,
            range: (start, end),
        }
    }
}

impl Drop for RangeGuard<'_> {
    fn drop(&mut self) {
        let mut held = self.locks.held.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(i) = held.iter().position(|&r| r == self.range) {
            held.swap_remove(i);
        }
        drop(held);
        self.locks.freed.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    #[test]
    fn overlapping_ranges_wait_and_disjoint_ones_do_not() {
        let l = Arc::new(RangeLocks::default());
        let g = l.lock(0, 8192);
        let _other = l.lock(8192, 12288); // disjoint: no wait
        let entered = Arc::new(AtomicBool::new(false));
        let t = {
            let (l, entered) = (l.clone(), entered.clone());
            std::thread::spawn(move || {
                let _g = l.lock(4096, 8192);
                entered.store(true, Ordering::SeqCst);
            })
        };
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert!(!entered.load(Ordering::SeqCst), "overlap must wait");
        drop(g);
        t.join().unwrap();
        assert!(entered.load(Ordering::SeqCst));
    }
}
