/*
 * arch_moe.c — the mixture-of-experts feed-forward block of qwen2moe and
 * qwen3moe, computed as llama.cpp's build_moe_ffn does (softmax gating):
 *
 *   p   = softmax(W_router · x)                     (n_expert, T)
 *   sel = top_k(p, k)                               (k, T) expert ids
 *   w   = p[sel]             qwen3moe: w /= sum(w)  (k, T) routing weights
 *   y_s = W_down[sel_s] · (silu(W_gate[sel_s]·x) * W_up[sel_s]·x)
 *   out = sum_s w_s · y_s                           (n_embd, T)
 *   qwen2moe: out += sigmoid(w_shexp · x) · W_down_sh·(silu(W_gate_sh·x) * W_up_sh·x)
 *
 * llama.cpp divides by max(sum, 6.1e-5); the sum of the k largest of E
 * softmax probabilities is at least k/E >= 1/1024, so the clamp never acts
 * and a plain division is the same.
 */
#include "model/model_impl.h"

#include <stdio.h>

/* W·x named like arch_llama.c's linear ("ffn_up_exps.3") */
static void name_after(struct het_tensor *y, const struct het_tensor *w)
{
    int il = -1;
    char what[32] = "";
    if (y && w && sscanf(w->name, "blk.%d.%31[^.]", &il, what) == 2) het_tensor_set_name(y, "%s.%d", what, il);
}

static struct het_tensor *experts(het_graph *g, struct het_tensor *w, struct het_tensor *x, struct het_tensor *sel)
{
    struct het_tensor *y = het_mul_mat_id(g, w, x, sel);
    name_after(y, w);
    return y;
}

static struct het_tensor *linear(het_graph *g, struct het_tensor *w, struct het_tensor *x)
{
    struct het_tensor *y = het_mul_mat(g, w, x);
    name_after(y, w);
    return y;
}

struct het_tensor *het_arch_moe_ffn(const struct het_model *m, het_graph *g, const struct het_layer *L,
                                    struct het_tensor *x, int il)
{
    const struct het_model_config *c = &m->cfg;
    if (!x) return NULL;
    const int64_t T = x->ne[1], E = c->n_expert, k = c->n_expert_used;

    /* routing */
    struct het_tensor *probs = het_softmax(g, linear(g, L->ffn_gate_inp, x), NULL, 1.0f, -1);
    het_tensor_set_name(probs, "ffn_moe_probs.%d", il);
    struct het_tensor *sel = het_top_k(g, probs, (int)k);
    het_tensor_set_name(sel, "ffn_moe_topk.%d", il);
    /* kept to the end of the graph (k x T ids): the scheduler counts the
     * experts each router chose, to plan the next graphs with (moe_routing.c) */
    if (sel) sel->flags |= HET_TENSOR_FLAG_OUTPUT;
    struct het_tensor *w = het_get_rows(g, het_reshape_3d(g, probs, 1, E, T), sel);   /* (1, k, T) */
    w = het_reshape_2d(g, w, k, T);
    if (c->expert_norm) w = het_div(g, w, het_sum_rows(g, w));
    het_tensor_set_name(w, "ffn_moe_weights.%d", il);

    /* the k experts of every token */
    struct het_tensor *x3 = het_reshape_3d(g, x, x->ne[0], 1, T);
    struct het_tensor *up = experts(g, L->ffn_up_exps, x3, sel);                   /* (n_ff_exp, k, T) */
    struct het_tensor *gate = experts(g, L->ffn_gate_exps, x3, sel);
    struct het_tensor *down = experts(g, L->ffn_down_exps, het_swiglu(g, gate, up), sel); /* (n_embd, k, T) */
    struct het_tensor *out = het_moe_sum(g, down, w);
    het_tensor_set_name(out, "ffn_moe_out.%d", il);
    if (!L->ffn_gate_inp_shexp) return out;

    /* qwen2moe: the shared expert, gated per token */
    struct het_tensor *sh = linear(g, L->ffn_down_shexp,
                                   het_swiglu(g, linear(g, L->ffn_gate_shexp, x), linear(g, L->ffn_up_shexp, x)));
    struct het_tensor *gate_sh = het_sigmoid(g, linear(g, L->ffn_gate_inp_shexp, x));  /* (1, T) */
    sh = het_mul(g, sh, gate_sh);
    het_tensor_set_name(sh, "ffn_shexp_out.%d", il);
    return het_add(g, out, sh);
}
