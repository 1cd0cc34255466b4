#!/usr/bin/env bash
# The main job on a fresh Debian 12 machine: install, build, and judge seed 000's fix against the
# base kernel (docs/verdict.md): rt128 and rt128+seed000-v7 (Debian's 6.12 with PREEMPT_RT),
# suite seed000-scale, cell q120-c2, REPEAT boots each; prints each fix kernel's judgement
# (improved / unchanged / worse / unsafe / undecided) with its reasons, then the figures, and
# writes report.md / report.html under OUT. Environment: REPEAT (5: docs/verdict.md, "Design"),
# LINE (rt; rt73 takes FIX=seed000-v8), FIX, KERNELS (first = baseline), VARIANT, DESIGN
# (interleaved | paired), HOST_SCHED (short | nice | normal | rt), BUILTIN=1 (QEMU's built-in
# virtio-scsi beside it), OUT, VB_CACHE, QEMU (7.2 | 10).
set -euo pipefail
cd "$(dirname "$0")/.."

REPEAT=${REPEAT:-5}
LINE=${LINE:-rt}
FIX=${FIX:-seed000-v7}
base=$LINE+cpus128
[ "$LINE" = rt ] && base=rt128 # the alias of rt+cpus128 (same image), shorter in tables
KERNELS=${KERNELS:-$base,$base+$FIX}
VARIANT=${VARIANT:-q120-c2}
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
# The memory model (herd7 + the kernel's tools/memory-model) for the judgement's ordering part.
ci/fetch-herd7.sh
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
