#!/usr/bin/env bash
# test_calibrate_busy.sh — a calibration taken beside two busy loops must
# not poison the cache: it is either refused (not cached, and the tool says
# why) or consistent with a calibration of the same model on the quiet
# machine: the whole-graph predictions of stories260K's prefill and decode
# from the two profiles within 3x of each other (generous on purpose: this
# checks that no sample is wildly off, not a speed). Calibrations are the
# quick ones of what the model needs, on the CPU only. If even the quiet
# calibration is refused (this machine is busy anyway), only the refusal
# path of the busy one can be checked, and the test says so.
set -uo pipefail
hetrun="${HET_HETRUN:?}"
src="${HET_SOURCE_DIR:-.}"
tmp="$(mktemp -d)"
busy_pids=()
cleanup() { for p in "${busy_pids[@]}"; do kill "$p" 2>/dev/null; done; wait 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
export XDG_CACHE_HOME="$tmp/cache"
unset HET_CALIBRATE
source "$(dirname "${BASH_SOURCE[0]}")/cli_harness.sh"

model="$src/models/stories260K.gguf"
[ -f "$model" ] || { echo "skipped: $model missing"; exit 77; }
command -v python3 >/dev/null || { echo "skipped: python3 needed to read plan JSON"; exit 77; }

cal() { "$hetrun" calibrate --device cpu --quick -m "$model" --recalibrate >"$1.out" 2>"$1.err"; }
stored() { ls "$XDG_CACHE_HOME"/het/profiles/cpu-*.json 2>/dev/null | head -1; }

# quiet (as quiet as this machine is)
cal "$tmp/quiet"; check "quiet calibration exits 0" [ $? = 0 ]
quiet=""
if [ -n "$(stored)" ]; then quiet="$tmp/quiet.json"; cp "$(stored)" "$quiet"; rm -f "$(stored)"; fi

# beside two busy loops
for _ in 1 2; do (while :; do :; done) & busy_pids+=($!); done
cal "$tmp/busy"; rc=$?
for p in "${busy_pids[@]}"; do kill "$p" 2>/dev/null; done; wait 2>/dev/null; busy_pids=()
check "busy calibration exits 0" [ $rc = 0 ]

prof="$(stored)"
if [ -z "$prof" ]; then
    echo "busy calibration refused: $(grep -h 'not cached' "$tmp/busy.out" "$tmp/busy.err" | head -1)"
    check "a refused profile is said to be not cached, with the reason" \
        grep -q "not cached: .*samples stayed disturbed" "$tmp/busy.out"
    check "and the samples it re-measured are counted" grep -q "measured again" "$tmp/busy.err"
elif [ -z "$quiet" ]; then
    echo "note: the quiet calibration was refused too (busy machine): nothing to compare the busy one with"
    check "an accepted busy profile is labelled measured" grep -q '"measured": true' "$prof"
else
    for phase in prefill decode; do
        for which in quiet busy; do
            f="$quiet"; [ "$which" = busy ] && f="$prof"
            "$hetrun" plan -m "$model" --device cpu --profile "$f" --phase "$phase" --batch 64 --json \
                >"$tmp/$which.$phase.json" 2>"$tmp/plan.err"
            check "plan $phase with the $which profile: $(tail -1 "$tmp/plan.err")" [ $? = 0 ]
        done
        r=$(python3 -c "import json,sys; a=json.load(open(sys.argv[1]))['total_pred_us']; \
b=json.load(open(sys.argv[2]))['total_pred_us']; print('%.3f' % (b / a))" \
            "$tmp/quiet.$phase.json" "$tmp/busy.$phase.json")
        echo "accepted busy profile: $phase prediction ${r}x the quiet one's"
        check "$phase: busy prediction within 3x of the quiet one (${r}x)" \
            python3 -c "import sys; r=float(sys.argv[1]); sys.exit(0 if 1/3 <= r <= 3 else 1)" "$r"
    done
fi

finish test_calibrate_busy
