//! The rings our own worker threads serve (device::workers): their vring messages, which the
//! daemon's relay hands over, and the threads themselves. What vhost-user-backend's handler
//! does for its rings is done here for ours, by the same rules (the ring starts with a kick
//! eventfd, its kick is polled while it is started and enabled, GET_VRING_BASE stops it and
//! flushes what the completion model holds).

use std::fs::File;

use super::*;
use crate::device::workers::RingMsg;

/// A vring message for one of our rings that cannot be applied. The relay ends the
/// connection, as vhost-user-backend's handler does when it refuses a message.
#[derive(Debug, thiserror::Error)]
pub enum RingError {
    #[error("vring {0} is not served by vhost-blk's own threads")]
    NotOwn(usize),
    #[error("vring {q}: size {num} not in 1..={max}")]
    Size { q: usize, num: u16, max: u16 },
    #[error("vring {q}: ring addresses refused: {why}")]
    Addr { q: usize, why: String },
    #[error("vring {q}: epoll registration: {source}")]
    Epoll { q: usize, source: io::Error },
}

impl<P: Personality> DeviceBackend<P> {
    /// Registers the timers and resume eventfds of our threads' queues (from `new`).
    pub(super) fn register_own_listeners(&self) -> io::Result<()> {
        for t in &self.own {
            let queues = self.plan.queues(t.id()).unwrap_or_default();
            for (fd, data) in self.listeners(queues) {
                t.add_listener(fd, data)?;
            }
        }
        Ok(())
    }

    /// Starts our worker threads (none when vhost-user-backend serves every ring); they run
    /// until the returned value is dropped (device::workers, rule 5).
    pub fn start_own_workers(self: &Arc<Self>) -> io::Result<OwnWorkers> {
        let me = self.clone();
        OwnWorkers::spawn(&self.own, move |t| {
            t.run(|ev, set, vrings| me.handle_event(ev, set, vrings, t.id()))
        })
    }

    /// Whether vring `q` is served by one of our threads: its messages come here, not to the
    /// crate's handler.
    pub fn is_own_ring(&self, q: usize) -> bool {
        matches!(self.own_at.get(q), Some(Some(_)))
    }

    /// Our thread serving `q` and `q`'s local index there.
    fn own_ring(&self, q: usize) -> Result<(&OwnThread, usize), RingError> {
        let (t, l) = self
            .own_at
            .get(q)
            .copied()
            .flatten()
            .ok_or(RingError::NotOwn(q))?;
        let thread = self.own.get(t).ok_or(RingError::NotOwn(q))?;
        Ok((thread, l))
    }

    /// Applies a vring message to our ring `q` (device::workers rules 2 and 3).
    pub fn own_ring_message(&self, q: usize, msg: RingMsg) -> Result<(), RingError> {
        let (t, l) = self.own_ring(q)?;
        let vring = t.vring(l).ok_or(RingError::NotOwn(q))?;
        match msg {
            RingMsg::Num(num) => {
                let max = self.opts.queue_size;
                if num == 0 || num > max {
                    return Err(RingError::Size { q, num, max });
                }
                vring.set_queue_size(num);
            }
            RingMsg::Addr { desc, avail, used } => {
                vring
                    .set_queue_info(desc, avail, used)
                    .map_err(|e| RingError::Addr {
                        q,
                        why: e.to_string(),
                    })?;
                // As the crate does: after a guest reboot the used index starts where the
                // driver's used ring says, not where this ring left it.
                let idx = vring.queue_used_idx().map_err(|e| RingError::Addr {
                    q,
                    why: format!("used index unreadable: {e}"),
                })?;
                vring.set_queue_next_used(idx);
            }
            RingMsg::Base(base) => vring.set_queue_next_avail(base),
            RingMsg::Kick(file) => {
                // The old kick eventfd leaves the epoll before it is closed (rule 2).
                t.unregister(l)
                    .map_err(|source| RingError::Epoll { q, source })?;
                vring.set_kick(file);
                self.start_if_ready(q, t, l, vring)?;
            }
            RingMsg::Call(file) => {
                vring.set_call(file);
                self.start_if_ready(q, t, l, vring)?;
            }
            RingMsg::Err(file) => vring.set_err(file),
            RingMsg::Enable(on) => {
                vring.set_enabled(on);
                self.update_own(q, t, l)?;
            }
        }
        Ok(())
    }

    /// The crate's rule: a ring with a kick eventfd that is not ready yet becomes ready.
    fn start_if_ready(
        &self,
        q: usize,
        t: &OwnThread,
        l: usize,
        vring: &Vring,
    ) -> Result<(), RingError> {
        let start = {
            let r = vring.get_ref();
            !r.get_queue().ready() && r.get_kick().is_some()
        };
        if start {
            vring.set_queue_ready(true);
        }
        self.update_own(q, t, l)
    }

    /// Rule 2 for ring `q`, and rule 3's turn when its kick eventfd went in.
    fn update_own(&self, q: usize, t: &OwnThread, l: usize) -> Result<(), RingError> {
        if t.update(l)
            .map_err(|source| RingError::Epoll { q, source })?
        {
            self.pass_turn(q);
        }
        Ok(())
    }

    /// GET_VRING_BASE for our ring `q`: stops it (out of the epoll, held completions
    /// published) and returns the next available index; the kick and call eventfds go.
    pub fn own_ring_stop(&self, q: usize) -> Result<u16, RingError> {
        let (t, l) = self.own_ring(q)?;
        let vring = t.vring(l).ok_or(RingError::NotOwn(q))?;
        vring.set_queue_ready(false);
        t.update(l)
            .map_err(|source| RingError::Epoll { q, source })?;
        // Never fails: flushes and releases the recovery gate.
        let _ = VhostUserBackend::stop_vring(self, q as u32);
        let next_avail = vring.queue_next_avail();
        vring.set_kick(None::<File>);
        vring.set_call(None::<File>);
        Ok(next_avail)
    }

    /// Enables or disables every ring of ours (SET_FEATURES without the protocol features;
    /// a device reset).
    pub(super) fn own_rings_enable(&self, on: bool) {
        for thread in &self.own {
            let queues = self.plan.queues(thread.id()).unwrap_or_default();
            for (l, (vring, &q)) in thread.vrings().iter().zip(queues).enumerate() {
                vring.set_enabled(on);
                if let Err(e) = self.update_own(q, thread, l) {
                    tracing::warn!("{e}");
                }
            }
        }
    }

    /// EVENT_IDX negotiated (or not) on every ring of ours.
    pub(super) fn own_rings_event_idx(&self, on: bool) {
        for thread in &self.own {
            for vring in thread.vrings() {
                vring.set_queue_event_idx(on);
            }
        }
    }
}
