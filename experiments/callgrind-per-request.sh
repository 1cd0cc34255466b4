#!/usr/bin/env bash
# Instructions the backend executes per request, blk vs SCSI READ(10) / READ(16), same binary:
# valgrind's callgrind counts only inside the backend's event handling (the worker's whole
# per-request path: popping the chain, validation, storage, completion, used ring, signalling),
# divided by the completions the backend's own statistics counted. Instruction counts do not
# depend on host load, so this separates "the SCSI path does more work" from "the SCSI run was
# scheduled worse" (experiments/bench-latency.sh measures CPU-seconds, which mixes both). Blind to the cost
# of atomics, syscalls and context switches (docs/perf.md).
# Usage: experiments/callgrind-per-request.sh [OUT_DIR]   (needs valgrind and a release build)
# Output: the table on stdout (`lab table callgrind OUT_DIR` builds it from each
# path's NAME.cg and NAME-stats.json, kept in OUT_DIR).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
B=$ROOT/target/release
OUT=${1:-$(mktemp -d)}
command -v valgrind >/dev/null || { echo "callgrind-per-request: valgrind is not installed" >&2; exit 2; }
if [ ! -x "$B/vhost-blk" ] || [ ! -x "$B/vhost-blk-bench" ] || [ ! -x "$B/lab" ]; then
    echo "callgrind-per-request: build first: cargo build --release -p vhost-blk -p vhost-blk-bench -p lab --bins" >&2
    exit 2
fi
mkdir -p "$OUT"
one() { # NAME BACKEND-ARGS CLIENT-ARGS
    local name=$1 sock=$OUT/$1.sock
    rm -f "$sock"
    # The backend's VhostUserBackend::handle_event, by its symbol: `<impl VhostUserBackend for
    # DeviceBackend<P>>::handle_event` since the impl moved into device/backend/vhost_user.rs,
    # `<DeviceBackend<P> as VhostUserBackend>::handle_event` in older builds (A/B against them).
    # shellcheck disable=SC2086
    valgrind --tool=callgrind --callgrind-out-file="$OUT/$name.cg" \
        --toggle-collect='*VhostUserBackend for *::handle_event' \
        --toggle-collect='*VhostUserBackend>::handle_event' \
        "$B/vhost-blk" --socket-path "$sock" $2 --num-queues 8 --threads 1 \
        --stats-file "$OUT/$name-stats.json" >"$OUT/$name.log" 2>&1 &
    local pid=$!
    for _ in $(seq 200); do [ -S "$sock" ] && break; sleep 0.1; done
    # shellcheck disable=SC2086
    timeout 120 "$B/vhost-blk-bench" --socket "$sock" --ramp 1s --duration 10s --queues 8 \
        --qd 16 --threads 2 --backend-pid "$pid" --json "$OUT/$name.json" $3 >/dev/null
    kill "$pid"; wait "$pid" || true   # the stats file is written at exit
}
one blk "--null 1G" ""
one scsi10 "--device scsi --null 1G" "--device scsi"
one scsi16 "--device scsi --null 1G" "--device scsi --cdb16"
# The table: `lab table callgrind` (its docs say how each figure is computed).
"$B/lab" table callgrind "$OUT" --paths "blk scsi10 scsi16"
