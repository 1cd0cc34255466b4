//! Per-queue statistics: request counters, in-flight depth, interrupts and latency histograms,
//! exported as JSON (atomically written files) and as a one-line log summary.
//!
//! Ownership: one [`QueueStats`] per queue worker, never shared between queues (wrap each in its
//! own `Mutex` to export). The device layer records each request as it arrives
//! ([`QueueStats::on_request`]) and the publications, interrupts and discards its completion
//! engine reports.
//!
//! Histograms (hdrhistogram, 3 significant digits, values in ns up to 60 s):
//! - `service`: emulated service time, submit to publication as it happened;
//! - `irq_delay`: completion-to-interrupt delay of *every* completion (its publication to the
//!   signal that covered it);
//! - `irq_error`: per interrupt, |signal time - target time|, where the target is the interrupt's
//!   computed due time (oldest publication + drawn MSI-X latency, held by coalescing, rounded up to
//!   the aligned tick). The sign goes to the counters `irq_early` / `irq_late` / `irq_on_time`:
//!   the engine never signals early except when a queue is flushed, so "late" is the timing error of
//!   the host (timer wake-up and scheduling).
//! - `completions_per_irq`: how many completions each interrupt covered.
//!
//! JSON reports latencies in microseconds as floats with ns precision (`report`).
//!
//! Depends on nothing else in the crate: request kinds are names the device layer passes in.

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

mod report;

pub use report::{
    CountSummary, DeviceStats, LatencySummary, QueueSnapshot, StatsError, StatsExporter,
};

use hdrhistogram::Histogram;

/// Upper bound of the latency histograms (values above are clamped).
const HIST_MAX_NS: u64 = 60_000_000_000;
/// Upper bound of the completions-per-interrupt histogram.
const HIST_MAX_BATCH: u64 = 1 << 20;

/// The names of the request types a device counts, in index order (its personality's words,
/// e.g. `read`, `get_id`, `tmf`); [`QueueStats::on_request`] takes an index into them.
pub type RequestNames = &'static [&'static str];

/// An hdrhistogram (percentiles to 3 significant digits) plus the exact count, sum, min and max,
/// so that mean, min and max are reported to the nanosecond.
///
/// The hdrhistogram's counts (~190 KiB for a latency histogram, all written at allocation) are
/// allocated by [`prepare`](Self::prepare), which a queue calls at its first request, not at
/// construction: a 128-queue device whose guest drives a few queues does not hold
/// 0.75 MiB for each idle one (docs/results/scale-cost). Recording into an unprepared histogram
/// prepares it (an allocation, the only one after construction).
#[derive(Debug, Clone)]
pub struct Hist {
    hdr: Option<Histogram<u64>>,
    /// The histogram's upper bound.
    bound: u64,
    sum: u128,
    min: u64,
    max: u64,
}

impl Hist {
    /// A histogram of nanosecond latencies (up to 60 s).
    pub fn latency() -> Self {
        Self::new(HIST_MAX_NS)
    }

    /// A histogram of counts (up to 2^20).
    pub fn counts() -> Self {
        Self::new(HIST_MAX_BATCH)
    }

    fn new(bound: u64) -> Self {
        Hist {
            hdr: None,
            bound,
            sum: 0,
            min: u64::MAX,
            max: 0,
        }
    }

    /// Whether the hdrhistogram is allocated.
    pub fn prepared(&self) -> bool {
        self.hdr.is_some()
    }

    /// Allocates the hdrhistogram if it is not there yet.
    #[inline]
    pub fn prepare(&mut self) -> &mut Histogram<u64> {
        // Matched by place, not through `get_or_insert_with`: that generic call stayed out of
        // line on the request path (38 instructions per request in callgrind, 2026-12-06).
        match self.hdr {
            Some(ref mut h) => h,
            None => self.hdr.insert(Self::allocate(self.bound)),
        }
    }

    // `bound` is one of this module's constants, all >= 2: new_with_bounds fails only for a low
    // bound below 1 or a high bound below twice the low one, not on anything a guest sends.
    #[allow(clippy::expect_used)]
    #[cold]
    #[inline(never)]
    fn allocate(bound: u64) -> Histogram<u64> {
        Histogram::new_with_bounds(1, bound, 3).expect("constant bounds are valid")
    }

    /// Records `v` (values above the histogram's range count at its top for percentiles).
    #[inline]
    pub fn record(&mut self, v: u64) {
        self.prepare().saturating_record(v);
        self.sum += u128::from(v);
        self.min = self.min.min(v);
        self.max = self.max.max(v);
    }

    #[inline]
    pub fn count(&self) -> u64 {
        self.hdr.as_ref().map_or(0, Histogram::len)
    }
    pub fn min(&self) -> Option<u64> {
        (self.count() > 0).then_some(self.min)
    }
    pub fn max(&self) -> Option<u64> {
        (self.count() > 0).then_some(self.max)
    }
    pub fn mean(&self) -> Option<f64> {
        (self.count() > 0).then(|| self.sum as f64 / self.count() as f64)
    }
    /// The value at quantile `q` (hdrhistogram precision, clamped to the exact min and max).
    pub fn quantile(&self, q: f64) -> Option<u64> {
        let h = self.hdr.as_ref().filter(|h| !h.is_empty())?;
        Some(h.value_at_quantile(q).clamp(self.min, self.max))
    }
    /// The hdrhistogram, once allocated.
    pub fn histogram(&self) -> Option<&Histogram<u64>> {
        self.hdr.as_ref()
    }

    /// Adds `other`'s values (histograms made by the same constructor).
    pub fn add(&mut self, other: &Hist) {
        if let Some(o) = other.hdr.as_ref().filter(|h| !h.is_empty()) {
            // Same bounds on both sides, so the addition cannot fail.
            let _ = self.prepare().add(o);
        }
        self.sum += other.sum;
        self.min = self.min.min(other.min);
        self.max = self.max.max(other.max);
    }
}

/// Counters and histograms of one queue.
#[derive(Debug, Clone)]
pub struct QueueStats {
    queue: u16,
    names: RequestNames,
    requests: Vec<u64>,
    bytes_read: u64,
    bytes_written: u64,
    in_flight: u64,
    in_flight_max: u64,
    completions: u64,
    discarded: u64,
    interrupts: u64,
    irq_early: u64,
    irq_late: u64,
    irq_on_time: u64,
    completions_per_irq: Hist,
    service: Hist,
    irq_delay: Hist,
    irq_error: Hist,
}

impl QueueStats {
    /// The counters; the histograms (~0.75 MiB) come with [`prepare`](Self::prepare).
    pub fn new(queue: u16, names: RequestNames) -> Self {
        QueueStats {
            queue,
            names,
            requests: vec![0; names.len()],
            bytes_read: 0,
            bytes_written: 0,
            in_flight: 0,
            in_flight_max: 0,
            completions: 0,
            discarded: 0,
            interrupts: 0,
            irq_early: 0,
            irq_late: 0,
            irq_on_time: 0,
            completions_per_irq: Hist::counts(),
            service: Hist::latency(),
            irq_delay: Hist::latency(),
            irq_error: Hist::latency(),
        }
    }

    pub fn queue(&self) -> u16 {
        self.queue
    }

    /// Allocates the histograms if they are not yet (a queue, at its first request); nothing
    /// the queue records allocates afterwards.
    #[inline]
    pub fn prepare(&mut self) {
        for h in [
            &mut self.completions_per_irq,
            &mut self.service,
            &mut self.irq_delay,
            &mut self.irq_error,
        ] {
            h.prepare();
        }
    }

    /// Whether any of the histograms is allocated (a queue that has had no request: none).
    pub fn prepared(&self) -> bool {
        [
            &self.completions_per_irq,
            &self.service,
            &self.irq_delay,
            &self.irq_error,
        ]
        .iter()
        .any(|h| h.prepared())
    }

    /// A request of kind `kind` (an index into the names) arrived from the guest; its payload
    /// moved `read` bytes from storage and `written` bytes to it. Every request counted here
    /// must later complete (publish or discard).
    #[inline]
    pub fn on_request(&mut self, kind: usize, read: u64, written: u64) {
        if let Some(n) = self.requests.get_mut(kind) {
            *n += 1;
        }
        self.bytes_read += read;
        self.bytes_written += written;
        self.in_flight += 1;
        self.in_flight_max = self.in_flight_max.max(self.in_flight);
    }

    /// A completion was published.
    #[inline]
    pub fn on_publish(&mut self, service_ns: u64) {
        self.in_flight = self.in_flight.saturating_sub(1);
        self.completions += 1;
        self.service.record(service_ns);
    }

    /// A pending request was dropped without completion (device reset).
    #[inline]
    pub fn on_discard(&mut self) {
        self.in_flight = self.in_flight.saturating_sub(1);
        self.discarded += 1;
    }

    /// An interrupt at `now` covered completions published at `published`; `error_ns` is the
    /// signal time minus the target time.
    #[inline]
    pub fn on_interrupt(&mut self, published: &[u64], now: u64, error_ns: i128) {
        self.interrupts += 1;
        self.completions_per_irq.record(published.len() as u64);
        for &t in published {
            self.irq_delay.record(now.saturating_sub(t));
        }
        match error_ns {
            e if e < 0 => self.irq_early += 1,
            0 => self.irq_on_time += 1,
            _ => self.irq_late += 1,
        }
        self.irq_error
            .record(u64::try_from(error_ns.unsigned_abs()).unwrap_or(u64::MAX));
    }

    /// Requests counted of kind `kind` (an index into the names).
    #[inline]
    pub fn requests(&self, kind: usize) -> u64 {
        self.requests.get(kind).copied().unwrap_or(0)
    }
    #[inline]
    pub fn in_flight(&self) -> u64 {
        self.in_flight
    }
    pub fn interrupts(&self) -> u64 {
        self.interrupts
    }
    pub fn completions(&self) -> u64 {
        self.completions
    }
    pub fn irq_delay(&self) -> &Hist {
        &self.irq_delay
    }
    pub fn irq_error(&self) -> &Hist {
        &self.irq_error
    }
    pub fn service(&self) -> &Hist {
        &self.service
    }
    pub fn completions_per_irq(&self) -> &Hist {
        &self.completions_per_irq
    }
    /// (early, on time, late) interrupt counts.
    pub fn irq_timing(&self) -> (u64, u64, u64) {
        (self.irq_early, self.irq_on_time, self.irq_late)
    }

    /// Adds `other` into `self` (for device totals).
    pub(crate) fn merge(&mut self, other: &QueueStats) {
        for (a, b) in self.requests.iter_mut().zip(&other.requests) {
            *a += b;
        }
        self.bytes_read += other.bytes_read;
        self.bytes_written += other.bytes_written;
        self.in_flight += other.in_flight;
        self.in_flight_max += other.in_flight_max;
        self.completions += other.completions;
        self.discarded += other.discarded;
        self.interrupts += other.interrupts;
        self.irq_early += other.irq_early;
        self.irq_late += other.irq_late;
        self.irq_on_time += other.irq_on_time;
        self.completions_per_irq.add(&other.completions_per_irq);
        self.service.add(&other.service);
        self.irq_delay.add(&other.irq_delay);
        self.irq_error.add(&other.irq_error);
    }

    /// A serializable snapshot.
    pub fn snapshot(&self) -> QueueSnapshot {
        QueueSnapshot {
            queue: Some(self.queue),
            requests: self
                .names
                .iter()
                .map(|&name| std::borrow::Cow::Borrowed(name))
                .zip(self.requests.iter().copied())
                .collect(),
            bytes_read: self.bytes_read,
            bytes_written: self.bytes_written,
            in_flight: self.in_flight,
            in_flight_max: self.in_flight_max,
            completions: self.completions,
            discarded: self.discarded,
            interrupts: self.interrupts,
            irq_early: self.irq_early,
            irq_on_time: self.irq_on_time,
            irq_late: self.irq_late,
            completions_per_irq: CountSummary::of(&self.completions_per_irq),
            service_us: LatencySummary::of(&self.service),
            irq_delay_us: LatencySummary::of(&self.irq_delay),
            irq_error_us: LatencySummary::of(&self.irq_error),
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A personality's names, as the device layer passes them.
    pub(crate) const NAMES: RequestNames = &["read", "write", "flush", "scsi_cmd"];
    pub(crate) const READ: usize = 0;
    const WRITE: usize = 1;
    const FLUSH: usize = 2;
    pub(crate) const SCSI_CMD: usize = 3;

    #[test]
    fn histograms_are_allocated_when_the_queue_runs_and_read_the_same_before() {
        let mut idle = QueueStats::new(5, NAMES);
        assert!(
            idle.service().histogram().is_none(),
            "nothing allocated at construction"
        );
        let before = idle.snapshot();
        idle.prepare();
        assert!(idle.service().histogram().is_some());
        assert_eq!(
            idle.snapshot(),
            before,
            "an empty histogram reads the same either way"
        );
        // A total merged from idle queues allocates nothing; from a used one it does.
        let mut total = QueueStats::new(0, NAMES);
        total.merge(&QueueStats::new(1, NAMES));
        assert!(total.service().histogram().is_none());
        let mut used = QueueStats::new(2, NAMES);
        used.on_publish(1_500);
        total.merge(&used);
        assert_eq!(total.service().count(), 1);
        assert_eq!(total.service().quantile(0.5), Some(1_500));
    }

    #[test]
    fn counts_requests_bytes_and_in_flight_high_water() {
        let mut q = QueueStats::new(2, NAMES);
        q.on_request(READ, 4096, 0);
        q.on_request(WRITE, 0, 512);
        q.on_request(FLUSH, 0, 0);
        q.on_publish(1_000);
        q.on_request(READ, 4096, 0);
        q.on_publish(2_000);
        q.on_publish(3_000);
        q.on_discard();
        let s = q.snapshot();
        assert_eq!(
            (s.requests["read"], s.requests["write"], s.requests["flush"]),
            (2, 1, 1)
        );
        assert_eq!((s.bytes_read, s.bytes_written), (8192, 512));
        assert_eq!((s.in_flight, s.in_flight_max), (0, 3));
        assert_eq!((s.completions, s.discarded), (3, 1));
        assert_eq!(s.service_us.count, 3);
        assert_eq!(s.service_us.mean, 2.0);
        assert_eq!(s.service_us.max, 3.0);
        // More completions than requests never wraps the in-flight count.
        q.on_publish(1);
        assert_eq!(q.in_flight(), 0);
    }

    #[test]
    fn interrupts_record_every_completion_delay_and_the_signed_error() {
        let mut q = QueueStats::new(0, NAMES);
        q.on_interrupt(&[100, 150, 190], 200, 0);
        q.on_interrupt(&[1_000], 1_500, 30);
        q.on_interrupt(&[2_000], 2_010, -40);
        assert_eq!(q.interrupts(), 3);
        assert_eq!(q.irq_timing(), (1, 1, 1));
        let s = q.snapshot();
        assert_eq!(s.completions_per_irq.max, 3);
        assert_eq!(s.completions_per_irq.count, 3);
        assert_eq!(s.irq_delay_us.count, 5);
        assert_eq!((s.irq_delay_us.min, s.irq_delay_us.max), (0.01, 0.5));
        assert_eq!(s.irq_error_us.max, 0.04);
    }
}
