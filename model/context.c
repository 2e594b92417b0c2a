/*
 * context.c — per-request state: the KV caches of n_seq sequences, the graph
 * of each step and the logits it produced.
 *
 * Each eval builds the graph for its batch shape (prefill: n tokens; decode:
 * one token per running sequence; or a mix), lets the scheduler assign
 * scratch and run it on the device set, and copies the logits out. A step
 * of one sequence with as many tokens as the step before it, of the same
 * sequence, reuses that graph, moved to the new n_past (struct
 * het_context_step). Each sequence's KV cache (F16 by default) is
 * registered once with every device as persistent state. A cache in the
 * pool is fresh memfd memory whose pages arrive on first write; before a
 * step writes past the resident positions, the pages of the next
 * HET_KV_RESIDENT_STEP positions of every head are made resident in one
 * call per head (kv_make_resident).
 */
#include "model/model_impl.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* Positions whose cache pages are made resident at a time. One head's row
 * of an F16 cache of head_dim 128 is 256 bytes: left to fault in, a page
 * arrived every 16 positions for each head, K and V, of every layer. In
 * decode (Qwen3-0.6B shape, 2 threads, Zen 4 VM) 1 in 16 of the copies
 * into the cache then took over 19 us, and they averaged 3.6-4.1 us; with
 * the pages made resident 256 positions at a time, 2.0-2.5 us. */
#define HET_KV_RESIDENT_STEP 256

struct het_seq_state {
    int32_t           n_past;
    void             *mem;     /* K then V, page aligned                 */
    struct het_slice  slice;   /* mem's pool slice (size 0: host memory)  */
    struct het_tensor kv_k;    /* (head_dim, n_ctx, n_head_kv, n_layer)  */
    struct het_tensor kv_v;
    int32_t           n_resident; /* positions whose pages are resident (kv_make_resident) */
};

/* The batch the graph was last built (or moved) for. A step of one sequence
 * builds a graph that the next step of that sequence with as many tokens
 * reuses, moved to its n_past (het_arch_llama_advance): decode does not
 * build the same graph again for every token. */
struct het_context_step {
    bool               valid;
    int32_t            seq, n_tok, n_past;
    bool               all_logits;
    struct het_tensor *logits, *tok_in, *pos_in, *rows_in;
};

struct het_context {
    struct het_model     *model;
    het_sched            *sched;
    het_pool             *pool;        /* KV slices come from here, or NULL */
    int32_t               n_ctx;
    int32_t               n_seq;
    struct het_seq_state *seqs;
    size_t                kv_bytes;    /* all sequences                     */
    het_graph            *graph;
    struct het_context_step last;      /* what graph was built for          */
    float                *logits;      /* n_logits rows of n_vocab          */
    int32_t               n_logits;
    int32_t               cap_logits;
};

static enum het_status seq_init(het_context *ctx, struct het_seq_state *s, bool kv_f32, het_error *err)
{
    const struct het_model_config *c = &ctx->model->cfg;
    /* grouped by kv head: one head's keys are adjacent rows, which is what
     * the attention kernels stream through */
    const int64_t ne[4] = { c->head_dim, ctx->n_ctx, c->n_head_kv, c->n_layer };
    enum het_type type = kv_f32 ? HET_TYPE_F32 : HET_TYPE_F16;
    het_tensor_init(&s->kv_k, type, 4, ne);
    het_tensor_init(&s->kv_v, type, 4, ne);
    size_t one = (het_nbytes(&s->kv_k) + 4095) & ~(size_t)4095;
    if (ctx->pool) {
        /* zeroed without touching a page when the slice is fresh memfd memory */
        enum het_status st = het_pool_alloc_zeroed(ctx->pool, 2 * one, 0, &s->slice, err);
        if (st != HET_OK) {
            if (err) het_error_prefix(err, "context: KV cache (n_ctx %d)", ctx->n_ctx);
            return st;
        }
        s->mem = het_pool_ptr(ctx->pool, s->slice.offset);
    } else {
        s->mem = aligned_alloc(4096, 2 * one);
        if (!s->mem)
            return het_error_set(err, HET_ERR_NOMEM, "context: cannot allocate %zu bytes of KV cache (n_ctx %d)",
                                 2 * one, ctx->n_ctx);
        memset(s->mem, 0, 2 * one);
    }
    s->n_resident = ctx->pool ? 0 : ctx->n_ctx; /* host memory: memset touched every page */
    s->kv_k.data = s->mem;
    s->kv_v.data = (char *)s->mem + one;
    s->kv_k.flags = s->kv_v.flags = HET_TENSOR_FLAG_STATE;
    het_tensor_set_name(&s->kv_k, "cache_k");
    het_tensor_set_name(&s->kv_v, "cache_v");
    ctx->kv_bytes += 2 * one;
    return het_sched_register_memory(ctx->sched, s->mem, 2 * one, 1 /* state */, err);
}

het_context *het_context_init(het_model *m, const struct het_context_params *p, het_error *err)
{
    const struct het_model_config *c = het_model_get_config(m);
    if (!p->sched) {
        het_error_set(err, HET_ERR_INVALID, "context: no scheduler given");
        return NULL;
    }
    if (p->n_seq < 0 || p->n_seq > 1024 || p->n_ctx < 0) {
        het_error_set(err, HET_ERR_INVALID, "context: n_seq %d / n_ctx %d out of range", p->n_seq, p->n_ctx);
        return NULL;
    }
    struct het_context *ctx = calloc(1, sizeof *ctx);
    if (!ctx) {
        het_error_set(err, HET_ERR_NOMEM, "context: out of memory");
        return NULL;
    }
    ctx->model = m;
    ctx->sched = p->sched;
    ctx->pool = p->pool;
    ctx->n_ctx = p->n_ctx > 0 ? p->n_ctx : (c->n_ctx_train < 4096 ? c->n_ctx_train : 4096);
    ctx->n_seq = p->n_seq > 0 ? p->n_seq : 1;
    ctx->seqs = calloc((size_t)ctx->n_seq, sizeof *ctx->seqs);
    if (!ctx->seqs) {
        het_error_set(err, HET_ERR_NOMEM, "context: out of memory");
        goto fail;
    }
    for (int32_t s = 0; s < ctx->n_seq; s++)
        if (seq_init(ctx, &ctx->seqs[s], p->kv_f32, err) != HET_OK) goto fail;
    /* per layer: ~30 tensors, plus ~13 per sequence (its q/k/v rows, cache
     * views, copies and attention); a little headroom on both */
    ctx->graph = het_graph_init(64 + (40 + 16 * ctx->n_seq) * c->n_layer);
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
    for (int32_t s = 0; ctx->seqs && s < ctx->n_seq; s++) {
        struct het_seq_state *q = &ctx->seqs[s];
        if (q->slice.size) het_pool_release(ctx->pool, q->slice, NULL);
        else free(q->mem);
    }
    free(ctx->seqs);
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

/* Make the cache pages of positions [n_resident, upto) resident, and as
 * many more as HET_KV_RESIDENT_STEP asks, with MADV_POPULATE_WRITE over
 * each head's rows of K and V in every layer. A kernel or a mapping that
 * cannot do so (EINVAL) leaves the pages to arrive on first write, as
 * before; memory that cannot be had is an error here rather than a SIGBUS
 * in a kernel later. */
static enum het_status kv_make_resident(het_context *ctx, struct het_seq_state *s, int32_t upto, het_error *err)
{
    if (upto <= s->n_resident) return HET_OK;
    int32_t end = s->n_resident + HET_KV_RESIDENT_STEP;
    if (end < upto) end = upto;
    if (end > ctx->n_ctx) end = ctx->n_ctx;
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    for (int kv = 0; kv < 2; kv++) {
        const struct het_tensor *t = kv ? &s->kv_v : &s->kv_k;
        for (int64_t l = 0; l < t->ne[3]; l++) {
            for (int64_t h = 0; h < t->ne[2]; h++) {
                const uintptr_t row0 = (uintptr_t)t->data + (size_t)l * t->nb[3] + (size_t)h * t->nb[2];
                const uintptr_t a = (row0 + (size_t)s->n_resident * t->nb[1]) & ~(page - 1);
                const uintptr_t b = (row0 + (size_t)end * t->nb[1] + page - 1) & ~(page - 1);
                int rc;
                while ((rc = madvise((void *)a, b - a, MADV_POPULATE_WRITE)) != 0 && errno == EINTR) {}
                if (rc == 0) continue;
                if (errno == EINVAL) { /* not here: pages arrive on first write */
                    s->n_resident = ctx->n_ctx;
                    return HET_OK;
                }
                return het_error_set(err, HET_ERR_NOMEM,
                                     "context: KV cache pages for positions %d..%d (layer %lld, %s head %lld): %s",
                                     s->n_resident, end - 1, (long long)l, kv ? "V" : "K", (long long)h,
                                     strerror(errno));
            }
        }
    }
    s->n_resident = end;
    return HET_OK;
}

static enum het_status check_batch(const het_context *ctx, const struct het_batch_part *parts, int32_t n_parts,
                                   int32_t *n_tok, het_error *err)
{
    const int32_t n_vocab = ctx->model->cfg.n_vocab;
    if (n_parts <= 0 || n_parts > ctx->n_seq)
        return het_error_set(err, HET_ERR_INVALID, "eval: %d sequences in a batch (context has %d)", n_parts, ctx->n_seq);
    *n_tok = 0;
    for (int32_t i = 0; i < n_parts; i++) {
        const struct het_batch_part *p = &parts[i];
        if (p->seq < 0 || p->seq >= ctx->n_seq)
            return het_error_set(err, HET_ERR_INVALID, "eval: sequence %d out of range (0..%d)", p->seq, ctx->n_seq - 1);
        for (int32_t j = 0; j < i; j++)
            if (parts[j].seq == p->seq) return het_error_set(err, HET_ERR_INVALID, "eval: sequence %d twice", p->seq);
        if (p->n_tok <= 0) return het_error_set(err, HET_ERR_INVALID, "eval: sequence %d has no tokens", p->seq);
        if (ctx->seqs[p->seq].n_past + p->n_tok > ctx->n_ctx)
            return het_error_set(err, HET_ERR_INVALID, "eval: %d + %d tokens exceed the context of %d",
                                 ctx->seqs[p->seq].n_past, p->n_tok, ctx->n_ctx);
        for (int32_t t = 0; t < p->n_tok; t++)
            if (p->tokens[t] < 0 || p->tokens[t] >= n_vocab)
                return het_error_set(err, HET_ERR_INVALID, "eval: token %d at index %d out of range (n_vocab %d)",
                                     p->tokens[t], t, n_vocab);
        *n_tok += p->n_tok;
    }
    return HET_OK;
}

enum het_status het_context_eval_batch(het_context *ctx, const struct het_batch_part *parts, int32_t n_parts,
                                       bool all_logits, het_error *err)
{
    int32_t n_tok = 0;
    enum het_status st = check_batch(ctx, parts, n_parts, &n_tok, err);
    if (st != HET_OK) return st;
    for (int32_t i = 0; i < n_parts; i++) {
        struct het_seq_state *s = &ctx->seqs[parts[i].seq];
        if ((st = kv_make_resident(ctx, s, s->n_past + parts[i].n_tok, err)) != HET_OK) return st;
    }
    het_sched_expect_run(ctx->sched); /* the devices get ready while the graph is built */
    struct het_arch_seq seqs[n_parts];
    for (int32_t i = 0, first = 0; i < n_parts; i++) {
        struct het_seq_state *s = &ctx->seqs[parts[i].seq];
        seqs[i] = (struct het_arch_seq){ first, parts[i].n_tok, s->n_past, &s->kv_k, &s->kv_v };
        first += parts[i].n_tok;
    }
    struct het_context_step *last = &ctx->last;
    const bool same = last->valid && n_parts == 1 && last->seq == parts[0].seq && last->n_tok == n_tok &&
                      last->all_logits == all_logits;
    const bool advanced = same && het_arch_llama_advance(ctx->graph, &seqs[0], last->n_past);
    if (!advanced) {
        last->valid = false;
        het_graph_reset(ctx->graph);
        last->logits = het_arch_llama_build(ctx->model, ctx->graph, seqs, n_parts, n_tok, all_logits, &last->tok_in,
                                            &last->pos_in, &last->rows_in);
        if ((st = het_graph_status(ctx->graph, err)) != HET_OK) return st;
        if (!last->logits) return het_error_set(err, HET_ERR_INVALID, "eval: graph build failed");
        last->valid = n_parts == 1; /* only a one-sequence graph is moved (het_arch_llama_advance) */
        last->seq = parts[0].seq;
        last->n_tok = n_tok;
        last->all_logits = all_logits;
    }
    last->n_past = seqs[0].n_past;
    struct het_tensor *logits = last->logits, *tok_in = last->tok_in, *pos_in = last->pos_in,
                      *rows_in = last->rows_in;
    /* a graph moved on to the next position keeps its storage's plan */
    st = advanced ? het_sched_realloc_graph(ctx->sched, ctx->graph, err)
                  : het_sched_alloc_graph(ctx->sched, ctx->graph, err);
    if (st != HET_OK) return st;
    int32_t *tok = tok_in->data, *pos = pos_in->data;
    for (int32_t i = 0; i < n_parts; i++) {
        memcpy(tok + seqs[i].first, parts[i].tokens, (size_t)parts[i].n_tok * sizeof *tok);
        for (int32_t t = 0; t < parts[i].n_tok; t++) pos[seqs[i].first + t] = seqs[i].n_past + t;
        if (rows_in) ((int32_t *)rows_in->data)[i] = seqs[i].first + seqs[i].n_tok - 1;
    }
    if ((st = het_sched_compute(ctx->sched, ctx->graph, err)) != HET_OK) return st;
    for (int32_t i = 0; i < n_parts; i++) ctx->seqs[parts[i].seq].n_past += parts[i].n_tok;
    return keep_logits(ctx, logits, err);
}

enum het_status het_context_eval(het_context *ctx, const int32_t *tokens, int32_t n, bool all_logits,
                                 het_error *err)
{
    if (n <= 0) return het_error_set(err, HET_ERR_INVALID, "eval: no tokens");
    const struct het_batch_part part = { 0, n, tokens };
    return het_context_eval_batch(ctx, &part, 1, all_logits, err);
}

const float *het_context_logits(const het_context *ctx, int32_t *n_out)
{
    if (n_out) *n_out = ctx->n_logits;
    return ctx->logits;
}

int32_t het_context_n_past(const het_context *ctx) { return ctx->seqs[0].n_past; }
int32_t het_context_seq_n_past(const het_context *ctx, int32_t seq)
{
    return seq >= 0 && seq < ctx->n_seq ? ctx->seqs[seq].n_past : -1;
}
int32_t het_context_n_ctx(const het_context *ctx) { return ctx->n_ctx; }
int32_t het_context_n_seq(const het_context *ctx) { return ctx->n_seq; }
size_t  het_context_kv_bytes(const het_context *ctx) { return ctx->kv_bytes; }

void het_context_reset(het_context *ctx)
{
    for (int32_t s = 0; s < ctx->n_seq; s++) ctx->seqs[s].n_past = 0;
}

void het_context_seq_reset(het_context *ctx, int32_t seq)
{
    if (seq >= 0 && seq < ctx->n_seq) ctx->seqs[seq].n_past = 0;
}

/* the cache past n is simply overwritten by later evals: attention reads
 * positions below n_past only */
void het_context_seq_keep(het_context *ctx, int32_t seq, int32_t n)
{
    if (seq >= 0 && seq < ctx->n_seq && n >= 0 && n < ctx->seqs[seq].n_past) ctx->seqs[seq].n_past = n;
}
