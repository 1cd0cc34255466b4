//! The load generator's types others read: its command line ([`args`]) and its `--json`
//! report ([`report`]), declared once here; the experiments' tables (`lab table ...`) read runs
//! back through them. The generator itself is this crate's binary, `vhost-blk-bench`.

// As vhost-blk's library: no unwrap/expect/panic/unreachable, indexing or slicing outside tests.
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

pub mod args;
pub mod report;
