//! Absolute-deadline timing on CLOCK_MONOTONIC: a timerfd for an epoll loop plus a short spin.
//!
//! vmm-sys-util's `TimerFd` only takes relative, blocking timers, so this uses libc directly.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use thiserror::Error;

use super::wake::WakeLearner;

/// Errors of the deadline timer.
#[derive(Debug, Error)]
pub enum TimerError {
    #[error("timerfd_create: {0}")]
    Create(#[source] io::Error),
    #[error("timerfd_settime: {0}")]
    Set(#[source] io::Error),
    #[error("reading the timerfd: {0}")]
    Read(#[source] io::Error),
    #[error("prctl(PR_SET_TIMERSLACK): {0}")]
    Slack(#[source] io::Error),
}

/// Now on CLOCK_MONOTONIC, in nanoseconds.
#[inline]
pub fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_MONOTONIC always exists on Linux, so the
    // call cannot fail.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u64) * 1_000_000_000 + ts.tv_nsec as u64
}

/// Busy-waits until CLOCK_MONOTONIC reaches `deadline_ns`; returns the time it saw last.
pub fn spin_until(deadline_ns: u64) -> u64 {
    loop {
        let now = now_ns();
        if now >= deadline_ns {
            return now;
        }
        std::hint::spin_loop();
    }
}

/// Sets the calling thread's timer slack (the kernel may delay the thread's poll/epoll/nanosleep
/// timeouts by up to this much; 50 us by default). A timerfd is an hrtimer without slack (measured:
/// the same wake-up error at 50 us and 1 ns), so this matters only for a worker that sleeps on
/// timeouts instead of the [`DeadlineTimer`].
pub fn set_current_thread_timer_slack(ns: u64) -> Result<(), TimerError> {
    // SAFETY: PR_SET_TIMERSLACK takes one unsigned long by value and touches no memory of ours.
    let ret = unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, ns as libc::c_ulong, 0, 0, 0) };
    if ret != 0 {
        return Err(TimerError::Slack(io::Error::last_os_error()));
    }
    Ok(())
}

fn timespec(ns: u64) -> libc::timespec {
    libc::timespec {
        tv_sec: (ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (ns % 1_000_000_000) as libc::c_long,
    }
}

/// A non-blocking, close-on-exec CLOCK_MONOTONIC timerfd armed with absolute deadlines, woken
/// early so that [`DeadlineTimer::spin_until`] can hit the deadline itself: by `spin_ns`, or by
/// more when its own wake-ups showed that it wakes later than that for waits of that length
/// ([`WakeLearner`]).
#[derive(Debug)]
pub struct DeadlineTimer {
    fd: OwnedFd,
    spin_ns: u64,
    armed_for: Option<u64>,
    /// The armed wait (deadline - time of arming) and the time the timerfd was set for, when
    /// that time was still ahead.
    armed: Option<(u64, u64)>,
    /// The lead taken when last armed: how long [`Self::spin_until`] may spin.
    spin_limit: u64,
    learner: WakeLearner,
}

impl DeadlineTimer {
    pub fn new(spin_ns: u64) -> Result<Self, TimerError> {
        // SAFETY: plain syscall with constant flags; the result is checked before use.
        let fd = unsafe {
            libc::timerfd_create(
                libc::CLOCK_MONOTONIC,
                libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(TimerError::Create(io::Error::last_os_error()));
        }
        // SAFETY: `fd` was just returned by timerfd_create and nothing else owns it.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(DeadlineTimer {
            fd,
            spin_ns,
            armed_for: None,
            armed: None,
            spin_limit: spin_ns,
            learner: WakeLearner::new(spin_ns),
        })
    }

    #[inline]
    pub fn spin_ns(&self) -> u64 {
        self.spin_ns
    }

    /// The deadline the timer is armed for, if any.
    #[inline]
    pub fn armed_for(&self) -> Option<u64> {
        self.armed_for
    }

    fn settime(&self, value_ns: u64) -> Result<(), TimerError> {
        let spec = libc::itimerspec {
            it_interval: timespec(0),
            it_value: timespec(value_ns),
        };
        // SAFETY: `spec` is a valid itimerspec, the old-value pointer may be null, and the fd is
        // our own timerfd.
        let ret = unsafe {
            libc::timerfd_settime(
                self.fd.as_raw_fd(),
                libc::TFD_TIMER_ABSTIME,
                &spec,
                std::ptr::null_mut(),
            )
        };
        if ret != 0 {
            return Err(TimerError::Set(io::Error::last_os_error()));
        }
        Ok(())
    }

    /// How far ahead of a deadline `wait_ns` from now the timer would wake (the spin it leaves).
    #[inline]
    pub fn lead_ns(&self, wait_ns: u64) -> u64 {
        self.learner.lead_ns(wait_ns)
    }

    /// Arms the timer to become readable at `deadline_ns` minus the lead for this wait (absolute
    /// CLOCK_MONOTONIC; at least `spin_ns`). A time already past fires at once. Re-arming for
    /// the same deadline is a no-op.
    pub fn arm(&mut self, deadline_ns: u64) -> Result<(), TimerError> {
        if self.armed_for == Some(deadline_ns) {
            return Ok(());
        }
        let wait = deadline_ns.saturating_sub(now_ns());
        let lead = self.learner.lead_ns(wait);
        let wake_at = deadline_ns.saturating_sub(lead);
        self.spin_limit = lead.max(self.spin_ns);
        // An it_value of 0 would disarm: 1 ns is in the past and fires immediately.
        self.settime(wake_at.max(1))?;
        self.armed_for = Some(deadline_ns);
        // Only a wake time still ahead says something about the timer's lateness.
        self.armed = (wait > lead).then_some((wait, wake_at));
        Ok(())
    }

    pub fn disarm(&mut self) -> Result<(), TimerError> {
        self.armed = None;
        if self.armed_for.take().is_some() {
            self.settime(0)?;
        }
        Ok(())
    }

    /// Reads the expiry count (0 if the timer has not fired) and forgets the armed deadline when
    /// it fired, learning how late it woke (for a wake time that was in the future when armed).
    pub fn drain(&mut self) -> Result<u64, TimerError> {
        let mut count = 0u64;
        // SAFETY: reads 8 bytes into a valid u64 from our own non-blocking timerfd.
        let n = unsafe {
            libc::read(
                self.fd.as_raw_fd(),
                (&mut count as *mut u64).cast(),
                std::mem::size_of::<u64>(),
            )
        };
        if n < 0 {
            let err = io::Error::last_os_error();
            return match err.kind() {
                io::ErrorKind::WouldBlock => Ok(0),
                _ => Err(TimerError::Read(err)),
            };
        }
        if count > 0 {
            if let Some((wait, wake_at)) = self.armed.take() {
                self.learner.record(wait, now_ns().saturating_sub(wake_at));
            }
            self.armed_for = None;
        }
        Ok(count)
    }

    /// Spins for the last stretch up to `deadline_ns` (at most the lead taken when the timer was
    /// last armed, and at least `spin_ns`; never if already past) and returns the current time.
    pub fn spin_until(&self, deadline_ns: u64) -> u64 {
        let now = now_ns();
        if now >= deadline_ns || deadline_ns - now > self.spin_limit {
            return now;
        }
        spin_until(deadline_ns)
    }
}

impl AsRawFd for DeadlineTimer {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    /// Waits up to `timeout_ms` for the timer's fd to become readable.
    fn readable(t: &DeadlineTimer, timeout_ms: i32) -> bool {
        let mut pfd = libc::pollfd {
            fd: t.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd for the duration of the call.
        let n = unsafe { libc::poll(&mut pfd, 1, timeout_ms) };
        n == 1 && pfd.revents & libc::POLLIN != 0
    }

    #[test]
    fn wakes_at_the_deadline_not_before() {
        let mut t = DeadlineTimer::new(100_000).unwrap();
        let deadline = now_ns() + 2 * MS;
        t.arm(deadline).unwrap();
        assert_eq!(t.armed_for(), Some(deadline));
        assert!(readable(&t, 1_000), "timer never fired");
        let woke = now_ns();
        assert!(
            woke >= deadline - t.spin_ns(),
            "fired {} ns early",
            deadline - woke
        );
        assert_eq!(t.drain().unwrap(), 1);
        assert_eq!(t.armed_for(), None);
        let now = t.spin_until(deadline);
        // Generous: a loaded 2-core host can be late by tens of ms, never early.
        assert!(
            now >= deadline && now < deadline + 250 * MS,
            "{now} vs {deadline}"
        );
    }

    #[test]
    fn drain_is_non_blocking_and_disarm_cancels() {
        let mut t = DeadlineTimer::new(0).unwrap();
        assert_eq!(t.drain().unwrap(), 0);
        t.arm(now_ns() + 5 * MS).unwrap();
        t.disarm().unwrap();
        assert!(!readable(&t, 30), "disarmed timer fired");
        assert_eq!(t.drain().unwrap(), 0);
    }

    #[test]
    fn past_deadline_fires_at_once() {
        let mut t = DeadlineTimer::new(20_000).unwrap();
        t.arm(1).unwrap();
        assert!(readable(&t, 1_000));
        assert_eq!(t.drain().unwrap(), 1);
        // spin_until never spins for a past deadline.
        let before = now_ns();
        assert!(t.spin_until(before - 1) >= before);
    }

    #[test]
    fn timer_slack_is_set_for_this_thread() {
        std::thread::spawn(|| {
            set_current_thread_timer_slack(1).unwrap();
            // SAFETY: PR_GET_TIMERSLACK takes no pointer arguments.
            let slack = unsafe { libc::prctl(libc::PR_GET_TIMERSLACK, 0, 0, 0, 0) };
            assert_eq!(slack, 1);
        })
        .join()
        .unwrap();
    }
}
