#!/usr/bin/env bash
# test_moe_placement.sh — where the planner puts a mixture-of-experts layer,
# on the tiny qwen3moe and qwen2moe models (written by mkmodel):
#  - on Vulkan alone the whole forward, routing included (top_k, sum_rows,
#    moe_sum), is one split with no fallback (--strict): the CPU is not
#    needed in the middle of a MoE layer; and its logits are the CPU's;
#  - with profiles (--profile FILE) where a second, simulated device runs
#    experts far faster and everything else a little slower, the plan puts
#    every mul_mat_id there and the rest on the CPU, and says why (predicted
#    us per device, the experts assumed, the hand-off into each device);
#    with the figures swapped, the experts stay on the CPU;
#  - on this machine (cpu + lavapipe, default profiles) the plan for the
#    tiny MoE models predicts no worse than the CPU alone.
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
    msg=$(cmp_logits "$tmp/$arch-cpu.bin" "$tmp/$arch-vulkan.bin" 1e-3 2 2>&1) && ok || bad "logits $arch vulkan vs cpu: $msg"
done

# 2. a device clearly better for experts gets them
# profiles: "cpu" (replaces the CPU's here) and "simgpu" (simulated); every
# op class fitted; moe_fast names the device whose experts are 20x faster
profiles() { # moe_fast out
    python3 - "$1" "$2" <<'PY'
import json, sys
fast, out = sys.argv[1], sys.argv[2]
def prof(name, kind, slow_factor, moe_fast):
    models = []
    for op, ty in [("matmul","f32"),("attn","f16"),("attn","f32"),("norm","f32"),("rope","f32"),
                   ("softmax","f32"),("eltwise","f32"),("copy","f32"),("moe","f32")]:
        f = {"t0_us": 2.0 * slow_factor, "gbps": 40.0 / slow_factor, "gflops": 200.0 / slow_factor,
             "m_half": 8, "error": None}
        if op == "moe":
            f = {"t0_us": 1.0, "gbps": 400.0, "gflops": 4000.0, "m_half": 1, "error": None} if moe_fast else \
                {"t0_us": 20.0, "gbps": 20.0, "gflops": 100.0, "m_half": 8, "error": None}
        models.append({"op": op, "type": ty, "fit": f, "samples": []})
    other = "simgpu" if name == "cpu" else "cpu"
    return {"format": "het-profile", "version": 1, "het_version": "0.1.0",
            "device": {"name": name, "description": "synthetic (test_moe_placement)", "kind": kind,
                       "emulated": False},
            "measured": True, "label": "synthetic: experts %s" % ("fast" if moe_fast else "slow"),
            "costs": {"split_us": 3.0, "kernel_switch_us": 0, "async": kind != "cpu", "peak_gbps": 40.0,
                      "peak_gflops": 200.0, "lossy": False, "shares_cpu_cores": False},
            "models": models, "handoffs": [{"to": other, "fixed_us": 5.0, "gbps": 0}]}
json.dump({"format": "het-profile-set", "version": 1,
           "profiles": [prof("cpu", "cpu", 1.0, fast == "cpu"), prof("simgpu", "vulkan", 1.3, fast == "simgpu")]},
          open(out, "w"))
PY
}
# placement of the experts: "devices of mul_mat_id nodes | devices of the other work nodes | experts shown"
experts_on() {
    python3 - "$1" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
moe = [n for n in p["nodes"] if n["op"] == "mul_mat_id"]
rest = [n for n in p["nodes"] if n["op"] in ("mul_mat", "attn")]
shown = all(n.get("experts", 0) > 0 and set(n["handoff_in_us"]) == set(n["alt_us"]) and
            all(v is not None for v in n["alt_us"].values()) for n in moe)
print(",".join(sorted({n["device"] for n in moe})) or "-", ",".join(sorted({n["device"] for n in rest})) or "-",
      "shown" if shown and moe else "missing")
PY
}
for arch in qwen3moe qwen2moe; do
    for fast in simgpu cpu; do
        profiles "$fast" "$tmp/set-$fast.json"
        for phase in "--phase decode" "--phase prefill --batch 64"; do
            what="$arch experts fast on $fast, $phase"
            "$hetrun" plan -m "$tmp/$arch.gguf" --devices cpu --profile "$tmp/set-$fast.json" $phase --json \
                >"$tmp/p.json" 2>"$tmp/err" || { bad "$what: $(tail -1 "$tmp/err")"; continue; }
            read -r moe rest shown < <(experts_on "$tmp/p.json")
            [ "$moe" = "$fast" ] && [ "$rest" = cpu ] && [ "$shown" = shown ] && ok \
                || bad "$what: experts on $moe, matmuls/attention on $rest, explanation $shown"
        done
    done
done
# the text form explains the same
"$hetrun" plan -m "$tmp/qwen3moe.gguf" --devices cpu --profile "$tmp/set-simgpu.json" >"$tmp/p.txt" 2>&1
grep 'ffn_up_exps.0' "$tmp/p.txt" | grep -q 'simgpu [0-9.]*\*.*expects 2.0 of 8 experts.*hand-off in: cpu +[0-9.]* simgpu +' \
    && ok || bad "plan text does not explain the experts' placement: $(grep 'ffn_up_exps.0' "$tmp/p.txt")"

# 3. cpu + lavapipe predicts no worse than the CPU alone
for arch in qwen3moe qwen2moe; do
    for phase in "--phase decode" "--phase prefill --batch 64"; do
        for set in cpu cpu,vulkan; do
            "$hetrun" plan -m "$tmp/$arch.gguf" --devices $set $phase --json >"$tmp/$set.json" 2>"$tmp/err" \
                || bad "$arch $set $phase: $(tail -1 "$tmp/err")"
        done
        msg=$(python3 - "$tmp/cpu.json" "$tmp/cpu,vulkan.json" <<'PY'
import json, sys
a, b = (json.load(open(f))["total_pred_us"] for f in sys.argv[1:3])
print("cpu %.1f us, cpu+vulkan %.1f us" % (a, b)); sys.exit(0 if b <= a * (1 + 1e-9) else 1)
PY
) && ok || bad "$arch $phase: the mixed plan predicts worse than the CPU alone: $msg"
    done
done

finish
