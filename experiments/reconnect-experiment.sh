#!/usr/bin/env bash
# Frontend reconnects against one running backend (issue 35's leak goal): for each QEMU in
# QEMUS, the reconnect drill (`lab drill reconnect`, guest_tests::drill::reconnect) with N (20)
# connections: QEMU boots Debian's RT kernel against our backend (blk, then SCSI), is SIGKILLed once the
# guest reported its disk, and is started again, N times; the backend's open fds and threads
# after each connection are printed, and those after the last must equal those after the first.
# Output: OUT/reconnect-qemu<qemu>.log (each drill's RECONNECT-RESULT line), then their table
# (`lab table reconnects OUT QEMU...`). ~4-5 s of TCG boot per connection; run it under
# the shared CPU lock. Environment: QEMUS ("7.2 10"), N (20), OUT (docs/results/restart-35),
# SUFFIX (e.g. -128: the suites' 128-queue forms, reconnect-idle-128 and
# reconnect-idle-scsi-128), KERNEL (default Debian's RT kernel; the 128-queue runs used rt128).
set -euo pipefail
cd "$(dirname "$0")/.."
qemus=${QEMUS:-7.2 10}
n=${N:-20}
out=${OUT:-docs/results/restart-35}
mkdir -p "$out"
case "$qemus" in *10*) ci/fetch-qemu10.sh >/dev/null ;; esac
cargo build -p vhost-blk -p lab
failed=0
for q in $qemus; do
    : >"$out/reconnect-qemu$q.log"
    for suite in reconnect-idle reconnect-idle-scsi; do
        status=0
        target/debug/lab drill reconnect --suite "$suite${SUFFIX:-}" --connections "$n" \
            --dir "$PWD/target/reconnect-experiment/$suite${SUFFIX:-}-qemu$q" --qemu "$q" \
            --kernel "${KERNEL:-debian-rt}" >>"$out/reconnect-qemu$q.log" 2>&1 || status=$?
        echo "QEMU $q, $suite${SUFFIX:-}: exit $status"
        [ "$status" = 0 ] || failed=$((failed + 1))
    done
done
# The table from the logs' RECONNECT-RESULT lines (report::reconnects).
# shellcheck disable=SC2086 # qemus is a list: split on purpose
cargo run -q -p lab -- table reconnects "$out" $qemus
echo "reconnect-experiment: $failed failed"
[ "$failed" = 0 ]
