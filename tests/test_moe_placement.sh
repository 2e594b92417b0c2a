#!/usr/bin/env bash
# test_moe_placement.sh — where the planner puts a mixture-of-experts layer,
# on the tiny qwen3moe and qwen2moe models (written by mkmodel):
#  - on Vulkan alone the whole forward, routing included (top_k, sum_rows,
#    moe_sum), is one split with no fallback (--strict): the CPU is not
#    needed in the middle of a MoE layer; and its logits are the CPU's;
set -uo pipefail
hetrun="${HET_HETRUN:?}"
shared="${HET_SHARED_DIR:-../shared}"
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
source "$(dirname "${BASH_SOURCE[0]}")/cli_harness.sh"
if ! "$hetrun" devices 2>/dev/null | grep -q '^vulkan[0-9]'; then
    echo "SKIP: no Vulkan device (hetrun devices shows none)"; exit 77
fi
export HET_CALIBRATE=0   # unmeasured default profiles unless a test names its own: deterministic plans
for arch in qwen3moe qwen2moe; do
    "$hetrun" mkmodel --preset "$arch-tiny" --vocab "$shared/models/synthetic/vocab-qwen3.gguf" \
        -o "$tmp/$arch.gguf" >/dev/null 2>"$tmp/err" || { bad "mkmodel $arch: $(tail -1 "$tmp/err")"; }
done

# plan_json FILE: "nodes splits fallbacks devices(op:device ...)" of a plan --json
plan_summary() {
    python3 - "$1" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
devs = sorted({n["device"] for n in p["nodes"]})
print(len(p["nodes"]), p["n_splits"], p["n_fallbacks"], ",".join(devs))
PY
}

# 1. Vulkan alone keeps every node, routing included, in one split
for arch in qwen3moe qwen2moe; do
    for phase in "--phase decode" "--phase prefill --batch 7"; do
        what="$arch vulkan $phase"
        "$hetrun" plan -m "$tmp/$arch.gguf" --devices vulkan --strict $phase --json >"$tmp/p.json" 2>"$tmp/err" \
            || { bad "$what: $(tail -1 "$tmp/err")"; continue; }
        read -r n splits fb devs < <(plan_summary "$tmp/p.json")
        [ "$splits" = 1 ] && [ "$fb" = 0 ] && [ "$devs" = vulkan0 ] && ok \
            || bad "$what: $n nodes in $splits splits, $fb fallbacks, on $devs"
        grep -q '"op":"top_k"' "$tmp/p.json" && grep -q '"op":"moe_sum"' "$tmp/p.json" && ok \
            || bad "$what: no routing nodes in the plan"
    done
    # the logits of every position agree with the CPU's
    for d in cpu vulkan; do
        "$hetrun" logits -m "$tmp/$arch.gguf" --devices $d --strict -p "Once upon a time there was a cat" \
            -o "$tmp/$arch-$d.bin" >/dev/null 2>"$tmp/err" || bad "logits $arch $d: $(tail -1 "$tmp/err")"
    done
    msg=$(python3 - "$tmp/$arch-cpu.bin" "$tmp/$arch-vulkan.bin" <<'PY'
import struct, sys, array
def rd(p):
    f = open(p, 'rb'); n, v = struct.unpack('<ii', f.read(8)); f.read(4 * n)
    a = array.array('f'); a.frombytes(f.read(4 * n * v)); return n, v, a
n, v, a = rd(sys.argv[1]); m, w, b = rd(sys.argv[2])
assert (n, v) == (m, w) and n > 1, "shapes differ"
worst = 0.0
for t in range(n):
    ra, rb = a[t*v:(t+1)*v], b[t*v:(t+1)*v]
    if max(range(v), key=ra.__getitem__) != max(range(v), key=rb.__getitem__): sys.exit("argmax differs at %d" % t)
    worst = max(worst, max(abs(x - y) for x, y in zip(ra, rb)) / max(abs(x) for x in ra))
print("max rel diff %.2e" % worst)
sys.exit(0 if worst <= 1e-3 else 1)
PY
) && ok || bad "logits $arch vulkan vs cpu: $msg"
done

finish
