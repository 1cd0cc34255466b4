#!/usr/bin/env bash
# Kill tests, issue 48's goal: per storage mode (page cache or O_DIRECT, write cache on or off,
# blk and SCSI), KILLS kills of the backend, of QEMU and of both at random points of the guest's
# `killwrite` step; after each, the image must hold every write acknowledged before a completed
# flush (write cache off: every acknowledged write), byte for byte (docs/data-guarantees.md).
#
# Each boot is the kill drill (`lab drill kill`, guest_tests::drill::kill) on suite
# kill-{backend,qemu,both}-{blk,scsi} and one of its variants (cache, direct, writethrough,
# direct-writethrough) with its own seed (the kill's random point); a backend boot kills 10
# times, a QEMU or both boot once. Every boot's `KILL-RESULT` line goes to OUT/kills.jsonl, its
# log to OUT/logs/; at the end the table per mode (boots, kills, writes acknowledged, covered,
# blocks checked, lost, corrupt) is printed and written to OUT/table.md.
#
# Each boot takes the shared CPU lock itself (about 30-90 s of TCG each). Environment: TARGETS
# ("backend qemu both"), DEVICES ("blk scsi"), VARIANTS ("cache direct writethrough
# direct-writethrough"), KILLS (20 per mode and target), OUT (docs/results/data-guarantees/kills),
# RUN_BASE (target/kill-experiment), FIRST (1: the first boot number, to continue a cut run into
# the same OUT; each boot's seed is 1000 + its number), MAX_SECONDS (start no boot after this many seconds: a
# partial run whose table covers the boots done). SCSI backend kills run on QEMU 10
# (ci/fetch-qemu10.sh), everything else on the system's QEMU 7.2.
set -euo pipefail
cd "$(dirname "$0")/.."
targets=${TARGETS:-backend qemu both}
devices=${DEVICES:-blk scsi}
variants=${VARIANTS:-cache direct writethrough direct-writethrough}
kills=${KILLS:-20}
out=${OUT:-docs/results/data-guarantees/kills}
base=${RUN_BASE:-$PWD/target/kill-experiment}
lock=${LOCK:-/tmp/vb-cpu.lock}
mkdir -p "$out/logs"
case "$targets $devices" in *backend*scsi*) ci/fetch-qemu10.sh >/dev/null ;; esac
flock "$lock" cargo build -q -p vhost-blk -p guest-tests -p lab
failed=0
started=$(date +%s)
# Round-robin over the modes (boot i of every mode before boot i+1 of any), so that a run cut
# short by MAX_SECONDS covers every mode about equally.
boots_of() { # TARGET: boots per mode (a backend boot kills 10 times, the others once)
    local per_boot=1
    [ "$1" = backend ] && per_boot=10
    echo $(((kills + per_boot - 1) / per_boot))
}
most=0
for target in $targets; do
    b=$(boots_of "$target")
    [ "$b" -gt "$most" ] && most=$b
done
for i in $(seq "${FIRST:-1}" "$most"); do
    for target in $targets; do
        [ "$i" -le "$(boots_of "$target")" ] || continue
        for dev in $devices; do
            qemu=7.2
            [ "$target-$dev" = backend-scsi ] && qemu=10
            for v in $variants; do
                if [ -n "${MAX_SECONDS:-}" ] && [ $(($(date +%s) - started)) -ge "$MAX_SECONDS" ]; then
                    echo "kill-experiment: MAX_SECONDS reached, no further boot"
                    break 4
                fi
                name="$target-$dev-$v-$i"
                seed=$((1000 + i))
                status=0
                flock "$lock" target/debug/lab drill kill --suite "kill-$target-$dev" --variant "$v" \
                    --seed "$seed" --dir "$base/$name" --qemu "$qemu" \
                    >"$out/logs/$name.log" 2>&1 || status=$?
                line=$(grep '^KILL-RESULT ' "$out/logs/$name.log" | tail -n 1 || true)
                echo "$name: exit $status ${line:0:160}"
                [ "$status" = 0 ] || failed=$((failed + 1))
                res=${line#KILL-RESULT }
                [ -n "$res" ] || res=null
                printf '{"target":"%s","device":"%s","variant":"%s","boot":%d,"exit":%d,"result":%s}\n' \
                    "$target" "$dev" "$v" "$i" "$status" "$res" >>"$out/kills.jsonl"
            done
        done
    done
done
python3 - "$out/kills.jsonl" <<'PY' | tee "$out/table.md"
import json, sys
rows = {}
for line in open(sys.argv[1]):
    try:
        r = json.loads(line)
    except ValueError:
        continue
    key = (r["target"], r["device"], r["variant"])
    t = rows.setdefault(key, dict(boots=0, failed=0, kills=0, acked=0, covered=0, checked=0, lost=0, corrupt=0, nores=0))
    t["boots"] += 1
    t["failed"] += r["exit"] != 0
    res = r.get("result") or {}
    if not res:
        t["nores"] += 1
        continue
    # a QEMU kill is one per boot (the drill counted the backend's records before 2026-12-06)
    t["kills"] += 1 if r["target"] == "qemu" else res.get("kills", 1)
    t["acked"] += res["writes_acked"]
    t["covered"] += res["covered_writes"]
    t["checked"] += res["blocks_checked"]
    t["lost"] += res["lost"]
    t["corrupt"] += res["corrupt"]
print("| killed | device | storage | boots | kills | writes acked | covered | blocks checked | lost | corrupt | failed boots |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
for (tg, dev, v), t in sorted(rows.items()):
    print(f"| {tg} | {dev} | {v} | {t['boots']} | {t['kills']} | {t['acked']:,} | {t['covered']:,} | {t['checked']:,} | {t['lost']} | {t['corrupt']} | {t['failed']} |")
PY
echo "kill-experiment: $failed failed boots"
[ "$failed" = 0 ]
