#!/usr/bin/env bash
# experiments/exp-bisect.sh [RUNS]: the end-to-end bisection experiment (docs/results/bisect/README.md).
#
# Makes a real git history from Debian's linux-source-6.12: the Debian source (commit "base"),
# seed 000 applied on it (tag "good": no queue_lock wait), then per run a branch of 31 small
# commits (comment lines appended to block/ and lib/ files that the rt kernel compiles), one of
# which is `git revert good` at a random position. The position is written to a secret file
# that the bisector is not given. Then `guest-tests bisect --good good --bad <branch>` on the
# seed000-lockwait suite, and the answer is checked against the secret.
#
# BAD=lockhelper (issue 55) makes the hidden bad commit bring the lock back inside a helper
# instead: `git revert --no-commit good` plus images/patches/6.12/lockhelper.patch in one commit
# (the queue_lock re-check in a noinline blk_mq_hw_queue_need_run_locked(); no wait is in
# blk_mq_run_hw_queue itself, so a bisector deciding by call site reads 0 at both ends).
#
# All runs use one tree (one build directory: incremental builds with ccache). Heavy commands
# run under the shared CPU lock ($VB_CPU_LOCK, default /tmp/vb-cpu.lock), one at a time.
# Env: VB_CACHE, EXP_DIR (default $VB_CACHE/exp-bisect), EXP_SEED (positions; default: time),
# BAD (revert | lockhelper; default revert), DOCS (default docs/results/bisect).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
export VB_CACHE=${VB_CACHE:-$ROOT/.cache}
EXP=${EXP_DIR:-$VB_CACHE/exp-bisect}
RUNS=${1:-3}
LOCK=${VB_CPU_LOCK:-/tmp/vb-cpu.lock}
DOCS=${DOCS:-$ROOT/docs/results/bisect}
BAD=${BAD:-revert}
case "$BAD" in
revert | lockhelper) ;;
*)
    echo "exp-bisect.sh: BAD must be revert or lockhelper, not '$BAD'" >&2
    exit 2
    ;;
esac
SEED=${EXP_SEED:-$(date +%s)}
TREE=$EXP/linux
GT=$ROOT/target/release/guest-tests
LAB=$ROOT/target/release/lab
mkdir -p "$EXP" "$DOCS"
export GIT_AUTHOR_NAME=vb GIT_AUTHOR_EMAIL=vb@localhost GIT_COMMITTER_NAME=vb \
    GIT_COMMITTER_EMAIL=vb@localhost GIT_AUTHOR_DATE='2026-01-01T00:00:00Z' \
    GIT_COMMITTER_DATE='2026-01-01T00:00:00Z'
g() { git -C "$TREE" "$@"; }

flock "$LOCK" cargo build -q --release -p guest-tests -p vhost-blk -p lab
[ -e "$TREE/.git" ] || flock "$LOCK" ci/kernel-git.sh "$TREE"
if ! g rev-parse -q --verify refs/tags/good >/dev/null; then
    g tag base
    patch -d "$TREE" -p1 --fuzz=0 -s < images/patches/6.12/seed000.patch
    g commit -q -am "block/blk-mq: replace queue_lock in blk_mq_run_hw_queue with smp_mb (seed 000)"
    g tag good
fi
# Files the rt kernel compiles; each commit appends one comment line to one of them.
FILES=(block/bio.c block/blk-core.c block/blk-flush.c block/blk-ioc.c block/blk-lib.c
    block/blk-map.c block/blk-merge.c block/blk-settings.c block/blk-stat.c block/blk-sysfs.c
    block/blk-timeout.c block/genhd.c block/ioctl.c block/elevator.c block/bdev.c
    block/blk-mq-tag.c block/blk-mq-sched.c block/blk-mq-sysfs.c block/blk-mq-cpumap.c
    block/badblocks.c block/fops.c block/ioprio.c block/disk-events.c block/bsg.c
    block/blk-rq-qos.c block/blk-ia-ranges.c block/early-lookup.c block/mq-deadline.c
    block/kyber-iosched.c block/blk-mq-virtio.c)
SUMMARY=$DOCS/runs.tsv
for k in $(seq 1 "$RUNS"); do
    name=run-$SEED-$k
    RANDOM=$((SEED + k))
    pos=$((RANDOM % 31))
    g checkout -q -B "exp-$name" good
    for i in $(seq 0 30); do
        if [ "$i" = "$pos" ] && [ "$BAD" = lockhelper ]; then
            g revert --no-commit good
            patch -d "$TREE" -p1 --fuzz=0 -s < images/patches/6.12/lockhelper.patch
            g commit -q -am "Revert seed 000; block/blk-mq: re-check the quiesce state in a helper ($name)"
        elif [ "$i" = "$pos" ]; then
            g revert --no-edit good >/dev/null
        else
            f=${FILES[$((i % ${#FILES[@]}))]}
            printf '/* bisect experiment %s: unrelated change %d */\n' "$name" "$i" >> "$TREE/$f"
            g commit -q -am "${f%.c}: comment line $i ($name)"
        fi
    done
    # The secret: kept outside the bisector's arguments, read only after it answered.
    secret=$(g log --format=%H --grep='^Revert' -1 "exp-$name")
    echo "$secret $pos" > "$EXP/secret-$name"
    g checkout -q --detach good
    out=$EXP/$name
    start=$(date +%s)
    set +e
    flock "$LOCK" "$GT" bisect --tree "$TREE" --good good --bad "exp-$name" \
        --suite seed000-lockwait --accel tcg --no-progress --seed "$k" --out "$out" \
        | tee "$EXP/$name.out"
    set -e
    wall=$(( $(date +%s) - start ))
    read -r secret pos < "$EXP/secret-$name"
    mkdir -p "$DOCS/$name"
    cp "$out"/bisect.json "$out"/bisect.log "$out"/bisect.md "$out"/journal.json "$DOCS/$name/" || true
    # One line per run (bisect::summary), with runs.tsv's header when the file is new.
    header=()
    [ -s "$SUMMARY" ] || header=(--header)
    "$LAB" table bisect-run "${header[@]}" "$out/bisect.json" "$secret" "$pos" "$name" "$SEED" \
        "$wall" >> "$SUMMARY"
    tail -1 "$SUMMARY"
done
