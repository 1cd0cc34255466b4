//! vhost-blk: a vhost-user backend that stands in for a multi-queue SAS controller.
//!
//! The crates below it, used by their own names: [`vhost_blk_units`] (sizes and durations as
//! typed), [`vhost_blk_storage`] (positional vectored I/O on files, RAM and null disks),
//! [`vhost_blk_completion`] (the MSI-X latency / coalescing engine, device-free),
//! [`vhost_blk_stats`] (per-queue counters and histograms, the `--stats-file` format),
//! [`vhost_blk_sandbox`] (seccomp and Landlock) and [`vhost_blk_scsi`] (the SCSI target on byte
//! buffers and its topology).
//!
//! Rooms, bottom up (each imports only rooms listed before it):
//! - [`device`]: the vhost-user backend over a `Personality`, per-queue workers, descriptor
//!   chains to guest buffers (`vhost_blk_completion`, `vhost_blk_stats`);
//! - [`blk`], [`scsi`]: the two personalities (`device`, `vhost_blk_storage`; `scsi` also
//!   `vhost_blk_scsi`);
//! - [`config`]: command line and settings file, validated into a `Config`;
//! - [`daemon`]: the socket, signals and connections; `main` runs it.
//!
//! The in-process vhost-user frontend of the tests and `vhost-blk-bench` is a crate of its own
//! (`vhost-blk-frontend`), not part of this library.

// No panic on guest input. In the library's non-test code `unwrap`, `expect`, `panic!`,
// `unreachable!`, indexing and slicing are errors (an exception is allowed in place, with its
// reason; the two binaries deny the same): every access is a checked `get`, an iterator, a
// pattern or a constant offset into an array.
#![cfg_attr(
    not(test),
    deny(
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::panic,
        clippy::unreachable,
        clippy::indexing_slicing
    )
)]

pub mod blk;
pub mod config;
pub mod daemon;
pub mod device;
pub mod scsi;
