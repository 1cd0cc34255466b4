//! The virtio-scsi personality.
//!
//! [`target`] is a SCSI target layer that knows nothing of virtio: it takes a CDB and plain
//! buffers and returns a SCSI status, sense data and the number of bytes transferred. The virtio
//! framing (request/response headers, task management, events) sits on top of it.

pub mod target;
