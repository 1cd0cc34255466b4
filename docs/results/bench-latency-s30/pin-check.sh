#!/usr/bin/env bash
# The check behind LAT_PIN: end-to-end median error and p99 excess of the MSI-X latency at 200
# and 1000 us, backend under the fair scheduler and at SCHED_FIFO 80, each unpinned and pinned
# (backend CPU 0, bench CPU 1), ROUNDS rounds (default 2). Same runs as experiments/bench-latency.sh's
# latency section (null storage, 1 queue, QD1, 2 s, --measure-irq).
# Usage: flock /tmp/vb-cpu.lock docs/results/bench-latency-s30/pin-check.sh   (release build, root)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../../.." && pwd)
W=$(mktemp -d)
# shellcheck source=experiments/backend-lib.sh
. "$ROOT/experiments/backend-lib.sh"
trap 'stop_backends; rm -rf "$W"' EXIT
one() { # NAME TARGET_US PIN(0|1) BACKEND-ARGS...
    local name=$1 t=$2 pin=$3 bench_prefix=()
    shift 3
    BACKEND_PREFIX=()
    if [ "$pin" = 1 ]; then BACKEND_PREFIX=(taskset -c 0) bench_prefix=(taskset -c 1); fi
    start_backend "$W/b.log" "$W/s.sock" ours --null 1G --num-queues 1 --msix-latency "${t}us" "$@"
    ${bench_prefix[@]+"${bench_prefix[@]}"} "$ROOT/target/release/vhost-blk-bench" \
        --socket "$W/s.sock" --ramp 200ms --duration 2s --backend-pid "$BACKEND_PID" \
        --json "$W/$name.json" --queues 1 --qd 1 --measure-irq >/dev/null
    stop_backend
    python3 - "$W/$name.json" "$name" "$t" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))["total"]["irq_delay_us"]
t = float(sys.argv[3])
print(f"{sys.argv[2]:22} median error {d['p50'] - t:+.2f} us, p99 excess {d['p99'] - t:+.1f} us")
PY
}
for r in $(seq "${ROUNDS:-2}"); do
    for t in 200 1000; do
        one "r$r-$t-fair-unpinned" "$t" 0
        one "r$r-$t-fair-pinned" "$t" 1
        one "r$r-$t-fifo-unpinned" "$t" 0 --rt-priority 80
        one "r$r-$t-fifo-pinned" "$t" 1 --rt-priority 80
    done
done
