//! guest-tests: boot real guest kernels against vhost-blk under QEMU, run fio suites and SCSI
//! scan timings in the guest, collect results with provenance, and compare kernels A/B.
//!
//! The stages are crates of their own, each using only crates below it (`tests/layers.rs`):
//!
//! - [`gt_suite`]: suites as data, the machine's shape per cell, where things live
//!   ([`gt_suite::paths`]).
//! - [`gt_images`]: kernels, initramfs, and the per-run initrd ([`gt_images::job`]).
//! - [`gt_ordering`]: the litmus tests a kernel carries, run with herd7 against its source's LKMM.
//! - [`gt_launch`]: backend + QEMU; returns the raw results stream and the host's verdict; its
//!   [`gt_launch::agent`] is the guest protocol's framing parser (parses each byte once).
//! - [`gt_results`]: artefact parsers and the metric registry ([`gt_results::metrics`]); judges
//!   a run, derives its metrics, builds results.json with provenance, loads matrices
//!   ([`gt_results::results::load_runs`]).
//! - [`gt_compare`]: statistics only.
//! - [`gt_report`]: Markdown/HTML/SVG and the tables.
//!
//! This crate's own modules: [`executor`] (one run), [`matrix`] (suites over kernels),
//! [`batch`] (a matrix as a Slurm job array), [`bisect`] (builds, boots and classifies candidate
//! kernels of a git tree or a patch series), [`drill`] (the booted drills), [`cli`] (the
//! commands).

// Functions a reader holds in one screen: clippy::too_many_lines (threshold in clippy.toml)
// warns in the library's non-test code, which `cargo clippy` checks without cfg(test); a unit
// test reads as one scenario and is exempt.
#![cfg_attr(test, allow(clippy::too_many_lines))]

pub mod batch;
pub mod bisect;
pub mod cli;
pub mod drill;
pub mod executor;
pub mod matrix;
