#!/usr/bin/env bash
# test_reference.sh — greedy generation on stories260K reproduces llama.cpp's
# continuations (shared/reference/) byte for byte, on every device given in
# HET_TEST_DEVICES (default: cpu, plus vulkan when a Vulkan device exists).
set -euo pipefail
ref="${HET_SHARED_DIR:-../shared}/reference"
model="${HET_SOURCE_DIR:-.}/models/stories260K.gguf"
hetrun="${HET_HETRUN:?HET_HETRUN must point at the hetrun binary}"
[ -d "$ref" ] || { echo "SKIP: no reference dir $ref"; exit 77; }
# every device this build and machine have: the CPU, and Vulkan when a device exists
if [ -z "${HET_TEST_DEVICES:-}" ]; then
    HET_TEST_DEVICES=cpu
    if "$hetrun" devices 2>/dev/null | grep -q '^vulkan[0-9]'; then HET_TEST_DEVICES="cpu vulkan"; fi
fi
devices="$HET_TEST_DEVICES"
echo "devices: $devices"
pass=0; fail=0
for prompt_file in "$ref"/*.prompt; do
    expected_file="${prompt_file%.prompt}.expected"
    prompt="$(cat "$prompt_file")"
    for dev in $devices; do
        out="$("$hetrun" run -m "$model" -p "$prompt" -n 64 --temp 0 --device "$dev" 2>/dev/null)" || {
            echo "FAIL $(basename "$prompt_file") on $dev: hetrun exited non-zero"; fail=$((fail+1)); continue; }
        got="${out#"$prompt"}"
        if [ "$got" == "$(cat "$expected_file")" ]; then
            pass=$((pass+1))
        else
            echo "FAIL $(basename "$prompt_file") on $dev"
            echo "  expected: $(cat "$expected_file" | head -c 300)"
            echo "  got:      ${got:0:300}"
            fail=$((fail+1))
        fi
    done
done
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
