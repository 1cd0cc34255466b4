#!/usr/bin/env bash
# The cost of scale (issue 46): boot time, memory and threads at 8, 62 and 128 request queues.
# Runs the cost drill (`lab drill cost`, guest_tests::drill::cost; suite scale-cost: vhost-blk
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
cargo build -p lab
target/debug/lab drill cost --backend "$PWD/target/release/vhost-blk" --qemu "${QEMU:-7.2}" \
    --kernel "$kernel" --repeat "$repeat" --dir "$PWD/target/scale-cost" >"$out/scale-cost.log" 2>&1
target/debug/lab table scale-cost "$out" | tee "$out/scale-cost.md"
