/*
 * pool_estimate.c — how big a memory pool a model needs (het/model.h:
 * het_model_pool_estimate): weights, repacked copies, KV caches and the
 * activations of a whole-context prefill, before anything is placed.
 * Weights that stay in the file's mapping count as memory needed, not as
 * room in the pool.
 */
#include "het/model.h"

#include <string.h>

#define MIB ((size_t)1 << 20)

void het_model_pool_estimate(const het_model *m, const struct het_pool_estimate_params *p,
                             struct het_pool_estimate *out)
{
    memset(out, 0, sizeof *out);
    const struct het_model_config *c = het_model_get_config(m);
    const size_t weights = het_model_weight_bytes(m), n_w = (size_t)het_model_n_weights(m);
    /* the KV length het_context_init gives by default */
    size_t n_ctx = p->n_ctx > 0 ? (size_t)p->n_ctx : (size_t)(c->n_ctx_train < 4096 ? c->n_ctx_train : 4096);
    const size_t tokens = p->n_ctx_min > 0 && (size_t)p->n_ctx_min > n_ctx ? (size_t)p->n_ctx_min : n_ctx;
    const size_t n_seq = p->n_seq > 1 ? (size_t)p->n_seq : 1;
    const size_t q_dim = (size_t)c->n_head * (size_t)c->head_dim, kv_dim = (size_t)c->n_head_kv * (size_t)c->head_dim;
    /* every tensor rounded to a page */
    out->weights = weights + 4096 * (n_w + 1);
    /* a repacked copy per repacking device: matrices' panels or tiles at most
     * twice as large; 3-D expert tensors (mixtures of experts, most of such a
     * model's bytes) once: the CPU reads them as stored, a device that tiles
     * them uses compact int8/4-bit tiles about the file's size */
    size_t experts = 0;
    for (size_t i = 0; i < n_w; i++) {
        const struct het_tensor *t = het_model_weight(m, (int)i);
        if (t->ne[2] > 1 || t->ne[3] > 1) experts += het_nbytes(t);
    }
    out->repacked = (size_t)(p->n_repacking > 0 ? p->n_repacking : 0) * (2 * (weights - experts) + experts + 4096 * n_w);
    /* F16 K and V per layer, per sequence */
    out->kv = n_seq * (2 * tokens * (size_t)c->n_layer * kv_dim * 2 + 8192);
    /* activations of a whole-context prefill: the largest live set per token
     * is well under this sum, plus the logits, plus the scheduler's 25 %
     * headroom */
    const size_t per_tok = 4 * (6 * (size_t)c->n_embd + 3 * (size_t)c->n_ff + 4 * q_dim + 4 * kv_dim);
    const size_t scratch = tokens * per_tok + (p->all_logits ? tokens : 64) * (size_t)c->n_vocab * 4 + MIB;
    out->scratch = scratch + scratch / 4;
    /* weights left in the file's mapping take no room in the pool, but are
     * still memory the run needs */
    const size_t in_pool = p->weights_mapped ? 0 : out->weights;
    size_t bytes = in_pool + out->repacked + out->kv + out->scratch + 16 * MIB; /* slack: alignment, small slices */
    out->total = (bytes + 2 * MIB - 1) & ~(2 * MIB - 1);
    out->needed = out->total - out->repacked + (out->weights - in_pool);
    out->n_ctx = (int32_t)tokens;
    out->n_seq = (int32_t)n_seq;
}
