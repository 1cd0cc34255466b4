//! [`VhostUserBackend`] for [`DeviceBackend`]: what vhost-user-backend's handler and workers
//! call (features, configuration space, ring stops, each worker's events), over the state and
//! worker turns of the parent module.

use super::*;

impl<P: Personality> VhostUserBackend for DeviceBackend<P> {
    type Bitmap = ();
    type Vring = Vring;

    fn num_queues(&self) -> usize {
        // The vrings the crate keeps; those past it are ours (device::workers).
        self.personality.num_queues().min(CRATE_VRINGS)
    }

    fn max_queue_size(&self) -> usize {
        usize::from(self.opts.queue_size)
    }

    fn features(&self) -> u64 {
        self.personality.features() | VhostUserVirtioFeatures::PROTOCOL_FEATURES.bits()
    }

    fn acked_features(&self, features: u64) {
        // Only vhost-user-backend's handler thread calls this (SET_FEATURES): the first of
        // our code it runs (sandbox, rule 2).
        vhost_blk_sandbox::enter(vhost_blk_sandbox::ThreadKind::Handler);
        self.acked_features.store(features, Ordering::Relaxed);
        self.personality.acked_features(features);
        if features & VhostUserVirtioFeatures::PROTOCOL_FEATURES.bits() == 0 {
            // Without the protocol features every ring is enabled at once (the crate does
            // this for its rings).
            self.own_rings_enable(true);
        }
    }

    fn protocol_features(&self) -> VhostUserProtocolFeatures {
        let f = VhostUserProtocolFeatures::MQ
            | VhostUserProtocolFeatures::CONFIG
            | VhostUserProtocolFeatures::REPLY_ACK
            | VhostUserProtocolFeatures::CONFIGURE_MEM_SLOTS;
        if self.opts.inflight {
            f | VhostUserProtocolFeatures::INFLIGHT_SHMFD
        } else {
            f
        }
    }

    fn reset_device(&self) {
        tracing::debug!(personality = self.personality.name(), "device reset");
        self.personality.reset();
        for slot in &self.queues {
            slot.lock().reset();
        }
        self.gate.clear();
        self.event_idx.store(false, Ordering::Relaxed);
        self.own_rings_enable(false);
    }

    fn set_event_idx(&self, enabled: bool) {
        self.event_idx.store(enabled, Ordering::Relaxed);
        self.own_rings_event_idx(enabled);
    }

    fn get_config(&self, offset: u32, size: u32) -> Vec<u8> {
        let cfg = self.personality.config_space();
        let start = (offset as usize).min(cfg.len());
        let end = start.saturating_add(size as usize).min(cfg.len());
        let mut out = cfg.get(start..end).unwrap_or_default().to_vec();
        out.resize(size as usize, 0);
        out
    }

    fn set_config(&self, offset: u32, buf: &[u8]) -> io::Result<()> {
        self.personality.set_config(offset, buf)
    }

    fn update_memory(&self, _mem: GuestMem) -> io::Result<()> {
        // `self.mem` is a clone of the same atomic the handler just updated.
        Ok(())
    }

    fn queues_per_thread(&self) -> Vec<u64> {
        self.plan.crate_masks()
    }

    fn exit_event(&self, _thread_index: usize) -> Option<(EventConsumer, EventNotifier)> {
        // Each worker gets its own kill eventfd; the handler keeps the notifier.
        self.exit_events.create()
    }

    fn stop_vring(&self, queue_index: u32) -> io::Result<()> {
        // Completions still held by the latency model belong to requests the device finished:
        // publish them before the ring is handed back.
        let q = queue_index as usize;
        if let Some(slot) = self.queues.get(q) {
            let event_idx = self.event_idx.load(Ordering::Relaxed);
            slot.lock().flush(event_idx);
            // A stopped ring recovers (if ever) after its next SET_VRING_KICK.
            self.gate_done(q);
        }
        Ok(())
    }

    fn handle_event(
        &self,
        device_event: u16,
        _evset: EventSet,
        vrings: &[Vring],
        thread_id: usize,
    ) -> io::Result<()> {
        // A worker's first event is the first of our code it runs (sandbox, rule 2); once
        // per thread, then a thread-local flag.
        vhost_blk_sandbox::enter(vhost_blk_sandbox::ThreadKind::Worker);
        let n = self.personality.num_queues();
        let Some(mine) = self.plan.queues(thread_id) else {
            return Ok(());
        };
        let ev = usize::from(device_event);
        let shared = mine.len() > 1;
        // The worker's own queue `q`, with its vring (vrings are in the order of `mine`).
        let own = |q: usize| {
            let local = mine.iter().position(|&x| x == q)?;
            Some((self.queues.get(q)?, vrings.get(local)?))
        };
        if let (Some(&q), Some(vring)) = (mine.get(ev), vrings.get(ev)) {
            if let Some(slot) = self.queues.get(q) {
                slot.counters.kick();
            }
            self.process_queue(q, vring, shared);
        } else if ev > 2 * n {
            // A queue's turn comes back: data = 2 n + 1 + global queue index.
            let q = ev - 2 * n - 1;
            if let Some((slot, vring)) = own(q) {
                // Consumed before processing, so that passing the turn again re-arms it.
                let _ = slot.resume.read();
                let started = {
                    let r = vring.get_ref();
                    r.is_enabled() && r.get_queue().ready()
                };
                // A ring stopped or disabled since is left alone, as its kick would be.
                if started {
                    self.process_queue(q, vring, shared);
                }
            }
        } else if ev > n {
            // A queue's completion timer: data = n + 1 + global queue index.
            let q = ev - n - 1;
            if let Some((slot, vring)) = own(q) {
                let event_idx = self.event_idx.load(Ordering::Relaxed);
                let mem = self.mem.memory();
                let mut state = slot.lock();
                state.attach(vring);
                state.on_timer(event_idx, || avail_pending(vring, &mem));
            }
        }
        Ok(())
    }
}
