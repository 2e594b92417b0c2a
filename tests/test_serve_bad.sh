#!/usr/bin/env bash
# test_serve_bad.sh — bad input never crashes `hetrun serve` nor disturbs
# other requests: malformed or non-object JSON, wrong types, unknown model,
# empty messages, invalid UTF-8, context overflow, a body over the size
# limit, unknown or unsupported fields (400 naming them), too many connections, a full queue (503 +
# Retry-After) and a client that disconnects while holding the only slot.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/serve/lib.sh"
need_node
tmp="$(mktemp -d)"; trap 'stop_server; rm -rf "$tmp"' EXIT
rc=0
start_server "$tmp/a.log" -m "$model" -t 1 --parallel 2 --max-conns 6 || exit 1
PORT="$PORT" MAX_CONNS=6 node "$here/serve/bad_input.js" || rc=1
stop_server || { echo "FAIL: server exit status $? (log below)"; sed 's/^/    /' "$tmp/a.log" | tail; rc=1; }

# one slot and a queue of one: the third request is refused until the
# first client goes away
start_server "$tmp/b.log" -m "$model" -t 1 --parallel 1 --queue 1 || exit 1
PORT="$PORT" node "$here/serve/queue_full.js" || rc=1
stop_server || { echo "FAIL: server exit status $?"; rc=1; }
exit $rc
