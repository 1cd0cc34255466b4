#!/usr/bin/env bash
# The main job (ci/main-job.sh, defaults otherwise) while a real kernel compile runs on the same
# host: `make -j1 vmlinux` of a defconfig tree, no ccache, nice 0, started 20 s before the job
# and stopped after it; once per HOST_SCHED in SCHEDS, a fresh build directory each time.
# docs/results/verdict, "short on a busy host".
#
# Environment: SCHEDS (default "normal short"), OUT (default results/busy-compile-<UTC time>;
# one matrix per scheduling mode under it, OUT/<mode>/vhost-blk), KTREE (a Linux source tree
# with no build in it; default .cache/ci-tree/linux, which `.ci/run` leaves), BUILD (the
# compile's output directory, default /tmp/vb-hogbuild; emptied before each compile).
# Run it under the CPU lock: flock /tmp/vb-cpu.lock experiments/exp-busy-compile.sh
set -euo pipefail
cd "$(dirname "$0")/.."
SCHEDS=${SCHEDS:-normal short}
OUT=${OUT:-results/busy-compile-$(date -u +%Y%m%dT%H%M%SZ)}
KTREE=${KTREE:-.cache/ci-tree/linux}
BUILD=${BUILD:-/tmp/vb-hogbuild}
[ -f "$KTREE/Makefile" ] || { echo "exp-busy-compile: no kernel tree at $KTREE (set KTREE)" >&2; exit 2; }
cargo build -q --release -p vhost-blk -p guest-tests
for s in $SCHEDS; do # guest-tests is the one place that knows the modes
    target/release/guest-tests run --kernels rt,rt+seed000 --suite seed000-lockwait \
        --host-sched "$s" --dry-run --out "$OUT/$s" >/dev/null || exit 2
done
mkdir -p "$OUT"
HOG=
stop_hog() { # the compile runs in a session of its own: stop that group, nothing else
    [ -z "$HOG" ] && return 0
    kill -- -"$HOG" 2>/dev/null || true
    wait "$HOG" 2>/dev/null || true
    HOG=
}
trap stop_hog EXIT
for s in $SCHEDS; do
    rm -rf "$BUILD"; mkdir -p "$BUILD"
    make -s -C "$KTREE" O="$BUILD" defconfig >/dev/null
    # shellcheck disable=SC2016 # $1 is the inner shell's argument, expanded there
    setsid bash -c 'cd "$1" && exec env CCACHE_DISABLE=1 make -j1 vmlinux' - "$BUILD" \
        >"$BUILD.log" 2>&1 &
    HOG=$!
    sleep 20
    echo "== $s: compile started $(date -u +%T)"
    start=$(date +%s)
    HOST_SCHED=$s OUT="$OUT/$s" ci/main-job.sh
    echo "main job wall $(( $(date +%s) - start )) s; the compile built $(find "$BUILD" -name '*.o' | wc -l) objects"
    stop_hog
    sleep 5
done
