#!/usr/bin/env bash
# test_pool_cli.sh — the memory pool as hetrun shows it: `--stats` and
# `--stats=json` (one JSON object on one stderr line) report the backing,
# sizes, peak scratch against the naive sum and the bytes copied between
# devices (0 for CPU + Vulkan in alternation); `hetrun devices` names the
# backing; HET_POOL / HET_POOL_MB choose backing and size, and their errors
# are one clear line. The weights stay in the model file's mapping unless
# HET_WEIGHTS=pool copies them in (the same text either way).
set -uo pipefail
hetrun="${HET_HETRUN:?}"
src="${HET_SOURCE_DIR:-.}"
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
export HET_CALIBRATE=0
source "$(dirname "${BASH_SOURCE[0]}")/cli_harness.sh"

model="$src/models/stories260K.gguf"
[ -f "$model" ] || { echo "skipped: $model missing"; exit 77; }

"$hetrun" devices >"$tmp/dev" 2>&1
devices=cpu,vulkan
if ! grep -q '^vulkan[0-9]' "$tmp/dev"; then
    echo "no Vulkan device: the split runs on cpu only"
    devices=cpu
fi
check "hetrun devices names the pool backing" grep -q '^pool .*memfd\|^pool .*dma-heap\|^pool .*udmabuf\|^pool .*amdxdna' "$tmp/dev"

run=(run -m "$model" -n 24 --temp 0 -p "Once upon a time")
"$hetrun" "${run[@]}" --device cpu >"$tmp/ref" 2>/dev/null
"$hetrun" "${run[@]}" --devices "$devices" --policy alternate --stats=json >"$tmp/out" 2>"$tmp/err"
check "--stats=json run exits 0" [ $? = 0 ]
check "same text as the CPU alone" cmp -s "$tmp/ref" "$tmp/out"
n_json=$(grep -c '^{' "$tmp/err")
check "exactly one JSON line on stderr (got $n_json)" [ "$n_json" = 1 ]
json="$(grep '^{' "$tmp/err")"
field() { # field NAME: the value of a top-level member, via jq or python3
    if command -v jq >/dev/null; then jq -r ".$1" <<<"$json"
    else python3 -c "import json,sys; print(json.loads(sys.stdin.read())['$1'])" <<<"$json"; fi
}
if command -v jq >/dev/null || command -v python3 >/dev/null; then
    backing=$(field pool_backing); copied=$(field copied_bytes)
    peak=$(field scratch_peak_bytes); naive=$(field scratch_naive_bytes); weights_in=$(field weights_in)
    check "pool_backing is a backing ($backing)" grep -qE '^(memfd|dma-heap|udmabuf|amdxdna)' <<<"$backing"
    check "copied_bytes is 0 ($copied)" [ "$copied" = 0 ]
    check "peak scratch $peak below the naive sum $naive" [ "$peak" -gt 0 -a "$peak" -lt "$naive" ]
    check "weights left in the mapped file ($weights_in)" [ "$weights_in" = "mapped file" ]
else
    echo "no jq or python3: JSON members checked by pattern"
    check "json members" grep -q '"pool_backing":"[a-z].*"copied_bytes":0,"scratch_peak_bytes":[1-9]' <<<"$json"
fi

"$hetrun" "${run[@]}" --devices "$devices" --policy alternate --stats >/dev/null 2>"$tmp/err"
check "text stats: pool line" grep -q '^pool [0-9.]* [KMG]iB at .*granule' "$tmp/err"
check "text stats: zero copies" grep -q '^copied between devices: 0 bytes' "$tmp/err"
check "text stats: scratch peak vs naive" grep -q '^scratch: peak .* vs .* naive sum' "$tmp/err"

HET_WEIGHTS=pool "$hetrun" "${run[@]}" --devices "$devices" --policy alternate --stats=json >"$tmp/out" 2>"$tmp/err"
check "HET_WEIGHTS=pool runs, same text" cmp -s "$tmp/ref" "$tmp/out"
check "HET_WEIGHTS=pool: weights in the pool, nothing copied between devices" \
    grep -q '"copied_bytes":0,.*"weights_in":"pool"' "$tmp/err"

HET_POOL=off "$hetrun" "${run[@]}" --devices "$devices" --policy alternate --stats=json >"$tmp/out" 2>"$tmp/err"
check "HET_POOL=off runs, same text" cmp -s "$tmp/ref" "$tmp/out"
check "HET_POOL=off reports no pool" grep -q '"pool_backing":"none"' "$tmp/err"

# one clear error line, exit 1
expect_error() {
    local pat="$1"; shift
    env "$@" "$hetrun" "${run[@]}" >/dev/null 2>"$tmp/err"; local rc=$?
    if [ "$rc" != 1 ] || [ "$(wc -l <"$tmp/err")" != 1 ] || ! grep -q -- "$pat" "$tmp/err"; then
        bad "$* -> rc $rc, want one line /$pat/:"; sed 's/^/    /' "$tmp/err" | head -3
    else ok; fi
}
expect_error "HET_POOL: pool backing list \"bogus\"" HET_POOL=bogus
expect_error "HET_POOL_MB=\"x\" is not a size" HET_POOL_MB=x
expect_error "weights (.*bytes).*HET_POOL_MB" HET_POOL_MB=1 HET_WEIGHTS=pool
expect_error "KV cache .*do not fit" HET_POOL_MB=1
expect_error "HET_WEIGHTS=\"bogus\" is neither mapped nor pool" HET_WEIGHTS=bogus
[ -e /dev/udmabuf ] || expect_error "^hetrun run: pool: udmabuf: /dev/udmabuf" HET_POOL=udmabuf

finish
