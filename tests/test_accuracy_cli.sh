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
#  - bad values are refused with a message;
#  - run, logits, bench and serve take the same budget: measured once (one
#    line on stderr) and cached, budget 0 leaves the NPU idle and gives the
#    CPU's logits bit for bit, a huge budget uses it, --stats reports the
#    nodes kept off it, a set without an NPU says the flag has no effect,
#    pins that exceed it are reported; bad values are one-line errors.
set -uo pipefail
hetrun="${HET_HETRUN:?}"
shared="${HET_SHARED_DIR:-../shared}"
ref="$shared/reference"
q3="$shared/models/synthetic/qwen3-tiny-q8_0.gguf"
ll="$shared/models/synthetic/llama-tiny-q4_0.gguf"
[ -f "$q3" ] && [ -f "$ll" ] && [ -d "$ref" ] || { echo "SKIP: synthetic models or reference texts missing"; exit 77; }
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
export XDG_CACHE_HOME="$tmp/cache" HET_CALIBRATE=0
source "$(dirname "${BASH_SOURCE[0]}")/cli_harness.sh"
cat "$ref/stories260K-1.prompt" "$ref/stories260K-1.expected" > "$tmp/text.txt"

# check FILE 'python expression over j (the JSON object)' 'what' (this test's own check, replacing the harness's)
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
prof() { # name kind gbps other [weight type]
    cat <<EOF
{"format":"het-profile","version":1,"het_version":"0.1.0",
 "device":{"name":"$1","description":"synthetic ($1, test)","kind":"$2","emulated":false},
 "measured":false,"label":"synthetic (test)",
 "costs":{"split_us":0,"kernel_switch_us":0,"async":false,"peak_gbps":$3,"peak_gflops":$((10 * $3))},
 "models":[{"op":"matmul","type":"${5:-q8_0}","fit":{"t0_us":1,"gbps":$3,"gflops":$((10 * $3)),"m_half":0,"error":0},"samples":[]}],
 "handoffs":[{"to":"$4","fixed_us":0,"gbps":0}]}
EOF
}
{ echo '{"format":"het-profile-set","version":1,"profiles":['; prof cpu cpu 1 npu; echo ','; prof npu npu 100 cpu; echo ']}'; } \
    >"$tmp/set.json"
{ echo '{"format":"het-profile-set","version":1,"profiles":['; prof cpu cpu 1 npu q4_0; echo ',';
  prof npu npu 100 cpu q4_0; echo ']}'; } >"$tmp/set4.json"
B=(-m "$q3" --profile "$tmp/set.json" --accuracy --phase prefill --batch 8 -f "$tmp/text.txt")
plan "$tmp/b0.json" "${B[@]}" --accuracy-budget 0 --sensitivity estimate
check "$tmp/b0.json" 'npu == 0 and a["kept"] >= 15 and a["kl_mean"] == 0 and a["top1"] == 1' "budget 0: NPU unused, KL 0"
check "$tmp/b0.json" 'j["scheduler_differs"] == 0' "budget 0: the scheduler runs the printed plan"
plan "$tmp/bn.json" "${B[@]}"
check "$tmp/bn.json" 'npu == 15 and a["kept"] == 0 and a["kl_mean"] > 0 and a["budget_kl"] is None' "no budget: 15 matmuls"
plan "$tmp/bm.json" "${B[@]}" --accuracy-budget 1e-3 --sensitivity estimate
check "$tmp/bm.json" '0 < npu < 15 and 0 < a["predicted_kl"] <= 1e-3 and a["kept"] > 0' "budget 1e-3: some on the NPU"
check "$tmp/bm.json" 'j["scheduler_differs"] == 0 and a["kl_mean"] <= 1e-3' "budget 1e-3: run as planned, measured KL under it"
check "$tmp/bm.json" 'all(n["kl"] == 0 for n in j["nodes"] if n["device"] != "npu") and all(not n["accuracy_kept"] or n["device"] == "cpu" for n in j["nodes"])' \
    "budget 1e-3: KL only on the NPU, kept nodes on the CPU"

# 3. measured sensitivity: stored, then read back (llama-tiny-q4_0: on q8_0 weights the NPU's
#    int8 per-32 activations are the CPU's, so the KL measured there is ~0)
B4=(-m "$ll" --profile "$tmp/set4.json" --phase prefill --batch 8)
plan "$tmp/s.json" "${B4[@]}" --accuracy -f "$tmp/text.txt" --sensitivity measure
check "$tmp/s.json" 'a["sensitivity"]["measured"] and len(a["sensitivity"]["groups"]) == 8 and all(g["kl"] >= 0 and g["nodes"] == 2 for g in a["sensitivity"]["groups"] if g["pattern"] != "logits") and sum(g["kl"] for g in a["sensitivity"]["groups"]) > 1e-5' \
    "measure: 8 groups with KL"
ls "$XDG_CACHE_HOME"/het/profiles/sensitivity-*.json >/dev/null 2>&1 && ok || bad "measure: no table in the cache"
plan "$tmp/s2.json" "${B4[@]}" --accuracy-budget 2e-4
check "$tmp/s2.json" 'a["sensitivity"]["source"].startswith("cached") and 0 < a["predicted_kl"] <= 2e-4 and a["kept"] > 0 and npu > 0' \
    "a later plan reads the cached table"
cp "$XDG_CACHE_HOME"/het/profiles/sensitivity-*.json "$tmp/table.json"
plan "$tmp/s3.json" "${B4[@]}" --accuracy-budget 2e-4 --sensitivity "$tmp/table.json"
check "$tmp/s3.json" 'a["sensitivity"]["source"].endswith("table.json") and a["predicted_kl"] == json.load(open(sys.argv[1][:-len("s3.json")] + "s2.json"))["accuracy"]["predicted_kl"]' \
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
# 6. the same budget on the commands that run a model (a fresh cache: measured once, then read back)
export XDG_CACHE_HOME="$tmp/cache6"
R=(-m "$ll" --devices cpu,npu --npu emulate --profile "$tmp/set4.json")
# stats FILE 'python expression over j (the --stats=json object, last JSON line of FILE) and npu' 'what'
stats() {
    python3 - "$1" "$2" <<'PY' && ok || bad "$3: $(grep '^{' "$1" | tail -1 | cut -c1-400)"
import json, sys
j = json.loads([l for l in open(sys.argv[1]) if l.startswith("{")][-1])
npu = sum(d["nodes"] for d in j["devices"] if d["name"] == "npu")
b = j.get("accuracy_budget")
sys.exit(0 if eval(sys.argv[2]) else 1)
PY
}
runs() { # name args... (stdout to $tmp/NAME.out, stderr to $tmp/NAME.err)
    local name="$1"; shift
    "$hetrun" "$@" >"$tmp/$name.out" 2>"$tmp/$name.err" || bad "$name: exit $?: $(tail -1 "$tmp/$name.err")"
}
runs r0 run "${R[@]}" -n 8 --temp 0 --accuracy-budget 0 --stats=json
[ "$(grep -c 'sensitivity: 8 node groups measured on npu in [0-9.]* s' "$tmp/r0.err")" = 1 ] && ok \
    || bad "run: one line saying the sensitivity was measured: $(head -2 "$tmp/r0.err")"
ls "$XDG_CACHE_HOME"/het/profiles/sensitivity-*.json >/dev/null 2>&1 && ok || bad "run: the table is not cached"
stats "$tmp/r0.err" 'npu == 0 and b["active"] and b["kept_last"] == 15 and b["kept_total"] > 0 and b["predicted_kl_last"] == 0' \
    "run budget 0: the NPU runs nothing, every matmul kept off it"
runs rc run -m "$ll" --device cpu -n 8 --temp 0
cmp -s "$tmp/r0.out" "$tmp/rc.out" && ok || bad "run budget 0: not the CPU's text"
runs rh run "${R[@]}" -n 8 --temp 0 --accuracy-budget 1e9 --stats=json
grep -q 'measured on npu' "$tmp/rh.err" && bad "run: measured again instead of reading the cache" || ok
stats "$tmp/rh.err" 'npu >= 15 and b["kept_last"] == 0 and b["kept_total"] == 0 and b["predicted_kl_last"] > 0' \
    "run huge budget: every matmul on the NPU"
runs rm run "${R[@]}" -n 8 --temp 0 --accuracy-budget 2e-4 --stats=json
stats "$tmp/rm.err" 'npu > 0 and b["kept_last"] > 0 and 0 < b["predicted_kl_last"] <= 2e-4' "run budget 2e-4: some on the NPU"
runs rn run "${R[@]}" -n 8 --temp 0 --stats=json
stats "$tmp/rn.err" 'npu >= 15 and b is None' "run without a budget"
runs rt run "${R[@]}" -n 4 --accuracy-budget 0 --stats
grep -q '^accuracy budget 0.00e+00: 15 nodes of the last graph kept off npu' "$tmp/rt.err" && ok \
    || bad "run --stats: no line with the nodes kept: $(grep -i budget "$tmp/rt.err")"
# logits: budget 0 gives the CPU's logits bit for bit; without it the NPU changes them
runs l0 logits "${R[@]}" -f "$tmp/text.txt" -o "$tmp/l0.bin" --accuracy-budget 0
runs lc logits -m "$ll" --device cpu -f "$tmp/text.txt" -o "$tmp/lc.bin"
runs ln logits "${R[@]}" -f "$tmp/text.txt" -o "$tmp/ln.bin"
cmp -s "$tmp/l0.bin" "$tmp/lc.bin" && ok || bad "logits budget 0: not the CPU's logits"
cmp -s "$tmp/ln.bin" "$tmp/lc.bin" && bad "logits without a budget: the NPU changed nothing (test cannot fail)" || ok
runs b0 bench "${R[@]}" -p 8 -n 4 -r 1 --accuracy-budget 0 --stats=json
stats "$tmp/b0.err" 'npu == 0 and b["kept_total"] > 0' "bench budget 0"
# no lossy device: accepted, said once, no effect
runs nc run -m "$ll" --device cpu -n 8 --temp 0 --accuracy-budget 1e-3 --stats
[ "$(grep -c 'no lossy device (npu) in the device set; it has no effect' "$tmp/nc.err")" = 1 ] && ok \
    || bad "no NPU: not said once: $(cat "$tmp/nc.err")"
cmp -s "$tmp/nc.out" "$tmp/rc.out" && ok || bad "no NPU: the text changed"
# pins are explicit: kept, and said to exceed the budget
runs rp run "${R[@]}" -n 4 --temp 0 --pin 'mul_mat=npu' --accuracy-budget 0 --stats=json
grep -q -- 'accuracy budget 0: pins or the single:DEV policy alone put a predicted KL' "$tmp/rp.err" && ok \
    || bad "pins over the budget not reported: $(grep -v '^{' "$tmp/rp.err" | tail -2)"
stats "$tmp/rp.err" 'npu > 0' "pins over the budget are kept"
# serve takes it too (starts, says it has no effect on the CPU alone, stops on SIGTERM)
"$hetrun" serve -m "$ll" --device cpu --port 0 --accuracy-budget 1e-3 2>"$tmp/serve.err" &
spid=$!
for _ in $(seq 100); do grep -q 'listening on' "$tmp/serve.err" && break; sleep 0.1; done
kill -TERM "$spid" 2>/dev/null; wait "$spid"
grep -q 'listening on' "$tmp/serve.err" && grep -q -- 'accuracy budget 0.001: no lossy device' "$tmp/serve.err" && ok \
    || bad "serve --accuracy-budget: $(head -3 "$tmp/serve.err")"
# bad values: one line naming the flag, exit 2, for every command
for cmd in run logits bench serve plan; do
    for v in -1 x nan 1e-3q; do
        "$hetrun" $cmd -m "$ll" --accuracy-budget "$v" >/dev/null 2>"$tmp/err"; rc=$?
        [ "$rc" = 2 ] && [ "$(wc -l <"$tmp/err")" = 1 ] && grep -q "^hetrun $cmd: --accuracy-budget: '$v' is not a KL" "$tmp/err" \
            && ok || bad "$cmd --accuracy-budget $v: exit $rc, '$(cat "$tmp/err")'"
    done
done
"$hetrun" run "${R[@]}" -n 2 --accuracy-budget 1 --sensitivity "$tmp/missing.json" >/dev/null 2>"$tmp/err" \
    && bad "run --sensitivity missing: accepted" || { grep -q -- "--sensitivity" "$tmp/err" && ok || bad "run --sensitivity missing: '$(cat "$tmp/err")'"; }
finish
