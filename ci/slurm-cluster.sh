#!/usr/bin/env bash
# A real single-node Slurm cluster on this machine, for tests: munged with its own key and
# socket, slurmctld and slurmd as root, every file (configuration, state, spool, logs, pids)
# under DIR. Nothing outside DIR is touched; the system's /etc/slurm and /etc/munge are not read.
#
#   ci/slurm-cluster.sh start DIR   writes DIR/slurm.conf, starts the daemons, waits (bounded)
#                                   until the node is idle; prints `export SLURM_CONF=...`
#   ci/slurm-cluster.sh stop DIR    stops the daemons started from DIR (by their pid files)
#   ci/slurm-cluster.sh status DIR  sinfo of that cluster
#
# The partition is `vbtest`, the node is this host (`hostname -s`) with all its CPUs. Ports:
# $VB_SLURM_PORT (slurmctld, default 16817) and that + 1 (slurmd). On a failed start the logs
# in DIR/log/ are printed and kept, and what did start is stopped. Needs root and the Debian packages slurm-wlm and munge.
set -euo pipefail

cmd=${1:-}
dir=${2:-}
if [ -z "$cmd" ] || [ -z "$dir" ]; then
    echo "usage: $0 start|stop|status DIR" >&2
    exit 2
fi
dir=$(realpath -m "$dir")
conf="$dir/slurm.conf"
export SLURM_CONF="$conf"

dump_logs() {
    for f in "$dir"/log/*; do
        [ -f "$f" ] || continue
        echo "---- $f (last 40 lines)" >&2
        tail -n 40 "$f" >&2
    done
}

# Waits up to $1 seconds for the command after it to succeed.
wait_for() {
    local limit=$1
    shift
    local t=0
    while ! "$@" >/dev/null 2>&1; do
        t=$((t + 1))
        if [ "$t" -ge "$((limit * 5))" ]; then
            return 1
        fi
        sleep 0.2
    done
}

stop_pid() {
    local pidfile=$1 name=$2
    [ -f "$pidfile" ] || return 0
    local pid
    pid=$(cat "$pidfile")
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
        kill "$pid" 2>/dev/null || true
        for _ in $(seq 50); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        if kill -0 "$pid" 2>/dev/null; then
            echo "slurm-cluster: $name ($pid) did not stop in 5 s, killing it" >&2
            kill -9 "$pid" 2>/dev/null || true
        fi
    fi
    rm -f "$pidfile"
}

stop_all() {
    if [ -f "$conf" ] && [ -f "$dir/run/slurmctld.pid" ]; then
        timeout 15 scancel --quiet --user=root 2>/dev/null || true
    fi
    stop_pid "$dir/run/slurmd.pid" slurmd
    stop_pid "$dir/run/slurmctld.pid" slurmctld
    stop_pid "$dir/run/munged.pid" munged
}

case "$cmd" in
start)
    if [ "$(id -u)" != 0 ]; then
        echo "slurm-cluster: must run as root (slurmd runs jobs as their user)" >&2
        exit 2
    fi
    for b in munged mungekey slurmctld slurmd sinfo sbatch; do
        command -v "$b" >/dev/null || {
            echo "slurm-cluster: $b not found (apt-get install slurm-wlm munge)" >&2
            exit 2
        }
    done
    if [ -f "$dir/run/slurmctld.pid" ] && kill -0 "$(cat "$dir/run/slurmctld.pid")" 2>/dev/null; then
        echo "slurm-cluster: already running from $dir" >&2
        exit 2
    fi
    port=${VB_SLURM_PORT:-16817}
    node=$(hostname -s)
    cpus=$(nproc)
    mem=$(awk '/MemTotal/ { print int($2 / 1024 * 0.9) }' /proc/meminfo)
    mkdir -p "$dir"/{munge,state,spool,log,run}
    chmod 700 "$dir/munge"
    [ -f "$dir/munge/munge.key" ] || mungekey --create --keyfile="$dir/munge/munge.key" --bits=1024
    chmod 600 "$dir/munge/munge.key"
    cat >"$conf" <<EOF
# Written by ci/slurm-cluster.sh: a single-node test cluster on $node.
ClusterName=vbtest
SlurmctldHost=$node
SlurmctldPort=$port
SlurmdPort=$((port + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge/munge.sock
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool/slurmd-%n
SlurmctldPidFile=$dir/run/slurmctld.pid
SlurmdPidFile=$dir/run/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/linux
JobAcctGatherFrequency=30
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc=$dir/log/jobcomp.txt
MpiDefault=none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
MinJobAge=600
SlurmdTimeout=60
InactiveLimit=0
KillWait=10
NodeName=$node CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=vbtest Nodes=$node Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
EOF
    munged --force --key-file="$dir/munge/munge.key" --socket="$dir/munge/munge.sock" \
        --pid-file="$dir/run/munged.pid" --log-file="$dir/log/munged.log" \
        --seed-file="$dir/munge/munge.seed"
    if ! wait_for 10 test -S "$dir/munge/munge.sock"; then
        echo "slurm-cluster: munged did not come up in 10 s" >&2
        dump_logs
        stop_all
        exit 1
    fi
    if ! slurmctld -f "$conf" || ! slurmd -f "$conf"; then
        echo "slurm-cluster: slurmctld or slurmd did not start" >&2
        dump_logs
        stop_all
        exit 1
    fi
    if ! wait_for 30 sh -c "timeout 5 sinfo -h -n '$node' -o '%T' | grep -Eq '^(idle|mixed|allocated)'"; then
        echo "slurm-cluster: node $node not idle after 30 s:" >&2
        timeout 5 sinfo -N -l >&2 || true
        dump_logs
        stop_all
        exit 1
    fi
    echo "slurm-cluster: up ($node, $cpus CPUs, partition vbtest, port $port)" >&2
    echo "export SLURM_CONF=$conf"
    ;;
stop)
    stop_all
    echo "slurm-cluster: stopped ($dir; logs kept in $dir/log)" >&2
    ;;
status)
    timeout 15 sinfo -N -l
    ;;
*)
    echo "usage: $0 start|stop|status DIR" >&2
    exit 2
    ;;
esac
