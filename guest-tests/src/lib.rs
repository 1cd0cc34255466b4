//! guest-tests: boot real guest kernels against vhost-blk under QEMU, run fio suites and SCSI
//! scan timings in the guest, collect results with provenance, and compare kernels A/B.
//!
//! Pipeline: [`images`] -> [`launch`] -> [`agent`] -> [`results`] -> [`compare`] -> report;
//! [`matrix`] runs suites ([`suite`], [`job`]) over kernels.

pub mod agent;
pub mod compare;
pub mod images;
pub mod job;
pub mod launch;
pub mod matrix;
pub mod metrics;
pub mod paths;
pub mod report;
pub mod results;
pub mod suite;
