//! virtio-blk as a device-layer [`Personality`]: features, configuration space, the cache-mode
//! write, and one chain at a time handed to [`request::handle`](super::request::handle).

use std::io;
use std::sync::atomic::Ordering;

use virtio_bindings::virtio_blk::*;
use virtio_bindings::virtio_config::VIRTIO_F_VERSION_1;
use virtio_bindings::virtio_ring::{VIRTIO_RING_F_EVENT_IDX, VIRTIO_RING_F_INDIRECT_DESC};

use super::request::{self, BlkKind};
use super::{
    BlkConfigSpace, BlkPersonality, MAX_DISCARD_SECTORS, MAX_DISCARD_SEG, SIZE_MAX,
    WRITEBACK_OFFSET,
};
use crate::device::{Chain, Outcome, Personality, StateRegion};

impl Personality for BlkPersonality {
    type Kind = BlkKind;

    fn name(&self) -> &'static str {
        "virtio-blk"
    }

    fn num_queues(&self) -> usize {
        usize::from(self.opts.num_queues)
    }

    fn first_request_queue(&self) -> usize {
        0
    }

    fn features(&self) -> u64 {
        let mut f = 1u64 << VIRTIO_F_VERSION_1
            | 1 << VIRTIO_RING_F_EVENT_IDX
            | 1 << VIRTIO_RING_F_INDIRECT_DESC
            | 1 << VIRTIO_BLK_F_SIZE_MAX
            | 1 << VIRTIO_BLK_F_SEG_MAX
            | 1 << VIRTIO_BLK_F_BLK_SIZE
            | 1 << VIRTIO_BLK_F_TOPOLOGY
            | 1 << VIRTIO_BLK_F_FLUSH
            | 1 << VIRTIO_BLK_F_CONFIG_WCE
            | 1 << VIRTIO_BLK_F_MQ;
        if self.storage.read_only() {
            f |= 1 << VIRTIO_BLK_F_RO;
        } else {
            f |= 1 << VIRTIO_BLK_F_DISCARD | 1 << VIRTIO_BLK_F_WRITE_ZEROES;
        }
        f
    }

    fn acked_features(&self, features: u64) {
        self.acked.store(features, Ordering::Relaxed);
    }

    fn config_space(&self) -> Vec<u8> {
        let lbs_sectors = self.opts.block_size / 512;
        BlkConfigSpace {
            capacity_sectors: self.storage.size() / 512,
            size_max: SIZE_MAX,
            seg_max: self.limits().seg_max,
            blk_size: self.opts.block_size,
            physical_block_exp: 0,
            min_io_size: lbs_sectors as u16,
            opt_io_size: 0,
            writeback: self.writeback(),
            num_queues: self.opts.num_queues,
            max_discard_sectors: MAX_DISCARD_SECTORS,
            max_discard_seg: MAX_DISCARD_SEG,
            discard_sector_alignment: lbs_sectors,
            max_write_zeroes_sectors: MAX_DISCARD_SECTORS,
            max_write_zeroes_seg: MAX_DISCARD_SEG,
            write_zeroes_may_unmap: true,
        }
        .to_bytes()
    }

    fn set_config(&self, offset: u32, data: &[u8]) -> io::Result<()> {
        // Only the writeback byte is writable, and only with CONFIG_WCE.
        let wce = self.acked.load(Ordering::Relaxed) & (1 << VIRTIO_BLK_F_CONFIG_WCE) != 0;
        let writable = offset as usize == WRITEBACK_OFFSET && wce;
        if let (true, [byte]) = (writable, data) {
            let wb = *byte != 0;
            // The mode first, then the flush that makes write-through true: a write on another
            // queue that still read write-back had completed before this store, so before the
            // flush, which covers it; one that reads write-through syncs itself. (Flushing
            // first let a write land after the flush and complete unsynced, reading write-back.)
            self.writeback.store(wb, Ordering::SeqCst);
            if let Some(s) = self.state().as_ref() {
                s.set_write_cache(0, wb);
            }
            tracing::info!(writeback = wb, "guest switched the cache mode");
            if !wb {
                // On failure the disk stays write-through (more durable, never less).
                self.storage
                    .flush()
                    .map_err(|e| io::Error::other(e.to_string()))?;
            }
            return Ok(());
        }
        Err(io::Error::from_raw_os_error(libc::EINVAL))
    }

    fn reset(&self) {
        // Back to the configured mode. Coming back to write-through from the guest's
        // write-back, the guest will send no FLUSH for the writes it completed before: they
        // are flushed here, after the mode is stored (as `set_config` does). A failure leaves
        // the image failed (storage health): every later write-through write fails.
        let configured = !self.opts.writethrough;
        let was = self.writeback.swap(configured, Ordering::SeqCst);
        if was && !configured {
            if let Err(e) = self.storage.flush() {
                tracing::error!(error = %e, "device reset: flushing the write cache failed");
            }
        }
        // The area belongs to the device's life before the reset; QEMU makes a new one.
        *self.state() = None;
    }

    fn attach_state(&self, state: Option<StateRegion>) {
        if let Some(s) = &state {
            match s.write_cache(0) {
                Some(wb) => {
                    if wb != self.writeback() {
                        tracing::info!(writeback = wb, "the guest's cache mode, kept by QEMU");
                    }
                    self.writeback.store(wb, Ordering::Relaxed);
                }
                None => s.set_write_cache(0, self.writeback()),
            }
        }
        *self.state() = state;
    }

    fn process(&self, _queue: usize, chain: Chain) -> Outcome<BlkKind> {
        request::handle(self, chain)
    }
}
