#!/usr/bin/env bash
# The main job, for a fresh Debian 12 machine: install what is needed, build, and run the
# default A/B experiment of seed 000 (docs/REPRODUCING.md), at the scale of the series' own test
# machine (docs/results/seed000-scale/ says why this design):
#   kernels rt128 and rt128+seed000 (Debian linux-source-6.12 + PREEMPT_RT, NR_CPUS=128, built
#   and cached on first use); suite seed000-scale, cell q62-c2: vhost-blk's SCSI personality
#   with 62 request queues (62 hctx, one possible guest CPU each), 2 of them running, one per
#   host core here (each on a core of its own where the host has running vCPUs + 2 cores);
#   null storage that leaves the guest's buffers untouched; 4k randread and 256 KiB sequential
#   read, one fio job per running CPU. Primary metric: queue_lock's share of the request irq
#   threads' lock contentions during randread (lock:contention_* in in-kernel histograms; the
#   host's slowing of lock holders is common to every lock and cancels out of it, while the
#   per-1,000-I/O count it replaced had a CV of 12-26 % per run: docs/results/reproduce,
#   "A steadier primary"); the count stays beside it in the verdict; secondary:
#   randread IOPS (the seed's own terms). REPEAT boots per kernel in the chosen DESIGN; then the verdict in
#   plain words with its faithfulness line (vCPUs per host core, mean wait against the host
#   slice), the verdict table, and report.md / report.html.
#
# Environment: REPEAT (default 10: with one side at 0 contentions, Welch's p depends only on the
# base kernel's boot-to-boot CV and n; at the CV measured in docs/results/reproduce (23-30 %),
# 6 boots gave p 1.2e-4 to 4.7e-4, 10 give about 2e-6 at CV 30 % and < 1e-4 up to CV 45 %;
# chosen before the runs that test it), LINE (the kernel line, default rt: Debian's 6.12 source with
# PREEMPT_RT; rt73: Debian's 7.3 source; `guest-tests images list` shows the lines; the job
# adds the cpus128 component, NR_CPUS=128, which the 62 hctx need), FIX (the fix's component,
# default seed000; on rt73 e.g. seed000-v8), KERNELS (default the line's base and base+FIX; the
# first is the baseline), VARIANT (the cell, default q62-c2; `guest-tests suites --variants
# seed000-scale` lists them), DESIGN (interleaved | paired, default interleaved),
# HOST_SCHED (short, the default: QEMU and the backend at nice -19, so that a compile on the
# same machine takes CPU from itself and not from the guest, plus the fair scheduler's 0.1 ms
# slice (Linux >= 6.12; an older host kernel gets nice alone), docs/results/verdict "A 0.1 ms
# slice" and "short as the default"; nice: nice -19 alone, "Nice -19"; normal; rt),
# BUILTIN=1 to add QEMU's built-in virtio-scsi (suite seed000-scale-builtin, same cell) as a
# reference column, OUT (default results/seed000-<UTC time>), VB_CACHE (image cache, default
# .cache/), QEMU (7.2: the system's, the default; 10: bookworm-backports' QEMU 10, fetched into
# the cache by ci/fetch-qemu10.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

REPEAT=${REPEAT:-10}
LINE=${LINE:-rt}
FIX=${FIX:-seed000}
base=$LINE+cpus128
[ "$LINE" = rt ] && base=rt128 # the alias of rt+cpus128 (same image), shorter in tables
KERNELS=${KERNELS:-$base,$base+$FIX}
VARIANT=${VARIANT:-q62-c2}
DESIGN=${DESIGN:-interleaved}
HOST_SCHED=${HOST_SCHED:-short}
BUILTIN=${BUILTIN:-0}
OUT=${OUT:-results/seed000-$(date -u +%Y%m%dT%H%M%SZ)}
QEMU=${QEMU:-}
qemu_args=()
if [ -n "$QEMU" ]; then
    qemu_args=(--qemu "$QEMU")
fi

if [ "$(id -u)" = 0 ]; then
    ci/install-deps.sh
else
    echo "not root: assuming ci/install-deps.sh was run" >&2
fi
if ! command -v cargo >/dev/null 2>&1 && [ -f "$HOME/.cargo/env" ]; then
    # shellcheck disable=SC1091
    . "$HOME/.cargo/env"
fi
if [ "${QEMU%%.*}" = 10 ]; then
    ci/fetch-qemu10.sh
fi
cargo build --release -p vhost-blk -p guest-tests
GT=target/release/guest-tests

start=$(date +%s)
# Kernels first (with a progress bar), so the runs below only boot.
IFS=, read -r -a kernel_list <<<"$KERNELS"
"$GT" images build "${kernel_list[@]}"
echo "== seed 000 on vhost-blk, cell $VARIANT, $DESIGN design, host-sched $HOST_SCHED, $REPEAT boots per kernel ($(date -u +%H:%M:%S))"
"$GT" run --kernels "$KERNELS" --suite seed000-scale --variant "$VARIANT" --repeat "$REPEAT" \
    --design "$DESIGN" --host-sched "$HOST_SCHED" "${qemu_args[@]}" --out "$OUT/vhost-blk" | grep --line-buffered -v '^|' || true
if [ "$BUILTIN" = 1 ]; then
    echo "== the same on QEMU's built-in virtio-scsi (reference column)"
    "$GT" run --kernels "$KERNELS" --suite seed000-scale-builtin --variant "$VARIANT" \
        --repeat "$REPEAT" \
        --design "$DESIGN" --host-sched "$HOST_SCHED" "${qemu_args[@]}" --out "$OUT/builtin" |
        grep --line-buffered -v '^|' || true
    "$GT" report "$OUT/builtin" >/dev/null
fi
"$GT" report "$OUT/vhost-blk" >/dev/null
echo
echo "== verdict (vhost-blk, $DESIGN, first kernel = baseline)"
"$GT" compare "$OUT/vhost-blk" --verdict
if [ "$BUILTIN" = 1 ]; then
    echo
    echo "== verdict (QEMU built-in virtio-scsi)"
    "$GT" compare "$OUT/builtin" --verdict
fi
echo
echo "report: $OUT/vhost-blk/report.md and report.html; all metrics: $GT compare $OUT/vhost-blk"
echo "wall time $(( $(date +%s) - start )) s after the build"
