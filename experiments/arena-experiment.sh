#!/usr/bin/env bash
# Where the 128-queue backend's private memory comes from, and why it spreads from one process
# to the next (issue 46: the restart test's RssAnon check, docs/results/scale128). No guest:
# vhost-blk (blk, 128 queues, file storage, the restart suite's --service-latency 2ms and
# --msix-latency 1ms) driven by vhost-blk-bench on DRIVE of its 128 queues (8 threads,
# randwrite, qd 1) for DURATION, one process per trial, settings alternating trial by trial:
#   default   glibc's malloc as the daemon runs it;
#   arenas=1  MALLOC_ARENA_MAX=1 (one malloc arena for every thread);
#   usr1      default, and SIGUSR1 every 0.1 s while the bench runs (each one writes the stats
#             file, as the harness's polling of a restart suite makes it do).
# Each trial reads the backend's RssAnon and Threads (/proc/PID/status) twice: idle after start,
# and at 80 % of the run with the frontend connected. Prints one line per trial and, per setting,
# min / median / max and max/min of the connected RssAnon. Environment: TRIALS (10), DRIVE (128),
# DURATION (3, seconds), SETTINGS (default arenas=1 usr1), OUT (docs/results/scale128/arena). Memory, not speed: it may share the
# host, but the figures say how busy it was (load average in the log).
set -euo pipefail
cd "$(dirname "$0")/.."
trials=${TRIALS:-10}
duration=${DURATION:-3}
drive=${DRIVE:-128}
out=${OUT:-docs/results/scale128/arena}
mkdir -p "$out"
cargo build --release -p vhost-blk -p vhost-blk-bench
bin=$PWD/target/release
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

status() { # PID FIELD
    awk -v f="$2:" '$1 == f { print $2 }' "/proc/$1/status"
}

trial() { # SETTING N
    local setting=$1 n=$2 env=() be bench poll='' idle_anon idle_thr anon thr
    [ "$setting" = arenas=1 ] && env=(MALLOC_ARENA_MAX=1)
    rm -f "$work/s.sock" "$work/img"
    env "${env[@]}" "$bin/vhost-blk" --socket-path "$work/s.sock" --device blk \
        --image "$work/img" --size 128M --num-queues 128 --service-latency 2ms \
        --msix-latency 1ms --seed "$n" --stats-file "$work/stats.json" >"$work/be.log" 2>&1 &
    be=$!
    for _ in $(seq 50); do [ -S "$work/s.sock" ] && break; sleep 0.1; done
    idle_anon=$(status "$be" RssAnon)
    idle_thr=$(status "$be" Threads)
    "$bin/vhost-blk-bench" --socket "$work/s.sock" --queues "$drive" --threads 8 --qd 1 \
        --rw randwrite --duration "${duration}s" >"$work/bench.log" 2>&1 &
    bench=$!
    if [ "$setting" = usr1 ]; then
        while kill -USR1 "$be" 2>/dev/null; do sleep 0.1; done &
        poll=$!
    fi
    sleep "$(echo "$duration * 0.8 + 0.5" | bc)"
    anon=$(status "$be" RssAnon)
    thr=$(status "$be" Threads)
    wait "$bench" || { echo "trial $n: the bench failed" >&2; tail -3 "$work/bench.log" >&2; }
    [ -n "$poll" ] && kill "$poll" 2>/dev/null
    kill "$be"
    wait "$be" 2>/dev/null || true
    printf '%-9s %3d  idle %7d KiB %3d threads  connected %7d KiB %3d threads  load %s\n' \
        "$setting" "$n" "$idle_anon" "$idle_thr" "$anon" "$thr" "$(cut -d' ' -f1 /proc/loadavg)"
}

for n in $(seq "$trials"); do
    for s in ${SETTINGS:-default arenas=1 usr1}; do trial "$s" "$n"; done
done | tee "$out/arena.log"

python3 - "$out/arena.log" <<'PY' | tee "$out/summary.txt"
import statistics, sys
v = {}
for line in open(sys.argv[1]):
    f = line.split()
    v.setdefault(f[0], []).append(int(f[8]))
for s, a in sorted(v.items()):
    print(f"{s:<9} n={len(a)} connected RssAnon KiB: min {min(a)} median {statistics.median(a):.0f} "
          f"max {max(a)}, max/min {max(a) / min(a):.2f}")
PY
