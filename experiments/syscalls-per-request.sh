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
# Output: OUT_DIR/syscalls-per-request.md (the table, also printed) and each run's raw files.
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
if [ ! -x "$B/vhost-blk" ] || [ ! -x "$B/vhost-blk-bench" ]; then
    die "build first: cargo build --release -p vhost-blk --bins"
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

# shellcheck disable=SC2086
python3 - "$OUT" "$ROUNDS" "$(getconf CLK_TCK)" "$CLIENT" $PATHS <<'PY' | tee "$OUT/syscalls-per-request.md"
import json, statistics, sys
out, rounds, hz, client, paths = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5:]
cols = [("raw_syscalls:sys_enter", "syscalls"), ("syscalls:sys_enter_epoll_wait", "epoll_wait"),
        ("syscalls:sys_enter_sched_yield", "sched_yield"), ("syscalls:sys_enter_write", "write"),
        ("syscalls:sys_enter_read", "read"), ("syscalls:sys_enter_timerfd_settime", "timerfd_settime"),
        ("syscalls:sys_enter_ppoll", "ppoll (qemu's loop)"), ("sched:sched_switch", "switches"), ("sched:sched_wakeup", "wakeups given")]

def perf(path):
    got = {}
    try:
        for line in open(path):
            f = line.strip().split(",")
            if len(f) > 2 and f[2] in dict(cols):
                got[f[2]] = int(f[0]) if f[0].isdigit() else 0
    except FileNotFoundError:
        pass
    return got

def run(p, mode, r):
    name = f"{out}/{p}-{mode}-r{r}"
    bench = json.load(open(f"{name}.json"))
    n = bench["total"]["ops"]
    irqs = bench["total"].get("interrupts") or 0
    ticks = int(open(f"{name}-ticks").read())
    row = dict(iops=bench["total"].get("iops", 0), us=ticks / hz / n * 1e6, batch=n / max(irqs, 1),
               p99=bench["total"].get("latency_us", {}).get("p99", 0))
    if mode == "perf":
        b, c = perf(f"{name}-backend.perf"), perf(f"{name}-client.perf")
        row.update({f"b {k}": b.get(e, 0) / n for e, k in cols})
        row.update({f"c {k}": c.get(e, 0) / n for e, k in cols[-2:]})
    return row

head = {"iops": "IOPS", "us": "backend CPU us per request", "batch": "completions per interrupt",
        "p99": "client latency p99 us"}
def table(mode, keys):
    rows = {p: [run(p, mode, r) for r in range(1, rounds + 1)] for p in paths}
    print("| per completed request | " + " | ".join(paths) + " |")
    print("|---|" + "---|" * len(paths))
    for k in keys:
        cells = []
        for p in paths:
            v = [row[k] for row in rows[p]]
            fmt = "{:.0f}" if k in ("iops", "p99") else "{:.2f}" if k == "batch" else "{:.4f}"
            cells.append(fmt.format(statistics.median(v)) +
                         f" ({fmt.format(min(v))}-{fmt.format(max(v))})")
        print(f"| {head.get(k, k)} | " + " | ".join(cells) + " |")
    base = paths[0]
    for p in paths[1:]:
        ratio = [rows[base][i]["us"] / rows[p][i]["us"] for i in range(rounds)]
        print(f"\n{p} / {base}, ops per backend CPU-second, per round: "
              + " ".join(f"{x:.2f}" for x in ratio) + f" (median {statistics.median(ratio):.2f}x)")
    print()

print(f"Client: {client}. Median of {rounds} interleaved rounds (min-max); each figure divided "
      "by the requests the client completed over the same window.\n")
print("### Without tracing\n")
table("bare", ["iops", "us", "batch", "p99"])
print("### With perf counting (slows both sides; compare the paths with each other, not with "
      "the table above)\n")
print("b = backend process, c = client process (scheduler events only).\n")
table("perf", ["iops", "us", "batch", "p99"] + [f"b {k}" for _, k in cols]
      + [f"c {k}" for _, k in cols[-2:]])
PY
