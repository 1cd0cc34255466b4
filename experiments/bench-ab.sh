#!/usr/bin/env bash
# Efficiency of two vhost-blk builds side by side: ops per backend CPU-second (utime + stime of
# the backend process, as vhost-blk-bench --backend-pid measures it), old (A) and new (B)
# alternated A B A B ... in one run, each round in a rotated order of configurations, so host
# drift hits both alike. The same client binary drives both. Run it under the CPU lock:
#   flock /tmp/vb-cpu.lock experiments/bench-ab.sh OLD_DIR NEW_DIR [OUT_DIR]
# OLD_DIR and NEW_DIR hold a release `vhost-blk` (and NEW_DIR the `vhost-blk-bench` used as
# the client). Build an old one from a commit with e.g.
#   git archive COMMIT | tar -x -C /tmp/old && (cd /tmp/old && cargo build --release -p vhost-blk --bins)
# env: ROUNDS (6), DURATION (3s), QUEUES (8), QD (16), THREADS (2), CONFIGS (all below).
# Configurations (4k random reads unless named otherwise):
#   null-bench / null-blkio    --null 1G (zero fill into guest memory), our client / libblkio
#   mem-bench / mem-blkio      --mem 1G (preadv from a memfd straight into guest memory)
#   memw-bench                 --mem 1G, 4k random writes (pwritev from guest memory)
#   scsi10-bench               --device scsi --null 1G, READ(10)
# Output: OUT_DIR/ab.md (the table, also printed) and every run's JSON.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
[ $# -ge 2 ] || { echo "usage: experiments/bench-ab.sh OLD_DIR NEW_DIR [OUT_DIR]" >&2; exit 2; }
OLD=$(cd "$1" && pwd) NEW=$(cd "$2" && pwd)
OUT=${3:-$ROOT/target/bench-ab}
for b in "$OLD/vhost-blk" "$NEW/vhost-blk" "$NEW/vhost-blk-bench"; do
    [ -x "$b" ] || { echo "bench-ab: $b is missing" >&2; exit 2; }
done
ROUNDS=${ROUNDS:-6} DURATION=${DURATION:-3s} QUEUES=${QUEUES:-8} QD=${QD:-16} THREADS=${THREADS:-2}
CONFIGS=${CONFIGS:-"null-bench null-blkio mem-bench mem-blkio memw-bench scsi10-bench"}
mkdir -p "$OUT"
rm -f "$OUT"/*.json "$OUT/failures.txt"
WORK=$(mktemp -d)
# shellcheck source=experiments/backend-lib.sh
. "$ROOT/experiments/backend-lib.sh"
trap 'stop_backends; rm -rf "$WORK"' EXIT

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
            export VB_BACKEND_BIN
            # shellcheck disable=SC2046
            start_backend "$WORK/backend.log" "$WORK/b.sock" ours $(backend_args "$c") --num-queues "$QUEUES"
            # shellcheck disable=SC2046
            timeout 120 "$NEW/vhost-blk-bench" --socket "$WORK/b.sock" --ramp 200ms --duration "$DURATION" \
                --backend-pid "$BACKEND_PID" --json "$OUT/r$r-$c-$side.json" --queues "$QUEUES" --qd "$QD" \
                --threads "$THREADS" $(client_args "$c") >/dev/null ||
                echo "round $r $c $side: vhost-blk-bench failed (exit $?)" | tee -a "$OUT/failures.txt" >&2
            stop_backend
        done
    done
done

python3 - "$OUT" "$ROUNDS" "$CONFIGS" <<'PY' | tee "$OUT/ab.md"
import json, math, statistics, sys
out, rounds, configs = sys.argv[1], int(sys.argv[2]), sys.argv[3].split()
def get(r, c, s, key):
    try:
        j = json.load(open(f"{out}/r{r}-{c}-{s}.json"))
    except (OSError, ValueError):
        return None
    return j.get("total", {}).get(key) if key == "iops" else j.get(key)
print("| configuration | A ops/backend-CPU-s (median) | B (median) | B/A of medians | "
      "paired B/A (geo. mean, min..max) | A IOPS | B IOPS | rounds |")
print("|---|---|---|---|---|---|---|---|")
for c in configs:
    k = "ops_per_backend_cpu_second"
    a = [get(r, c, "A", k) for r in range(1, rounds + 1)]
    b = [get(r, c, "B", k) for r in range(1, rounds + 1)]
    pairs = [(x, y) for x, y in zip(a, b) if x and y]
    if not pairs:
        print(f"| {c} | - | - | - | - | - | - | 0 |")
        continue
    ma, mb = statistics.median(p[0] for p in pairs), statistics.median(p[1] for p in pairs)
    ratios = [y / x for x, y in pairs]
    geo = math.exp(sum(math.log(q) for q in ratios) / len(ratios))
    def iops(s):
        v = [x for x in (get(r, c, s, "iops") for r in range(1, rounds + 1)) if x]
        return statistics.median(v) if v else float("nan")
    print(f"| {c} | {ma:,.0f} | {mb:,.0f} | {mb / ma:.3f} | {geo:.3f} ({min(ratios):.3f}..{max(ratios):.3f}) "
          f"| {iops('A'):,.0f} | {iops('B'):,.0f} | {len(pairs)} |")
PY
