#!/usr/bin/env bash
# The seed-000 verdict experiment (docs/results/verdict/): the primary metric (queue_lock wait of
# the request irq threads per 1,000 I/Os) and its companions, rt vs rt+seed000, on an idle host
# and with one host core kept busy by an unrelated CPU hog, for each design:
#   interleaved: A B A B ... one guest at a time (REPEAT boots per kernel);
#   paired:      A and B boot at the same time, each with its own backend (REPEAT pairs);
# and, on the busy host, the backend's worker-thread count (THREADS_SWEEP);
#   idle-rt / busy-rt: interleaved with `--host-sched rt` (QEMU and the backend at real-time
#   priority, vCPU threads taking turns every RR_SLICE_MS ms: the host's sched_rr_timeslice_ms
#   is set for the cell and put back afterwards; needs root);
#   idle-nice / busy-nice: interleaved with `--host-sched nice` (QEMU and the backend at nice -19
#   under the fair scheduler);
#   idle-short / busy-short: interleaved with `--host-sched short` (nice -19 and the fair
#   scheduler's 0.1 ms slice on every thread of QEMU and the backend; Linux >= 6.12).
# Prints one comparison per cell and keeps every matrix under OUT.
#
# Environment: OUT (default results/verdict-<UTC time>), REPEAT (6), CELLS (all: idle-interleaved
# idle-paired busy-interleaved busy-paired busy-threads), THREADS_SWEEP ("1 2 8"),
# SUITE (seed000-lockwait), RR_SLICE_MS (4: one tick at HZ=250). Needs the kernels rt and
# rt+seed000 (built on first use).
set -euo pipefail
cd "$(dirname "$0")/.."

OUT=${OUT:-results/verdict-$(date -u +%Y%m%dT%H%M%SZ)}
REPEAT=${REPEAT:-6}
SUITE=${SUITE:-seed000-lockwait}
CELLS=${CELLS:-idle-interleaved idle-paired busy-interleaved busy-paired busy-threads}
THREADS_SWEEP=${THREADS_SWEEP:-1 2 8}
RR_SLICE_MS=${RR_SLICE_MS:-4}
RR_KNOB=/proc/sys/kernel/sched_rr_timeslice_ms
RR_SAVED=$(cat "$RR_KNOB")
GT=target/release/guest-tests
[ -x "$GT" ] || cargo build --release -q -p guest-tests -p vhost-blk
"$GT" images build rt rt+seed000 >/dev/null

HOG=
hog_on() { # one host core kept busy by a plain CPU loop, for the whole cell
    sh -c 'while :; do :; done' &
    HOG=$!
}
hog_off() { [ -z "$HOG" ] || kill "$HOG" 2>/dev/null || true; HOG=; }
rr_on() { echo "$RR_SLICE_MS" >"$RR_KNOB"; echo "   sched_rr_timeslice_ms $(cat "$RR_KNOB")"; }
rr_off() { echo "$RR_SAVED" >"$RR_KNOB"; }
trap 'hog_off; rr_off' EXIT

cell() { # cell NAME ARGS...: one matrix, then its comparison of the suite's primary metrics
    local name=$1; shift
    echo
    echo "== $name ($(date -u +%H:%M:%S), load $(cut -d' ' -f1-3 /proc/loadavg))"
    local t0
    t0=$(date +%s)
    "$GT" run --kernels rt,rt+seed000 --suite "$SUITE" --repeat "$REPEAT" --out "$OUT/$name" "$@" | tail -n 4
    echo "   wall $(( $(date +%s) - t0 )) s"
    "$GT" compare "$OUT/$name" --verdict
}

for c in $CELLS; do
    case "$c" in
        idle-interleaved) cell "$c" --design interleaved ;;
        idle-paired) cell "$c" --design paired ;;
        busy-interleaved) hog_on; cell "$c" --design interleaved; hog_off ;;
        busy-paired) hog_on; cell "$c" --design paired; hog_off ;;
        idle-nice) cell "$c" --design interleaved --host-sched nice ;;
        busy-nice) hog_on; cell "$c" --design interleaved --host-sched nice; hog_off ;;
        idle-short) cell "$c" --design interleaved --host-sched short ;;
        busy-short) hog_on; cell "$c" --design interleaved --host-sched short; hog_off ;;
        idle-rt) rr_on; cell "$c" --design interleaved --host-sched rt; rr_off ;;
        busy-rt) rr_on; hog_on; cell "$c" --design interleaved --host-sched rt; hog_off; rr_off ;;
        busy-threads)
            for t in $THREADS_SWEEP; do
                hog_on
                cell "busy-threads$t" --design interleaved --backend-threads "$t"
                hog_off
            done
            ;;
        *) echo "exp-verdict: unknown cell '$c'" >&2; exit 2 ;;
    esac
done
echo
echo "matrices under $OUT"
