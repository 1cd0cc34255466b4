//! An in-process vhost-user frontend: memfd guest memory, split virtqueues driven from the
//! driver side, and request builders (virtio-blk, virtio-scsi). Used by the integration tests
//! (to drive every queue of a backend in parallel without QEMU) and by the load generator
//! `vhost-blk-bench`. It talks to any vhost-user-blk backend (ours, qemu-storage-daemon) and
//! to vhost-user-scsi backends.

mod blk;
mod device;
mod memory;
mod ring;
pub mod scsi;

pub use blk::{BlkRequest, BlkResult};
pub use device::{ConnectOptions, Connection, QueueHandle};
pub use memory::GuestRam;
pub use ring::{Buf, RawDesc, SplitRing, Used};
pub use scsi::{scsi_connect_options, ScsiCtrl, ScsiRequest, ScsiResult};

/// Frontend errors.
#[derive(Debug, thiserror::Error)]
pub enum FrontendError {
    #[error("vhost-user: {0}")]
    VhostUser(String),
    #[error("guest memory: {0}")]
    Memory(String),
    #[error("out of guest memory ({0} bytes requested)")]
    OutOfMemory(u64),
    #[error("queue full")]
    QueueFull,
    #[error("timed out waiting for completions")]
    Timeout,
    #[error("backend returned unknown descriptor id {0}")]
    BadUsedId(u32),
    #[error("I/O: {0}")]
    Io(#[from] std::io::Error),
}
