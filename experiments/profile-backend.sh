#!/usr/bin/env bash
# Where the backend's CPU goes, ours beside qemu-storage-daemon, under one client: perf record
# (cpu-clock, call graphs) of the backend process for 2 s in the middle of a 3 s run of 4k random
# reads on null storage, 8 queues x QD16, 2 client threads (the efficiency setting of
# experiments/bench-latency.sh). Writes per configuration the flat profile (self time by symbol), the
# callers of every symbol above 5 % and the bench's JSON, then prints (and writes to summary.md)
# one table from them (`lab table profile`): the share of samples in context switches,
# signalling the client, guest-memory translation, the zero fill, copies, statistics. The groups
# go by symbol name, so they are approximate (e.g. _raw_spin_unlock_irq is counted as eventfd:
# the callers files show that is where almost all of it comes from).
# Not part of CI (needs perf and a quiet host; run it under `flock /tmp/vb-cpu.lock`).
# Usage: experiments/profile-backend.sh OUT_DIR     env: CLIENT (blkio | bench; default blkio)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
B=$ROOT/target/release
[ $# = 1 ] || { echo "usage: experiments/profile-backend.sh OUT_DIR" >&2; exit 2; }
OUT=$1
CLIENT=${CLIENT:-blkio}
case "$CLIENT" in
blkio) CARGS=(--client blkio) ;;
bench) CARGS=() ;;
*) echo "profile-backend: CLIENT must be blkio or bench, not '$CLIENT'" >&2; exit 2 ;;
esac
command -v perf >/dev/null || { echo "profile-backend: perf is not installed" >&2; exit 2; }
command -v qemu-storage-daemon >/dev/null ||
    { echo "profile-backend: qemu-storage-daemon is not installed" >&2; exit 2; }
if [ ! -x "$B/vhost-blk" ] || [ ! -x "$B/vhost-blk-bench" ] || [ ! -x "$B/lab" ]; then
    echo "profile-backend: build first: cargo build --release -p vhost-blk -p vhost-blk-bench -p lab --bins" >&2
    exit 2
fi
mkdir -p "$OUT"
WORK=$(mktemp -d)
# shellcheck source=experiments/backend-lib.sh
. "$ROOT/experiments/backend-lib.sh"
trap 'stop_backends; rm -rf "$WORK"' EXIT

one() { # NAME ours|qsd BACKEND-ARGS
    local name=$1 kind=$2 sock=$WORK/$1.sock
    if [ "$kind" = qsd ]; then
        start_backend "$WORK/$name.log" "$sock" qsd 8 0 || exit 2
    else
        # shellcheck disable=SC2086
        start_backend "$WORK/$name.log" "$sock" ours $3 --num-queues 8 || exit 2
    fi
    (sleep 0.6; perf record -F 3000 -g -p "$BACKEND_PID" -o "$WORK/$name.data" -- sleep 2 \
        >/dev/null 2>&1) &
    local perf_pid=$!
    timeout 60 "$B/vhost-blk-bench" --socket "$sock" --ramp 200ms --duration 3s \
        --backend-pid "$BACKEND_PID" --queues 8 --qd 16 --threads 2 ${CARGS[@]+"${CARGS[@]}"} \
        --json "$OUT/$name.json" >/dev/null
    wait "$perf_pid" || true
    stop_backend
    perf report -i "$WORK/$name.data" --no-children --sort symbol --stdio 2>/dev/null |
        grep -E '^ +[0-9.]+%' | sed -E 's/ +- +- +$//' >"$OUT/$name-flat.txt" || true
    perf report -i "$WORK/$name.data" --no-children --sort symbol -G --stdio \
        --percent-limit 5 2>/dev/null | grep -v '^#' | grep -v '^$' >"$OUT/$name-callers.txt" || true
}

one ours-t8 ours "--null 1G"
one ours-t1 ours "--null 1G --threads 1"
one qsd qsd ""
"$B/lab" table profile "$OUT" "$CLIENT" | tee "$OUT/summary.md"
