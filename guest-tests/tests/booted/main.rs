//! The booted-guest tests, one test target: a real kernel, real QEMU (TCG unless `VB_ACCEL`
//! says otherwise), real fio in the guest, real backends.
//!
//! 1. Every test here is `#[ignore]`d, so a plain `cargo test` lists each as ignored instead of
//!    booting (or passing without a boot). `ci/test.sh` runs them with `-- --ignored` and prints
//!    how many ran; it fails when fewer ran than it asked for.
//! 2. No test skips itself: a missing image, QEMU or tool is a failure.
//! 3. One guest at a time ([`common::one_guest_at_a_time`]): two TCG guests on a small host
//!    would distort each other's timings.
//! 4. `cost` is an experiment (experiments/scale-cost.sh), not a check: ci/test.sh skips it by
//!    name.

mod common;

mod agent;
mod cost;
mod devices;
mod kill;
mod reconnect;
mod restart;
mod scale;
mod smoke;
