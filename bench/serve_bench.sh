#!/usr/bin/env bash
# serve_bench.sh — end-to-end benchmark of `hetrun serve` (not a test).
#
# For one model it measures, through HTTP on loopback:
#   - time to first token + decode as effective tokens/s, for prompt lengths
#     128 ... 8192 with OUT tokens generated, on two set-ups:
#       single: one route whose context holds the longest prompt
#               (--parallel SINGLE_PAR: every slot pays for the long context);
#       routed: --long-model (the same file unless LONG_MODEL is set), the
#               default route with a short context and many slots, the long
#               route with the long context and LONG_PAR slots;
#   - throughput with 1, 4 and 16 concurrent clients (CONC_PROMPT-token
#     prompts, OUT tokens each).
# Output: markdown tables on stdout; raw JSON lines in $RESULTS.
#
# usage: bench/serve_bench.sh [MODEL]   (env: HETRUN LONG_MODEL LENGTHS OUT CLIENTS REQS THREADS TEMPERATURE
#                                        SHORT_CTX SINGLE_PAR SHORT_PAR LONG_PAR THRESHOLD DEVICES LONG_DEVICES
#                                        ONLY=single|routed RESULTS=FILE: append to FILE)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
model="${1:-$root/models/stories260K.gguf}"
hetrun="${HETRUN:-$root/build/hetrun}"
long_model="${LONG_MODEL:-$model}"
export LENGTHS="${LENGTHS:-128 256 512 1024 2048 4096 8192}"
export OUT="${OUT:-256}" CLIENTS="${CLIENTS:-1 4 16}" REQS="${REQS:-1}" CONC_PROMPT="${CONC_PROMPT:-128}"
threads="${THREADS:-0}"
max_len=$(echo "$LENGTHS" | tr ' ' '\n' | sort -n | tail -1)
long_ctx=$((max_len + OUT + 16))
short_ctx="${SHORT_CTX:-$((1024 > CONC_PROMPT + OUT + 16 ? 1024 : CONC_PROMPT + OUT + 16))}"
results="${RESULTS:-$(mktemp /tmp/serve_bench.XXXXXX.jsonl)}"
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-passive}"
tflag=(); [ "$threads" != 0 ] && tflag=(-t "$threads")
dflag=(); [ -n "${DEVICES:-}" ] && dflag=(--devices "$DEVICES")
ldflag=(); [ -n "${LONG_DEVICES:-}" ] && ldflag=(--long-devices "$LONG_DEVICES")
thflag=(); [ -n "${THRESHOLD:-}" ] && thflag=(--long-threshold "$THRESHOLD")
tmp="$(mktemp -d)"; pid=""
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$tmp"' EXIT

run_server() { # label args...
    local label="$1"; shift
    "$hetrun" serve --port 0 -m "$model" "${tflag[@]}" "${dflag[@]}" --queue 256 "$@" 2>"$tmp/$label.log" &
    pid=$!
    local port=""
    for _ in $(seq 1 3000); do
        port=$(sed -n 's|.*listening on http://[^ ]*:\([0-9][0-9]*\)$|\1|p' "$tmp/$label.log" | head -1)
        [ -n "$port" ] && break
        kill -0 "$pid" 2>/dev/null || { cat "$tmp/$label.log" >&2; exit 1; }
        sleep 0.1
    done
    grep -v "listening on" "$tmp/$label.log" | sed "s/^/[$label] /" >&2 || true
    PORT="$port" LABEL="$label" node "$root/bench/serve_bench.js" | tee -a "$results" >&2
    kill "$pid"; wait "$pid" || true; pid=""
}

echo "model: $model; long model: $long_model; prompts: $LENGTHS; out: $OUT; clients: $CLIENTS x $REQS" >&2
only="${ONLY:-both}"
if [ "$only" != routed ]; then
    run_server single -c "$long_ctx" --parallel "${SINGLE_PAR:-4}"
fi
if [ "$only" != single ]; then
    run_server routed -c "$short_ctx" --parallel "${SHORT_PAR:-8}" --long-model "$long_model" --long-ctx "$long_ctx" \
        --long-parallel "${LONG_PAR:-1}" "${ldflag[@]}" "${thflag[@]}"
fi

node - "$results" <<'JS'
const rows = require('fs').readFileSync(process.argv[2], 'utf8').trim().split('\n').map(JSON.parse);
const get = (kind, label) => rows.filter((r) => r.kind === kind && r.label === label);
console.log('| prompt | single: TTFT ms | decode tok/s | effective tok/s | routed: route | TTFT ms | decode tok/s | effective tok/s |');
console.log('|---:|---:|---:|---:|:--|---:|---:|---:|');
for (const s of get('latency', 'single')) {
    const r = get('latency', 'routed').find((x) => x.prompt === s.prompt) || {};
    console.log(`| ${s.prompt} | ${s.ttft_ms} | ${s.decode_tps} | ${s.effective_tps} | ${r.route} | ${r.ttft_ms} | ${r.decode_tps} | ${r.effective_tps} |`);
}
console.log('\n| clients | single: tok/s | TTFT p50 / max ms | routed: tok/s | TTFT p50 / max ms |');
console.log('|---:|---:|---:|---:|---:|');
for (const s of get('throughput', 'single')) {
    const r = get('throughput', 'routed').find((x) => x.clients === s.clients) || {};
    console.log(`| ${s.clients} | ${s.tps} | ${s.ttft_p50_ms} / ${s.ttft_max_ms} | ${r.tps} | ${r.ttft_p50_ms} / ${r.ttft_max_ms} |`);
}
JS
