#!/usr/bin/env bash
# The blkio-client stall (docs/bench-latency.md): N times a fresh vhost-blk (--null 1G, 8 queues)
# and a 3 s vhost-blk-bench run with libblkio as the client (8 queues x QD 16, 2 threads);
# prints each failed run and the count. A run still going 8 s after it started is stalled: the
# backend is sent SIGUSR1 then, and its per-queue ring report (device::diag: ring indices,
# event-index fields, kick and drain counts, what the queue holds) is printed and kept in
# $KEEP/backend.<i>.log. Run under the CPU lock. Environment: N (20), BIN, BENCH, CLIENT_THREADS
# (2), BACKEND_ARGS (extra vhost-blk arguments), KEEP (a directory for the stalled runs' logs).
set -u
cd "$(dirname "$0")/.." || exit
BIN=${BIN:-target/release/vhost-blk}
BENCH=${BENCH:-target/release/vhost-blk-bench}
N=${N:-20}
CLIENT_THREADS=${CLIENT_THREADS:-2}
BACKEND_ARGS=${BACKEND_ARGS:-}
KEEP=${KEEP:-}
d=$(mktemp -d); ok=0; stall=0
[ -n "$KEEP" ] && mkdir -p "$KEEP"
for i in $(seq 1 "$N"); do
  # BACKEND_ARGS is a list of arguments: split on purpose.
  # shellcheck disable=SC2086
  "$BIN" --socket-path "$d/s.sock" --null 1G --num-queues 8 $BACKEND_ARGS > "$d/backend.$i.log" 2>&1 &
  b=$!
  for _ in $(seq 1 50); do [ -S "$d/s.sock" ] && break; sleep 0.1; done
  timeout 30 "$BENCH" --socket "$d/s.sock" --client blkio --queues 8 --qd 16 --threads "$CLIENT_THREADS" \
    --duration 3s > "$d/bench.$i.out" 2>&1 &
  c=$!
  for _ in $(seq 1 80); do kill -0 $c 2>/dev/null || break; sleep 0.1; done
  reported=0
  if kill -0 $c 2>/dev/null; then
    kill -USR1 $b; sleep 0.5; reported=1
  fi
  if wait $c; then ok=$((ok+1)); else
    stall=$((stall+1)); echo "run $i failed: $(tail -1 "$d/bench.$i.out")"
    [ $reported = 1 ] && grep -E 'queue [0-9]+:' "$d/backend.$i.log" | sed 's/^/    /'
    [ -n "$KEEP" ] && cp "$d/backend.$i.log" "$d/bench.$i.out" "$KEEP/"
  fi
  kill $b 2>/dev/null; wait $b 2>/dev/null; rm -f "$d/s.sock"
done
echo "binary $BIN: $ok ok, $stall failed of $N"
rm -rf "$d"
