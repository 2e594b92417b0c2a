/*
 * arch_llama.c — the forward pass of the llama family (llama, qwen2, qwen3,
 * and qwen2moe / qwen3moe, whose FFN is arch_moe.c's) as a het graph,
 * readable top to bottom.
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
#include <stdio.h>
#include <string.h>

/* rms_norm(x) * gain */
static struct het_tensor *norm(het_graph *g, struct het_tensor *x, struct het_tensor *gain, float eps)
{
    return het_mul(g, het_rms_norm(g, x, eps), gain);
}

/* y's name after weight w's: "attn_q.3" for blk.3.attn_q.weight, else the
 * first 40 characters of w's. Spelled out rather than sscanf + snprintf:
 * seven of these a layer, every token. */
static void name_after_weight(struct het_tensor *y, const char *w)
{
    const char *p = w + 4, *what;
    size_t nd = 0, nw = 0;
    if (!strncmp(w, "blk.", 4)) {
        while (p[nd] >= '0' && p[nd] <= '9') nd++;
        what = p + nd + 1;
        if (nd > 0 && nd < 10 && p[nd] == '.')
            while (what[nw] && what[nw] != '.' && nw < 31) nw++;
    }
    if (!nw) {
        het_tensor_set_name(y, "%.40s", w);
        return;
    }
    const char *digits = p;
    while (nd > 1 && *digits == '0') digits++, nd--; /* as %d reads them */
    memcpy(y->name, what, nw);
    y->name[nw] = '.';
    memcpy(y->name + nw + 1, digits, nd);
    y->name[nw + 1 + nd] = '\0';
}

/* W·x (+ b), named after the weight ("attn_q.3" for blk.3.attn_q.weight) */
static struct het_tensor *linear(het_graph *g, struct het_tensor *w, struct het_tensor *b, struct het_tensor *x)
{
    struct het_tensor *y = het_mul_mat(g, w, x);
    if (y && w) name_after_weight(y, w->name);
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
                                    struct het_tensor *x, struct het_tensor *pos, const struct het_arch_seq *seqs,
                                    int32_t n_seq, int il, int32_t n_tok)
{
    const struct het_model_config *c = &m->cfg;
    struct het_tensor *q = het_reshape_3d(g, linear(g, L->wq, L->bq, x), c->head_dim, c->n_head, n_tok);
    struct het_tensor *k = het_reshape_3d(g, linear(g, L->wk, L->bk, x), c->head_dim, c->n_head_kv, n_tok);
    struct het_tensor *v = het_reshape_3d(g, linear(g, L->wv, L->bv, x), c->head_dim, c->n_head_kv, n_tok);
    /* qwen3: a per-head RMS norm of q and k before the rotation; each rope
     * right after its norm, so a device may run the three as one pass */
    if (L->q_norm) q = norm(g, q, L->q_norm, c->rms_eps);
    q = het_rope(g, q, pos, c->n_rot, (enum het_rope_mode)c->rope_mode, c->rope_base, c->rope_scale);
    if (L->k_norm) k = norm(g, k, L->k_norm, c->rms_eps);
    k = het_rope(g, k, pos, c->n_rot, (enum het_rope_mode)c->rope_mode, c->rope_base, c->rope_scale);
    het_tensor_set_name(q, "q.%d", il);
    het_tensor_set_name(k, "k.%d", il);

    const float scale = 1.0f / sqrtf((float)c->head_dim);
    struct het_tensor *o = NULL;
    if (n_seq > 1) { /* the sequences' outputs land side by side in one buffer */
        const int64_t ne[3] = { c->head_dim, c->n_head, n_tok };
        o = het_new_tensor(g, HET_TYPE_F32, 3, ne);
        het_tensor_set_name(o, "attn.%d", il);
    }
    if (!q || !k || !v || (n_seq > 1 && !o)) return NULL; /* the graph's status says why */
    for (int32_t s = 0; s < n_seq; s++) {
        const struct het_arch_seq *sq = &seqs[s];
        struct het_tensor *ks = k, *vs = v, *qs = q;
        if (n_seq > 1) { /* this sequence's rows of the batch */
            ks = het_view_3d(g, k, k->ne[0], k->ne[1], sq->n_tok, k->nb[1], k->nb[2], (size_t)sq->first * k->nb[2]);
            vs = het_view_3d(g, v, v->ne[0], v->ne[1], sq->n_tok, v->nb[1], v->nb[2], (size_t)sq->first * v->nb[2]);
            qs = het_view_3d(g, q, q->ne[0], q->ne[1], sq->n_tok, q->nb[1], q->nb[2], (size_t)sq->first * q->nb[2]);
        }
        /* append this step's k, v to the sequence's cache, then attend over all of it */
        het_cpy(g, ks, cache_view(g, sq->kv_k, il, sq->n_past, sq->n_tok));
        het_cpy(g, vs, cache_view(g, sq->kv_v, il, sq->n_past, sq->n_tok));
        struct het_tensor *keys = cache_view(g, sq->kv_k, il, 0, sq->n_past + sq->n_tok);
        struct het_tensor *vals = cache_view(g, sq->kv_v, il, 0, sq->n_past + sq->n_tok);
        struct het_tensor *os = het_attn(g, qs, keys, vals, scale, sq->n_past);
        if (n_seq == 1) {
            o = os;
            het_tensor_set_name(o, "attn.%d", il);
        } else {
            het_cpy(g, os, het_view_3d(g, o, o->ne[0], o->ne[1], sq->n_tok, o->nb[1], o->nb[2],
                                       (size_t)sq->first * (o ? o->nb[2] : 0)));
        }
    }
    o = het_reshape_2d(g, o, (int64_t)c->head_dim * c->n_head, n_tok);
    return linear(g, L->wo, NULL, o);
}

static struct het_tensor *feed_forward(het_graph *g, const struct het_layer *L, struct het_tensor *x)
{
    struct het_tensor *gate = linear(g, L->w_gate, NULL, x);
    struct het_tensor *up = linear(g, L->w_up, NULL, x);
    return linear(g, L->w_down, NULL, het_swiglu(g, gate, up));
}

static struct het_tensor *input(het_graph *g, int64_t n, const char *name)
{
    struct het_tensor *t = het_new_tensor_1d(g, HET_TYPE_I32, n);
    het_tensor_set_name(t, "%s", name);
    if (t) t->flags |= HET_TENSOR_FLAG_INPUT;
    return t;
}

struct het_tensor *het_arch_llama_build(const struct het_model *m, het_graph *g, const struct het_arch_seq *seqs,
                                        int32_t n_seq, int32_t n_tok, bool all_logits, struct het_tensor **tokens,
                                        struct het_tensor **pos, struct het_tensor **out_rows)
{
    const struct het_model_config *c = &m->cfg;
    *tokens = input(g, n_tok, "tokens");
    *pos = input(g, n_tok, "positions");
    *out_rows = NULL;

    struct het_tensor *x = het_get_rows(g, m->tok_embd, *tokens);          /* (n_embd, n_tok) */
    for (int il = 0; il < c->n_layer; il++) {
        const struct het_layer *L = &m->layers[il];
        /* attention block with residual */
        struct het_tensor *h = norm(g, x, L->attn_norm, c->rms_eps);
        h = attention(m, g, L, h, *pos, seqs, n_seq, il, n_tok);
        x = het_add(g, h, x);
        /* feed-forward block with residual */
        h = norm(g, x, L->ffn_norm, c->rms_eps);
        h = L->ffn_gate_inp ? het_arch_moe_ffn(m, g, L, h, il) : feed_forward(g, L, h);
        x = het_add(g, h, x);
        het_tensor_set_name(x, "x.%d", il);
    }
    if (!all_logits && n_tok > n_seq) { /* only each sequence's last token needs logits */
        *out_rows = input(g, n_seq, "output rows");
        x = het_get_rows(g, x, *out_rows);                                  /* (n_embd, n_seq) */
    }
    x = norm(g, x, m->output_norm, c->rms_eps);
    struct het_tensor *logits = het_mul_mat(g, m->output, x);               /* (n_vocab, n_out) */
    if (!logits) return NULL;
    het_tensor_set_name(logits, "logits");
    logits->flags |= HET_TENSOR_FLAG_OUTPUT;
    return logits;
}

/* The cache views of a decode step, for het_arch_llama_advance: a view's
 * owner is the cache, and a CPY node keeps the owner and offset of the view
 * it writes through. */
static bool is_cache(const struct het_tensor *t, const struct het_arch_seq *seq)
{
    return t && (t->view_src == seq->kv_k || t->view_src == seq->kv_v);
}

bool het_arch_llama_advance(het_graph *g, const struct het_arch_seq *seq, int32_t from)
{
    const int64_t n_kv_old = (int64_t)from + seq->n_tok, n_kv = (int64_t)seq->n_past + seq->n_tok;
    const int64_t step = (int64_t)seq->kv_k->nb[1] * ((int64_t)seq->n_past - from);
    if (seq->kv_k->nb[1] != seq->kv_v->nb[1] || n_kv > seq->kv_k->ne[1]) return false;
    const int n = het_graph_n_nodes(g);
    int n_attn = 0, n_cpy = 0;
    /* check everything first, so a graph that does not match is left as it is */
    for (int i = 0; i < n; i++) {
        const struct het_tensor *t = het_graph_node(g, i);
        if (t->op == HET_OP_ATTN) {
            const struct het_tensor *k = t->src[1], *v = t->src[2];
            if (t->op_params[1] != from || !is_cache(k, seq) || !is_cache(v, seq) || k->op != HET_OP_VIEW ||
                v->op != HET_OP_VIEW || k->ne[2] != n_kv_old || v->ne[2] != n_kv_old || k->ne[3] != 1 || v->ne[3] != 1)
                return false;
            n_attn++;
        } else if (t->op == HET_OP_CPY && is_cache(t, seq)) {
            const struct het_tensor *d = t->src[1];
            if (!is_cache(d, seq) || d->op != HET_OP_VIEW || d->view_offs != t->view_offs ||
                (int64_t)d->view_offs + step < 0 ||
                (size_t)((int64_t)d->view_offs + step) + het_nbytes(d) > het_nbytes(d->view_src))
                return false;
            n_cpy++;
        }
    }
    if (n_attn == 0 || n_cpy != 2 * n_attn) return false;
    for (int i = 0; i < n; i++) {
        struct het_tensor *t = het_graph_node(g, i);
        if (t->op == HET_OP_ATTN) {
            t->op_params[1] = seq->n_past;
            for (int s = 1; s <= 2; s++) {
                struct het_tensor *kv = t->src[s];
                kv->ne[2] = n_kv;
                kv->nb[3] = kv->nb[2] * (size_t)n_kv;
            }
        } else if (t->op == HET_OP_CPY && is_cache(t, seq)) {
            t->view_offs = (size_t)((int64_t)t->view_offs + step);
            t->src[1]->view_offs = t->view_offs;
        }
    }
    /* storage as a fresh build leaves it: none on the tensors that own theirs
     * (the scheduler's scratch, given again), views where their owner is */
    for (int i = 0; i < het_graph_n_tensors(g); i++) {
        struct het_tensor *t = het_graph_tensor(g, i);
        if (t->view_src) t->data = t->view_src->data ? (char *)t->view_src->data + t->view_offs : NULL;
        else if (t->op != HET_OP_VIEW) t->data = NULL;
    }
    return true;
}
