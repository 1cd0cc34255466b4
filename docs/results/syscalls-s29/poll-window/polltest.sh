#!/bin/bash
# The poll-window experiment of ../README.md, kept so that its figures can be re-run: ours (blk,
# null storage) with VB_POLL_NS = 0 / 20 us / 50 us, and --threads 2, against qemu-storage-daemon,
# both clients, 3 interleaved rounds; prints median ops per backend CPU-second with each round's.
# Needs the prototype: git apply poll-window.patch; cargo build --release -p vhost-blk --bins.
# Usage: flock /tmp/vb-cpu.lock docs/results/syscalls-s29/poll-window/polltest.sh OUT_DIR
ROOT=$(cd "$(dirname "$0")/../../../.." && pwd)
B=$ROOT/target/release
OUT=$1; mkdir -p "$OUT"
for r in 1 2 3; do
 for cfg in "p0" "p20000" "p50000" "qsd" "t2p0" "t2p50000"; do
  for cl in bench blkio; do
   rm -f /tmp/pt.sock
   case $cfg in
    qsd) "$ROOT/experiments/qsd-null.sh" /tmp/pt.sock 8 0 >/dev/null 2>&1 & ;;
    t2p*) VB_POLL_NS=${cfg#t2p} RUST_LOG=warn "$B/vhost-blk" --socket-path /tmp/pt.sock --null 1G --num-queues 8 --threads 2 >/dev/null 2>&1 & ;;
    p*) VB_POLL_NS=${cfg#p} RUST_LOG=warn "$B/vhost-blk" --socket-path /tmp/pt.sock --null 1G --num-queues 8 >/dev/null 2>&1 & ;;
   esac
   P=$!; for _ in $(seq 100); do [ -S /tmp/pt.sock ] && break; sleep 0.05; done
   c=(); [ "$cl" = blkio ] && c=(--client blkio)
   timeout 60 "$B/vhost-blk-bench" --socket /tmp/pt.sock --ramp 200ms --duration 3s --queues 8 --qd 16 --threads 2 --backend-pid $P --json "$OUT/$cfg-$cl-r$r.json" "${c[@]}" >/dev/null
   kill $P; wait $P 2>/dev/null
  done
 done
done
python3 - "$OUT" <<'PY'
import json,glob,sys,statistics,collections
d=collections.defaultdict(list)
for f in sorted(glob.glob(sys.argv[1]+'/*.json')):
    k=f.split('/')[-1].rsplit('-r',1)[0]; j=json.load(open(f))
    d[k].append((j['total']['iops'], j['ops_per_backend_cpu_second'], j['total']['latency_us']['p99']))
for k,v in sorted(d.items()):
    print(f"{k:16s} IOPS {statistics.median(x[0] for x in v)/1e6:.2f}M  ops/cpu-s {statistics.median(x[1] for x in v)/1e6:.2f}M ({' '.join(f'{x[1]/1e6:.2f}' for x in v)})  p99 {statistics.median(x[2] for x in v):.0f}")
PY
