//! vhost-blk: a vhost-user backend that stands in for a multi-queue SAS controller.
//!
//! Crates below it, re-exported under their room names: [`units`] (sizes and durations as
//! typed, `vhost-blk-units`), [`storage`] (positional vectored I/O on files, RAM and null disks,
//! `vhost-blk-storage`), [`completion`] (the MSI-X latency / coalescing engine, device-free,
//! `vhost-blk-completion`), [`stats`] (per-queue counters and histograms, the `--stats-file`
//! format, `vhost-blk-stats`) and the SCSI target on byte buffers (`vhost-blk-scsi`, as
//! [`scsi::emulation`] and [`scsi::topology`]).
//!
//! Rooms, bottom up (each imports only rooms listed before it):
//! - [`device`]: the vhost-user backend over a `Personality`, per-queue workers, descriptor
//!   chains to guest buffers (`completion`, `stats`);
//! - [`blk`], [`scsi`]: the two personalities (`device`, `storage`; `scsi::topology` also
//!   `units`);
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

pub use vhost_blk_completion as completion;
pub use vhost_blk_sandbox as sandbox;
pub use vhost_blk_stats as stats;
pub use vhost_blk_storage as storage;
pub use vhost_blk_units as units;

pub mod blk;
pub mod config;
pub mod daemon;
pub mod device;
pub mod scsi;
