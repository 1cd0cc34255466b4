//! guest-tests: boot real guest kernels against vhost-blk under QEMU, run fio suites and SCSI
//! scan timings in the guest, collect results with provenance, and compare kernels A/B.
//!
//! Pipeline: [`images`] -> launch -> [`agent`] -> results -> compare -> report.

pub mod agent;
pub mod compare;
pub mod images;
pub mod metrics;
pub mod report;
pub mod results;
