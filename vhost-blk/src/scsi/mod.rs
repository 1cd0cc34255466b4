//! The virtio-scsi personality.
//!
//! [`vhost_blk_scsi::emulation`] is a SCSI target layer that knows nothing of virtio: it takes a CDB and plain
//! buffers and returns a SCSI status, sense data and the number of bytes transferred.
//! [`vhost_blk_scsi::topology`] holds the settings of targets and LUNs (TOML and the compact `--topology`
//! form) and builds an emulation topology from them.
//! [`virtio`] frames it for the request queues (command request/response headers), [`control`]
//! answers the control queue (task management and asynchronous-notification requests), and
//! [`personality`] implements the device layer's `Personality` (queue layout, features,
//! configuration space) by dispatching to those two.
//!
//! Dependencies: `personality` -> `virtio`, `control`, `config_space`; `control` -> `virtio`
//! (its request kind); `virtio`, `control` -> `emulation`; `topology` -> `emulation`. The
//! emulation layer depends on none of them.

pub mod config_space;
pub mod control;
pub mod personality;
pub mod virtio;

#[cfg(test)]
mod tests;

pub use personality::{ScsiOptions, ScsiPersonality, EXTRA_VRINGS};
