#!/usr/bin/env bash
# test_serve_e2e.sh — `hetrun serve` driven by the official openai npm client
# (installed into the build tree on first run): models, completions and chat
# completions, streamed and not, usage counts, x-het-* headers, errors as the
# client's typed exceptions, seeded sampling; and greedy output (temperature
# 0) equal to `hetrun run --temp 0` on the same prompt. Then every sampling
# field (logprobs, penalties, logit_bias, min_p, JSON mode; refused ones
# named), and a server with --api-key: 401s, /tokenize, /detokenize,
# /props, and one access-log line per request.
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
PORT="$PORT" node "$here/serve/fields.js" || rc=1
stop_server || { echo "FAIL: the server did not exit cleanly"; rc=1; }

HET_API_KEY=sekrit start_server "$tmp/auth.log" -m "$model" -t 1 --parallel 2 || exit 1
PORT="$PORT" KEY=sekrit node "$here/serve/auth.js" || rc=1
stop_server || { echo "FAIL: the server did not exit cleanly"; rc=1; }
# the access log: one line per request, with status, tokens and time
for want in 'GET /health 200 tokens=- ms=' 'GET /v1/models 401 ' \
            'POST /v1/chat/completions 200 tokens=[0-9]+\+6 cached=[0-9]+ ms=[0-9.]+ session=conv-42 user=tester' 'POST /tokenize 200 '; do
    grep -Eq "^hetrun serve: $want" "$tmp/auth.log" || { echo "FAIL: no access-log line matching '$want'"; rc=1; }
done
n_lines=$(grep -cE '^hetrun serve: (GET|POST) ' "$tmp/auth.log")
[ "$n_lines" -eq 15 ] || { echo "FAIL: $n_lines access-log lines, want one per request of auth.js (15)"; rc=1; }
exit $rc
