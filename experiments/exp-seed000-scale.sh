#!/usr/bin/env bash
# Seed 000 at the scale of the series' test machine (docs/results/seed000-scale/): the cells of
# suite seed000-scale (request queues x running vCPUs, its [grid]) and of
# seed000-scale-builtin (QEMU's built-in virtio-scsi; both up to the series' 120 queues and the
# card's 128), each an interleaved matrix of the base kernel against every fix version, REPEAT
# boots per kernel, under the CPU lock (/tmp/vb-cpu.lock, taken per cell so other work can run
# between cells).
# A cell whose directory already holds index.json is skipped (re-running resumes the sweep).
# At the end, one report over all cells (plots against the number of hardware queues).
#
# Environment: OUT (default docs/results/seed000-scale), REPEAT (3), CELLS (default: every
# cell of both suites, as SUITE/VARIANT), LINE (kernel line, default rt128: NR_CPUS=128),
# HOST_SCHED (short, as the main job), FIX_LATEST (the newest posting's component: seed000-v7
# on 6.12 lines, seed000-v8 on rt73), KERNELS (default: the base line and its four fixes, as
# LINE,LINE+seed000,...; docs/results/seed000-120 ran LINE,LINE+seed000-v7).
set -euo pipefail
cd "$(dirname "$0")/.."

OUT=${OUT:-docs/results/seed000-scale}
REPEAT=${REPEAT:-3}
LINE=${LINE:-rt128}
HOST_SCHED=${HOST_SCHED:-short}
LOCK=/tmp/vb-cpu.lock
GT=target/release/guest-tests
KERNELS=${KERNELS:-"$LINE,$LINE+seed000,$LINE+seed000-paired,$LINE+${FIX_LATEST:-seed000-v7}"}
[ -x "$GT" ] || flock "$LOCK" cargo build --release -q -p guest-tests -p vhost-blk

cells() {
    for suite in seed000-scale seed000-scale-builtin; do
        "$GT" suites --variants "$suite" | sed "s|^|$suite/|"
    done
}
CELLS=${CELLS:-$(cells)}

for cell in $CELLS; do
    suite=${cell%/*}
    variant=${cell#*/}
    dir="$OUT/$suite/$variant"
    if [ -f "$dir/index.json" ]; then
        echo "== $cell: done already ($dir)"
        continue
    fi
    echo "== $cell ($(date -u +%H:%M:%S), load $(cut -d' ' -f1-3 /proc/loadavg))"
    flock "$LOCK" "$GT" run --suite "$suite" --variant "$variant" --kernels "$KERNELS" \
        --repeat "$REPEAT" --host-sched "$HOST_SCHED" --out "$dir" | grep --line-buffered -v '^|' || true
done
"$GT" report "$OUT" >/dev/null
echo "report: $OUT/report.md"
