#!/usr/bin/env bash
# Where does the seed-000 primary metric's spread come from: from one boot to the next, or from
# one stretch of I/O to the next inside a boot? Runs the seed-000 randread step (10 s) three
# times in each boot of `rt` (a suite generated from seed000-lockwait into a temporary
# directory), REPEAT boots, then prints the variance components of the queue_lock wait and
# contention count per 1,000 I/Os (`guest-tests compare --within-boot`; docs/results/verdict,
# "within-boot").
#   flock /tmp/vb-cpu.lock experiments/exp-within-boot.sh
# Environment: OUT (default results/within-boot-<UTC time>), REPEAT (4).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-results/within-boot-$(date -u +%Y%m%dT%H%M%SZ)}
REPEAT=${REPEAT:-4}
GT=target/release/guest-tests
[ -x "$GT" ] || cargo build --release -q -p guest-tests -p vhost-blk
suites=$(mktemp -d)
trap 'rm -rf "$suites"' EXIT
for x in a b c; do
    sed 's/^runtime=.*/runtime=10/' guest-tests/suites/rt-lock-randread.fio >"$suites/rr-$x.fio"
done
sed -e 's/^steps = .*/steps = ["fio:rr-a.fio", "fio:rr-b.fio", "fio:rr-c.fio"]/' \
    -e 's/^primary_metric = .*/primary_metric = "rr-a.qlock_wait_ms_per_kio"/' \
    -e 's/^secondary_metric = .*/secondary_metric = "rr-a.lockwait_ms_per_kio"/' \
    -e 's/^description = .*/description = "within-boot spread: the seed-000 randread step three times in one boot"/' \
    guest-tests/suites/seed000-lockwait.toml >"$suites/within.toml"
"$GT" run --kernels rt --suite within --suites-dir "$suites" --repeat "$REPEAT" --out "$OUT" \
    --no-progress | tail -n 1
# variance components per metric (one-way random effects, boots as groups; compare::components)
"$GT" compare "$OUT" --within-boot rr-a,rr-b,rr-c \
    --metric qlock_wait_ms_per_kio --metric qlock_wait_count_per_kio
