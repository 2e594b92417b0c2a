#!/usr/bin/env bash
# test_serve_e2e.sh — `hetrun serve` driven by the official openai npm client
# (installed into the build tree on first run): models, completions and chat
# completions, streamed and not, usage counts, x-het-* headers, errors as the
# client's typed exceptions, seeded sampling; and greedy output (temperature
# 0) equal to `hetrun run --temp 0` on the same prompt.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/serve/lib.sh"
need_node
need_openai
tmp="$(mktemp -d)"; trap 'stop_server; rm -rf "$tmp"' EXIT

prompt="Once upon a time"
"$hetrun" run -m "$model" -p "$prompt" -n 48 --temp 0 -t 1 >"$tmp/run.txt" 2>"$tmp/run.err" \
    || { echo "FAIL: hetrun run: $(cat "$tmp/run.err")"; exit 1; }
start_server "$tmp/server.log" -m "$model" -t 1 --parallel 4 || exit 1
PORT="$PORT" PROMPT="$prompt" EXPECT_FILE="$tmp/run.txt" MAX_TOKENS=48 node "$here/serve/e2e.js"
rc=$?
stop_server || { echo "FAIL: the server did not exit cleanly"; rc=1; }
exit $rc
