#!/usr/bin/env bash
# Field report 004's big-pipeline experiment, hiredis vs slotgate-client, on
# the same standalone redis-server (a free port, stopped on exit).
# Needs: cc, libhiredis-dev (apt-get install -y libhiredis-dev), redis-server.
#   scripts/hiredis_bigpipe.sh
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
work="$(mktemp -d)"
pid=""
cleanup() {
    if [[ -n "$pid" ]]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
    rm -rf "$work"
}
trap cleanup EXIT

cc -O2 -Wall -o "$work/hiredis_bigpipe" "$root/scripts/hiredis_bigpipe.c" -lhiredis
port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
    --dir "$work" --daemonize no >"$work/redis.log" 2>&1 &
pid=$!
for _ in $(seq 50); do
    redis-cli -p "$port" ping >/dev/null 2>&1 && break
    sleep 0.1
done

(cd "$root" && cargo build --release -q -p slotgate-client --example bigpipe)
"$work/hiredis_bigpipe" 127.0.0.1 "$port"
"$root/target/release/examples/bigpipe" --single "127.0.0.1:$port"
