/*
 * npu_weights.c — the NPU's repacked weights: which tensors it can take,
 * repacking them once (at prepare_weights, or at first use), the repack
 * cache, where the bytes live, and the registry that finds them again.
 *
 * The registry is keyed by the source's address and checked against its
 * type, shape, strides and a sampled fingerprint of its bytes, so it never
 * dereferences t->extra (which may be stale, or another device's) and a
 * different model loaded at the same address is not mistaken for the old
 * one. t->extra is still set to the record for anyone inspecting tensors.
 *
 * Placement: repacked bytes go to the pool when one is set (resident
 * weights, imported by the NPU once with the pool), else to page-aligned
 * host memory. With a pin budget, weights beyond it are not resident: their
 * bytes stay in the cache file's mapping (page cache) and are streamed
 * through the staging ring at run time.
 */
#include "devices/npu/npu_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- what the layout takes ------------------------------------------------- */

const void *npu_tensor_addr(const struct het_tensor *t)
{
    if (t->data) return t->data;
    if (t->view_src && t->view_src->data) return (const char *)t->view_src->data + t->view_offs;
    return NULL;
}

bool npu_weight_ok(const struct het_tensor *w)
{
    if (!w || !het_npu_wfmt_for(w->type)) return false;
    if (het_npu_layout_check(w->type, w->ne, NULL) != HET_OK) return false;
    return w->nb[0] == het_type_get_traits(w->type)->type_size;
}

uint64_t npu_weight_fingerprint(const struct het_tensor *w)
{
    const uint8_t *base = npu_tensor_addr(w);
    uint64_t h = npu_hash64(w->ne, sizeof w->ne, (uint64_t)w->type);
    if (!base) return h;
    const size_t row = het_row_size(w);
    const size_t take = row < 64 ? row : 64;
    const int64_t N = w->ne[1], last2 = w->ne[2] - 1, last3 = w->ne[3] - 1;
    for (int i = 0; i < 8; i++) {                       /* eight rows spread over plane 0 */
        const int64_t n = N > 1 ? (int64_t)i * (N - 1) / 7 : 0;
        h = npu_hash64(base + (size_t)n * w->nb[1], take, h);
    }
    const uint8_t *lastrow = base + (size_t)last3 * w->nb[3] + (size_t)last2 * w->nb[2] + (size_t)(N - 1) * w->nb[1];
    return npu_hash64(lastrow + row - take, take, h);  /* end of the last row of the last plane */
}

/* ---- registry -------------------------------------------------------------- */

static size_t bucket_of(const struct npu_registry *r, const void *src)
{
    uint64_t v = (uint64_t)(uintptr_t)src;
    v ^= v >> 29;
    v *= 0xBF58476D1CE4E5B9ull;
    v ^= v >> 32;
    return (size_t)(v % r->n_buckets);
}

static bool same_identity(const struct npu_wrec *r, const struct het_tensor *w, const void *src)
{
    return r->src == src && r->type == w->type && memcmp(r->ne, w->ne, sizeof r->ne) == 0 &&
           memcmp(r->nb, w->nb, sizeof r->nb) == 0;
}

struct npu_wrec *npu_reg_lookup(struct npu_ctx *c, const struct het_tensor *w)
{
    const void *src = npu_tensor_addr(w);
    if (!src || !c->reg.n_buckets) return NULL;
    for (struct npu_wrec *r = c->reg.buckets[bucket_of(&c->reg, src)]; r; r = r->next)
        if (same_identity(r, w, src) && r->fp == npu_weight_fingerprint(w)) return r;
    return NULL;
}

static enum het_status reg_grow(struct npu_registry *reg, het_error *err)
{
    const size_t nb = reg->n_buckets ? reg->n_buckets * 2 : 256;
    struct npu_wrec **b = calloc(nb, sizeof *b);
    if (!b) return het_error_set(err, HET_ERR_NOMEM, "npu: out of memory (weight registry)");
    struct npu_registry nr = { b, nb, reg->count };
    for (size_t i = 0; i < reg->n_buckets; i++) {
        for (struct npu_wrec *r = reg->buckets[i], *nx; r; r = nx) {
            nx = r->next;
            size_t k = bucket_of(&nr, r->src);
            r->next = b[k];
            b[k] = r;
        }
    }
    free(reg->buckets);
    *reg = nr;
    return HET_OK;
}

static enum het_status reg_insert(struct npu_ctx *c, struct npu_wrec *r, het_error *err)
{
    if (c->reg.count + 1 > c->reg.n_buckets) {
        enum het_status st = reg_grow(&c->reg, err);
        if (st != HET_OK) return st;
    }
    size_t k = bucket_of(&c->reg, r->src);
    r->next = c->reg.buckets[k];
    c->reg.buckets[k] = r;
    c->reg.count++;
    return HET_OK;
}

/* ---- storage ----------------------------------------------------------------- */

static void store_free(struct npu_ctx *c, struct npu_wrec *r)
{
    if (r->in_pool) het_pool_release(c->pool, r->slice, NULL);
    else if (!r->mapped) free(r->data);
    r->data = NULL;
    r->in_pool = r->mapped = false;
}

/* Bytes for r (r->resident decided by the caller). */
static enum het_status store_alloc(struct npu_ctx *c, struct npu_wrec *r, het_error *err)
{
    const size_t bytes = r->d.total_bytes;
    if (c->pool && r->resident) {
        het_error perr;
        if (het_pool_alloc(c->pool, bytes, 0, &r->slice, &perr) == HET_OK) {
            r->data = het_pool_ptr(c->pool, r->slice.offset);
            r->in_pool = true;
            return HET_OK;
        }
        snprintf(c->stats.cache_note, sizeof c->stats.cache_note, "pool full, weights in host memory: %.200s", perr.msg);
    }
    r->data = aligned_alloc(4096, (bytes + 4095) & ~(size_t)4095);
    if (!r->data) return het_error_set(err, HET_ERR_NOMEM, "npu: cannot allocate %zu bytes for '%s'", bytes, r->name);
    return HET_OK;
}

/* ---- records ----------------------------------------------------------------- */

static struct npu_wrec *wrec_new(struct npu_ctx *c, struct het_tensor *w, het_error *err)
{
    struct npu_wrec *r = calloc(1, sizeof *r);
    if (!r) {
        het_error_set(err, HET_ERR_NOMEM, "npu: out of memory");
        return NULL;
    }
    r->magic = NPU_WREC_MAGIC;
    r->owner = c->dev;
    r->src = npu_tensor_addr(w);
    r->type = w->type;
    memcpy(r->ne, w->ne, sizeof r->ne);
    memcpy(r->nb, w->nb, sizeof r->nb);
    r->fp = npu_weight_fingerprint(w);
    snprintf(r->name, sizeof r->name, "%s", w->name);
    enum het_status st = het_npu_layout_plan(&r->d, w->type, w->ne, err);
    if (st != HET_OK) {
        free(r);
        return NULL;
    }
    r->resident = !c->params.pin_budget || c->resident_bytes + r->d.total_bytes <= c->params.pin_budget;
    return r;
}

static void wrec_free(struct npu_ctx *c, struct npu_wrec *r)
{
    if (!r) return;
    store_free(c, r);
    free(r);
}

/* Publish a finished record: registry, t->extra, counters. */
static enum het_status wrec_publish(struct npu_ctx *c, struct het_tensor *w, struct npu_wrec *r, het_error *err)
{
    enum het_status st = reg_insert(c, r, err);
    if (st != HET_OK) return st;
    if (r->resident) c->resident_bytes += r->d.total_bytes;
    c->stats.repacked_bytes += r->d.total_bytes;
    if (!w->extra) w->extra = r;   /* the CPU device may hang its packed panels there: never clobber */
    return HET_OK;
}

static enum het_status repack_into(struct npu_ctx *c, struct het_tensor *w, struct npu_wrec *r, het_error *err)
{
    enum het_status st = store_alloc(c, r, err);
    if (st == HET_OK) st = het_npu_repack(&r->d, r->src, w->nb, r->data, err);
    if (st == HET_OK) {
        c->stats.repacked_tensors++;
        if (c->dev) het_device_drop_weight_pages(c->dev, w);   /* the tiles replace the file's pages */
    } else {
        het_error_prefix(err, "'%s'", w->name);
    }
    return st;
}

/* A weight the layout cannot represent: kept (without data) in the registry
 * so that supports_op says no and nothing retries it. */
static enum het_status publish_rejected(struct npu_ctx *c, struct npu_wrec *r, het_error *err)
{
    store_free(c, r);
    r->rejected = true;
    r->resident = false;
    enum het_status st = reg_insert(c, r, err);
    if (st == HET_OK) c->stats.rejected++;
    return st;
}

enum het_status npu_weights_get(struct npu_ctx *c, struct het_tensor *w, struct npu_wrec **out, het_error *err)
{
    struct npu_wrec *r = npu_reg_lookup(c, w);
    if (r) {
        *out = r;
        if (r->rejected) return het_error_set(err, HET_ERR_UNSUPPORTED, "npu: weight '%s' was rejected by the layout", w->name);
        return HET_OK;
    }
    if (!npu_weight_ok(w) || !npu_tensor_addr(w))
        return het_error_set(err, HET_ERR_UNSUPPORTED, "npu: weight '%s' (%s) has no NPU layout", w->name,
                             het_type_name(w->type));
    r = wrec_new(c, w, err);
    if (!r) return err ? err->status : HET_ERR_NOMEM;
    enum het_status st = repack_into(c, w, r, err);
    if (st == HET_ERR_UNSUPPORTED) {
        het_error keep = err ? *err : (het_error){0};
        if (publish_rejected(c, r, NULL) != HET_OK) wrec_free(c, r);
        if (err) *err = keep;
        return st;
    }
    if (st == HET_OK) st = wrec_publish(c, w, r, err);
    if (st != HET_OK) {
        wrec_free(c, r);
        return st;
    }
    c->stats.lazy_repacks++;
    *out = r;
    return HET_OK;
}

/* ---- prepare (with the cache) ------------------------------------------------ */

static uint64_t model_key(const struct npu_ctx *c, struct het_tensor *const *w, int n)
{
    uint64_t h = npu_hash64("het-npu", 7, HET_NPU_LAYOUT_VERSION);
    if (c->model_key[0]) return npu_hash64(c->model_key, strlen(c->model_key), h);
    for (int i = 0; i < n; i++) {
        const struct het_tensor *t = w[i];
        h = npu_hash64(t->name, strnlen(t->name, HET_MAX_NAME), h);
        h = npu_hash64(t->ne, sizeof t->ne, h ^ (uint64_t)t->type);
        const uint8_t *base = npu_tensor_addr(t);
        const size_t row = het_row_size(t);
        for (int64_t i3 = 0; i3 < t->ne[3]; i3++)
            for (int64_t i2 = 0; i2 < t->ne[2]; i2++) {
                const uint8_t *plane = base + (size_t)i3 * t->nb[3] + (size_t)i2 * t->nb[2];
                if (t->nb[1] == row) h = npu_hash64(plane, row * (size_t)t->ne[1], h);
                else for (int64_t r = 0; r < t->ne[1]; r++) h = npu_hash64(plane + (size_t)r * t->nb[1], row, h);
            }
    }
    return h;
}

static bool keep_cache(struct npu_ctx *c, struct npu_cache_file *f)
{
    struct npu_cache_file **nc = realloc(c->caches, sizeof *nc * (size_t)(c->n_caches + 1));
    if (!nc) return false;
    c->caches = nc;
    c->caches[c->n_caches++] = f;
    return true;
}

/* Records for every candidate from the cache file f; false if any is missing. */
static bool take_from_cache(struct npu_cache_file *f, struct npu_wrec **recs, int n)
{
    for (int i = 0; i < n; i++) {
        const void *data = npu_cache_find(f, recs[i]->name, recs[i]->type, recs[i]->ne, recs[i]->fp, &recs[i]->d);
        if (!data) return false;
        recs[i]->data = (uint8_t *)data;      /* read-only mapping until copied below */
        recs[i]->mapped = true;
    }
    return true;
}

/* Resident records are copied out of the mapping into the pool / host memory. */
static enum het_status settle_from_cache(struct npu_ctx *c, struct npu_wrec **recs, int n, het_error *err)
{
    for (int i = 0; i < n; i++) {
        struct npu_wrec *r = recs[i];
        if (!r->resident) continue;
        const uint8_t *src = r->data;
        r->mapped = false;
        r->data = NULL;
        enum het_status st = store_alloc(c, r, err);
        if (st != HET_OK) return st;
        memcpy(r->data, src, r->d.total_bytes);
    }
    return HET_OK;
}

/* After writing the cache, non-resident records move from malloc to the mapping. */
static void remap_streamed(struct npu_ctx *c, const char *path, uint64_t key, struct npu_wrec **recs, int n)
{
    bool any = false;
    for (int i = 0; i < n; i++) any |= !recs[i]->resident;
    if (!any) return;
    struct npu_cache_file *f = NULL;
    if (npu_cache_open(path, key, &f, NULL) != HET_OK) return;
    if (!keep_cache(c, f)) {
        npu_cache_close(f);
        return;
    }
    for (int i = 0; i < n; i++) {
        struct npu_wrec *r = recs[i];
        if (r->resident) continue;
        const void *data = npu_cache_find(f, r->name, r->type, r->ne, r->fp, &r->d);
        if (!data) continue;
        store_free(c, r);
        r->data = (uint8_t *)data;
        r->mapped = true;
    }
}

static void note(struct npu_ctx *c, const char *what, const het_error *e)
{
    snprintf(c->stats.cache_note, sizeof c->stats.cache_note, "%s: %.200s", what, e->msg);
}

/* Try the cache; on a miss repack everything and write the cache. */
static enum het_status fill_records(struct npu_ctx *c, struct het_tensor *const *w, struct npu_wrec **recs, int n,
                                    het_error *err)
{
    char path[PATH_MAX + 64] = "";
    const uint64_t key = model_key(c, w, n);
    het_error cerr;
    if (!c->params.no_cache) {
        if (npu_cache_resolve_dir(c, &cerr) == HET_OK) {
            snprintf(path, sizeof path, "%s/%016llx.hnpu", c->cache_dir, (unsigned long long)key);
            snprintf(c->stats.cache_path, sizeof c->stats.cache_path, "%.500s", path);
            struct npu_cache_file *f = NULL;
            if (npu_cache_open(path, key, &f, &cerr) == HET_OK) {
                if (take_from_cache(f, recs, n) && keep_cache(c, f)) {
                    c->stats.cache_loaded += (uint64_t)n;
                    return settle_from_cache(c, recs, n, err);
                }
                for (int i = 0; i < n; i++) recs[i]->data = NULL, recs[i]->mapped = false;
                npu_cache_close(f);
                snprintf(c->stats.cache_note, sizeof c->stats.cache_note, "cache %.*s lacks some tensors; rewritten",
                         (int)(sizeof c->stats.cache_note - 40), path);
            } else {
                note(c, "cache not used", &cerr);
            }
        } else {
            note(c, "cache disabled", &cerr);
            path[0] = '\0';
        }
    }
    int n_ok = 0;
    struct npu_wrec **ok = calloc((size_t)n, sizeof *ok);
    if (!ok) return het_error_set(err, HET_ERR_NOMEM, "npu: out of memory");
    for (int i = 0; i < n; i++) {
        het_error rerr;
        enum het_status st = repack_into(c, w[i], recs[i], &rerr);
        if (st == HET_ERR_UNSUPPORTED) {        /* e.g. a non-finite scale: this tensor stays elsewhere */
            store_free(c, recs[i]);
            recs[i]->rejected = true;
            continue;
        }
        if (st != HET_OK) {
            if (err) *err = rerr;
            free(ok);
            return st;
        }
        ok[n_ok++] = recs[i];
    }
    if (path[0]) {
        if (npu_cache_write(path, key, ok, n_ok, &cerr) == HET_OK) {
            c->stats.cache_written += (uint64_t)n_ok;
            remap_streamed(c, path, key, ok, n_ok);
        } else {
            note(c, "cache not written", &cerr);
        }
    }
    free(ok);
    return HET_OK;
}

enum het_status npu_weights_prepare(struct npu_ctx *c, struct het_tensor *const *weights, int n, het_error *err)
{
    struct het_tensor **w = calloc((size_t)(n > 0 ? n : 1), sizeof *w);
    struct npu_wrec **recs = calloc((size_t)(n > 0 ? n : 1), sizeof *recs);
    if (!w || !recs) {
        free(w);
        free(recs);
        return het_error_set(err, HET_ERR_NOMEM, "npu: out of memory");
    }
    int m = 0;
    enum het_status st = HET_OK;
    for (int i = 0; i < n && st == HET_OK; i++) {
        struct het_tensor *t = weights[i];
        if (!npu_weight_ok(t) || !npu_tensor_addr(t) || npu_reg_lookup(c, t)) continue;
        struct npu_wrec *r = wrec_new(c, t, err);
        if (!r) st = err ? err->status : HET_ERR_NOMEM;
        else {
            if (r->resident) c->resident_bytes += r->d.total_bytes;  /* reserve while deciding the next */
            w[m] = t;
            recs[m++] = r;
        }
    }
    for (int i = 0; i < m; i++) if (recs[i]->resident) c->resident_bytes -= recs[i]->d.total_bytes;
    if (st == HET_OK && m > 0) st = fill_records(c, w, recs, m, err);
    for (int i = 0; i < m; i++) {
        if (st == HET_OK && recs[i]->rejected) {
            if (publish_rejected(c, recs[i], err) != HET_OK) wrec_free(c, recs[i]);
        } else if (st == HET_OK) {
            enum het_status ps = wrec_publish(c, w[i], recs[i], err);
            if (ps != HET_OK) { st = ps; wrec_free(c, recs[i]); }
        } else {
            wrec_free(c, recs[i]);
        }
    }
    free(w);
    free(recs);
    return st;
}

void npu_weights_free_all(struct npu_ctx *c)
{
    for (size_t i = 0; i < c->reg.n_buckets; i++) {
        for (struct npu_wrec *r = c->reg.buckets[i], *nx; r; r = nx) {
            nx = r->next;
            wrec_free(c, r);
        }
    }
    free(c->reg.buckets);
    memset(&c->reg, 0, sizeof c->reg);
    for (int i = 0; i < c->n_caches; i++) npu_cache_close(c->caches[i]);
    free(c->caches);
    c->caches = NULL;
    c->n_caches = 0;
    c->resident_bytes = 0;
}
