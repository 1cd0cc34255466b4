#!/usr/bin/env bash
# The write log's goal (issue 48): an ext4 used by a guest workload with at least 100 flushes,
# every write and flush logged by the backend (`--write-log`), replayed onto the starting image
# up to each flush point: e2fsck clean at every one; and the checker's self-test (a write moved
# past its flush) fails as it must (docs/write-log.md).
#
# Boots suite writelog-ext4 (Debian's prebuilt RT kernel, ext4 from the initramfs; the fsload
# step, ROUNDS rounds) once, then runs `vhost-blk-replay dump`, `check` and `selftest` on the
# run's log. Prints and keeps in OUT: the three outputs (dump.txt, check.txt, selftest.txt), the
# guest's fsload artefact and the run's results.json. KEEP_LOG=DIR also copies the starting image
# and the log there, gzipped (what vhost-blk/tests/data/ holds). Takes the shared CPU lock for
# the boot and for the replay. Environment: OUT (docs/results/data-guarantees/writelog), RUN_BASE
# (target/writelog-experiment).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-docs/results/data-guarantees/writelog}
base=${RUN_BASE:-$PWD/target/writelog-experiment}
lock=${LOCK:-/tmp/vb-cpu.lock}
mkdir -p "$out"
rm -rf "$base"
flock "$lock" cargo build -q -p vhost-blk -p guest-tests
flock "$lock" target/debug/guest-tests run --suite writelog-ext4 --kernels debian-rt --repeat 1 \
    --no-progress --out "$base" | tail -n 3
run=$(dirname "$(find "$base" -mindepth 2 -maxdepth 2 -name results.json | head -n 1)")
cp "$run/results.json" "$out/results.json"
cp "$run/artifacts/fsload" "$out/fsload.txt"
cat "$out/fsload.txt"
replay=target/debug/vhost-blk-replay
"$replay" dump --log "$run/write.log" | tee "$out/dump.txt"
status=0
flock "$lock" "$replay" check --image "$run/disk.start.img" --log "$run/write.log" | tee "$out/check.txt" || status=1
flock "$lock" "$replay" selftest --image "$run/disk.start.img" --log "$run/write.log" | tee "$out/selftest.txt" || status=1
if [ -n "${KEEP_LOG:-}" ]; then
    mkdir -p "$KEEP_LOG"
    gzip -9nc "$run/disk.start.img" >"$KEEP_LOG/writelog-ext4.start.img.gz"
    gzip -9nc "$run/write.log" >"$KEEP_LOG/writelog-ext4.log.gz"
fi
echo "writelog-experiment: exit $status"
exit "$status"
