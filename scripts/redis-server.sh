#!/usr/bin/env bash
# A throwaway real redis-server for the backends' real-Redis tests and benchmarks.
#
#   scripts/redis-server.sh start [STATE_DIR]   # installs Debian's redis-server if missing, starts it
#                                               # on a free loopback port with no persistence, prints
#                                               # redis://127.0.0.1:PORT on stdout
#   scripts/redis-server.sh stop  [STATE_DIR]   # stops it and removes STATE_DIR
#   scripts/redis-server.sh url   [STATE_DIR]   # prints the URL of the running server
#
# STATE_DIR defaults to ${TMPDIR:-/tmp}/kuberay-emu-redis; it holds the pid file, the port and the log.
# Typical CI use:
#   export EMU_REDIS_URL="$(scripts/redis-server.sh start)"
#   trap 'scripts/redis-server.sh stop' EXIT
set -euo pipefail

cmd="${1:-start}"
state="${2:-${TMPDIR:-/tmp}/kuberay-emu-redis}"

log() { echo "redis-server.sh: $*" >&2; }

ensure_installed() {
    if command -v redis-server >/dev/null 2>&1; then
        return
    fi
    if ! command -v apt-get >/dev/null 2>&1; then
        log "redis-server is not installed and apt-get is unavailable"
        exit 1
    fi
    log "installing redis-server with apt-get"
    export DEBIAN_FRONTEND=noninteractive
    # Try without refreshing the package lists first; refresh only if that fails.
    if ! apt-get install -y --no-install-recommends redis-server >&2; then
        apt-get update >&2
        apt-get install -y --no-install-recommends redis-server >&2
    fi
}

free_port() {
    python3 - <<'EOF'
import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])
s.close()
EOF
}

running() {
    [[ -f "$state/pid" ]] && kill -0 "$(cat "$state/pid")" 2>/dev/null
}

start() {
    if running; then
        echo "redis://127.0.0.1:$(cat "$state/port")"
        return
    fi
    ensure_installed
    mkdir -p "$state"
    local port
    port="$(free_port)"
    # No RDB snapshots, no AOF, loopback only; the Debian package's own service is not used.
    redis-server --bind 127.0.0.1 --port "$port" --dir "$state" --save "" --appendonly no \
        --protected-mode yes --daemonize yes --pidfile "$state/pid" --logfile "$state/redis.log"
    echo "$port" >"$state/port"
    local ready=""
    for _ in $(seq 1 100); do
        if redis-cli -h 127.0.0.1 -p "$port" ping 2>/dev/null | grep -q PONG; then
            ready=1
            break
        fi
        sleep 0.1
    done
    if [[ -z "$ready" ]]; then
        log "redis-server did not answer PING on port $port; log follows"
        cat "$state/redis.log" >&2 || true
        exit 1
    fi
    echo "redis://127.0.0.1:$port"
}

stop() {
    if running; then
        local pid
        pid="$(cat "$state/pid")"
        kill "$pid"
        for _ in $(seq 1 50); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
    fi
    rm -rf "$state"
}

case "$cmd" in
    start) start ;;
    stop) stop ;;
    url)
        running || { log "not running"; exit 1; }
        echo "redis://127.0.0.1:$(cat "$state/port")"
        ;;
    *)
        log "usage: $0 start|stop|url [STATE_DIR]"
        exit 2
        ;;
esac
