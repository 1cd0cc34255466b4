#!/usr/bin/env bash
# Why experiments/bench-latency.sh has no fair-scheduler floor: cyclictest on CPU 0 at SCHED_FIFO 80 and
# under the fair scheduler, 200 and 1000 us intervals, 2 s each, with the timer slack its
# measurement thread runs with. Prints p50 / p99 / max (us) from the histogram.
# Usage: flock /tmp/vb-cpu.lock docs/results/bench-latency-s30/fair-floor.sh
#   env: LAB (default target/release/lab: it reads the histograms)
# (Without -p: any -p, even -p 0, makes cyclictest's measurement thread SCHED_FIFO.)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../../.." && pwd)
LAB=${LAB:-$ROOT/target/release/lab}
[ -x "$LAB" ] || { echo "fair-floor: build first: cargo build --release -p lab" >&2; exit 2; }
W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
for t in 200 1000; do
    for pol in fifo other; do
        if [ $pol = fifo ]; then args=(-p 80); else args=(--policy=other); fi
        cyclictest -q -m -t1 -a 0 "${args[@]}" -i $t -l $((2000000 / t)) -h 20000 >"$W/h.txt" 2>&1 &
        pid=$!
        sleep 0.5
        # shellcheck disable=SC2012 # the names are thread ids: digits only
        tid=$(ls "/proc/$pid/task" | sort -n | tail -1) # the measurement thread
        slack=$(cat "/proc/$tid/timerslack_ns" 2>/dev/null || echo ?)
        policy=$(chrt -p "$tid" | sed -n 's/.*policy: //p')
        wait $pid
        printf 'interval %s us, %-5s (%s, timer slack %s ns): %s\n' "$t" "$pol" "$policy" "$slack" \
            "$("$LAB" table cyclictest "$W/h.txt")"
    done
done
