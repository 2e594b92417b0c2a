#!/usr/bin/env bash
# contention.sh — prefill and decode tokens/s quiet and beside N busy loops
# (a laptop with a browser open, a server running other work), for het's CPU
# device and, when llama.cpp's llama-bench is there, for llama.cpp on the
# same file with the same threads. Each repetition runs every engine quiet,
# then beside the busy loops (sh -c 'while :; do :; done', one per N), so the
# figures of one table come from the same minutes of the same machine.
#
#   bench/contention.sh [-m MODEL] [-l N] [-t THREADS] [-p PP] [-n TG] [-r REPS]
#
#   -m  GGUF file (default: the bundled stories260K)
#   -l  busy loops beside the loaded runs (default 2)
#   -t  threads of both engines (default 2)
#   -p  prompt tokens of pp (default 64), -n decode tokens of tg (default 32)
#   -r  repetitions (default 3): median and min-max are printed
#
# Environment: HETRUN (default build/hetrun), LLAMA_BENCH (default
# /work/llama.cpp/build/bin/llama-bench; skipped when absent), LLAMA_MODEL
# (the file llama.cpp reads; default: MODEL).
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
hetrun=${HETRUN:-$here/build/hetrun}
llama=${LLAMA_BENCH:-/work/llama.cpp/build/bin/llama-bench}
model="" load=2 threads=2 pp=64 tg=32 reps=3
while getopts "m:l:t:p:n:r:h" o; do
    case $o in
    m) model=$OPTARG ;; l) load=$OPTARG ;; t) threads=$OPTARG ;;
    p) pp=$OPTARG ;; n) tg=$OPTARG ;; r) reps=$OPTARG ;;
    *) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
    esac
done
[ -x "$hetrun" ] || { echo "contention.sh: no hetrun at $hetrun (build first, or set HETRUN)" >&2; exit 1; }
[ -n "$model" ] || model=$here/models/stories260K.gguf
[ -f "$model" ] || { echo "contention.sh: no model file $model" >&2; exit 1; }
lmodel=${LLAMA_MODEL:-$model}
[ -x "$llama" ] || llama=""

out=$(mktemp -d)
pids=()
stop_load() { [ ${#pids[@]} -gt 0 ] && kill "${pids[@]}" 2>/dev/null; wait "${pids[@]}" 2>/dev/null; pids=(); }
trap 'stop_load; rm -rf "$out"' EXIT
start_load() { for ((i = 0; i < load; i++)); do sh -c 'while :; do :; done' & pids+=($!); done; }

echo "# $(date -u '+%F %T') UTC, $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg) before the runs"
echo "# model $model, $threads threads, pp$pp / tg$tg, $reps repetitions, $load busy loops"
for ((r = 0; r < reps; r++)); do
    # het: one process does quiet then loaded (its own --load)
    "$hetrun" bench -m "$model" -t "$threads" -p "$pp" -n "$tg" -r 1 --load "$load" --device cpu --json \
        >>"$out/het.jsonl" 2>"$out/het.err" || { echo "contention.sh: hetrun bench failed:" >&2; cat "$out/het.err" >&2; exit 1; }
    [ -n "$llama" ] || continue
    for mode in quiet loaded; do
        [ $mode = loaded ] && start_load
        "$llama" -m "$lmodel" -t "$threads" -p "$pp" -n "$tg" -r 1 -o jsonl >"$out/llama.$mode.$r" 2>"$out/llama.err"
        rc=$?
        stop_load
        if [ $rc != 0 ]; then
            echo "contention.sh: llama-bench failed (rc $rc), llama.cpp rows left out:" >&2
            tail -3 "$out/llama.err" >&2
            llama=""
            break
        fi
        cat "$out/llama.$mode.$r" >>"$out/llama.$mode.jsonl"
    done
done

python3 - "$out" "$load" "$pp" "$tg" <<'PY'
import json, os, statistics, sys
out, load, pp, tg = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
rows = []
het = [json.loads(l) for l in open(os.path.join(out, "het.jsonl")) if l.strip()]
for k, name in (("pp", "pp" + pp), ("tg", "tg" + tg)):
    rows.append(("het", name, [h[k + "_tps"] for h in het], [h[k + "_load_tps"] for h in het]))
def llama(mode):
    p = os.path.join(out, "llama.%s.jsonl" % mode)
    return [json.loads(l) for l in open(p) if l.strip()] if os.path.exists(p) else []
lq, ll = llama("quiet"), llama("loaded")
if lq and ll:
    for name, sel in (("pp" + pp, lambda j: j["n_prompt"] > 0 and j["n_gen"] == 0),
                      ("tg" + tg, lambda j: j["n_gen"] > 0 and j["n_prompt"] == 0)):
        rows.append(("llama.cpp", name, [j["avg_ts"] for j in lq if sel(j)], [j["avg_ts"] for j in ll if sel(j)]))
def fmt(v):
    return "%.1f (%.1f-%.1f)" % (statistics.median(v), min(v), max(v)) if v else "-"
print("%-10s %-7s %-26s %-26s %s" % ("engine", "test", "quiet tok/s med (min-max)",
                                     "beside %d busy loops" % load, "loaded/quiet"))
for eng, name, q, l in rows:
    ratio = statistics.median(l) / statistics.median(q) if q and l else 0
    print("%-10s %-7s %-26s %-26s %.2fx" % (eng, name, fmt(q), fmt(l), ratio))
by = {(e, n): (q, l) for e, n, q, l in rows}
for name in ("pp" + pp, "tg" + tg):
    if ("het", name) in by and ("llama.cpp", name) in by:
        (hq, hl), (lq_, ll_) = by[("het", name)], by[("llama.cpp", name)]
        print("het / llama.cpp %-6s quiet %.2fx, loaded %.2fx" % (name, statistics.median(hq) / statistics.median(lq_),
                                                                 statistics.median(hl) / statistics.median(ll_)))
PY
