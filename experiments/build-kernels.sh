#!/usr/bin/env bash
# Times the kernel source build the way a developer meets it, and checks reproducibility, for
# one kernel line (LINE, default rt; rt73 for Debian's 7.3):
#   1. full build of $LINE in an empty cache with an empty ccache (a real cold compile),
#   2. rebuild after a one-file patch ($LINE+$FIX, FIX default seed000: same work tree,
#      block/blk-mq.c only), then each of MORE (e.g. MORE=seed000-v8), timed the same way,
#   3. a second, independent build of $LINE from scratch (fresh source extraction and build dir)
#      and of the static fio and the initramfs, compared bit for bit with the first,
#   4. the same kernel built earlier in the main cache ($VB_CACHE: another directory, another
#      ccache), when there is one, compared bit for bit with step 1's.
# Uses its own cache (VB_CI_CACHE, default <main cache>/ci, re-created) so cached kernels do not
# hide work; downloaded .debs are shared with the main cache (the download is not timed). Builds
# run under `nice -n 19`.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
MAIN_CACHE=${VB_CACHE:-$ROOT/.cache}
CI_CACHE=${VB_CI_CACHE:-$MAIN_CACHE/ci}
LINE=${LINE:-rt}
FIX=${FIX:-seed000}
MORE=${MORE:-}

cd "$ROOT"
nice -n 10 cargo build -q --release -p guest-tests
BIN=$ROOT/target/release/guest-tests
# A bad line or component: one line, exit 2, before the cache is touched.
# MORE is a list of components: split on purpose.
# shellcheck disable=SC2086
for k in "$LINE" "$LINE+$FIX" ${MORE:+$(printf "$LINE+%s " $MORE)}; do
    "$BIN" run --kernels "$k" --suite smoke --dry-run >/dev/null
done

rm -rf "$CI_CACHE"
# A compiler cache of its own, empty: step 1 is a cold compile that fills it, step 3 is a fresh
# source tree and build directory, not a cold compiler.
export CCACHE_DIR=$CI_CACHE/ccache
mkdir -p "$CI_CACHE/debs"
if compgen -G "$MAIN_CACHE/debs/*.deb" >/dev/null; then
    cp -l "$MAIN_CACHE"/debs/*.deb "$CI_CACHE/debs/" 2>/dev/null || cp "$MAIN_CACHE"/debs/*.deb "$CI_CACHE/debs/"
fi
# The static fio is built (and verified) once in the main cache; share it.
if [ -d "$MAIN_CACHE/fio" ]; then cp -a "$MAIN_CACHE/fio" "$CI_CACHE/"; fi

run() { # run LABEL ARGS...: times one build, keeps its output
    local label=$1; shift
    local t0 t1
    t0=$(date +%s.%N)
    nice -n 19 "$BIN" images "$@" --cache "$CI_CACHE" --quiet | tee "$CI_CACHE/$label.out"
    t1=$(date +%s.%N)
    echo "$label $(echo "$t1 - $t0" | bc)" >> "$CI_CACHE/timings"
}

echo "== 1. full build of $LINE (empty ccache)"
run full build "$LINE"
echo "== 2. rebuild after a one-file patch ($LINE+$FIX)"
run onepatch build "$LINE+$FIX"
for m in $MORE; do
    echo "== 2. then $LINE+$m"
    run "$m" build "$LINE+$m"
done
echo "== 3. second build of $LINE from scratch (+ fio and initramfs), compared with the first"
run repro build "$LINE" --verify-reproducible

sha() { awk '/bzImage/ { sub("sha256=", "", $3); print $3; exit }' "$CI_CACHE/$1.out"; }
echo
echo "== results ($LINE; $(nproc) CPUs, load average now: $(cut -d' ' -f1-3 /proc/loadavg))"
while read -r label secs; do
    printf '  %-12s %8.1f s\n' "$label" "$secs"
done < "$CI_CACHE/timings"
echo "  $LINE bzImage sha256:         $(sha full)"
echo "  $LINE+$FIX bzImage sha256: $(sha onepatch)"
for m in $MORE; do echo "  $LINE+$m bzImage sha256: $(sha "$m")"; done
grep -h 'reproducible' "$CI_CACHE/repro.out" | sed 's/^ */  /'
size=$(stat -c %s "$(awk '/initramfs/ { print $2; exit }' "$CI_CACHE/full.out")")
echo "  initramfs size: $size bytes"
[ "$(sha full)" != "$(sha onepatch)" ] || { echo "$LINE and $LINE+$FIX have the same bzImage?" >&2; exit 1; }
key=$(basename "$(dirname "$(awk '/bzImage/ { print $2; exit }' "$CI_CACHE/full.out")")")
other=$MAIN_CACHE/kernels/$key/bzImage
if [ -f "$other" ]; then
    main_sha=$(sha256sum "$other" | cut -d' ' -f1)
    if [ "$main_sha" = "$(sha full)" ]; then
        echo "  $LINE in the main cache ($other): bit-identical"
    else
        echo "  $LINE in the main cache ($other): DIFFERS (sha256=$main_sha)" >&2
        exit 1
    fi
else
    echo "  (no $LINE build with the same key in $MAIN_CACHE to compare with)"
fi
