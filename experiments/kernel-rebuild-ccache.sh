#!/usr/bin/env bash
# The rebuild after upstream's v8 (it changes include/linux/blkdev.h: ~92 files recompile) with
# ccache's default mode against its depend mode (CCACHE_DEPEND=1, what guest-tests' image builder
# uses), alternated in one run so host drift hits both alike. Each rebuild starts from an empty
# ccache (every recompiled file is a miss, as on a first `--kernels rt73,rt73+seed000-v8`).
# The make command is the image builder's (gt-images/src/kernel.rs `make`), without
# its KBUILD_BUILD_* variables (they only change the version string).
#
# Usage: experiments/kernel-rebuild-ccache.sh [WORK_DIR] [ROUNDS]
#   WORK_DIR: a 7.3 work tree the image builder left (default .cache/kernel/debian-7.3.4-*),
#   with its last build's config; the script applies v8 by hand and reverts it after each
#   rebuild, and puts the tree back as it found it (the builder's .vb-applied stack).
# Run it under the CPU lock: flock /tmp/vb-cpu.lock experiments/kernel-rebuild-ccache.sh
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
W=${1:-$(echo "$ROOT"/.cache/kernel/debian-7.3.4-*)}
ROUNDS=${2:-2}
V8=$ROOT/images/patches/7.3/seed000-v8.patch
if [ ! -f "$W/src/Makefile" ] || [ ! -f "$W/build/.config" ]; then
    echo "kernel-rebuild-ccache: $W is not a built kernel work tree" >&2
    exit 2
fi
SCRATCH=$(mktemp -d)
cd "$W/src"
# The builder's stack may already hold v8 (its last build was +seed000-v8): take it off for the
# run, put it back at the end.
had_v8=0
if patch -p1 -R --dry-run -s -f <"$V8" >/dev/null 2>&1; then had_v8=1; patch -p1 -R -s <"$V8"; fi
restore() {
    if patch -p1 -R --dry-run -s -f <"$V8" >/dev/null 2>&1; then patch -p1 -R -s <"$V8"; fi
    [ "$had_v8" = 1 ] && patch -p1 -s <"$V8"
    rm -rf "$SCRATCH"
}
trap restore EXIT
mk() { # CCACHE_DIR, extra env...
    local dir=$1; shift
    env "$@" CCACHE_DIR="$dir" CCACHE_BASEDIR="$(dirname "$(dirname "$W")")" LC_ALL=C TZ=UTC \
        make O="$W/build" ARCH=x86_64 "CC=ccache gcc" "HOSTCC=ccache gcc" \
        KCFLAGS=-fmacro-prefix-map=../src/= -j"$(nproc)" bzImage >"$SCRATCH/make.log" 2>&1
}
mk "$SCRATCH/base" CCACHE_DEPEND=1   # the base objects, so going back after each rebuild is cheap
echo "== $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg), ccache $(ccache --version | head -1 | awk '{print $3}')"
for r in $(seq "$ROUNDS"); do
    for mode in default depend; do
        patch -p1 -s <"$V8"
        rm -rf "$SCRATCH/empty"
        t0=$(date +%s.%N)
        if [ "$mode" = depend ]; then mk "$SCRATCH/empty" CCACHE_DEPEND=1; else mk "$SCRATCH/empty" CCACHE_NODEPEND=1; fi
        t1=$(date +%s.%N)
        printf 'round %s  %-8s %5.1f s  %s files compiled\n' "$r" "$mode" \
            "$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')" "$(grep -c '^  CC ' "$SCRATCH/make.log")"
        patch -p1 -R -s <"$V8"
        mk "$SCRATCH/base" CCACHE_DEPEND=1
    done
done
