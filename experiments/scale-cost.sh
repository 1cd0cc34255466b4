#!/usr/bin/env bash
# The cost of scale (issue 46): boot time, memory and threads at 8, 62 and 128 request queues.
# Runs the booted test guest-tests/tests/booted/cost.rs (suite scale-cost: vhost-blk
# virtio-scsi on null storage, one possible guest CPU per queue of which 2 run) REPEAT times
# per cell on KERNEL, one boot at a time, and prints its table of medians: wall time from QEMU's
# start to the agent's disk report, the backend's RSS and threads before QEMU connects and with
# the guest up, its open descriptors, QEMU's RSS and threads. Output: OUT/scale-cost.log (every
# boot's COST-RESULT line) and OUT/scale-cost.md (the table). ~1 min of TCG per boot; run it
# under the shared CPU lock. Environment: KERNEL (rt128), REPEAT (3), QEMU (7.2),
# OUT (docs/results/scale-cost).
set -euo pipefail
cd "$(dirname "$0")/.."
kernel=${KERNEL:-rt128}
repeat=${REPEAT:-3}
out=${OUT:-docs/results/scale-cost}
mkdir -p "$out"
case "${QEMU:-7.2}" in 10) ci/fetch-qemu10.sh >/dev/null ;; esac
cargo build --release -p vhost-blk
VB_BACKEND_BIN=$PWD/target/release/vhost-blk VB_QEMU=${QEMU:-7.2} \
    VB_COST_KERNEL=$kernel VB_COST_REPEAT=$repeat \
    cargo test -q -p guest-tests --test booted cost:: -- --ignored --nocapture >"$out/scale-cost.log" 2>&1
sed -n '/^scale-cost: /,$p' "$out/scale-cost.log" | grep -E '^(scale-cost:|\|)' | tee "$out/scale-cost.md"
