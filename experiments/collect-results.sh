#!/usr/bin/env bash
# Copies what docs/results/ keeps of a matrix directory: every run's results.json and the
# matrix index, as compact JSON (the same values without the indentation, a quarter of the
# bytes), then rebuilds report.md from those copies so that every number in it comes from the
# committed files. No console logs, initrds or raw streams; the plots the report draws are not
# committed either (.gitignore: guest-tests report draws them again).
# Usage: experiments/collect-results.sh MATRIX_DIR DEST_DIR [report title]
set -euo pipefail
src=$1 dest=$2 title=${3:-}
root=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$dest"
(cd "$src" && find . -name results.json -o -name index.json | grep -v '\.attempt[0-9]*/' ) |
while read -r f; do
    mkdir -p "$dest/$(dirname "$f")"
    python3 -c 'import json, sys; v = json.load(open(sys.argv[1]))
open(sys.argv[2], "w").write(json.dumps(v, separators=(",", ":"), ensure_ascii=False) + "\n")' \
        "$src/$f" "$dest/$f"
done
gt=$root/target/release/guest-tests
[ -x "$gt" ] || gt="cargo run -q --release -p guest-tests --"
if [ -n "$title" ]; then $gt report "$dest" --title "$title"; else $gt report "$dest"; fi
rm -f "$dest/report.html"   # self-contained copy of report.md + plots; rebuilt on demand
echo "kept $(find "$dest" -name results.json | wc -l) runs in $dest"
