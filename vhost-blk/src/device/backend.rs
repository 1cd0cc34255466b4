//! The vhost-user backend: one `VhostUserBackend` generic over a device [`Personality`].
//!
//! Queues are served by worker threads, one per queue by default (`Config::worker_groups`):
//! vhost-user-backend's for the groups of vrings its `u64` masks can hold, ours
//! ([`super::workers`]) for the rest; both call the same `handle_event`. Each queue has its own state behind its own mutex,
//! locked only by the worker that owns the queue (and briefly by the control thread when the
//! ring is stopped), so queues never wait for each other. Nothing here knows about blk or SCSI
//! requests: the personality turns a descriptor chain into an [`Outcome`], and the queue's
//! completion path decides when the used entry is published and the guest is interrupted.
//!
//! A worker serving several queues (virtio-scsi's control, event and first request queue share
//! worker 0; any device with fewer `--threads` than queues) gives each its turn: a queue with
//! work left after one batch notifies its own "resume" eventfd and returns to the epoll loop,
//! which serves the other ready queues (and timers) first. Without that, one busy request
//! queue starves the queues beside it: a task management function goes unanswered and
//! event-queue buffers are not taken (GET_VRING_BASE then reports them unconsumed).

use std::io;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, TryLockError};

use smallvec::SmallVec;

use vhost::vhost_user::message::{VhostUserProtocolFeatures, VhostUserVirtioFeatures};
use vhost_user_backend::{VhostUserBackend, VringT};
use virtio_queue::QueueT;
use vm_memory::GuestAddressSpace;
use vmm_sys_util::epoll::EventSet;
use vmm_sys_util::event::{EventConsumer, EventNotifier};
use vmm_sys_util::eventfd::{EventFd, EFD_NONBLOCK};

use super::chain::Chain;
use super::chain::GuestMemoryMmapT;
use super::diag::{self, QueueCounters};
use super::exit_events::ExitEvents;
use super::inflight::{InflightArea, RecoveryGate};
use super::personality::{Outcome, Personality, RequestKind};
use super::queue::{GuestMem, QueueState, SharedStats, Vring, BATCH};
use super::resubmit::{within_guest_ram, Scratch};
use super::workers::{OwnThread, OwnWorkers, ThreadPlan, CRATE_VRINGS};
use vhost_blk_completion::CompletionModel;

// The `VhostUserBackend` trait's methods (what vhost-user-backend calls), over the state and
// the worker turns of this file: a child module, so it reaches their private parts.
mod vhost_user;
// The rings our own worker threads serve: their vring messages (from the relay) and threads.
mod own;
pub use own::RingError;

/// Settings of the vhost-user layer.
#[derive(Debug, Clone)]
pub struct BackendOptions {
    pub queue_size: u16,
    /// The completion-latency model of the request queues.
    pub model: CompletionModel,
    /// The vrings of each worker thread (`Config::worker_groups`).
    pub groups: Vec<Vec<usize>>,
    /// Offer VHOST_USER_PROTOCOL_F_INFLIGHT_SHMFD. Only when something in front of the
    /// vhost-user-backend handler answers GET/SET_INFLIGHT_FD and calls
    /// [`DeviceBackend::set_inflight`] (the daemon's relay does).
    pub inflight: bool,
}

/// What the backend keeps of one queue.
struct QueueSlot {
    state: Mutex<QueueState>,
    /// Notified by its worker when the queue gives up its turn with work left (see the module
    /// documentation); registered with that worker's epoll loop.
    resume: EventFd,
    /// Kick events and drains seen (device::diag).
    counters: QueueCounters,
}

impl QueueSlot {
    /// Locks the queue's state. Only its own worker contends for it.
    fn lock(&self) -> MutexGuard<'_, QueueState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The vhost-user backend of one connection.
pub struct DeviceBackend<P: Personality> {
    personality: Arc<P>,
    mem: GuestMem,
    opts: BackendOptions,
    /// Which thread serves each vring (device::workers, rule 1).
    plan: ThreadPlan,
    /// Our own worker threads' state, by thread id minus the crate's thread count.
    own: Vec<Arc<OwnThread>>,
    /// Per vring: (index into `own`, local index) if one of our threads serves it.
    own_at: Vec<Option<(usize, usize)>>,
    /// Per queue, by global index: its state, resume eventfd and counters.
    queues: Vec<QueueSlot>,
    event_idx: AtomicBool,
    acked_features: AtomicU64,
    /// The workers' exit events (vhost-user-backend leaves their read ends open).
    exit_events: ExitEvents,
    /// The queue that `completes_after_requests`, and its recovery gate (inflight rule 5).
    gated: Option<usize>,
    gate: RecoveryGate,
}

impl<P: Personality> DeviceBackend<P> {
    pub fn new(
        personality: Arc<P>,
        mem: GuestMem,
        opts: BackendOptions,
        stats: &[SharedStats],
    ) -> io::Result<Self> {
        let n = personality.num_queues();
        assert!(n <= super::MAX_VRINGS, "validated by the configuration");
        let plan = ThreadPlan::new(&opts.groups, n);
        if stats.len() < n {
            return Err(io::Error::other(format!(
                "statistics for {} queues, the device has {n}",
                stats.len()
            )));
        }
        let first = personality.first_request_queue();
        let queues = stats
            .iter()
            .take(n)
            .enumerate()
            .map(|(q, stats)| -> io::Result<QueueSlot> {
                let vector = q.checked_sub(first).map(|v| v as u16);
                Ok(QueueSlot {
                    state: Mutex::new(QueueState::new(q, vector, &opts.model, stats.clone())),
                    resume: EventFd::new(EFD_NONBLOCK)?,
                    counters: QueueCounters::default(),
                })
            })
            .collect::<io::Result<_>>()?;
        let gated = (0..n).find(|&q| personality.completes_after_requests(q));
        let own = plan
            .own()
            .map(|(id, qs)| OwnThread::new(id, qs, &mem, opts.queue_size).map(Arc::new))
            .collect::<io::Result<Vec<_>>>()?;
        let mut own_at = vec![None; n];
        for (t, thread) in own.iter().enumerate() {
            for (l, &q) in plan
                .queues(thread.id())
                .unwrap_or_default()
                .iter()
                .enumerate()
            {
                if let Some(at) = own_at.get_mut(q) {
                    *at = Some((t, l));
                }
            }
        }
        let me = Self {
            personality,
            mem,
            opts,
            plan,
            own,
            own_at,
            queues,
            event_idx: AtomicBool::new(false),
            acked_features: AtomicU64::new(0),
            exit_events: ExitEvents::default(),
            gated,
            gate: RecoveryGate::new(n),
        };
        me.register_own_listeners()?;
        Ok(me)
    }

    pub fn personality(&self) -> &Arc<P> {
        &self.personality
    }

    /// One line per queue for a stall report: its ring as guest memory has it, what its state
    /// holds and its kick/drain counts (device::diag rules). Never waits for a worker's state
    /// lock; it does take each attached vring's read lock, which workers hold only briefly.
    pub fn ring_report(&self) -> Vec<String> {
        let mem = self.mem.memory();
        self.queues
            .iter()
            .enumerate()
            .map(|(q, slot)| {
                let c = &slot.counters;
                let counts = format!(
                    "kicks={} drains={}",
                    c.kicks.load(Ordering::Relaxed),
                    c.drains.load(Ordering::Relaxed)
                );
                let line = |state: &QueueState| match state.vring() {
                    Some(v) => format!(
                        "queue {q}: {} {counts} {}",
                        diag::ring_line(v, &mem),
                        state.describe()
                    ),
                    None => format!("queue {q}: never kicked (no vring attached) {counts}"),
                };
                match slot.state.try_lock() {
                    Ok(state) => line(&state),
                    Err(TryLockError::Poisoned(e)) => line(&e.into_inner()),
                    Err(TryLockError::WouldBlock) => {
                        format!("queue {q}: state locked by its worker (inside a drain) {counts}")
                    }
                }
            })
            .collect()
    }

    /// Installs the inflight area the frontend sent with SET_INFLIGHT_FD (or none): each queue
    /// it covers reads its region before its next drain and resubmits what was in flight.
    pub fn set_inflight(&self, area: Option<Arc<InflightArea>>) {
        self.personality
            .attach_state(area.as_ref().and_then(InflightArea::state));
        for (q, slot) in self.queues.iter().enumerate() {
            let region = area.as_ref().and_then(|a| a.queue(q));
            slot.lock().set_inflight(region);
        }
    }

    /// The relay saw SET_VRING_KICK for queue `q` (before passing it on): a request queue
    /// that will recover first holds the gated queue's recovery back (inflight rule 5).
    pub fn ring_starting(&self, q: usize) {
        let Some(slot) = self.queues.get(q) else {
            return;
        };
        let request = q >= self.personality.first_request_queue() && Some(q) != self.gated;
        if request && slot.lock().recovery_pending() {
            self.gate.starting(q);
        }
    }

    /// Queue `q` no longer holds the gate (it recovered, or its ring stopped); wakes the
    /// gated queue if it was the last.
    fn gate_done(&self, q: usize) {
        if let (true, Some(g)) = (self.gate.done(q), self.gated) {
            tracing::debug!(
                queue = g,
                "request queues recovered: waking the gated queue"
            );
            self.pass_turn(g);
        }
    }

    /// Has the personality handle one chain and hands its completion to the queue.
    fn handle_chain(&self, q: usize, chain: Chain<'_>, state: &mut QueueState, event_idx: bool) {
        let head = chain.head_index();
        if let Outcome::Complete {
            used_len,
            kind,
            bytes,
            extra_delay_ns,
        } = self.personality.process(q, chain)
        {
            if self.personality.completes_after_requests(q) {
                self.flush_request_queues(q, event_idx);
            }
            let (read, written) = kind.payload(bytes);
            state.submit(head, used_len, kind.index(), read, written, extra_delay_ns);
        }
    }

    /// Before the first drain after SET_INFLIGHT_FD: reads queue `q`'s inflight region, sets
    /// the ring's next available index past what the previous backend took, and processes
    /// again, in their original order, the chains it had not returned (see `inflight`).
    fn recover(
        &self,
        q: usize,
        vring: &Vring,
        mem: &GuestMemoryMmapT,
        state: &mut QueueState,
        event_idx: bool,
    ) {
        let (ring_size, used, desc_table) = {
            let ring = vring.get_ref();
            let queue = ring.get_queue();
            let used = queue.used_idx(mem, Ordering::Acquire).map(|w| w.0);
            (queue.size(), used, queue.desc_table())
        };
        let Ok(guest_used) = used else {
            tracing::warn!(queue = q, "used ring unreadable: inflight tracking off");
            state.set_inflight(None);
            return;
        };
        let Some(rec) = state.recover(ring_size, guest_used) else {
            return;
        };
        {
            let mut ring = vring.get_mut();
            let queue = ring.get_queue_mut();
            queue.set_next_avail(rec.next_avail);
            queue.set_next_used(guest_used);
        }
        let call = vring.get_ref().get_call().is_some();
        state.owe_signal();
        if rec.resubmit.is_empty() && rec.repaired == 0 && rec.discarded == 0 {
            return;
        }
        tracing::info!(
            queue = q,
            call,
            resubmit = rec.resubmit.len(),
            repaired = rec.repaired,
            discarded = rec.discarded,
            used = guest_used,
            next_avail = rec.next_avail,
            "inflight requests of the previous backend"
        );
        if rec.resubmit.is_empty() {
            return;
        }
        let mut scratch = match Scratch::new(mem, desc_table, ring_size, &rec.resubmit) {
            Ok(s) => s,
            Err(e) => {
                tracing::error!(queue = q, "cannot resubmit: {e}");
                return;
            }
        };
        for chain in scratch.chains() {
            if within_guest_ram(&chain, mem) {
                self.handle_chain(q, chain, state, event_idx);
            } else {
                tracing::debug!(
                    queue = q,
                    "resubmitted chain {} refused",
                    chain.head_index()
                );
                state.submit(chain.head_index(), 0, P::Kind::ERROR.index(), 0, 0, 0);
            }
        }
        state.publish(event_idx, || avail_pending(vring, mem));
    }

    /// Ends the turn of queue `q` with work left: its worker's epoll loop calls it again after
    /// the other ready events. False if the eventfd could not be written, or there is no such
    /// queue (then the caller keeps going, as a worker serving only this queue does).
    fn pass_turn(&self, q: usize) -> bool {
        let Some(slot) = self.queues.get(q) else {
            return false;
        };
        match slot.resume.write(1) {
            Ok(()) => true,
            Err(e) => {
                tracing::warn!(queue = q, "resume eventfd: {e}");
                false
            }
        }
    }

    /// Drains vring `q` ([`Self::drain`]) and decides whether to drain again
    /// ([`Self::after_drain`]) until the ring stays empty with notifications on, or the queue
    /// passes its turn (`shared`: the worker serves other queues too; module documentation).
    fn process_queue(&self, q: usize, vring: &Vring, shared: bool) {
        let mem = self.mem.memory();
        let event_idx = self.event_idx.load(Ordering::Relaxed);
        // `q` is one of the worker's own queues, all below the device's count.
        let Some(slot) = self.queues.get(q) else {
            tracing::warn!(queue = q, "no such queue");
            return;
        };
        slot.counters.drain();
        let mut state = slot.lock();
        state.attach(vring);
        if state.recovery_pending() {
            if Some(q) == self.gated && !self.gate.may_pass() {
                // Inflight rule 5: its turn comes back when the last request queue recovered.
                return;
            }
            self.recover(q, vring, &mem, &mut state, event_idx);
            self.gate_done(q);
        }
        state.pay_owed_signal();
        let turn = Turn {
            q,
            slot,
            vring,
            mem: &mem,
            shared,
            event_idx,
        };
        loop {
            if event_idx {
                // Fails only if the ring addresses are bad; then nothing can be done anyway.
                let _ = vring.disable_notification();
            }
            let processed = self.drain(&turn, &mut state);
            let after;
            (state, after) = self.after_drain(&turn, state, processed);
            if after == After::Leave {
                return;
            }
        }
    }

    /// Pops chains [`BATCH`] at a time under one vring lock, handles and publishes each batch,
    /// until the ring is empty (`shared`: after one batch). Whether any chain was handled.
    fn drain(&self, t: &Turn<'_>, state: &mut QueueState) -> bool {
        let Turn {
            q,
            vring,
            mem,
            shared,
            event_idx,
            ..
        } = *t;
        let mut chains: SmallVec<[Chain; BATCH]> = SmallVec::new();
        let mut processed = false;
        loop {
            {
                let mut ring = vring.get_mut();
                let queue = ring.get_queue_mut();
                while chains.len() < BATCH {
                    let Some(chain) = queue.pop_descriptor_chain(mem) else {
                        break;
                    };
                    // Marked in pop order, before anything is done with it.
                    state.on_pop(chain.head_index());
                    chains.push(chain);
                }
            }
            if chains.is_empty() {
                return processed;
            }
            processed = true;
            for chain in chains.drain(..) {
                self.handle_chain(q, chain, state, event_idx);
            }
            state.publish(event_idx, || avail_pending(vring, mem));
            if shared {
                return true; // one batch per turn
            }
        }
    }

    /// After a drain: drain again or leave (sleep in epoll, or pass the turn). Before sleeping
    /// the worker yields the CPU once (the driver's thread, often runnable half-way through
    /// queueing more, finishes: a sleep, a wake-up and a kick read saved), only when no timer
    /// deadline is pending, and with the queue's lock let go (hence the guard goes in and
    /// out): the control thread must not wait for another thread's time slice. A shared worker
    /// leaves after one batch with work left, only after progress (a ring that yields nothing
    /// must not come back forever).
    fn after_drain<'s>(
        &self,
        t: &Turn<'s>,
        mut state: MutexGuard<'s, QueueState>,
        processed: bool,
    ) -> (MutexGuard<'s, QueueState>, After) {
        let Turn {
            q,
            slot,
            vring,
            mem,
            shared,
            event_idx,
        } = *t;
        if processed && state.is_idle() {
            drop(state);
            let more = yield_then_look(vring, mem);
            state = slot.lock();
            state.attach(vring);
            if more {
                return (state, self.again_or_pass(q, shared));
            }
        }
        if shared && processed && avail_pending(vring, mem) {
            return (state, self.again_or_pass(q, true));
        }
        if !event_idx {
            return (state, After::Leave);
        }
        let after = match vring.enable_notification() {
            // The driver queued more while notifications were off.
            Ok(true) => self.again_or_pass(q, shared && processed),
            _ => After::Leave,
        };
        (state, after)
    }

    /// More work: drain again, or (`pass`) pass the turn unless the resume eventfd fails.
    fn again_or_pass(&self, q: usize, pass: bool) -> After {
        if pass && self.pass_turn(q) {
            After::Leave
        } else {
            After::Drain
        }
    }
}

/// One call of [`DeviceBackend::process_queue`]: queue (index and parts), ring, guest memory,
/// shared, event_idx.
#[derive(Clone, Copy)]
struct Turn<'a> {
    q: usize,
    slot: &'a QueueSlot,
    vring: &'a Vring,
    mem: &'a GuestMemoryMmapT,
    shared: bool,
    event_idx: bool,
}

/// What a worker does after one drain of its ring.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum After {
    /// Drain again.
    Drain,
    /// Back to the epoll loop (asleep until a kick, or until its next turn).
    Leave,
}

/// Whether the driver has made a chain available that the device has not popped yet.
fn avail_pending(vring: &Vring, mem: &GuestMemoryMmapT) -> bool {
    let ring = vring.get_ref();
    let queue = ring.get_queue();
    matches!(queue.avail_idx(mem, Ordering::Acquire), Ok(idx) if idx.0 != queue.next_avail())
}

/// Gives the CPU to whoever else is runnable (typically the driver's thread, still queueing the
/// requests whose first kick woke this worker), then looks at the ring once more.
fn yield_then_look(vring: &Vring, mem: &GuestMemoryMmapT) -> bool {
    // SAFETY: sched_yield takes no arguments and cannot fail on Linux.
    unsafe { libc::sched_yield() };
    avail_pending(vring, mem)
}

impl<P: Personality> DeviceBackend<P> {
    /// Registers each queue's completion timer and resume eventfd with its worker's epoll loop,
    /// for the threads vhost-user-backend runs (ours: `new`).
    pub fn register_listeners(
        &self,
        handlers: &[Arc<vhost_user_backend::VringEpollHandler<Arc<Self>>>],
    ) -> io::Result<()> {
        if handlers.len() < self.plan.crate_threads() {
            return Err(io::Error::other(format!(
                "{} epoll handlers for {} worker threads",
                handlers.len(),
                self.plan.crate_threads()
            )));
        }
        for (queues, handler) in self.plan.groups().iter().zip(handlers) {
            for (fd, data) in self.listeners(queues) {
                handler.register_listener(fd, EventSet::IN, data)?;
            }
        }
        Ok(())
    }

    /// The timer and resume eventfds of `queues`, each with its event data (`handle_event`:
    /// timer n + 1 + q, resume 2 n + 1 + q).
    fn listeners(&self, queues: &[usize]) -> Vec<(std::os::fd::RawFd, u64)> {
        let n = self.personality.num_queues();
        let mut out = Vec::new();
        // The plan holds only queues below the device's count (`ThreadPlan::new`).
        for (q, slot) in queues
            .iter()
            .filter_map(|&q| Some((q, self.queues.get(q)?)))
        {
            if let Some(fd) = slot.lock().timer_fd() {
                out.push((fd, (n + 1 + q) as u64));
            }
            out.push((slot.resume.as_raw_fd(), (2 * n + 1 + q) as u64));
        }
        out
    }

    /// Publishes what every request queue but `except` holds (with `except`'s lock held: the
    /// workers lock only their own queue, so this waits at most for one drain, never deadlocks).
    fn flush_request_queues(&self, except: usize, event_idx: bool) {
        let first = self.personality.first_request_queue();
        for (r, slot) in self.queues.iter().enumerate().skip(first) {
            if r != except {
                slot.lock().flush(event_idx);
            }
        }
    }

    /// Closes the exit-event descriptors vhost-user-backend leaves open; call once
    /// `VhostUserDaemon::new` has returned (device::exit_events, rule 2).
    pub fn close_leaked_exit_fds(&self) -> usize {
        self.exit_events.close_consumers()
    }

    /// Publishes all held completions on every queue (used at shutdown).
    pub fn flush_all(&self) {
        let event_idx = self.event_idx.load(Ordering::Relaxed);
        for slot in &self.queues {
            slot.lock().flush(event_idx);
        }
    }
}
