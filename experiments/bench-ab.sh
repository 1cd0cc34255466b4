#!/usr/bin/env bash
# Efficiency of two vhost-blk builds side by side: ops per backend CPU-second (utime + stime of
# the backend process, as vhost-blk-bench --backend-pid measures it), old (A) and new (B)
# alternated A B A B ... in one run, each round in a rotated order of configurations, so host
# drift hits both alike. The same client binary drives both. Run it under the CPU lock:
#   flock /tmp/vb-cpu.lock experiments/bench-ab.sh OLD_DIR NEW_DIR [OUT_DIR]
# OLD_DIR and NEW_DIR hold a release `vhost-blk` (and NEW_DIR the `vhost-blk-bench` used as
# the client). Build an old one from a commit with e.g.
#   git archive COMMIT | tar -x -C /tmp/old && (cd /tmp/old && cargo build --release -p vhost-blk -p vhost-blk-bench -p lab --bins)
# env: ROUNDS (6), DURATION (3s), QUEUES (8), QD (16), THREADS (2), CONFIGS (all below),
#      HOG (0; 1 keeps one host core busy with a plain CPU loop pinned to the last CPU, for
#      the whole run, as experiments/exp-verdict.sh's busy cells do),
#      A_ARGS / B_ARGS (extra backend arguments of A / B: one build against itself, e.g.
#      A_ARGS="--sandbox off" with OLD_DIR = NEW_DIR, docs/results/sandbox/).
# Configurations (4k random reads unless named otherwise):
#   null-bench / null-blkio    --null 1G (zero fill into guest memory), our client / libblkio
#   mem-bench / mem-blkio      --mem 1G (preadv from a memfd straight into guest memory)
#   memw-bench                 --mem 1G, 4k random writes (pwritev from guest memory)
#   scsi10-bench               --device scsi --null 1G, READ(10)
# Output: OUT_DIR/ab.md (the table, also printed; NEW_DIR's `lab table ab` builds
# it from the runs' JSON: per configuration the medians of A's and B's ops per backend
# CPU-second over the rounds both have, B/A of the medians, the paired per-round B/A) and every
# run's JSON.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
[ $# -ge 2 ] || { echo "usage: experiments/bench-ab.sh OLD_DIR NEW_DIR [OUT_DIR]" >&2; exit 2; }
OLD=$(cd "$1" && pwd) NEW=$(cd "$2" && pwd)
OUT=${3:-$ROOT/target/bench-ab}
for b in "$OLD/vhost-blk" "$NEW/vhost-blk" "$NEW/vhost-blk-bench" "$NEW/lab"; do
    [ -x "$b" ] || { echo "bench-ab: $b is missing" >&2; exit 2; }
done
ROUNDS=${ROUNDS:-6} DURATION=${DURATION:-3s} QUEUES=${QUEUES:-8} QD=${QD:-16} THREADS=${THREADS:-2}
CONFIGS=${CONFIGS:-"null-bench null-blkio mem-bench mem-blkio memw-bench scsi10-bench"}
mkdir -p "$OUT"
rm -f "$OUT"/*.json "$OUT/failures.txt"
WORK=$(mktemp -d)
# shellcheck source=experiments/backend-lib.sh
. "$ROOT/experiments/backend-lib.sh"
HOG_PID=
trap 'stop_backends; rm -rf "$WORK"; [ -z "$HOG_PID" ] || kill "$HOG_PID"' EXIT
if [ "${HOG:-0}" = 1 ]; then
    taskset -c "$(($(nproc) - 1))" sh -c 'while :; do :; done' &
    HOG_PID=$!
fi

backend_args() { # CONFIG
    case $1 in
    null-*) echo "--null 1G" ;;
    mem*) echo "--mem 1G" ;;
    scsi10-*) echo "--device scsi --null 1G" ;;
    esac
}
client_args() { # CONFIG
    case $1 in
    *-blkio) echo "--client blkio" ;;
    scsi10-*) echo "--device scsi" ;;
    memw-*) echo "--rw randwrite" ;;
    *) echo "" ;;
    esac
}

read -ra CFG <<<"$CONFIGS"
N=${#CFG[@]}
for r in $(seq "$ROUNDS"); do
    for i in $(seq 0 $((N - 1))); do
        c=${CFG[$(((i + r - 1) % N))]}
        # A then B in odd rounds, B then A in even ones.
        if [ $((r % 2)) = 1 ]; then order="A B"; else order="B A"; fi
        for side in $order; do
            if [ "$side" = A ]; then VB_BACKEND_BIN=$OLD/vhost-blk; else VB_BACKEND_BIN=$NEW/vhost-blk; fi
            if [ "$side" = A ]; then extra=${A_ARGS:-}; else extra=${B_ARGS:-}; fi
            export VB_BACKEND_BIN
            # shellcheck disable=SC2046,SC2086
            start_backend "$WORK/backend.log" "$WORK/b.sock" ours $(backend_args "$c") --num-queues "$QUEUES" $extra
            # shellcheck disable=SC2046
            timeout 120 "$NEW/vhost-blk-bench" --socket "$WORK/b.sock" --ramp 200ms --duration "$DURATION" \
                --backend-pid "$BACKEND_PID" --json "$OUT/r$r-$c-$side.json" --queues "$QUEUES" --qd "$QD" \
                --threads "$THREADS" $(client_args "$c") >/dev/null ||
                echo "round $r $c $side: vhost-blk-bench failed (exit $?)" | tee -a "$OUT/failures.txt" >&2
            stop_backend
        done
    done
done

# The table: `lab table ab` (its docs say how each figure is computed).
"$NEW/lab" table ab "$OUT" --rounds "$ROUNDS" --configs "$CONFIGS" | tee "$OUT/ab.md"
