#!/usr/bin/env bash
# The table of docs/results/ordering/README.md: herd7's answer for every seed-000 version of
# both kernel lines, per path, under each line's own memory model (LKMM of linux-source-6.12
# and -7.3), with the unfrozen quiesce storm's result of the same kernel beside it (its
# results directories: seed000-versions/unfrozen for 6.12, kernel-lines/storm-v8 for 7.3).
# Writes docs/results/ordering/table.md (or OUT); ci/test.sh checks the committed one is what
# this prints. Light: a few seconds of herd7 (the first run fetches herd7 and the 7.3 source
# into the cache). Environment: VB_CACHE, GT (the guest-tests binary; default: cargo run),
# OUT.
set -euo pipefail
cd "$(dirname "$0")/.."
ci/fetch-herd7.sh >/dev/null
out=${OUT:-docs/results/ordering/table.md}
gt() { if [ -n "${GT:-}" ]; then "$GT" "$@"; else cargo run -q -p guest-tests -- "$@"; fi; }
gt ordering --markdown \
    --storm docs/results/seed000-versions/unfrozen --storm docs/results/kernel-lines/storm-v8 \
    rt rt+seed000 rt+seed000-paired rt+seed000-v7 rt+nobarrier \
    rt73 rt73+seed000 rt73+seed000-paired rt73+seed000-v8 rt73+nobarrier >"$out.tmp"
mv "$out.tmp" "$out"
echo "ordering-table: $out"
