//! The booted-guest tests, one test target: a real kernel, real QEMU (TCG unless `VB_ACCEL`
//! says otherwise), real fio in the guest, real backends.
//!
//! 1. Every test here is `#[ignore]`d, so a plain `cargo test` lists each as ignored instead of
//!    booting (or passing without a boot). `ci/test.sh` runs them with `-- --ignored` and prints
//!    how many ran; it fails when fewer ran than it asked for.
//! 2. No test skips itself: a missing image, QEMU or tool is a failure.
//! 3. One guest at a time ([`common::one_guest_at_a_time`]): two TCG guests on a small host
//!    would distort each other's timings.
//! 4. A drill that experiments also run (kill, restart, reconnect) lives in
//!    `guest_tests::drill`; a test here runs it and asserts that its checks held. Experiments
//!    run the drills through `lab drill`, never through these tests.

mod common;

mod agent;
mod devices;
mod kill;
mod reconnect;
mod restart;
mod sandbox;
mod scale;
mod smoke;
