#!/usr/bin/env bash
# What the source-built kernels' error reporting costs on the main job's figures (issue 55):
# rt128 (config/rt.config: BUG, WARN, DEBUG_BUGVERBOSE, soft-lockup and hung-task detection,
# RCU stall warnings) against rt128+noreport (TEST-ONLY overlay config/noreport.config: the same
# kernel with that reporting off, as tinyconfig left it), suite seed000-scale, the main job's
# cell and design (q120-c2, interleaved, host-sched short), REPEAT boots each, in one run.
#
# Prints, for each of the main job's figures (the [judgement]'s effects, its mechanism and its
# guards), the ratio of geometric means rt128 / rt128+noreport with its 95 % CI: the cost of
# the reporting is that ratio's distance from 1 (a lower-is-better figure above 1, or a
# higher-is-better one below 1, is a cost). The judgement of the pair is printed too; it is not
# the question here (the two kernels run the same block layer). HOG=1 keeps one host core busy
# with a spinning shell loop for the whole run (the "one core busy" condition).
#
# Environment: OUT (results/error-reporting-cost-<UTC time>), REPEAT (5), VARIANT (q120-c2),
# HOST_SCHED (short), HOG (0), GT (target/release/guest-tests; its vhost-blk beside it).
set -euo pipefail
cd "$(dirname "$0")/.."

OUT=${OUT:-results/error-reporting-cost-$(date -u +%Y%m%dT%H%M%SZ)}
REPEAT=${REPEAT:-5}
VARIANT=${VARIANT:-q120-c2}
HOST_SCHED=${HOST_SCHED:-short}
HOG=${HOG:-0}
GT=${GT:-target/release/guest-tests}
[ -x "$GT" ] || cargo build --release -q -p guest-tests -p vhost-blk
[ ! -x ci/fetch-herd7.sh ] || ci/fetch-herd7.sh >/dev/null
"$GT" images build rt128 rt128+noreport

hog=
if [ "$HOG" = 1 ]; then
    (while :; do :; done) &
    hog=$!
    trap 'kill "$hog" 2>/dev/null || true' EXIT
fi
echo "== $REPEAT boots per kernel, $VARIANT, hog=$HOG ($(date -u +%H:%M:%S), load $(cut -d' ' -f1-3 /proc/loadavg))"
"$GT" run --suite seed000-scale --variant "$VARIANT" --host-sched "$HOST_SCHED" \
    --kernels rt128+noreport,rt128 --repeat "$REPEAT" --design interleaved --no-progress \
    --out "$OUT" | tail -n 1 || true
echo "== done ($(date -u +%H:%M:%S), load $(cut -d' ' -f1-3 /proc/loadavg))"
"$GT" compare "$OUT" --kernels rt128+noreport,rt128 --verdict
"$GT" report "$OUT" >/dev/null
echo "results: $OUT"
