#!/usr/bin/env bash
# test_accuracy_cli.sh — `hetrun plan --accuracy`, `--accuracy-budget` and
# `--sensitivity` end to end on the emulated NPU (library-level numbers for
# every model are in test_npu_accuracy.c):
#  - every NPU-supported matmul pinned to it: the JSON carries accuracy.top1,
#    kl_mean, kl_max and one entry per position of the text (decode: one
#    token per eval; prefill: one batch), within the bounds of the C test;
#  - with synthetic profiles where the NPU is faster for every matmul: budget
#    0 leaves the NPU unused and the measured KL is 0; no budget uses it for
#    every matmul; an intermediate budget keeps the predicted KL under it,
#    and the scheduler runs exactly the printed plan;
#  - --sensitivity measure stores a table that later plans read back;
#  - CPU + Vulkan + emulated NPU in one graph (alternate, a pinned mix);
#  - bad values are refused with a message.
set -uo pipefail
hetrun="${HET_HETRUN:?}"
shared="${HET_SHARED_DIR:-../shared}"
ref="$shared/reference"
q3="$shared/models/synthetic/qwen3-tiny-q8_0.gguf"
ll="$shared/models/synthetic/llama-tiny-q4_0.gguf"
[ -f "$q3" ] && [ -f "$ll" ] && [ -d "$ref" ] || { echo "SKIP: synthetic models or reference texts missing"; exit 77; }
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
export XDG_CACHE_HOME="$tmp/cache" HET_CALIBRATE=0
pass=0; fail=0
ok()  { pass=$((pass+1)); }
bad() { fail=$((fail+1)); echo "FAIL: $*"; }
cat "$ref/stories260K-1.prompt" "$ref/stories260K-1.expected" > "$tmp/text.txt"

# check FILE 'python expression over j (the JSON object)' 'what'
check() {
    python3 - "$1" "$2" <<'PY' && ok || bad "$3: $(python3 -c "import json,sys; j=json.load(open(sys.argv[1])); print(json.dumps(j.get('accuracy',{}))[:300])" "$1" 2>&1)"
import json, sys
j = json.load(open(sys.argv[1]))
a = j.get("accuracy", {})
npu = sum(1 for n in j["nodes"] if n["device"] == "npu")
sys.exit(0 if eval(sys.argv[2]) else 1)
PY
}

plan() { # out-file args...
    local out="$1"; shift
    "$hetrun" plan --devices cpu,npu --npu emulate --json "$@" >"$out" 2>"$tmp/err" \
        || { bad "plan $*: $(tail -1 "$tmp/err")"; echo '{"nodes":[]}' >"$out"; }
}

# 1. every supported matmul on the NPU, decode (one token per eval) and prefill (one batch)
plan "$tmp/d.json" -m "$ll" --pin mul_mat=npu --accuracy -f "$tmp/text.txt"
check "$tmp/d.json" 'a["mode"] == "decode" and a["positions"] == len(a["per_position"]) > 40 and npu > 0' "decode: positions"
check "$tmp/d.json" 'a["top1"] >= 0.90 and 0 < a["kl_mean"] <= 2e-3 and a["kl_max"] >= a["kl_mean"]' "decode: top-1/KL"
check "$tmp/d.json" 'abs(a["top1"] - sum(p["cpu"] == p["plan"] for p in a["per_position"]) / a["positions"]) < 1e-5' \
    "decode: top1 is the per-position agreement"
plan "$tmp/p.json" -m "$q3" --pin mul_mat=npu --accuracy --phase prefill --batch 8 -f "$tmp/text.txt"
check "$tmp/p.json" 'a["mode"] == "prefill" and a["top1"] >= 0.90 and 0 < a["kl_mean"] <= 2e-3' "prefill: top-1/KL"
check "$tmp/p.json" 'a["predicted_kl"] > 0 and not a["sensitivity"]["measured"]' "prefill: estimated prediction"
# the text output has the per-position table and the summary line
"$hetrun" plan -m "$q3" --devices cpu,npu --npu emulate --pin mul_mat=npu --accuracy --phase prefill --batch 8 \
    -p "Once upon a time" >"$tmp/t.txt" 2>&1 || bad "text output: $(tail -1 "$tmp/t.txt")"
grep -q 'top-1 agreement [0-9]*/[0-9]* = ' "$tmp/t.txt" && grep -q 'KL(p_cpu || p_plan) mean' "$tmp/t.txt" && ok \
    || bad "text output lacks the summary"

# 2. the budget, with profiles where the NPU wins every matmul (and hand-offs are free)
prof() { # name kind gbps other
    cat <<EOF
{"format":"het-profile","version":1,"het_version":"0.1.0",
 "device":{"name":"$1","description":"synthetic ($1, test)","kind":"$2","emulated":false},
 "measured":false,"label":"synthetic (test)",
 "costs":{"split_us":0,"kernel_switch_us":0,"async":false,"peak_gbps":$3,"peak_gflops":$((10 * $3))},
 "models":[{"op":"matmul","type":"q8_0","fit":{"t0_us":1,"gbps":$3,"gflops":$((10 * $3)),"m_half":0,"error":0},"samples":[]}],
 "handoffs":[{"to":"$4","fixed_us":0,"gbps":0}]}
EOF
}
{ echo '{"format":"het-profile-set","version":1,"profiles":['; prof cpu cpu 1 npu; echo ','; prof npu npu 100 cpu; echo ']}'; } \
    >"$tmp/set.json"
B=(-m "$q3" --profile "$tmp/set.json" --accuracy --phase prefill --batch 8 -f "$tmp/text.txt")
plan "$tmp/b0.json" "${B[@]}" --accuracy-budget 0
check "$tmp/b0.json" 'npu == 0 and a["kept"] >= 15 and a["kl_mean"] == 0 and a["top1"] == 1' "budget 0: NPU unused, KL 0"
check "$tmp/b0.json" 'j["scheduler_differs"] == 0' "budget 0: the scheduler runs the printed plan"
plan "$tmp/bn.json" "${B[@]}"
check "$tmp/bn.json" 'npu == 15 and a["kept"] == 0 and a["kl_mean"] > 0 and a["budget_kl"] is None' "no budget: 15 matmuls"
plan "$tmp/bm.json" "${B[@]}" --accuracy-budget 1e-3
check "$tmp/bm.json" '0 < npu < 15 and 0 < a["predicted_kl"] <= 1e-3 and a["kept"] > 0' "budget 1e-3: some on the NPU"
check "$tmp/bm.json" 'j["scheduler_differs"] == 0 and a["kl_mean"] <= 1e-3' "budget 1e-3: run as planned, measured KL under it"
check "$tmp/bm.json" 'all(n["kl"] == 0 for n in j["nodes"] if n["device"] != "npu") and all(not n["accuracy_kept"] or n["device"] == "cpu" for n in j["nodes"])' \
    "budget 1e-3: KL only on the NPU, kept nodes on the CPU"

# 3. measured sensitivity: stored, then read back
plan "$tmp/s.json" "${B[@]}" --sensitivity measure
check "$tmp/s.json" 'a["sensitivity"]["measured"] and len(a["sensitivity"]["groups"]) == 8 and all(g["kl"] > 0 and g["nodes"] == 2 for g in a["sensitivity"]["groups"] if g["pattern"] != "logits")' \
    "measure: 8 groups with KL"
ls "$XDG_CACHE_HOME"/het/profiles/sensitivity-*.json >/dev/null 2>&1 && ok || bad "measure: no table in the cache"
plan "$tmp/s2.json" -m "$q3" --profile "$tmp/set.json" --phase prefill --batch 8 --accuracy-budget 2e-4
check "$tmp/s2.json" 'a["sensitivity"]["source"].startswith("cached") and 0 < a["predicted_kl"] <= 2e-4' \
    "a later plan reads the cached table"
cp "$XDG_CACHE_HOME"/het/profiles/sensitivity-*.json "$tmp/table.json"
plan "$tmp/s3.json" -m "$q3" --profile "$tmp/set.json" --phase prefill --batch 8 --accuracy-budget 2e-4 \
    --sensitivity "$tmp/table.json"
check "$tmp/s3.json" 'a["sensitivity"]["source"].endswith("table.json") and a["predicted_kl"] == json.load(open(sys.argv[1].replace("s3", "s2")))["accuracy"]["predicted_kl"]' \
    "--sensitivity FILE: the same plan"

# 4. three devices in one graph (CPU + Vulkan + emulated NPU): alternate and a pinned mix give
#    the CPU's results within the bounds above, every device running part of the graph
if "$hetrun" devices 2>/dev/null | grep -q '^vulkan[0-9]'; then
    for mix in "--policy alternate" "--pin attn_q*=npu,ffn_*=vulkan,attn*=cpu"; do
        "$hetrun" plan -m "$ll" --devices cpu,vulkan,npu --npu emulate $mix --accuracy --phase prefill --batch 8 \
            -f "$tmp/text.txt" --json >"$tmp/3.json" 2>"$tmp/err" || { bad "3 devices $mix: $(tail -1 "$tmp/err")"; continue; }
        check "$tmp/3.json" 'all(any(n["device"] == d for n in j["nodes"]) for d in ("cpu", "vulkan0", "npu"))' \
            "3 devices $mix: all used"
        check "$tmp/3.json" 'a["top1"] >= 0.90 and 0 < a["kl_mean"] <= 2e-3 and j["scheduler_differs"] == 0' \
            "3 devices $mix: top-1/KL"
    done
else
    echo "note: no Vulkan device, three-device runs not checked here"
fi

# 5. refusals
for args in "--accuracy-budget -1" "--accuracy-budget x" "--sensitivity $tmp/missing.json --accuracy-budget 1"; do
    if "$hetrun" plan -m "$q3" --devices cpu,npu --npu emulate $args >/dev/null 2>"$tmp/err"; then
        bad "plan $args: accepted"
    else
        grep -q -- "--accuracy-budget\|--sensitivity" "$tmp/err" && ok || bad "plan $args: message '$(tail -1 "$tmp/err")'"
    fi
done
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
