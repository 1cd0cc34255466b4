//! A storage for tests that records the order of completed writes and flushes and can run code
//! at the moment a flush starts (feature `test-util`): the cache-mode switch tests put a
//! write from "another queue" exactly inside the switch's flush.

use std::sync::{Arc, Mutex};

use super::{FileStorage, IoBuf, Storage, StorageError};

/// What happened, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProbeEvent {
    /// A write of `len` bytes at `offset` completed.
    Write {
        offset: u64,
        len: u64,
    },
    FlushStart,
    FlushEnd,
}

type Hook = Box<dyn FnOnce() + Send>;

/// A RAM disk whose writes and flushes are recorded (module docs).
pub struct ProbeStorage {
    inner: FileStorage,
    events: Mutex<Vec<ProbeEvent>>,
    hook: Mutex<Option<Hook>>,
}

impl std::fmt::Debug for ProbeStorage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProbeStorage").finish_non_exhaustive()
    }
}

impl ProbeStorage {
    pub fn new(size: u64) -> Result<Arc<Self>, StorageError> {
        Ok(Arc::new(Self {
            inner: FileStorage::memfd(size)?,
            events: Mutex::new(Vec::new()),
            hook: Mutex::new(None),
        }))
    }

    /// Runs `f` when the next flush starts, before it syncs anything.
    pub fn on_next_flush(&self, f: impl FnOnce() + Send + 'static) {
        *self.hook.lock().unwrap_or_else(|e| e.into_inner()) = Some(Box::new(f));
    }

    pub fn events(&self) -> Vec<ProbeEvent> {
        self.events
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    fn push(&self, e: ProbeEvent) {
        self.events
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(e);
    }

    /// Whether the last completed write at `offset` had a flush start after it.
    pub fn flushed_after_write_at(&self, offset: u64) -> bool {
        let ev = self.events();
        let Some(w) = ev
            .iter()
            .rposition(|e| matches!(e, ProbeEvent::Write { offset: o, .. } if *o == offset))
        else {
            return false;
        };
        ev.iter().skip(w).any(|e| *e == ProbeEvent::FlushStart)
    }
}

impl Storage for ProbeStorage {
    fn size(&self) -> u64 {
        self.inner.size()
    }
    fn read_only(&self) -> bool {
        false
    }
    fn read_vectored_at(&self, bufs: &[IoBuf<'_>], offset: u64) -> Result<(), StorageError> {
        self.inner.read_vectored_at(bufs, offset)
    }
    fn write_vectored_at(&self, bufs: &[IoBuf<'_>], offset: u64) -> Result<(), StorageError> {
        self.inner.write_vectored_at(bufs, offset)?;
        let len = super::iov_len(bufs);
        self.push(ProbeEvent::Write { offset, len });
        Ok(())
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> Result<(), StorageError> {
        self.inner.write_at(buf, offset)?;
        let len = buf.len() as u64;
        self.push(ProbeEvent::Write { offset, len });
        Ok(())
    }
    fn flush(&self) -> Result<(), StorageError> {
        self.push(ProbeEvent::FlushStart);
        let hook = self.hook.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(h) = hook {
            h();
        }
        self.inner.flush()?;
        self.push(ProbeEvent::FlushEnd);
        Ok(())
    }
    fn discard(&self, offset: u64, len: u64) -> Result<(), StorageError> {
        self.inner.discard(offset, len)
    }
    fn write_zeroes(&self, offset: u64, len: u64, may_unmap: bool) -> Result<(), StorageError> {
        self.inner.write_zeroes(offset, len, may_unmap)
    }
}
