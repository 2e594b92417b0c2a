#!/usr/bin/env bash
# test_moe_devices.sh — the experts give the same answer on every device:
# tiny qwen3moe and qwen2moe models (Q8_0, random weights) decode greedily
# with every mul_mat_id pinned to the emulated NPU, and with every
# mul_mat_id pinned to Vulkan (lavapipe), --strict (a node that falls back
# to the CPU is an error), and the texts must equal --devices cpu's; the
# stats must show the pinned device ran nodes. The argmax of every prompt
# position's logits must agree and the logits stay within 1e-4 of their
# range. Each device is compared with the CPU doing the same arithmetic:
# the NPU's int8 activations (one scale per 32 elements, as the CPU's q8
# rows) beside the CPU's default, Vulkan's F32 activations beside the CPU
# with --f32-activations (int8 against F32 activations moves near-ties of
# a random model: ~1e-2 of the logits' range). A kernel that ignored the
# ids (one expert for every slot) changes every layer's routed sum, so the
# texts and logits differ (checked by breaking the Vulkan shader's id read).
# Vulkan is skipped (not the NPU) when lavapipe is absent.
set -uo pipefail
hetrun="${HET_HETRUN:?}"
vocab="${HET_SHARED_DIR:-../shared}/models/synthetic/vocab-qwen3.gguf"
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
source "$(dirname "${BASH_SOURCE[0]}")/cli_harness.sh"
[ -f "$vocab" ] || { echo "SKIP: no $vocab"; exit 77; }
export HET_CALIBRATE=0
have_vk=0
"$hetrun" devices 2>/dev/null | grep -q '^vulkan[0-9]' && have_vk=1
[ $have_vk = 1 ] || echo "note: no Vulkan device: the Vulkan runs are skipped"

prompt="The capital of France is"

for preset in qwen3moe-tiny qwen2moe-tiny; do
    m="$tmp/$preset.gguf"
    "$hetrun" mkmodel --preset "$preset" --type q8_0 --vocab "$vocab" -o "$m" >/dev/null 2>"$tmp/err" \
        || { bad "mkmodel $preset: $(tail -1 "$tmp/err")"; continue; }
    # CPU baselines: int8 activations (as the NPU's) and F32 ones (as Vulkan's)
    for act in int8 f32; do
        flag=""; [ $act = f32 ] && flag=--f32-activations
        # shellcheck disable=SC2086
        "$hetrun" run -m "$m" --devices cpu $flag -p "$prompt" -n 24 --temp 0 >"$tmp/cpu-$act.txt" 2>"$tmp/err" \
            || bad "$preset cpu $act: $(tail -1 "$tmp/err")"
        # shellcheck disable=SC2086
        "$hetrun" logits -m "$m" --devices cpu $flag -p "$prompt" -o "$tmp/cpu-$act.bin" 2>"$tmp/err" \
            || bad "$preset cpu $act logits: $(tail -1 "$tmp/err")"
    done
    base="$(cat "$tmp/cpu-int8.txt")"
    [ ${#base} -gt $((${#prompt} + 8)) ] && ok || bad "$preset cpu: too little text: '$base'"
    runs=("npu|--devices cpu,npu --npu emulate|npu|int8")
    [ $have_vk = 1 ] && runs+=("vulkan|--devices cpu,vulkan --f32-activations|vulkan0|f32")
    for r in "${runs[@]}"; do
        IFS='|' read -r dev flags statname act <<<"$r"
        # shellcheck disable=SC2086  # flags are words
        out=$("$hetrun" run -m "$m" $flags --pin mul_mat_id=$dev --strict -p "$prompt" -n 24 --temp 0 \
              --stats=json 2>"$tmp/err") || { bad "$preset $dev: $(tail -1 "$tmp/err")"; continue; }
        # 2 layers x 3 expert matmuls, each step: the pinned device ran nodes
        grep -q "\"name\":\"$statname\",\"splits\":[1-9][0-9]*,\"nodes\":[1-9]" "$tmp/err" && ok \
            || bad "$preset $dev: the pinned device ran nothing: $(tail -1 "$tmp/err")"
        want="$(cat "$tmp/cpu-$act.txt")"
        [ "$out" == "$want" ] && ok || bad "$preset $dev: text differs: '$out' vs cpu '$want'"
        # shellcheck disable=SC2086
        "$hetrun" logits -m "$m" $flags --pin mul_mat_id=$dev --strict -p "$prompt" -o "$tmp/$dev.bin" \
            --stats=json 2>"$tmp/err" || { bad "$preset $dev logits: $(tail -1 "$tmp/err")"; continue; }
        grep -q "\"name\":\"$statname\",\"splits\":[1-9][0-9]*,\"nodes\":[1-9]" "$tmp/err" && ok \
            || bad "$preset $dev logits: the pinned device ran nothing: $(tail -1 "$tmp/err")"
        msg=$(cmp_logits "$tmp/cpu-$act.bin" "$tmp/$dev.bin" 1e-4 2>&1) && ok || bad "$preset $dev logits vs cpu: $msg"
        echo "$preset $dev: $msg"
    done
done
finish test_moe_devices
