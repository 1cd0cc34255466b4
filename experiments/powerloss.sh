#!/usr/bin/env bash
# The power-loss simulator's figures (issue 56, docs/data-guarantees.md "Power loss"): the real
# backend records its own writes and syncs (--syscall-trace) under a seeded four-queue workload
# from the in-process frontend; crash states are built from the trace and every promised write
# is checked in each. Per device (blk, scsi), storage (page cache, O_DIRECT) and cache mode
# (write-back, write-through); then the self-checks: a flush that does nothing (--test-fault
# no-flush, must be found in the first 10 states) and an acknowledgement before the write
# reaches the file (--test-fault early-ack). Debug build: release builds refuse --test-fault.
#
# Then the other figures of issue 56: the sticky write errors under injected EIO and ENOSPC
# (tests/write_errors.rs: flushes acknowledged after a lost write, every queue, both devices,
# both cache modes; root for the tmpfs) and the mixed O_DIRECT test (vhost-blk-storage
# tests/direct_mixed.rs: operations and lost completed writes).
#
# And the kill test with several writes in flight over shared blocks (tests/kill_inflight.rs),
# and ext4 checked (e2fsck) in power-cut states of a recorded guest run (vhost-blk-replay crash).
#
# Usage: experiments/powerloss.sh   (STATES=1000 OPS=800 KILLS=5 FSCK_STATES=1000 MIXED_OPS=100000
#                                    OUT=docs/results/powerloss)
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-docs/results/powerloss}
STATES=${STATES:-1000}
OPS=${OPS:-800}
mkdir -p "$OUT"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
VB_POWERLOSS_STATES=$STATES VB_POWERLOSS_OPS=$OPS \
    cargo test -q -p vhost-blk --test powerloss -- --nocapture --test-threads 1 >"$log" 2>&1 \
    || { cat "$log"; echo "powerloss: a test failed (above)"; exit 1; }
grep -o 'POWERLOSS-RESULT {.*}' "$log" | sed 's/^POWERLOSS-RESULT //' >"$OUT/results.jsonl"
{
    echo "# host: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), $(uname -r), $(date -u +%FT%TZ)"
    echo "# STATES=$STATES OPS=$OPS, commit $(git rev-parse --short HEAD)"
    python3 - "$OUT/results.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print(f"{'device':6} {'storage':16} {'cache':13} {'fault':9} {'requests':>8} {'records':>7} {'syncs':>5} {'states':>6} {'sweep':>5} {'checked':>8} {'bad states':>10} {'first bad':>9}")
for r in rows:
    first = "-" if r["first_violating_state"] is None else r["first_violating_state"]
    print(f"{r['device']:6} {r['storage']:16} {r['cache']:13} {r['fault']:9} {r['requests']:>8} {r['trace_records']:>7} {r['syncs']:>5} {r['states']:>6} {r['of_them_sweep']:>5} {r['promised_sectors_checked']:>8} {r['violating_states']:>10} {first:>9}")
ok = [r for r in rows if r["fault"] == "none"]
print(f"# correct backend: {sum(r['states'] for r in ok)} crash states in {len(ok)} modes, {sum(r['violating_states'] for r in ok)} with a promised write missing")
nf = [r for r in rows if r["fault"] == "no-flush"]
print(f"# no-flush: found in {sum(1 for r in nf if r['first_violating_state'] is not None and r['first_violating_state'] < 10)} of {len(nf)} modes within 10 states")
ea = [r for r in rows if r["fault"] == "early-ack"]
print(f"# early-ack: found in {sum(1 for r in ea if r['violating_states'] > 0)} of {len(ea)} modes")
PY
    cargo test -q -p vhost-blk --test write_errors -- --nocapture 2>/dev/null \
        | grep -o 'WRITE-ERRORS-RESULT {.*}' | sed 's/^WRITE-ERRORS-RESULT //' >"$OUT/write-errors.jsonl"
    python3 - "$OUT/write-errors.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
for r in rows:
    print(f"write errors: {r['device']:4} {r['cache']:13} {r['fault']:24} flushes after the lost write {r['flushes_after_lost_write']} on {r['queues']} queues, acknowledged {r['flushes_acknowledged']}, write-through writes acknowledged {r['write_through_writes_acknowledged']}")
print(f"# write errors: {len(rows)} cases, {sum(r['flushes_acknowledged'] for r in rows)} flushes acknowledged after a lost write")
PY
    VB_KILLS=${KILLS:-5} cargo test -q -p vhost-blk --test kill_inflight -- --nocapture --test-threads 1 2>/dev/null \
        | grep -o 'KILL-INFLIGHT-RESULT {.*}' | sed 's/^KILL-INFLIGHT-RESULT //' >"$OUT/kills.jsonl"
    python3 - "$OUT/kills.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
for r in rows:
    print(f"kills: {r['device']:4} {r['storage']:16} {r['cache']:13} {r['fault']:9} {r['kills']} SIGKILLs, {r['queues']} queues x {r['depth']} in flight on {r['blocks']} shared blocks: {r['acknowledged_writes_judged']} acknowledged writes judged, {r['in_flight_at_kill']} in flight at the kills, lost {r['lost']}")
ok = [r for r in rows if r["fault"] == "none"]
print(f"# kills: {sum(r['kills'] for r in ok)} kills of the correct backend, {sum(r['acknowledged_writes_judged'] for r in ok)} acknowledged writes judged, {sum(r['lost'] for r in ok)} lost; early-ack found in {sum(1 for r in rows if r['fault'] == 'early-ack' and r['lost'] > 0)} of {sum(1 for r in rows if r['fault'] == 'early-ack')} modes")
PY
    # ext4 in crash states of a recorded guest run (the committed write log of suite
    # writelog-ext4): e2fsck in each; then with the flushes ignored (must find damage).
    cargo build -q -p vhost-blk --bin vhost-blk-replay
    rp=$(mktemp -d)
    gzip -dc vhost-blk/tests/data/writelog-ext4.start.img.gz >"$rp/start.img"
    gzip -dc vhost-blk/tests/data/writelog-ext4.log.gz >"$rp/w.log"
    for extra in "" "--drop-flushes"; do
        n=${FSCK_STATES:-1000}; [ -n "$extra" ] && n=10
        target/debug/vhost-blk-replay crash --image "$rp/start.img" --log "$rp/w.log" --states "$n" $extra \
            | grep -o 'CRASH-RESULT {.*}' | sed "s/^CRASH-RESULT /# ext4 crash states${extra:+ ($extra)}: /" || true
    done
    rm -rf "$rp"
    VB_MIXED_OPS=${MIXED_OPS:-100000} cargo test -q -p vhost-blk-storage --test direct_mixed -- --nocapture 2>/dev/null \
        | grep -o 'MIXED-DIRECT-RESULT {.*}' | sed 's/^MIXED-DIRECT-RESULT /# mixed O_DIRECT: /'
} | tee "$OUT/summary.txt"
