#!/usr/bin/env bash
# Completion-latency benchmark table (not part of CI: it needs a quiet host to mean much).
#
#  1. Floor: cyclictest (SCHED_FIFO 80, 200 us interval) wake-up latency of this host.
#  2. Ours: vhost-blk on null storage, 1 queue, QD1, MSI-X latency 10/50/200/1000 us; the bench
#     spins on the used ring and the call eventfd and measures every completion's used-entry-to-
#     interrupt delay. Median error = p50 - target, p99 excess = p99 - target. A preempted bench
#     thread timestamps used entries late, so on a loaded host this delay reads short; the request
#     latency (timestamped before the kick, ended by the interrupt) can only read long.
#  3. qemu-storage-daemon: null-co latency-ns at the same targets (a service delay, so the request
#     latency is compared: p50 - target, p99 - target), with ours' request latency beside it.
#  4. Efficiency: 4k randread on null storage, 8 queues x QD32 from 2 bench threads, ops per
#     backend CPU-second (utime + stime of the backend process), ours vs qemu-storage-daemon
#     num-queues=8.
#
# Usage: ci/bench-latency.sh [OUT_DIR]      env: DURATION (default 3s), TARGETS_US ("10 50 200 1000")
# Output: OUT_DIR/bench-latency.md (the table, also printed) and the raw JSON of every run.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${1:-$ROOT/target/bench-latency}
DURATION=${DURATION:-3s}
TARGETS_US=${TARGETS_US:-"10 50 200 1000"}
mkdir -p "$OUT"
WORK=$(mktemp -d)
PIDS=()
cleanup() {
    for p in "${PIDS[@]:-}"; do
        [ -n "$p" ] && kill "$p" 2>/dev/null && wait "$p" 2>/dev/null || true
    done
    rm -rf "$WORK"
}
trap cleanup EXIT

echo "building vhost-blk and vhost-blk-bench (release)..." >&2
(cd "$ROOT" && nice -n 10 cargo build --release -p vhost-blk --bins >&2)
BIN=$ROOT/target/release
BENCH=$BIN/vhost-blk-bench

wait_socket() {
    for _ in $(seq 100); do [ -S "$1" ] && return 0; sleep 0.05; done
    echo "no socket $1" >&2
    return 1
}

# start_ours SOCKET ARGS... ; sets BACKEND_PID
start_ours() {
    local sock=$1; shift
    RUST_LOG=warn "$BIN/vhost-blk" --socket-path "$sock" --null 1G "$@" >"$WORK/ours.log" 2>&1 &
    BACKEND_PID=$!
    PIDS+=("$BACKEND_PID")
    wait_socket "$sock"
}

# start_qsd SOCKET QUEUES LATENCY_NS ; sets BACKEND_PID
start_qsd() {
    qemu-storage-daemon \
        --blockdev "driver=null-co,node-name=n0,size=1073741824,read-zeroes=on,latency-ns=$3" \
        --export "type=vhost-user-blk,id=e0,node-name=n0,addr.type=unix,addr.path=$1,num-queues=$2,writable=on" \
        >"$WORK/qsd.log" 2>&1 &
    BACKEND_PID=$!
    PIDS+=("$BACKEND_PID")
    wait_socket "$1"
}

stop_backend() {
    kill "$BACKEND_PID" 2>/dev/null || true
    wait "$BACKEND_PID" 2>/dev/null || true
    rm -f "$WORK"/*.sock
}

bench() { # JSON_OUT SOCKET ARGS...
    local json=$1 sock=$2; shift 2
    timeout 120 "$BENCH" --socket "$sock" --ramp 200ms --duration "$DURATION" \
        --backend-pid "$BACKEND_PID" --json "$json" "$@" >/dev/null
}

# 1. Floor.
FLOOR="n/a (cyclictest not installed)"
if command -v cyclictest >/dev/null; then
    line=$(cyclictest -q -m -t1 -p 80 -i 200 -l 10000 2>/dev/null | grep -E '^T: ?0' || true)
    FLOOR=$(echo "$line" | sed -E 's/.*Min: *([0-9]+).*Avg: *([0-9]+).*Max: *([0-9]+).*/min \1 us, avg \2 us, max \3 us/')
fi

# 2 + 3. Latency accuracy.
OURS_MSIX=0
if "$BIN/vhost-blk" --help 2>/dev/null | grep -q -- '--msix-latency'; then OURS_MSIX=1; fi
for t in $TARGETS_US; do
    if [ "$OURS_MSIX" = 1 ]; then
        start_ours "$WORK/o.sock" --num-queues 1 --msix-latency "${t}us"
        bench "$OUT/ours-msix-${t}us.json" "$WORK/o.sock" --queues 1 --qd 1 --measure-irq
        stop_backend
    fi
    if command -v qemu-storage-daemon >/dev/null; then
        start_qsd "$WORK/q.sock" 1 $((t * 1000))
        bench "$OUT/qsd-latency-${t}us.json" "$WORK/q.sock" --queues 1 --qd 1
        stop_backend
    fi
done

# 4. Efficiency.
start_ours "$WORK/o.sock" --num-queues 8
bench "$OUT/ours-randread-8x32.json" "$WORK/o.sock" --queues 8 --qd 32 --threads 2
stop_backend
if command -v qemu-storage-daemon >/dev/null; then
    start_qsd "$WORK/q.sock" 8 0
    bench "$OUT/qsd-randread-8x32.json" "$WORK/q.sock" --queues 8 --qd 32 --threads 2
    stop_backend
fi

python3 - "$OUT" "$FLOOR" "$TARGETS_US" "$OURS_MSIX" <<'EOF' | tee "$OUT/bench-latency.md"
import json, os, sys
out, floor, targets, ours_msix = sys.argv[1], sys.argv[2], sys.argv[3].split(), sys.argv[4] == "1"
def load(name):
    p = os.path.join(out, name)
    return json.load(open(p)) if os.path.exists(p) else None
print("# Completion latency benchmark\n")
print(f"Host floor (cyclictest, FIFO 80, 200 us): {floor}\n")
print("| backend | target us | irq delay p50 | median error | p99 excess | request p50 | request p50 - target | request p99 - target |")
print("|---|---|---|---|---|---|---|---|")
for t in targets:
    tu = float(t)
    ours = load(f"ours-msix-{t}us.json")
    if ours:
        d, r = ours["total"]["irq_delay_us"], ours["total"]["latency_us"]
        print(f"| ours (MSI-X) | {t} | {d['p50']:.1f} | {d['p50'] - tu:+.1f} | {d['p99'] - tu:+.1f} "
              f"| {r['p50']:.1f} | {r['p50'] - tu:+.1f} | {r['p99'] - tu:+.1f} |")
    elif not ours_msix:
        print(f"| ours (MSI-X) | {t} | n/a: this vhost-blk has no --msix-latency | | | | | |")
    q = load(f"qsd-latency-{t}us.json")
    if q:
        r = q["total"]["latency_us"]
        print(f"| qemu-storage-daemon null-co latency-ns | {t} | - | - | - "
              f"| {r['p50']:.1f} | {r['p50'] - tu:+.1f} | {r['p99'] - tu:+.1f} |")
print("\n4k randread, null storage, 8 queues x QD32, 2 bench threads:\n")
print("| backend | IOPS | backend CPU s | ops per backend CPU-second | request p50 us | p99 us |")
print("|---|---|---|---|---|---|")
for name, label in [("ours-randread-8x32.json", "ours"), ("qsd-randread-8x32.json", "qemu-storage-daemon")]:
    j = load(name)
    if j:
        t = j["total"]
        print(f"| {label} | {t['iops']:.0f} | {j['backend_cpu_seconds']:.2f} | "
              f"{j['ops_per_backend_cpu_second'] or 0:.0f} | {t['latency_us']['p50']:.1f} | {t['latency_us']['p99']:.1f} |")
EOF
