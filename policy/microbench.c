/*
 * microbench.c — small graphs run on real devices through the device
 * vtable, and robust timing of them (see microbench.h).
 *
 * Memory is laid out like the scheduler's: weights in one region registered
 * as weights, activations and state in another registered as scratch, so a
 * device that imports or mirrors memory pays here what it pays in a real
 * graph. Leaves get valid data (quantised weights are real blocks made by
 * het_quantize_row from one random row, repeated), so no kernel meets NaN
 * scales. Each measurement is repeated until the spread is small or the
 * time budget is spent. Repetitions that other work on the machine delayed
 * (a thread of the process waited for a core: sched/contention.c) are
 * dropped, and more are run in their place; of the rest, the mean of the
 * fastest quarter is kept: the slow tail is noise, which only adds time.
 */
#include "policy/microbench.h"

#include "sched/clock.h"
#include "sched/contention.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define ALIGN 256


static size_t align_up(size_t x, size_t a) { return (x + a - 1) & ~(a - 1); }

/* ---------------------------------------------------------------------------
 * data                                                                      */

static float rnd(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return (float)((*s >> 11) * (1.0 / 9007199254740992.0)) - 0.5f;
}

static enum het_status fill_quantized(struct het_tensor *t, uint64_t *seed, het_error *err)
{
    int64_t k = t->ne[0], rows = het_nrows(t);
    size_t row = het_type_row_size(t->type, k);
    float *src = malloc((size_t)k * sizeof *src);
    if (!src) return het_error_set(err, HET_ERR_NOMEM, "calibrate: out of memory");
    for (int64_t i = 0; i < k; i++) src[i] = rnd(seed);
    enum het_status st = het_quantize_row(t->type, src, t->data, k);
    free(src);
    if (st != HET_OK)
        return het_error_set(err, st, "calibrate: cannot make %s weights (%s)", het_type_name(t->type),
                             het_status_name(st));
    for (int64_t r = 1; r < rows; r++) memcpy((char *)t->data + r * row, t->data, row);
    return HET_OK;
}

static enum het_status fill(struct het_tensor *t, uint64_t *seed, het_error *err)
{
    int64_t n = het_nelements(t);
    switch (t->type) {
    case HET_TYPE_F32:
        for (int64_t i = 0; i < n; i++) ((float *)t->data)[i] = rnd(seed);
        return HET_OK;
    case HET_TYPE_F16:
        for (int64_t i = 0; i < n; i++) ((uint16_t *)t->data)[i] = het_fp32_to_fp16(rnd(seed));
        return HET_OK;
    case HET_TYPE_BF16:
        for (int64_t i = 0; i < n; i++) ((uint16_t *)t->data)[i] = het_fp32_to_bf16(rnd(seed));
        return HET_OK;
    case HET_TYPE_I32: /* positions, row ids: small valid indices */
        for (int64_t i = 0; i < n; i++) ((int32_t *)t->data)[i] = (int32_t)(i % 16);
        return HET_OK;
    default:
        if (het_type_get_traits(t->type)->is_quantized) return fill_quantized(t, seed, err);
        memset(t->data, 0, het_nbytes(t));
        return HET_OK;
    }
}

/* ---------------------------------------------------------------------------
 * memory                                                                    */

static void layout(struct het_mbench *mb, bool assign)
{
    size_t w = 0, a = 0;
    for (int i = 0; i < het_graph_n_tensors(mb->g); i++) {
        struct het_tensor *t = het_graph_tensor(mb->g, i);
        if (t->view_src || t->op == HET_OP_VIEW) continue; /* storage of another tensor */
        size_t sz = align_up(het_nbytes(t), ALIGN);
        bool weight = t->op == HET_OP_NONE && (t->flags & HET_TENSOR_FLAG_WEIGHT);
        if (assign) t->data = weight ? (char *)mb->wmem + w : (char *)mb->amem + a;
        if (weight) w += sz;
        else a += sz;
    }
    if (!assign) {
        mb->wsize = align_up(w ? w : 1, 4096);
        mb->asize = align_up(a ? a : 1, 4096);
    }
}

static void resolve_views(het_graph *g)
{
    for (int i = 0; i < het_graph_n_tensors(g); i++) {
        struct het_tensor *t = het_graph_tensor(g, i);
        if (t->view_src && t->view_src->data) t->data = (char *)t->view_src->data + t->view_offs;
    }
}

static enum het_status fill_leaves(struct het_mbench *mb, het_error *err)
{
    uint64_t seed = 0x2545F4914F6CDD1Dull;
    for (int i = 0; i < het_graph_n_tensors(mb->g); i++) {
        struct het_tensor *t = het_graph_tensor(mb->g, i);
        if (t->op != HET_OP_NONE || t->view_src) continue;
        enum het_status st = fill(t, &seed, err);
        if (st != HET_OK) return st;
    }
    return HET_OK;
}

/* the graph's weights (at most 256) */
static int weights_of(const struct het_mbench *mb, struct het_tensor **w)
{
    int nw = 0;
    for (int i = 0; i < het_graph_n_tensors(mb->g) && nw < 256; i++) {
        struct het_tensor *t = het_graph_tensor(mb->g, i);
        if (t->op == HET_OP_NONE && (t->flags & HET_TENSOR_FLAG_WEIGHT)) w[nw++] = t;
    }
    return nw;
}

static enum het_status register_all(struct het_mbench *mb, het_device *const *devs, int n_devs, het_error *err)
{
    struct het_tensor *w[256];
    int nw = weights_of(mb, w);
    for (int d = 0; d < n_devs && d < 2; d++) {
        enum het_status st = het_device_register_memory(devs[d], mb->wmem, mb->wsize, HET_MEMORY_WEIGHTS, err);
        if (st == HET_OK) {
            st = het_device_register_memory(devs[d], mb->amem, mb->asize, HET_MEMORY_SCRATCH, err);
            if (st != HET_OK) het_device_unregister_memory(devs[d], mb->wmem);
        }
        if (st != HET_OK) return st;
        mb->reg[mb->n_reg++] = devs[d];
        st = het_device_prepare_weights(devs[d], w, nw, err);
        if (st != HET_OK) return st;
    }
    return HET_OK;
}

enum het_status het_mbench_alloc(struct het_mbench *mb, het_device *const *devs, int n_devs, het_error *err)
{
    enum het_status st = het_graph_status(mb->g, err);
    if (st != HET_OK) return st;
    layout(mb, false);
    mb->wmem = aligned_alloc(4096, mb->wsize);
    mb->amem = aligned_alloc(4096, mb->asize);
    if (!mb->wmem || !mb->amem)
        return het_error_set(err, HET_ERR_NOMEM, "calibrate: cannot allocate %zu + %zu bytes", mb->wsize, mb->asize);
    memset(mb->amem, 0, mb->asize);
    layout(mb, true);
    resolve_views(mb->g);
    for (int i = 0; i < het_graph_n_nodes(mb->g); i++) het_graph_nodes(mb->g)[i]->flags |= HET_TENSOR_FLAG_PROBE;
    st = fill_leaves(mb, err);
    if (st == HET_OK) st = register_all(mb, devs, n_devs, err);
    return st;
}

void het_mbench_unregister(struct het_mbench *mb)
{
    struct het_tensor *w[256];
    int nw = mb->n_reg ? weights_of(mb, w) : 0;
    for (int d = 0; d < mb->n_reg; d++) {
        het_device_release_weights(mb->reg[d], w, nw); /* a repacking device's copies */
        het_device_unregister_memory(mb->reg[d], mb->wmem);
        het_device_unregister_memory(mb->reg[d], mb->amem);
    }
    mb->n_reg = 0;
}

void het_mbench_free(struct het_mbench *mb)
{
    het_mbench_unregister(mb);
    free(mb->wmem);
    free(mb->amem);
    het_graph_free(mb->g);
    memset(mb, 0, sizeof *mb);
}

/* ---------------------------------------------------------------------------
 * timing                                                                    */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* median and relative inter-quartile range of v[0..n) (sorted in place) */
static double median_spread(double *v, int n, double *spread)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    double med = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
    double q1 = v[n / 4], q3 = v[(3 * n) / 4 < n ? (3 * n) / 4 : n - 1];
    *spread = med > 0 ? (q3 - q1) / med : 0;
    return med;
}

struct run_fn {
    het_device *a, *b;
    struct het_tensor *const *nodes;
    int na, nb;
};

static enum het_status run_once(const struct run_fn *f, het_error *err)
{
    enum het_status st = het_device_run_split(f->a, f->nodes, f->na, err);
    if (st == HET_OK) st = het_device_sync(f->a, err);
    if (st == HET_OK && f->b) st = het_device_run_split(f->b, f->nodes + f->na, f->nb, err);
    if (st == HET_OK && f->b) st = het_device_sync(f->b, err);
    return st;
}

static enum het_status time_fn(const struct run_fn *f, const struct het_mbench_timing *t,
                               struct het_mbench_result *out, het_error *err)
{
    double clean[256], all[256];
    memset(out, 0, sizeof *out);
    double start = het_now_us();
    enum het_status st = run_once(f, err); /* warm-up: first touch, pipelines, caches */
    int n = 0, nc = 0, max = t->max_reps < 256 ? t->max_reps : 256;
    out->warmup_us = het_now_us() - start;
    start = het_now_us();
    while (st == HET_OK && n < 256) {
        struct het_contention a, b;
        het_contention_now(&a);
        double t0 = het_now_us();
        st = run_once(f, err);
        double us = het_now_us() - t0;
        het_contention_now(&b);
        all[n++] = us;
        if (t->all_disturbed || het_contention_disturbed(&a, &b, us)) out->n_disturbed++;
        else clean[nc++] = us;
        double spent = het_now_us() - start;
        if (nc >= t->min_reps) {
            double tmp[256], sp;
            memcpy(tmp, clean, (size_t)nc * sizeof *clean);
            median_spread(tmp, nc, &sp);
            if (sp <= t->target_spread || nc >= max || spent > t->budget_us) break;
        } else if (n >= 2 * max || (n >= t->min_reps && spent > 2 * t->budget_us)) {
            break; /* too few undisturbed: the caller decides what to do */
        }
    }
    if (st != HET_OK) return st;
    /* the mean of the fastest quarter (at least one) */
    out->contended = nc < t->min_reps;
    double *v = out->contended ? all : clean;
    int k = out->contended ? n : nc;
    median_spread(v, k, &out->spread);
    int q = k / 4 > 0 ? k / 4 : 1;
    double sum = 0;
    for (int i = 0; i < q; i++) sum += v[i];
    out->us = sum / q;
    out->n_reps = n;
    return HET_OK;
}

enum het_status het_mbench_time_split(het_device *dev, struct het_mbench *mb, int first, int n,
                                      const struct het_mbench_timing *t, struct het_mbench_result *out,
                                      het_error *err)
{
    struct run_fn f = { dev, NULL, het_graph_nodes(mb->g) + first, n, 0 };
    return time_fn(&f, t, out, err);
}

enum het_status het_mbench_time_handoff(het_device *a, het_device *b, struct het_mbench *mb, int na, int nb,
                                        const struct het_mbench_timing *t, struct het_mbench_result *out,
                                        het_error *err)
{
    struct run_fn f = { a, b, het_graph_nodes(mb->g), na, nb };
    return time_fn(&f, t, out, err);
}
