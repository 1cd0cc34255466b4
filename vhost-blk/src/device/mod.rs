//! The vhost-user device, generic over a [`Personality`]; no blk or SCSI detail in it.
//!
//! - [`personality`]: the contract with a personality (the [`Personality`] trait, the
//!   [`Outcome`] of one chain, the personality's [`RequestKind`]s).
//! - [`chain`]: a descriptor chain validated once into guest buffers ([`GuestBufs`]), under the
//!   limits the personality advertises ([`ChainLimits`]); both personalities use it.
//! - [`queue`]: per-queue state owned by its worker: the completion engine, its timer, the
//!   statistics it feeds from the engine's decisions, the vring.
//! - [`backend`]: the `VhostUserBackend` implementation that drains the rings and hands chains
//!   to the personality.
//! - [`inflight`]: the vhost-user inflight area (which chains are in flight, for a restarted
//!   backend to resubmit); [`resubmit`]: chains rebuilt from the heads it lists.
//! - [`diag`]: a queue described from outside (ring indices, event-index fields, kick and drain
//!   counts), for diagnosing a stall.
//! - [`exit_events`]: the workers' exit events, whose read ends vhost-user-backend leaves open.
//! - [`workers`]: which thread serves each vring; the worker threads of our own for the vrings
//!   vhost-user-backend's `u64` masks cannot hold.
//!
//! Dependencies inside: `backend` -> `queue`, `personality`, `chain`, `inflight`, `resubmit`,
//! `diag`, `exit_events`, `workers`; `workers` -> `queue`; `diag` -> `queue`, `chain`, `split`; `resubmit` -> `split`;
//! `queue` -> `inflight`; `resubmit`, `personality` -> `chain`.
//! Outside: `queue` uses the completion engine and the statistics; nothing above (config,
//! daemon, blk, scsi).

pub mod backend;
pub mod chain;
pub mod diag;
pub mod exit_events;
pub mod inflight;
pub mod personality;
pub mod queue;
pub mod resubmit;
pub mod workers;

pub use backend::{BackendOptions, DeviceBackend, RingError};
pub use chain::Chain;
pub use chain::{load_chain, ChainLimits, GuestBufs};
pub use inflight::{InflightArea, StateRegion};
pub use personality::{Outcome, Personality, RequestKind};
pub use queue::{GuestMem, SharedStats, Vring};

/// Where the event-index fields sit in a split ring of `n` entries (virtio 1.2, 2.7): the avail
/// ring is flags, idx, `ring[n]` of u16, then `used_event`; the used ring is flags, idx,
/// `ring[n]` of 8-byte elements, then `avail_event`. Each field is a u16.
pub mod split {
    /// Offset of `used_event` from the start of the avail ring.
    pub const fn used_event_offset(n: u64) -> u64 {
        4 + 2 * n
    }
    /// Offset of `avail_event` from the start of the used ring.
    pub const fn avail_event_offset(n: u64) -> u64 {
        4 + 8 * n
    }
}

/// Most vrings of one device: vhost-user carries a vring's index in one byte in
/// SET_VRING_KICK, SET_VRING_CALL and SET_VRING_ERR. (vhost-user-backend's threads take the
/// first [`workers::CRATE_VRINGS`], ours the rest.)
pub const MAX_VRINGS: usize = 256;
