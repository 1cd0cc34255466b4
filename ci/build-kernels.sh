#!/usr/bin/env bash
# Times the kernel source build the way a developer meets it, and checks reproducibility:
#   1. full build of `rt` in an empty work tree with an empty ccache (a real cold compile),
#   2. rebuild after a one-file patch (`rt+seed000`: same work tree, block/blk-mq.c only),
#   3. a second, independent build of `rt` from scratch (fresh source extraction and build dir)
#      and of the static fio and the initramfs, compared bit for bit with the first.
# Uses its own cache (default <repo>/.cache/ci, re-created) so cached kernels do not hide work;
# downloaded .debs are shared with the main cache. Builds run under `nice -n 19`.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
MAIN_CACHE=${VB_CACHE:-$ROOT/.cache}
CI_CACHE=${VB_CI_CACHE:-$MAIN_CACHE/ci}

cd "$ROOT"
nice -n 10 cargo build -q -p guest-tests --example vb-images
BIN=$ROOT/target/debug/examples/vb-images

rm -rf "$CI_CACHE"
# A compiler cache of its own, empty: step 1 is a cold compile that fills it, step 3 is a fresh
# source tree and build directory, not a cold compiler.
export CCACHE_DIR=$CI_CACHE/ccache
mkdir -p "$CI_CACHE/debs"
if [ -d "$MAIN_CACHE/debs" ]; then
    cp -l "$MAIN_CACHE"/debs/*.deb "$CI_CACHE/debs/" 2>/dev/null || cp "$MAIN_CACHE"/debs/*.deb "$CI_CACHE/debs/"
fi
# The static fio is built (and verified) once in the main cache; share it.
if [ -d "$MAIN_CACHE/fio" ]; then cp -a "$MAIN_CACHE/fio" "$CI_CACHE/"; fi

run() { # run LABEL ARGS...: times one build, keeps its output
    local label=$1; shift
    local t0 t1
    t0=$(date +%s.%N)
    nice -n 19 "$BIN" "$@" --cache "$CI_CACHE" --quiet | tee "$CI_CACHE/$label.out"
    t1=$(date +%s.%N)
    echo "$label $(echo "$t1 - $t0" | bc)" >> "$CI_CACHE/timings"
}

echo "== 1. full build of rt (empty ccache)"
run full build rt
echo "== 2. rebuild after a one-file patch (rt+seed000)"
run onepatch build rt+seed000
echo "== 3. second build of rt from scratch (+ fio and initramfs), compared with the first"
run repro build rt --verify-reproducible

sha() { awk '/bzImage/ { sub("sha256=", "", $3); print $3; exit }' "$CI_CACHE/$1.out"; }
echo
echo "== results ($(nproc) CPUs, load average now: $(cut -d' ' -f1-3 /proc/loadavg))"
while read -r label secs; do
    printf '  %-10s %8.1f s\n' "$label" "$secs"
done < "$CI_CACHE/timings"
echo "  rt bzImage sha256:         $(sha full)"
echo "  rt+seed000 bzImage sha256: $(sha onepatch)"
grep -h 'reproducible' "$CI_CACHE/repro.out" | sed 's/^ */  /'
size=$(stat -c %s "$(awk '/initramfs/ { print $2; exit }' "$CI_CACHE/full.out")")
echo "  initramfs size: $size bytes"
[ "$(sha full)" != "$(sha onepatch)" ] || { echo "rt and rt+seed000 have the same bzImage?" >&2; exit 1; }
