#!/usr/bin/env bash
# The verdict's controls (issue 44, docs/verdict.md): the main job's suite and cell with every
# kind of kernel in one interleaved run, RUNS runs of REPEAT boots per kernel, each run judged
# on its own (`guest-tests check judgement`): the fixes rt128+seed000-paired and
# rt128+seed000-v7 must be improved, rt128+lockhelper (the same queue_lock in an out-of-line
# helper) must not be, rt128+slowpath (v7 with udelay(16) on the idle-hctx path) must be worse,
# rt128+nobarrier must be unsafe (from the memory model) and rt128+seed000 (v2 as posted) gets
# what the model says of it. Prints each run's judgements and whether they are as expected; the
# runs stay under OUT (docs/results/verdict-controls/ holds the committed ones).
#
# Environment: OUT (results/verdict-controls-<UTC time>), RUNS (2), REPEAT (3), HOG (0; 1 keeps one
# host core busy with a plain CPU loop for the whole experiment), VARIANT (q120-c2), HOST_SCHED
# (short): the main job's cell and host scheduling (ci/main-job.sh). Runs before 2026-12-06 03:15
# UTC used run's default, normal.
set -euo pipefail
cd "$(dirname "$0")/.."

OUT=${OUT:-results/verdict-controls-$(date -u +%Y%m%dT%H%M%SZ)}
RUNS=${RUNS:-2}
REPEAT=${REPEAT:-3}
VARIANT=${VARIANT:-q120-c2}
HOST_SCHED=${HOST_SCHED:-short}
LOCK=/tmp/vb-cpu.lock
GT=target/release/guest-tests
KERNELS=rt128,rt128+seed000-paired,rt128+seed000-v7,rt128+lockhelper,rt128+slowpath,rt128+nobarrier,rt128+seed000
[ -x "$GT" ] || flock "$LOCK" cargo build --release -q -p guest-tests -p vhost-blk
IFS=, read -r -a klist <<<"$KERNELS"
flock "$LOCK" "$GT" images build "${klist[@]}" >/dev/null
[ ! -x ci/fetch-herd7.sh ] || ci/fetch-herd7.sh >/dev/null

HOG_PID=
trap '[ -z "$HOG_PID" ] || kill "$HOG_PID" 2>/dev/null || true' EXIT
if [ "${HOG:-0}" = 1 ]; then
    taskset -c "$(($(nproc) - 1))" sh -c 'while :; do :; done' &
    HOG_PID=$!
fi

# The CPU lock for the whole experiment: no other job of this machine's lock users between boots.
exec 9>"$LOCK"
flock 9
bad=0
for i in $(seq 1 "$RUNS"); do
    dir=$OUT/run$i
    echo "== run $i of $RUNS: $REPEAT boots per kernel ($(date -u +%H:%M:%S), load $(cut -d' ' -f1-3 /proc/loadavg), hog ${HOG:-0})"
    "$GT" run --kernels "$KERNELS" --suite seed000-scale --variant "$VARIANT" \
        --repeat "$REPEAT" --design interleaved --host-sched "$HOST_SCHED" --no-progress \
        --out "$dir" | grep -v '^|' || true
    "$GT" report "$dir" >/dev/null
    "$GT" check judgement "$dir" \
        --expect rt128+seed000-paired=improved --expect rt128+seed000-v7=improved \
        --expect rt128+lockhelper=unchanged/undecided/worse --expect rt128+slowpath=worse \
        --expect rt128+nobarrier=unsafe || bad=1
done
exit "$bad"
