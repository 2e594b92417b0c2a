#!/usr/bin/env bash
# moe_gguf_py.sh — a qwen3moe file written by other tools gives het the same
# greedy tokens as llama.cpp. llama.cpp's gguf-py (GGUFWriter) writes a small
# random-weight qwen3moe GGUF in F16 (norms and the router in F32) with the
# tokenizer of a shared model; llama.cpp's llama-quantize makes Q8_0 and
# Q4_0 files of it (its own per-tensor choices: the output matrix and
# embeddings may get other types). For each of the three files:
#   - llama.cpp decodes greedily (bench/llama_greedy.c, built here against
#     the tree's llama.h and libllama), printing each token's id and the gap
#     between its logit and the runner-up's;
#   - het decodes greedily on the same prompt (hetrun run --temp 0 --devices
#     cpu): how many of llama.cpp's tokens it reproduces before the texts part;
#   - het evaluates prompt + llama.cpp's continuation at once (hetrun logits,
#     teacher forcing): at every generated position, is het's top-1 the token
#     llama.cpp chose? Counted over all positions and over the clear ones,
#     where llama.cpp's top-1 leads its runner-up by at least CLEAR (logits
#     of a random model are close to each other; a near-tie may go either way
#     under different rounding of the int8 activations).
#
#   usage: bench/moe_gguf_py.sh LLAMA_TREE LLAMA_BIN [HETRUN]
#     LLAMA_TREE  a llama.cpp checkout (gguf-py/, include/, ggml/include/)
#     LLAMA_BIN   its build/bin (llama-quantize, libllama.so)
#     HETRUN      default build/hetrun
#   env: N (tokens, default 32), CLEAR (default 0.05), PYTHON (a python3 with
#   numpy, default /usr/bin/python3), OUT (work dir, default a temp dir).
# Exits 77 (skipped) when the tree, the binaries or numpy are missing.
set -uo pipefail
cd "$(dirname "$0")/.."
tree="${1:-}" bin="${2:-}" hetrun="${3:-build/hetrun}"
n="${N:-32}" clear="${CLEAR:-0.05}" py="${PYTHON:-/usr/bin/python3}"
vocab="${HET_SHARED_DIR:-../shared}/models/synthetic/vocab-qwen3.gguf"
skip() { echo "SKIP: $*"; exit 77; }
[ -n "$tree" ] && [ -n "$bin" ] || { echo "usage: $0 LLAMA_TREE LLAMA_BIN [HETRUN]"; exit 2; }
[ -d "$tree/gguf-py/gguf" ] || skip "no gguf-py in $tree"
[ -f "$tree/include/llama.h" ] || skip "no include/llama.h in $tree"
[ -x "$bin/llama-quantize" ] || skip "no llama-quantize in $bin"
[ -f "$bin/libllama.so" ] || skip "no libllama.so in $bin"
[ -x "$hetrun" ] || skip "no $hetrun (build het first)"
[ -f "$vocab" ] || skip "no tokenizer model $vocab"
PYTHONPATH="$tree/gguf-py" "$py" -c "import numpy, gguf" 2>/dev/null || skip "$py lacks numpy or gguf-py"
out="${OUT:-$(mktemp -d)}"; mkdir -p "$out"
[ -n "${OUT:-}" ] || trap 'rm -rf "$out"' EXIT

echo "== build llama_greedy against $tree"
cc -O2 -std=c11 -I"$tree/include" -I"$tree/ggml/include" bench/llama_greedy.c -L"$bin" -lllama -lggml -lggml-base \
    -Wl,-rpath,"$bin" -o "$out/llama_greedy" || { echo "FAIL: cannot build llama_greedy"; exit 1; }

echo "== write a qwen3moe GGUF with gguf-py's GGUFWriter"
PYTHONPATH="$tree/gguf-py" "$py" - "$vocab" "$out/moe-f16.gguf" <<'PY' || { echo "FAIL: gguf-py writer"; exit 1; }
import sys
import numpy as np
import gguf

vocab_path, path = sys.argv[1], sys.argv[2]
n_embd, n_layer, n_head, n_head_kv, head_dim = 256, 2, 4, 2, 64
n_expert, n_used, n_ff_exp = 8, 2, 128
src = gguf.GGUFReader(vocab_path)
n_vocab = len(src.fields["tokenizer.ggml.tokens"].data)

w = gguf.GGUFWriter(path, "qwen3moe")
w.add_name("moe_gguf_py random qwen3moe")
w.add_context_length(4096)
w.add_embedding_length(n_embd)
w.add_block_count(n_layer)
w.add_feed_forward_length(n_ff_exp * n_used)
w.add_head_count(n_head)
w.add_head_count_kv(n_head_kv)
w.add_key_length(head_dim)
w.add_value_length(head_dim)
w.add_rope_freq_base(1e6)
w.add_layer_norm_rms_eps(1e-6)
w.add_expert_count(n_expert)
w.add_expert_used_count(n_used)
w.add_expert_feed_forward_length(n_ff_exp)
w.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
# the tokenizer: every tokenizer.* key of the shared model, as it is
for f in src.fields.values():
    if not f.name.startswith("tokenizer."):
        continue
    vt = f.types[0]
    if vt == gguf.GGUFValueType.ARRAY:
        w.add_key_value(f.name, f.contents(), vt, sub_type=f.types[-1])
    else:
        w.add_key_value(f.name, f.contents(), vt)

rng = np.random.default_rng(1234)
def mat(*shape):   # numpy order: (..., rows, cols), std 1/sqrt(cols)
    return (rng.standard_normal(shape) / np.sqrt(shape[-1])).astype(np.float16)
def norm(n):
    return (1.0 + 0.1 * rng.standard_normal(n)).astype(np.float32)

w.add_tensor("token_embd.weight", (rng.standard_normal((n_vocab, n_embd))).astype(np.float16))
for il in range(n_layer):
    b = "blk.%d." % il
    w.add_tensor(b + "attn_norm.weight", norm(n_embd))
    w.add_tensor(b + "attn_q.weight", mat(n_head * head_dim, n_embd))
    w.add_tensor(b + "attn_k.weight", mat(n_head_kv * head_dim, n_embd))
    w.add_tensor(b + "attn_v.weight", mat(n_head_kv * head_dim, n_embd))
    w.add_tensor(b + "attn_output.weight", mat(n_embd, n_head * head_dim))
    w.add_tensor(b + "attn_q_norm.weight", norm(head_dim))
    w.add_tensor(b + "attn_k_norm.weight", norm(head_dim))
    w.add_tensor(b + "ffn_norm.weight", norm(n_embd))
    w.add_tensor(b + "ffn_gate_inp.weight", (4 * rng.standard_normal((n_expert, n_embd)) / np.sqrt(n_embd)).astype(np.float32))
    w.add_tensor(b + "ffn_gate_exps.weight", mat(n_expert, n_ff_exp, n_embd))
    w.add_tensor(b + "ffn_up_exps.weight", mat(n_expert, n_ff_exp, n_embd))
    w.add_tensor(b + "ffn_down_exps.weight", mat(n_expert, n_embd, n_ff_exp))
w.add_tensor("output_norm.weight", norm(n_embd))
w.add_tensor("output.weight", mat(n_vocab, n_embd))
w.write_header_to_file()
w.write_kv_data_to_file()
w.write_tensors_to_file()
w.close()
PY

echo "== quantise with llama-quantize"
for t in Q8_0 Q4_0; do
    "$bin/llama-quantize" "$out/moe-f16.gguf" "$out/moe-${t,,}.gguf" "$t" 2 >"$out/quantize-$t.log" 2>&1 \
        || { echo "FAIL: llama-quantize $t (log: $out/quantize-$t.log)"; tail -3 "$out/quantize-$t.log"; exit 1; }
done

prompt="The capital of France is"
fail=0
for f in f16 q8_0 q4_0; do
    m="$out/moe-$f.gguf"
    "$out/llama_greedy" "$m" "$n" 2 "$prompt" >"$out/llama-$f.txt" 2>"$out/llama-$f.err" \
        || { echo "FAIL: llama.cpp on $f: $(tail -1 "$out/llama-$f.err")"; fail=1; continue; }
    "$hetrun" run -m "$m" --devices cpu -t 2 -p "$prompt" -n "$n" --temp 0 >"$out/het-$f.txt" 2>"$out/het-$f.err" \
        || { echo "FAIL: hetrun run on $f: $(tail -1 "$out/het-$f.err")"; fail=1; continue; }
    # teacher forcing: prompt + llama.cpp's continuation in one evaluation
    "$py" -c "import sys; print(sys.argv[1] + ''.join(bytes.fromhex(l.split()[3]).decode('utf-8', 'replace')
        for l in open(sys.argv[2]) if l.startswith('G') and len(l.split()) > 3), end='')" \
        "$prompt" "$out/llama-$f.txt" >"$out/forced-$f.txt"
    "$hetrun" logits -m "$m" --devices cpu -t 2 -f "$out/forced-$f.txt" -o "$out/het-$f.bin" 2>"$out/logits-$f.err" \
        || { echo "FAIL: hetrun logits on $f: $(tail -1 "$out/logits-$f.err")"; fail=1; continue; }
    "$py" - "$f" "$prompt" "$out/llama-$f.txt" "$out/het-$f.txt" "$out/het-$f.bin" "$clear" <<'PY' || fail=1
import struct, sys
import numpy as np
name, prompt, lpath, hpath, bpath, clear = sys.argv[1:7]
clear = float(clear)
P, G = [], []
for line in open(lpath):
    p = line.split()
    if p[0] == "P": P.append(int(p[1]))
    elif p[0] == "G": G.append((int(p[1]), float(p[2]), bytes.fromhex(p[3]) if len(p) > 3 else b""))
# free-running greedy: llama.cpp's pieces found, in order, in het's text
het = open(hpath, "rb").read()
pos, same = len(prompt.encode()), 0
for _, _, piece in G:
    if not het.startswith(piece, pos): break
    pos += len(piece); same += 1
# teacher forcing: het's argmax at every generated position
f = open(bpath, "rb")
n, v = struct.unpack("<ii", f.read(8))
toks = np.frombuffer(f.read(4 * n), dtype=np.int32)
logits = np.frombuffer(f.read(4 * n * v), dtype=np.float32).reshape(n, v)
want = P + [g[0] for g in G]
agree = 0
while agree < min(n, len(want)) and toks[agree] == want[agree]: agree += 1
cmp_all = eq_all = cmp_clear = eq_clear = 0
mismatch = []
for i, (tok, margin, _) in enumerate(G):
    t = len(P) + i                       # position of the generated token
    if t >= agree: break                 # het tokenised the text differently from here
    top = int(np.argmax(logits[t - 1]))
    cmp_all += 1; eq_all += top == tok
    if margin >= clear:
        cmp_clear += 1; eq_clear += top == tok
        if top != tok: mismatch.append((i, tok, top, margin))
part = "" if same == len(G) else " (llama.cpp's gap there %.3f)" % G[same][1]
print("%-5s greedy: het reproduces %d of llama.cpp's %d tokens before the texts part%s; "
      "teacher-forced top-1: %d of %d equal, %d of %d on clear positions (gap >= %g)%s"
      % (name, same, len(G), part, eq_all, cmp_all, eq_clear, cmp_clear, clear,
         "" if agree >= len(want) else "; het's tokens of the text agree up to position %d of %d" % (agree, len(want))))
for i, tok, top, margin in mismatch:
    print("      clear position %d: llama.cpp %d (gap %.3f), het %d" % (i, tok, margin, top))
sys.exit(0 if eq_clear == cmp_clear and cmp_clear > 0 else 1)
PY
done
[ $fail = 0 ] && echo "moe_gguf_py: every file agrees on the clear positions" || echo "moe_gguf_py: FAILED"
exit $fail
