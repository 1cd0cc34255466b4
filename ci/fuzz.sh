#!/usr/bin/env bash
# Coverage-guided fuzzing of vhost-blk's guest-facing parsers (cargo fuzz, libFuzzer): every
# target in vhost-blk/fuzz/fuzz_targets, from its committed seeds (vhost-blk/fuzz/corpus/T),
# with leak detection and a per-input timeout.
#
#   ci/fuzz.sh smoke [TARGET...]   60 s per target (SMOKE_SECONDS), two targets at a time: CI
#   ci/fuzz.sh long  [TARGET...]   each target until it has run RUNS inputs (10,000,000), two at
#                                  a time (JOBS); hours on a 2-core host
#   ci/fuzz.sh setup               only install what it needs (nightly toolchain, cargo-fuzz)
#
# Prints one line per target: executions, coverage (cov and ft of libFuzzer's last stats
# line), crashes, hangs (inputs over -timeout, TIMEOUT s), leaks (-detect_leaks=1), and exits 1
# if any target found a crash, a hang, a leak or an out-of-memory. Findings are kept under
# OUT (target/fuzz/<mode>; the table also in OUT/summary.txt): the input that failed (crash-*, timeout-*, leak-*, oom-*) and the
# target's log; a finding becomes a unit test and a fix. The working corpus grows under OUT,
# never in the committed seeds. Run it under the CPU lock on the shared host.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
MODE=${1:-smoke}
shift || true
SMOKE_SECONDS=${SMOKE_SECONDS:-60}
RUNS=${RUNS:-10000000}
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
smoke) LIMIT=(-max_total_time="$SMOKE_SECONDS") ;;
long) LIMIT=(-runs="$RUNS") ;;
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

run_one() { # TARGET
    local t=$1 dir=$OUT/$1
    mkdir -p "$dir/corpus" "$dir/artifacts"
    cp "$FUZZ/corpus/$t"/* "$dir/corpus/" 2>/dev/null || true
    # The config target validates paths: run every target in a scratch directory.
    (cd "$dir" && "$BIN/$t" "${LIMIT[@]}" -timeout="$TIMEOUT" -detect_leaks=1 -rss_limit_mb=2048 \
        -print_final_stats=1 -artifact_prefix="$dir/artifacts/" corpus >"$dir/log" 2>&1) || true
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
    log = open(os.path.join(d, "log"), errors="replace").read()
    stats = re.findall(r"^#(\d+)\s+\S+\s+cov: (\d+) ft: (\d+) corp: (\d+)", log, re.M)
    execs = re.search(r"stat::number_of_executed_units: (\d+)", log)
    secs = re.search(r"Done \d+ runs in (\d+) second", log)
    arts = os.listdir(os.path.join(d, "artifacts"))
    count = lambda p: sum(a.startswith(p) for a in arts)
    crashes, hangs, leaks, ooms = count("crash-"), count("timeout-"), count("leak-"), count("oom-")
    if "ERROR: AddressSanitizer" in log or "panicked at" in log:
        crashes = max(crashes, 1)
    cov, ft, corp = stats[-1][1:] if stats else ("-", "-", "-")
    n = execs.group(1) if execs else (stats[-1][0] if stats else "0")
    if not stats or not execs:
        bad = 1
    bad |= crashes + hangs + leaks + ooms > 0
    print(f"{t:<14} {int(n):>12,} {cov:>6} {ft:>7} {corp:>7} {crashes:>8} {hangs:>6} {leaks:>6} {ooms:>5}  {secs.group(1) if secs else '-'}")
sys.exit(bad)
PY
