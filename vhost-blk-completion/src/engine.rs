//! One vector's (queue's) completion engine: a pure state machine over caller-supplied times.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, VecDeque};

use rand_chacha::rand_core::SeedableRng;
use rand_chacha::ChaCha8Rng;

use super::distribution::Distribution;
use super::model::{Coalesce, CompletionModel, VectorSettings};

/// Stream roles within one vector (see [`stream_rng`]).
const ROLE_SERVICE: u64 = 0;
const ROLE_MSIX: u64 = 1;

/// The random stream of one `(vector, role)`: ChaCha8 keyed by `seed` expanded with
/// `SeedableRng::seed_from_u64` (rand_core's documented PCG32 expansion), stream number
/// `vector * 2 + role` (role 0: service times, 1: interrupt latencies), word position 0.
/// Separate streams keep each sequence independent of how submissions and interrupts interleave:
/// the k-th request of a vector always gets the k-th service sample, the k-th interrupt the k-th
/// latency sample.
pub fn stream_rng(seed: u64, vector: u16, role: u64) -> ChaCha8Rng {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    rng.set_stream(u64::from(vector) * 2 + role);
    rng
}

/// Where the engine reports the decisions it takes, as they happen (the device layer feeds its
/// statistics from them). Every method has an empty default, so `&mut ()` ignores them.
pub trait EngineSink {
    /// An item was published `service_ns` after it was submitted.
    fn on_publish(&mut self, _service_ns: u64) {}
    /// An interrupt at `now_ns` covered the completions published at the times in `published`
    /// (oldest first); `error_ns` is the signal time minus the interrupt's due time.
    fn on_interrupt(&mut self, _published: &[u64], _now_ns: u64, _error_ns: i128) {}
    /// A pending item was dropped without being published (device reset).
    fn on_discard(&mut self) {}
}

impl EngineSink for () {}

/// What [`VectorEngine::poll`] decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Poll {
    /// How many items were handed to `publish` by this call.
    pub published: usize,
    /// Fire the vector's interrupt (write the call eventfd) now.
    pub signal: bool,
    /// Call `poll` again at this CLOCK_MONOTONIC time (None: only after the next `submit`).
    pub next_deadline_ns: Option<u64>,
}

struct Pending<T> {
    deadline: u64,
    seq: u64,
    submitted: u64,
    item: T,
}

impl<T> Pending<T> {
    fn key(&self) -> (u64, u64) {
        (self.deadline, self.seq)
    }
}

impl<T> PartialEq for Pending<T> {
    fn eq(&self, other: &Self) -> bool {
        self.key() == other.key()
    }
}
impl<T> Eq for Pending<T> {}
impl<T> PartialOrd for Pending<T> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl<T> Ord for Pending<T> {
    /// Reversed, so that `BinaryHeap` pops the earliest `(deadline, seq)` first.
    fn cmp(&self, other: &Self) -> Ordering {
        other.key().cmp(&self.key())
    }
}

/// The published completions not yet covered by an interrupt.
struct Batch {
    /// Publication times, oldest first; empty = no batch open.
    published: Vec<u64>,
    /// Interrupt latency drawn for this batch when it opened.
    msix_ns: u64,
    /// Coalescing in force for this batch (decided when it opened).
    coalesce: Option<Coalesce>,
    /// When the batch reached `max_batch`.
    full_at: Option<u64>,
}

/// `balanced` preset: is the queue busy? Completions counted over fixed windows.
struct RateGate {
    threshold_iops: u64,
    window_ns: u64,
    window_start: Option<u64>,
    count: u64,
    busy: bool,
}

impl RateGate {
    fn roll(&mut self, now: u64) {
        let start = *self.window_start.get_or_insert(now);
        let elapsed = now.saturating_sub(start);
        if elapsed >= self.window_ns {
            self.busy = u128::from(self.count) * 1_000_000_000
                >= u128::from(self.threshold_iops) * u128::from(elapsed);
            self.window_start = Some(now);
            self.count = 0;
        }
    }
}

/// The completion engine of one vector. See the module documentation for the timing model.
pub struct VectorEngine<T> {
    vector: u16,
    settings: VectorSettings,
    passthrough: bool,
    service_rng: ChaCha8Rng,
    msix_rng: ChaCha8Rng,
    seq: u64,
    /// Pending items whose deadlines arrived in order (the common case): O(1) each.
    in_order: VecDeque<Pending<T>>,
    /// Pending items that would overtake an earlier-submitted one.
    out_of_order: BinaryHeap<Pending<T>>,
    batch: Batch,
    gate: Option<RateGate>,
}

impl<T> VectorEngine<T> {
    /// The engine of `vector` under `model` (validate the model first).
    pub fn new(model: &CompletionModel, vector: u16) -> Self {
        let settings = model.settings_for(vector);
        let passthrough = settings.service.is_zero()
            && settings.msix.is_zero()
            && settings.coalesce.is_none()
            && settings.aligned_tick_ns.is_none();
        let gate = settings.rate_gated.then_some(RateGate {
            threshold_iops: model.balanced_threshold_iops,
            window_ns: model.rate_window_ns,
            window_start: None,
            count: 0,
            busy: false,
        });
        VectorEngine {
            vector,
            passthrough,
            service_rng: stream_rng(model.seed, vector, ROLE_SERVICE),
            msix_rng: stream_rng(model.seed, vector, ROLE_MSIX),
            seq: 0,
            in_order: VecDeque::new(),
            out_of_order: BinaryHeap::new(),
            batch: Batch {
                published: Vec::new(),
                msix_ns: 0,
                coalesce: None,
                full_at: None,
            },
            gate,
            settings,
        }
    }

    #[inline]
    pub fn vector(&self) -> u16 {
        self.vector
    }

    /// The settings after overrides and preset expansion.
    #[inline]
    pub fn settings(&self) -> &VectorSettings {
        &self.settings
    }

    /// No service time, no interrupt latency, no coalescing, no tick: every `poll` right after a
    /// `submit` publishes and signals at once, and no timer is ever needed.
    #[inline]
    pub fn is_passthrough(&self) -> bool {
        self.passthrough
    }

    /// Items submitted and not yet published.
    #[inline]
    pub fn pending(&self) -> usize {
        self.in_order.len() + self.out_of_order.len()
    }

    /// Published completions not yet covered by an interrupt.
    #[inline]
    pub fn unsignalled(&self) -> usize {
        self.batch.published.len()
    }

    /// The request's I/O finished at `now_ns`: it is published after a service time drawn from this
    /// vector's service distribution plus `extra_delay_ns`. Call [`poll`](Self::poll) afterwards.
    pub fn submit(&mut self, now_ns: u64, item: T, extra_delay_ns: u64) {
        let service = self.settings.service.sample(&mut self.service_rng);
        let deadline = now_ns
            .saturating_add(service)
            .saturating_add(extra_delay_ns);
        let entry = Pending {
            deadline,
            seq: self.seq,
            submitted: now_ns,
            item,
        };
        self.seq += 1;
        match self.in_order.back() {
            Some(last) if last.deadline > deadline => self.out_of_order.push(entry),
            _ => self.in_order.push_back(entry),
        }
    }

    fn next_service_deadline(&self) -> Option<u64> {
        let a = self.in_order.front().map(|p| p.deadline);
        let b = self.out_of_order.peek().map(|p| p.deadline);
        match (a, b) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Removes the earliest pending item if `due` accepts its deadline.
    fn pop_if(&mut self, due: impl Fn(u64) -> bool) -> Option<Pending<T>> {
        let from_heap = match (self.in_order.front(), self.out_of_order.peek()) {
            (Some(a), Some(b)) => b.key() < a.key(),
            (None, Some(_)) => true,
            (_, None) => false,
        };
        if from_heap {
            if due(self.out_of_order.peek()?.deadline) {
                return self.out_of_order.pop();
            }
        } else if due(self.in_order.front()?.deadline) {
            return self.in_order.pop_front();
        }
        None
    }

    fn publish_one(&mut self, now: u64, p: Pending<T>, sink: &mut impl EngineSink) -> T {
        sink.on_publish(now.saturating_sub(p.submitted));
        if let Some(g) = &mut self.gate {
            g.count += 1;
        }
        if self.batch.published.is_empty() {
            self.batch.msix_ns = self.settings.msix.sample(&mut self.msix_rng);
            self.batch.full_at = None;
            self.batch.coalesce = match &self.gate {
                Some(g) if !g.busy => None,
                _ => self.settings.coalesce,
            };
        }
        self.batch.published.push(now);
        if let Some(c) = self.batch.coalesce {
            if self.batch.full_at.is_none() && self.batch.published.len() >= c.max_batch as usize {
                self.batch.full_at = Some(now);
            }
        }
        p.item
    }

    /// When the open batch's interrupt is due: `max(oldest publication + msix latency, coalescing
    /// trigger)`, rounded up to the aligned tick.
    fn batch_due(&self) -> Option<u64> {
        let first = *self.batch.published.first()?;
        let mut due = first.saturating_add(self.batch.msix_ns);
        if let Some(c) = self.batch.coalesce {
            let by_delay = first.saturating_add(c.max_delay_ns);
            let trigger = self.batch.full_at.map_or(by_delay, |f| f.min(by_delay));
            due = due.max(trigger);
        }
        if let Some(tick) = self.settings.aligned_tick_ns {
            due = due.div_ceil(tick).saturating_mul(tick);
        }
        Some(due)
    }

    fn signal(&mut self, now: u64, due: u64, sink: &mut impl EngineSink) {
        let error = now as i128 - due as i128;
        sink.on_interrupt(&self.batch.published, now, error);
        self.batch.published.clear();
        self.batch.full_at = None;
    }

    /// Publishes (in deadline order, FIFO among equal deadlines) every item whose service deadline
    /// is at or before `now_ns`, then signals if the open batch's interrupt is due.
    pub fn poll(
        &mut self,
        now_ns: u64,
        sink: &mut impl EngineSink,
        mut publish: impl FnMut(T),
    ) -> Poll {
        if let Some(g) = &mut self.gate {
            g.roll(now_ns);
        }
        let mut published = 0;
        while let Some(p) = self.pop_if(|d| d <= now_ns) {
            let item = self.publish_one(now_ns, p, sink);
            publish(item);
            published += 1;
        }
        let mut signal = false;
        let mut next = self.next_service_deadline();
        if let Some(due) = self.batch_due() {
            if now_ns >= due {
                self.signal(now_ns, due, sink);
                signal = true;
            } else {
                next = Some(next.map_or(due, |n| n.min(due)));
            }
        }
        Poll {
            published,
            signal,
            next_deadline_ns: next,
        }
    }

    /// Publishes everything pending now and signals if anything is unsignalled, ignoring all
    /// deadlines (e.g. before stopping a queue). Early signals count as negative errors.
    pub fn flush(
        &mut self,
        now_ns: u64,
        sink: &mut impl EngineSink,
        mut publish: impl FnMut(T),
    ) -> Poll {
        let mut published = 0;
        while let Some(p) = self.pop_if(|_| true) {
            let item = self.publish_one(now_ns, p, sink);
            publish(item);
            published += 1;
        }
        let due = self.batch_due();
        if let Some(due) = due {
            self.signal(now_ns, due, sink);
        }
        Poll {
            published,
            signal: due.is_some(),
            next_deadline_ns: None,
        }
    }

    /// Drops every pending item without publishing it (device reset): each is handed to `dropped`;
    /// published-but-unsignalled completions are forgotten.
    pub fn discard(&mut self, sink: &mut impl EngineSink, mut dropped: impl FnMut(T)) {
        while let Some(p) = self.pop_if(|_| true) {
            sink.on_discard();
            dropped(p.item);
        }
        self.batch.published.clear();
        self.batch.full_at = None;
    }

    /// Debug helper for the distributions in force.
    pub fn describe(&self) -> String {
        let dist = |d: &Distribution| d.to_string();
        format!(
            "vector {}: service={} msix={} coalesce={}{} tick={}",
            self.vector,
            dist(&self.settings.service),
            dist(&self.settings.msix),
            self.settings
                .coalesce
                .map_or("off".to_string(), |c| c.to_string()),
            if self.settings.rate_gated {
                " (when busy)"
            } else {
                ""
            },
            self.settings
                .aligned_tick_ns
                .map_or("off".to_string(), vhost_blk_units::format_ns),
        )
    }
}
