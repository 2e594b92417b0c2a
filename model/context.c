/*
 * context.c — per-request state: the KV cache, the graph of each step and
 * the logits it produced.
 *
 * Each eval builds the graph for its batch shape (prefill: n tokens; decode:
 * 1), lets the scheduler assign scratch and run it on the device set, and
 * copies the logits out. The KV cache (F16, one block per layer) is
 * registered once with every device as persistent state.
 */
#include "model/model_impl.h"

#include <stdlib.h>
#include <string.h>

struct het_context {
    struct het_model *model;
    het_sched        *sched;
    int32_t           n_ctx;
    int32_t           n_past;
    void             *kv_mem;      /* K then V, page aligned                 */
    size_t            kv_bytes;
    struct het_tensor kv_k;        /* (head_dim, n_ctx, n_head_kv, n_layer)  */
    struct het_tensor kv_v;
    het_graph        *graph;
    float            *logits;      /* n_logits rows of n_vocab               */
    int32_t           n_logits;
    int32_t           cap_logits;
};

het_context *het_context_init(het_model *m, const struct het_context_params *p, het_error *err)
{
    const struct het_model_config *c = het_model_get_config(m);
    if (!p->sched) {
        het_error_set(err, HET_ERR_INVALID, "context: no scheduler given");
        return NULL;
    }
    int32_t n_ctx = p->n_ctx > 0 ? p->n_ctx : (c->n_ctx_train < 4096 ? c->n_ctx_train : 4096);
    struct het_context *ctx = calloc(1, sizeof *ctx);
    if (!ctx) {
        het_error_set(err, HET_ERR_NOMEM, "context: out of memory");
        return NULL;
    }
    ctx->model = m;
    ctx->sched = p->sched;
    ctx->n_ctx = n_ctx;

    /* grouped by kv head: one head's keys are adjacent rows, which is what
     * the attention kernels stream through */
    const int64_t ne[4] = { c->head_dim, n_ctx, c->n_head_kv, c->n_layer };
    enum het_type kv_type = p->kv_f32 ? HET_TYPE_F32 : HET_TYPE_F16;
    het_tensor_init(&ctx->kv_k, kv_type, 4, ne);
    het_tensor_init(&ctx->kv_v, kv_type, 4, ne);
    size_t one = het_nbytes(&ctx->kv_k);
    one = (one + 4095) & ~(size_t)4095;
    ctx->kv_bytes = 2 * one;
    ctx->kv_mem = aligned_alloc(4096, ctx->kv_bytes);
    if (!ctx->kv_mem) {
        het_error_set(err, HET_ERR_NOMEM, "context: cannot allocate %zu bytes of KV cache (n_ctx %d)", ctx->kv_bytes,
                      n_ctx);
        goto fail;
    }
    memset(ctx->kv_mem, 0, ctx->kv_bytes);
    ctx->kv_k.data = ctx->kv_mem;
    ctx->kv_v.data = (char *)ctx->kv_mem + one;
    ctx->kv_k.flags = ctx->kv_v.flags = HET_TENSOR_FLAG_STATE;
    het_tensor_set_name(&ctx->kv_k, "cache_k");
    het_tensor_set_name(&ctx->kv_v, "cache_v");
    if (het_sched_register_memory(ctx->sched, ctx->kv_mem, ctx->kv_bytes, 1 /* state */, err) != HET_OK) goto fail;

    ctx->graph = het_graph_init(64 + 64 * c->n_layer);
    if (!ctx->graph) {
        het_error_set(err, HET_ERR_NOMEM, "context: out of memory");
        goto fail;
    }
    return ctx;
fail:
    het_context_free(ctx);
    return NULL;
}

void het_context_free(het_context *ctx)
{
    if (!ctx) return;
    het_graph_free(ctx->graph);
    free(ctx->kv_mem);
    free(ctx->logits);
    free(ctx);
}

static enum het_status keep_logits(het_context *ctx, const struct het_tensor *out, het_error *err)
{
    int32_t n_vocab = ctx->model->cfg.n_vocab, rows = (int32_t)out->ne[1];
    if (rows > ctx->cap_logits) {
        float *l = realloc(ctx->logits, (size_t)rows * n_vocab * sizeof *l);
        if (!l) return het_error_set(err, HET_ERR_NOMEM, "context: out of memory for logits");
        ctx->logits = l;
        ctx->cap_logits = rows;
    }
    for (int32_t r = 0; r < rows; r++)
        memcpy(ctx->logits + (size_t)r * n_vocab, (const char *)out->data + r * out->nb[1], n_vocab * sizeof(float));
    ctx->n_logits = rows;
    return HET_OK;
}

enum het_status het_context_eval(het_context *ctx, const int32_t *tokens, int32_t n, bool all_logits,
                                 het_error *err)
{
    const struct het_model_config *c = &ctx->model->cfg;
    if (n <= 0) return het_error_set(err, HET_ERR_INVALID, "eval: no tokens");
    if (ctx->n_past + n > ctx->n_ctx)
        return het_error_set(err, HET_ERR_INVALID, "eval: %d + %d tokens exceed the context of %d", ctx->n_past, n,
                             ctx->n_ctx);
    for (int32_t i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= c->n_vocab)
            return het_error_set(err, HET_ERR_INVALID, "eval: token %d at index %d out of range (n_vocab %d)",
                                 tokens[i], i, c->n_vocab);

    het_graph_reset(ctx->graph);
    struct het_tensor *tok_in, *pos_in;
    struct het_tensor *logits = het_arch_llama_build(ctx->model, ctx->graph, &ctx->kv_k, &ctx->kv_v, n, ctx->n_past,
                                                     all_logits, &tok_in, &pos_in);
    enum het_status st = het_graph_status(ctx->graph, err);
    if (st != HET_OK || !logits) return st != HET_OK ? st : het_error_set(err, HET_ERR_INVALID, "eval: graph build failed");
    if ((st = het_sched_alloc_graph(ctx->sched, ctx->graph, err)) != HET_OK) return st;
    memcpy(tok_in->data, tokens, (size_t)n * sizeof *tokens);
    int32_t *pos = pos_in->data;
    for (int32_t i = 0; i < n; i++) pos[i] = ctx->n_past + i;
    if ((st = het_sched_compute(ctx->sched, ctx->graph, err)) != HET_OK) return st;
    ctx->n_past += n;
    return keep_logits(ctx, logits, err);
}

const float *het_context_logits(const het_context *ctx, int32_t *n_out)
{
    if (n_out) *n_out = ctx->n_logits;
    return ctx->logits;
}

int32_t het_context_n_past(const het_context *ctx) { return ctx->n_past; }
int32_t het_context_n_ctx(const het_context *ctx) { return ctx->n_ctx; }
void    het_context_reset(het_context *ctx) { ctx->n_past = 0; }
size_t  het_context_kv_bytes(const het_context *ctx) { return ctx->kv_bytes; }
