//! How late a timer wakes, learned from its own wake-ups, so that it can be armed that much
//! earlier (and the rest spun).
//!
//! Rules:
//! 1. Wake-ups are grouped by the wait they were armed for (deadline - time of arming, powers
//!    of two of microseconds): a virtual CPU that halts for a millisecond wakes later than one
//!    that halts for 20 us.
//! 2. For each group the last [`WINDOW`] lateness samples are kept; the lead for a sleep is
//!    that group's [`QUANTILE`] sample plus [`MARGIN_NS`], at least the configured spin, at most
//!    [`super::model::MAX_SPIN_NS`] and never more than the sleep itself. A group without
//!    samples uses the configured spin.
//! 3. Pure bookkeeping: times are passed in, nothing here reads a clock.

use super::model::MAX_SPIN_NS;

/// Samples kept per group.
pub const WINDOW: usize = 16;
/// Which sorted sample of the window is the lead (12 of 16: the 75th percentile).
pub const QUANTILE: usize = 12;
/// Added to the learned lateness.
pub const MARGIN_NS: u64 = 3_000;
/// Sleep-length groups: < 1 us, 1-2 us, 2-4 us, ... >= 2^(GROUPS-2) us.
const GROUPS: usize = 16;

/// Learned wake-up lateness of one timer.
#[derive(Debug, Clone)]
pub struct WakeLearner {
    base_ns: u64,
    groups: [Group; GROUPS],
}

/// The lateness samples of one sleep-length group.
#[derive(Debug, Clone, Copy)]
struct Group {
    samples: [u64; WINDOW],
    /// Samples recorded (saturating; the window holds the last `WINDOW`).
    seen: usize,
}

impl Group {
    /// The group's [`QUANTILE`] sample plus [`MARGIN_NS`]; 0 without samples.
    fn learned(&self) -> u64 {
        let n = self.seen.min(WINDOW);
        let mut s = self.samples;
        let Some(s) = s.get_mut(..n) else {
            return 0;
        };
        s.sort_unstable();
        s.get((QUANTILE * n / WINDOW).min(n.saturating_sub(1)))
            .map_or(0, |v| v + MARGIN_NS)
    }

    fn record(&mut self, late_ns: u64) {
        if let Some(slot) = self.samples.get_mut(self.seen % WINDOW) {
            *slot = late_ns;
        }
        self.seen = self.seen.saturating_add(1);
    }
}

/// The group of a sleep of `sleep_ns` (rule 1): always below `GROUPS`.
fn group(sleep_ns: u64) -> usize {
    let us = sleep_ns / 1_000;
    ((u64::BITS - us.leading_zeros()) as usize).min(GROUPS - 1)
}

impl WakeLearner {
    /// A learner that starts from (and never leads by less than) `base_ns`.
    pub fn new(base_ns: u64) -> Self {
        Self {
            base_ns,
            groups: [Group {
                samples: [0; WINDOW],
                seen: 0,
            }; GROUPS],
        }
    }

    /// How long before a deadline to wake, for a wait of `wait_ns` from now (rule 2).
    #[inline]
    pub fn lead_ns(&self, wait_ns: u64) -> u64 {
        let learned = self.groups.get(group(wait_ns)).map_or(0, Group::learned);
        learned.max(self.base_ns).min(MAX_SPIN_NS).min(wait_ns)
    }

    /// A timer armed for a wait of `wait_ns` woke `late_ns` after the time it was set for.
    #[inline]
    pub fn record(&mut self, wait_ns: u64, late_ns: u64) {
        if let Some(g) = self.groups.get_mut(group(wait_ns)) {
            g.record(late_ns);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const US: u64 = 1_000;

    #[test]
    fn starts_from_the_configured_spin_and_learns_per_sleep_length() {
        let mut w = WakeLearner::new(20 * US);
        assert_eq!(w.lead_ns(1_000 * US), 20 * US);
        // Never more than the wait itself.
        assert_eq!(w.lead_ns(5 * US), 5 * US);
        // Long sleeps wake 40-50 us late.
        for i in 0..WINDOW as u64 {
            w.record(1_000 * US, 40 * US + i * 600);
        }
        let lead = w.lead_ns(1_000 * US);
        assert_eq!(lead, 40 * US + 12 * 600 + MARGIN_NS);
        // Short sleeps are a different group: still the configured spin.
        assert_eq!(w.lead_ns(100 * US), 20 * US);
        // Small lateness never lowers the lead below the configured spin.
        for _ in 0..WINDOW {
            w.record(100 * US, US);
        }
        assert_eq!(w.lead_ns(100 * US), 20 * US);
    }

    #[test]
    fn the_window_forgets_and_the_lead_is_capped() {
        let mut w = WakeLearner::new(0);
        for _ in 0..WINDOW {
            w.record(100_000 * US, 10 * MAX_SPIN_NS);
            w.record(500 * US, 10 * MAX_SPIN_NS);
        }
        assert_eq!(w.lead_ns(100_000 * US), MAX_SPIN_NS);
        assert_eq!(w.lead_ns(500 * US), 500 * US);
        for _ in 0..WINDOW {
            w.record(500 * US, 2 * US);
        }
        assert_eq!(w.lead_ns(500 * US), 2 * US + MARGIN_NS);
        // A few samples: the quantile of what there is.
        let mut v = WakeLearner::new(0);
        v.record(3 * US, 7 * US);
        assert_eq!(v.lead_ns(3 * US), 3 * US);
        assert_eq!(v.lead_ns(30 * US), 0);
    }
}
