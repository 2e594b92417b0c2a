#!/usr/bin/env bash
# test_placement.sh — placement does not change results: greedy text on the
# reference prompts is identical for single:cpu, single:vulkan, alternate and
# the planner's own choice (fastest), and so are the argmaxes of every
# position's logits, which agree within the per-type tolerance. A pinned
# three-device mix (CPU + Vulkan + emulated NPU) runs too.
set -uo pipefail
hetrun="${HET_HETRUN:?}"
ref="${HET_SHARED_DIR:-../shared}/reference"
model="${HET_SOURCE_DIR:-.}/models/stories260K.gguf"
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
source "$(dirname "${BASH_SOURCE[0]}")/cli_harness.sh"
[ -d "$ref" ] || { echo "SKIP: no reference dir $ref"; exit 77; }
if ! "$hetrun" devices 2>/dev/null | grep -q '^vulkan[0-9]'; then
    echo "SKIP: no Vulkan device (hetrun devices shows none)"; exit 77
fi
export HET_CALIBRATE=0   # the unmeasured default profiles: deterministic plans

policies=("single:cpu" "single:vulkan" "alternate" "fastest")
for pf in "$ref"/*.prompt; do
    prompt="$(cat "$pf")"; want="$(cat "${pf%.prompt}.expected")"
    for pol in "${policies[@]}"; do
        out=$("$hetrun" run -m "$model" --devices cpu,vulkan --policy "$pol" -p "$prompt" -n 64 --temp 0 2>"$tmp/err") \
            || { bad "$pol $(basename "$pf"): $(tail -1 "$tmp/err")"; continue; }
        [ "${out#"$prompt"}" == "$want" ] && ok || bad "$pol $(basename "$pf"): text differs: ${out:0:120}"
    done
done

# logits of every position: compare each policy with single:cpu
p1="$(cat "$ref/stories260K-1.prompt")"
for pol in "${policies[@]}"; do
    "$hetrun" logits -m "$model" --devices cpu,vulkan --policy "$pol" -p "$p1" -o "$tmp/$pol.bin" 2>"$tmp/err" \
        || bad "logits $pol: $(tail -1 "$tmp/err")"
done
for pol in single:vulkan alternate fastest; do
    # f32 weights, f16 KV cache: the devices sum in different orders and evaluate rope angles
    # in different float steps, and a k/v value that lands on the other side of an f16 rounding
    # boundary moves later logits by ~1e-4 of their range; 1e-3 is the tolerance for f32 models
    msg=$(cmp_logits "$tmp/single:cpu.bin" "$tmp/$pol.bin" 1e-3 2>&1) && ok || bad "logits $pol vs single:cpu: $msg"
done

# three devices in one graph: alternate over cpu,vulkan,npu(emulated), and a pinned mix,
# on a quantised model the NPU contract takes (its K must be a multiple of 32)
qm="${HET_SHARED_DIR:-../shared}/models/synthetic/qwen3-tiny-q8_0.gguf"
if [ -f "$qm" ]; then
    base=$("$hetrun" run -m "$qm" -p "Hello world" -n 16 --temp 0 2>/dev/null)
    for mix in "--policy alternate" "--pin attn_q*=npu,ffn_*=vulkan,attn*=cpu"; do
        out=$("$hetrun" run -m "$qm" --devices cpu,vulkan,npu --npu emulate $mix -p "Hello world" -n 16 --temp 0 \
              --stats=json 2>"$tmp/err") || { bad "3 devices $mix: $(tail -1 "$tmp/err")"; continue; }
        grep -q '"name":"npu","splits":[1-9]' "$tmp/err" && ok || bad "3 devices $mix: the NPU ran nothing: $(tail -1 "$tmp/err")"
        grep -q '"name":"vulkan0","splits":[1-9]' "$tmp/err" && ok || bad "3 devices $mix: Vulkan ran nothing"
        # int8 activations on the NPU may move a near-tie; the first tokens must agree
        [ "${out:0:24}" == "${base:0:24}" ] && ok || bad "3 devices $mix: '${out:0:40}' vs cpu '${base:0:40}'"
    done
fi
finish
