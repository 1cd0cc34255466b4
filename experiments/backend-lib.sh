# shellcheck shell=bash
# Starting and stopping the backend under test, for the benchmark scripts (experiments/bench-latency.sh,
# experiments/syscalls-per-request.sh, experiments/profile-backend.sh). Source it; it defines:
#
#   start_backend LOG SOCKET ours ARGS...              our release vhost-blk, ARGS after --socket-path
#                                                      (VB_BACKEND_BIN: another vhost-blk binary)
#   start_backend LOG SOCKET qsd QUEUES LATENCY_NS     qemu-storage-daemon (experiments/qsd-null.sh)
#       Starts it in the background with its output in LOG, sets BACKEND_PID, appends it to
#       BACKEND_PIDS (for the caller's exit trap), and waits up to 5 s for SOCKET: returns 1 with
#       a message when it exits or never listens. BACKEND_PREFIX (an array, e.g. (taskset -c 0))
#       runs before the command when set.
#   stop_backend     kills BACKEND_PID and waits for it (ours writes its --stats-file at exit).
#   stop_backends    kills every pid in BACKEND_PIDS (for an exit trap).
BACKEND_LIB_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BACKEND_PIDS=()
BACKEND_PID=

wait_socket() { # SOCKET [PID]: up to 5 s, less if PID exits first
    for _ in $(seq 100); do
        [ -S "$1" ] && return 0
        [ -n "${2:-}" ] && ! kill -0 "$2" 2>/dev/null && return 1
        sleep 0.05
    done
    return 1
}

start_backend() {
    local log=$1 sock=$2 kind=$3
    shift 3
    rm -f "$sock"
    case $kind in
    ours)
        RUST_LOG=warn ${BACKEND_PREFIX[@]+"${BACKEND_PREFIX[@]}"} \
            "${VB_BACKEND_BIN:-$BACKEND_LIB_ROOT/target/release/vhost-blk}" --socket-path "$sock" "$@" \
            >"$log" 2>&1 &
        ;;
    qsd)
        ${BACKEND_PREFIX[@]+"${BACKEND_PREFIX[@]}"} "$BACKEND_LIB_ROOT/experiments/qsd-null.sh" "$sock" "$@" \
            >"$log" 2>&1 &
        ;;
    *)
        echo "start_backend: unknown backend '$kind' (ours or qsd)" >&2
        return 2
        ;;
    esac
    BACKEND_PID=$!
    BACKEND_PIDS+=("$BACKEND_PID")
    wait_socket "$sock" "$BACKEND_PID" || { echo "backend did not listen on $sock (see $log)" >&2; return 1; }
}

stop_backend() {
    [ -n "$BACKEND_PID" ] || return 0
    kill "$BACKEND_PID" 2>/dev/null || true
    wait "$BACKEND_PID" 2>/dev/null || true
    BACKEND_PID=
}

stop_backends() {
    local p
    for p in "${BACKEND_PIDS[@]:-}"; do
        [ -n "$p" ] && kill "$p" 2>/dev/null && wait "$p" 2>/dev/null
    done
    return 0
}
