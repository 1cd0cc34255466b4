#!/usr/bin/env bash
# Coverage-guided fuzzing of vhost-blk's guest-facing parsers (cargo fuzz, libFuzzer): every
# target in vhost-blk/fuzz/fuzz_targets, from its committed seeds (vhost-blk/fuzz/corpus/T),
# with leak detection and a per-input timeout.
#
#   ci/fuzz.sh smoke [TARGET...]   60 s per target (SMOKE_SECONDS), two targets at a time: CI
#   ci/fuzz.sh long  [TARGET...]   each target until it has run RUNS inputs (10,000,000), two at
#                                  a time (JOBS), in processes of at most SLICE inputs (3,000,000)
#                                  that carry the corpus over; hours on a 2-core host
#   ci/fuzz.sh setup               only install what it needs (nightly toolchain, cargo-fuzz)
#
# Prints one line per target: executions, coverage (cov and ft of libFuzzer's last stats
# line), crashes, hangs (inputs over -timeout, TIMEOUT s), leaks (-detect_leaks=1), and exits 1
# if any target found a crash, a hang, a leak or an out-of-memory. Findings are kept under
# OUT (target/fuzz/<mode>; the table also in OUT/summary.txt): the input that failed (crash-*, timeout-*, leak-*, oom-*) and the
# target's log; a finding becomes a unit test and a fix. The working corpus grows under OUT,
# never in the committed seeds. Run it under the CPU lock on the shared host.
#
# Every process runs in a fresh pid namespace when `unshare -p` works (else a warning): the relay
# target starts two threads per connection, and once the kernel hands out a thread id again
# (pid_max, 32,768 on many hosts) LeakSanitizer reports the live relay threads' objects as leaked
# (docs/results/fuzz/README.md). A fresh namespace counts thread ids from 1 to its own pid_max
# (4,194,304 by default, about 5 million relay inputs): hence the slices.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
MODE=${1:-smoke}
shift || true
SMOKE_SECONDS=${SMOKE_SECONDS:-60}
RUNS=${RUNS:-10000000}
SLICE=${SLICE:-3000000}
JOBS=${JOBS:-2}
TIMEOUT=${TIMEOUT:-10}
OUT=${OUT:-$ROOT/target/fuzz/$MODE}
FUZZ=$ROOT/vhost-blk/fuzz

setup() {
    if ! rustup toolchain list | grep -q '^nightly'; then
        echo "fuzz: installing the nightly toolchain" >&2
        rustup toolchain install nightly --profile minimal
    fi
    if ! cargo fuzz --version >/dev/null 2>&1; then
        echo "fuzz: installing cargo-fuzz" >&2
        cargo install cargo-fuzz --locked
    fi
}

case $MODE in
setup) setup; exit 0 ;;
smoke | long) ;;
*) echo "usage: ci/fuzz.sh smoke|long|setup [TARGET...]" >&2; exit 2 ;;
esac
setup
TARGETS=("$@")
if [ ${#TARGETS[@]} = 0 ]; then
    for f in "$FUZZ"/fuzz_targets/*.rs; do TARGETS+=("$(basename "$f" .rs)"); done
fi

# Release code with debug assertions and overflow checks on (-a), ASan and libFuzzer's coverage.
echo "fuzz: building the targets (cargo +nightly fuzz build -a)" >&2
(cd "$ROOT/vhost-blk" && cargo +nightly fuzz build -a) >&2
BIN=$FUZZ/target/x86_64-unknown-linux-gnu/release
rm -rf "$OUT"
mkdir -p "$OUT"

# A fresh pid namespace per process, when this host allows one.
NS=(unshare --pid --fork --mount-proc)
if ! "${NS[@]}" true 2>/dev/null; then
    echo "fuzz: warning: no pid namespace (unshare -p failed); the relay target may report a" \
        "false leak once thread ids wrap" >&2
    NS=()
fi

# One process of target T with LIMIT, its log in LOG; false when it left a finding.
slice() { # T DIR LOG LIMIT...
    local t=$1 dir=$2 log=$3
    shift 3
    # The config target validates paths: run every target in a scratch directory.
    (cd "$dir" && "${NS[@]}" "$BIN/$t" "$@" -timeout="$TIMEOUT" -detect_leaks=1 \
        -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$dir/artifacts/" corpus \
        >"$log" 2>&1) || true
    [ -z "$(ls -A "$dir/artifacts")" ]
}

run_one() { # TARGET
    local t=$1 dir=$OUT/$1 done=0 n=1 k
    mkdir -p "$dir/corpus" "$dir/artifacts"
    cp "$FUZZ/corpus/$t"/* "$dir/corpus/" 2>/dev/null || true
    if [ "$MODE" = smoke ]; then
        slice "$t" "$dir" "$dir/log.1" -max_total_time="$SMOKE_SECONDS" || true
        return
    fi
    while [ "$done" -lt "$RUNS" ]; do
        k=$((RUNS - done < SLICE ? RUNS - done : SLICE))
        slice "$t" "$dir" "$dir/log.$n" -runs="$k" || return 0
        done=$((done + k))
        n=$((n + 1))
    done
}

# JOBS targets at a time.
pids=()
for t in "${TARGETS[@]}"; do
    [ -x "$BIN/$t" ] || { echo "fuzz: no binary for target $t" >&2; exit 2; }
    run_one "$t" &
    pids+=($!)
    if [ ${#pids[@]} -ge "$JOBS" ]; then
        wait "${pids[0]}"
        pids=("${pids[@]:1}")
    fi
done
for p in "${pids[@]}"; do wait "$p"; done

python3 - "$OUT" "${TARGETS[@]}" <<'PY' | tee "$OUT/summary.txt"
import os, re, sys
out, targets = sys.argv[1], sys.argv[2:]
bad = 0
print(f"{'target':<14} {'execs':>12} {'cov':>6} {'ft':>7} {'corpus':>7} {'crashes':>8} {'hangs':>6} {'leaks':>6} {'ooms':>5}  seconds")
for t in targets:
    d = os.path.join(out, t)
    # One log per process (log.1, log.2, ...): inputs and seconds add up, coverage is the last's.
    logs = sorted((f for f in os.listdir(d) if re.fullmatch(r"log\.\d+", f)), key=lambda f: int(f[4:]))
    texts = [open(os.path.join(d, f), errors="replace").read() for f in logs]
    log = "".join(texts)
    stats = re.findall(r"^#(\d+)\s+\S+\s+cov: (\d+) ft: (\d+) corp: (\d+)", log, re.M)
    counts = [re.search(r"stat::number_of_executed_units: (\d+)", x) for x in texts]
    execs = all(counts) and texts and sum(int(c.group(1)) for c in counts)
    secs = [re.search(r"Done \d+ runs in (\d+) second", x) for x in texts]
    secs = sum(int(m.group(1)) for m in secs) if texts and all(secs) else None
    arts = os.listdir(os.path.join(d, "artifacts"))
    count = lambda p: sum(a.startswith(p) for a in arts)
    crashes, hangs, leaks, ooms = count("crash-"), count("timeout-"), count("leak-"), count("oom-")
    if "ERROR: AddressSanitizer" in log or "panicked at" in log:
        crashes = max(crashes, 1)
    cov, ft, corp = stats[-1][1:] if stats else ("-", "-", "-")
    n = execs if execs else (stats[-1][0] if stats else "0")
    if not stats or not execs:
        bad = 1
    bad |= crashes + hangs + leaks + ooms > 0
    print(f"{t:<14} {int(n):>12,} {cov:>6} {ft:>7} {corp:>7} {crashes:>8} {hangs:>6} {leaks:>6} {ooms:>5}  {secs if secs is not None else '-'}  ({len(texts)} process(es))")
sys.exit(bad)
PY
