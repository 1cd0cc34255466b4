#!/usr/bin/env bash
# Tests derived from a patch's own source (gt-ordering/src/derive.rs, docs/verdict.md rule 4):
# patches a reviewer would hold back, of the series' own barrier kinds, made here as a developer
# would (v7's or v8's tree edited, `diff -Nup` against the line's source), none with a litmus
# file beside it, each run through `guest-tests ordering`. Prints one line per patch: what it
# changes, whether tests were derived, and herd7's answers. A patch whose code is not the shape
# of a marked test must come out "not checked", never Never.
#
# Environment: OUT (results/derived-ordering-<UTC time>: the patches and each kernel's output),
# GT (target/release/guest-tests), VB_CACHE (the image cache: the Debian sources and herd7).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-results/derived-ordering-$(date -u +%Y%m%dT%H%M%SZ)}
GT=${GT:-target/release/guest-tests}
[ -x "$GT" ] || cargo build --release -q -p guest-tests
[ ! -x ci/fetch-herd7.sh ] || ci/fetch-herd7.sh >/dev/null
cache=${VB_CACHE:-.cache}
mkdir -p "$OUT/patches"
OUT=$(cd "$OUT" && pwd)

# One derivation per line first: it takes the functions' files out of the Debian source.
"$GT" ordering rt+wrongbarrier >/dev/null
"$GT" ordering "v8=rt73+patch:$PWD/images/patches/7.3/seed000-v8.patch" >/dev/null

# LINE_DIR FIX_PATCH NAME FUNCTION OLD NEW: the fix's tree with OLD replaced by NEW (first match
# inside FUNCTION), as a diff against the source.
make_patch() {
    local src=$1 fix=$2 name=$3 func=$4 old=$5 new=$6 work
    work=$(mktemp -d)
    mkdir "$work/a"
    (cd "$src" && find . -type f ! -name '.*' -exec cp --parents {} "$work/a" \;)
    cp -r "$work/a" "$work/b"
    (cd "$work/b" && patch -p1 -s <"$fix")
    FUNC=$func OLD=$old NEW=$new python3 - "$work/b/block/blk-mq.c" <<'EOF'
import os, sys
p = sys.argv[1]
s = open(p).read()
i = s.index(os.environ["FUNC"] + "(struct")
j = s.index(os.environ["OLD"], i)
s = s[:j] + os.environ["NEW"] + s[j + len(os.environ["OLD"]):]
open(p, "w").write(s)
EOF
    (cd "$work" && diff -Nup -r a b >"$OUT/patches/$name.patch") || true
    rm -rf "$work"
}

src612=$cache/lkmm/linux-source-6.12_6.12.117-1_deb12u1.src
src73=$cache/lkmm/linux-source-7.3_7.3.4-1_bpo13+1.src
v7=$PWD/images/patches/6.12/seed000-v7.patch
v8=$PWD/images/patches/7.3/seed000-v8.patch
run=blk_mq_run_hw_queue
unq=blk_mq_unquiesce_queue
# name line change
cases=(
    "v7-as-is|6.12|v7's own code (the re-check's smp_mb() kept)|$run|smp_mb();|smp_mb();"
    "v7-no-mb|6.12|the re-check's smp_mb() removed|$run|smp_mb();|"
    "v7-wmb|6.12|the re-check's smp_mb() made smp_wmb()|$run|smp_mb();|smp_wmb();"
    "v7-rmb|6.12|the re-check's smp_mb() made smp_rmb() (v6)|$run|smp_mb();|smp_rmb();"
    "v7-before-atomic|6.12|the re-check's smp_mb() made smp_mb__before_atomic()|$run|smp_mb();|smp_mb__before_atomic();"
    "v7-no-after-atomic|6.12|unquiesce's smp_mb__after_atomic() removed|$unq|smp_mb__after_atomic();|"
    "v7-udelay|6.12|a udelay(1) after the re-check's smp_mb()|$run|smp_mb();|smp_mb(); udelay(1);"
    "v8-as-is|7.3|v8's own code|$run|smp_mb();|smp_mb();"
    "v8-rmb|7.3|the re-check's smp_mb() made smp_rmb()|$run|smp_mb();|smp_rmb();"
)
{
printf '| patch | line | what it changes | tests | answers |\n|---|---|---|---|---|\n'
for c in "${cases[@]}"; do
    IFS='|' read -r name line what func old new <<<"$c"
    if [ "$line" = 6.12 ]; then
        make_patch "$src612" "$v7" "$name" "$func" "$old" "$new"
        base=rt
    else
        make_patch "$src73" "$v8" "$name" "$func" "$old" "$new"
        base=rt73
    fi
    "$GT" ordering "$name=$base+patch:$OUT/patches/$name.patch" >"$OUT/$name.txt"
    answers=$(awk '$4 == "Never" || $4 == "Sometimes" { print $4 }' "$OUT/$name.txt" |
        sort | uniq -c | awk '{ printf "%s%s x%s", sep, $2, $1; sep = ", " }')
    if grep -q '^  derived: ' "$OUT/$name.txt"; then
        tests=derived
    else
        tests="not derived: $(sed -n 's/.*no test derived: \(.*\)) (a part.*/\1/p' "$OUT/$name.txt")"
        answers="$answers (the line's base tests; ordering not checked)"
    fi
    printf '| %s | %s | %s | %s | %s |\n' "$name" "$line" "$what" "$tests" "$answers"
done
} | tee "$OUT/table.md"
