#!/usr/bin/env bash
# The main job, for a fresh Debian 12 machine: install what is needed, build, and run the
# default A/B experiment of seed 000 (docs/REPRODUCING.md):
#   kernels rt, rt+seed000, rt+seed000-paired (Debian linux-source-6.12 + PREEMPT_RT, built and
#   cached on first use), suite seed000-rt-lock on vhost-blk's SCSI personality (8 request
#   queues), REPEAT interleaved boots per kernel, then the same on QEMU's built-in virtio-scsi as
#   the reference column; prints the comparison tables and writes report.md / report.html.
#
# Environment: REPEAT (default 6), KERNELS (default rt,rt+seed000,rt+seed000-paired),
# OUT (default results/seed000-<UTC time>), VB_CACHE (image cache, default .cache/).
set -euo pipefail
cd "$(dirname "$0")/.."

REPEAT=${REPEAT:-6}
KERNELS=${KERNELS:-rt,rt+seed000,rt+seed000-paired}
OUT=${OUT:-results/seed000-$(date -u +%Y%m%dT%H%M%SZ)}

if [ "$(id -u)" = 0 ]; then
    ci/install-deps.sh
else
    echo "not root: assuming ci/install-deps.sh was run" >&2
fi
if ! command -v cargo >/dev/null 2>&1 && [ -f "$HOME/.cargo/env" ]; then
    # shellcheck disable=SC1091
    . "$HOME/.cargo/env"
fi
cargo build --release -p vhost-blk -p guest-tests
GT=target/release/guest-tests

start=$(date +%s)
# Kernels first (with a progress bar), so the runs below only boot.
IFS=, read -r -a kernel_list <<<"$KERNELS"
"$GT" images build "${kernel_list[@]}"
"$GT" run --kernels "$KERNELS" --suite seed000-rt-lock --repeat "$REPEAT" --out "$OUT/vhost-blk"
"$GT" run --kernels "$KERNELS" --suite seed000-rt-lock-builtin --repeat "$REPEAT" --out "$OUT/builtin"
echo
echo "== seed 000, all runs (first kernel = baseline)"
"$GT" compare "$OUT"
"$GT" report "$OUT"
echo
echo "report: $OUT/report.md and $OUT/report.html; wall time $(( $(date +%s) - start )) s"
