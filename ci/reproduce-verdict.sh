#!/usr/bin/env bash
# Reproducibility of README's first command as a measured property: runs the main job N times,
# each from a fresh clone of this repository's HEAD with an empty result directory, one after
# the other, then prints each run's verdict and the spread of the primary metric across runs
# (`guest-tests compare --each`: the baseline's mean per run, its CV across runs, the range of p).
#
#   ci/reproduce-verdict.sh [N]          # N runs (default 3) into OUT/run1..N
#   BUSY=1 ci/reproduce-verdict.sh 1     # with one host core kept busy by a shell loop
#
# Environment: OUT (default results/reproduce-<UTC time>), BUSY (0), THRESHOLD (1e-4; the
# count of runs whose primary p is below it), VB_CACHE (kernel images; default this checkout's
# .cache, shared by the clones: the images are bit-identical across builds, and a cold cache
# is what README's first command measures anyway), KEEP_CLONES (0: each clone is removed after
# its run, its results kept), SEED_TARGET (0; 1: each clone starts with a copy of this
# checkout's target/release, so cargo rebuilds only the workspace's own crates, ~3 min less
# per run; the wall time printed is then not a cold build's), and whatever ci/main-job.sh takes
# (REPEAT, KERNELS, ...).
# Each run takes the CPU lock (/tmp/vb-cpu.lock) for its whole length.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

N=${1:-3}
OUT=${OUT:-results/reproduce-$(date -u +%Y%m%dT%H%M%SZ)}
BUSY=${BUSY:-0}
THRESHOLD=${THRESHOLD:-1e-4}
export VB_CACHE=${VB_CACHE:-$ROOT/.cache}
case "$N" in '' | *[!0-9]* | 0) echo "reproduce-verdict: N must be a positive integer, got '$N'" >&2; exit 2 ;; esac
case "$BUSY" in 0 | 1) ;; *) echo "reproduce-verdict: BUSY must be 0 or 1" >&2; exit 2 ;; esac
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)

hog=
stop_hog() { [ -z "$hog" ] || kill "$hog" 2>/dev/null || true; hog=; }
trap stop_hog EXIT

dirs=()
for i in $(seq 1 "$N"); do
    clone=$(mktemp -d /tmp/vb-reproduce.XXXXXX)
    git clone -q "$ROOT" "$clone"
    if [ "${SEED_TARGET:-0}" = 1 ] && [ -d "$ROOT/target/release" ]; then
        mkdir -p "$clone/target" && cp -a "$ROOT/target/release" "$clone/target/"
    fi
    echo "== run $i of $N: clone of $(git -C "$clone" rev-parse --short HEAD) in $clone ($(date -u +%H:%M:%S), load $(cut -d' ' -f1-3 /proc/loadavg))"
    if [ "$BUSY" = 1 ]; then
        sh -c 'while :; do :; done' &
        hog=$!
        echo "   one host core kept busy by pid $hog"
    fi
    start=$(date +%s)
    flock /tmp/vb-cpu.lock env OUT="$OUT/run$i" "$clone/ci/main-job.sh" > "$OUT/run$i.log" 2>&1 ||
        { echo "run $i failed: $OUT/run$i.log" >&2; stop_hog; exit 1; }
    stop_hog
    echo "   wall $(( $(date +%s) - start )) s; verdict:"
    sed -n '/^== verdict/,/^report:/p' "$OUT/run$i.log" | sed '1d;$d' | sed 's/^/   /'
    dirs+=("$OUT/run$i/vhost-blk")
    cp -r "$clone/target/release/guest-tests" "$OUT/guest-tests" 2>/dev/null || true
    [ "${KEEP_CLONES:-0}" = 1 ] || rm -rf "$clone"
done
echo
echo "== spread over $N runs (each judged alone)"
"$OUT/guest-tests" compare --each --threshold "$THRESHOLD" "${dirs[@]}"
rm -f "$OUT/guest-tests"
