/*
 * hr_pool.c — the memory pool of a hetrun session as the environment sets
 * it and --stats reports it. The library sizes and creates the pool
 * (het/session.h; het_model_pool_estimate); HET_POOL picks the backings to
 * try ("auto", the default, or a list such as "memfd" or "dmaheap,memfd";
 * "off" runs without a pool) and HET_POOL_MB overrides the size. The weights
 * stay in the model file's mapping; HET_WEIGHTS=pool copies them into the
 * pool instead (the earlier behaviour, for comparison).
 */
#include "tools/hetrun.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>


bool hr_pool_params(const struct hr_opts *o, struct het_session_params *p)
{
    const char *env = getenv("HET_POOL");
    het_error err = { 0 };
    struct het_pool_params check = { 0 };
    if (env && *env && strcmp(env, "off") && strcmp(env, "none") && strcmp(env, "0") && strcmp(env, "auto") &&
        het_pool_parse_order(env, &check, &err) != HET_OK) {
        hr_error(o, "HET_POOL: %s", err.msg);
        return false;
    }
    p->pool_backings = env && *env ? env : NULL;
    const char *mb = getenv("HET_POOL_MB");
    if (mb && *mb) {
        char *end;
        errno = 0;
        unsigned long long v = strtoull(mb, &end, 10);
        if (errno || *end || v == 0 || v > ((unsigned long long)SIZE_MAX >> 20)) {
            hr_error(o, "HET_POOL_MB=\"%s\" is not a size in MiB", mb);
            return false;
        }
        p->pool_bytes = (size_t)v << 20;
    }
    const char *w = getenv("HET_WEIGHTS");
    if (w && *w && strcmp(w, "mapped") && strcmp(w, "pool")) {
        hr_error(o, "HET_WEIGHTS=\"%s\" is neither mapped nor pool", w);
        return false;
    }
    p->weights_in_pool = w && !strcmp(w, "pool");
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
