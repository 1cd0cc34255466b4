#!/usr/bin/env bash
# qemu-storage-daemon as the comparison backend of the benchmarks: 1 GiB null-co storage
# (reads return zeros) exported as vhost-user-blk. The one place experiments/bench-latency.sh and
# experiments/syscalls-per-request.sh take its command line from; it execs, so $! is the daemon's pid.
# Usage: experiments/qsd-null.sh SOCKET QUEUES LATENCY_NS
set -euo pipefail
[ $# = 3 ] || { echo "usage: experiments/qsd-null.sh SOCKET QUEUES LATENCY_NS" >&2; exit 2; }
exec qemu-storage-daemon \
    --blockdev "driver=null-co,node-name=n0,size=1073741824,read-zeroes=on,latency-ns=$3" \
    --export "type=vhost-user-blk,id=e0,node-name=n0,addr.type=unix,addr.path=$1,num-queues=$2,writable=on"
