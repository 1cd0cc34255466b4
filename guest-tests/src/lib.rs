//! guest-tests: boot real guest kernels against vhost-blk under QEMU, run fio suites and SCSI
//! scan timings in the guest, collect results with provenance, and compare kernels A/B.
//!
//! Rooms, each importing only rooms below it (`tests/no_import_cycles.rs` keeps it so):
//!
//! - [`paths`], [`suite`]: where things live; suites as data (read by every stage).
//! - [`images`]: kernels, initramfs, and the per-run initrd ([`images::job`]).
//! - [`ordering`]: the litmus tests a kernel carries, run with herd7 against its source's LKMM.
//! - [`launch`]: backend + QEMU; returns the raw results stream and the host's verdict.
//! - [`agent`]: the guest protocol's framing parser (fed by launch, parses each byte once).
//! - [`metrics`]: artefact parsers and the metric registry ([`metrics::registry`]).
//! - [`results`]: judges a run, derives its metrics, builds results.json with provenance,
//!   loads matrices ([`results::load_runs`]).
//! - [`compare`]: statistics only.
//! - [`report`]: Markdown/HTML/SVG and the tables.
//! - [`executor`] (one run), [`matrix`] (suites over kernels), [`batch`] (a matrix as a Slurm
//!   job array), [`bisect`] (builds, boots and classifies candidate kernels of a git tree or a
//!   patch series), [`cli`] (the commands).
//!
//! ARCHITECTURE.md lists every room and its order (`tests/architecture.rs` checks the list).

// Functions a reader holds in one screen: clippy::too_many_lines (threshold in clippy.toml)
// warns in the library's non-test code, which `cargo clippy` checks without cfg(test); a unit
// test reads as one scenario and is exempt.
#![cfg_attr(test, allow(clippy::too_many_lines))]

pub use gt_compare as compare;
pub use gt_images as images;
pub use gt_launch as launch;
pub use gt_launch::agent;
pub use gt_ordering as ordering;
pub use gt_report as report;
pub use gt_results::{metrics, results};
pub use gt_suite as suite;
pub use gt_suite::paths;

pub mod batch;
pub mod bisect;
pub mod cli;
pub mod drill;
pub mod executor;
pub mod matrix;
