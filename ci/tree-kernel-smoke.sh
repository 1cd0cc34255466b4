#!/usr/bin/env bash
# ci/tree-kernel-smoke.sh: an ad-hoc kernel from a git tree, built and booted end to end.
# Makes a git repository of Debian's linux-source-6.12 (ci/kernel-git.sh), then
#   guest-tests run --kernels tree=tree:DIR@HEAD,tree+seed000=tree:DIR@HEAD+patch:seed000.patch
# on the smoke suite (one boot each), and checks that both runs passed and that their
# provenance names the tree's commit and the patch's sha256. One cold kernel build (~11-16 min
# on 2 cores with an empty ccache), one incremental one (seconds); bounded by `timeout`.
set -euo pipefail
cd "$(dirname "$0")/.."
export VB_CACHE=${VB_CACHE:-$PWD/.cache}
GT=${GT:-target/debug/guest-tests}
WORK=$VB_CACHE/ci-tree
TREE=$WORK/linux
[ -e "$TREE/.git" ] || ci/kernel-git.sh "$TREE"
HEAD=$(git -C "$TREE" rev-parse HEAD)
OUT=$(mktemp -d "${TMPDIR:-/tmp}/vb-tree-smoke.XXXXXX")
PATCH=$PWD/images/patches/seed000.patch
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
rm -rf "$OUT"
