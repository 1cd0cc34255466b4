#!/usr/bin/env bash
# Copies what docs/results/ keeps of a matrix directory: every run's results.json and the
# matrix index, as compact JSON (the same values without the indentation, a quarter of the
# bytes), then rebuilds report.md from those copies so that every number in it comes from the
# committed files. No console logs, initrds or raw streams; the plots the report draws are not
# committed either (.gitignore: guest-tests report draws them again). Kept failed attempts
# (`RUN.attemptK/`, a boot the executor retried) are copied too: every boot counts in the
# judgement (docs/verdict.md).
# Usage: experiments/collect-results.sh MATRIX_DIR DEST_DIR [report title]
#   env: GT, the guest-tests binary (default: target/release/guest-tests; build it first: an
#        older binary may not read newer results)
set -euo pipefail
src=$1 dest=$2 title=${3:-}
root=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$dest"
# One Python for all files (not one per file): each path relative to $src, copied compact.
(cd "$src" && find . -name results.json -o -name index.json) |
    python3 -c 'import json, os, sys
src, dest = sys.argv[1:]
for f in sys.stdin.read().splitlines():
    os.makedirs(os.path.join(dest, os.path.dirname(f)), exist_ok=True)
    v = json.load(open(os.path.join(src, f)))
    open(os.path.join(dest, f), "w").write(json.dumps(v, separators=(",", ":"), ensure_ascii=False) + "\n")' \
        "$src" "$dest"
gt=${GT:-$root/target/release/guest-tests}
[ -x "$gt" ] || gt="cargo run -q --release -p guest-tests --"
if [ -n "$title" ]; then $gt report "$dest" --title "$title"; else $gt report "$dest"; fi
rm -f "$dest/report.html"   # self-contained copy of report.md + plots; rebuilt on demand
echo "kept $(find "$dest" -name results.json | wc -l) runs in $dest"
