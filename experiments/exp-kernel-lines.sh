#!/usr/bin/env bash
# The kernel-lines experiment (docs/results/kernel-lines/): seed 000 and its fixes on Linux 7.3
# (Debian's linux-source-7.3, line rt73) beside 6.12 (line rt).
#   boots:    every 7.3 kernel not booted below, built and booted once (suite smoke), and
#             Debian's prebuilt 7.3 RT kernel (debian-rt73);
#   unfrozen: the TEST-ONLY storm hook's detector on rt73+storm (quiesce-storm-unfrozen-detect,
#             must fail with evidence), then quiesce-storm-unfrozen on the base, v2, v8 and the
#             TEST-ONLY negative control, each +storm, STORM_REPEAT interleaved boots each;
#   lockwait: the main job's suite and settings (seed000-lockwait, interleaved, --host-sched
#             short) on rt73, rt73+seed000-v8, rt73+seed000, and rt (6.12's base, side by side
#             in the same run), REPEAT boots each; compare of each fix against rt73, and of
#             rt73 against rt.
#   scale:    the main job's design (suite seed000-scale, cell q62-c2: 62 hctx, 2 running vCPUs)
#             on rt73+cpus128, rt73+cpus128+seed000-v8 and rt73+cpus128+seed000, REPEAT boots
#             each, interleaved; compare of each fix against the 7.3 base.
# Then the table of docs/results/kernel-lines/README.md (`lab table kernel-lines`). The
# CPU lock (/tmp/vb-cpu.lock) is taken per build and per matrix.
#
# Environment: OUT (default results/kernel-lines-<UTC time>), REPEAT (6), STORM_REPEAT (6),
# PARTS (boots unfrozen lockwait scale), STORM_KERNELS (the +storm kernels of part unfrozen),
# SCALE_KERNELS (part scale's kernels, the first the baseline).
set -euo pipefail
cd "$(dirname "$0")/.."

OUT=${OUT:-results/kernel-lines-$(date -u +%Y%m%dT%H%M%SZ)}
REPEAT=${REPEAT:-6}
STORM_REPEAT=${STORM_REPEAT:-6}
PARTS=${PARTS:-boots unfrozen lockwait scale}
LOCK=/tmp/vb-cpu.lock
GT=target/release/guest-tests
LAB=target/release/lab
flock "$LOCK" cargo build --release -q -p guest-tests -p vhost-blk -p lab
LOCKWAIT_KERNELS="rt73 rt73+seed000-v8 rt73+seed000 rt"
STORM_KERNELS=${STORM_KERNELS:-rt73+storm rt73+seed000+storm rt73+seed000-v8+storm rt73+nobarrier+storm}
SCALE_KERNELS=${SCALE_KERNELS:-rt73+cpus128 rt73+cpus128+seed000-v8 rt73+cpus128+seed000}
BOOT_KERNELS="rt73+seed000-paired rt73+nobarrier rt73+seed003 rt73+noguard rt73+noguard+seed003 debian-rt73"

stamp() { echo "== $1 ($(date -u +%H:%M:%S), load $(cut -d' ' -f1-3 /proc/loadavg))"; }

for p in $PARTS; do
    case "$p" in
        boots)
            stamp boots
            # shellcheck disable=SC2086 # a list of kernels: split on purpose
            flock "$LOCK" "$GT" images build $BOOT_KERNELS >/dev/null
            flock "$LOCK" "$GT" run --suite smoke --repeat 1 --no-progress \
                --kernels "${BOOT_KERNELS// /,}" --out "$OUT/boots"
            ;;
        unfrozen)
            stamp unfrozen
            # shellcheck disable=SC2086 # a list of kernels: split on purpose
            flock "$LOCK" "$GT" images build $STORM_KERNELS >/dev/null
            # the hook's detector on 7.3: must FAIL with stranded=1 and the debugfs dump
            flock "$LOCK" "$GT" run --suite quiesce-storm-unfrozen-detect --kernels rt73+storm \
                --repeat 1 --retries 0 --no-progress --out "$OUT/unfrozen-selftest" || true
            ls "$OUT"/unfrozen-selftest/000-rt73+storm-r0/artifacts/*.stuck
            flock "$LOCK" "$GT" run --suite quiesce-storm-unfrozen --design interleaved \
                --no-progress --kernels "${STORM_KERNELS// /,}" --repeat "$STORM_REPEAT" \
                --out "$OUT/unfrozen" || true
            "$GT" compare "$OUT/unfrozen"
            ;;
        lockwait)
            stamp lockwait
            # shellcheck disable=SC2086 # a list of kernels: split on purpose
            flock "$LOCK" "$GT" images build $LOCKWAIT_KERNELS >/dev/null
            flock "$LOCK" "$GT" run --suite seed000-lockwait --design interleaved \
                --host-sched short --no-progress --kernels "${LOCKWAIT_KERNELS// /,}" \
                --repeat "$REPEAT" --out "$OUT/lockwait"
            for k in rt73+seed000-v8 rt73+seed000 rt; do
                echo "-- rt73 vs $k"
                "$GT" compare "$OUT/lockwait" --kernels "rt73,$k" --verdict
            done
            ;;
        scale)
            stamp scale
            # shellcheck disable=SC2086 # a list of kernels: split on purpose
            flock "$LOCK" "$GT" images build $SCALE_KERNELS >/dev/null
            flock "$LOCK" "$GT" run --suite seed000-scale --variant q62-c2 --design interleaved \
                --host-sched short --no-progress --kernels "${SCALE_KERNELS// /,}" \
                --repeat "$REPEAT" --out "$OUT/scale"
            scale_base=${SCALE_KERNELS%% *}
            for k in ${SCALE_KERNELS#* }; do
                echo "-- $scale_base vs $k"
                "$GT" compare "$OUT/scale" --kernels "$scale_base,$k" --verdict
            done
            ;;
        *) echo "exp-kernel-lines: unknown part '$p'" >&2; exit 2 ;;
    esac
done
stamp table
if [ -d "$OUT/lockwait" ]; then
    storm=""
    [ -d "$OUT/unfrozen" ] && storm=":$OUT/unfrozen"
    "$LAB" table kernel-lines "7.3=rt73:$OUT/lockwait$storm" "6.12 (same run)=rt:$OUT/lockwait"
fi
stamp "done"
echo "matrices under $OUT"
