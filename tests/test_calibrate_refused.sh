#!/usr/bin/env bash
# test_calibrate_refused.sh — a refused calibration is remembered, with
# back-off (policy/refusal.c), seen through the CLI. HET_TEST_DISTURBED=1
# makes every calibration repetition count as disturbed (a machine that is
# always busy) without loading the machine. Devices cpu + the emulated NPU:
# only the CPU is calibrated (quick, for stories260K: under a second).
#   run: refused -> recorded (1); run again: backs off, unmeasured default,
#   no calibration; plan labels it; calibrate: tries anyway (2, 20 min);
#   --recalibrate tries; a truncated record: one line, replaced; an expired
#   one: calibrated again (count goes on); a clean calibrate: record gone.
set -uo pipefail
hetrun="${HET_HETRUN:?}"
src="${HET_SOURCE_DIR:-.}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
export XDG_CACHE_HOME="$tmp/cache"
unset HET_CALIBRATE HET_DEVICES
source "$(dirname "${BASH_SOURCE[0]}")/cli_harness.sh"

model="$src/models/stories260K.gguf"
[ -f "$model" ] || { echo "skipped: $model missing"; exit 77; }
devs="cpu,npu:emulate"
record() { ls "$XDG_CACHE_HOME"/het/profiles/cpu-*.refused 2>/dev/null | head -1; }
field() { sed -n "s/^$1 //p" "$(record)"; }
busy_run() { HET_TEST_DISTURBED=1 "$hetrun" run -m "$model" -n 2 --devices "$devs" -v "$@" >"$tmp/out" 2>"$tmp/err"; }

busy_run; check "first run exits 0" [ $? = 0 ]
check "it calibrates" grep -q "quick calibration" "$tmp/err"
check "and says the profile was refused, and until when" grep -q "profile of cpu not cached: .*Refused 1 time in a row: no calibration of cpu before" "$tmp/err"
check "the refusal is recorded" [ -n "$(record)" ]
[ -n "$(record)" ] && check "count 1" [ "$(field count)" = 1 ]
[ -n "$(record)" ] && check "retry 10 min after" [ $(( $(field retry) - $(field last) )) = 600 ]

busy_run; check "second run exits 0" [ $? = 0 ]
check "it does not calibrate again" bash -c "! grep -q 'quick calibration' '$tmp/err'"
check "it says it backs off, with the unmeasured default" grep -q "cpu: calibration refused 1 time in a row .*using its unmeasured default profile until" "$tmp/err"
check "count still 1" [ "$(field count)" = 1 ]

HET_TEST_DISTURBED=1 "$hetrun" plan -m "$model" --devices "$devs" >"$tmp/plan" 2>"$tmp/plan.err"
check "plan exits 0" [ $? = 0 ]
check "plan labels the profile unmeasured and refused" grep -q "device cpu .*unmeasured: calibration refused 1 time in a row (busy machine), next try after" "$tmp/plan"
check "plan did not calibrate" bash -c "! grep -q 'quick calibration' '$tmp/plan.err'"

HET_TEST_DISTURBED=1 "$hetrun" calibrate -m "$model" --devices "$devs" --quick >"$tmp/cal" 2>"$tmp/cal.err"
check "calibrate exits 0" [ $? = 0 ]
check "calibrate measures anyway, as asked" grep -q "the last calibration was refused (1 in a row.*measuring now, as asked" "$tmp/cal.err"
check "and says when first uses try next" grep -q "cpu: not cached: refused 2 times in a row; .* before" "$tmp/cal.err"
check "count 2, 20 min" [ "$(field count)" = 2 -a $(( $(field retry) - $(field last) )) = 1200 ]

busy_run --recalibrate; check "--recalibrate exits 0" [ $? = 0 ]
check "--recalibrate measures despite the back-off" grep -q "quick calibration" "$tmp/err"
check "count 3" [ "$(field count)" = 3 ]

# a truncated record: one clear line, no crash, replaced by the next refusal
rec="$(record)"
head -c 40 "$rec" >"$tmp/cut" && cp "$tmp/cut" "$rec"
busy_run; check "run with a truncated record exits 0" [ $? = 0 ]
check "one line names the damaged record" [ "$(grep -c "refusal record $rec: .*: ignored" "$tmp/err")" = 1 ]
check "and it calibrates" grep -q "quick calibration" "$tmp/err"
check "the record is rewritten, count 1" [ "$(field count)" = 1 ]

# an expired back-off: calibrated again, the count goes on
now=$(date +%s); needs="$(field needs)"
printf 'het-calibration-refused 1\nneeds %s\ncount 4\nfirst %d\nlast %d\nretry %d\nwhy busy\n' \
    "$needs" $((now - 9000)) $((now - 5000)) $((now - 200)) >"$(record)"
busy_run; check "run after the back-off exits 0" [ $? = 0 ]
check "it calibrates again" grep -q "quick calibration" "$tmp/err"
check "count 5, 160 min" [ "$(field count)" = 5 -a $(( $(field retry) - $(field last) )) = 9600 ]

# a clean calibration clears the record; runs then use the cached profile
"$hetrun" calibrate -m "$model" --devices "$devs" --quick --accept-noisy >"$tmp/cal" 2>"$tmp/cal.err"
check "clean calibrate exits 0" [ $? = 0 ]
check "the record is gone" [ -z "$(record)" ]
busy_run; check "run after it exits 0" [ $? = 0 ]
check "it uses the cached profile: no calibration, no back-off" bash -c "! grep -q 'quick calibration\|refused' '$tmp/err'"
finish test_calibrate_refused
