#!/usr/bin/env bash
# policy_quality.sh — how good is the planner's placement, measured?
#
# For prefill (pp) and decode (tg) on one model and one device set, measure
# `hetrun bench` under every single-device policy, `alternate`, and the
# planner's own choice (`fastest`), and `hetrun plan --measure` for the
# planner's predicted vs measured whole-graph time. The planner's pick should
# be within 3% of the best measured policy and its prediction within 15% of
# the measurement. Not a test (timings never are): run it on a quiet machine.
# DEVICES defaults to auto, het's own default: every usable device.
#
# Repetitions are interleaved (rep 1 of every policy, then rep 2, ...), so a
# machine whose speed drifts over minutes slows every policy alike instead of
# whichever ran last. Where the planner placed a phase on one device only,
# its plan is that device's single-device plan, and the script says so:
# their difference is then the machine's run-to-run noise.
#
#   bench/policy_quality.sh MODEL [DEVICES=auto] [PP=512] [TG=128] [REPS=3]
#   HETRUN=build/hetrun (default)
set -euo pipefail
model="${1:?usage: policy_quality.sh MODEL [DEVICES] [PP] [TG] [REPS]}"
devices="${2:-auto}"; pp="${3:-512}"; tg="${4:-128}"; reps="${5:-3}"
hetrun="${HETRUN:-build/hetrun}"
names="$devices"
if [ "$devices" = auto ]; then # the names auto takes here, for the single-device policies
    names=$("$hetrun" devices | sed -n 's/^auto *= \([^ ]*\) .*/\1/p')
    echo "auto takes $names"
fi
policies=(fastest alternate)
IFS=, read -ra devs <<<"$names"
for d in "${devs[@]}"; do policies+=("single:$d"); done
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT

echo "model $model, devices $devices ($names), pp$pp / tg$tg, $reps interleaved repetitions, $(nproc) cores," \
     "load $(cut -d' ' -f1 /proc/loadavg)"

# the planner's placement per phase (and, later, its prediction against a measurement)
plan_json() { # phase out [--measure]
    "$hetrun" plan -m "$model" --devices "$devices" --phase "$1" --batch "$pp" --past "$tg" ${3:-} --json \
        >"$2" 2>"$tmp/err" || { cat "$tmp/err" >&2; exit 1; }
}
plan_json prefill "$tmp/prefill.json"
plan_json decode "$tmp/decode.json"

for ((r = 1; r <= reps; r++)); do
    for pol in "${policies[@]}"; do
        "$hetrun" bench -m "$model" --devices "$devices" --policy "$pol" -p "$pp" -n "$tg" -r 1 --json \
            >>"$tmp/runs.$pol.jsonl" 2>"$tmp/err" || { cat "$tmp/err" >&2; exit 1; }
    done
done

python3 - "$tmp" "$pp" "$tg" "${policies[@]}" <<'PY'
import json, statistics, sys
tmp, pp, tg, pols = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
runs = {p: [json.loads(l) for l in open("%s/runs.%s.jsonl" % (tmp, p))] for p in pols}
med = {p: (statistics.median(r["pp_tps"] for r in runs[p]), statistics.median(r["tg_tps"] for r in runs[p]))
       for p in pols}
print("%-16s %24s %24s" % ("policy", "pp%s tok/s (min-max)" % pp, "tg%s tok/s (min-max)" % tg))
for p in pols:
    a = [r["pp_tps"] for r in runs[p]]; b = [r["tg_tps"] for r in runs[p]]
    print("%-16s %9.2f (%6.1f-%6.1f) %9.2f (%6.1f-%6.1f)" % (p, med[p][0], min(a), max(a), med[p][1], min(b), max(b)))
best_pp = max(m[0] for m in med.values()); best_tg = max(m[1] for m in med.values())
print("planner vs best measured: pp %.1f%% of best, tg %.1f%% of best (target >= 97%%)"
      % (100 * med["fastest"][0] / best_pp, 100 * med["fastest"][1] / best_tg))
for phase in ("prefill", "decode"):
    j = json.load(open("%s/%s.json" % (tmp, phase)))
    used = sorted({n["device"] for n in j.get("nodes", [])})
    same = "single:%s" % used[0] if len(used) == 1 else None
    print("%-8s the planner places nodes on %s%s" % (phase, ",".join(used),
          "; that is the %s plan, so the two rows differ by run-to-run noise only" % same if same in pols else ""))
PY

for phase in prefill decode; do
    # the plan JSON has one object per node: read it from a file, not argv
    plan_json "$phase" "$tmp/m.json" --measure
    python3 - "$tmp/m.json" "$phase" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
p, m = j.get("total_pred_us"), j.get("measured_us")
err = (p / m - 1) * 100 if p and m else float("nan")
print("%-8s predicted %.0f us, measured %.0f us (quartiles %.0f-%.0f over %d evals), error %+.1f%% "
      "(target within 15%%)"
      % (sys.argv[2], p or 0, m or 0, j.get("measured_q1_us") or 0, j.get("measured_q3_us") or 0,
         j.get("measured_runs", 0), err))
PY
done
