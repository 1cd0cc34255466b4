#!/usr/bin/env bash
# Backend restarts, the goals of issues 15 and 35: 10 backend kills in a row during fio crc32c
# verify on 8 queues, each kill once the backend's statistics show requests taken and not
# completed (requests held 2 ms before their used entry is written, interrupts 1 ms more), for
# each MODE (device:qemu), RUNS times. Each run is the restart drill (`lab drill restart`,
# guest_tests::drill::restart) on suite restart-verify-10 (blk) or restart-verify-scsi-10
# (SCSI) with --min-resubmitted 50; then `lab table restart-goals` prints the goal
# table (per run: kills, chains resubmitted, fio errors, verify, dmesg, fds and RSS of every
# backend instance, first and last) and whether each goal was met.
#
# Takes ~2-3 min of CPU per run under TCG on 2 cores (5 min for a run that hangs: the suite's
# timeout); run it under the shared CPU lock. Environment: MODES (default "blk:7.2 blk:10
# scsi:10"), RUNS (5), OUT (docs/results/restart-35), RUN_BASE (run directories, default
# target/restart-experiment), VB_BACKEND_BIN (another backend binary, e.g. an older build as a
# control), MIN_RESUBMITTED (50), SCALE (128: suites restart-verify-128 and
# restart-verify-scsi-128, 128 queues driven from guest CPUs 0, 1, 64 and 127, so that queues on
# vhost-user-backend's threads and on vhost-blk's own carry requests at every kill).
set -euo pipefail
cd "$(dirname "$0")/.."
modes=${MODES:-blk:7.2 blk:10 scsi:10}
runs=${RUNS:-5}
out=${OUT:-docs/results/restart-35}
min=${MIN_RESUBMITTED:-50}
mkdir -p "$out"
case "$modes" in *:10*) ci/fetch-qemu10.sh >/dev/null ;; esac
cargo build -p vhost-blk -p lab
backend=${VB_BACKEND_BIN:-$PWD/target/debug/vhost-blk}
failed=0
for mode in $modes; do
    dev=${mode%%:*}
    qemu=${mode##*:}
    case "$dev" in
        blk) suite=restart-verify-10 ;;
        scsi) suite=restart-verify-scsi-10 ;;
        *) echo "restart-experiment: unknown device in MODES: $mode" >&2; exit 2 ;;
    esac
    if [ "${SCALE:-}" = 128 ]; then
        suite=${suite%-10}-128
    fi
    for i in $(seq 1 "$runs"); do
        name="$dev-qemu$qemu-run$i"
        dir="${RUN_BASE:-$PWD/target/restart-experiment}/$name"
        start=$(date +%s)
        status=0
        target/debug/lab drill restart --suite "$suite" --dir "$dir" --min-resubmitted "$min" \
            --qemu "$qemu" --backend "$backend" >"$out/$name.log" 2>&1 || status=$?
        wall=$(($(date +%s) - start))
        echo "$name: $wall s wall, exit $status" | tee -a "$out/$name.log"
        [ "$status" = 0 ] || failed=$((failed + 1))
        # Kept either way: a failed run's evidence is in its backend logs and console.
        printf '{"run": "%s", "exit": %d, "wall_s": %d}\n' "$name" "$status" "$wall" >"$out/$name.status.json"
        cp "$dir/restarts.json" "$out/$name.restarts.json" 2>/dev/null || true
        grep -h 'inflight requests of the previous backend' "$dir"/backend.*.log 2>/dev/null |
            sed 's/^[^ ]* *//' >"$out/$name.resubmissions.txt" || true
        cp "$dir"/artifacts/fio.1-*.fio.json "$out/$name.fio.json" 2>/dev/null || true
        grep -iE 'i/o error|abort|blocked for more|offlined|call trace' "$dir/artifacts/dmesg" \
            >"$out/$name.dmesg-bad.txt" 2>/dev/null || true
        tail -n 30 "$dir/console.log" >"$out/$name.console-tail.txt" 2>/dev/null || true
    done
done
cargo run -q -p lab -- table restart-goals "$out" "$min"
echo "restart-experiment: $failed failed runs"
[ "$failed" = 0 ]
