#!/usr/bin/env bash
# test_cli.sh — hetrun as a user meets it: every fixture model loads,
# tokenizes and generates; bad input (flags, files, values, context) gives
# one clear error line and a non-zero exit.
set -uo pipefail
hetrun="${HET_HETRUN:?}"
shared="${HET_SHARED_DIR:-../shared}"
src="${HET_SOURCE_DIR:-.}"
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
source "$(dirname "${BASH_SOURCE[0]}")/cli_harness.sh"

# expect_error RC PATTERN -- command...: exit code RC and exactly one stderr line matching PATTERN
expect_error() {
    local rc="$1" pat="$2"; shift 3
    "$@" >"$tmp/out" 2>"$tmp/err"; local got=$?
    local lines; lines=$(wc -l <"$tmp/err")
    if [ "$got" != "$rc" ] || [ "$lines" != 1 ] || ! grep -q -- "$pat" "$tmp/err"; then
        bad "$* -> rc $got (want $rc), $lines stderr lines, want /$pat/:"; sed 's/^/    /' "$tmp/err" | head -5
    else ok; fi
}

model="$src/models/stories260K.gguf"
expect_error 2 "unknown flag '--bogus'" -- "$hetrun" run --bogus
expect_error 2 "unknown command 'frobnicate'" -- "$hetrun" frobnicate
expect_error 2 "\-\-temp: 'abc' is not a number" -- "$hetrun" run --temp abc
expect_error 2 "\-n needs a value" -- "$hetrun" run -n
expect_error 2 "\-o OUT is required" -- "$hetrun" logits -p hi
expect_error 1 "no-such-file.gguf" -- "$hetrun" run -m "$tmp/no-such-file.gguf"
head -c 3000 "$model" >"$tmp/trunc.gguf"
expect_error 1 "offset" -- "$hetrun" run -m "$tmp/trunc.gguf"
printf 'GGUF\x01\x00\x00\x00' >"$tmp/v1.gguf"
expect_error 1 "version" -- "$hetrun" info -m "$tmp/v1.gguf"
if [ -f "$shared/models/vocab/ggml-vocab-gpt-2.gguf" ]; then
    expect_error 1 "unsupported architecture 'gpt2'" -- "$hetrun" run -m "$shared/models/vocab/ggml-vocab-gpt-2.gguf"
fi
long="$(printf 'Once upon a time %.0s' $(seq 1 40))"
expect_error 1 "does not fit the context of 16" -- "$hetrun" run -c 16 -p "$long" -n 4
expect_error 1 "unknown device 'tpu'" -- "$hetrun" run --device tpu
# the CPU's settings from the environment: a bad value stops the run, with the default devices too
expect_error 1 "HET_CPU_ISA='avx9'" -- env HET_CPU_ISA=avx9 "$hetrun" run -m "$model" -p hi -n 2
expect_error 1 "HET_CPU_STREAM='l2'" -- env HET_CPU_STREAM=l2 "$hetrun" run -m "$model" -p hi -n 2 --device cpu

# sampling options of run: each changes greedy text as it must (stories260K
# repeats itself within 48 tokens), bad values are one line
expect_error 2 "\-\-logit-bias: '400' is not TOKEN=BIAS" -- "$hetrun" run --logit-bias 400
expect_error 2 "\-\-logit-bias: '9999=1' is not TOKEN=BIAS" -- "$hetrun" run --logit-bias 9999=1 -n 1
expect_error 2 "\-\-min-p: '2' is not a number in \[0, 1\]" -- "$hetrun" run --min-p 2
expect_error 2 "\-\-repeat-last-n: '-2' is not an integer" -- "$hetrun" run --repeat-last-n -2
greedy() { "$hetrun" run -m "$model" -p "Once upon a time" -n 48 --temp 0 -t 1 "$@" 2>/dev/null; }
base=$(greedy)
for opt in "--repeat-penalty 1.8" "--presence-penalty 2" "--frequency-penalty 2"; do
    # shellcheck disable=SC2086
    got=$(greedy $opt); [ -n "$got" ] && [ "$got" != "$base" ] && ok || bad "run $opt did not change the text"
done
[ "$(greedy --repeat-penalty 1.8 --repeat-last-n 0)" = "$base" ] && ok || bad "--repeat-last-n 0 did not turn it off"
[ "$(greedy --temp 1 --min-p 1 --seed 5)" = "$base" ] && ok || bad "--min-p 1 is not greedy"
forced=$(greedy --logit-bias 400=100,1=-5 -n 6)
[ "$forced" = "Once upon a time do do do do do do" ] && ok || bad "--logit-bias 400=100 gave '$forced'"

# every fixture model loads, tokenizes and generates
for m in "$model" "$shared"/models/llama-2-tiny-random.gguf "$shared"/models/synthetic/*.gguf; do
    case "$m" in *vocab-*) continue;; esac
    [ -f "$m" ] || continue
    if out=$("$hetrun" run -m "$m" -p "Hello world" -n 8 --temp 0 2>"$tmp/err"); then ok
    else bad "run $(basename "$m"): $(cat "$tmp/err")"; fi
done

# tokenize: qwen2 pre-tokenizer on the qwen3 vocabulary
if [ -f "$shared/models/synthetic/vocab-qwen3.gguf" ]; then
    got=$("$hetrun" tokenize -m "$shared/models/synthetic/vocab-qwen3.gguf" -p "Hello world")
    [ "$got" = "9707 1879" ] && ok || bad "tokenize qwen3 'Hello world' -> '$got', want '9707 1879'"
fi
got=$("$hetrun" tokenize -m "$model" -p "Once upon a time")
[ "$got" = "1 403 407 261 378" ] && ok || bad "tokenize stories 'Once upon a time' -> '$got'"

# logits: header and size
if "$hetrun" logits -m "$model" -p "Once upon a time" -o "$tmp/l.bin" 2>/dev/null; then
    size=$(stat -c %s "$tmp/l.bin")   # 5 tokens (BOS + 4), 512 vocab
    [ "$size" = $((8 + 5*4 + 5*512*4)) ] && ok || bad "logits file size $size"
else bad "logits failed"; fi

# --f32-activations reaches the CPU device: a quantised model's logits move
# (no int8 rounding of activations), a float model's do not, and plan says so
q8="$shared/models/synthetic/qwen3-tiny-q8_0.gguf"
if [ -f "$q8" ]; then
    "$hetrun" logits -m "$q8" -p "Hello world" -o "$tmp/q.bin" 2>/dev/null \
        && "$hetrun" logits -m "$q8" -p "Hello world" -o "$tmp/qf.bin" --f32-activations 2>/dev/null \
        && ! cmp -s "$tmp/q.bin" "$tmp/qf.bin" && ok || bad "--f32-activations does not change q8_0 logits"
fi
"$hetrun" logits -m "$model" -p "Once upon a time" -o "$tmp/lf.bin" --f32-activations 2>/dev/null \
    && cmp -s "$tmp/l.bin" "$tmp/lf.bin" && ok || bad "--f32-activations changes an F32 model's logits"
HET_CALIBRATE=0 "$hetrun" plan -m "$model" --f32-activations >"$tmp/plan" 2>&1
grep -q "f32 activations" "$tmp/plan" && ok || bad "plan does not name the f32-activation CPU"

# info and bench --json
info=$("$hetrun" info -m "$model" 2>&1)
grep -q "n_embd 64, n_layer 5" <<<"$info" && ok || bad "info hyperparameters"
json=$("$hetrun" bench -m "$model" --devices cpu -p 16 -n 8 -r 1 --json 2>/dev/null)
for k in pp_tps tg_tps pp_tps_min tg_tps_max threads weight_bytes peak_int8_gops peak_f32_gflops pp_bound_tps \
         tg_of_bound read_bandwidth_gbs_min tg_of_run_bound run_bandwidth_gbs_max sample_us sample_server_us open_s; do
    echo "$json" | grep -q "\"$k\":" && ok || bad "bench --json lacks $k: $json"
done
# with more than one thread, the hand-off latency measured beside the bound (tools/handoff.c): positive, min <= med
# <= max, or null where the threads could not run at once (a busy machine: this suite's tests side by side)
python3 -c "
import json, sys
j = json.loads(sys.argv[1])
h = [j.get(k, 'absent') for k in ('handoff_ns_min', 'handoff_ns', 'handoff_ns_max')]
ok = j['threads'] < 2 or h == [None] * 3 or (None not in h and 'absent' not in h and 0 < h[0] <= h[1] <= h[2])
sys.exit(0 if ok else 1)" "$json" && ok || bad "bench --json hand-off latency: $json"
# bench says how long opening the model took (load time is what a user waits for first)
grep -Eq '"open_s":[0-9]+\.[0-9]{3}[,}]' <<<"$json" && ok || bad "bench --json open_s is not seconds: $json"
# bench times sampling too (what every token of run and serve pays), with run's sampling flags
"$hetrun" bench -m "$model" --devices cpu -p 0 -n 4 -r 1 --top-k 7 --temp 0.5 >"$tmp/bs.txt" 2>&1
grep -Eq "; opened in [0-9]+\.[0-9]{2} s \(read, weights prepared\)$" "$tmp/bs.txt" && ok || bad "bench's first line lacks the open time: $(head -1 "$tmp/bs.txt")"
grep -Eq "^sample +[0-9]+ us/token \(temp 0.5, top-k 7, top-p 0.95 over 512 tokens" "$tmp/bs.txt" && ok ||
    bad "bench's sampling line: $(cat "$tmp/bs.txt")"
# a model path with a quote in it stays valid JSON
cp "$model" "$tmp/a \"q\".gguf"
"$hetrun" bench -m "$tmp/a \"q\".gguf" --devices cpu -p 8 -n 2 -r 1 --json 2>/dev/null | python3 -c "
import json, sys
sys.exit(0 if json.load(sys.stdin)['model'].endswith('a \"q\".gguf') else 1)" && ok || bad "bench --json with a quote in the model path"
# which processor: the CPU device's description carries cpuid's family and model (as /proc/cpuinfo has them)
fam=$(awk -F': *' '/^cpu family/ {printf "%x", $2; exit}' /proc/cpuinfo)
mod=$(awk -F': *' '/^model[ \t]/ {printf "%x", $2; exit}' /proc/cpuinfo)
python3 -c "import json,sys; d=json.loads(sys.argv[1])['device_descriptions']['cpu']; sys.exit(0 if ('family %sh model %sh' % (sys.argv[2], sys.argv[3])) in d else 1)" \
    "$json" "$fam" "$mod" && ok || bad "bench --json: the cpu description lacks family $fam model $mod: $json"
# the decode run read memory between its tokens (-n 8: one pass), at a rate
python3 -c "import json,sys; j=json.loads(sys.argv[1]); sys.exit(0 if j['run_bandwidth_gbs'] > 0 and
    j['tg_of_run_bound'] > 0 else 1)" "$json" && ok || bad "no reads between decode tokens: $json"
# with a SIMD level, the CPU's peaks are measured and give prefill a bound
if grep -qw avx2 /proc/cpuinfo; then
    python3 -c "import json,sys; j=json.loads(sys.argv[1]); sys.exit(0 if j['peak_int8_gops'] > 0 and
        j['peak_f32_gflops'] > 0 and j['pp_bound_tps'] > 0 else 1)" "$json" && ok || bad "no prefill bound: $json"
fi
# bench --load: loaded figures beside the quiet ones, the busy loops gone afterwards (no timing asserted)
json=$("$hetrun" bench -m "$model" -p 8 -n 4 -r 2 --load 2 --json 2>"$tmp/load.err")
python3 -c "import json,sys; j=json.loads(sys.argv[1]); sys.exit(0 if j['load'] == 2 and
    all(j[k] > 0 for k in ('pp_tps', 'tg_tps', 'pp_load_tps', 'tg_load_tps', 'tg_load_tps_min')) else 1)" "$json" \
    && ok || bad "bench --load 2: $json $(cat "$tmp/load.err")"
# the busy loops are forks of hetrun: same command line
pgrep -f -- "-r 2 --load 2 --json" >/dev/null && bad "bench --load left busy loops behind" || ok
text=$("$hetrun" bench -m "$model" -p 8 -n 4 -r 1 --load 1 2>&1)
grep -q "^tg4 .* beside 1 busy loop: .*x quiet  context switches/token" <<<"$text" && ok || bad "bench --load text: $text"
"$hetrun" bench -m "$model" --load 0 >"$tmp/load0" 2>&1
check "bench --load 0 is refused with one line" [ $? != 0 -a "$(grep -c . "$tmp/load0")" = 1 ]
# bench -d: each run starts from a cache of D tokens; the decode bound counts the
# cache rows a token reads (F16 K and V of every kv head of every layer, over
# D + (n+1)/2 positions on average) beside the weights
json=$("$hetrun" bench -m "$model" --devices cpu -p 8 -n 4 -d 20 -r 1 --json 2>/dev/null)
python3 -c "
import json, re, sys
j = json.loads(sys.argv[1])
hp = dict(re.findall(r'(n_layer|n_head_kv|head_dim) (\d+)', sys.argv[2]))
want = int(2 * int(hp['n_head_kv']) * int(hp['head_dim']) * 2 * int(hp['n_layer']) * (20 + 2.5))
sys.exit(0 if j['depth'] == 20 and j['kv_bytes_per_token'] == want and j['pp_tps'] > 0 and j['tg_tps'] > 0 else 1)
" "$json" "$info" && ok || bad "bench -d 20: $json"
text=$("$hetrun" bench -m "$model" --devices cpu -p 0 -n 4 -d 20 -r 1 2>&1)
grep -q "^tg4 @ d20 .*KV cache" <<<"$text" && ! grep -q "^pp" <<<"$text" && ok || bad "bench -p 0 -d 20 text: $text"
"$hetrun" bench -m "$model" -d 100 -c 64 >"$tmp/d.err" 2>&1
check "bench -d past the context is refused with one line" [ $? != 0 -a "$(grep -c . "$tmp/d.err")" = 1 ]
"$hetrun" bench -m "$model" -p 0 -n 0 >"$tmp/d.err" 2>&1
check "bench -p 0 -n 0 is refused with one line" [ $? != 0 -a "$(grep -c . "$tmp/d.err")" = 1 ]
# bench sweeps (llama-bench's lists): every depth with every pp run alone and
# every tg run alone, one JSON object (one text line) each, in that order
"$hetrun" bench -m "$model" --devices cpu -p 8,16 -n 4 -d 0,12 -r 1 --json >"$tmp/sweep" 2>/dev/null
python3 -c "
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
got = [(r['depth'], r['pp'], r['tg'], r['pp_tps'] > 0, r['tg_tps'] > 0) for r in rows]
want = [(0, 8, 0, True, False), (0, 16, 0, True, False), (0, 0, 4, False, True),
        (12, 8, 0, True, False), (12, 16, 0, True, False), (12, 0, 4, False, True)]
sys.exit(0 if got == want else 1)
" "$tmp/sweep" && ok || bad "bench -p 8,16 -n 4 -d 0,12 --json: $(cat "$tmp/sweep")"
text=$("$hetrun" bench -m "$model" --devices cpu -p 8 -n 2,4 -d 0,12 -r 1 2>&1)
[ "$(grep -c '^model ' <<<"$text")" = 1 ] && [ "$(grep -o '^[pt][pg][0-9]*\( @ d[0-9]*\)\?' <<<"$text" | tr '\n' ' ')" = \
    "pp8 tg2 tg4 pp8 @ d12 tg2 @ d12 tg4 @ d12 " ] && ok || bad "bench sweep text: $text"
"$hetrun" bench -m "$model" -p 8,x >"$tmp/d.err" 2>&1
check "bench -p 8,x is refused with one line" [ $? != 0 -a "$(grep -c . "$tmp/d.err")" = 1 ]
"$hetrun" run -m "$model" -p hi -n 2,3 >"$tmp/d.err" 2>&1
check "run -n 2,3 (a list is bench's) is refused with one line" [ $? != 0 -a "$(grep -c . "$tmp/d.err")" = 1 ]
"$hetrun" bench -m "$model" -p 8 -n 4 -d 8,100 -c 64 >"$tmp/d.err" 2>&1
check "bench -d list past the context is refused with one line" [ $? != 0 -a "$(grep -c . "$tmp/d.err")" = 1 ]

# auto, the default device set (the suite sets HET_DEVICES=cpu): `hetrun devices`
# says what it takes and why it skips the rest; plan without flags plans over it
env -u HET_DEVICES "$hetrun" devices >"$tmp/dev" 2>&1
auto=$(sed -n 's/^auto *= \([^ ]*\) .*/\1/p' "$tmp/dev")
[[ "$auto" == cpu* ]] && ok || bad "devices: auto does not take the CPU first: $(cat "$tmp/dev")"
grep -Eq '^npu +(skipped: .+|AMD NPU .+)$' "$tmp/dev" && ok || bad "devices: the NPU neither taken nor skipped with a reason"
grep -q '^  cpu .*shares the CPU' "$tmp/dev" && ok || bad "devices: no caps line for the CPU"
env -u HET_DEVICES HET_CALIBRATE=0 "$hetrun" plan -m "$model" --json >"$tmp/auto.json" 2>/dev/null
python3 -c "import json,sys; j=json.load(open(sys.argv[1])); sys.exit(0 if ','.join(d['name'] for d in j['devices'])
    == sys.argv[2] else 1)" "$tmp/auto.json" "$auto" && ok || bad "plan without --devices does not plan over auto ($auto)"

# --help: each flag with its value placeholder and default; --version
"$hetrun" run --help >"$tmp/help" 2>&1
for pat in '-n, --n-predict N .*default: run 128' '--temp X .*default: 0.8' '--seed N .*default: 42' \
           '-c, --ctx N .*default: min(' '--devices LIST .*default' '--policy NAME .*default'; do
    grep -q -- "$pat" "$tmp/help" && ok || bad "run --help lacks /$pat/"
done
"$hetrun" serve --help >"$tmp/help" 2>&1
grep -q -- '--parallel N .*default 4' "$tmp/help" && ok || bad "serve --help: --parallel without its default"
"$hetrun" bench --help >"$tmp/help" 2>&1
grep -q -- '-p, --prompt N .*default: 512' "$tmp/help" && grep -q -- '-d, --depth N .*default: 0' "$tmp/help" && ok ||
    bad "bench --help: -p is a token count (default 512), -d a depth: $(cat "$tmp/help")"
"$hetrun" chat --help >"$tmp/help" 2>&1
grep -q -- '--system TEXT .*default: none' "$tmp/help" && ok || bad "chat --help: --system without placeholder/default"
"$hetrun" --version | grep -q '^hetrun [0-9][0-9.]* (libhet [0-9][0-9.]*)$' && ok || bad "hetrun --version: $("$hetrun" --version 2>&1)"

# what-if: a reference machine's simulated devices only, labelled unmeasured
"$hetrun" plan -m "$model" --profile ryzen-ai-7040 --phase prefill --batch 16 --json >"$tmp/wi.json" 2>/dev/null
python3 -c "import json,sys; j=json.load(open(sys.argv[1])); sim={d['name'] for d in j['devices'] if d['simulated']}
sys.exit(0 if j['what_if'] == 'ryzen-ai-7040' and sim == {'zen4','radeon780m','xdna1'} and
    all(n['device'] in sim for n in j['nodes']) and
    all('what-if ryzen-ai-7040 (unmeasured)' in d['profile'] for d in j['devices'] if d['simulated']) else 1)" \
    "$tmp/wi.json" && ok || bad "plan --profile ryzen-ai-7040: not a plan over the what-if devices alone"
"$hetrun" plan -m "$model" --profile ryzen-ai-7040 >"$tmp/wi.txt" 2>&1
grep -q "simulated (unmeasured) figures" "$tmp/wi.txt" && ok || bad "plan --profile ryzen-ai-7040 does not say what is simulated"

# bench's decode bound on a mixture of experts counts the k routed experts of
# each 3-D expert tensor, not all of them (qwen3moe-tiny: 2 of 8; output tied)
moe="$tmp/moe.gguf"
if "$hetrun" mkmodel --preset qwen3moe-tiny --type q8_0 --vocab "$shared/models/synthetic/vocab-qwen3.gguf" \
        -o "$moe" >/dev/null 2>&1; then
    want=$("$hetrun" info -m "$moe" | awk 'match($0, / [0-9]+ bytes at /) {
        b = substr($0, RSTART + 1, RLENGTH - 11); if ($1 ~ /_exps\.weight$/) b = b * 2 / 8; t += b }
        END { printf "%d", t }')
    got=$("$hetrun" bench -m "$moe" --devices cpu -p 4 -n 2 -r 1 --json 2>/dev/null |
          python3 -c "import json,sys; print(json.load(sys.stdin)['decode_bytes_per_token'])")
    [ -n "$want" ] && [ "$got" == "$want" ] && ok || bad "bench decode bytes on qwen3moe-tiny: $got, want $want"
else bad "mkmodel qwen3moe-tiny"; fi

# a shape of one's own names the dimensions it lacks, and one given whole is written
"$hetrun" mkmodel -o "$tmp/own.gguf" --arch qwen3 --n-layer 2 --n-embd 64 \
    --vocab "$shared/models/synthetic/vocab-qwen3.gguf" >"$tmp/own.txt" 2>&1
[ $? -eq 2 ] && grep -q "missing --n-head --n-ff -c" "$tmp/own.txt" && ok || bad "mkmodel without a preset: $(cat "$tmp/own.txt")"
"$hetrun" mkmodel -o "$tmp/own.gguf" --arch qwen3 --n-layer 2 --n-embd 64 --n-head 4 --n-ff 96 -c 256 --type q8_0 \
    --vocab "$shared/models/synthetic/vocab-qwen3.gguf" >/dev/null 2>&1 &&
    "$hetrun" info -m "$tmp/own.gguf" >"$tmp/own.txt" 2>&1 && grep -q "head_count_kv  *u32  *4$" "$tmp/own.txt" &&
    ok || bad "mkmodel of its own shape"

finish
