//! Per-queue state owned by the queue's worker: the completion engine (when to publish a used
//! entry, when to interrupt), its deadline timer, the queue's statistics and its vring.
//!
//! The engine only decides; this is where its decisions touch the ring: `add_used` for each
//! published completion, and the call eventfd when the engine says the vector's interrupt is
//! due (unless the driver suppressed it with EVENT_IDX).
//!
//! An interrupt that cannot be sent because the frontend has not (yet) given the ring a call
//! eventfd is owed, not dropped: after a backend restart the frontend may send SET_VRING_CALL
//! after the kick that starts the recovery, and a resubmitted request whose completion signal
//! is lost leaves a guest that has nothing else in flight waiting forever. An owed signal is
//! sent at the queue's next event, and the timer retries it every [`OWED_RETRY_NS`] until the
//! call eventfd is there. A recovery also owes one signal: the previous backend may have died
//! between publishing used entries and signalling them (a spurious interrupt costs the driver
//! one look at the used ring).

use std::os::fd::{AsRawFd, RawFd};
use std::sync::{Arc, Mutex};

use vhost_user_backend::{VringRwLock, VringState, VringT};
use virtio_queue::QueueT;
use vm_memory::GuestMemoryAtomic;

use super::chain::GuestMemoryMmapT;
use super::inflight::{QueueRegion, Recovery, Tracker};
use vhost_blk_completion::{
    now_ns, CompletionModel, DeadlineTimer, EngineSink, Poll, VectorEngine,
};
use vhost_blk_stats::QueueStats;

/// Guest memory shared with the vhost-user handler.
pub type GuestMem = GuestMemoryAtomic<GuestMemoryMmapT>;
/// One vring.
pub type Vring = VringRwLock<GuestMem>;

/// Chains popped from a ring under one lock, and completions handed to the engine before it
/// is polled, while a ring is being drained.
pub const BATCH: usize = 32;

/// Statistics of one queue, shared with the exporter (signal thread). Only the queue's worker
/// writes them; the exporter locks briefly to take a snapshot.
pub type SharedStats = Arc<Mutex<QueueStats>>;

/// Feeds a queue's statistics from the decisions its engine reports.
struct StatsSink<'a>(&'a mut QueueStats);

impl EngineSink for StatsSink<'_> {
    fn on_publish(&mut self, service_ns: u64) {
        self.0.on_publish(service_ns);
    }
    fn on_interrupt(&mut self, published: &[u64], now_ns: u64, error_ns: i128) {
        self.0.on_interrupt(published, now_ns, error_ns);
    }
    fn on_discard(&mut self) {
        self.0.on_discard();
    }
}

/// Deadlines spun for in one [`QueueState::publish`] before it leaves the rest to the timer.
const INLINE_SPINS: usize = 64;

/// How often an owed signal is retried while the ring has no call eventfd.
pub const OWED_RETRY_NS: u64 = 1_000_000;

/// Spins until `deadline` (true) unless `more_work` says otherwise first (false).
fn spin_unless(deadline: u64, more_work: &impl Fn() -> bool) -> bool {
    loop {
        if now_ns() >= deadline {
            return true;
        }
        if more_work() {
            return false;
        }
        std::hint::spin_loop();
    }
}

/// Signals the ring's call eventfd; false if the ring has none yet (the signal is owed).
fn signal(queue: usize, ring: &VringState<GuestMem>) -> bool {
    if ring.get_call().is_none() {
        return false;
    }
    if let Err(e) = ring.signal_used_queue() {
        tracing::warn!(queue, "signal failed: {e}");
    }
    true
}

/// A completion waiting in the engine: descriptor head and used length.
type Item = (u16, u32);

/// A request whose I/O finished while the ring was being drained, not yet counted or handed to
/// the engine (that happens once per batch, under one lock of the statistics).
#[derive(Debug, Clone, Copy)]
struct Finished {
    item: Item,
    /// Index of the request's kind in the personality's names.
    kind: usize,
    read: u64,
    written: u64,
    extra_ns: u64,
    /// When its I/O finished (CLOCK_MONOTONIC).
    at_ns: u64,
}

/// State of one vring.
pub struct QueueState {
    index: usize,
    vring: Option<Vring>,
    engine: VectorEngine<Item>,
    timer: Option<DeadlineTimer>,
    armed: Option<u64>,
    stats: SharedStats,
    /// Requests finished since the last poll, in completion order.
    finished: Vec<Finished>,
    published: Vec<Item>,
    /// Inflight bookkeeping, when the frontend shared an inflight area for this queue.
    tracker: Option<Tracker>,
    /// An interrupt is due but the ring had no call eventfd (see the module documentation).
    owe_signal: bool,
    /// The statistics' histograms are allocated (at the queue's first request).
    stats_ready: bool,
}

/// Counts the finished requests and hands them to the engine in completion order, so the
/// statistics and the engine see the same sequence as if each had been handed over at once.
fn hand_over(
    finished: &mut Vec<Finished>,
    engine: &mut VectorEngine<Item>,
    stats: &mut QueueStats,
) {
    for f in finished.drain(..) {
        stats.on_request(f.kind, f.read, f.written);
        engine.submit(f.at_ns, f.item, f.extra_ns);
    }
}

impl QueueState {
    /// `vector` is the MSI-X vector number of a request queue; control and event queues get
    /// an immediate (pass-through) engine.
    pub fn new(
        index: usize,
        vector: Option<u16>,
        model: &CompletionModel,
        stats: SharedStats,
    ) -> Self {
        let engine = match vector {
            Some(v) => VectorEngine::new(model, v),
            None => VectorEngine::new(&CompletionModel::default(), 0),
        };
        // Request queues always get a timer: even a pass-through model honours per-request
        // extra delays (e.g. the SCSI scan-latency knobs).
        let timer = if vector.is_none() {
            None
        } else {
            match DeadlineTimer::new(model.spin_ns) {
                Ok(t) => Some(t),
                Err(e) => {
                    tracing::error!(
                        queue = index,
                        "no timer, completions will be immediate: {e}"
                    );
                    None
                }
            }
        };
        Self {
            index,
            vring: None,
            engine,
            timer,
            armed: None,
            stats,
            finished: Vec::with_capacity(BATCH),
            published: Vec::with_capacity(BATCH),
            tracker: None,
            owe_signal: false,
            stats_ready: false,
        }
    }

    /// Installs (or removes) this queue's inflight region; the next drain reads it first.
    pub fn set_inflight(&mut self, region: Option<QueueRegion>) {
        self.tracker = region.map(Tracker::new);
    }

    /// Whether the inflight region must be read before the ring is drained.
    pub fn recovery_pending(&self) -> bool {
        self.tracker.as_ref().is_some_and(Tracker::recovery_pending)
    }

    /// Reads the inflight region (see [`Tracker::recover`]).
    pub fn recover(&mut self, ring_size: u16, guest_used: u16) -> Option<Recovery> {
        self.tracker.as_mut()?.recover(ring_size, guest_used)
    }

    /// A chain was taken from the ring.
    pub fn on_pop(&mut self, head: u16) {
        if let Some(t) = &mut self.tracker {
            t.on_pop(head);
        }
    }

    /// Remembers the vring this queue completes into (the same object on every event).
    ///
    /// It does not prepare the statistics (that waits for the queue's first request, in
    /// [`submit`](Self::submit)): a guest starts every ring, and 01ee06a1 meant to stop this call
    /// but left it here, so every ring of a 128-queue device still allocated ~0.75 MiB of
    /// histograms when it first ran (~100 MiB of the backend's private memory at 128 queues).
    pub fn attach(&mut self, vring: &Vring) {
        if self.vring.is_none() {
            self.vring = Some(vring.clone());
        }
    }

    /// A request finished its I/O. It is counted and handed to the engine, with the time it
    /// finished, at the next [`publish`](Self::publish) (at most [`BATCH`] requests later).
    pub fn submit(
        &mut self,
        head: u16,
        used_len: u32,
        kind: usize,
        read: u64,
        written: u64,
        extra_ns: u64,
    ) {
        if !self.stats_ready {
            // The queue's first request: its statistics allocate their histograms now, once
            // (stats::Hist), not for every queue of a device whose guest drives a few.
            self.stats
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .prepare();
            self.stats_ready = true;
        }
        self.finished.push(Finished {
            item: (head, used_len),
            kind,
            read,
            written,
            extra_ns,
            at_ns: now_ns(),
        });
    }

    /// The vring this queue completes into, once a kick or a timer has attached it.
    pub fn vring(&self) -> Option<&Vring> {
        self.vring.as_ref()
    }

    /// What the queue holds, for a stall report (device::diag): completions the engine holds,
    /// those published but not signalled, the armed deadline, an owed interrupt.
    pub fn describe(&self) -> String {
        let armed = self.armed.map_or("none".into(), |d| {
            format!("{:+}us", (d as i128 - now_ns() as i128) / 1000)
        });
        format!(
            "held={} unsignalled={} finished={} timer={armed} owe_signal={}",
            self.engine.pending(),
            self.engine.unsignalled(),
            self.finished.len(),
            self.owe_signal
        )
    }

    /// Nothing is held for later publication (no timer armed, nothing pending).
    pub fn is_idle(&self) -> bool {
        self.armed.is_none() && self.engine.pending() == 0 && self.finished.is_empty()
    }

    /// Lets the engine publish what is due and signal if the interrupt is due. A next deadline
    /// closer than the timer's configured spin is not left to the timer (which would fire at
    /// once, and the worker would spin after a trip through its epoll loop): it is spun for
    /// here, until it is reached or `more_work` says the ring has new requests (then the timer
    /// is armed and the caller goes on draining).
    pub fn publish(&mut self, event_idx: bool, more_work: impl Fn() -> bool) {
        let mut next = None;
        for _ in 0..INLINE_SPINS {
            let mut out = std::mem::take(&mut self.published);
            let poll = {
                let mut stats = self.stats.lock().unwrap_or_else(|e| e.into_inner());
                hand_over(&mut self.finished, &mut self.engine, &mut stats);
                self.engine
                    .poll(now_ns(), &mut StatsSink(&mut stats), |it| out.push(it))
            };
            next = poll.next_deadline_ns;
            self.write_ring(&poll, &mut out, event_idx);
            self.published = out;
            let (Some(d), Some(timer)) = (next, &self.timer) else {
                self.arm(self.next_deadline(next));
                return;
            };
            if d.saturating_sub(now_ns()) > timer.spin_ns() || !spin_unless(d, &more_work) {
                self.arm(self.next_deadline(next));
                return;
            }
        }
        self.arm(self.next_deadline(next));
    }

    /// Writes the engine's decisions to the ring and re-arms the timer.
    fn apply(&mut self, poll: Poll, out: &mut Vec<Item>, event_idx: bool) {
        self.write_ring(&poll, out, event_idx);
        self.arm(self.next_deadline(poll.next_deadline_ns));
    }

    /// Writes the engine's decisions to the ring, under one lock of the vring.
    fn write_ring(&mut self, poll: &Poll, out: &mut Vec<Item>, event_idx: bool) {
        let mut owed = false;
        if let Some(vring) = &self.vring {
            if !out.is_empty() || poll.signal {
                let mut ring = vring.get_mut();
                for (head, len) in out.drain(..) {
                    // One used entry at a time, so that the inflight area's last batch is
                    // never more than this one chain (inflight rule 2).
                    if let Some(t) = &self.tracker {
                        t.before_used(head);
                    }
                    match ring.add_used(head, len) {
                        Ok(()) => {
                            if let Some(t) = &self.tracker {
                                t.after_used(head, ring.get_queue().next_used());
                            }
                        }
                        Err(e) => {
                            tracing::warn!(queue = self.index, "add_used({head}) failed: {e}")
                        }
                    }
                }
                if poll.signal && (!event_idx || ring.needs_notification().unwrap_or(true)) {
                    owed = !signal(self.index, &ring);
                }
            }
        } else {
            out.clear();
        }
        self.owe_signal |= owed;
    }

    /// Owes the driver one interrupt (a recovery: see the module documentation) and sends it
    /// if the ring has its call eventfd.
    pub fn owe_signal(&mut self) {
        self.owe_signal = true;
        self.pay_owed_signal();
    }

    /// Sends an owed interrupt if the call eventfd is there now; otherwise the timer retries.
    pub fn pay_owed_signal(&mut self) {
        if !self.owe_signal {
            return;
        }
        if let Some(vring) = &self.vring {
            let ring = vring.get_ref();
            if signal(self.index, &ring) {
                self.owe_signal = false;
                tracing::debug!(queue = self.index, "owed interrupt sent");
            }
        }
        if self.owe_signal {
            let retry = now_ns() + OWED_RETRY_NS;
            let next = self.armed.map_or(retry, |a| a.min(retry));
            self.arm(Some(next));
        }
    }

    /// The next deadline for the timer: the engine's, or sooner while a signal is owed.
    fn next_deadline(&self, engine: Option<u64>) -> Option<u64> {
        if !self.owe_signal {
            return engine;
        }
        let retry = now_ns() + OWED_RETRY_NS;
        Some(engine.map_or(retry, |d| d.min(retry)))
    }

    fn arm(&mut self, deadline: Option<u64>) {
        let Some(timer) = &mut self.timer else { return };
        if deadline == self.armed {
            return;
        }
        let r = match deadline {
            Some(d) => timer.arm(d),
            None => timer.disarm(),
        };
        if let Err(e) = r {
            tracing::warn!(queue = self.index, "timer: {e}");
        }
        self.armed = deadline;
    }

    /// The timer fired: wait out the last microseconds, then poll (see [`Self::publish`] for
    /// `more_work`).
    pub fn on_timer(&mut self, event_idx: bool, more_work: impl Fn() -> bool) {
        let Some(timer) = &mut self.timer else { return };
        let _ = timer.drain();
        if let Some(d) = self.armed.take() {
            // Touch what the publication will use (a worker that slept long finds its caches
            // cold), then spin out the rest.
            drop(self.stats.lock());
            if let Some(v) = &self.vring {
                drop(v.get_ref());
            }
            timer.spin_until(d);
        }
        self.pay_owed_signal();
        self.publish(event_idx, more_work);
    }

    /// Publishes and signals everything held, ignoring deadlines (ring stop, shutdown).
    pub fn flush(&mut self, event_idx: bool) {
        let mut out = std::mem::take(&mut self.published);
        let poll = {
            let mut stats = self.stats.lock().unwrap_or_else(|e| e.into_inner());
            hand_over(&mut self.finished, &mut self.engine, &mut stats);
            self.engine
                .flush(now_ns(), &mut StatsSink(&mut stats), |it| out.push(it))
        };
        self.apply(poll, &mut out, event_idx);
        self.published = out;
    }

    pub fn timer_fd(&self) -> Option<RawFd> {
        self.timer.as_ref().map(|t| t.as_raw_fd())
    }

    /// Device reset: held completions refer to the old rings and are dropped.
    pub fn reset(&mut self) {
        {
            let mut stats = self.stats.lock().unwrap_or_else(|e| e.into_inner());
            self.engine.discard(&mut StatsSink(&mut stats), |_| {});
        }
        self.arm(None);
        self.vring = None;
        self.owe_signal = false;
        self.published.clear();
        // Finished requests are only ever held while the queue's own worker drains the ring,
        // which publishes them before letting go of the queue; nothing is left here to count.
        self.finished.clear();
    }
}

#[cfg(test)]
mod tests {
    use std::fs::File;
    use std::os::fd::{FromRawFd, IntoRawFd};

    use vm_memory::GuestAddress;
    use vmm_sys_util::eventfd::EventFd;

    use super::*;

    fn state_and_vring() -> (QueueState, Vring) {
        let mem = GuestMemoryMmapT::from_ranges(&[(GuestAddress(0), 0x10000)]).unwrap();
        let vring = Vring::new(GuestMemoryAtomic::new(mem), 16).unwrap();
        let stats = Arc::new(Mutex::new(QueueStats::new(0, &["read"])));
        let mut state = QueueState::new(0, Some(0), &CompletionModel::default(), stats);
        state.attach(&vring);
        (state, vring)
    }

    fn call_eventfd(vring: &Vring) -> EventFd {
        let efd = EventFd::new(libc::EFD_NONBLOCK).unwrap();
        let dup = efd.try_clone().unwrap();
        // SAFETY: `dup` owns its descriptor, which moves into the File.
        vring.set_call(Some(unsafe { File::from_raw_fd(dup.into_raw_fd()) }));
        efd
    }

    /// A ring that runs holds no histograms until its first request (92c202eb: a guest starts
    /// every ring, and 128 rings' histograms were ~96 MiB of the backend's private memory).
    #[test]
    fn histograms_wait_for_the_first_request_not_for_the_ring() {
        let (mut state, vring) = state_and_vring();
        state.attach(&vring);
        assert!(
            !state.stats.lock().unwrap().prepared(),
            "attached, no request"
        );
        state.submit(0, 0, 0, 512, 0, 0);
        assert!(state.stats.lock().unwrap().prepared(), "first request");
    }

    #[test]
    fn a_signal_without_call_eventfd_is_owed_retried_and_sent_once_it_is_there() {
        let (mut state, vring) = state_and_vring();
        state.owe_signal();
        assert!(state.owe_signal, "no call eventfd yet: still owed");
        let retry = state.armed.expect("the timer retries an owed signal");
        assert!(retry <= now_ns() + OWED_RETRY_NS);
        let efd = call_eventfd(&vring);
        state.pay_owed_signal();
        assert!(!state.owe_signal);
        assert_eq!(efd.read().unwrap(), 1, "exactly one interrupt");
        state.pay_owed_signal();
        assert!(efd.read().is_err(), "paid once, not again");
    }

    #[test]
    fn a_recovery_with_the_call_eventfd_present_signals_at_once() {
        let (mut state, vring) = state_and_vring();
        let efd = call_eventfd(&vring);
        state.owe_signal();
        assert!(!state.owe_signal);
        assert_eq!(efd.read().unwrap(), 1);
    }

    #[test]
    fn a_reset_forgets_an_owed_signal() {
        let (mut state, _vring) = state_and_vring();
        state.owe_signal();
        state.reset();
        assert!(!state.owe_signal);
        assert_eq!(state.armed, None);
    }
}
