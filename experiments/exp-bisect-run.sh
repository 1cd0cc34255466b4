#!/usr/bin/env bash
# experiments/exp-bisect-run.sh NAME: plain `git bisect run guest-tests judge ...` over the history of one
# run of experiments/exp-bisect.sh (NAME, e.g. run-20261201-1), with that run's reference boots as
# `judge --good/--bad`. Works in a `git clone --shared` of the experiment's tree (so the
# experiment's own checkout is not touched), checks git's first bad commit against the secret
# and keeps `git bisect log` and the per-step judge lines in docs/results/bisect/NAME/.
# Heavy: one build + 2-6 boots per step; runs under the shared CPU lock.
# Env: VB_CACHE, EXP_DIR (as for experiments/exp-bisect.sh), VB_CPU_LOCK.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
export VB_CACHE=${VB_CACHE:-$ROOT/.cache}
EXP=${EXP_DIR:-$VB_CACHE/exp-bisect}
NAME=${1:?usage: experiments/exp-bisect-run.sh NAME (a run of experiments/exp-bisect.sh, e.g. run-20261201-1)}
LOCK=${VB_CPU_LOCK:-/tmp/vb-cpu.lock}
TREE=$EXP/linux
OUT=$EXP/$NAME
CLONE=$EXP/judge-$NAME
GT=$ROOT/target/release/guest-tests
DOCS=$ROOT/docs/results/bisect/$NAME
if [ ! -d "$OUT/refs/good" ] || [ ! -d "$OUT/refs/bad" ] || [ ! -f "$EXP/secret-$NAME" ]; then
    echo "$OUT has no refs/good, refs/bad or secret: run experiments/exp-bisect.sh first" >&2
    exit 2
fi
bad=$(git -C "$TREE" rev-parse "exp-$NAME")
good=$(git -C "$TREE" rev-parse good)
rm -rf "$CLONE"
git clone -q --shared --no-checkout "$TREE" "$CLONE"
git -C "$CLONE" checkout -q --detach "$bad"
mkdir -p "$DOCS"
start=$(date +%s)
set +e
(
    cd "$CLONE"
    git bisect start "$bad" "$good" >/dev/null
    flock "$LOCK" git bisect run "$GT" judge --good "$OUT/refs/good" --bad "$OUT/refs/bad" \
        --suite seed000-lockwait --accel tcg --no-progress
) 2>&1 | tee "$DOCS/git-bisect-run.out"
set -e
wall=$(( $(date +%s) - start ))
git -C "$CLONE" bisect log > "$DOCS/git-bisect-run.log"
git -C "$CLONE" bisect reset >/dev/null
read -r secret pos < "$EXP/secret-$NAME"
found=$(sed -n 's/^# first bad commit: \[\([0-9a-f]*\)\].*/\1/p' "$DOCS/git-bisect-run.log")
steps=$(grep -c '^git bisect \(good\|bad\|skip\)' "$DOCS/git-bisect-run.log" || true)
verdict=WRONG
[ "$found" = "$secret" ] && verdict=FOUND
echo "git bisect run: $verdict (first bad ${found:-none}, secret $secret at position $pos)," \
    "$steps log lines, ${wall} s" | tee -a "$DOCS/git-bisect-run.out"
[ "$verdict" = FOUND ]
