#!/usr/bin/env bash
# The verdict's controls (issues 44 and 55, docs/verdict.md): the main job's suite and cell with
# every kind of kernel in one interleaved run, RUNS runs of REPEAT boots per kernel, each run
# judged on its own (`guest-tests check judgement`):
#   rt128+seed000-v7     the series' fix: improved
#   rt128+lockhelper     the same queue_lock in an out-of-line helper: not improved
#   rt128+slowpath       v7 with udelay(16) on the idle-hctx path: worse
#   rt128+nobarrier      the lock removed, nothing in its place: unsafe (the memory model)
#   rt128+wrongbarrier   v7 with the reader's smp_mb() weakened to smp_rmb() (v6's mistake), no
#                        litmus test given: unsafe (v7's tests derived with its smp_rmb())
#   rt128+trylockspin    the queue_lock taken in a spin_trylock() loop: not improved
#   rt128+warnonce       v7 plus a WARN_ONCE under I/O: worse (the kernel log)
#   rt128+panicsome      v7 plus a panic under I/O in about 15 boots of 16: worse (its boots)
#   rt128+hang           v7 plus a lost queue run, the I/O hangs: worse (its boots)
# Prints each run's judgements and whether they are as expected; the runs stay under OUT
# (docs/results/verdict-controls/ holds the committed ones).
#
# Environment: OUT (results/verdict-controls-<UTC time>), RUNS (2), REPEAT (3), HOG (0; 1 keeps one
# host core busy with a plain CPU loop for the whole experiment), VARIANT (q120-c2), HOST_SCHED
# (short): the main job's cell and host scheduling (ci/main-job.sh), KERNELS (the list above,
# baseline rt128 first; add rt128+seed000-paired,rt128+seed000 for the series' other versions),
# HOLD_LOCK (1: hold the CPU lock for the whole experiment), FIRST (1: the first run's number, to
# add runs to an OUT that has some).
# Runs before 2026-12-06 03:15 UTC used run's default host scheduling, normal.
set -euo pipefail
cd "$(dirname "$0")/.."

OUT=${OUT:-results/verdict-controls-$(date -u +%Y%m%dT%H%M%SZ)}
RUNS=${RUNS:-2}
REPEAT=${REPEAT:-3}
VARIANT=${VARIANT:-q120-c2}
HOST_SCHED=${HOST_SCHED:-short}
LOCK=/tmp/vb-cpu.lock
GT=target/release/guest-tests
KERNELS=${KERNELS:-rt128,rt128+seed000-v7,rt128+lockhelper,rt128+slowpath,rt128+nobarrier,rt128+wrongbarrier,rt128+trylockspin,rt128+warnonce,rt128+panicsome,rt128+hang}
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

# The CPU lock for the whole experiment: no other job of this machine's lock users between boots
# (HOLD_LOCK=0: not taken, so a shorter measurement of another job can run beside it; say so).
if [ "${HOLD_LOCK:-1}" = 1 ]; then
    exec 9>"$LOCK"
    flock 9
fi
bad=0
FIRST=${FIRST:-1}
for i in $(seq "$FIRST" "$((FIRST + RUNS - 1))"); do
    dir=$OUT/run$i
    echo "== run $i (of $RUNS from $FIRST): $REPEAT boots per kernel ($(date -u +%H:%M:%S), load $(cut -d' ' -f1-3 /proc/loadavg), hog ${HOG:-0})"
    "$GT" run --kernels "$KERNELS" --suite seed000-scale --variant "$VARIANT" \
        --repeat "$REPEAT" --design interleaved --host-sched "$HOST_SCHED" --no-progress \
        --out "$dir" | grep -v '^|' || true
    "$GT" report "$dir" >/dev/null
    # Each control's expectation, for the kernels this run has.
    expect=()
    for e in rt128+seed000-paired=improved rt128+seed000-v7=improved \
        rt128+lockhelper=unchanged/undecided/worse rt128+slowpath=worse rt128+nobarrier=unsafe \
        rt128+wrongbarrier=unsafe \
        rt128+trylockspin=unchanged/undecided/worse rt128+warnonce=worse:kernel-log \
        rt128+panicsome=worse:boots-failed rt128+hang=worse:boots-failed; do
        case ",$KERNELS," in *",${e%%=*},"*) expect+=(--expect "$e") ;; esac
    done
    "$GT" compare "$dir" --verdict | sed -n '1,/^$/p'
    "$GT" check judgement "$dir" "${expect[@]}" || bad=1
done
exit "$bad"
