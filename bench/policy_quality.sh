#!/usr/bin/env bash
# policy_quality.sh — how good is the planner's placement, measured?
#
# For prefill (pp) and decode (tg) on one model and one device set, measure
# `hetrun bench` under every single-device policy, `alternate`, and the
# planner's own choice (`fastest`), and `hetrun plan --measure` for the
# planner's predicted vs measured whole-graph time. The planner's pick should
# be within 5% of the best measured policy and its prediction within 15% of
# the measurement. Not a test (timings never are): run it on a quiet machine.
#
#   bench/policy_quality.sh MODEL [DEVICES=cpu,vulkan] [PP=512] [TG=128] [REPS=3]
#   HETRUN=build/hetrun (default)
set -euo pipefail
model="${1:?usage: policy_quality.sh MODEL [DEVICES] [PP] [TG] [REPS]}"
devices="${2:-cpu,vulkan}"; pp="${3:-512}"; tg="${4:-128}"; reps="${5:-3}"
hetrun="${HETRUN:-build/hetrun}"
policies=(fastest alternate)
IFS=, read -ra devs <<<"$devices"
for d in "${devs[@]}"; do policies+=("single:$d"); done

field() { python3 -c "import json,sys; print(json.loads(sys.argv[1])[sys.argv[2]])" "$1" "$2"; }

echo "model $model, devices $devices, pp$pp / tg$tg, $reps repetitions, $(nproc) cores, load $(cut -d' ' -f1 /proc/loadavg)"
printf "%-16s %12s %12s\n" policy "pp tok/s" "tg tok/s"
declare -A PP TG
for pol in "${policies[@]}"; do
    j=$("$hetrun" bench -m "$model" --devices "$devices" --policy "$pol" -p "$pp" -n "$tg" -r "$reps" --json 2>/dev/null)
    PP[$pol]=$(field "$j" pp_tps); TG[$pol]=$(field "$j" tg_tps)
    printf "%-16s %12.2f %12.2f\n" "$pol" "${PP[$pol]}" "${TG[$pol]}"
done
best_pp=0; best_tg=0
for pol in "${policies[@]}"; do
    best_pp=$(python3 -c "print(max($best_pp, ${PP[$pol]}))"); best_tg=$(python3 -c "print(max($best_tg, ${TG[$pol]}))")
done
python3 - "${PP[fastest]}" "$best_pp" "${TG[fastest]}" "$best_tg" <<'PY'
import sys
pp, bpp, tg, btg = map(float, sys.argv[1:])
print("planner vs best measured: pp %.1f%% of best, tg %.1f%% of best (target >= 95%%)" % (100*pp/bpp, 100*tg/btg))
PY
tmp="$(mktemp)"; trap 'rm -f "$tmp"' EXIT
for phase in prefill decode; do
    # the plan JSON has one object per node: read it from a file, not argv
    "$hetrun" plan -m "$model" --devices "$devices" --phase "$phase" --batch "$pp" --past "$tg" --measure --json \
        >"$tmp" 2>/dev/null
    python3 - "$tmp" "$phase" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
p, m = j.get("total_pred_us"), j.get("measured_us")
err = (p / m - 1) * 100 if p and m else float("nan")
devs = sorted({n["device"] for n in j.get("nodes", [])})
print("%-8s predicted %.0f us, measured %.0f us (quartiles %.0f-%.0f over %d evals), error %+.1f%% "
      "(target within 15%%); plan uses %s"
      % (sys.argv[2], p or 0, m or 0, j.get("measured_q1_us") or 0, j.get("measured_q3_us") or 0,
         j.get("measured_runs", 0), err, ",".join(devs)))
PY
done
