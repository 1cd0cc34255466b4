//! Sticky write errors: once the kernel has reported a lost write on an image, no later FLUSH
//! succeeds (docs/data-guarantees.md, "Write errors").
//!
//! Linux reports a write-back error once per open file description and marks the failed pages
//! clean: the next `fdatasync` on the same descriptor returns 0 with the data gone (the
//! PostgreSQL "fsyncgate" class; QEMU's file-posix keeps such an error for the same reason).
//!
//! Rules:
//! 1. One [`Health`] per image, shared by every queue (it lives in the image's `FileStorage`).
//! 2. An `fdatasync` that fails, with any errno, fails the image. A write, WRITE ZEROES or
//!    DISCARD whose system call fails with EIO, ENOSPC, EDQUOT or EROFS (the medium, not the
//!    request) fails it too: its bytes may be partly written and the guest cannot know which.
//! 3. A failed image fails every later flush with the first errno, without calling
//!    `fdatasync` (whose 0 would be a lie); in write-through mode every write then fails as
//!    well, because its completion waits for a flush. Writes in write-back mode still go to the
//!    page cache: they promise nothing until a FLUSH, and no FLUSH will succeed.
//! 4. Flushes are serialised with the check and the recording of their result ([`Health::sync`]):
//!    a flush on one queue cannot return 0 between another queue's `fdatasync` consuming the
//!    error and that queue recording it.
//! 5. Only the operator clears it, by restarting the backend (a new process opens the image
//!    afresh) after dealing with the cause (space, a failing disk) and knowing that writes
//!    completed since the last successful FLUSH may be lost. The first failure is logged at
//!    `error` level with its errno.

use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Mutex;

use super::StorageError;

/// The image's write-error state (module rules).
#[derive(Debug, Default)]
pub(crate) struct Health {
    /// 0 while healthy, else the errno of the first failure.
    failed: AtomicI32,
    /// Rule 4.
    sync: Mutex<()>,
}

/// Errnos of a failed modifying system call that fail the image (rule 2).
fn fails_image(errno: i32) -> bool {
    matches!(errno, libc::EIO | libc::ENOSPC | libc::EDQUOT | libc::EROFS)
}

impl Health {
    /// `Err` once the image has failed (rule 3).
    pub(crate) fn check(&self) -> Result<(), StorageError> {
        match self.failed.load(Ordering::SeqCst) {
            0 => Ok(()),
            errno => Err(StorageError::Failed { errno }),
        }
    }

    fn fail(&self, errno: i32, what: &str) {
        let errno = if errno == 0 { libc::EIO } else { errno };
        if self
            .failed
            .compare_exchange(0, errno, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
        {
            tracing::error!(
                errno,
                what,
                "image write error: every later FLUSH fails until the backend is restarted \
                 (writes completed since the last successful FLUSH may be lost)"
            );
        }
    }

    /// A modifying system call's result (rule 2): medium errors fail the image.
    pub(crate) fn write_result<T>(&self, r: std::io::Result<T>) -> std::io::Result<T> {
        if let Err(e) = &r {
            if let Some(errno) = e.raw_os_error().filter(|&n| fails_image(n)) {
                self.fail(errno, "write");
            }
        }
        r
    }

    /// Runs `sync` (an `fdatasync`) under rules 2-4.
    pub(crate) fn sync(
        &self,
        sync: impl FnOnce() -> std::io::Result<()>,
    ) -> Result<(), StorageError> {
        // Nothing the lock guards can be left half done by a holder that panicked.
        let _one = self.sync.lock().unwrap_or_else(|e| e.into_inner());
        self.check()?;
        match sync() {
            Ok(()) => self.check(),
            Err(e) => {
                self.fail(e.raw_os_error().unwrap_or(libc::EIO), "fdatasync");
                self.check()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_failed_sync_fails_every_later_one_and_other_errors_do_not_count() {
        let h = Health::default();
        assert!(h.sync(|| Ok(())).is_ok());
        assert!(h
            .write_result::<()>(Err(std::io::Error::from_raw_os_error(libc::EINVAL)))
            .is_err());
        assert!(
            h.sync(|| Ok(())).is_ok(),
            "EINVAL is the request's, not the medium's"
        );
        let e = h.sync(|| Err(std::io::Error::from_raw_os_error(libc::EIO)));
        assert!(matches!(e, Err(StorageError::Failed { errno: libc::EIO })));
        // The kernel reports the error once: later syncs would return 0.
        let mut called = false;
        let e = h.sync(|| {
            called = true;
            Ok(())
        });
        assert!(matches!(e, Err(StorageError::Failed { errno: libc::EIO })));
        assert!(!called, "a failed image does not ask the kernel again");
    }

    #[test]
    fn a_write_out_of_space_fails_the_image_with_its_errno() {
        let h = Health::default();
        let _ = h.write_result::<()>(Err(std::io::Error::from_raw_os_error(libc::ENOSPC)));
        let _ = h.write_result::<()>(Err(std::io::Error::from_raw_os_error(libc::EIO)));
        assert!(matches!(
            h.sync(|| Ok(())),
            Err(StorageError::Failed {
                errno: libc::ENOSPC
            })
        ));
    }
}
