#!/usr/bin/env bash
# The sandbox under booted guests (vhost-blk issue 57, docs/sandbox.md): for each of the four
# reconnect-idle suites (blk and SCSI, 8 and 128 queues), `lab drill sandbox` starts our
# backend with its defaults (sandbox on), boots Debian's RT kernel under real QEMU against it
# until the guest reports its disk, and prints every backend thread's Seccomp, NoNewPrivs and
# Seccomp_filters while the guest is connected; it exits 1 if a thread lacks Seccomp 2 or
# NoNewPrivs 1. Output: OUT/status.txt (the lines) and OUT/status.jsonl (the records).
# ~1-2 min of TCG boots. Environment: OUT (docs/results/sandbox), KERNEL (debian-rt).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-docs/results/sandbox}
mkdir -p "$out"
cargo build -q -p vhost-blk -p lab
: >"$out/status.txt"
: >"$out/status.jsonl"
failed=0
for suite in reconnect-idle reconnect-idle-scsi reconnect-idle-128 reconnect-idle-scsi-128; do
    status=0
    target/debug/lab drill sandbox --suite "$suite" --dir "$PWD/target/sandbox-status/$suite" \
        --kernel "${KERNEL:-debian-rt}" >"$out/$suite.out" || status=$?
    grep -v '^SANDBOX-RESULT ' "$out/$suite.out" >>"$out/status.txt" || true
    grep '^SANDBOX-RESULT ' "$out/$suite.out" | sed 's/^SANDBOX-RESULT //' >>"$out/status.jsonl" || true
    rm -f "$out/$suite.out"
    echo "$suite: exit $status"
    [ "$status" = 0 ] || failed=$((failed + 1))
done
echo "threads: $(wc -l <"$out/status.txt"), of which not Seccomp 2 + NoNewPrivs 1:" \
    "$(grep -vc 'Seccomp: 2  NoNewPrivs: 1' "$out/status.txt" || true)"
echo "sandbox-status: $failed failed"
[ "$failed" = 0 ]
