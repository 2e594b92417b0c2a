/*
 * arch_llama.c — the forward pass of the llama family (llama, qwen2, qwen3)
 * as a het graph, readable top to bottom.
 *
 * The three architectures differ in small ways, written where they apply:
 * qwen2 adds biases to q/k/v; qwen3 normalises q and k per head (RMS norm
 * with a learned gain) before rope; llama pairs rope dims (2i, 2i+1) while
 * qwen pairs (i, i + n_rot/2) (NEOX). Everything else is shared:
 *   x = embed(tokens)
 *   per layer: x += Wo · attn(rope(Wq·n(x)), rope(Wk·n(x)), Wv·n(x))
 *              x += Wdown · (silu(Wgate·n(x)) * Wup·n(x))
 *   logits = Wout · n(x)
 */
#include "model/model_impl.h"

#include <math.h>

/* rms_norm(x) * gain */
static struct het_tensor *norm(het_graph *g, struct het_tensor *x, struct het_tensor *gain, float eps)
{
    return het_mul(g, het_rms_norm(g, x, eps), gain);
}

/* W·x (+ b) */
static struct het_tensor *linear(het_graph *g, struct het_tensor *w, struct het_tensor *b, struct het_tensor *x)
{
    struct het_tensor *y = het_mul_mat(g, w, x);
    return b ? het_add(g, y, b) : y;
}

/* K or V cache of layer il, tokens [first, first+n), as (head_dim, n_head_kv, n).
 * The cache is stored (head_dim, n_ctx, n_head_kv, n_layer): the view swaps
 * the strides of dims 1 and 2, so kernels see token-major indexing over
 * head-major storage. */
static struct het_tensor *cache_view(het_graph *g, struct het_tensor *cache, int il, int32_t first, int32_t n)
{
    return het_view_3d(g, cache, cache->ne[0], cache->ne[2], n, cache->nb[2], cache->nb[1],
                       (size_t)il * cache->nb[3] + (size_t)first * cache->nb[1]);
}

static struct het_tensor *attention(const struct het_model *m, het_graph *g, const struct het_layer *L,
                                    struct het_tensor *x, struct het_tensor *pos, struct het_tensor *kv_k,
                                    struct het_tensor *kv_v, int il, int32_t n_tok, int32_t n_past)
{
    const struct het_model_config *c = &m->cfg;
    struct het_tensor *q = het_reshape_3d(g, linear(g, L->wq, L->bq, x), c->head_dim, c->n_head, n_tok);
    struct het_tensor *k = het_reshape_3d(g, linear(g, L->wk, L->bk, x), c->head_dim, c->n_head_kv, n_tok);
    struct het_tensor *v = het_reshape_3d(g, linear(g, L->wv, L->bv, x), c->head_dim, c->n_head_kv, n_tok);
    if (L->q_norm) { /* qwen3: per-head RMS norm of q and k */
        q = norm(g, q, L->q_norm, c->rms_eps);
        k = norm(g, k, L->k_norm, c->rms_eps);
    }
    q = het_rope(g, q, pos, c->n_rot, (enum het_rope_mode)c->rope_mode, c->rope_base, c->rope_scale);
    k = het_rope(g, k, pos, c->n_rot, (enum het_rope_mode)c->rope_mode, c->rope_base, c->rope_scale);
    het_tensor_set_name(q, "q.%d", il);
    het_tensor_set_name(k, "k.%d", il);

    /* append this step's k, v to the cache, then attend over all of it */
    het_cpy(g, k, cache_view(g, kv_k, il, n_past, n_tok));
    het_cpy(g, v, cache_view(g, kv_v, il, n_past, n_tok));
    struct het_tensor *keys = cache_view(g, kv_k, il, 0, n_past + n_tok);
    struct het_tensor *vals = cache_view(g, kv_v, il, 0, n_past + n_tok);
    struct het_tensor *o = het_attn(g, q, keys, vals, 1.0f / sqrtf((float)c->head_dim), n_past);
    het_tensor_set_name(o, "attn.%d", il);
    o = het_reshape_2d(g, o, (int64_t)c->head_dim * c->n_head, n_tok);
    return het_mul_mat(g, L->wo, o);
}

static struct het_tensor *feed_forward(het_graph *g, const struct het_layer *L, struct het_tensor *x)
{
    struct het_tensor *gate = het_mul_mat(g, L->w_gate, x);
    struct het_tensor *up = het_mul_mat(g, L->w_up, x);
    return het_mul_mat(g, L->w_down, het_swiglu(g, gate, up));
}

struct het_tensor *het_arch_llama_build(const struct het_model *m, het_graph *g, struct het_tensor *kv_k,
                                        struct het_tensor *kv_v, int32_t n_tok, int32_t n_past, bool all_logits,
                                        struct het_tensor **tokens, struct het_tensor **pos)
{
    const struct het_model_config *c = &m->cfg;
    *tokens = het_new_tensor_1d(g, HET_TYPE_I32, n_tok);
    *pos = het_new_tensor_1d(g, HET_TYPE_I32, n_tok);
    if (!*tokens || !*pos) return NULL;
    het_tensor_set_name(*tokens, "tokens");
    het_tensor_set_name(*pos, "positions");
    (*tokens)->flags |= HET_TENSOR_FLAG_INPUT;
    (*pos)->flags |= HET_TENSOR_FLAG_INPUT;

    struct het_tensor *x = het_get_rows(g, m->tok_embd, *tokens);          /* (n_embd, n_tok) */
    for (int il = 0; il < c->n_layer; il++) {
        const struct het_layer *L = &m->layers[il];
        /* attention block with residual */
        struct het_tensor *h = norm(g, x, L->attn_norm, c->rms_eps);
        h = attention(m, g, L, h, *pos, kv_k, kv_v, il, n_tok, n_past);
        x = het_add(g, h, x);
        /* feed-forward block with residual */
        h = norm(g, x, L->ffn_norm, c->rms_eps);
        h = feed_forward(g, L, h);
        x = het_add(g, h, x);
        het_tensor_set_name(x, "x.%d", il);
    }
    if (!all_logits && n_tok > 1) /* only the last token's logits are needed */
        x = het_view_2d(g, x, c->n_embd, 1, x ? x->nb[1] : 0, x ? (size_t)(n_tok - 1) * x->nb[1] : 0);
    x = norm(g, x, m->output_norm, c->rms_eps);
    struct het_tensor *logits = het_mul_mat(g, m->output, x);               /* (n_vocab, n_out) */
    if (!logits) return NULL;
    het_tensor_set_name(logits, "logits");
    logits->flags |= HET_TENSOR_FLAG_OUTPUT;
    return logits;
}
