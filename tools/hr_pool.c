/*
 * hr_pool.c — the memory pool of a hetrun session: which backing, how big,
 * and how it is reported.
 *
 * Every tensor of a run (weights, repacked weights, KV cache, activations)
 * lives in one pool that each device imports once. The size is estimated
 * from the model before anything is placed: memfd and udmabuf pages only
 * materialise when written, so a generous reservation costs address space,
 * not memory. HET_POOL picks the backings to try ("auto", the default, or a
 * list such as "memfd" or "dmaheap,memfd"; "off" runs without a pool, the
 * weights then being used from the mapped file) and HET_POOL_MB overrides
 * the size.
 */
#include "tools/hetrun.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "het/npu.h"

#define MIB ((size_t)1 << 20)

/* The KV length a context of this session gets (mirrors het_context_init's
 * default), enlarged for `hetrun plan`'s own context. */
static size_t session_tokens(const struct het_model_config *c, const struct hr_opts *o)
{
    size_t n = o->n_ctx > 0 ? (size_t)o->n_ctx : (size_t)(c->n_ctx_train < 4096 ? c->n_ctx_train : 4096);
    size_t plan = (size_t)(o->plan.batch > 0 ? o->plan.batch : 128) + (size_t)(o->plan.past > 0 ? o->plan.past : 128) + 8;
    return n > plan ? n : plan;
}

size_t hr_pool_estimate(const het_model *m, const struct hr_opts *o, int n_repacking)
{
    const struct het_model_config *c = het_model_get_config(m);
    const size_t weights = het_model_weight_bytes(m), n_w = (size_t)het_model_n_weights(m);
    const size_t tokens = session_tokens(c, o);
    const size_t q_dim = (size_t)c->n_head * (size_t)c->head_dim, kv_dim = (size_t)c->n_head_kv * (size_t)c->head_dim;
    /* weights, plus a repacked copy (panels, tiles; at most twice as large)
     * for each device that repacks, every tensor rounded to a page */
    size_t bytes = weights + 4096 * (n_w + 1);
    bytes += (size_t)n_repacking * (2 * weights + 4096 * n_w);
    /* the F16 KV caches: one sequence, or serve's parallel ones */
    const size_t n_seq = o->cmd && !strcmp(o->cmd, "serve") && o->parallel > 1 ? (size_t)o->parallel : 1;
    bytes += n_seq * (2 * tokens * (size_t)c->n_layer * kv_dim * 2 + 8192);
    /* activations of a whole-context prefill: the largest live set per
     * token is well under this sum, plus the logits (every row for
     * `hetrun logits`), plus the scheduler's 25 % headroom */
    const bool all_logits = o->cmd && !strcmp(o->cmd, "logits");
    size_t per_tok = 4 * (6 * (size_t)c->n_embd + 3 * (size_t)c->n_ff + 4 * q_dim + 4 * kv_dim);
    size_t scratch = tokens * per_tok + (all_logits ? tokens : 64) * (size_t)c->n_vocab * 4 + MIB;
    bytes += scratch + scratch / 4;
    bytes += 16 * MIB;   /* slack: alignment, small slices */
    return (bytes + 2 * MIB - 1) & ~(2 * MIB - 1);
}

/* HET_POOL: backing order, or off (*off). */
static bool pool_params(const struct hr_opts *o, struct het_pool_params *p, bool *off)
{
    *off = false;
    const char *env = getenv("HET_POOL");
    if (env && (!strcmp(env, "off") || !strcmp(env, "none") || !strcmp(env, "0"))) {
        *off = true;
        return true;
    }
    het_error err = { 0 };
    if (env && *env && het_pool_parse_order(env, p, &err) != HET_OK) {
        hr_error(o, "HET_POOL: %s", err.msg);
        return false;
    }
    const char *mb = getenv("HET_POOL_MB");
    if (mb && *mb) {
        char *end;
        errno = 0;
        unsigned long long v = strtoull(mb, &end, 10);
        if (errno || *end || v == 0 || v > ((unsigned long long)SIZE_MAX >> 20)) {
            hr_error(o, "HET_POOL_MB=\"%s\" is not a size in MiB", mb);
            return false;
        }
        p->size = (size_t)v << 20;
    }
    return true;
}

bool hr_pool_open(struct hr_session *s, const struct hr_opts *o)
{
    struct het_pool_params p = { .name = "het-pool" };
    bool off;
    if (!pool_params(o, &p, &off)) return false;
    if (off) return true;
    int n_repacking = 0;
    for (int i = 0; i < s->n_devices; i++) {
        enum het_device_kind k = het_device_kind(s->devices[i]);
        n_repacking += k == HET_DEVICE_CPU || k == HET_DEVICE_NPU;
        /* backing 1: a buffer the NPU owns, when the NPU runs on hardware */
        if (k == HET_DEVICE_NPU && !p.npu.export_dmabuf) het_npu_pool_provider(s->devices[i], &p.npu);
    }
    if (!p.size) p.size = hr_pool_estimate(s->model, o, n_repacking);
    het_error err = { 0 };
    s->pool = het_pool_init(&p, &err);
    if (!s->pool) {
        hr_error(o, "%s (HET_POOL=off runs without one)", err.msg);
        return false;
    }
    if (het_model_place_in_pool(s->model, s->pool, &err) != HET_OK) {
        hr_error(o, "%s (HET_POOL_MB sets the pool size)", err.msg);
        return false;
    }
    return true;
}

void hr_pool_print_stats(const struct hr_session *s, FILE *f)
{
    if (!s->pool) {
        fprintf(f, "pool: none (HET_POOL=off): weights used from the mapped file, KV cache and scratch in host "
                   "memory registered with each device\n");
        return;
    }
    char line[1024];
    het_pool_describe(s->pool, line, sizeof line);
    fprintf(f, "%s\n", line);
    struct het_pool_stats ps;
    het_pool_get_stats(s->pool, &ps);
    het_pool_format_stats(&ps, line, sizeof line);
    fprintf(f, "%s\n", line);
}

void hr_pool_print_json(const struct hr_session *s, FILE *f)
{
    struct het_pool_stats ps = { 0 };
    if (s->pool) het_pool_get_stats(s->pool, &ps);
    fprintf(f, "\"pool_backing\":\"%s\",\"pool_reserved_bytes\":%zu,\"pool_used_bytes\":%zu,\"pool_peak_bytes\":%zu,"
               "\"pool_slices\":%llu,\"pool_copies\":%llu,",
            s->pool ? het_pool_backing_name(het_pool_backing(s->pool)) : "none", ps.reserved, ps.used, ps.peak,
            (unsigned long long)ps.n_allocs, (unsigned long long)ps.n_copies);
}
