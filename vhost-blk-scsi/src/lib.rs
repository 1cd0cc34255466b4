//! The SCSI target of vhost-blk's virtio-scsi personality, on byte buffers: [`emulation`] takes
//! a CDB and buffers and returns status, sense and data length (it knows nothing of virtio;
//! Cargo keeps it so, as this crate does not depend on vhost-blk); [`topology`] is the targets x
//! LUNs settings and the compact `--topology` form.

// No panic on guest input, as in vhost-blk: `unwrap`, `expect`, `panic!`, `unreachable!`,
// indexing and slicing are errors outside tests (an exception is allowed in place, with its
// reason).
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
#![cfg_attr(test, allow(clippy::too_many_lines))]

pub mod emulation;
pub mod topology;
