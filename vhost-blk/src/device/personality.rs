//! What a device personality (virtio-blk, virtio-scsi) provides to the vhost-user layer, and
//! what it answers for each descriptor chain.
//!
//! The vhost-user layer ([`super::backend`], [`super::queue`]) only sees this trait: features,
//! configuration space, queue layout, and an [`Outcome`] per chain. Request types are the
//! personality's own words ([`RequestKind`]); the device layer counts them in the statistics.

use std::io;

pub use super::chain::Chain;

/// A personality's request types, as the per-queue statistics count them.
pub trait RequestKind: Copy + std::fmt::Debug + Send + Sync + 'static {
    /// Every kind's name, in [`index`](Self::index) order (the statistics' labels).
    const NAMES: &'static [&'static str];
    /// The kind of a request that could not be parsed or answered.
    const ERROR: Self;
    /// This kind's position in [`NAMES`](Self::NAMES).
    fn index(self) -> usize;
    /// The payload of a request of this kind, `bytes` long, as (bytes read, bytes written).
    fn payload(self, bytes: u64) -> (u64, u64);
}

/// What became of one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome<K> {
    /// Put `used_len` in the used ring for this chain (after the completion model's delay).
    Complete {
        used_len: u32,
        /// Request type, for statistics.
        kind: K,
        /// Payload bytes moved.
        bytes: u64,
        /// Extra delay before completion asked by the device (e.g. slow SCSI discovery).
        extra_delay_ns: u64,
    },
    /// The device keeps the buffer for later (virtio-scsi event queue).
    Held,
}

impl<K: RequestKind> Outcome<K> {
    /// The chain is returned unused: it could not carry an answer (malformed, or no room for
    /// a status or response). Counted as an error.
    pub fn unanswered() -> Self {
        Outcome::Complete {
            used_len: 0,
            kind: K::ERROR,
            bytes: 0,
            extra_delay_ns: 0,
        }
    }
}

/// A device personality (virtio-blk, virtio-scsi): features, config space, queue layout and
/// request handling. Implementations are shared by all queue workers (`&self`).
pub trait Personality: Send + Sync + 'static {
    /// The request types it reports.
    type Kind: RequestKind;
    /// Short name for logs.
    fn name(&self) -> &'static str;
    /// Number of vrings (all kinds), at most [`super::MAX_VRINGS`].
    fn num_queues(&self) -> usize;
    /// Index of the first request queue (virtio-scsi: 2; virtio-blk: 0). Queues from there on
    /// are MSI-X "vectors" for the completion model.
    fn first_request_queue(&self) -> usize;
    /// Virtio feature bits offered (without VHOST_USER_F_PROTOCOL_FEATURES).
    fn features(&self) -> u64;
    /// The driver acknowledged these features.
    fn acked_features(&self, _features: u64) {}
    /// Device configuration space.
    fn config_space(&self) -> Vec<u8>;
    /// The driver wrote `data` at `offset` of the configuration space.
    fn set_config(&self, _offset: u32, _data: &[u8]) -> io::Result<()> {
        Ok(())
    }
    /// Device reset: forget negotiated state and held buffers.
    fn reset(&self) {}
    /// The inflight area's device state was installed (`Some`) or taken away (inflight rule
    /// 6): restore the guest's cache-mode choices recorded there, record the current ones
    /// where none is, and record every later change.
    fn attach_state(&self, _state: Option<super::inflight::StateRegion>) {}
    /// Handles one chain from vring `queue`. Must not panic on any guest input.
    fn process(&self, queue: usize, chain: Chain<'_>) -> Outcome<Self::Kind>;
    /// Whether a completion on `queue` must not reach the guest before the completions the
    /// request queues' completion models still hold (virtio-scsi: a task management function
    /// is answered only after the commands it covers have completed).
    fn completes_after_requests(&self, _queue: usize) -> bool {
        false
    }
}
