#!/usr/bin/env bash
# Where does the seed-000 primary metric's spread come from: from one boot to the next, or from
# one stretch of I/O to the next inside a boot? Runs the seed-000 randread step (10 s) three
# times in each boot of `rt` (a suite generated from seed000-lockwait into a temporary
# directory), REPEAT boots, then prints the variance components of the queue_lock wait and
# contention count per 1,000 I/Os (docs/results/verdict, "within-boot").
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
python3 - "$OUT" <<'PY'
import glob, json, math, statistics as st, sys
rows = []
for f in sorted(glob.glob(sys.argv[1] + "/*/results.json")):
    m = json.load(open(f))["metrics"]
    rows.append(m)
for name in ("qlock_wait_ms_per_kio", "qlock_wait_count_per_kio"):
    per = [[m[f"rr-{x}.{name}"] for x in "abc"] for m in rows]
    flat = [v for p in per for v in p]
    gm = st.mean(flat)
    within = st.mean(st.variance(p) for p in per)
    means = [st.mean(p) for p in per]
    between = max(st.variance(means) - within / 3, 0.0)
    print(f"{name}: boots {len(per)}, steps {len(flat)}, mean {gm:.2f}; "
          f"CV of one 10 s step {st.stdev(flat) / gm:.0%}; "
          f"within-boot CV {math.sqrt(within) / gm:.0%}; between-boot CV {math.sqrt(between) / gm:.0%}; "
          f"CV of a boot's 3-step mean {st.stdev(means) / gm:.0%}")
    for b, p in enumerate(per):
        print(f"  boot {b}: " + "  ".join(f"{v:.2f}" for v in p))
PY
