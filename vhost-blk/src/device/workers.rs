//! Which thread serves each vring, and the worker threads vhost-blk runs itself for the vrings
//! vhost-user-backend 0.24 cannot give a thread (docs/design/128-queues.md).
//!
//! vhost-user-backend hands each of its worker threads its vrings as one `u64` bitmask
//! (`VhostUserBackend::queues_per_thread`) and shifts that mask by the vring index when a ring
//! starts: a vring at index 64 or above has no bit, and the shift overflows. So the crate is
//! told of at most [`CRATE_VRINGS`] vrings and runs the worker groups that lie wholly below
//! that; every other group is run here, by a thread that does what the crate's does: one epoll
//! over the group's kick eventfds, its queues' completion timers and resume eventfds and an exit
//! eventfd of its own, and `VhostUserBackend::handle_event` for each event (the same code as
//! on the crate's threads, so the queues cannot tell the two apart). The daemon's relay hands
//! the vring messages of these rings to the device ([`RingMsg`]).
//!
//! Rules:
//! 1. A group is the crate's iff each of its vrings is below [`CRATE_VRINGS`]. The crate's
//!    groups keep thread ids `0..`, in their order; ours follow, in theirs.
//! 2. A ring's kick eventfd is in its thread's epoll iff the ring is started (it has a kick
//!    eventfd and is ready) and enabled, the crate's rule. Registrations change only on the
//!    control path (the relay's thread), one ring at a time, under the thread's registration
//!    lock; an old kick eventfd is taken out before it is closed.
//! 3. When a ring's kick eventfd goes in, its queue gets one turn (its resume eventfd), as the
//!    crate does on registration: buffers made available while the ring was stopped or disabled
//!    are served without waiting for another kick.
//! 4. A kick read while the ring is disabled is dropped (the crate's rule); the ring is served
//!    when it is enabled again (rule 3).
//! 5. Each thread has its own exit eventfd; [`OwnWorkers`] (held by the connection) signals and
//!    joins every thread on drop. The epoll, exit and kick descriptors close with the last
//!    reference to the thread's state: nothing outlives the connection.

use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use vhost_user_backend::VringT;
use virtio_queue::QueueT;
use vmm_sys_util::epoll::{ControlOperation, Epoll, EpollEvent, EventSet};
use vmm_sys_util::eventfd::{EventFd, EFD_NONBLOCK};

use super::queue::{GuestMem, Vring};

/// The most vrings vhost-user-backend 0.24 can give its worker threads (one `u64` mask each).
pub const CRATE_VRINGS: usize = 64;

/// Epoll data of a thread's exit eventfd (no queue event uses it).
const EXIT: u64 = u64::MAX;

/// The worker groups of one device, the crate's first (rule 1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThreadPlan {
    /// Per thread id, its vrings in ascending order.
    groups: Vec<Vec<usize>>,
    /// How many of `groups` (the first ones) run on vhost-user-backend's threads.
    crate_threads: usize,
}

impl ThreadPlan {
    /// Orders `groups` by rule 1 (each group's vrings sorted; empty groups and vrings not below
    /// `n` dropped).
    pub fn new(groups: &[Vec<usize>], n: usize) -> Self {
        let mut clean: Vec<Vec<usize>> = groups
            .iter()
            .map(|g| {
                let mut g: Vec<usize> = g.iter().copied().filter(|&q| q < n).collect();
                g.sort_unstable();
                g.dedup();
                g
            })
            .filter(|g| !g.is_empty())
            .collect();
        let is_crate = |g: &Vec<usize>| g.iter().all(|&q| q < CRATE_VRINGS);
        // A stable partition: the crate's groups first, each side in its given order.
        clean.sort_by_key(|g| !is_crate(g));
        let crate_threads = clean.iter().take_while(|g| is_crate(g)).count();
        Self {
            groups: clean,
            crate_threads,
        }
    }

    /// The vrings of thread `id`.
    pub fn queues(&self, id: usize) -> Option<&[usize]> {
        self.groups.get(id).map(Vec::as_slice)
    }

    /// Every thread's vrings, by thread id.
    pub fn groups(&self) -> &[Vec<usize>] {
        &self.groups
    }

    /// Threads vhost-user-backend runs (ids `0..crate_threads`).
    pub fn crate_threads(&self) -> usize {
        self.crate_threads
    }

    /// The crate's masks (`VhostUserBackend::queues_per_thread`).
    pub fn crate_masks(&self) -> Vec<u64> {
        self.groups
            .iter()
            .take(self.crate_threads)
            .map(|g| g.iter().fold(0u64, |m, &q| m | 1u64 << q))
            .collect()
    }

    /// Our threads: (thread id, vrings).
    pub fn own(&self) -> impl Iterator<Item = (usize, &[usize])> {
        self.groups
            .iter()
            .enumerate()
            .skip(self.crate_threads)
            .map(|(id, g)| (id, g.as_slice()))
    }
}

/// A vring message for a ring served here, as the relay decoded it (guest addresses already
/// translated from the frontend's).
#[derive(Debug)]
pub enum RingMsg {
    /// SET_VRING_NUM.
    Num(u16),
    /// SET_VRING_ADDR: descriptor table, available ring, used ring (guest physical).
    Addr { desc: u64, avail: u64, used: u64 },
    /// SET_VRING_BASE.
    Base(u16),
    /// SET_VRING_KICK (None: polled, which vhost-blk does not do; the ring is not started).
    Kick(Option<File>),
    /// SET_VRING_CALL.
    Call(Option<File>),
    /// SET_VRING_ERR.
    Err(Option<File>),
    /// SET_VRING_ENABLE.
    Enable(bool),
}

/// What a thread of ours serves and waits on.
pub struct OwnThread {
    id: usize,
    queues: Vec<usize>,
    vrings: Vec<Vring>,
    epoll: Epoll,
    exit: EventFd,
    /// Per ring (local index), the kick descriptor in the epoll (rule 2).
    registered: Mutex<Vec<Option<RawFd>>>,
}

impl OwnThread {
    /// Thread `id` for `queues`, each a fresh vring of at most `max_size` descriptors over
    /// `mem`; its epoll waits on the exit eventfd only.
    pub fn new(id: usize, queues: &[usize], mem: &GuestMem, max_size: u16) -> io::Result<Self> {
        let vrings = queues
            .iter()
            .map(|_| Vring::new(mem.clone(), max_size).map_err(|e| io::Error::other(e.to_string())))
            .collect::<io::Result<Vec<_>>>()?;
        let epoll = Epoll::new()?;
        let exit = EventFd::new(EFD_NONBLOCK)?;
        epoll.ctl(
            ControlOperation::Add,
            exit.as_raw_fd(),
            EpollEvent::new(EventSet::IN, EXIT),
        )?;
        Ok(Self {
            id,
            queues: queues.to_vec(),
            vrings,
            epoll,
            exit,
            registered: Mutex::new(vec![None; queues.len()]),
        })
    }

    /// The thread id (`VhostUserBackend::handle_event`'s).
    pub fn id(&self) -> usize {
        self.id
    }

    /// Global queue index -> local index.
    pub fn local(&self, q: usize) -> Option<usize> {
        self.queues.iter().position(|&x| x == q)
    }

    /// The ring at local index `l`.
    pub fn vring(&self, l: usize) -> Option<&Vring> {
        self.vrings.get(l)
    }

    /// Every ring, in local order.
    pub fn vrings(&self) -> &[Vring] {
        &self.vrings
    }

    /// Adds a timer or resume eventfd (`data` above the device's queue count).
    pub fn add_listener(&self, fd: RawFd, data: u64) -> io::Result<()> {
        self.epoll.ctl(
            ControlOperation::Add,
            fd,
            EpollEvent::new(EventSet::IN, data),
        )
    }

    /// Puts ring `l`'s kick eventfd in the epoll or takes it out, as rule 2 says; true if it
    /// went in now (the queue is owed a turn, rule 3).
    pub fn update(&self, l: usize) -> io::Result<bool> {
        let Some(vring) = self.vrings.get(l) else {
            return Ok(false);
        };
        let want = {
            let r = vring.get_ref();
            let started = r.get_queue().ready() && r.is_enabled();
            r.get_kick()
                .as_ref()
                .filter(|_| started)
                .map(AsRawFd::as_raw_fd)
        };
        let mut reg = self.registered.lock().unwrap_or_else(|e| e.into_inner());
        let Some(slot) = reg.get_mut(l) else {
            return Ok(false);
        };
        if *slot == want {
            return Ok(false);
        }
        if let Some(old) = slot.take() {
            self.epoll.ctl(
                ControlOperation::Delete,
                old,
                EpollEvent::new(EventSet::IN, 0),
            )?;
        }
        if let Some(fd) = want {
            self.epoll.ctl(
                ControlOperation::Add,
                fd,
                EpollEvent::new(EventSet::IN, l as u64),
            )?;
            *slot = Some(fd);
        }
        Ok(want.is_some())
    }

    /// Takes ring `l`'s kick eventfd out of the epoll (before it is replaced or closed).
    pub fn unregister(&self, l: usize) -> io::Result<()> {
        let mut reg = self.registered.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(old) = reg.get_mut(l).and_then(Option::take) {
            self.epoll.ctl(
                ControlOperation::Delete,
                old,
                EpollEvent::new(EventSet::IN, 0),
            )?;
        }
        Ok(())
    }

    /// The event loop: until the exit eventfd fires, each event goes to `handle` (event data
    /// as `VhostUserBackend::handle_event` takes it) after a kick is read (rule 4).
    pub fn run(&self, handle: impl Fn(u16, EventSet, &[Vring]) -> io::Result<()>) {
        let mut events = vec![EpollEvent::default(); 64];
        loop {
            let n = match self.epoll.wait(-1, &mut events) {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    tracing::error!(thread = self.id, "epoll_wait: {e}");
                    return;
                }
            };
            for ev in events.iter().take(n) {
                let data = ev.data();
                if data == EXIT {
                    return;
                }
                let Ok(data) = u16::try_from(data) else {
                    continue;
                };
                if let Some(vring) = self.vrings.get(usize::from(data)) {
                    match vring.read_kick() {
                        Ok(true) => {}
                        Ok(false) => continue,
                        Err(e) => {
                            tracing::warn!(thread = self.id, "kick read: {e}");
                            continue;
                        }
                    }
                }
                let set = EventSet::from_bits_truncate(ev.events);
                if let Err(e) = handle(data, set, &self.vrings) {
                    tracing::warn!(thread = self.id, "event {data}: {e}");
                }
            }
        }
    }

    /// Asks the event loop to return.
    fn stop(&self) {
        if let Err(e) = self.exit.write(1) {
            tracing::warn!(thread = self.id, "exit eventfd: {e}");
        }
    }
}

/// Our worker threads of one connection; dropping it stops and joins them (rule 5).
#[derive(Default)]
pub struct OwnWorkers {
    threads: Vec<(Arc<OwnThread>, Option<JoinHandle<()>>)>,
}

impl OwnWorkers {
    /// Runs `body` for each of `threads` on a thread of its own (named `vring_own_<id>`).
    pub fn spawn<F>(threads: &[Arc<OwnThread>], body: F) -> io::Result<Self>
    where
        F: Fn(&OwnThread) + Send + Sync + Clone + 'static,
    {
        let mut me = Self::default();
        for t in threads {
            let (t2, body) = (t.clone(), body.clone());
            let h = std::thread::Builder::new()
                .name(format!("vring_own_{}", t.id))
                .spawn(move || {
                    vhost_blk_sandbox::enter(vhost_blk_sandbox::ThreadKind::Worker);
                    body(&t2)
                })?;
            me.threads.push((t.clone(), Some(h)));
        }
        Ok(me)
    }

    /// How many threads run.
    pub fn len(&self) -> usize {
        self.threads.len()
    }

    /// Whether none runs.
    pub fn is_empty(&self) -> bool {
        self.threads.is_empty()
    }
}

impl Drop for OwnWorkers {
    fn drop(&mut self) {
        for (t, _) in &self.threads {
            t.stop();
        }
        for (_, h) in &mut self.threads {
            if let Some(h) = h.take() {
                let _ = h.join();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_wholly_below_the_crate_limit_are_the_crates_and_come_first() {
        // 130 vrings, 8 round-robin groups: each reaches past 63, so all are ours.
        let rr: Vec<Vec<usize>> = (0..8).map(|t| (t..130).step_by(8).collect()).collect();
        let p = ThreadPlan::new(&rr, 130);
        assert_eq!(p.crate_threads(), 0);
        assert!(p.crate_masks().is_empty());
        assert_eq!(p.own().count(), 8);
        // One group per vring: 64 for the crate, 66 ours, ids in order.
        let single: Vec<Vec<usize>> = (0..130).map(|q| vec![q]).collect();
        let p = ThreadPlan::new(&single, 130);
        assert_eq!(p.crate_threads(), 64);
        assert_eq!(p.crate_masks().last(), Some(&(1u64 << 63)));
        let own: Vec<_> = p.own().collect();
        assert_eq!(own.first(), Some(&(64, &[64usize][..])));
        assert_eq!(own.len(), 66);
        // A crate group after one of ours moves in front; order within each side is kept.
        let p = ThreadPlan::new(&[vec![70, 1], vec![2], vec![0, 0, 200]], 100);
        assert_eq!(p.groups(), &[vec![2], vec![0], vec![1, 70]]);
        assert_eq!(p.crate_masks(), vec![0b100, 0b1]);
    }
}
