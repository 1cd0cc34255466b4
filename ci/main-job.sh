#!/usr/bin/env bash
# The main job, for a fresh Debian 12 machine: install what is needed, build, and run the
# default A/B experiment of seed 000 (docs/REPRODUCING.md):
#   kernels rt and rt+seed000 (Debian linux-source-6.12 + PREEMPT_RT, built and cached on first
#   use), suite seed000-lockwait on vhost-blk's SCSI personality (8 request queues): the request
#   irq threads' queue_lock wait per 1,000 I/Os measured in the guest with in-kernel histograms,
#   REPEAT boots per kernel in the chosen DESIGN, vCPU threads pinned (guest-tests' default);
#   then the verdict in plain words, the verdict table, and report.md / report.html.
#
# Environment: REPEAT (default 6), LINE (the kernel line, default rt: Debian's 6.12 source with
# PREEMPT_RT; rt73: Debian's 7.3 source; `guest-tests images list` shows the lines),
# KERNELS (default $LINE,$LINE+seed000; the first is the baseline),
# DESIGN (interleaved | paired, default below: the measured better one, docs/results/verdict),
# HOST_SCHED (short, the default: QEMU and the backend at nice -19, so that a compile on the
# same machine takes CPU from itself and not from the guest, plus the fair scheduler's 0.1 ms
# slice (Linux >= 6.12; an older host kernel gets nice alone), docs/results/verdict "A 0.1 ms
# slice" and "short as the default"; nice: nice -19 alone, "Nice -19"; normal; rt),
# BUILTIN=1 to add QEMU's built-in virtio-scsi as a reference column, OUT (default
# results/seed000-<UTC time>), VB_CACHE (image cache, default .cache/), QEMU (7.2: the system's,
# the default; 10: bookworm-backports' QEMU 10, fetched into the cache by ci/fetch-qemu10.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

REPEAT=${REPEAT:-6}
LINE=${LINE:-rt}
KERNELS=${KERNELS:-$LINE,$LINE+seed000}
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
echo "== seed 000 on vhost-blk, $DESIGN design, host-sched $HOST_SCHED, $REPEAT boots per kernel ($(date -u +%H:%M:%S))"
"$GT" run --kernels "$KERNELS" --suite seed000-lockwait --repeat "$REPEAT" --design "$DESIGN" \
    --host-sched "$HOST_SCHED" "${qemu_args[@]}" --out "$OUT/vhost-blk" | grep --line-buffered -v '^|' || true
if [ "$BUILTIN" = 1 ]; then
    echo "== the same on QEMU's built-in virtio-scsi (reference column)"
    "$GT" run --kernels "$KERNELS" --suite seed000-lockwait-builtin --repeat "$REPEAT" \
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
