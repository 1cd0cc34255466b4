#!/usr/bin/env bash
# Acceptance check: every experiment under docs/results rebuilds to the very same report.md.
#
# For each experiment directory D: copy D to a temporary directory, run
# `guest-tests report TMP --title "<first line of D/report.md without '# '>"` and diff the
# rebuilt TMP/report.md against D/report.md. Then the backend benchmark tables: each listed
# experiments/bench-latency.sh run (default settings) and experiments/profile-backend.sh run is
# rebuilt from its raw files by the command those scripts print it with (`lab table
# latency|profile`) and diffed against the committed table; so are experiments/bench-ab.sh's
# A/B tables (`lab table ab`), experiments/syscalls-per-request.sh's tables (`table
# syscalls`), the goal table of experiments/restart-experiment.sh (`lab table
# restart-goals`), that of experiments/reconnect-experiment.sh (`lab table
# reconnects`), that of experiments/scale-cost.sh (`lab table scale-cost`), that of
# experiments/cachegrind-ab.sh (`lab table cachegrind`), and the bisection experiment's
# runs.tsv (`lab table bisect-run`, each
# run's bisect.json with the secret, position, name, seed and wall time the table itself
# gives). Last, `guest-tests check storm` (what ci/tree-kernel-smoke.sh asserts of its storm
# runs) must pass on a committed storm run and its detector's self-test, and fail with the two
# swapped. Exit status 1 when any differs.
#
# Usage: ci/check-reports.sh [GUEST_TESTS_BIN]   (default: target/debug/guest-tests, built if absent)
#   env: LAB: the lab binary, the experiments' tables (default: target/debug/lab, brought up to
#        date with cargo build)
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${1:-$ROOT/target/debug/guest-tests}
if [ ! -x "$BIN" ]; then
    (cd "$ROOT" && nice -n 10 cargo build -q -p guest-tests)
fi
LAB=${LAB:-}
if [ -z "$LAB" ]; then
    (cd "$ROOT" && nice -n 10 cargo build -q -p lab)
    LAB=$ROOT/target/debug/lab
fi
DIRS=(seed000 seed000-quiet seed000-settings latency-sweep seed003-sweep seed003-pertag
    seed003-scale seed003-scale-64 seed003-scale-64-rep
    verdict/idle-interleaved verdict/idle-paired verdict/busy-interleaved verdict/busy-paired
    verdict/idle-interleaved-pinned verdict/busy-interleaved-pinned
    verdict/busy-interleaved-pinned-threads2 verdict/mainjob-idle-interleaved-pinned-threads2
    verdict/idle-until-decided verdict/within-boot verdict/mainjob-fresh-30s
    verdict/busy-interleaved-30s verdict/idle-interleaved-30s seed003-scale-noprof seed000-versions/lockwait seed000-versions/storm
    verdict/idle-s21-fasthost seed000-versions/unfrozen seed003-scale-4cpu
    verdict/busy-s21-fasthost seed000-versions/unfrozen-busy
    verdict/mainjob-s22-fresh verdict/idle-rt verdict/busy-rt seed003-scale-paired
    seed003-scale-paired-split seed003-scale-paired-split-rotated
    seed003-scale-paired-split-rotated-2 verdict/idle-4cpu verdict/busy-nice
    verdict/busy-interleaved-s22 verdict/idle-nice verdict/mainjob-s23-fresh verdict/busy-short
    verdict/idle-short seed003-scale-where verdict/mainjob-s24-short
    verdict/mainjob-s25-busy-compile verdict/mainjob-s25-idle verdict/busy-short-s25
    verdict/mainjob-s28-idle verdict/busy-short-s28 verdict/mainjob-s29-fresh
    verdict/mainjob-s25-busy-compile-normal verdict/mainjob-s25-busy-compile-short
    verdict/mainjob-s25-busy-compile-short-3 verdict/busy-short-s25-2 verdict/seqread-model
    verdict/busy-short-s26 verdict/seqread-model-busy seed000-scale kernel-lines/storm-v8
    reproduce/ten/idle/run1/vhost-blk reproduce/ten/idle/run2/vhost-blk
    reproduce/ten/idle/run3/vhost-blk reproduce/ten/busy/run1/vhost-blk kernel-lines/rt73-scale
    reproduce/share/idle/run1/vhost-blk reproduce/share/idle/run2/vhost-blk
    reproduce/share/idle/run3/vhost-blk reproduce/share/busy/run1/vhost-blk reproduce/spread/kaslr
    verdict-controls/q62-c2-udelay4/run1 verdict-controls/q62-c2-udelay4/run2
    verdict-controls/q62-c2/run1 verdict-controls/q62-c2/run2
    verdict-controls/q120-c2/run1 verdict-controls/q120-c2/run2 seed000-120/builtin-q120-c2
    verdict-controls/mainjob-fresh-q120 verdict-controls/q120-c2-short/run1
    verdict-controls/q120-c2-short/run2 seed000-120/q128-c2 verdict-controls/issue55/run1
    verdict-controls/issue55/run2 verdict-controls/issue55/mainjob-quiet
    verdict-controls/issue55/mainjob-quiet2 seed003-judged/run1
    seed003-judged/run2 hostlock/run1 verdict-controls/issue55/error-cost-quiet
    verdict-controls/issue55/run3 lockdebug-storm/run1
    bisect-helper/recheck-058f05ed)
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

bad=0
for d in "${DIRS[@]}"; do
    src=$ROOT/docs/results/$d
    tmp=$WORK/${d//\//_}
    cp -r "$src" "$tmp"
    title=$(head -n 1 "$src/report.md")
    title=${title#"# "}
    if ! "$BIN" report "$tmp" --title "$title" >/dev/null; then
        echo "FAIL $d: guest-tests report failed" >&2
        bad=1
        continue
    fi
    if diff -u "$src/report.md" "$tmp/report.md" >"$tmp.diff"; then
        echo "ok   $d"
    else
        echo "FAIL $d: report.md differs:" >&2
        head -n 40 "$tmp.diff" >&2
        bad=1
    fi
done

# Backend benchmark tables (the scripts' defaults: targets, 3 rounds, 8 queues x QD16, 2 threads).
same() { # NAME COMMITTED-FILE COMMAND...
    local name=$1 want=$2; shift 2
    if "$@" 2>&1 | diff -u "$want" - >"$WORK/table.diff"; then
        echo "ok   $name"
    else
        echo "FAIL $name: the table differs:" >&2
        head -n 40 "$WORK/table.diff" >&2
        bad=1
    fi
}
for d in bench-latency-s30/run1 bench-latency-s30/run2 bench-latency-s30/run3 bench-latency-s30/busy1 \
    bench-latency-s53/run1 bench-latency-s53/run2 bench-latency-s53/run3; do
    same "$d" "$ROOT/docs/results/$d/bench-latency.md" \
        "$LAB" table latency "$ROOT/docs/results/$d" --targets "10 50 200 1000" --rounds 3 \
        --queues 8 --qd 16 --threads 2
done
for c in blkio bench; do
    same "profile-s30/$c" "$ROOT/docs/results/profile-s30/$c/summary.md" \
        "$LAB" table profile "$ROOT/docs/results/profile-s30/$c" "$c"
done
# experiments/bench-ab.sh's A/B tables (docs/results/volatile-ab/README.md gives each run's
# ROUNDS and CONFIGS).
ab() { # RUN ROUNDS [CONFIGS]
    local d=volatile-ab/$1
    same "$d/ab.md" "$ROOT/docs/results/$d/ab.md" \
        "$LAB" table ab "$ROOT/docs/results/$d" --rounds "$2" ${3:+--configs "$3"}
}
ab run1 4
ab run2 4
ab run3 6 "scsi10-bench null-bench mem-bench"
ab run4 10
for v in default lto align cgu1; do ab "run5/$v" 8 "scsi10-bench null-bench"; done
ab run6 10
ab run7 12 "memw-bench null-blkio scsi10-bench null-bench"
ab run8 20 "memw-bench scsi10-bench"
ab run9 10 "scsi10-bench null-bench memw-bench"
for r in a b; do ab "run10-busy-$r" 8 "scsi10-bench null-bench"; done
# The 8-queue A/B of issue 46 (docs/results/scale128/README.md, "No loss at 8 queues").
while read -r run rounds configs; do
    same "scale128/$run/ab.md" "$ROOT/docs/results/scale128/$run/ab.md" \
        "$LAB" table ab "$ROOT/docs/results/scale128/$run" --rounds "$rounds" ${configs:+--configs "$configs"}
done <<'EOF'
ab-8q 6
ab-8q-2 10
ab-8q-3 10
ab-8q-4 10
ab-8q-5 10 null-bench mem-bench null-blkio
ab-8q-6 24 null-bench mem-bench null-blkio scsi10-bench
ab-8q-7 24 scsi10-bench null-bench
ab-8q-8 24 null-bench mem-bench null-blkio scsi10-bench
ab-8q-9-fuzzer 24 null-bench scsi10-bench
ab-8q-10 24 null-bench scsi10-bench
ab-8q-11 16
ab-8q-12 24 null-bench scsi10-bench
ab-8q-13-busy1 12 null-bench scsi10-bench
ab-8q-simplify 8 scsi10-bench null-bench
EOF
# The sandbox's cost (docs/results/sandbox/README.md): one build, A = --sandbox off, B = on.
ab_sandbox() { # RUN ROUNDS CONFIGS
    same "sandbox/$1/ab.md" "$ROOT/docs/results/sandbox/$1/ab.md" \
        "$LAB" table ab "$ROOT/docs/results/sandbox/$1" --rounds "$2" --configs "$3"
}
ab_sandbox ab-8q 12 "null-bench null-blkio scsi10-bench memw-bench"
ab_sandbox ab-8q-2 20 "scsi10-bench null-bench"
ab_sandbox ab-8q-3 16 "scsi10-bench null-bench mem-bench memw-bench"
ab_sandbox ab-8q-4 40 "scsi10-bench mem-bench"
# experiments/syscalls-per-request.sh's tables (docs/results/syscalls-s29/README.md gives each
# run's PATHS and CLIENT).
S=$ROOT/docs/results/syscalls-s29
same syscalls-s29/bench "$S/bench/syscalls-per-request.md" \
    "$LAB" table syscalls "$S/bench" --rounds 3 --paths "blk scsi10 scsi16 qsd" --hz 100
same syscalls-s29/bench-busy1 "$S/bench-busy1/syscalls-per-request.md" \
    "$LAB" table syscalls "$S/bench-busy1" --rounds 3 --paths "blk scsi10 scsi16" --hz 100
same syscalls-s29/blkio "$S/blkio/syscalls-per-request.md" \
    "$LAB" table syscalls "$S/blkio" --rounds 3 --paths "blk untouched qsd" --client blkio --hz 100
# The restart experiment's goal table (goals.txt: the table, then the script's last two lines).
head -n -2 "$ROOT/docs/results/restart-35/goals.txt" >"$WORK/goals.txt"
same restart-35/goals.txt "$WORK/goals.txt" \
    "$LAB" table restart-goals "$ROOT/docs/results/restart-35" 50
head -n -2 "$ROOT/docs/results/scale128/restart4/goals.txt" >"$WORK/goals128.txt"
same scale128/restart4/goals.txt "$WORK/goals128.txt" \
    "$LAB" table restart-goals "$ROOT/docs/results/scale128/restart4" 50
# experiments/cachegrind-ab.sh's table (two builds under valgrind, per request).
same scale128/cachegrind-scsi/table.md "$ROOT/docs/results/scale128/cachegrind-scsi/table.md" \
    "$LAB" table cachegrind "$ROOT/docs/results/scale128/cachegrind-scsi" --path scsi
# The cost of scale (scale-cost.md, from the drill's COST-RESULT lines).
same scale-cost/scale-cost.md "$ROOT/docs/results/scale-cost/scale-cost.md" \
    "$LAB" table scale-cost "$ROOT/docs/results/scale-cost"
# The reconnect experiment's table (reconnects.md, from its logs' RECONNECT-RESULT lines).
same restart-35/reconnects.md "$ROOT/docs/results/restart-35/reconnects.md" \
    "$LAB" table reconnects "$ROOT/docs/results/restart-35" 7.2 10
same scale128/reconnect-rt128/reconnects.md "$ROOT/docs/results/scale128/reconnect-rt128/reconnects.md" \
    "$LAB" table reconnects "$ROOT/docs/results/scale128/reconnect-rt128" 7.2 10
# The bisection experiment's runs.tsv: each run's line from its bisect.json. What the bisector
# was not given comes from the table (position, seed, wall) and the candidates (the secret is the
# one commit whose subject starts with "Revert", as exp-bisect.sh finds it with git log --grep).
# bisect-helper: the same with BAD=lockhelper (the bad commit brings the lock back in a helper).
for bis in bisect bisect-helper; do
    BIS=$ROOT/docs/results/$bis
    header=(--header)
    # Columns 1-3 and 12 (name, seed, position, total wall) through awk: a tab is IFS
    # whitespace to `read`, so the empty columns of a stopped run would shift the others.
    while IFS=$'\t' read -r name seed position wall; do
        secret=$(grep -B1 '"subject": "Revert' "$BIS/$name/bisect.json" \
            | sed -n 's/.*"id": "\([0-9a-f]*\)".*/\1/p' | head -n 1)
        "$LAB" table bisect-run "${header[@]}" "$BIS/$name/bisect.json" "$secret" \
            "$((position - 1))" "$name" "$seed" "$wall" >>"$WORK/$bis.tsv" 2>&1 || true
        header=()
    done < <(tail -n +2 "$BIS/runs.tsv" | awk -F'\t' -v OFS='\t' '{ print $1, $2, $3, $12 }')
    same "$bis/runs.tsv" "$BIS/runs.tsv" cat "$WORK/$bis.tsv"
done
# The storm check on committed runs: a clean unfrozen storm and the self-test the detector caught
# (the line is what the Python the check replaced printed for them).
V=$ROOT/docs/results/seed000-versions
mkdir -p "$WORK/storm/s" "$WORK/detect/d"
cp "$V/unfrozen/000-rt+storm-r0/results.json" "$WORK/storm/s/"
cp "$V/unfrozen-selftest/000-rt+storm-r0/results.json" "$WORK/detect/d/"
echo "unfrozen storm: 819841 cycles, 167525 I/Os, no lost run; self-test caught after 45917 cycles" \
    >"$WORK/storm.txt"
same "check storm" "$WORK/storm.txt" "$BIN" check storm "$WORK/storm" "$WORK/detect"
if "$BIN" check storm "$WORK/detect" "$WORK/storm" >/dev/null 2>&1; then
    echo "FAIL check storm: passed with the storm and the self-test swapped" >&2
    bad=1
else
    echo "ok   check storm (swapped: fails)"
fi
exit $bad
