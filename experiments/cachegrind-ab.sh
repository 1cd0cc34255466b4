#!/usr/bin/env bash
# Two vhost-blk builds under valgrind, whole process (every thread, every function): per
# completed request, callgrind's instruction count and cachegrind's simulated cache misses
# (I1, D1, last level) and branch mispredictions. Complements callgrind-per-request.sh, which
# counts inside the event handler only: this one also sees work that moved out of it. What it
# cannot see: costs that are not instructions or simulated misses (pipeline stalls, memory
# ordering between the client's and the backend's cores, the kernel's side); valgrind runs the
# backend's threads one at a time.
# Usage: experiments/cachegrind-ab.sh OLD_DIR NEW_DIR [OUT_DIR] [PATH]
#   OLD_DIR/NEW_DIR hold a release `vhost-blk`; NEW_DIR's `vhost-blk-bench` drives both.
#   PATH: scsi (READ(10), default) or blk. 10 s per tool and build, 8 queues x QD16, null storage.
# Run it under the CPU lock (flock /tmp/vb-cpu.lock ...).
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: experiments/cachegrind-ab.sh OLD_DIR NEW_DIR [OUT_DIR] [scsi|blk]" >&2; exit 2; }
OLD=$(cd "$1" && pwd) NEW=$(cd "$2" && pwd)
OUT=${3:-$(mktemp -d)}
PATH_KIND=${4:-scsi}
command -v valgrind >/dev/null || { echo "cachegrind-ab: valgrind is not installed" >&2; exit 2; }
case $PATH_KIND in
scsi) BARGS="--device scsi --null 1G" CARGS="--device scsi" ;;
blk) BARGS="--null 1G" CARGS="" ;;
*) echo "cachegrind-ab: PATH must be scsi or blk, not '$PATH_KIND'" >&2; exit 2 ;;
esac
for b in "$OLD/vhost-blk" "$NEW/vhost-blk" "$NEW/vhost-blk-bench"; do
    [ -x "$b" ] || { echo "cachegrind-ab: $b is missing" >&2; exit 2; }
done
mkdir -p "$OUT"
one() { # BUILD-NAME BIN-DIR TOOL
    local name=$1 bin=$2 tool=$3 sock=$OUT/$1-$3.sock extra=()
    [ "$tool" = cachegrind ] && extra=(--cache-sim=yes --branch-sim=yes)
    rm -f "$sock"
    # shellcheck disable=SC2086
    valgrind --tool="$tool" "${extra[@]}" "--$tool-out-file=$OUT/$name.$tool" \
        "$bin/vhost-blk" --socket-path "$sock" $BARGS --num-queues 8 --threads 1 \
        --stats-file "$OUT/$name-$tool-stats.json" >"$OUT/$name-$tool.log" 2>&1 &
    local pid=$!
    for _ in $(seq 300); do [ -S "$sock" ] && break; sleep 0.1; done
    # shellcheck disable=SC2086
    timeout 120 "$NEW/vhost-blk-bench" --socket "$sock" --ramp 1s --duration 10s --queues 8 \
        --qd 16 --threads 2 --backend-pid "$pid" --json "$OUT/$name-$tool.json" $CARGS >/dev/null
    kill "$pid"; wait "$pid" || true   # the stats file is written at exit
}
for tool in callgrind cachegrind; do
    one old "$OLD" "$tool"
    one new "$NEW" "$tool"
done
# The table (`lab table cachegrind`, also in OUT_DIR/table.md, rebuilt by ci/check-reports.sh).
ROOT=$(cd "$(dirname "$0")/.." && pwd)
(cd "$ROOT" && cargo build -q -p lab)
"$ROOT/target/debug/lab" table cachegrind "$OUT" --path "$PATH_KIND" | tee "$OUT/table.md"
