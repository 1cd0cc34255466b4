#!/usr/bin/env bash
# Issue 15's goal: 10 backend kills in a row during fio crc32c verify on 8 queues over
# vhost-user-blk (suite restart-verify-10), RUNS times. Each run is the booted test
# guest-tests/tests/booted_restart.rs with VB_RESTART_SUITE=restart-verify-10: fio exit 0, no fio
# job error, no I/O error / hung task in the guest's dmesg, all 10 kills done mid-fio, chains
# resubmitted, backend fds/RSS and QEMU fds flat. Results: docs/results/restart/.
# Takes ~2 min of CPU per run under TCG on 2 cores (5 min for a run that hangs: the suite's
# timeout); run it under the shared CPU lock. Environment: RUNS (2), OUT (docs/results/restart),
# RUN_BASE (run directories, default target/restart-experiment), VB_BACKEND_BIN (another backend
# binary, e.g. an older build as a control).
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${RUNS:-2}
out=${OUT:-docs/results/restart}
mkdir -p "$out"
cargo build -p vhost-blk
failed=0
for i in $(seq 1 "$runs"); do
    dir="${RUN_BASE:-$PWD/target/restart-experiment}/run$i"
    start=$(date +%s)
    status=0
    VB_RESTART_SUITE=restart-verify-10 VB_RESTART_DIR="$dir" \
        cargo test -p guest-tests --test booted_restart fio_verify -- --nocapture \
        2>&1 | tee "$out/run$i.log" || status=$?
    echo "run $i: $(( $(date +%s) - start )) s wall, exit $status" | tee -a "$out/run$i.log"
    [ "$status" = 0 ] || failed=$((failed + 1))
    # Kept either way: a hung run's evidence is in its backend logs and console.
    cp "$dir/restarts.json" "$out/run$i.restarts.json" 2>/dev/null || true
    grep -h 'inflight requests of the previous backend' "$dir"/backend.*.log \
        | sed 's/^[^ ]* *//' > "$out/run$i.resubmissions.txt" || true
    cp "$dir/artifacts/fio.1-restart-verify-long.fio.json" "$out/run$i.fio.json" 2>/dev/null || true
    tail -n 30 "$dir/console.log" > "$out/run$i.console-tail.txt" 2>/dev/null || true
done
echo "restart-experiment: $failed of $runs runs failed"
[ "$failed" = 0 ]
