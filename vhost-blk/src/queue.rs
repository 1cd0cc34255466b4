//! Per-queue state owned by the queue's worker: held completions and the queue's vring.
//!
//! Completions are added to the used ring in batches and the guest is signalled once per batch
//! (subject to EVENT_IDX suppression).

use crate::backend::{RequestKind, Vring};
use vhost_user_backend::VringT;

/// Completions published per batch before the worker looks at the ring again.
const BATCH: usize = 32;

/// State of one vring.
pub struct QueueState {
    index: usize,
    /// MSI-X vector number for request queues (None for control/event queues).
    vector: Option<usize>,
    vring: Option<Vring>,
    pending: Vec<(u16, u32)>,
}

impl QueueState {
    pub fn new(index: usize, vector: Option<usize>) -> Self {
        Self {
            index,
            vector,
            vring: None,
            pending: Vec::with_capacity(BATCH),
        }
    }

    /// Remembers the vring this queue completes into (the same object on every event).
    pub fn attach(&mut self, vring: &Vring) {
        if self.vring.is_none() {
            self.vring = Some(vring.clone());
        }
    }

    pub fn index(&self) -> usize {
        self.index
    }

    pub fn vector(&self) -> Option<usize> {
        self.vector
    }

    /// A request finished its I/O.
    pub fn submit(
        &mut self,
        head: u16,
        used_len: u32,
        _kind: RequestKind,
        _bytes: u64,
        _extra_ns: u64,
    ) {
        self.pending.push((head, used_len));
    }

    pub fn should_flush_batch(&self) -> bool {
        self.pending.len() >= BATCH
    }

    /// Adds pending completions to the used ring and signals the guest if it wants it.
    pub fn publish(&mut self, event_idx: bool) {
        if self.pending.is_empty() {
            return;
        }
        let Some(vring) = &self.vring else { return };
        for (head, len) in self.pending.drain(..) {
            if let Err(e) = vring.add_used(head, len) {
                tracing::warn!(queue = self.index, "add_used failed: {e}");
            }
        }
        if !event_idx || vring.needs_notification().unwrap_or(true) {
            if let Err(e) = vring.signal_used_queue() {
                tracing::warn!(queue = self.index, "signal failed: {e}");
            }
        }
    }

    /// Publishes everything held now.
    pub fn flush(&mut self, event_idx: bool) {
        self.publish(event_idx);
    }

    pub fn on_timer(&mut self, event_idx: bool) {
        self.publish(event_idx);
    }

    pub fn timer_fd(&self) -> Option<std::os::fd::RawFd> {
        None
    }

    /// Device reset: held completions refer to the old rings and are dropped.
    pub fn reset(&mut self) {
        self.pending.clear();
        self.vring = None;
    }
}
