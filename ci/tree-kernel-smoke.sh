#!/usr/bin/env bash
# ci/tree-kernel-smoke.sh: an ad-hoc kernel from a git tree, built and booted end to end.
# Makes a git repository of Debian's linux-source-6.12 (ci/kernel-git.sh), then
#   guest-tests run --kernels tree=tree:DIR@HEAD,tree+seed000=tree:DIR@HEAD+patch:seed000.patch
# on the smoke suite (one boot each), and checks (`guest-tests check tree-kernels`) that both
# runs passed and that their provenance names the tree's commit and the patch's sha256; then the
# unfrozen quiesce storm on the tree with images/patches/6.12/storm-hook.patch (below; `guest-tests
# check storm`). One cold kernel build (~11-16 min on 2 cores with an empty ccache), two
# incremental ones (seconds); bounded by `timeout`.
set -euo pipefail
cd "$(dirname "$0")/.."
export VB_CACHE=${VB_CACHE:-$PWD/.cache}
GT=${GT:-target/debug/guest-tests}
WORK=$VB_CACHE/ci-tree
TREE=$WORK/linux
[ -e "$TREE/.git" ] || ci/kernel-git.sh "$TREE"
HEAD=$(git -C "$TREE" rev-parse HEAD)
OUT=$(mktemp -d "${TMPDIR:-/tmp}/vb-tree-smoke.XXXXXX")
PATCH=$PWD/images/patches/6.12/seed000.patch
timeout 50m "$GT" run --suite smoke --repeat 1 --accel auto --no-progress --out "$OUT/runs" \
    --kernels "tree=tree:$TREE@HEAD,tree+seed000=tree:$TREE@HEAD+patch:$PATCH"
PATCH_SHA=$(sha256sum "$PATCH" | cut -d' ' -f1)
# Both runs ok, built from the tree's HEAD (clean), the patch in tree+seed000 only, two bzImages.
"$GT" check tree-kernels "$OUT/runs" --head "$HEAD" --patch "$(basename "$PATCH")" \
    --patch-sha256 "$PATCH_SHA" --patched-variant tree+seed000
# The same tree with the TEST-ONLY unfrozen quiesce-storm hook (one more incremental build): a
# 30 s storm must run >= 10,000 cycles under I/O with no lost run and no stuck I/O, and the
# hook's detector must catch its self-test (a stopped hctx) and fail that run with evidence.
STORM=$PWD/images/patches/6.12/storm-hook.patch
SK="tree+storm=tree:$TREE@HEAD+patch:$STORM"
timeout 20m "$GT" run --suite quiesce-storm-unfrozen --repeat 1 --accel auto --no-progress \
    --out "$OUT/storm" --kernels "$SK"
timeout 10m "$GT" run --suite quiesce-storm-unfrozen-detect --repeat 1 --retries 0 --accel auto \
    --no-progress --out "$OUT/detect" --kernels "$SK" || true
"$GT" check storm "$OUT/storm" "$OUT/detect" --min-cycles 10000
rm -rf "$OUT"
