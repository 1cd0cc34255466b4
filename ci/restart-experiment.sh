#!/usr/bin/env bash
# Issue 15's goal: 10 backend kills in a row during fio crc32c verify on 8 queues over
# vhost-user-blk (suite restart-verify-10), RUNS times. Each run is the booted test
# guest-tests/tests/booted_restart.rs with VB_RESTART_SUITE=restart-verify-10: fio exit 0, no fio
# job error, no I/O error / hung task in the guest's dmesg, all 10 kills done mid-fio, chains
# resubmitted, backend fds/RSS and QEMU fds flat. Results: docs/results/restart/.
# Takes ~3 min of CPU per run under TCG on 2 cores; run it under the shared CPU lock.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${RUNS:-2}
out=${OUT:-docs/results/restart}
mkdir -p "$out"
cargo build -p vhost-blk
for i in $(seq 1 "$runs"); do
    dir="$PWD/target/restart-experiment/run$i"
    start=$(date +%s)
    VB_RESTART_SUITE=restart-verify-10 VB_RESTART_DIR="$dir" \
        cargo test -p guest-tests --test booted_restart fio_verify -- --nocapture \
        2>&1 | tee "$out/run$i.log"
    echo "run $i: $(( $(date +%s) - start )) s wall" | tee -a "$out/run$i.log"
    cp "$dir/restarts.json" "$out/run$i.restarts.json"
    grep -h 'inflight requests of the previous backend' "$dir"/backend.*.log \
        | sed 's/^[^ ]* *//' > "$out/run$i.resubmissions.txt" || true
    cp "$dir/artifacts/fio.1-restart-verify-long.fio.json" "$out/run$i.fio.json"
done
