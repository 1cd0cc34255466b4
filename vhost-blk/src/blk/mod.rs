//! The virtio-blk personality: features, configuration space and request handling.
//!
//! [`BlkPersonality`] holds the disk and its settings; `personality.rs` implements the device
//! layer's [`crate::device::Personality`] for it, `request.rs` answers one chain (header, data,
//! status), `config_space.rs` lays out `struct virtio_blk_config`.

mod config_space;
mod personality;
mod request;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

pub use config_space::{BlkConfigSpace, CONFIG_LEN, WRITEBACK_OFFSET};
pub use request::{BlkKind, BlkStatus, DiscardSegment, RequestHeader, DISCARD_SEG_LEN, HEADER_LEN};

use crate::device::{ChainLimits, StateRegion};
use vhost_blk_storage::Storage;

/// Largest data payload of one request: seg_max segments of size_max bytes.
pub const SIZE_MAX: u32 = 1 << 20;
/// Most discard / write-zeroes segments in one request.
pub const MAX_DISCARD_SEG: u32 = 32;
/// Most sectors one discard / write-zeroes segment may cover.
pub const MAX_DISCARD_SECTORS: u32 = 1 << 22;
/// Length of the GET_ID answer.
pub const ID_LEN: usize = 20;

/// Settings of the personality.
#[derive(Debug, Clone)]
pub struct BlkOptions {
    pub num_queues: u16,
    pub queue_size: u16,
    pub block_size: u32,
    pub serial: String,
    /// Start (and come back after a device reset) with the write cache off.
    pub writethrough: bool,
}

/// virtio-blk over a [`Storage`].
#[derive(Debug)]
pub struct BlkPersonality {
    storage: Arc<dyn Storage>,
    opts: BlkOptions,
    /// Guest's cache mode (CONFIG_WCE): writeback unless the driver switched it off.
    writeback: AtomicBool,
    acked: AtomicU64,
    /// Where the guest's cache mode outlives this process (inflight rule 6), slot 0.
    state: Mutex<Option<StateRegion>>,
}

impl BlkPersonality {
    pub fn new(storage: Arc<dyn Storage>, opts: BlkOptions) -> Self {
        let writeback = AtomicBool::new(!opts.writethrough);
        Self {
            storage,
            opts,
            writeback,
            acked: AtomicU64::new(0),
            state: Mutex::new(None),
        }
    }

    /// The chains the device accepts (`seg_max` of them go in the configuration space).
    fn limits(&self) -> ChainLimits {
        ChainLimits::new(self.opts.queue_size, SIZE_MAX)
    }

    pub fn storage(&self) -> &Arc<dyn Storage> {
        &self.storage
    }

    /// The cache mode a request runs under: read after its write returned, sequentially
    /// consistent with the switch's store (personality.rs `set_config`).
    fn writeback(&self) -> bool {
        self.writeback.load(Ordering::SeqCst)
    }

    /// The state slot, whatever a panicking holder left (an `Option` replaced whole).
    fn state(&self) -> std::sync::MutexGuard<'_, Option<StateRegion>> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}
