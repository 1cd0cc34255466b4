#!/bin/bash
# eff.sh NAME ours|qsd "backend args" "client args" [ENV=..]  -> prints ops per CPU-s
# Run from any directory; D (default /tmp/prof) holds the JSON. Needs a release build.
ROOT=$(cd "$(dirname "$0")/../../.." && pwd); B=$ROOT/target/release; N=$1; K=$2; BA=$3; CA=$4; EV=${5:-X=1}
D=${D:-/tmp/prof}; mkdir -p "$D"; S=$D/e.sock; rm -f "$S"
# EV, BA and CA are lists (an environment assignment, backend and client arguments): split on
# purpose.
# shellcheck disable=SC2086
if [ "$K" = qsd ]; then "$ROOT/experiments/qsd-null.sh" "$S" 8 0 >/dev/null 2>&1 & P=$!
else env $EV "$B/vhost-blk" --socket-path "$S" $BA --num-queues 8 >/dev/null 2>&1 & P=$!; fi
for _ in $(seq 50); do [ -S "$S" ] && break; sleep 0.1; done
# shellcheck disable=SC2086
timeout 60 "$B/vhost-blk-bench" --socket "$S" --ramp 200ms --duration 3s --backend-pid $P --queues 8 --qd 16 --threads 2 $CA --json "$D/$N.json" >/dev/null
kill $P; wait $P 2>/dev/null
python3 -c "import json;d=json.load(open('$D/$N.json'));print('$N', round(d['ops_per_backend_cpu_second']/1e6,3), round(d['total']['iops']/1e6,3))"
