//! The MSI-X completion-latency and interrupt-coalescing engine.
//!
//! Device-free: it takes opaque items and CLOCK_MONOTONIC times in nanoseconds and returns
//! decisions ([`Poll`]: what was published, whether to signal, when to poll again), reporting
//! each one as it is taken to an [`EngineSink`] supplied by the caller. It knows nothing of
//! virtio, blk, SCSI, statistics or the command line: it depends only on [`vhost_blk_units`].
//! Each queue worker owns one [`VectorEngine`] (no sharing, no lock across queues) plus one
//! [`DeadlineTimer`].
//!
//! # Timing model
//! For each request, in one vector (queue):
//! 1. **Service.** The worker calls [`VectorEngine::submit`] when the request's I/O has finished.
//!    The completion becomes due for publication after a *service time* drawn from the vector's
//!    service distribution, plus the caller's `extra_delay_ns`. `poll` publishes due completions
//!    (the caller writes the used ring) in deadline order, FIFO among equal deadlines.
//! 2. **Interrupt.** Completions published and not yet covered by an interrupt form a *batch*.
//!    When a batch opens (its first completion is published, at time `t0` = the `now` of the
//!    `poll` that published it), one *MSI-X latency* `L` is drawn for that interrupt. The MSI-X
//!    latency is therefore measured from the actual publication of the oldest un-signalled
//!    completion, so a late service wake-up never eats into the interrupt delay.
//! 3. **Coalescing** (when in force for the batch) can only hold the interrupt longer: its trigger
//!    is the earlier of "the batch reached `max_batch`" (the publication that filled it) and
//!    `t0 + max_delay`. The interrupt is due at `max(t0 + L, trigger)`. Without coalescing it is due
//!    at `t0 + L`. (Why `max` and not `trigger + L`: `L` stays "the minimum completion-to-interrupt
//!    delay of every completion", whatever the coalescing, which is the quantity under study.)
//! 4. **Aligned tick.** With `aligned_tick_ns = T` the due time is rounded *up* to a multiple of
//!    `T` on the absolute monotonic clock, so every vector of every queue releases on the same
//!    instants without shared state: the worst case for concurrent irq threads.
//! 5. `poll` at or after the due time returns `signal: true` (the caller writes the call eventfd);
//!    the interrupt covers every completion published until then, including ones published in
//!    the same `poll`.
//!
//! # Presets (megaraid_sas `perf_mode`)
//! `latency`: no coalescing anywhere. `iops`: coalescing on every queue (the configured one, or
//! [`model::PRESET_COALESCE`]). `balanced`: the same coalescing, but a queue uses it only while it
//! is busy: completions are counted over fixed windows of `rate_window_ns`, and a queue whose
//! last window reached `balanced_threshold_iops` coalesces the batches it opens during the next
//! window (megaraid steers busy devices to its coalescing "high-IOPS" reply queues). A per-vector
//! `coalesce` override always wins.
//!
//! # Randomness
//! One `seed` for the device; each vector draws service times and MSI-X latencies from two
//! separate ChaCha8 streams derived from it (see [`engine::stream_rng`]). With the same seed and the
//! same submission times, the schedule (publication and signal times) is identical.
//!
//! # Pass-through
//! All zero and no coalescing or tick ([`VectorEngine::is_passthrough`]): `poll` right after
//! `submit` publishes and signals at once and never asks for a timer; the pending queue keeps its
//! capacity, so there is no allocation per request.
//!
//! # Timing on a real clock
//! [`DeadlineTimer`] is a timerfd armed with absolute deadlines, `spin_ns` early, or earlier by
//! what it learned of its own lateness for waits of that length ([`wake::WakeLearner`]: a
//! timerfd wakes ~20 us late on the development host after short waits, ~40 us after 1 ms
//! waits); the worker spins the rest ([`DeadlineTimer::spin_until`]) and then polls. A deadline
//! closer than that lead is not slept for at all: the device layer spins for it where it is
//! (watching its ring for new requests meanwhile). See [`model::DEFAULT_SPIN_NS`] for the
//! measured effect of the spin. (Timer
//! slack does not apply to a timerfd; [`timer::set_current_thread_timer_slack`] is for workers
//! that sleep on epoll timeouts instead.)
//!
//! Worker loop sketch: on a request: do the I/O, `submit(now_ns(), item, 0)`, then
//! `poll(now_ns(), sink, ..)`; on a timer wake: `drain`, `spin_until(deadline)`, `poll`; after
//! every poll: on `signal` write the call eventfd; `arm(next)` or `disarm()`. The sink (in this
//! crate, the device layer's adapter over the queue's statistics) sees every publication,
//! interrupt and discard.

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

pub mod distribution;
pub mod engine;
pub mod model;
pub mod timer;
pub mod wake;

#[cfg(test)]
mod tests;

pub use distribution::{parse_duration_ns, Distribution, DistributionError};
pub use engine::{EngineSink, Poll, VectorEngine};
pub use model::{Coalesce, CompletionModel, ModelError, PerfMode, VectorOverride, VectorSettings};
pub use timer::{now_ns, DeadlineTimer, TimerError};
