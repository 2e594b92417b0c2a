#!/usr/bin/env bash
# test_serve_defaults.sh — a model whose KV cache is large next to its
# weights (8 layers of 8 KV heads x 64 on a 64-wide Qwen3, 4096-token
# context) starts `hetrun serve` with default flags: the pool is sized for
# the default --parallel 4 sequences, not for one (which left 3 KV caches
# without room). A context that cannot fit in memory is refused before
# anything is allocated, with one line saying what it needs and which
# flags lower it.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/serve/lib.sh"
source "$here/cli_harness.sh"
shared="${HET_SHARED_DIR:-../shared}"
vocab="$shared/models/synthetic/vocab-qwen3.gguf"
[ -f "$vocab" ] || { echo "SKIP: $vocab missing"; exit 77; }
tmp="$(mktemp -d)"; trap 'stop_server; rm -rf "$tmp"' EXIT

kv="$tmp/kv-heavy.gguf"
"$hetrun" mkmodel -o "$kv" --preset tiny --vocab "$vocab" --type q4_0 --n-layer 8 --n-head 8 --n-head-kv 8 \
    --head-dim 64 >/dev/null 2>"$tmp/mk.err" || { echo "FAIL: mkmodel: $(cat "$tmp/mk.err")"; exit 1; }

# default flags: starts, answers, stops cleanly
if start_server "$tmp/serve.log" -m "$kv" -t 1; then
    ok
    body='{"prompt":"Hello","max_tokens":4,"temperature":0}'
    if command -v curl >/dev/null; then
        curl -sf "http://127.0.0.1:$PORT/v1/completions" -H 'content-type: application/json' -d "$body" \
            >"$tmp/resp.json" && grep -q '"text"' "$tmp/resp.json" && ok || bad "completion: $(head -c 300 "$tmp/resp.json")"
    fi
    stop_server && ok || bad "serve did not stop cleanly"
else
    bad "serve with default flags did not start: $(cat "$tmp/serve.log")"
fi
"$hetrun" run -m "$kv" -t 1 -n 1 >/dev/null 2>"$tmp/run.err"
check "run with default flags ($(head -2 "$tmp/run.err"))" test $? = 0

# a context beyond memory: one line, the parts, the flags that lower them
for cmd in "serve --port 0" run; do
    # shellcheck disable=SC2086
    "$hetrun" $cmd -m "$kv" -t 1 -c 16000000 >/dev/null 2>"$tmp/big.err" &
    pid=$!
    for _ in $(seq 1 300); do kill -0 $pid 2>/dev/null || break; sleep 0.1; done
    kill -0 $pid 2>/dev/null && { kill -TERM $pid; bad "$cmd -c 16000000 started"; }
    wait $pid; rc=$?
    lines=$(grep -vc 'loading on http' "$tmp/big.err") # serve says where it listens before loading
    if [ "$rc" = 1 ] && [ "$lines" = 1 ] && grep -q "needs [0-9.]* GiB (weights .*, KV cache .* of 16000000 tokens.*available.*--ctx N" "$tmp/big.err"; then
        ok
    else
        bad "$cmd -c 16000000: rc $rc, $lines lines: $(cat "$tmp/big.err")"
    fi
done
grep -q -- "--parallel N" "$tmp/big.err" && bad "run's message names --parallel, which run does not take" || ok
finish
