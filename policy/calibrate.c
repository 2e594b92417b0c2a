/*
 * calibrate.c — measuring a device into a profile: microbenchmarks of every
 * op class over sizes, fitted per (class, weight type), plus the split
 * overhead and the hand-off cost between two devices.
 *
 * Every measurement is a small graph run through the device vtable exactly
 * as the scheduler runs splits (policy/microbench.c). A split holds R
 * identical nodes with distinct weights, so small matmuls are not timed out
 * of a warm cache and the split's own overhead (measured first) is spread
 * over R nodes and subtracted. A size sweep stops once one node takes
 * longer than max_node_ms: the fit extrapolates from there. Sweeps:
 *   matmul   per weight type, N x K from the model classes, M = 1 .. 512;
 *   norm, eltwise, rope, softmax, copy over row counts;
 *   attn     decode (1 query) over KV lengths, prefill (M = KV);
 *   split    one tiny node vs 32 tiny nodes;
 *   hand-off a -> b at a few sizes: (run a, sync, run b, sync) minus each alone.
 * An emulated NPU is refused (its wall time is the CPU's; its profile comes
 * from the NPU cost model, profile_npu.c); other emulated devices (Vulkan on
 * lavapipe) are measured as what they are, and the label says so.
 */
#include "policy/microbench.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define MB (1024.0 * 1024.0)

struct cal {
    het_device *dev;
    het_profile *prof;
    const struct het_calibrate_params *p;
    bool quick;
    double max_node_us;
    double split_us;                 /* measured overhead of one split         */
    struct het_mbench_timing timing;
    int done, total;                 /* progress                               */
    int n_samples;
    int n_noisy;                     /* samples whose repetitions spread > 50% */
    double cold_bytes;               /* weight bytes that leave the caches     */
};

static void tick(struct cal *c, const char *what)
{
    c->done++;
    if (c->p->progress)
        c->p->progress(c->p->progress_user, c->total ? fmin(1.0, (double)c->done / c->total) : 0, what);
}

/* ---------------------------------------------------------------------------
 * one measurement                                                           */

static bool all_supported(het_device *dev, het_graph *g)
{
    for (int i = 0; i < het_graph_n_nodes(g); i++)
        if (!het_device_supports_op(dev, het_graph_node(g, i))) return false;
    return true;
}

/* Time g's nodes (identical shapes) as one split; add a sample of the first
 * node's features to (cls, wtype). Frees g. HET_ERR_UNSUPPORTED: the device
 * cannot run it (nothing measured). */
static enum het_status measure(struct cal *c, het_graph *g, enum het_op_class cls, enum het_type wtype,
                               double *node_us, het_error *err)
{
    struct het_mbench mb = { .g = g };
    int n = het_graph_n_nodes(g);
    double us = 0, spread = 0;
    het_device *dev = c->dev, *tmp = NULL;
    enum het_status st = HET_OK;
    if (het_device_kind(dev) == HET_DEVICE_CPU && cls == HET_OPCLASS_MATMUL) {
        /* The CPU repacks weights in prepare_weights and keeps the panels (and
         * pointers to the tensors) until it is freed; the device interface has
         * no way to release them. So weights of a graph that dies first get a
         * device of their own, with the same threads, freed before the graph. */
        tmp = het_cpu_device_init(het_cpu_device_n_threads(dev), err);
        if (!tmp) st = err ? err->status : HET_ERR_NOMEM;
        dev = tmp;
    }
    /* after allocation: a device may look at the storage to decide */
    if (st == HET_OK) st = het_mbench_alloc(&mb, &dev, 1, err);
    if (st == HET_OK && (n == 0 || !all_supported(dev, g))) st = HET_ERR_UNSUPPORTED;
    if (st == HET_OK) st = het_mbench_time_split(dev, &mb, 0, n, &c->timing, &us, &spread, err);
    if (st == HET_OK) {
        /* the split's fixed cost comes off, but never more than a tenth: it
         * is measured once, and on a busy machine (threads descheduled at
         * the split's barriers) it can come out in milliseconds, which would
         * make a 5 ms matmul sample look 3x faster than it ran */
        double per = (us - fmin(c->split_us, 0.1 * us)) / n;
        struct het_op_cost oc;
        het_op_cost_of(het_graph_node(g, 0), &oc);
        struct het_profile_sample s = { .m = oc.m, .flops = oc.flops, .bytes = oc.bytes, .us = per, .spread = spread };
        st = het_profile_add_sample(c->prof, cls, wtype, &s, err);
        c->n_samples++;
        c->n_noisy += spread > 0.5;
        if (node_us) *node_us = per;
    }
    het_mbench_unregister(&mb);
    het_device_free(tmp);
    het_mbench_free(&mb);
    return st;
}

static struct het_tensor *leaf(het_graph *g, enum het_type t, int64_t a, int64_t b, int64_t c, uint32_t flags)
{
    const int64_t ne[3] = { a, b, c };
    struct het_tensor *x = het_new_tensor(g, t, 3, ne);
    if (x) x->flags |= flags;
    return x;
}

/* ---------------------------------------------------------------------------
 * split overhead                                                            */

static enum het_status calibrate_split(struct cal *c, het_error *err)
{
    het_graph *g = het_graph_init(80);
    if (!g) return het_error_set(err, HET_ERR_NOMEM, "calibrate: out of memory");
    struct het_tensor *x = leaf(g, HET_TYPE_F32, 64, 1, 1, HET_TENSOR_FLAG_INPUT);
    for (int i = 0; i < 32; i++) het_scale(g, x, 1.5f);
    struct het_mbench mb = { .g = g };
    double t1 = 0, t32 = 0, sp;
    enum het_status st = het_mbench_alloc(&mb, &c->dev, 1, err);
    if (st == HET_OK && !all_supported(c->dev, g))
        st = het_error_set(err, HET_ERR_UNSUPPORTED, "calibrate: %s cannot run scale", het_device_name(c->dev));
    if (st == HET_OK) st = het_mbench_time_split(c->dev, &mb, 0, 1, &c->timing, &t1, &sp, err);
    if (st == HET_OK) st = het_mbench_time_split(c->dev, &mb, 0, 32, &c->timing, &t32, &sp, err);
    het_mbench_free(&mb);
    if (st != HET_OK) return st;
    double per = fmax(0, (t32 - t1) / 31), split = fmax(0, t1 - per);
    /* measured again later: the smallest is the least disturbed by other work */
    c->split_us = c->split_us > 0 ? fmin(c->split_us, split) : split;
    tick(c, "split overhead");
    return HET_OK;
}

/* ---------------------------------------------------------------------------
 * matmul                                                                    */

struct shape { int64_t k, n; };
/* (3072 x 1024 has the features of 1024 x 3072: same flops and bytes, so quick skips it) */
static const struct shape quick_shapes[] = { { 1024, 1024 }, { 1024, 3072 } };
static const struct shape full_shapes[] = { { 256, 256 },   { 1024, 1024 }, { 1024, 3072 },
                                            { 3072, 1024 }, { 2048, 2048 }, { 1024, 32000 } };
static const int quick_ms[] = { 1, 2, 4, 8, 16, 64, 256 };
static const int full_ms[] = { 1, 2, 4, 8, 16, 32, 64, 128, 256, 512 };

static const enum het_type quick_types[] = { HET_TYPE_F32, HET_TYPE_F16, HET_TYPE_Q8_0, HET_TYPE_Q4_0,
                                             HET_TYPE_Q4_K, HET_TYPE_Q6_K };
static const enum het_type all_types[] = { HET_TYPE_F32,  HET_TYPE_F16,  HET_TYPE_BF16, HET_TYPE_Q8_0, HET_TYPE_Q4_0,
                                           HET_TYPE_Q4_1, HET_TYPE_Q5_0, HET_TYPE_Q5_1, HET_TYPE_Q2_K, HET_TYPE_Q3_K,
                                           HET_TYPE_Q4_K, HET_TYPE_Q5_K, HET_TYPE_Q6_K };
#define N_ALL_TYPES ((int)(sizeof all_types / sizeof all_types[0]))

static bool type_wanted(const struct cal *c, enum het_type t)
{
    if (c->p->types_mask) return (c->p->types_mask >> t) & 1u;
    if (!c->quick) return true;
    for (size_t i = 0; i < sizeof quick_types / sizeof quick_types[0]; i++)
        if (quick_types[i] == t) return true;
    return false;
}

static bool type_supported(het_device *dev, enum het_type t)
{
    if (!het_type_get_traits(t)->can_compute) return false;
    static _Alignas(4096) char dummy[64]; /* never read: supports_op may only check that storage exists */
    het_graph *g = het_graph_init(8);
    if (!g) return false;
    struct het_tensor *w = leaf(g, t, 1024, 64, 1, HET_TENSOR_FLAG_WEIGHT), *x = leaf(g, HET_TYPE_F32, 1024, 4, 1, 0);
    struct het_tensor *y = het_mul_mat(g, w, x);
    if (y) w->data = x->data = y->data = dummy;
    bool ok = y && het_device_supports_op(dev, y);
    het_graph_free(g);
    return ok;
}

/* Bytes a set of distinct weights must exceed so that a small-M matmul reads
 * them from memory, as decode does, not from the last-level cache: four times
 * the largest cache sysfs reports (a victim L3 still keeps part of a set twice
 * its size), at least 128 MiB. sysconf's L3 figure is wrong in some VMs, so it
 * is not used. */
static double cold_bytes(void)
{
    double best = 32 * MB;
    for (int i = 0; i < 8; i++) {
        char path[96];
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        double v = 0;
        char unit = 0;
        if (fscanf(f, "%lf%c", &v, &unit) >= 1)
            best = fmax(best, v * (unit == 'M' ? MB : unit == 'K' ? 1024.0 : unit == 'G' ? 1024.0 * MB : 1.0));
        fclose(f);
    }
    return fmin(fmax(4 * best, 128 * MB), 512 * MB);
}

/* R: enough distinct weights to leave the caches (small M, where the cost
 * is reading the weights), enough work to dwarf the split overhead, but no
 * split longer than ~20 ms unless leaving the caches needs it.
 * Matrices under 1/512 of the cold set (256 KiB for 128 MiB: 256x256 in
 * any type) are measured warm instead: only models small enough to stay in
 * the last-level cache have them (stories260K: 1 MB of weights), and read
 * cold they cost a DRAM latency each (~6 us at 256x256 q4_0, against ~1 us
 * in such a model), which set the fit's per-node t0 for every model. */
static int copies(const struct cal *c, double wbytes, int m, double est_us)
{
    const bool cold = m <= 16 && wbytes > c->cold_bytes / 512;
    double cache = cold ? ceil(c->cold_bytes / wbytes) : 1;                       /* >= 1 */
    double work = fmin(ceil(1000.0 / est_us), fmax(1, floor(20000.0 / est_us)));
    return (int)fmin(fmax(cache, work), 4096);
}

static enum het_status sweep_matmul(struct cal *c, enum het_type t, const struct shape *sh, const int *ms, int n_ms,
                                    het_error *err)
{
    double est = 100, wbytes = (double)het_type_row_size(t, sh->k) * (double)sh->n;
    for (int i = 0; i < n_ms; i++) {
        int r = copies(c, wbytes, ms[i], est);
        het_graph *g = het_graph_init(2 * r + 8);
        if (!g) return het_error_set(err, HET_ERR_NOMEM, "calibrate: out of memory");
        struct het_tensor *x = leaf(g, HET_TYPE_F32, sh->k, ms[i], 1, HET_TENSOR_FLAG_INPUT);
        for (int k = 0; k < r; k++) {
            struct het_tensor *w = leaf(g, t, sh->k, sh->n, 1, HET_TENSOR_FLAG_WEIGHT);
            /* a vocabulary-sized matrix is the output projection: devices may
             * treat it as they treat the model's (the CPU streams it as stored) */
            if (w && sh->n >= 32000) het_tensor_set_name(w, "output.weight");
            het_mul_mat(g, w, x);
        }
        char what[96];
        snprintf(what, sizeof what, "matmul %s %lldx%lld M=%d", het_type_name(t), (long long)sh->n,
                 (long long)sh->k, ms[i]);
        double us = 0;
        enum het_status st = measure(c, g, HET_OPCLASS_MATMUL, t, &us, err);
        tick(c, what);
        if (st != HET_OK && st != HET_ERR_UNSUPPORTED) return st;
        if (st == HET_ERR_UNSUPPORTED || us > c->max_node_us) { /* the rest would be unsupported or slower */
            c->done += n_ms - 1 - i;
            break;
        }
        est = 2 * us * (i + 1 < n_ms ? (double)ms[i + 1] / ms[i] : 1);
    }
    return HET_OK;
}

static enum het_status calibrate_matmul(struct cal *c, const enum het_type *types, int n_types, het_error *err)
{
    const struct shape *shapes = c->quick ? quick_shapes : full_shapes;
    int n_shapes = c->quick ? 2 : 6;
    const int *ms = c->quick ? quick_ms : full_ms;
    int n_ms = c->quick ? 7 : 10;
    for (int t = 0; t < n_types; t++)
        for (int s = 0; s < n_shapes; s++) {
            enum het_status st = sweep_matmul(c, types[t], &shapes[s], ms, n_ms, err);
            if (st != HET_OK) return st;
        }
    return HET_OK;
}

/* ---------------------------------------------------------------------------
 * bandwidth-bound classes and attention                                     */

static const int quick_rows[] = { 1, 16, 256 };
static const int full_rows[] = { 1, 4, 16, 64, 256, 1024 };

enum small_op { S_NORM, S_ADD, S_SWIGLU, S_ROPE, S_SOFTMAX, S_CPY, S_COUNT };

static het_graph *small_graph(enum small_op op, int m, int r)
{
    het_graph *g = het_graph_init(4 * r + 8);
    if (!g) return NULL;
    struct het_tensor *x = op == S_ROPE || op == S_CPY ? leaf(g, HET_TYPE_F32, 128, op == S_ROPE ? 16 : 8, m, 0)
                         : op == S_SOFTMAX ? leaf(g, HET_TYPE_F32, 64 * m, 16, 1, 0)
                         : leaf(g, HET_TYPE_F32, 1024, m, 1, 0);
    struct het_tensor *y = leaf(g, HET_TYPE_F32, 1024, m, 1, 0), *pos = leaf(g, HET_TYPE_I32, m, 1, 1, 0);
    /* a chain, as in a model: each node reads what the one before wrote
     * (on a multi-core device, partly from the other cores' caches) */
    for (int k = 0; k < r && x; k++) {
        switch (op) {
        case S_NORM:    x = het_rms_norm(g, x, 1e-6f); break;
        case S_ADD:     x = het_add(g, x, y); break;
        case S_SWIGLU:  x = het_swiglu(g, x, y); break;
        case S_ROPE:    x = het_rope(g, x, pos, 128, HET_ROPE_NEOX, 1e6f, 1); break;
        case S_SOFTMAX: x = het_softmax(g, x, NULL, 0.1f, -1); break;
        case S_CPY:     het_cpy(g, x, leaf(g, HET_TYPE_F16, 128, 8, m, HET_TENSOR_FLAG_STATE)); break; /* into the cache */
        case S_COUNT:   break;
        }
    }
    return g;
}

static enum het_status calibrate_small(struct cal *c, het_error *err)
{
    static const enum het_op_class cls[S_COUNT] = { HET_OPCLASS_NORM, HET_OPCLASS_ELTWISE, HET_OPCLASS_ELTWISE,
                                                    HET_OPCLASS_ROPE, HET_OPCLASS_SOFTMAX, HET_OPCLASS_COPY };
    static const char *const names[S_COUNT] = { "rms_norm", "add", "swiglu", "rope", "softmax", "cpy" };
    const int *rows = c->quick ? quick_rows : full_rows;
    int n_rows = c->quick ? 3 : 6;
    for (int op = 0; op < S_COUNT; op++)
        for (int i = 0; i < n_rows; i++) {
            het_graph *g = small_graph((enum small_op)op, rows[i], 8);
            if (!g) return het_error_set(err, HET_ERR_NOMEM, "calibrate: out of memory");
            enum het_status st = measure(c, g, cls[op], HET_TYPE_F32, NULL, err);
            char what[64];
            snprintf(what, sizeof what, "%s x%d", names[op], rows[i]);
            tick(c, what);
            if (st == HET_ERR_UNSUPPORTED) continue; /* the device lacks it: no model, the planner routes around */
            if (st != HET_OK) return st;
        }
    return HET_OK;
}

/* q (128, 16, m) over an F16 cache (128, 8, n_kv), as Qwen3-0.6B's layers */
static het_graph *attn_graph(int m, int n_kv, int r)
{
    het_graph *g = het_graph_init(4 * r + 4);
    if (!g) return NULL;
    struct het_tensor *q = leaf(g, HET_TYPE_F32, 128, 16, m, 0);
    for (int k = 0; k < r; k++)
        het_attn(g, q, leaf(g, HET_TYPE_F16, 128, 8, n_kv, HET_TENSOR_FLAG_STATE),
                 leaf(g, HET_TYPE_F16, 128, 8, n_kv, HET_TENSOR_FLAG_STATE), 0.0884f, n_kv - m);
    return g;
}

static const int quick_kv[] = { 64, 512, 2048 }, full_kv[] = { 16, 64, 256, 1024, 4096 };
static const int quick_pf[] = { 64, 256 }, full_pf[] = { 16, 64, 256, 512 };

static enum het_status calibrate_attn(struct cal *c, het_error *err)
{
    int nd = c->quick ? 3 : 5, np = c->quick ? 2 : 4;
    for (int i = 0; i < nd + np; i++) {
        bool decode = i < nd;
        int n_kv = decode ? (c->quick ? quick_kv : full_kv)[i] : (c->quick ? quick_pf : full_pf)[i - nd];
        int m = decode ? 1 : n_kv;
        het_graph *g = attn_graph(m, n_kv, decode ? 4 : 1);
        if (!g) return het_error_set(err, HET_ERR_NOMEM, "calibrate: out of memory");
        double us = 0;
        enum het_status st = measure(c, g, HET_OPCLASS_ATTN, HET_TYPE_F16, &us, err);
        char what[64];
        snprintf(what, sizeof what, "attn %s kv=%d", decode ? "decode" : "prefill", n_kv);
        tick(c, what);
        if (st == HET_ERR_UNSUPPORTED) return HET_OK;
        if (st != HET_OK) return st;
        if (!decode && us > c->max_node_us) break;
    }
    return HET_OK;
}

/* ---------------------------------------------------------------------------
 * the device                                                                */

static void set_label(struct cal *c)
{
    char date[32], label[256];
    time_t now = time(NULL);
    struct tm tm;
    strftime(date, sizeof date, "%Y-%m-%d %H:%M", localtime_r(&now, &tm));
    char noisy[96] = "";
    if (c->n_noisy * 10 > c->n_samples)
        snprintf(noisy, sizeof noisy, "; %d noisy samples: the machine was busy, recalibrate when idle", c->n_noisy);
    snprintf(label, sizeof label, "measured %s (%s calibration, %d samples, het %s%s)%s", date,
             c->quick ? "quick" : "full", c->n_samples, HET_VERSION, noisy,
             het_device_is_emulated(c->dev) ? " on an emulated device: the figures are the emulation's" : "");
    het_profile_set_label(c->prof, true, label);
}

static int count_work(const struct cal *c, int n_types)
{
    int mm = n_types * (c->quick ? 2 * 7 : 6 * 10);
    return 3 + mm + S_COUNT * (c->quick ? 3 : 6) + (c->quick ? 5 : 9);
}

static enum het_status run_calibration(struct cal *c, het_error *err)
{
    enum het_type types[N_ALL_TYPES];
    int n_types = 0;
    for (int i = 0; i < N_ALL_TYPES; i++)
        if (type_wanted(c, all_types[i]) && type_supported(c->dev, all_types[i])) types[n_types++] = all_types[i];
    c->total = count_work(c, n_types);
    enum het_status st = calibrate_split(c, err);
    if (st == HET_OK) st = calibrate_split(c, err);
    if (st == HET_OK) st = calibrate_small(c, err);
    if (st == HET_OK) st = calibrate_split(c, err);
    if (st == HET_OK) st = calibrate_attn(c, err);
    if (st == HET_OK) st = calibrate_matmul(c, types, n_types, err);
    if (st == HET_OK) st = het_profile_refit(c->prof, err);
    return st;
}

het_profile *het_calibrate_device(het_device *dev, const struct het_calibrate_params *params, het_error *err)
{
    static const struct het_calibrate_params none = { 0 };
    const struct het_calibrate_params *p = params ? params : &none;
    if (het_device_is_emulated(dev) && het_device_kind(dev) == HET_DEVICE_NPU) {
        het_error_set(err, HET_ERR_UNSUPPORTED,
                      "calibrate: %s is emulated: its timings would be the host's, use its NPU cost model",
                      het_device_name(dev));
        return NULL;
    }
    struct cal c = { .dev = dev, .p = p, .quick = p->quick, .cold_bytes = cold_bytes() };
    c.max_node_us = (p->max_node_ms > 0 ? p->max_node_ms : p->quick ? 30 : 200) * 1e3;
    c.timing = (struct het_mbench_timing){ .min_reps = p->quick ? 4 : 5, .max_reps = p->quick ? 12 : 40,
                                           .target_spread = p->quick ? 0.08 : 0.03,
                                           .budget_us = p->quick ? 0.15e6 : 1e6 };
    c.prof = het_profile_new_for_device(dev);
    if (!c.prof) {
        het_error_set(err, HET_ERR_NOMEM, "calibrate: out of memory");
        return NULL;
    }
    enum het_status st = run_calibration(&c, err);
    if (st != HET_OK) {
        het_error_prefix(err, "calibrate %s", het_device_name(dev));
        het_profile_free(c.prof);
        return NULL;
    }
    struct het_profile_device_costs dc;
    het_profile_get_device_costs(c.prof, &dc);
    dc.split_us = c.split_us;
    dc.async = het_device_kind(dev) != HET_DEVICE_CPU;
    dc.kernel_switch_us = 0;
    het_profile_set_device_costs(c.prof, &dc);
    set_label(&c);
    return c.prof;
}

/* ---------------------------------------------------------------------------
 * hand-off between two devices                                              */

static enum het_status handoff_point(het_device *a, het_device *b, int64_t n, const struct het_mbench_timing *t,
                                     double *extra_us, het_error *err)
{
    het_graph *g = het_graph_init(8);
    if (!g) return het_error_set(err, HET_ERR_NOMEM, "calibrate: out of memory");
    struct het_tensor *x = leaf(g, HET_TYPE_F32, n, 1, 1, HET_TENSOR_FLAG_INPUT);
    het_scale(g, het_scale(g, x, 1.5f), 0.5f);
    het_device *devs[2] = { a, b };
    struct het_mbench mb = { .g = g };
    double ta = 0, tb = 0, tab = 0, sp;
    enum het_status st = het_mbench_alloc(&mb, devs, 2, err);
    if (st == HET_OK && !(all_supported(a, g) && all_supported(b, g)))
        st = het_error_set(err, HET_ERR_UNSUPPORTED, "calibrate: hand-off needs scale on both devices");
    if (st == HET_OK) st = het_mbench_time_split(a, &mb, 0, 1, t, &ta, &sp, err);
    if (st == HET_OK) st = het_mbench_time_split(b, &mb, 1, 1, t, &tb, &sp, err);
    if (st == HET_OK) st = het_mbench_time_handoff(a, b, &mb, 1, 1, t, &tab, &sp, err);
    het_mbench_free(&mb);
    *extra_us = tab - ta - tb;
    return st;
}

enum het_status het_calibrate_handoff(het_device *from, het_device *to, het_profile *from_profile,
                                      const struct het_calibrate_params *params, het_error *err)
{
    bool npu_emul = (het_device_is_emulated(from) && het_device_kind(from) == HET_DEVICE_NPU) ||
                    (het_device_is_emulated(to) && het_device_kind(to) == HET_DEVICE_NPU);
    if (npu_emul)
        return het_error_set(err, HET_ERR_UNSUPPORTED, "calibrate: hand-off %s -> %s involves an emulated NPU",
                             het_device_name(from), het_device_name(to));
    bool quick = params && params->quick;
    const double sizes_quick[] = { 16e3, 4e6 }, sizes_full[] = { 16e3, 256e3, 4e6, 16e6 };
    const double *sizes = quick ? sizes_quick : sizes_full;
    int n = quick ? 2 : 4;
    struct het_mbench_timing t = { .min_reps = 5, .max_reps = quick ? 15 : 40, .target_spread = 0.05,
                                   .budget_us = quick ? 0.2e6 : 1e6 };
    double sx = 0, sy = 0, sxx = 0, sxy = 0;
    for (int i = 0; i < n; i++) {
        double h = 0;
        enum het_status st = handoff_point(from, to, (int64_t)(sizes[i] / 4), &t, &h, err);
        if (st != HET_OK) {
            het_error_prefix(err, "hand-off %s -> %s", het_device_name(from), het_device_name(to));
            return st;
        }
        sx += sizes[i]; sy += h; sxx += sizes[i] * sizes[i]; sxy += sizes[i] * h;
        if (params && params->progress) params->progress(params->progress_user, (i + 1.0) / n, "hand-off");
    }
    /* least squares h = fixed + bytes * slope */
    double slope = (n * sxy - sx * sy) / (n * sxx - sx * sx), fixed = (sy - slope * sx) / n;
    struct het_handoff h = { .fixed_us = fmax(0, fixed), .gbps = slope > 1e-6 ? 1e-3 / slope : 0 };
    snprintf(h.to, sizeof h.to, "%s", het_device_name(to));
    return het_profile_set_handoff(from_profile, &h, err);
}
