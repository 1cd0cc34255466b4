#!/usr/bin/env bash
# The blkio-client stall (docs/bench-latency.md): N times a fresh vhost-blk (--null 1G, 8 queues)
# and a 3 s vhost-blk-bench run with libblkio as the client (8 queues x QD 16, 2 threads);
# prints each failed run and the count. Run under the CPU lock. Environment: N (20), BIN, BENCH.
set -u
cd "$(dirname "$0")/.."
BIN=${BIN:-target/release/vhost-blk}
BENCH=${BENCH:-target/release/vhost-blk-bench}
N=${N:-20}
d=$(mktemp -d); ok=0; stall=0
for i in $(seq 1 $N); do
  $BIN --socket-path $d/s.sock --null 1G --num-queues 8 > $d/backend.$i.log 2>&1 &
  b=$!
  for t in $(seq 1 50); do [ -S $d/s.sock ] && break; sleep 0.1; done
  if timeout 30 $BENCH --socket $d/s.sock --client blkio --queues 8 --qd 16 --threads 2 --duration 3s > $d/bench.$i.out 2>&1; then ok=$((ok+1)); else stall=$((stall+1)); echo "run $i failed: $(tail -1 $d/bench.$i.out)"; fi
  kill $b 2>/dev/null; wait $b 2>/dev/null; rm -f $d/s.sock
done
echo "binary $BIN: $ok ok, $stall failed of $N"
rm -rf "$d"
