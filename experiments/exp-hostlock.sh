#!/usr/bin/env bash
# A regression on another lock, judged from its suite file alone (issue 58): suite
# hostlock-scale (the main job's scale cell, no queue_lock in its [judgement]) with
#   rt128                         the line's kernel (baseline of the first judgement)
#   rt128+hostlock                TEST-ONLY regression: one driver-wide lock around every
#                                 request virtqueue's completions in virtio_scsi
#   rt128+hostlock+hostlock-fix   its fix (the line's code again)
# in one interleaved run of REPEAT boots per kernel, judged three ways:
#   rt128 -> rt128+hostlock: worse (the mechanism increased)
#   rt128+hostlock -> rt128+hostlock+hostlock-fix: improved (undecided when the boots cannot
#     show the effects within 5 %: the mechanism must be reduced either way)
#   rt128 -> rt128+hostlock+hostlock-fix: unchanged or undecided (the same code)
# Prints each judgement with its reasons and whether it is as expected; exit 1 when one is not.
#
# Environment: OUT (results/hostlock-<UTC time>), REPEAT (3), VARIANT (q8-c2; q120-c2 is the
# main job's cell), HOST_SCHED (short), GT (target/release/guest-tests; its vhost-blk beside it).
set -euo pipefail
cd "$(dirname "$0")/.."

OUT=${OUT:-results/hostlock-$(date -u +%Y%m%dT%H%M%SZ)}
REPEAT=${REPEAT:-3}
VARIANT=${VARIANT:-q8-c2}
HOST_SCHED=${HOST_SCHED:-short}
GT=${GT:-target/release/guest-tests}
[ -x "$GT" ] || cargo build --release -q -p guest-tests -p vhost-blk
[ ! -x ci/fetch-herd7.sh ] || ci/fetch-herd7.sh >/dev/null
echo "== $REPEAT boots per kernel, $VARIANT ($(date -u +%H:%M:%S), load $(cut -d' ' -f1-3 /proc/loadavg))"
"$GT" run --suite hostlock-scale --variant "$VARIANT" --host-sched "$HOST_SCHED" \
    --kernels rt128,rt128+hostlock,rt128+hostlock+hostlock-fix --repeat "$REPEAT" \
    --design interleaved --no-progress --out "$OUT" | tail -n 1 || true
bad=0
judge() { # BASE,OTHER EXPECTATION
    echo "-- $1"
    "$GT" compare "$OUT" --kernels "$1" --verdict | sed -n '1,/^$/p'
    "$GT" check judgement "$OUT" --kernels "$1" --expect "$2" || bad=1
}
judge rt128,rt128+hostlock rt128+hostlock=worse:mechanism-increased
judge rt128+hostlock,rt128+hostlock+hostlock-fix \
    rt128+hostlock+hostlock-fix=improved/undecided:mechanism-reduced,effect-not-shown-within-the-margin,effect-unclear
judge rt128,rt128+hostlock+hostlock-fix rt128+hostlock+hostlock-fix=unchanged/undecided
echo "results: $OUT"
exit "$bad"
