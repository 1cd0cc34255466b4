#!/usr/bin/env bash
# Where two vhost-blk builds spend their CPU on one path, side by side: perf record (cpu-clock,
# DWARF call graphs, 300 Hz) of the backend process for 6 s in the middle of an 8 s run, A and B
# alternated for ROUNDS rounds (A B, then B A). Per run it writes the flat profile (self time by
# symbol, user and kernel) and, for every libc copy or fill routine (memmove/memcpy/memset), the
# call paths that reach it, reduced to their percentage lines; and the bench's JSON. It found the
# per-request copies of GuestBufs that cost SCSI READ(10) its efficiency against 16d77f8
# (docs/results/scale128/README.md). Sampling at 300 Hz gives ~3,500 samples per run, so a
# symbol's share is good to about +-0.5 percentage points; read the runs together.
# What it cannot see: anything that is not time on a CPU (the client's waits), and inlined
# functions are named by their DWARF inline records, as perf resolves them.
# Usage: experiments/profile-ab.sh OLD_DIR NEW_DIR OUT_DIR [scsi|blk]
#   OLD_DIR/NEW_DIR hold a release `vhost-blk`; NEW_DIR's `vhost-blk-bench` drives both.
#   env: ROUNDS (2). 8 queues x QD16, 2 client threads, null storage, 4k random reads.
# Run it under the CPU lock (flock /tmp/vb-cpu.lock ...); needs perf.
set -euo pipefail
[ $# -ge 3 ] || { echo "usage: experiments/profile-ab.sh OLD_DIR NEW_DIR OUT_DIR [scsi|blk]" >&2; exit 2; }
OLD=$(cd "$1" && pwd) NEW=$(cd "$2" && pwd)
OUT=$3
PATH_KIND=${4:-scsi}
ROUNDS=${ROUNDS:-2}
command -v perf >/dev/null || { echo "profile-ab: perf is not installed" >&2; exit 2; }
[[ "$ROUNDS" =~ ^[1-9][0-9]*$ ]] || { echo "profile-ab: ROUNDS must be a positive integer, got '$ROUNDS'" >&2; exit 2; }
case $PATH_KIND in
scsi) BARGS=(--device scsi --null 1G) CARGS=(--device scsi) ;;
blk) BARGS=(--null 1G) CARGS=() ;;
*) echo "profile-ab: PATH must be scsi or blk, not '$PATH_KIND'" >&2; exit 2 ;;
esac
for b in "$OLD/vhost-blk" "$NEW/vhost-blk" "$NEW/vhost-blk-bench"; do
    [ -x "$b" ] || { echo "profile-ab: $b is missing" >&2; exit 2; }
done
mkdir -p "$OUT"
WORK=$(mktemp -d)
# shellcheck source=experiments/backend-lib.sh
. "$(cd "$(dirname "$0")" && pwd)/backend-lib.sh"
trap 'stop_backends; rm -rf "$WORK"' EXIT

one() { # SIDE ROUND
    local name=$1-r$2 rec
    if [ "$1" = A ]; then VB_BACKEND_BIN=$OLD/vhost-blk; else VB_BACKEND_BIN=$NEW/vhost-blk; fi
    export VB_BACKEND_BIN
    start_backend "$WORK/backend.log" "$WORK/b.sock" ours "${BARGS[@]}" --num-queues 8
    (sleep 1 && perf record -q -F 300 --call-graph dwarf,8192 -e cpu-clock -p "$BACKEND_PID" \
        -o "$WORK/$name.data" -- sleep 6 >/dev/null 2>&1) &
    rec=$!
    timeout 120 "$NEW/vhost-blk-bench" --socket "$WORK/b.sock" --ramp 200ms --duration 8s \
        --queues 8 --qd 16 --threads 2 --backend-pid "$BACKEND_PID" --json "$OUT/$name.json" \
        "${CARGS[@]}" >/dev/null
    wait "$rec"
    stop_backend
    perf report -i "$WORK/$name.data" --no-children --sort sym --percent-limit 0.5 -g none \
        --stdio 2>/dev/null | grep -v '^#' | grep -v '^$' >"$OUT/$name-flat.txt"
    local copies
    copies=$(grep -oE '__mem(move|cpy|set)[a-z0-9_]*' "$OUT/$name-flat.txt" | sort -u | paste -sd, -)
    if [ -n "$copies" ]; then
        perf report -i "$WORK/$name.data" --no-children -S "$copies" -G --stdio 2>/dev/null |
            grep -E -- '--[0-9.]+%--|^ +[0-9.]+%' >"$OUT/$name-copies.txt" || true
    fi
    rm -f "$WORK/$name.data"
}

for r in $(seq "$ROUNDS"); do
    if [ $((r % 2)) = 1 ]; then order="A B"; else order="B A"; fi
    for side in $order; do one "$side" "$r"; done
done
for f in "$OUT"/*-flat.txt; do
    echo "== $(basename "$f" -flat.txt): ops per backend CPU-second" \
        "$(grep -oE '"ops_per_backend_cpu_second": *[0-9]+' "${f%-flat.txt}.json" | grep -oE '[0-9]+$')"
    head -12 "$f"
done | tee "$OUT/summary.txt"
