//! The virtio-scsi personality.
//!
//! [`emulation`] is a SCSI target layer that knows nothing of virtio: it takes a CDB and plain
//! buffers and returns a SCSI status, sense data and the number of bytes transferred.
//! [`topology`] holds the settings of targets and LUNs (TOML and the compact `--topology`
//! form) and builds an emulation topology from them.
//! [`virtio`] frames it for virtio-scsi (queue layout, command request/response headers,
//! configuration space, features) and [`control`] answers the control queue (task management
//! and asynchronous-notification requests).

pub mod config_space;
pub mod control;
pub mod emulation;
pub mod topology;
pub mod virtio;

pub use virtio::{ScsiOptions, ScsiPersonality};
