#!/usr/bin/env bash
# What the backend's CPU-seconds per request are made of, blk vs SCSI READ(10) / READ(16), same
# binary, interleaved rounds (issue 14). experiments/callgrind-per-request.sh counts the instructions of
# the per-request path; this counts what callgrind cannot see. Each path runs twice per round:
#  - bare: no tracing; IOPS, backend CPU time per request (utime + stime from /proc over the
#    client's run), completions per interrupt (the client's count), client p99;
#  - perf: the same with perf counting, on the backend, its system calls (all, and epoll_wait,
#    sched_yield, write = the call eventfd signal, read, timerfd_settime, ppoll), context switches and
#    the wake-ups it gives; on the client, switches and wake-ups only (it makes ~1.3 system calls
#    per request; counting those slows it and changes the backend's batches).
# Every figure is divided by the requests the client completed over the same run (no ramp, so the
# counters' window and the requests' are the same). Paths: blk, untouched (--null-untouched),
# scsi10, scsi16 (virtio-scsi READ(10) / READ(16)), qsd (qemu-storage-daemon, null-co, the same
# queues); CLIENT=blkio drives the blk-kind paths with libblkio instead of vhost-blk-bench.
#
# Usage: experiments/syscalls-per-request.sh [OUT_DIR]   (needs perf with tracepoints, root, release build)
#   env: ROUNDS (3), DURATION (3s), QUEUES (8), QD (16), THREADS (2), PATHS ("blk scsi10 scsi16"),
#        CLIENT (bench)
# Output: OUT_DIR/syscalls-per-request.md (the table, also printed; `lab table
# syscalls` builds it from the runs' files) and each run's raw files.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
B=$ROOT/target/release
OUT=${1:-$(mktemp -d)}
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-3s}
QUEUES=${QUEUES:-8}
QD=${QD:-16}
THREADS=${THREADS:-2}
PATHS=${PATHS:-"blk scsi10 scsi16"}
CLIENT=${CLIENT:-bench}
die() { echo "syscalls-per-request: $*" >&2; exit 2; }
command -v perf >/dev/null || die "perf is not installed (Debian: linux-perf)"
if [ ! -x "$B/vhost-blk" ] || [ ! -x "$B/vhost-blk-bench" ] || [ ! -x "$B/lab" ]; then
    die "build first: cargo build --release -p vhost-blk -p vhost-blk-bench -p lab --bins"
fi
[[ "$ROUNDS" =~ ^[1-9][0-9]*$ ]] || die "ROUNDS must be a positive integer, got '$ROUNDS'"
for p in $PATHS; do
    case $p in
        blk | untouched) ;;
        scsi10 | scsi16) [ "$CLIENT" = bench ] || die "path $p needs CLIENT=bench (blkio has no SCSI)" ;;
        qsd) command -v qemu-storage-daemon >/dev/null || die "path qsd needs qemu-storage-daemon" ;;
        *) die "unknown path '$p' in PATHS (blk, untouched, scsi10, scsi16, qsd)" ;;
    esac
done
case $CLIENT in bench | blkio) ;; *) die "CLIENT must be bench or blkio, got '$CLIENT'" ;; esac
EVENTS=raw_syscalls:sys_enter,syscalls:sys_enter_epoll_wait,syscalls:sys_enter_sched_yield
EVENTS=$EVENTS,syscalls:sys_enter_write,syscalls:sys_enter_read,syscalls:sys_enter_timerfd_settime
EVENTS=$EVENTS,syscalls:sys_enter_ppoll,sched:sched_switch,sched:sched_wakeup
CLIENT_EVENTS=sched:sched_switch,sched:sched_wakeup
perf stat -e "$EVENTS" true >/dev/null 2>&1 || die "perf cannot count the tracepoints here (root? tracefs?)"
mkdir -p "$OUT"
# shellcheck source=experiments/backend-lib.sh
. "$ROOT/experiments/backend-lib.sh"
trap stop_backends EXIT

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
one() { # PATH ROUND MODE (bare: no tracing; perf: the counters above)
    local path=$1 r=$2 mode=$3 name=$1-$3-r$2 sock=$OUT/$1-r$2.sock backend client=()
    case $path in
        blk) backend=(--null 1G) ;;
        untouched) backend=(--null-untouched 1G) ;;
        scsi10) backend=(--device scsi --null 1G); client=(--device scsi) ;;
        scsi16) backend=(--device scsi --null 1G); client=(--device scsi --cdb16) ;;
    esac
    [ "$CLIENT" = blkio ] && client+=(--client blkio)
    if [ "$path" = qsd ]; then
        start_backend "$OUT/$name-backend.log" "$sock" qsd "$QUEUES" 0 || exit 2
    else
        start_backend "$OUT/$name-backend.log" "$sock" ours "${backend[@]}" --num-queues "$QUEUES" ||
            exit 2
    fi
    local ppid='' t0 cperf=()
    if [ "$mode" = perf ]; then
        perf stat -x, -e "$EVENTS" -p "$BACKEND_PID" -o "$OUT/$name-backend.perf" &
        ppid=$!
        # The client gets the scheduler events only: it makes about 1.3 system calls per
        # request, and counting those slows it enough to change the backend's batches.
        # shellcheck disable=SC2054 # -x, is perf's CSV separator, not an array comma
        cperf=(perf stat -x, -e "$CLIENT_EVENTS" -o "$OUT/$name-client.perf" --)
    fi
    sleep 0.2
    t0=$(cpu_ticks "$BACKEND_PID")
    "${cperf[@]}" timeout 120 "$B/vhost-blk-bench" --socket "$sock" --ramp 0 --duration "$DURATION" \
        --queues "$QUEUES" --qd "$QD" --threads "$THREADS" --backend-pid "$BACKEND_PID" \
        --json "$OUT/$name.json" "${client[@]}" >/dev/null
    echo $(($(cpu_ticks "$BACKEND_PID") - t0)) >"$OUT/$name-ticks"
    if [ -n "$ppid" ]; then kill -INT "$ppid"; wait "$ppid" || true; fi
    stop_backend
}

for r in $(seq "$ROUNDS"); do
    # Rotate the order each round, so no path always runs first.
    # PATHS is a list: split on purpose (here and below).
    # shellcheck disable=SC2086
    set -- $PATHS
    for _ in $(seq $(((r - 1) % $#))); do set -- "${@:2}" "$1"; done
    for p in "$@"; do one "$p" "$r" bare; one "$p" "$r" perf; done
done

# The table: `lab table syscalls` (its docs say how each figure is computed).
"$B/lab" table syscalls "$OUT" --rounds "$ROUNDS" --paths "$PATHS" --client "$CLIENT" \
    --hz "$(getconf CLK_TCK)" | tee "$OUT/syscalls-per-request.md"
