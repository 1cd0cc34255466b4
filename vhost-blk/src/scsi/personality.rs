//! virtio-scsi as a device-layer [`Personality`]: queue layout (control queue 0, event queue 1,
//! request queues from 2), features, configuration space (CDB and sense sizes are writable).
//!
//! Request queues go to [`virtio::handle_cmd`], the control queue to
//! `control::handle`. Event-queue buffers are held: the topology is
//! static, so no event is ever reported, and they are dropped at device reset.

use std::io;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

use virtio_bindings::virtio_config::VIRTIO_F_VERSION_1;
use virtio_bindings::virtio_ring::{VIRTIO_RING_F_EVENT_IDX, VIRTIO_RING_F_INDIRECT_DESC};
use virtio_bindings::virtio_scsi::*;

use super::config_space::{
    ScsiConfigSpace, CDB_SIZE_OFFSET, MAX_CDB_SIZE, MAX_SENSE_SIZE, SENSE_SIZE_OFFSET,
};
use super::virtio::{CmdContext, ScsiKind};
use super::{control, virtio};
use crate::device::{Chain, ChainLimits, Outcome, Personality, StateRegion};
use vhost_blk_scsi::emulation::{Topology, MAX_TRANSFER_BYTES};

/// The control queue.
pub const CONTROL_QUEUE: usize = 0;
/// The event queue.
pub const EVENT_QUEUE: usize = 1;
/// The first request queue.
pub const FIRST_REQUEST_QUEUE: usize = 2;
/// Vrings before the request queues (control and event).
pub const EXTRA_VRINGS: usize = FIRST_REQUEST_QUEUE;
/// Largest data segment of one descriptor.
const SIZE_MAX: u32 = 1 << 20;
/// `struct virtio_scsi_event`.
pub const EVENT_INFO_SIZE: u32 = 16;

/// Settings of the personality.
#[derive(Debug, Clone)]
pub struct ScsiOptions {
    /// Request queues (MSI-X vectors for the completion model).
    pub num_queues: u16,
    pub queue_size: u16,
    /// Advertised `cmd_per_lun` (the guest's default LUN queue depth).
    pub cmd_per_lun: u32,
}

/// virtio-scsi over a [`Topology`].
#[derive(Debug)]
pub struct ScsiPersonality {
    topology: Arc<Topology>,
    opts: ScsiOptions,
    cdb_size: AtomicU32,
    sense_size: AtomicU32,
    acked: AtomicU64,
}

impl ScsiPersonality {
    pub fn new(topology: Arc<Topology>, opts: ScsiOptions) -> Self {
        Self {
            topology,
            opts,
            cdb_size: AtomicU32::new(VIRTIO_SCSI_CDB_DEFAULT_SIZE),
            sense_size: AtomicU32::new(VIRTIO_SCSI_SENSE_DEFAULT_SIZE),
            acked: AtomicU64::new(0),
        }
    }

    pub fn topology(&self) -> &Arc<Topology> {
        &self.topology
    }

    /// The chains the device accepts (`seg_max` of them go in the configuration space).
    fn limits(&self) -> ChainLimits {
        ChainLimits::new(self.opts.queue_size, SIZE_MAX)
    }

    /// Current CDB and sense sizes of the request layout.
    pub(crate) fn sizes(&self) -> (usize, usize) {
        (
            self.cdb_size.load(Ordering::Relaxed) as usize,
            self.sense_size.load(Ordering::Relaxed) as usize,
        )
    }
}

impl Personality for ScsiPersonality {
    type Kind = ScsiKind;

    fn name(&self) -> &'static str {
        "virtio-scsi"
    }

    fn num_queues(&self) -> usize {
        FIRST_REQUEST_QUEUE + usize::from(self.opts.num_queues)
    }

    fn first_request_queue(&self) -> usize {
        FIRST_REQUEST_QUEUE
    }

    fn features(&self) -> u64 {
        1u64 << VIRTIO_F_VERSION_1
            | 1 << VIRTIO_RING_F_EVENT_IDX
            | 1 << VIRTIO_RING_F_INDIRECT_DESC
            | 1 << VIRTIO_SCSI_F_HOTPLUG
            | 1 << VIRTIO_SCSI_F_CHANGE
    }

    fn acked_features(&self, features: u64) {
        self.acked.store(features, Ordering::Relaxed);
    }

    fn config_space(&self) -> Vec<u8> {
        let (cdb_size, sense_size) = self.sizes();
        ScsiConfigSpace {
            num_queues: u32::from(self.opts.num_queues),
            seg_max: self.limits().seg_max,
            max_sectors: (MAX_TRANSFER_BYTES / 512) as u32,
            cmd_per_lun: self.opts.cmd_per_lun,
            event_info_size: EVENT_INFO_SIZE,
            sense_size: sense_size as u32,
            cdb_size: cdb_size as u32,
            max_channel: 0,
            max_target: self.topology.max_target(),
            max_lun: u32::from(self.topology.max_lun()),
        }
        .to_bytes()
    }

    fn set_config(&self, offset: u32, data: &[u8]) -> io::Result<()> {
        let einval = || io::Error::from_raw_os_error(libc::EINVAL);
        let value = u32::from_le_bytes(data.try_into().map_err(|_| einval())?);
        match offset as usize {
            SENSE_SIZE_OFFSET if value <= MAX_SENSE_SIZE => {
                self.sense_size.store(value, Ordering::Relaxed)
            }
            CDB_SIZE_OFFSET if (1..=MAX_CDB_SIZE).contains(&value) => {
                self.cdb_size.store(value, Ordering::Relaxed)
            }
            _ => return Err(einval()),
        }
        tracing::debug!(offset, value, "driver wrote the configuration space");
        Ok(())
    }

    fn reset(&self) {
        self.cdb_size
            .store(VIRTIO_SCSI_CDB_DEFAULT_SIZE, Ordering::Relaxed);
        self.sense_size
            .store(VIRTIO_SCSI_SENSE_DEFAULT_SIZE, Ordering::Relaxed);
    }

    fn attach_state(&self, state: Option<StateRegion>) {
        // One slot per LUN, in topology order (targets, then LUNs, by id); LUNs past the last
        // slot keep their bit only for this process.
        let luns = self
            .topology
            .targets()
            .flat_map(|t| t.lun_ids().filter_map(move |l| t.lun(l)));
        for (slot, lun) in luns.enumerate() {
            let Some(s) = state.clone() else {
                lun.watch_write_cache(None, None);
                continue;
            };
            let restore = s.write_cache(slot);
            if restore.is_none() {
                s.set_write_cache(slot, lun.write_cache());
            }
            let hook = std::sync::Arc::new(move |on: bool| s.set_write_cache(slot, on));
            lun.watch_write_cache(restore, Some(hook));
        }
    }

    fn completes_after_requests(&self, queue: usize) -> bool {
        // A TMF answer tells the driver the commands it covers are done (Linux polls the
        // request queues once after it and then considers them finished).
        queue == CONTROL_QUEUE
    }

    fn process(&self, queue: usize, chain: Chain<'_>) -> Outcome<ScsiKind> {
        match queue {
            CONTROL_QUEUE => control::handle(&self.topology, &self.limits(), chain),
            EVENT_QUEUE => Outcome::Held,
            _ => {
                let (cdb_size, sense_size) = self.sizes();
                let cx = CmdContext {
                    topology: &self.topology,
                    limits: self.limits(),
                    cdb_size,
                    sense_size,
                };
                virtio::handle_cmd(&cx, chain)
            }
        }
    }
}
