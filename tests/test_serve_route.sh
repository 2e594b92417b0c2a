#!/usr/bin/env bash
# test_serve_route.sh — --long-model routing, served and in `hetrun run`:
# prompts either side of --long-threshold go to the expected model (headers
# x-het-model/x-het-route, the `het` object, metrics); a prompt that does not
# fit the default context goes long; without a threshold one is derived from
# a start-up calibration. The long model is a renamed copy of stories260K.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/serve/lib.sh"
need_node
tmp="$(mktemp -d)"; trap 'stop_server; rm -rf "$tmp"' EXIT
cp "$model" "$tmp/stories-long.gguf"
rc=0; pass=0
bad() { echo "FAIL: $*"; rc=1; }

start_server "$tmp/a.log" -m "$model" -c 256 -t 1 --long-model "$tmp/stories-long.gguf" --long-threshold 20 \
    --long-ctx 1024 || exit 1
PORT="$PORT" MODE=given LONG_ID=stories-long node "$here/serve/route.js" || rc=1
stop_server || bad "server exit status"

start_server "$tmp/b.log" -m "$model" -c 256 -t 1 --long-model "$tmp/stories-long.gguf" --long-ctx 1024 || exit 1
grep -q "long-route threshold: [0-9]* prompt tokens (derived" "$tmp/b.log" || bad "no derived threshold logged: $(cat "$tmp/b.log")"
PORT="$PORT" MODE=derived LONG_ID=stories-long node "$here/serve/route.js" || rc=1
stop_server || bad "server exit status"

# hetrun run applies the same rule
long="Once upon a time there was a little girl named Lily. She liked to play with her red ball in the park."
for case in "Once upon a time|default" "$long|long"; do
    p="${case%|*}"; want="${case#*|}"
    out=$("$hetrun" run -m "$model" -c 256 -t 1 --long-model "$tmp/stories-long.gguf" --long-threshold 20 \
          -p "$p" -n 8 --temp 0 2>"$tmp/run.err") || bad "run: $(cat "$tmp/run.err")"
    grep -q "^route: $want " "$tmp/run.err" && pass=$((pass+1)) || bad "run '$p': want route $want: $(cat "$tmp/run.err")"
    ref=$("$hetrun" run -m "$model" -t 1 -p "$p" -n 8 --temp 0 2>/dev/null)
    [ "$out" = "$ref" ] && pass=$((pass+1)) || bad "run output on route $want: '$out' vs '$ref'"
done
"$hetrun" run -m "$model" -c 256 -t 1 --long-model "$tmp/stories-long.gguf" -p "$long" -n 4 >/dev/null 2>"$tmp/run.err" \
    && grep -q "^route: .*(derived)" "$tmp/run.err" && pass=$((pass+1)) || bad "run, derived threshold: $(cat "$tmp/run.err")"
"$hetrun" serve --long-threshold 5 >/dev/null 2>"$tmp/err"; [ $? = 2 ] && grep -q "need --long-model" "$tmp/err" \
    && pass=$((pass+1)) || bad "--long-threshold without --long-model: $(cat "$tmp/err")"
echo "run: $pass passed"
exit $rc
