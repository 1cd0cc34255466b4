#!/usr/bin/env bash
# ci/tree-kernel-smoke.sh: an ad-hoc kernel from a git tree, built and booted end to end.
# Makes a git repository of Debian's linux-source-6.12 (ci/kernel-git.sh), then
#   guest-tests run --kernels tree=tree:DIR@HEAD,tree+seed000=tree:DIR@HEAD+patch:seed000.patch
# on the smoke suite (one boot each), and checks that both runs passed and that their
# provenance names the tree's commit and the patch's sha256; then the unfrozen quiesce storm on
# the tree with images/patches/6.12/storm-hook.patch (below). One cold kernel build (~11-16 min on 2
# cores with an empty ccache), two incremental ones (seconds); bounded by `timeout`.
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
python3 - "$OUT/runs" "$HEAD" "$PATCH_SHA" <<'PY'
import glob, json, sys
out, head, patch_sha = sys.argv[1:4]
runs = [json.load(open(p)) for p in sorted(glob.glob(out + "/*/results.json"))]
assert len(runs) == 2, f"{len(runs)} runs"
for r in runs:
    k = r["provenance"]["kernel"]
    assert r["status"]["state"] == "ok", (k["variant"], r["status"])
    assert any(l.startswith(f"source=git head={head} dirty=false") for l in k["inputs"]), k
    has_patch = any(l.startswith("patch=seed000.patch sha256=" + patch_sha) for l in k["inputs"])
    assert has_patch == (k["variant"] == "tree+seed000"), k
    print(k["variant"], k["release"], k["bzimage_sha256"][:12], "ok")
assert runs[0]["provenance"]["kernel"]["bzimage_sha256"] != runs[1]["provenance"]["kernel"]["bzimage_sha256"]
PY
# The same tree with the TEST-ONLY unfrozen quiesce-storm hook (one more incremental build): a
# 30 s storm must run >= 10,000 cycles under I/O with no lost run and no stuck I/O, and the
# hook's detector must catch its self-test (a stopped hctx) and fail that run with evidence.
STORM=$PWD/images/patches/6.12/storm-hook.patch
SK="tree+storm=tree:$TREE@HEAD+patch:$STORM"
timeout 20m "$GT" run --suite quiesce-storm-unfrozen --repeat 1 --accel auto --no-progress \
    --out "$OUT/storm" --kernels "$SK"
timeout 10m "$GT" run --suite quiesce-storm-unfrozen-detect --repeat 1 --retries 0 --accel auto \
    --no-progress --out "$OUT/detect" --kernels "$SK" || true
python3 - "$OUT" <<'PY'
import glob, json, sys
out = sys.argv[1]
(storm,) = [json.load(open(p)) for p in glob.glob(out + "/storm/*/results.json")]
m = storm["metrics"]
assert storm["status"]["state"] == "ok", storm["status"]
assert m["quiesce-storm.storm_cycles"] >= 10000, m["quiesce-storm.storm_cycles"]
assert m["quiesce-storm.storm_stranded"] == 0 and m["quiesce-storm.storm_stuck"] == 0, m
(det,) = [json.load(open(p)) for p in glob.glob(out + "/detect/*/results.json")]
d = det["metrics"]
assert det["status"]["state"] == "failed", det["status"]
assert d["quiesce-storm.storm_stranded"] == 1 and d["quiesce-storm.storm_stuck"] == 1, d
assert "not completed within" in det["status"]["reason"], det["status"]
print("unfrozen storm: %d cycles, %d I/Os, no lost run; self-test caught after %d cycles"
      % (m["quiesce-storm.storm_cycles"], m["quiesce-storm.storm_ios"], d["quiesce-storm.storm_cycles"]))
PY
rm -rf "$OUT"
