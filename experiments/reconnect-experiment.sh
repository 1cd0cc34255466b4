#!/usr/bin/env bash
# Frontend reconnects against one running backend (issue 35's leak goal): for each QEMU in
# QEMUS, the booted test guest-tests/tests/booted_reconnect.rs with VB_RECONNECTS=N (20):
# QEMU boots Debian's RT kernel against our backend (blk, then SCSI), is SIGKILLed once the
# guest reported its disk, and is started again, N times; the backend's open fds and threads
# after each connection are printed, and those after the last must equal those after the first.
# Output: OUT/<qemu>.log (each test's RECONNECT-RESULT line), then a summary. ~4-5 s of TCG
# boot per connection; run it under the shared CPU lock. Environment: QEMUS ("7.2 10"),
# N (20), OUT (docs/results/restart-35).
set -euo pipefail
cd "$(dirname "$0")/.."
qemus=${QEMUS:-7.2 10}
n=${N:-20}
out=${OUT:-docs/results/restart-35}
mkdir -p "$out"
case "$qemus" in *10*) ci/fetch-qemu10.sh >/dev/null ;; esac
cargo build -p vhost-blk
failed=0
for q in $qemus; do
    status=0
    VB_QEMU=$q VB_RECONNECTS=$n cargo test -q -p guest-tests --test booted_reconnect -- \
        --nocapture --test-threads 1 >"$out/reconnect-qemu$q.log" 2>&1 || status=$?
    echo "QEMU $q: exit $status"
    [ "$status" = 0 ] || failed=$((failed + 1))
done
# shellcheck disable=SC2086 # qemus is a list: split on purpose
python3 - "$out" $qemus <<'PY'
import json, re, sys
out = sys.argv[1]
print("| QEMU | device | connections | (fds, threads) before | after the first | after the last | equal |")
print("|---|---|---|---|---|---|---|")
for q in sys.argv[2:]:
    text = open(f"{out}/reconnect-qemu{q}.log", errors="replace").read()
    for m in re.finditer(r"^RECONNECT-RESULT (\{.*\})$", text, re.M):
        r = json.loads(m.group(1))
        a = r["after"]
        print(f"| {r['qemu']} | {r['device']} | {r['connections']} | {tuple(r['before'])} "
              f"| {tuple(a[0])} | {tuple(a[-1])} | {'yes' if a[0] == a[-1] else 'NO'} |")
PY
echo "reconnect-experiment: $failed failed"
[ "$failed" = 0 ]
