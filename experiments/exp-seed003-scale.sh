#!/usr/bin/env bash
# The seed-003-at-scale experiment (docs/results/seed003-scale/): suite seed003-scale (16 vCPUs x
# 16 request queues x 1024 tags, 8,192 probe removals per scan) on all four seed-003 kernels,
# REPEAT_ALL boots each (interleaved), then REPEAT_MAIN more boots of the main pair
# (rt+noguard vs rt+noguard+seed003, seeds continuing), and the report over both (it carries
# the seed-003 cost model). Run it under the CPU lock on a shared host:
#   flock /tmp/vb-cpu.lock experiments/exp-seed003-scale.sh
# Environment: OUT (default results/seed003-scale-<UTC time>), REPEAT_ALL (2), REPEAT_MAIN (1),
# SUITE (seed003-scale; seed003-scale-4cpu: the same scale on 4 running vCPUs of 16),
# DESIGN (interleaved; paired: the kernels of a repeat boot at the same time, so that the host's
# drift from minute to minute hits both; compare adds the paired t-test), PLACEMENT (pinned;
# host: the host scheduler places the vCPU threads; split, with DESIGN=paired: each guest of a
# pair has a host CPU of its own for all its vCPUs), HOST_SCHED (normal; nice, short, rt: as
# `guest-tests run --host-sched`), K (rt: the kernel family, K K+seed003 K+noguard
# K+noguard+seed003; rt64 with SUITE=seed003-scale-64: the same kernels with NR_CPUS=64).
# About 75 s of wall time per boot under TCG on 2 cores (seed003-scale-4cpu: ~30 s;
# seed003-scale-64: 30-44 s).
set -euo pipefail
cd "$(dirname "$0")/.."

OUT=${OUT:-results/seed003-scale-$(date -u +%Y%m%dT%H%M%SZ)}
REPEAT_ALL=${REPEAT_ALL:-2}
REPEAT_MAIN=${REPEAT_MAIN:-1}
SUITE=${SUITE:-seed003-scale}
DESIGN=${DESIGN:-interleaved}
PLACEMENT=${PLACEMENT:-pinned}
HOST_SCHED=${HOST_SCHED:-normal}
K=${K:-rt}
GT=target/release/guest-tests
[ -x "$GT" ] || cargo build --release -q -p guest-tests -p vhost-blk
"$GT" images build "$K" "$K+seed003" "$K+noguard" "$K+noguard+seed003" >/dev/null

if [ "$DESIGN" = paired ]; then
    # Two guests at a time: the main pair (REPEAT_ALL + REPEAT_MAIN pairs), then the guard pair.
    "$GT" run --suite "$SUITE" --kernels "$K+noguard,$K+noguard+seed003" \
        --repeat $((REPEAT_ALL + REPEAT_MAIN)) --design paired --vcpu-placement "$PLACEMENT" --host-sched "$HOST_SCHED" \
        --out "$OUT/main" --no-progress | tail -n 3
    "$GT" run --suite "$SUITE" --kernels "$K,$K+seed003" --repeat "$REPEAT_ALL" --design paired \
        --vcpu-placement "$PLACEMENT" --host-sched "$HOST_SCHED" --out "$OUT/guard" --no-progress | tail -n 3
else
    "$GT" run --suite "$SUITE" --kernels "$K,$K+seed003,$K+noguard,$K+noguard+seed003" \
        --repeat "$REPEAT_ALL" --vcpu-placement "$PLACEMENT" --host-sched "$HOST_SCHED" --out "$OUT/a" --no-progress |
        tail -n 3
    if [ "$REPEAT_MAIN" -gt 0 ]; then
        "$GT" run --suite "$SUITE" --kernels "$K+noguard,$K+noguard+seed003" \
            --repeat "$REPEAT_MAIN" --seed "$REPEAT_ALL" --vcpu-placement "$PLACEMENT" --host-sched "$HOST_SCHED" \
            --out "$OUT/b" --no-progress | tail -n 3
    fi
fi
"$GT" report "$OUT" --kernels "$K,$K+seed003,$K+noguard,$K+noguard+seed003"
"$GT" compare "$OUT" --kernels "$K+noguard+seed003,$K+noguard" \
    --metric scan.virtio_scsi_init_us --metric rescan.ms_first
