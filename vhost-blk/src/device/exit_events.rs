//! The workers' exit events, and the descriptors vhost-user-backend 0.24 leaves open.
//!
//! vhost-user-backend asks the backend for one exit event per worker thread
//! (`VhostUserBackend::exit_event`: a consumer and a notifier, two descriptors of one eventfd).
//! `VringEpollHandler::new` (event_loop.rs) registers the consumer with the worker's epoll
//! through `into_raw_fd` and keeps no owner of it: nothing ever closes it. A daemon that
//! creates a `VhostUserDaemon` per frontend connection (ours: QEMU reconnects, a restarted
//! guest) so loses one eventfd per worker thread per connection (8 per connection with 8
//! queues, measured: 6 -> 14 -> 22 -> 30 -> 38 open descriptors after 4 connections).
//!
//! Rules:
//! 1. [`ExitEvents::create`] makes the pair and remembers the consumer's descriptor number and
//!    its eventfd identity (`eventfd-id` in /proc/self/fdinfo).
//! 2. Once `VhostUserDaemon::new` has returned (every handler registered its consumer, or
//!    failed to), [`ExitEvents::close_consumers`] closes each remembered descriptor, after
//!    checking that the number still names the same eventfd: if a later vhost-user-backend
//!    closed it itself and the number was reused, it is left alone (logged).
//! 3. Closing it changes nothing for the worker: it never reads the consumer (it learns of
//!    the exit from its own "vring enabled" eventfd being empty), and the epoll registration
//!    lives on as long as the notifier, another descriptor of the same eventfd, is open (a
//!    registration ends when the last descriptor of the open file goes).

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::Mutex;

use vmm_sys_util::event::{
    new_event_consumer_and_notifier, EventConsumer, EventFlag, EventNotifier,
};

/// The exit-event consumers handed out for one connection (rule 1).
#[derive(Debug, Default)]
pub struct ExitEvents {
    consumers: Mutex<Vec<(RawFd, Option<u64>)>>,
}

/// The `eventfd-id` of descriptor `fd` of this process (Linux >= 6.0), if it is an eventfd.
fn eventfd_id(fd: RawFd) -> Option<u64> {
    let info = std::fs::read_to_string(format!("/proc/self/fdinfo/{fd}")).ok()?;
    info.lines()
        .find_map(|l| l.strip_prefix("eventfd-id:"))
        .and_then(|v| v.trim().parse().ok())
}

impl ExitEvents {
    /// A new exit event for one worker (rule 1).
    pub fn create(&self) -> Option<(EventConsumer, EventNotifier)> {
        let (consumer, notifier) =
            new_event_consumer_and_notifier(EventFlag::NONBLOCK | EventFlag::CLOEXEC).ok()?;
        let fd = consumer.as_raw_fd();
        self.consumers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((fd, eventfd_id(fd)));
        Some((consumer, notifier))
    }

    /// Closes the consumers handed out so far (rule 2); returns how many were closed.
    pub fn close_consumers(&self) -> usize {
        let list = std::mem::take(&mut *self.consumers.lock().unwrap_or_else(|e| e.into_inner()));
        let mut closed = 0;
        for (fd, id) in list {
            if id.is_none() || eventfd_id(fd) != id {
                tracing::warn!(fd, "exit eventfd no longer ours: not closed");
                continue;
            }
            // SAFETY: `fd` is the consumer created in `create`, which vhost-user-backend turned
            // into a raw descriptor it never closes (module documentation); it has stayed open
            // since, so its number was not reused, and the fdinfo check above (same eventfd
            // identity) guards against a crate version that closes it itself. This is its only
            // close, and nothing uses the number afterwards (rule 3).
            drop(unsafe { OwnedFd::from_raw_fd(fd) });
            closed += 1;
        }
        closed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_consumer_given_away_raw_is_closed_once_and_a_reused_number_is_left_alone() {
        let ev = ExitEvents::default();
        // As vhost-user-backend does: the consumer becomes a raw descriptor nobody owns.
        let (c, n) = ev.create().unwrap();
        let raw = std::os::fd::IntoRawFd::into_raw_fd(c);
        assert_eq!(eventfd_id(raw), ev.consumers.lock().unwrap()[0].1);
        assert_eq!(ev.close_consumers(), 1);
        // The eventfd lives on through the notifier (rule 3).
        n.notify().unwrap();
        assert_eq!(ev.close_consumers(), 0, "nothing left");

        // A crate that closed it itself: the number now names another eventfd, kept open.
        let (c, _n) = ev.create().unwrap();
        let raw = std::os::fd::IntoRawFd::into_raw_fd(c);
        // SAFETY: `raw` was just taken from the consumer; this test owns it.
        drop(unsafe { OwnedFd::from_raw_fd(raw) });
        let other = vmm_sys_util::eventfd::EventFd::new(0).unwrap();
        assert_eq!(ev.close_consumers(), 0);
        other
            .write(1)
            .expect("whatever took the number is still open");
    }
}
