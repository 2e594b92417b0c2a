#!/usr/bin/env bash
# test_serve_load.sh — bounded load on loopback: 16 concurrent clients x 20
# requests (mixed lengths, streaming, early disconnects) against 8 batched
# sequences; every request completes or fails cleanly, nothing is lost, and
# memory returns to its level after a warm-up round (tests/serve/load.js).
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/serve/lib.sh"
need_node
tmp="$(mktemp -d)"; trap 'stop_server; rm -rf "$tmp"' EXIT
start_server "$tmp/server.log" -m "$model" -t 1 --parallel 8 --queue 6 --max-conns 64 || exit 1
rc=0
PORT="$PORT" SERVER_PID="$SERVER_PID" CLIENTS=16 PER_CLIENT=20 timeout 300 node "$here/serve/load.js" || rc=1
stop_server || { echo "FAIL: the server did not exit cleanly (status $?)"; sed 's/^/    /' "$tmp/server.log" | tail; rc=1; }
exit $rc
