#!/bin/sh
# vs_llama.sh — het's CPU beside llama.cpp's on the same GGUF files, in the
# same run: for each file, ROUNDS rounds of `llama-bench -r 1` then
# `hetrun bench -r 1` (interleaved, so both see the same machine load), then
# one table row per file with the median and min-max of the rounds and het's
# figures as a fraction of the bounds `hetrun bench` measured in the same
# round (for tg, the read bandwidth measured right after the decode run,
# best of 5 reads, and the rate of the reads taken between its tokens;
# int8/F32 peaks for pp).
#
#   bench/vs_llama.sh LLAMA_BENCH HETRUN[,HETRUN...] [-t THREADS] [-r ROUNDS] [-p PP] [-n TG] [-d DEPTH] FILE...
#
# -d DEPTH: every run of both starts from a cache of DEPTH tokens (llama-bench
# -d, hetrun bench -d). LLAMA_ARGS="..." adds flags to every llama-bench run
# (e.g. "-fa 0": its flash-attention setting changes decode at depth).
#
# Several hetrun binaries (comma-separated: an old and a new build, say) run
# one after the other in every round, each round starting from the next one,
# and each gets its own row. With
# BENCH_LOCK=FILE every single run holds `flock FILE`, so that benchmarks of
# others on a shared machine never run at the same time as one of these.
#
# llama.cpp is built outside this repository (docs/ and bench/README.md say
# how); nothing of it is part of het.
set -eu
[ $# -ge 3 ] || { echo "usage: $0 LLAMA_BENCH HETRUN[,HETRUN...] [-t N] [-r N] [-p N] [-n N] [-d N] FILE..." >&2; exit 2; }
lb=$1 hets=$(echo "$2" | tr ',' ' ')
shift 2
threads=2 rounds=3 pp=512 tg=128 depth=0
while [ $# -gt 0 ]; do
    case $1 in
    -t) threads=$2; shift 2 ;;
    -r) rounds=$2; shift 2 ;;
    -p) pp=$2; shift 2 ;;
    -n) tg=$2; shift 2 ;;
    -d) depth=$2; shift 2 ;;
    *) break ;;
    esac
done
[ $# -gt 0 ] || { echo "$0: no model files" >&2; exit 2; }
command -v python3 >/dev/null || { echo "$0: python3 is needed to read the JSON" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
locked() { if [ -n "${BENCH_LOCK:-}" ]; then flock "$BENCH_LOCK" "$@"; else "$@"; fi; }

echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) CPUs; threads $threads;" \
     "$rounds rounds; pp$pp tg$tg depth $depth; llama-bench ${LLAMA_ARGS:-(defaults)}; load at start: $(cut -d' ' -f1-3 /proc/loadavg)"
for f in "$@"; do
    for r in $(seq "$rounds"); do
        # shellcheck disable=SC2086 # LLAMA_ARGS is a list of flags
        locked "$lb" -m "$f" -t "$threads" -p "$pp" -n "$tg" -d "$depth" ${LLAMA_ARGS:-} -r 1 -o jsonl >"$tmp/llama.$r" 2>"$tmp/llama.err" ||
            { echo "$0: llama-bench failed on $f: $(tail -1 "$tmp/llama.err")" >&2; exit 1; }
        # each round starts from the next binary: a hetrun run straight
        # after another got 0.88-1.08x its pp512 here (the same binary, five
        # rounds, median 0.97; two builds compared first one way round then
        # the other, 0.88x and 1.00x), so a fixed order favours the first
        n_het=$(echo "$hets" | wc -w)
        for k in $(seq 0 $((n_het - 1))); do
            i=$(( (k + r - 1) % n_het + 1 ))
            het=$(echo "$hets" | cut -d' ' -f"$i")
            HET_CALIBRATE=0 locked "$het" bench -m "$f" -t "$threads" -p "$pp" -n "$tg" -d "$depth" -r 1 --device cpu --json \
                >"$tmp/het.$i.$r" 2>"$tmp/het.err" ||
                { echo "$0: $het bench failed on $f: $(tail -1 "$tmp/het.err")" >&2; exit 1; }
        done
        cut -d' ' -f1 /proc/loadavg >"$tmp/load.$r"
    done
    python3 - "$f" "$tmp" "$rounds" "$pp" "$tg" $hets <<'PY'
import json, os, statistics as st, sys
f, tmp, rounds, pp, tg = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
hets = sys.argv[6:]
L = {"pp": [], "tg": []}
for r in range(1, rounds + 1):
    for line in open(os.path.join(tmp, "llama.%d" % r)):
        j = json.loads(line)
        if j.get("n_prompt") == pp and j.get("n_gen") == 0: L["pp"].append(j["avg_ts"])
        if j.get("n_gen") == tg and j.get("n_prompt") == 0: L["tg"].append(j["avg_ts"])
load = [float(open(os.path.join(tmp, "load.%d" % r)).read()) for r in range(1, rounds + 1)]
def cell(v): return "%.1f (%.1f-%.1f)" % (st.median(v), min(v), max(v))
for i, het in enumerate(hets, 1):
    H = {"pp": [], "tg": []}; Hb = {"pp": [], "tg": []}; Hr = []
    for r in range(1, rounds + 1):
        h = json.load(open(os.path.join(tmp, "het.%d.%d" % (i, r))))
        H["pp"].append(h["pp_tps"]); H["tg"].append(h["tg_tps"])
        Hb["pp"].append(h["pp_tps"] / h["pp_bound_tps"] if h["pp_bound_tps"] else 0)
        # each decode run against the bandwidth measured right after it, where bench says so
        Hb["tg"].append(h["tg_of_bound"] if "tg_of_bound" in h else
                        h["tg_tps"] / h["tg_bound_tps"] if h["tg_bound_tps"] else 0)
        # and against the reads taken between its tokens (the same seconds)
        if "tg_of_run_bound" in h: Hr.append(h["tg_of_run_bound"])
    row = [os.path.basename(f)] + ([het] if len(hets) > 1 else [])
    for k in ("pp", "tg"):
        if not L[k] or not all(H[k]):  # -p 0 or -n 0: no such run
            row += ["-"] * 4
            continue
        row += [cell(H[k]), cell(L[k]), "%.2fx" % (st.median(H[k]) / st.median(L[k])),
                "%.0f%% (%.0f-%.0f)" % (100 * st.median(Hb[k]), 100 * min(Hb[k]), 100 * max(Hb[k]))]
    row.append("%.0f%% (%.0f-%.0f)" % (100 * st.median(Hr), 100 * min(Hr), 100 * max(Hr)) if Hr else "-")
    row.append("%.1f-%.1f" % (min(load), max(load)))
    print("| " + " | ".join(row) + " |")
PY
done
echo "columns: file | [hetrun] | pp het | pp llama.cpp | het/llama.cpp | het pp / measured pp bound | tg het |" \
     "tg llama.cpp | het/llama.cpp | het tg / tg bound read right after the run (best of 5) |" \
     "het tg / tg bound read between the run's tokens | 1-min load average after each round;" \
     "median (min-max) of the rounds, tok/s; load at end: $(cut -d' ' -f1-3 /proc/loadavg)"
