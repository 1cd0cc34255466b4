#!/usr/bin/env bash
# Backend benchmark table: latency accuracy and efficiency (not part of CI: it needs a quiet host;
# on the shared development host run it under `flock /tmp/vb-cpu.lock`). See docs/bench-latency.md.
#
#  1. Floor: cyclictest (SCHED_FIFO 80, 200 us interval, histogram in 1 us buckets) wake-up
#     latency of this host: p50 / p99 / max from its histogram; then the same at each target's
#     own interval (the goal's floor: a longer sleep can wake later). FIFO only, also for the
#     fair rows: cyclictest's thread under the fair scheduler sleeps with the default 50 us timer
#     slack (its /proc/PID/timerslack_ns reads 50000 even when set to 1 before exec), while the
#     backend's worker waits on a timerfd, which has no slack: not the same floor.
#  2. Latency accuracy of ours: null storage, 1 queue, QD1, MSI-X latency 10/50/200/1000 us.
#     - timer-only: the backend's own per-interrupt error, signal time - due time (its statistics'
#       irq_error, from --stats-file);
#     - end to end: the bench spins on the used ring and the call eventfd and measures every
#       completion's used-entry-to-interrupt delay; error = delay - target.
#     Median error = p50 - target, p99 excess = p99 - target, and the ratio of the end-to-end p99
#     excess to cyclictest's p99. Each target runs twice where real-time policies are allowed:
#     the backend under the fair scheduler (its default) and with --rt-priority 80 (cyclictest's
#     own policy and priority, so that the p99 ratio compares like with like). With LAT_PIN=1
#     (the default on a host of 2 or more CPUs with taskset) the backend (and cyclictest) run on
#     CPU 0 and the bench on CPU 1: on one CPU the worker preempts the spinning bench between
#     writing the used entry and sleeping, so the bench sees the used entry late and the delay
#     reads short (a negative median at SCHED_FIFO 80 in unpinned runs).
#  3. qemu-storage-daemon: null-co latency-ns at the same targets (a service delay: its request
#     latency - target is shown, beside ours).
#  4. Efficiency, ROUNDS interleaved rounds (default 3; the order rotates each round): 4k randread
#     on null storage, QUEUES x QD from THREADS client threads, each of:
#       ours/qsd x client bench/blkio  (qemu-storage-daemon null-co read-zeroes=on, num-queues),
#       ours --null-untouched (no zero fill) x bench/blkio,
#       ours --threads 1 (one worker for all queues: qemu-storage-daemon's own layout, one
#       iothread) x bench/blkio,
#       ours virtio-scsi READ(10) and READ(16) (bench client; QEMU has no vhost-user-scsi daemon,
#       so SCSI is compared with our own blk path).
#     Per row: medians over the rounds of IOPS, ops per backend CPU-second (utime + stime of the
#     backend process) and client latency p50/p99; ratios of medians and per-round paired ratios.
#
# Usage: experiments/bench-latency.sh [OUT_DIR]
#   env: DURATION (3s), LAT_DURATION (2s), TARGETS_US ("10 50 200 1000"), ROUNDS (3), QUEUES (8),
#        QD (16), THREADS (2), LAT_PIN (1 where possible), SKIP_BUILD (unset)
# Output: OUT_DIR/bench-latency.md (the table, also printed; `lab table latency`
# builds it from the run's files) and the raw JSON of every run.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${1:-$ROOT/target/bench-latency}
DURATION=${DURATION:-3s}
LAT_DURATION=${LAT_DURATION:-2s}
TARGETS_US=${TARGETS_US:-"10 50 200 1000"}
ROUNDS=${ROUNDS:-3}
QUEUES=${QUEUES:-8}
QD=${QD:-16}
THREADS=${THREADS:-2}
mkdir -p "$OUT"
rm -f "$OUT"/*.json "$OUT/failures.txt"
WORK=$(mktemp -d)
# shellcheck source=experiments/backend-lib.sh
. "$ROOT/experiments/backend-lib.sh"
cleanup() {
    stop_backends
    rm -rf "$WORK"
}
trap cleanup EXIT

if [ -z "${SKIP_BUILD:-}" ]; then
    echo "building vhost-blk and vhost-blk-bench (release)..." >&2
    (cd "$ROOT" && nice -n 10 cargo build --release -p vhost-blk -p vhost-blk-bench -p lab --bins >&2)
fi
BIN=$ROOT/target/release
BENCH=$BIN/vhost-blk-bench
HAVE_QSD=0
command -v qemu-storage-daemon >/dev/null && HAVE_QSD=1
HAVE_RT=0 # real-time policies allowed here (the backend's --rt-priority rows)
chrt -f 1 true 2>/dev/null && HAVE_RT=1
# CPU placement of the latency runs (see the header); empty = wherever the scheduler puts them.
BACKEND_PREFIX=() PIN_BENCH=() PIN_CYCLIC=()
if [ "${LAT_PIN:-1}" = 1 ] && command -v taskset >/dev/null && [ "$(nproc)" -ge 2 ]; then
    LAT_PIN=1
else
    LAT_PIN=0
fi
if [ "$LAT_PIN" = 1 ]; then
    echo "Latency runs pinned: backend and cyclictest on CPU 0, the bench on CPU 1 (LAT_PIN=1)."
else
    echo "Latency runs not pinned (LAT_PIN=0 or no taskset / one CPU): placed by the scheduler."
fi >"$OUT/placement.txt"
# BACKEND_PREFIX is read by backend-lib.sh's start_backend.
# shellcheck disable=SC2034
pin_latency() { # on | off
    if [ "$1" = on ] && [ "$LAT_PIN" = 1 ]; then
        BACKEND_PREFIX=(taskset -c 0) PIN_BENCH=(taskset -c 1) PIN_CYCLIC=(-a 0)
    else
        BACKEND_PREFIX=() PIN_BENCH=() PIN_CYCLIC=()
    fi
}

# start_ours SOCKET ARGS... / start_qsd SOCKET QUEUES LATENCY_NS: experiments/backend-lib.sh's
# start_backend, logging to the work directory; both set BACKEND_PID (stop_backend stops it).
start_ours() { start_backend "$WORK/ours.log" "$1" ours "${@:2}"; }
start_qsd() { start_backend "$WORK/qsd.log" "$1" qsd "$2" "$3"; }

bench() { # JSON_OUT SOCKET DURATION ARGS...
    local json=$1 sock=$2 dur=$3; shift 3
    timeout 120 ${PIN_BENCH[@]+"${PIN_BENCH[@]}"} "$BENCH" --socket "$sock" --ramp 200ms --duration "$dur" \
        --backend-pid "$BACKEND_PID" --json "$json" "$@" >/dev/null
}

# 1. Floor.
pin_latency on
if command -v cyclictest >/dev/null; then
    cyclictest -q -m -t1 ${PIN_CYCLIC[@]+"${PIN_CYCLIC[@]}"} -p 80 -i 200 -l 10000 -h 20000 >"$OUT/cyclictest.txt" 2>/dev/null || true
    # The floor at each target's own interval: about 2 s of wake-ups, 2,000 to 10,000 of them.
    for t in $TARGETS_US; do
        loops=$((2000000 / t)); [ "$loops" -gt 10000 ] && loops=10000; [ "$loops" -lt 2000 ] && loops=2000
        cyclictest -q -m -t1 ${PIN_CYCLIC[@]+"${PIN_CYCLIC[@]}"} -p 80 -i "$t" -l "$loops" -h 20000 >"$OUT/cyclictest-${t}us.txt" \
            2>/dev/null || true
    done
    # Keep only the histogram's non-empty buckets (20,000 lines of zeros otherwise).
    for f in "$OUT"/cyclictest*.txt; do
        grep -v -E '^[0-9]+[[:space:]]+0+$' "$f" >"$f.tmp" || true
        mv "$f.tmp" "$f"
    done
fi

# 2 + 3. Latency accuracy.
for t in $TARGETS_US; do
    start_ours "$WORK/o.sock" --null 1G --num-queues 1 --msix-latency "${t}us" \
        --stats-file "$OUT/ours-msix-${t}us-stats.json"
    bench "$OUT/ours-msix-${t}us.json" "$WORK/o.sock" "$LAT_DURATION" --queues 1 --qd 1 --measure-irq
    stop_backend # writes the stats file at exit
    if [ "$HAVE_RT" = 1 ]; then # the same at cyclictest's policy and priority
        start_ours "$WORK/o.sock" --null 1G --num-queues 1 --msix-latency "${t}us" \
            --rt-priority 80 --stats-file "$OUT/ours-rt-msix-${t}us-stats.json"
        bench "$OUT/ours-rt-msix-${t}us.json" "$WORK/o.sock" "$LAT_DURATION" --queues 1 --qd 1 \
            --measure-irq
        stop_backend
    fi
    if [ "$HAVE_QSD" = 1 ]; then
        start_qsd "$WORK/q.sock" 1 $((t * 1000))
        bench "$OUT/qsd-latency-${t}us.json" "$WORK/q.sock" "$LAT_DURATION" --queues 1 --qd 1
        stop_backend
    fi
done

# 4. Efficiency: NAME BACKEND CLIENT-ARGS (BACKEND: ours:ARGS or qsd). Not pinned: backend and
# client share both CPUs as the scheduler decides.
pin_latency off
CONFIGS=(
    "ours-bench|ours:--null 1G|"
    "qsd-bench|qsd|"
    "ours-blkio|ours:--null 1G|--client blkio"
    "qsd-blkio|qsd|--client blkio"
    "ours-untouched-bench|ours:--null-untouched 1G|"
    "ours-untouched-blkio|ours:--null-untouched 1G|--client blkio"
    "ours-t1-bench|ours:--null 1G --threads 1|"
    "ours-t1-blkio|ours:--null 1G --threads 1|--client blkio"
    "ours-scsi10-bench|ours:--device scsi --null 1G|--device scsi"
    "ours-scsi16-bench|ours:--device scsi --null 1G|--device scsi --cdb16"
)
N=${#CONFIGS[@]}
for r in $(seq "$ROUNDS"); do
    for i in $(seq 0 $((N - 1))); do
        IFS='|' read -r name backend cargs <<<"${CONFIGS[$(((i + r - 1) % N))]}"
        if [ "$backend" = qsd ]; then
            [ "$HAVE_QSD" = 1 ] || continue
            start_qsd "$WORK/q.sock" "$QUEUES" 0
            sock=$WORK/q.sock
        else
            # shellcheck disable=SC2086
            start_ours "$WORK/o.sock" ${backend#ours:} --num-queues "$QUEUES"
            sock=$WORK/o.sock
        fi
        # shellcheck disable=SC2086
        # A failed run (e.g. a stall) is recorded and the table goes on without it.
        bench "$OUT/eff-r$r-$name.json" "$sock" "$DURATION" --queues "$QUEUES" --qd "$QD" \
            --threads "$THREADS" $cargs ||
            echo "round $r $name: vhost-blk-bench failed (exit $?)" | tee -a "$OUT/failures.txt" >&2
        stop_backend
    done
done

"$BIN/lab" table latency "$OUT" --targets "$TARGETS_US" --rounds "$ROUNDS" --queues "$QUEUES" \
    --qd "$QD" --threads "$THREADS" | tee "$OUT/bench-latency.md"
