/*
 * pool.c — het_pool: one shared region, its backing and its slices.
 *
 * Init picks the first backing in the requested order that can be created
 * and mapped, remembering why each earlier one was skipped; the region is
 * then managed by the offset allocator of suballoc.c under one mutex. The
 * pool never reads or writes the region itself, so pages are only
 * materialised by whoever fills a tensor. Statistics and the copy counter
 * live here so that `hetrun --stats` can show what the zero-copy design
 * actually achieved.
 */
#include "het/pool.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "memory/backing.h"
#include "memory/suballoc.h"

struct het_pool {
    pthread_mutex_t mu;
    const struct het_backing_ops *ops;
    struct het_backing bk;
    struct het_suballoc sa;
    size_t   peak;
    uint64_t total_allocs, failed_allocs, n_syncs, copied_bytes, n_copies;
    long     fault_left;            /* allocations still allowed; < 0: no fault armed */
    size_t   handed_hi;             /* end of the highest slice ever handed out: above it no page was touched */
    bool     skipped[HET_POOL_BACKING_COUNT];
    char     skip_reason[HET_POOL_BACKING_COUNT][sizeof ((het_error *)0)->msg];
};

struct backing_name {
    enum het_pool_backing kind;
    const char *name, *short_name, *alias;
};

static const struct backing_name backing_names[] = {
    { HET_POOL_BACKING_NPU,     "amdxdna bo",            "npu",     "amdxdna"  },
    { HET_POOL_BACKING_DMAHEAP, "dma-heap system",       "dmaheap", "dma-heap" },
    { HET_POOL_BACKING_UDMABUF, "udmabuf",               "udmabuf", "udmabuf"  },
    { HET_POOL_BACKING_MEMFD,   "memfd (not a dma-buf)", "memfd",   "memfd"    },
};

static const enum het_pool_backing default_order[] = {
    HET_POOL_BACKING_NPU, HET_POOL_BACKING_DMAHEAP, HET_POOL_BACKING_UDMABUF, HET_POOL_BACKING_MEMFD,
};

const char *het_pool_backing_name(enum het_pool_backing b)
{
    for (size_t i = 0; i < sizeof backing_names / sizeof backing_names[0]; i++)
        if (backing_names[i].kind == b) return backing_names[i].name;
    return "none";
}

const char *het_pool_backing_short_name(enum het_pool_backing b)
{
    for (size_t i = 0; i < sizeof backing_names / sizeof backing_names[0]; i++)
        if (backing_names[i].kind == b) return backing_names[i].short_name;
    return "none";
}

/* "1.00 GiB", "12.0 MiB", "4096 B" */
static void fmt_bytes(char *buf, size_t cap, double v)
{
    static const char *const unit[] = { "B", "KiB", "MiB", "GiB", "TiB" };
    int u = 0;
    while (v >= 1024.0 && u < 4) {
        v /= 1024.0;
        u++;
    }
    if (u == 0) snprintf(buf, cap, "%.0f B", v);
    else snprintf(buf, cap, v < 10 ? "%.2f %s" : v < 100 ? "%.1f %s" : "%.0f %s", v, unit[u]);
}

/* ---- init ---------------------------------------------------------------- */

static enum het_status check_params(const struct het_pool_params *p, size_t *size, size_t *granule,
                                    het_error *err)
{
    if (!p) return het_error_set(err, HET_ERR_INVALID, "pool: no parameters");
    if (!p->size) return het_error_set(err, HET_ERR_INVALID, "pool: size is 0");
    if (p->min_align & (p->min_align - 1))
        return het_error_set(err, HET_ERR_INVALID, "pool: min_align %zu is not a power of two", p->min_align);
    size_t g = HET_POOL_MIN_ALIGN;
    long page = sysconf(_SC_PAGESIZE);
    if (page > 0 && (size_t)page > g) g = (size_t)page;
    if (p->min_align > g) g = p->min_align;
    if (p->size > SIZE_MAX - (g - 1) || g > SIZE_MAX / 2)
        return het_error_set(err, HET_ERR_INVALID, "pool: size %zu too large", p->size);
    *size = (p->size + g - 1) & ~(g - 1);
    *granule = g;
    long pages = sysconf(_SC_PHYS_PAGES);
    if (page > 0 && pages > 0 && *size / (size_t)page > (size_t)pages) {
        char want[32], have[32];
        fmt_bytes(want, sizeof want, (double)*size);
        fmt_bytes(have, sizeof have, (double)page * (double)pages);
        return het_error_set(err, HET_ERR_NOMEM, "pool: %s requested but the machine has %s of RAM", want, have);
    }
    if (p->n_order < 0 || p->n_order > HET_POOL_BACKING_COUNT)
        return het_error_set(err, HET_ERR_INVALID, "pool: n_order %d out of range", p->n_order);
    for (int i = 0; i < p->n_order; i++)
        if (!het_backing_ops_get(p->order[i]))
            return het_error_set(err, HET_ERR_INVALID, "pool: order[%d] = %d is not a backing", i, (int)p->order[i]);
    return HET_OK;
}

/* Allowed allocations before injected failures, -1 for none. */
static enum het_status fault_setting(const struct het_pool_params *p, long *out, het_error *err)
{
    *out = -1;
    if (p->fault_after_allocs > 0) {
        *out = p->fault_after_allocs;
        return HET_OK;
    }
    const char *env = getenv("HET_POOL_FAULT");
    if (!env || !*env) return HET_OK;
    char *end;
    errno = 0;
    long n = strtol(env, &end, 10);
    if (errno || *end || n < 0)
        return het_error_set(err, HET_ERR_INVALID, "pool: HET_POOL_FAULT=\"%s\" is not a count >= 0", env);
    *out = n;
    return HET_OK;
}

/* Try one backing; on failure record the reason and leave nothing behind. */
static enum het_status try_backing(het_pool *pool, enum het_pool_backing kind, const struct het_pool_params *p,
                                   size_t size, het_error *why)
{
    const struct het_backing_ops *ops = het_backing_ops_get(kind);
    het_backing_reset(&pool->bk, kind);
    enum het_status st = ops->open(&pool->bk, p, size, why);
    if (st == HET_OK) st = ops->map(&pool->bk, p->hugepages, why);
    if (st == HET_OK) {
        pool->ops = ops;
        return HET_OK;
    }
    ops->close(&pool->bk);
    het_backing_reset(&pool->bk, HET_POOL_BACKING_NONE);
    pool->skipped[kind] = true;
    snprintf(pool->skip_reason[kind], sizeof pool->skip_reason[kind], "%s", why->msg);
    return st;
}

static enum het_status choose_backing(het_pool *pool, const struct het_pool_params *p, size_t size,
                                      het_error *err)
{
    const enum het_pool_backing *order = p->n_order ? p->order : default_order;
    int n = p->n_order ? p->n_order : (int)(sizeof default_order / sizeof default_order[0]);
    char all[sizeof err->msg] = "";
    size_t len = 0;
    enum het_status st = HET_ERR_NO_DEVICE;
    for (int i = 0; i < n; i++) {
        if (pool->skipped[order[i]]) continue;   /* listed twice */
        het_error why = { 0 };
        st = try_backing(pool, order[i], p, size, &why);
        if (st == HET_OK) return HET_OK;
        int w = snprintf(all + len, sizeof all - len, "%s%s: %s", len ? "; " : "",
                         het_pool_backing_name(order[i]), why.msg);
        if (w > 0) len = len + (size_t)w < sizeof all ? len + (size_t)w : sizeof all - 1;
    }
    if (n == 1) return het_error_set(err, st, "pool: %s", all);
    return het_error_set(err, st, "pool: no backing could be set up: %s", all);
}

het_pool *het_pool_init(const struct het_pool_params *params, het_error *err)
{
    size_t size = 0, granule = 0;
    long fault = -1;
    if (check_params(params, &size, &granule, err) != HET_OK) return NULL;
    if (fault_setting(params, &fault, err) != HET_OK) return NULL;
    het_pool *pool = calloc(1, sizeof *pool);
    if (!pool) {
        het_error_set(err, HET_ERR_NOMEM, "pool: no memory for the pool object");
        return NULL;
    }
    het_backing_reset(&pool->bk, HET_POOL_BACKING_NONE);
    pool->fault_left = fault;
    if (choose_backing(pool, params, size, err) != HET_OK) {
        free(pool);
        return NULL;
    }
    if (het_suballoc_init(&pool->sa, size, granule, err) != HET_OK) {
        het_error_prefix(err, "pool");
        pool->ops->close(&pool->bk);
        free(pool);
        return NULL;
    }
    int e = pthread_mutex_init(&pool->mu, NULL);
    if (e) {
        het_error_set(err, HET_ERR_NOMEM, "pool: pthread_mutex_init: %s", strerror(e));
        het_suballoc_free(&pool->sa);
        pool->ops->close(&pool->bk);
        free(pool);
        return NULL;
    }
    return pool;
}

void het_pool_free(het_pool *pool)
{
    if (!pool) return;
    het_suballoc_free(&pool->sa);
    pool->ops->close(&pool->bk);
    pthread_mutex_destroy(&pool->mu);
    free(pool);
}

/* ---- slices -------------------------------------------------------------- */

enum het_status het_pool_alloc(het_pool *pool, size_t size, size_t align, struct het_slice *out,
                               het_error *err)
{
    out->offset = out->size = 0;
    pthread_mutex_lock(&pool->mu);
    enum het_status st;
    if (pool->fault_left == 0) {
        st = het_error_set(err, HET_ERR_NOMEM, "pool: allocation of %zu bytes refused by fault injection", size);
    } else {
        st = het_suballoc_alloc(&pool->sa, size, align, &out->offset, &out->size, err);
        if (st != HET_OK) het_error_prefix(err, "pool");
    }
    if (st == HET_OK) {
        if (pool->fault_left > 0) pool->fault_left--;
        pool->total_allocs++;
        if (pool->sa.used > pool->peak) pool->peak = pool->sa.used;
        if (out->offset + out->size > pool->handed_hi) pool->handed_hi = out->offset + out->size;
    } else {
        pool->failed_allocs++;
    }
    pthread_mutex_unlock(&pool->mu);
    return st;
}

enum het_status het_pool_alloc_zeroed(het_pool *pool, size_t size, size_t align, struct het_slice *out,
                                      het_error *err)
{
    pthread_mutex_lock(&pool->mu);
    const size_t fresh_from = pool->handed_hi;
    pthread_mutex_unlock(&pool->mu);
    enum het_status st = het_pool_alloc(pool, size, align, out, err);
    if (st != HET_OK) return st;
    /* A memfd's pages (the udmabuf's too) read as zero until first written:
     * a slice wholly above every slice handed out before is untouched. (The
     * check is conservative when another thread allocates meanwhile.) */
    const enum het_pool_backing b = het_pool_backing(pool);
    if ((b == HET_POOL_BACKING_MEMFD || b == HET_POOL_BACKING_UDMABUF) && out->offset >= fresh_from) return HET_OK;
    st = het_pool_sync_begin(pool, *out, HET_POOL_SYNC_WRITE, err);
    if (st == HET_OK) {
        memset(het_pool_ptr(pool, out->offset), 0, out->size);
        st = het_pool_sync_end(pool, *out, HET_POOL_SYNC_WRITE, err);
    }
    if (st != HET_OK) {
        het_pool_release(pool, *out, NULL);
        out->offset = out->size = 0;
    }
    return st;
}

enum het_status het_pool_release(het_pool *pool, struct het_slice slice, het_error *err)
{
    pthread_mutex_lock(&pool->mu);
    enum het_status st = het_suballoc_release(&pool->sa, slice.offset, slice.size, err);
    pthread_mutex_unlock(&pool->mu);
    if (st != HET_OK) het_error_prefix(err, "pool: release");
    return st;
}

void het_pool_set_fault(het_pool *pool, long n_ok)
{
    pthread_mutex_lock(&pool->mu);
    pool->fault_left = n_ok < 0 ? -1 : n_ok;
    pthread_mutex_unlock(&pool->mu);
}

/* ---- addresses and fds --------------------------------------------------- */

void *het_pool_ptr(const het_pool *pool, size_t offset)
{
    return offset < pool->bk.size ? (char *)pool->bk.base + offset : NULL;
}

bool het_pool_offset_of(const het_pool *pool, const void *ptr, size_t *offset)
{
    const char *p = ptr, *b = pool->bk.base;
    if (!p || p < b || (size_t)(p - b) >= pool->bk.size) return false;
    if (offset) *offset = (size_t)(p - b);
    return true;
}

void  *het_pool_base(const het_pool *pool) { return pool->bk.base; }
size_t het_pool_size(const het_pool *pool) { return pool->bk.size; }
size_t het_pool_granule(const het_pool *pool) { return pool->sa.granule; }
enum het_pool_backing het_pool_backing(const het_pool *pool) { return pool->bk.kind; }
int het_pool_fd(const het_pool *pool) { return pool->bk.map_fd; }
int het_pool_dmabuf_fd(const het_pool *pool) { return pool->bk.dmabuf_fd; }

const char *het_pool_skip_reason(const het_pool *pool, enum het_pool_backing b)
{
    if ((int)b <= 0 || b >= HET_POOL_BACKING_COUNT || !pool->skipped[b]) return NULL;
    return pool->skip_reason[b];
}

/* ---- sync ---------------------------------------------------------------- */

static enum het_status sync_slice(het_pool *pool, struct het_slice s, enum het_pool_sync access, bool end,
                                  het_error *err)
{
    if (access < HET_POOL_SYNC_READ || access > HET_POOL_SYNC_RW)
        return het_error_set(err, HET_ERR_INVALID, "pool: sync access %d is not READ, WRITE or RW", (int)access);
    if (!s.size || s.offset >= pool->bk.size || s.size > pool->bk.size - s.offset)
        return het_error_set(err, HET_ERR_INVALID, "pool: sync of [%zu, +%zu) outside the %zu-byte pool",
                             s.offset, s.size, pool->bk.size);
    if (pool->bk.dmabuf_fd < 0) return HET_OK;   /* memfd: coherent host memory, nothing to do */
    enum het_status st = het_backing_dmabuf_sync(pool->bk.dmabuf_fd, (unsigned)access, end, err);
    if (st != HET_OK) {
        het_error_prefix(err, "pool (%s)", pool->ops->name);
        return st;
    }
    pthread_mutex_lock(&pool->mu);
    pool->n_syncs++;
    pthread_mutex_unlock(&pool->mu);
    return HET_OK;
}

enum het_status het_pool_sync_begin(het_pool *pool, struct het_slice slice, enum het_pool_sync access,
                                    het_error *err)
{
    return sync_slice(pool, slice, access, false, err);
}

enum het_status het_pool_sync_end(het_pool *pool, struct het_slice slice, enum het_pool_sync access,
                                  het_error *err)
{
    return sync_slice(pool, slice, access, true, err);
}

/* ---- statistics ---------------------------------------------------------- */

void het_pool_count_copy(het_pool *pool, size_t bytes)
{
    pthread_mutex_lock(&pool->mu);
    pool->copied_bytes += bytes;
    pool->n_copies++;
    pthread_mutex_unlock(&pool->mu);
}

void het_pool_get_stats(const het_pool *pool, struct het_pool_stats *out)
{
    het_pool *p = (het_pool *)pool;   /* the mutex is the only thing touched */
    pthread_mutex_lock(&p->mu);
    memset(out, 0, sizeof *out);
    out->reserved = p->sa.total;
    out->granule = p->sa.granule;
    out->used = p->sa.used;
    out->peak = p->peak;
    out->free_bytes = p->sa.total - p->sa.used;
    out->largest_free = het_suballoc_largest_free(&p->sa);
    out->fragmentation = out->free_bytes ? 1.0 - (double)out->largest_free / (double)out->free_bytes : 0.0;
    out->n_allocs = p->sa.n_used;
    out->n_free_blocks = p->sa.n_free;
    out->total_allocs = p->total_allocs;
    out->failed_allocs = p->failed_allocs;
    out->n_syncs = p->n_syncs;
    out->copied_bytes = p->copied_bytes;
    out->n_copies = p->n_copies;
    pthread_mutex_unlock(&p->mu);
}

void het_pool_format_stats(const struct het_pool_stats *st, char *buf, size_t cap)
{
    char res[32], used[32], peak[32], big[32], cp[32];
    fmt_bytes(res, sizeof res, (double)st->reserved);
    fmt_bytes(used, sizeof used, (double)st->used);
    fmt_bytes(peak, sizeof peak, (double)st->peak);
    fmt_bytes(big, sizeof big, (double)st->largest_free);
    fmt_bytes(cp, sizeof cp, (double)st->copied_bytes);
    snprintf(buf, cap,
             "pool: reserved %s, used %s (peak %s), %llu slices, %llu free blocks, largest free %s, "
             "fragmentation %.3f, %llu failed allocs, %llu syncs, copied %s in %llu copies",
             res, used, peak, (unsigned long long)st->n_allocs, (unsigned long long)st->n_free_blocks, big,
             st->fragmentation, (unsigned long long)st->failed_allocs, (unsigned long long)st->n_syncs, cp,
             (unsigned long long)st->n_copies);
}

void het_pool_describe(const het_pool *pool, char *buf, size_t cap)
{
    if (!cap) return;
    char sz[32];
    fmt_bytes(sz, sizeof sz, (double)pool->bk.size);
    int w = snprintf(buf, cap, "pool %s at %p, %s, fd %d, dma-buf fd %d, granule %zu", sz, pool->bk.base,
                     pool->ops->name, pool->bk.map_fd, pool->bk.dmabuf_fd, pool->sa.granule);
    bool first = true;
    for (size_t i = 0; i < sizeof default_order / sizeof default_order[0]; i++) {
        enum het_pool_backing b = default_order[i];
        if (w < 0 || (size_t)w >= cap) return;
        if (!pool->skipped[b]) continue;
        w += snprintf(buf + w, cap - (size_t)w, "%s%s: %s", first ? "; skipped: " : "; ",
                      het_pool_backing_name(b), pool->skip_reason[b]);
        first = false;
    }
}

/* ---- order parsing ------------------------------------------------------- */

static bool parse_one(const char *s, size_t n, enum het_pool_backing *out)
{
    for (size_t i = 0; i < sizeof backing_names / sizeof backing_names[0]; i++) {
        const struct backing_name *b = &backing_names[i];
        const char *cand[] = { b->name, b->short_name, b->alias };
        for (size_t j = 0; j < 3; j++)
            if (strlen(cand[j]) == n && strncmp(cand[j], s, n) == 0) {
                *out = b->kind;
                return true;
            }
    }
    return false;
}

enum het_status het_pool_parse_order(const char *list, struct het_pool_params *params, het_error *err)
{
    if (!list) return het_error_set(err, HET_ERR_INVALID, "pool backing list: NULL");
    if (strcmp(list, "auto") == 0) {
        params->n_order = 0;
        return HET_OK;
    }
    enum het_pool_backing order[HET_POOL_BACKING_COUNT];
    int n = 0;
    for (const char *s = list;;) {
        size_t len = strcspn(s, ",");
        enum het_pool_backing b;
        if (!parse_one(s, len, &b))
            return het_error_set(err, HET_ERR_INVALID,
                                 "pool backing list \"%s\": \"%.*s\" is not npu, dmaheap, udmabuf, memfd or auto",
                                 list, (int)len, s);
        for (int i = 0; i < n; i++)
            if (order[i] == b)
                return het_error_set(err, HET_ERR_INVALID, "pool backing list \"%s\": %s listed twice", list,
                                     het_pool_backing_short_name(b));
        order[n++] = b;
        if (!s[len]) break;
        s += len + 1;
    }
    memcpy(params->order, order, (size_t)n * sizeof order[0]);
    params->n_order = n;
    return HET_OK;
}
