//! vhost-blk: a vhost-user backend that stands in for a multi-queue SAS controller.
//!
//! Layers, bottom up: [`storage`] (positional vectored I/O), the device personalities
//! (virtio-blk and virtio-scsi) and the vhost-user plumbing that serves them.

pub mod blk;
pub mod completion;
pub mod config;
pub mod daemon;
pub mod device;
pub mod frontend;
pub mod scsi;
pub mod stats;
pub mod storage;
pub mod units;
