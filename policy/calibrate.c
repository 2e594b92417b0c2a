/*
 * calibrate.c — measuring a device into a profile: microbenchmarks of every
 * op class over sizes, fitted per (class, weight type), plus the split
 * overhead and the hand-off cost between two devices.
 *
 * What is measured: with params.needs, the model's own matmul weights (types
 * and shapes) and widths; otherwise a generic set. With params.base, what
 * that profile already has is kept and only the rest is measured. A matmul
 * sweep over M shares one set of weights (allocated, filled and prepared
 * once): preparing hundreds of MiB per point was most of the old cost.
 *
 * Robustness: each point is timed by microbench.c, which drops repetitions
 * other work delayed. A point left with too few undisturbed repetitions, or
 * off the trend of the point before it (more than 4x what its extra work
 * explains) is measured again, up to twice; a point still off the trend is
 * dropped (an outlier), one still disturbed is kept and counted noisy. Past
 * a tenth of the samples noisy or dropped (or a third of one model's) the
 * profile is marked noisy and not cached, but noisy samples count only if
 * other processes used a tenth of the CPUs' time while they were measured
 * (het_calibrate_too_noisy): the per-run counters see a CPU-type Vulkan
 * driver's own threads waiting for each other on the CPU's cores, which is
 * no other work. After three points in a row stay disturbed the machine is
 * busy and points are no longer repeated.
 *
 * Every measurement is a small graph run through the device vtable exactly
 * as the scheduler runs splits (policy/microbench.c). A split holds R
 * identical nodes with distinct weights, so small matmuls are not timed out
 * of a warm cache and the split's own overhead (measured first) is spread
 * over R nodes and subtracted (a node the previous point shows bound by
 * arithmetic is timed in fewer: nodes_to_time). A size sweep stops once
 * one node takes longer than max_node_ms: the fit extrapolates from there.
 * Sweeps:
 *   matmul   per weight type, N x K from the model classes, M = 1 .. 512
 *            (quick, for a model: every M on the largest matrix of a type,
 *            M = 1, 4 on the others);
 *   norm, eltwise, rope, softmax, copy over row counts (softmax only when
 *            the model has one: needs.no_softmax);
 *   attn     decode (1 query) over KV lengths, prefill (M = KV);
 *   experts  (a MoE model's mul_mat_id) per expert shape over tokens routed
 *            T = 1 .. 256 (512) and, at each T, the experts hit: k (every
 *            token the same), the uniform expectation, min(E, k·T);
 *   split    one tiny node vs 32 tiny nodes (add: a kernel every model
 *            has, so a Vulkan device compiles no pipeline just for this);
 *   hand-off a -> b at a few sizes: (run a, sync, run b, sync) minus each alone.
 * An emulated NPU is refused (its wall time is the CPU's; its profile comes
 * from the NPU cost model, profile_npu.c); other emulated devices (Vulkan on
 * lavapipe) are measured as what they are, and the label says so.
 */
#include "policy/microbench.h"
#include "policy/profile_impl.h"
#include "sched/contention.h"

#include "het/model.h"

#include "sched/clock.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MB (1024.0 * 1024.0)
#define RETRIES     2     /* extra measurements of a disturbed or off-trend point */
#define TREND_SLACK 4.0   /* a point may cost this much more than its work explains */
#define SPLIT_WORK_US 2000.0 /* time a split of slow nodes needs to be measured well      */
#define SLOW_GBPS   10.0  /* a node slower than 10x reading its bytes at this rate is  */
                          /* bound by arithmetic: where its weights lie hardly matters */

struct cal {
    het_device *dev;
    het_profile *prof;
    const struct het_calibrate_params *p;
    struct het_calibrate_needs needs;
    bool quick;
    double max_node_us;
    double split_us;                 /* measured overhead of one split         */
    struct het_mbench_timing timing;
    double timing_spread;            /* spread of the last timing              */
    int done, total;                 /* progress                               */
    struct het_calibrate_report rep;
    int busy_run;                    /* consecutive points still disturbed     */
    double noisy_other_us;           /* CPU time other processes used, and     */
    double noisy_capacity_us;        /* the CPUs had, while the points that    */
    bool noisy_load_unknown;         /* stayed disturbed were measured         */
    double cold_bytes;               /* weight bytes that leave the caches     */
    struct het_calibrate_stage *stage; /* where time is being counted now      */
    double stage_t0;
    struct het_device_stats stage_stats; /* the device's counters when it began */
};

/* Count time in the stage called name from now on (one of that name
 * already there continues; past the last slot, "others"). */
static void stage_begin(struct cal *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void stage_begin(struct cal *c, const char *fmt, ...)
{
    char name[sizeof c->rep.stages[0].name];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    struct het_calibrate_report *r = &c->rep;
    c->stage = NULL;
    for (int i = 0; i < r->n_stages && !c->stage; i++)
        if (!strcmp(r->stages[i].name, name)) c->stage = &r->stages[i];
    if (!c->stage && r->n_stages < HET_CALIBRATE_MAX_STAGES) {
        c->stage = &r->stages[r->n_stages++];
        memset(c->stage, 0, sizeof *c->stage);
        snprintf(c->stage->name, sizeof c->stage->name, "%s", name);
    }
    if (!c->stage) {
        c->stage = &r->stages[HET_CALIBRATE_MAX_STAGES - 1];
        snprintf(c->stage->name, sizeof c->stage->name, "others");
    }
    het_device_get_stats(c->dev, &c->stage_stats);
    c->stage_t0 = het_now_us();
}

static void stage_end(struct cal *c)
{
    if (c->stage) {
        struct het_device_stats now;
        het_device_get_stats(c->dev, &now);
        c->stage->seconds += (het_now_us() - c->stage_t0) / 1e6;
        c->stage->builds += (int)(now.n_builds - c->stage_stats.n_builds);
        c->stage->build_seconds += (now.build_us - c->stage_stats.build_us) / 1e6;
    }
    c->stage = NULL;
}

/* one timed point: its runs (the warm-up too) */
static void stage_count(struct cal *c, const struct het_mbench_result *r)
{
    if (!c->stage) return;
    c->stage->points++;
    c->stage->runs += r->n_reps + 1;
    c->stage->warmup_seconds += r->warmup_us / 1e6;
}

static void tick(struct cal *c, const char *what)
{
    c->done++;
    if (c->p->progress)
        c->p->progress(c->p->progress_user, c->total ? fmin(1.0, (double)c->done / c->total) : 0, what);
}

/* ---------------------------------------------------------------------------
 * one graph on the device                                                   */

static bool all_supported(het_device *dev, het_graph *g, int first, int n)
{
    for (int i = first; i < first + n; i++)
        if (!het_device_supports_op(dev, het_graph_node(g, i))) return false;
    return true;
}

static struct het_tensor *leaf(het_graph *g, enum het_type t, int64_t a, int64_t b, int64_t c, uint32_t flags)
{
    const int64_t ne[3] = { a, b, c };
    struct het_tensor *x = het_new_tensor(g, t, 3, ne);
    if (x) x->flags |= flags;
    return x;
}

/* A graph allocated on the device; closing it releases what the device
 * made of its weights (a repacking device's panels) before they go. */
struct bench {
    struct het_mbench mb;
    het_device *dev;
    struct cal *c;
};

static enum het_status bench_open(struct cal *c, struct bench *b, het_graph *g, het_error *err)
{
    double t0 = het_now_us();
    memset(b, 0, sizeof *b);
    b->mb.g = g;
    b->dev = c->dev;
    b->c = c;
    enum het_status st = het_mbench_alloc(&b->mb, &b->dev, 1, err); /* after allocation: a device may look at the storage */
    if (c->stage) c->stage->setup_seconds += (het_now_us() - t0) / 1e6;
    return st;
}

static void bench_close(struct bench *b)
{
    double t0 = het_now_us();
    het_mbench_free(&b->mb);
    if (b->c && b->c->stage) b->c->stage->setup_seconds += (het_now_us() - t0) / 1e6;
}

/* ---------------------------------------------------------------------------
 * one point: timed, re-timed while disturbed or off trend, recorded         */

struct work { double bytes, flops; };

struct point {
    enum het_op_class cls;
    enum het_type     wtype;
    int               first, n;      /* the nodes timed, identical in shape      */
    struct work       work;          /* what one node reads and computes         */
    const struct het_op_cost *cost;  /* what one node costs (NULL: from the node) */
};

static struct work work_of(const struct het_op_cost *oc) { return (struct work){ oc->bytes, oc->flops }; }

/* How much longer a point may take than the previous one (prev: nothing
 * before it when empty), before slack: as much as its fastest-growing need.
 * A device slow at arithmetic (a sanitizer build, a CPU-type driver) is
 * bound by flops already at M = 1, so a sweep's time grows with its flops
 * even while its bytes dominate a roofline's idea of the work. */
static double growth(struct work now, struct work prev)
{
    double g = 1.0;
    if (prev.bytes > 0) g = fmax(g, now.bytes / prev.bytes);
    if (prev.flops > 0) g = fmax(g, now.flops / prev.flops);
    return g;
}

static bool has_work(struct work w) { return w.bytes > 0 || w.flops > 0; }

/* How many of a point's n nodes to time. The copies are there to read the
 * weights from memory and to spread the split's overhead; a node that by
 * the previous point's time (scaled by growth(), an over-estimate) takes
 * over ten times what reading its bytes from memory would, and a split of
 * them over SPLIT_WORK_US, needs neither: fewer are timed (a CPU-type
 * Vulkan driver runs a 1024x1024 Q4_0 matmul at M = 4 in ~0.6 ms; timing
 * 228 copies of it, as the cold set asks, took 130 ms a run). */
static int nodes_to_time(const struct point *pt, struct work prev_work, double prev_us)
{
    if (!has_work(prev_work) || prev_us <= 0 || pt->n <= 1) return pt->n;
    double est = prev_us * growth(pt->work, prev_work);
    if (est < 10.0 * pt->work.bytes / (SLOW_GBPS * 1e3) || est * pt->n <= SPLIT_WORK_US) return pt->n;
    int n = (int)ceil(SPLIT_WORK_US / est);
    return n < 1 ? 1 : n > pt->n ? pt->n : n;
}

/* µs per node of [first, first+n) once; *contended when too few repetitions were undisturbed */
static enum het_status time_nodes(struct cal *c, struct bench *b, int first, int n, double *per, bool *contended,
                                  het_error *err)
{
    struct het_mbench_result r;
    enum het_status st = het_mbench_time_split(b->dev, &b->mb, first, n, &c->timing, &r, err);
    if (st != HET_OK) return st;
    stage_count(c, &r);
    /* the split's fixed cost comes off, but never more than a tenth: on a
     * busy machine it can come out in milliseconds */
    *per = (r.us - fmin(c->split_us, 0.1 * r.us)) / n;
    *contended = r.contended;
    c->timing_spread = r.spread;
    return HET_OK;
}

/* Measure point pt of bench b and add its sample unless it is an outlier.
 * prev: the sweep's previous kept point (work, us), work 0 for none.
 * *us receives the time kept (NAN: dropped). */
static enum het_status measure_point(struct cal *c, struct bench *b, const struct point *pt, struct work prev_work,
                                     double prev_us, double *us, het_error *err)
{
    *us = NAN;
    if (!all_supported(b->dev, b->mb.g, pt->first, pt->n)) return HET_ERR_UNSUPPORTED;
    double best = INFINITY, spread = 0;
    bool contended = true, off = true;
    struct het_machine_load load0, load1;
    het_machine_load_now(&load0);
    int tries = c->busy_run >= 3 ? 1 : 1 + RETRIES, n_time = nodes_to_time(pt, prev_work, prev_us);
    for (int t = 0; t < tries && (contended || off); t++) {
        if (t > 0) c->rep.n_remeasured++;
        double per = 0;
        bool cont = false;
        enum het_status st = time_nodes(c, b, pt->first, n_time, &per, &cont, err);
        if (st != HET_OK) return st;
        /* keep the best attempt: undisturbed first, then the faster */
        if ((contended && !cont) || (cont == contended && per < best)) {
            best = per;
            spread = c->timing_spread;
            contended = cont;
        }
        off = has_work(prev_work) && best > prev_us * growth(pt->work, prev_work) * TREND_SLACK + 5.0;
    }
    c->busy_run = contended ? c->busy_run + 1 : 0;
    if (contended) {
        double other = 0, capacity = 0;
        het_machine_load_now(&load1);
        if (het_machine_load_other(&load0, &load1, &other, &capacity)) {
            c->noisy_other_us += other;
            c->noisy_capacity_us += capacity;
        } else {
            c->noisy_load_unknown = true;
        }
    }
    if (off) { /* still far off its neighbour's trend: a stray measurement, not a datum */
        c->rep.n_outliers++;
        return HET_OK;
    }
    struct het_op_cost oc;
    if (pt->cost) oc = *pt->cost;
    else het_op_cost_of(het_graph_node(b->mb.g, pt->first), &oc);
    struct het_profile_sample s = { .m = oc.m, .flops = oc.flops, .bytes = oc.bytes, .us = best,
                                    .spread = spread, .calls = oc.calls };
    enum het_status st = het_profile_add_sample(c->prof, pt->cls, pt->wtype, &s, err);
    c->rep.n_samples++;
    c->rep.n_noisy += contended;
    *us = best;
    return st;
}

/* A size sweep: the last point it kept, which the next is judged by (no
 * work: none yet). */
struct sweep { struct work prev_work; double prev_us; };

/* Point pt of a sweep measured after the sweep's last kept point, and kept
 * as its new last unless dropped (*us: the time kept, NAN: dropped). */
static enum het_status sweep_measure(struct cal *c, struct bench *b, const struct point *pt, struct sweep *sw,
                                     double *us, het_error *err)
{
    enum het_status st = measure_point(c, b, pt, sw->prev_work, sw->prev_us, us, err);
    if (st == HET_OK && !isnan(*us)) {
        sw->prev_work = pt->work;
        sw->prev_us = *us;
    }
    return st;
}

/* One point of a matmul's sweep over M: measured (sweep_measure), counted
 * in the progress, and *stop set when the sweep ends here (the device cannot
 * run it, or it took longer than max_node_us: the fit extrapolates the rest;
 * left = points after this one). */
static enum het_status sweep_point(struct cal *c, struct bench *b, const struct point *pt, struct sweep *sw,
                                   const char *what, int left, bool *stop, het_error *err)
{
    double us = NAN;
    enum het_status st = sweep_measure(c, b, pt, sw, &us, err);
    tick(c, what);
    *stop = true;
    if (st == HET_ERR_UNSUPPORTED) { /* the rest would be unsupported too */
        c->done += left;
        return HET_OK;
    }
    if (st != HET_OK) return st;
    if (us > c->max_node_us) {
        c->done += left;
        return HET_OK;
    }
    *stop = false;
    return HET_OK;
}

/* Backward check of a finished sweep: a kept point far slower than the
 * next larger one (up to TREND_SLACK) cannot be right either; its sample is
 * dropped (the model's samples from `from` on are the sweep's). */
static void drop_backward_outliers(struct cal *c, enum het_op_class cls, enum het_type t, int from)
{
    int n = 0;
    const struct het_profile_sample *s = het_profile_samples(c->prof, cls, t, &n);
    for (int i = from; s && i + 1 < n; i++)
        if (s[i].us > TREND_SLACK * s[i + 1].us + 5.0 && het_profile_drop_sample(c->prof, cls, t, i)) {
            c->rep.n_outliers++;
            c->rep.n_samples--;
            s = het_profile_samples(c->prof, cls, t, &n);
            i--;
        }
}

/* ---------------------------------------------------------------------------
 * split overhead                                                            */

static enum het_status calibrate_split(struct cal *c, het_error *err)
{
    het_graph *g = het_graph_init(80);
    if (!g) return het_error_set(err, HET_ERR_NOMEM, "calibrate: out of memory");
    struct het_tensor *x = leaf(g, HET_TYPE_F32, 64, 1, 1, HET_TENSOR_FLAG_INPUT);
    for (int i = 0; i < 32; i++) het_add(g, x, x); /* add: a kernel every model uses (no pipeline of its own) */
    struct bench b;
    struct het_mbench_result r1, r32;
    enum het_status st = bench_open(c, &b, g, err);
    if (st == HET_OK && !all_supported(c->dev, g, 0, 32))
        st = het_error_set(err, HET_ERR_UNSUPPORTED, "calibrate: %s cannot run add", het_device_name(c->dev));
    if (st == HET_OK) st = het_mbench_time_split(c->dev, &b.mb, 0, 1, &c->timing, &r1, err);
    if (st == HET_OK) stage_count(c, &r1);
    if (st == HET_OK) st = het_mbench_time_split(c->dev, &b.mb, 0, 32, &c->timing, &r32, err);
    if (st == HET_OK) stage_count(c, &r32);
    bench_close(&b);
    if (st != HET_OK) return st;
    double per = fmax(0, (r32.us - r1.us) / 31), split = fmax(0, r1.us - per);
    /* measured again later: the smallest is the least disturbed by other work */
    c->split_us = c->split_us > 0 ? fmin(c->split_us, split) : split;
    tick(c, "split overhead");
    return HET_OK;
}

/* ---------------------------------------------------------------------------
 * matmul                                                                    */

/* (3072 x 1024 has the features of 1024 x 3072: same flops and bytes, so quick skips it) */
static const struct het_calibrate_shape quick_shapes[] = { { 0, 1024, 1024, false }, { 0, 1024, 3072, false } };
static const struct het_calibrate_shape full_shapes[] = { { 0, 256, 256, false },   { 0, 1024, 1024, false },
                                                          { 0, 1024, 3072, false }, { 0, 3072, 1024, false },
                                                          { 0, 2048, 2048, false }, { 0, 1024, 32000, true } };
static const int quick_ms[] = { 1, 4, 16, 64, 256 };
static const int full_ms[] = { 1, 2, 4, 8, 16, 32, 64, 128, 256, 512 };

static const enum het_type quick_types[] = { HET_TYPE_F32, HET_TYPE_F16, HET_TYPE_Q8_0, HET_TYPE_Q4_0,
                                             HET_TYPE_Q4_K, HET_TYPE_Q6_K };
static const enum het_type all_types[] = { HET_TYPE_F32,  HET_TYPE_F16,  HET_TYPE_BF16, HET_TYPE_Q8_0, HET_TYPE_Q4_0,
                                           HET_TYPE_Q4_1, HET_TYPE_Q5_0, HET_TYPE_Q5_1, HET_TYPE_Q2_K, HET_TYPE_Q3_K,
                                           HET_TYPE_Q4_K, HET_TYPE_Q5_K, HET_TYPE_Q6_K };
#define N_ALL_TYPES ((int)(sizeof all_types / sizeof all_types[0]))

/* Without a mask, the common types: a model's own types come with params.needs
 * (and extend a cached profile when it first meets them). */
static bool type_wanted(const struct cal *c, enum het_type t)
{
    if (c->p->types_mask) return (c->p->types_mask >> t) & 1u;
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
 * its size, het_cpu_largest_cache_bytes), at least 128 MiB. */
static double cold_bytes(void)
{
    const double best = fmax(32 * MB, (double)het_cpu_largest_cache_bytes());
    return fmin(fmax(4 * best, 128 * MB), 512 * MB);
}

/* Copies of a matmul in one split: enough distinct weights to leave the
 * caches (small M, where the cost is reading the weights), enough work to
 * dwarf the split overhead (est_us: a rough guess of one node; at most 64
 * copies for that), but no split longer than ~20 ms unless leaving the
 * caches needs it. Matrices under
 * 1/512 of the cold set (256 KiB for 128 MiB) are measured warm: only
 * models small enough to stay in the last-level cache have them. A set
 * within 5% of the cold size is cold enough (the cold size has margin:
 * Qwen3-0.6B's output matrix, 3.99x a 32 MiB L3, is measured alone instead
 * of twice over 255 MiB). */
static int copies(const struct cal *c, double wbytes, int m, double est_us)
{
    const bool cold = m <= 16 && wbytes > c->cold_bytes / 512;
    double cache = cold ? fmax(1, ceil(0.95 * c->cold_bytes / wbytes)) : 1;
    double work = fmin(fmin(ceil(1000.0 / est_us), 64), fmax(1, floor(20000.0 / est_us)));
    return (int)fmin(fmax(cache, work), 4096);
}

/* one node's time by a generic roofline (20 GB/s, 50 GFLOP/s): sizes copies only */
static double rough_us(double flops, double bytes) { return fmax(1.0, fmax(flops / 50e3, bytes / 20e3)); }

/* Is s a matmul sample of shape sh (its flops 2 k n m)? Relative, not
 * exact: profiles were once written with 9 significant digits, and an
 * 8B-shaped model's output matrix (2 x 4096 x 151936 = 1,244,659,712 flops a
 * row) read back as 1,244,659,710, so every run measured it again. */
static bool sample_of_shape(const struct het_profile_sample *s, const struct het_calibrate_shape *sh)
{
    const double want = 2.0 * (double)sh->k * (double)sh->n * s->m;
    return fabs(s->flops - want) <= 0.5 + 1e-8 * want;
}

/* Does the profile already have samples of this (type, shape)? (params.base) */
static bool have_shape(const struct cal *c, const struct het_calibrate_shape *sh)
{
    int n = 0;
    const struct het_profile_sample *s = het_profile_samples(c->prof, HET_OPCLASS_MATMUL, sh->type, &n);
    for (int i = 0; s && i < n; i++)
        if (sample_of_shape(&s[i], sh)) return true;
    return false;
}

/* One (type, shape) over ms[]: one graph holding R weights and, per M, an
 * activation and R_M <= R matmuls reading them. */
static enum het_status sweep_matmul(struct cal *c, const struct het_calibrate_shape *sh, const int *ms, int n_ms,
                                    het_error *err)
{
    const enum het_type t = sh->type;
    double wbytes = (double)het_type_row_size(t, sh->k) * (double)sh->n;
    int rm[16], r = 1;
    for (int i = 0; i < n_ms; i++) {
        double fl = 2.0 * (double)sh->k * (double)sh->n * ms[i];
        rm[i] = copies(c, wbytes, ms[i], rough_us(fl, wbytes + 4.0 * (double)(sh->k + sh->n) * ms[i]));
        r = rm[i] > r ? rm[i] : r;
    }
    int n_nodes = 0;
    for (int i = 0; i < n_ms; i++) n_nodes += rm[i];
    het_graph *g = het_graph_init(r + 2 * n_nodes + 2 * n_ms + 8);
    if (!g) return het_error_set(err, HET_ERR_NOMEM, "calibrate: out of memory");
    struct het_tensor *w[4096];
    for (int k = 0; k < r; k++) {
        w[k] = leaf(g, t, sh->k, sh->n, 1, HET_TENSOR_FLAG_WEIGHT);
        /* a vocabulary-sized matrix is the output projection: devices may
         * treat it as they treat the model's (the CPU streams it as stored) */
        if (w[k] && sh->output) het_tensor_set_name(w[k], "output.weight");
    }
    int first[16];
    for (int i = 0, at = 0; i < n_ms; i++) {
        struct het_tensor *x = leaf(g, HET_TYPE_F32, sh->k, ms[i], 1, HET_TENSOR_FLAG_INPUT);
        first[i] = at;
        for (int k = 0; k < rm[i]; k++) het_mul_mat(g, w[k], x);
        at += rm[i];
    }
    struct bench b;
    enum het_status st = bench_open(c, &b, g, err);
    int from = 0;
    het_profile_samples(c->prof, HET_OPCLASS_MATMUL, t, &from);
    struct sweep sw = { { 0, 0 }, 0 };
    for (int i = 0; st == HET_OK && i < n_ms; i++) {
        struct het_op_cost oc;
        het_op_cost_of(het_graph_node(g, first[i]), &oc);
        struct point pt = { HET_OPCLASS_MATMUL, t, first[i], rm[i], work_of(&oc), NULL };
        char what[96];
        snprintf(what, sizeof what, "matmul %s %lldx%lld M=%d", het_type_name(t), (long long)sh->n,
                 (long long)sh->k, ms[i]);
        bool stop;
        st = sweep_point(c, &b, &pt, &sw, what, n_ms - 1 - i, &stop, err);
        if (stop) break;
    }
    bench_close(&b);
    if (st == HET_OK) drop_backward_outliers(c, HET_OPCLASS_MATMUL, t, from);
    return st;
}

/* The M of a shape's sweep (list[i] of n). A quick calibration for a model
 * sweeps every M on the largest matrix of each weight type only, and the
 * others of that type at decode's M (1, 4): F(M) is one table per type,
 * which the largest shape fills, and the small ones add their own t0 and
 * bandwidth where they matter most (decode reads them from memory). */
static int matmul_ms(const struct cal *c, const struct het_calibrate_shape *list, int n_list, int i, int *ms)
{
    const struct het_calibrate_shape *sh = &list[i];
    bool decode_only = sh->output;
    for (int j = 0; c->quick && c->p->needs && !decode_only && j < n_list; j++) {
        const struct het_calibrate_shape *o = &list[j];
        double a = (double)o->k * (double)o->n, b = (double)sh->k * (double)sh->n;
        decode_only = o->type == sh->type && !o->output && (a > b || (a == b && j < i));
    }
    const int *src = c->quick ? quick_ms : full_ms;
    int n_src = c->quick ? 5 : 10, n = 0, max = c->needs.max_rows > 0 ? c->needs.max_rows : 512;
    for (int k = 0; k < n_src; k++)
        if (src[k] <= max && (!decode_only || src[k] <= 4)) ms[n++] = src[k];
    return n;
}

/* ---------------------------------------------------------------------------
 * bandwidth-bound classes and attention                                     */

static const int quick_rows[] = { 1, 16, 256 };
static const int full_rows[] = { 1, 4, 16, 64, 256, 1024 };

enum small_op { S_NORM, S_ADD, S_SWIGLU, S_ROPE, S_SOFTMAX, S_CPY, S_COUNT };
static const enum het_op_class small_cls[S_COUNT] = { HET_OPCLASS_NORM, HET_OPCLASS_ELTWISE, HET_OPCLASS_ELTWISE,
                                                      HET_OPCLASS_ROPE, HET_OPCLASS_SOFTMAX, HET_OPCLASS_COPY };
static const char *const small_names[S_COUNT] = { "rms_norm", "add", "swiglu", "rope", "softmax", "cpy" };

/* R nodes of op over m rows, a chain as in a model: each node reads what
 * the one before wrote (on a multi-core device, partly from the other
 * cores' caches) */
static het_graph *small_graph(const struct cal *c, enum small_op op, int m, int r)
{
    const int64_t width = c->needs.row_width > 0 ? c->needs.row_width : 1024;
    const int64_t hd = c->needs.head_dim > 0 ? c->needs.head_dim : 128;
    const int64_t nh = c->needs.n_head > 0 ? c->needs.n_head : 16, nkv = c->needs.n_head_kv > 0 ? c->needs.n_head_kv : 8;
    het_graph *g = het_graph_init(4 * r + 8);
    if (!g) return NULL;
    struct het_tensor *x = op == S_ROPE ? leaf(g, HET_TYPE_F32, hd, nh, m, 0)
                         : op == S_CPY ? leaf(g, HET_TYPE_F32, hd, nkv, m, 0)
                         : op == S_SOFTMAX ? leaf(g, HET_TYPE_F32, 64 * m, nh, 1, 0)
                         : leaf(g, HET_TYPE_F32, width, m, 1, 0);
    struct het_tensor *y = leaf(g, HET_TYPE_F32, width, m, 1, 0), *pos = leaf(g, HET_TYPE_I32, m, 1, 1, 0);
    for (int k = 0; k < r && x; k++) {
        switch (op) {
        case S_NORM:    x = het_rms_norm(g, x, 1e-6f); break;
        case S_ADD:     x = het_add(g, x, y); break;
        case S_SWIGLU:  x = het_swiglu(g, x, y); break;
        case S_ROPE:    x = het_rope(g, x, pos, (int)hd, HET_ROPE_NEOX, 1e6f, 1); break;
        case S_SOFTMAX: x = het_softmax(g, x, NULL, 0.1f, -1); break;
        case S_CPY:     het_cpy(g, x, leaf(g, HET_TYPE_F16, hd, nkv, m, HET_TENSOR_FLAG_STATE)); break; /* into the cache */
        case S_COUNT:   break;
        }
    }
    return g;
}

/* does the base profile already have this class (it is kept then)? */
static bool have_class(const struct cal *c, enum het_op_class cls, enum het_type t)
{
    int n = 0;
    het_profile_samples(c->prof, cls, t, &n);
    return c->p->base && n >= 2;
}

static enum het_status calibrate_small(struct cal *c, het_error *err)
{
    const int *rows = c->quick ? quick_rows : full_rows;
    int n_rows = c->quick ? 3 : 6;
    bool skip[HET_OPCLASS_COUNT] = { false };
    for (int op = 0; op < S_COUNT; op++) skip[small_cls[op]] = have_class(c, small_cls[op], HET_TYPE_F32);
    if (c->p->needs && c->needs.no_softmax) skip[HET_OPCLASS_SOFTMAX] = true; /* not in this model */
    for (int op = 0; op < S_COUNT; op++) {
        if (skip[small_cls[op]]) {
            c->done += n_rows;
            continue;
        }
        int from = 0;
        het_profile_samples(c->prof, small_cls[op], HET_TYPE_F32, &from);
        struct sweep sw = { { 0, 0 }, 0 };
        stage_begin(c, "%s", small_names[op]);
        for (int i = 0; i < n_rows; i++) {
            het_graph *g = small_graph(c, (enum small_op)op, rows[i], 8);
            if (!g) return het_error_set(err, HET_ERR_NOMEM, "calibrate: out of memory");
            struct bench b;
            enum het_status st = bench_open(c, &b, g, err);
            double us = NAN;
            if (st == HET_OK) {
                struct het_op_cost oc;
                het_op_cost_of(het_graph_node(g, 0), &oc);
                struct point pt = { small_cls[op], HET_TYPE_F32, 0, het_graph_n_nodes(g), work_of(&oc), NULL };
                st = sweep_measure(c, &b, &pt, &sw, &us, err);
            }
            bench_close(&b);
            char what[64];
            snprintf(what, sizeof what, "%s x%d", small_names[op], rows[i]);
            tick(c, what);
            if (st == HET_ERR_UNSUPPORTED) continue; /* the device lacks it: no model, the planner routes around */
            if (st != HET_OK) return st;
        }
        stage_end(c);
        drop_backward_outliers(c, small_cls[op], HET_TYPE_F32, from);
    }
    return HET_OK;
}

/* q (hd, nh, m) over an F16 cache (hd, nkv, n_kv), as the model's layers */
static het_graph *attn_graph(const struct cal *c, int m, int n_kv, int r)
{
    const int64_t hd = c->needs.head_dim > 0 ? c->needs.head_dim : 128;
    const int64_t nh = c->needs.n_head > 0 ? c->needs.n_head : 16, nkv = c->needs.n_head_kv > 0 ? c->needs.n_head_kv : 8;
    het_graph *g = het_graph_init(4 * r + 4);
    if (!g) return NULL;
    struct het_tensor *q = leaf(g, HET_TYPE_F32, hd, nh, m, 0);
    for (int k = 0; k < r; k++)
        het_attn(g, q, leaf(g, HET_TYPE_F16, hd, nkv, n_kv, HET_TENSOR_FLAG_STATE),
                 leaf(g, HET_TYPE_F16, hd, nkv, n_kv, HET_TENSOR_FLAG_STATE), 1.0f / sqrtf((float)hd), n_kv - m);
    return g;
}

static const int quick_kv[] = { 64, 512, 2048 }, full_kv[] = { 16, 64, 256, 1024, 4096 };
static const int quick_pf[] = { 64, 256 }, full_pf[] = { 16, 64, 256, 512 };

static enum het_status calibrate_attn(struct cal *c, het_error *err)
{
    int nd = c->quick ? 3 : 5, np = c->quick ? 2 : 4;
    if (have_class(c, HET_OPCLASS_ATTN, HET_TYPE_F16)) {
        c->done += nd + np;
        return HET_OK;
    }
    struct sweep sw = { { 0, 0 }, 0 };
    for (int i = 0; i < nd + np; i++) {
        bool decode = i < nd;
        int n_kv = decode ? (c->quick ? quick_kv : full_kv)[i] : (c->quick ? quick_pf : full_pf)[i - nd];
        int m = decode ? 1 : n_kv;
        if (i == nd) sw = (struct sweep){ { 0, 0 }, 0 }; /* prefill is a sweep of its own */
        het_graph *g = attn_graph(c, m, n_kv, decode ? 4 : 1);
        if (!g) return het_error_set(err, HET_ERR_NOMEM, "calibrate: out of memory");
        struct bench b;
        enum het_status st = bench_open(c, &b, g, err);
        double us = NAN;
        if (st == HET_OK) {
            struct het_op_cost oc;
            het_op_cost_of(het_graph_node(g, 0), &oc);
            struct point pt = { HET_OPCLASS_ATTN, HET_TYPE_F16, 0, het_graph_n_nodes(g), work_of(&oc), NULL };
            st = sweep_measure(c, &b, &pt, &sw, &us, err);
        }
        bench_close(&b);
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
 * experts (mul_mat_id): tokens routed x distinct experts hit                */

/* Does p have moe samples of this expert shape? A sample's flops are
 * 2·K·N·(k·T) and k·T = m·calls, so K·N = flops / (2·m·calls). */
static bool have_moe_shape(const het_profile *p, const struct het_calibrate_shape *sh)
{
    int n = 0;
    const struct het_profile_sample *s = het_profile_samples(p, HET_OPCLASS_MOE, sh->type, &n);
    const double kn = (double)sh->k * (double)sh->n;
    for (int i = 0; s && i < n; i++) {
        double routed = s[i].m * (s[i].calls > 1 ? s[i].calls : 1);
        if (routed > 0 && fabs(s[i].flops / (2.0 * routed) - kn) <= 1e-6 * kn) return true;
    }
    return false;
}

#define MOE_MAX_POINTS 12

/* Can dev run the experts of shape sh as mul_mat_id? (supports_op looks at
 * shapes and types only: the storage is a dummy never read) */
static bool moe_supported(het_device *dev, const struct het_calibrate_shape *sh, int E, int k)
{
    if (!het_type_get_traits(sh->type)->can_compute || E < 1 || k < 1 || k > E) return false;
    static _Alignas(4096) char dummy[64];
    het_graph *g = het_graph_init(8);
    if (!g) return false;
    struct het_tensor *w = leaf(g, sh->type, sh->k, sh->n, E, HET_TENSOR_FLAG_WEIGHT);
    struct het_tensor *x = leaf(g, HET_TYPE_F32, sh->k, 1, 4, 0), *ids = leaf(g, HET_TYPE_I32, k, 4, 1, 0);
    struct het_tensor *y = het_mul_mat_id(g, w, x, ids);
    if (y) w->data = x->data = ids->data = y->data = dummy;
    bool ok = y && het_device_supports_op(dev, y);
    het_graph_free(g);
    return ok;
}

void het_calibrate_needs_for(het_device *dev, struct het_calibrate_needs *needs)
{
    int n = 0;
    for (int i = 0; i < needs->n_moe_shapes; i++)
        if (moe_supported(dev, &needs->moe_shapes[i], needs->n_expert, needs->n_expert_used))
            needs->moe_shapes[n++] = needs->moe_shapes[i];
    needs->n_moe_shapes = n;
}

struct moe_point { int T, hit; };

/* The (tokens, experts hit) points of a sweep, by increasing work: at each
 * token count the fewest experts possible (every token the same k) and the
 * most (each token its own), and in between the count uniform routing
 * expects; up to the planner's largest batch. */
static int moe_points(const struct cal *c, struct moe_point *pt)
{
    static const int quick_t[] = { 1, 4, 16, 64, 256 }, full_t[] = { 1, 2, 4, 8, 16, 32, 64, 128, 256, 512 };
    const int *ts = c->quick ? quick_t : full_t, n_t = c->quick ? 5 : 10;
    const int E = c->needs.n_expert, k = c->needs.n_expert_used;
    const int max_t = c->needs.max_rows > 0 ? c->needs.max_rows : 512;
    int n = 0;
    for (int i = 0; i < n_t && ts[i] <= max_t; i++) {
        int T = ts[i], most = (int)fmin(E, (double)k * T);
        int exp = (int)lround(het_moe_expected_experts(E, k, T));
        int cand[3] = { k, exp, most };
        for (int j = 0; j < 3 && n < MOE_MAX_POINTS; j++) {
            bool seen = false;
            for (int q = 0; q < n; q++) seen |= pt[q].T == T && pt[q].hit == cand[j];
            if (!seen && cand[j] >= k && cand[j] <= most && (j == 0 || T > 1)) pt[n++] = (struct moe_point){ T, cand[j] };
        }
    }
    return n;
}

/* ids (k, T) hitting exactly `hit` experts from `first` on (mod E): token t
 * slot s takes expert first + (t·k + s) mod hit; k <= hit, so a token's
 * slots are distinct, and k·T >= hit, so all hit experts are read. */
static void moe_fill_ids(struct het_tensor *ids, int E, int hit, int first)
{
    const int64_t k = ids->ne[0], T = ids->ne[1];
    for (int64_t t = 0; t < T; t++)
        for (int64_t s = 0; s < k; s++) {
            int32_t e = (int32_t)((first + (t * k + s) % hit) % E);
            memcpy((char *)ids->data + s * ids->nb[0] + t * ids->nb[1], &e, sizeof e);
        }
}

/* One expert shape over moe_points(): C copies of the (K, N, E) experts
 * (enough, with the experts each node's ids rotate through, to read the
 * weights from memory where a decode would), and per point R nodes with
 * ids of their own. A sample records the experts actually hit. */
static enum het_status sweep_moe(struct cal *c, const struct het_calibrate_shape *sh, het_error *err)
{
    const enum het_type t = sh->type;
    const int E = c->needs.n_expert, k = c->needs.n_expert_used;
    struct moe_point pts[MOE_MAX_POINTS];
    const int n_pts = moe_points(c, pts);
    const double ebytes = (double)het_type_row_size(t, sh->k) * (double)sh->n; /* one expert */
    const bool cold = E * ebytes > c->cold_bytes / 512;
    const int n_copies = cold ? (int)fmax(1, fmin(fmin(ceil(c->cold_bytes / (E * ebytes)), floor(512 * MB / (E * ebytes))), 64))
                              : 1;
    int rm[MOE_MAX_POINTS], n_nodes = 0;
    for (int i = 0; i < n_pts; i++) {
        double fl = 2.0 * (double)sh->k * (double)sh->n * k * pts[i].T, by = pts[i].hit * ebytes;
        double est = rough_us(fl, by), reads = cold && pts[i].T <= 16 ? ceil(c->cold_bytes / by) : 1;
        rm[i] = (int)fmin(fmax(reads, fmin(fmin(ceil(1000.0 / est), 64), fmax(1, floor(20000.0 / est)))), 256);
        n_nodes += rm[i];
    }
    het_graph *g = het_graph_init(n_copies + 3 * n_nodes + n_pts + 8);
    if (!g) return het_error_set(err, HET_ERR_NOMEM, "calibrate: out of memory");
    struct het_tensor *w[64];
    for (int q = 0; q < n_copies && q < 64; q++) w[q] = leaf(g, t, sh->k, sh->n, E, HET_TENSOR_FLAG_WEIGHT);
    int first[MOE_MAX_POINTS];
    for (int i = 0, at = 0; i < n_pts; i++) {
        struct het_tensor *x = leaf(g, HET_TYPE_F32, sh->k, 1, pts[i].T, HET_TENSOR_FLAG_INPUT);
        first[i] = at;
        for (int r = 0; r < rm[i]; r++)
            het_mul_mat_id(g, w[r % n_copies], x, leaf(g, HET_TYPE_I32, k, pts[i].T, 1, HET_TENSOR_FLAG_INPUT));
        at += rm[i];
    }
    struct bench b;
    enum het_status st = bench_open(c, &b, g, err);
    for (int i = 0; st == HET_OK && i < n_pts; i++) /* node r reads copy r % C from expert (r / C)·hit on */
        for (int r = 0; r < rm[i]; r++)
            moe_fill_ids(het_graph_node(g, first[i] + r)->src[2], E, pts[i].hit, (r / n_copies) * pts[i].hit);
    struct sweep sw = { { 0, 0 }, 0 };
    for (int i = 0; st == HET_OK && i < n_pts; i++) {
        struct het_op_cost oc;
        het_op_cost_with_experts(het_graph_node(g, first[i]), pts[i].hit, &oc);
        struct point pt = { HET_OPCLASS_MOE, t, first[i], rm[i], work_of(&oc), &oc };
        char what[96];
        snprintf(what, sizeof what, "experts %s %lldx%lld x%d T=%d hit=%d", het_type_name(t), (long long)sh->n,
                 (long long)sh->k, E, pts[i].T, pts[i].hit);
        if (i > 0 && pts[i].T != pts[i - 1].T) sw.prev_work = (struct work){ 0, 0 }; /* the trend check compares within a token count */
        bool stop;
        st = sweep_point(c, &b, &pt, &sw, what, n_pts - 1 - i, &stop, err);
        if (stop) break;
    }
    bench_close(&b);
    return st;
}

/* ---------------------------------------------------------------------------
 * the model's needs                                                         */

static bool same_features(const struct het_calibrate_shape *a, const struct het_calibrate_shape *b)
{
    /* n x k and k x n cost the same flops and bytes */
    return a->type == b->type && a->output == b->output &&
           ((a->k == b->k && a->n == b->n) || (a->k == b->n && a->n == b->k));
}

void het_calibrate_needs_of_model(const struct het_model *m, struct het_calibrate_needs *out)
{
    memset(out, 0, sizeof *out);
    const struct het_model_config *cfg = het_model_get_config(m);
    out->row_width = cfg->n_embd;
    out->head_dim = cfg->head_dim;
    out->n_head = cfg->n_head;
    out->n_head_kv = cfg->n_head_kv;
    out->n_expert = cfg->n_expert;
    out->n_expert_used = cfg->n_expert_used;
    /* attention is one fused node (het_attn): only a MoE router has a
     * softmax (model/arch_moe.c) */
    out->no_softmax = cfg->n_expert == 0;
    const het_gguf *gg = het_model_gguf(m);
    for (int64_t i = 0; gg && i < het_gguf_n_tensors(gg); i++) {
        const struct het_gguf_tensor_info *ti = het_gguf_tensor(gg, i);
        if (ti->n_dims == 3 && cfg->n_expert > 0 && ti->ne[2] == cfg->n_expert) { /* experts: mul_mat_id */
            struct het_calibrate_shape sh = { ti->type, ti->ne[0], ti->ne[1], false };
            bool seen = false;
            for (int k = 0; k < out->n_moe_shapes && !seen; k++) seen = same_features(&out->moe_shapes[k], &sh);
            if (!seen && out->n_moe_shapes < (int)(sizeof out->moe_shapes / sizeof out->moe_shapes[0]))
                out->moe_shapes[out->n_moe_shapes++] = sh;
            continue;
        }
        if (ti->n_dims != 2 || ti->ne[1] <= 1) continue;
        bool output = ti->ne[1] == cfg->n_vocab;
        if (output && !strstr(ti->name, "output") && !cfg->tied_output) continue; /* token_embd: rows are gathered */
        struct het_calibrate_shape sh = { ti->type, ti->ne[0], ti->ne[1], output };
        bool seen = false;
        for (int k = 0; k < out->n_shapes && !seen; k++) seen = same_features(&out->shapes[k], &sh);
        if (!seen && out->n_shapes < HET_CALIBRATE_MAX_SHAPES) out->shapes[out->n_shapes++] = sh;
    }
}

bool het_profile_covers(const het_profile *p, const struct het_calibrate_needs *needs)
{
    static const enum het_op_class small[] = { HET_OPCLASS_NORM, HET_OPCLASS_ELTWISE, HET_OPCLASS_ROPE,
                                               HET_OPCLASS_SOFTMAX, HET_OPCLASS_COPY };
    for (size_t i = 0; i < sizeof small / sizeof small[0]; i++)
        if (!(small[i] == HET_OPCLASS_SOFTMAX && needs && needs->no_softmax) &&
            !het_profile_get_fit(p, small[i], HET_TYPE_F32, NULL))
            return false;
    if (!het_profile_get_fit(p, HET_OPCLASS_ATTN, HET_TYPE_F16, NULL)) return false;
    for (int i = 0; needs && i < needs->n_shapes; i++) {
        const struct het_calibrate_shape *sh = &needs->shapes[i];
        int n = 0;
        const struct het_profile_sample *s = het_profile_samples(p, HET_OPCLASS_MATMUL, sh->type, &n);
        bool found = false;
        for (int k = 0; s && k < n && !found; k++) found = sample_of_shape(&s[k], sh);
        if (!found) return false;
    }
    for (int i = 0; needs && needs->n_expert > 0 && i < needs->n_moe_shapes; i++)
        if (!have_moe_shape(p, &needs->moe_shapes[i])) return false;
    return true;
}

/* the matmul work list: the model's shapes, or the generic ones per wanted type */
static int matmul_list(struct cal *c, struct het_calibrate_shape *list, int max)
{
    int n = 0;
    if (c->p->needs) {
        for (int i = 0; i < c->needs.n_shapes && n < max; i++)
            if (type_supported(c->dev, c->needs.shapes[i].type)) list[n++] = c->needs.shapes[i];
        return n;
    }
    const struct het_calibrate_shape *shapes = c->quick ? quick_shapes : full_shapes;
    int n_shapes = c->quick ? 2 : 6;
    for (int t = 0; t < N_ALL_TYPES; t++) {
        if (!type_wanted(c, all_types[t]) || !type_supported(c->dev, all_types[t])) continue;
        for (int s = 0; s < n_shapes && n < max; s++) {
            list[n] = shapes[s];
            list[n++].type = all_types[t];
        }
    }
    return n;
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
    if (c->rep.noisy) snprintf(noisy, sizeof noisy, "; noisy: the machine was busy, recalibrate when idle");
    snprintf(label, sizeof label, "measured %s (%s calibration%s, %d samples, het %s%s)%s", date,
             c->quick ? "quick" : "full", c->p->needs ? " for a model" : "", c->rep.n_samples, HET_VERSION, noisy,
             het_device_is_emulated(c->dev) ? " on an emulated device: the figures are the emulation's" : "");
    het_profile_set_label(c->prof, true, label);
}

bool het_calibrate_too_noisy(int n_noisy, int n_outliers, int n_all, double busy_share)
{
    int bad = n_outliers + (busy_share < 0 || busy_share >= HET_BUSY_SHARE ? n_noisy : 0);
    return n_all > 0 && bad * 10 > n_all;
}

static void judge(struct cal *c)
{
    int bad = c->rep.n_noisy + c->rep.n_outliers, all = c->rep.n_samples + c->rep.n_outliers;
    /* test_disturbed stands for a machine that is always busy */
    double share = c->p->test_disturbed ? 1.0
                 : c->noisy_load_unknown || c->noisy_capacity_us <= 0 ? -1.0
                 : fmin(1.0, c->noisy_other_us / c->noisy_capacity_us);
    c->rep.busy_share = share;
    bool noisy = het_calibrate_too_noisy(c->rep.n_noisy, c->rep.n_outliers, all, share);
    char why[320] = "", busy[64] = "";
    if (share >= 0) snprintf(busy, sizeof busy, "; other processes used %.0f%% of the CPUs meanwhile", 100 * share);
    if (noisy)
        snprintf(why, sizeof why,
                 "%d of %d samples stayed disturbed by other work or off their neighbours' trend after re-measuring "
                 "(the machine was busy%s; calibrate again when it is idle)", bad, all, busy);
    het_profile_set_noisy(c->prof, noisy ? why : NULL);
    c->rep.noisy = noisy;
}

static enum het_status run_calibration(struct cal *c, het_error *err)
{
    struct het_calibrate_shape list[64];
    int n_list = matmul_list(c, list, 64), ms[16];
    int n_mm = 0;
    for (int i = 0; i < n_list; i++) n_mm += have_shape(c, &list[i]) ? 0 : matmul_ms(c, list, n_list, i, ms);
    struct moe_point pts[MOE_MAX_POINTS];
    int n_moe = 0;
    for (int i = 0; c->p->needs && c->needs.n_expert > 0 && i < c->needs.n_moe_shapes; i++)
        if (!have_moe_shape(c->prof, &c->needs.moe_shapes[i]) &&
            moe_supported(c->dev, &c->needs.moe_shapes[i], c->needs.n_expert, c->needs.n_expert_used))
            n_moe += moe_points(c, pts);
    c->total = 3 + n_mm + n_moe + S_COUNT * (c->quick ? 3 : 6) + (c->quick ? 5 : 9);
    enum het_status st = HET_OK;
    stage_begin(c, "split overhead");
    for (int i = 0; i < 3 && st == HET_OK; i++) st = calibrate_split(c, err);
    stage_end(c);
    if (st == HET_OK) st = calibrate_small(c, err);
    stage_begin(c, "attention");
    if (st == HET_OK) st = calibrate_attn(c, err);
    stage_end(c);
    for (int i = 0; i < n_list && st == HET_OK; i++) {
        if (have_shape(c, &list[i])) continue;
        int n_ms = matmul_ms(c, list, n_list, i, ms);
        stage_begin(c, "matmul %s %lldx%lld", het_type_name(list[i].type), (long long)list[i].n, (long long)list[i].k);
        st = sweep_matmul(c, &list[i], ms, n_ms, err);
        stage_end(c);
    }
    /* a MoE model's experts: only what the profile lacks */
    for (int i = 0; st == HET_OK && c->p->needs && c->needs.n_expert > 0 && i < c->needs.n_moe_shapes; i++) {
        const struct het_calibrate_shape *sh = &c->needs.moe_shapes[i];
        if (!have_moe_shape(c->prof, sh) && moe_supported(c->dev, sh, c->needs.n_expert, c->needs.n_expert_used)) {
            stage_begin(c, "experts %s %lldx%lld", het_type_name(sh->type), (long long)sh->n, (long long)sh->k);
            st = sweep_moe(c, sh, err);
            stage_end(c);
        }
    }
    stage_begin(c, "fit");
    if (st == HET_OK) st = het_profile_refit(c->prof, err);
    stage_end(c);
    return st;
}

het_profile *het_calibrate_device(het_device *dev, const struct het_calibrate_params *params, het_error *err)
{
    static const struct het_calibrate_params none = { 0 };
    const struct het_calibrate_params *p = params ? params : &none;
    if (!het_device_get_caps(dev)->host_timed) {
        het_error_set(err, HET_ERR_UNSUPPORTED,
                      "calibrate: %s is emulated: its timings would be the host's, use its own cost model",
                      het_device_name(dev));
        return NULL;
    }
    struct cal c = { .dev = dev, .p = p, .quick = p->quick, .cold_bytes = cold_bytes() };
    if (p->needs) c.needs = *p->needs;
    c.max_node_us = (p->max_node_ms > 0 ? p->max_node_ms : p->quick ? 30 : 200) * 1e3;
    /* quick: three undisturbed repetitions that agree within 8% end a point
     * (their mean of the fastest quarter is their minimum); one that does
     * not stops after 8 or 60 ms */
    c.timing = (struct het_mbench_timing){ .min_reps = p->quick ? 3 : 5, .max_reps = p->quick ? 8 : 20,
                                           .target_spread = p->quick ? 0.08 : 0.05,
                                           .budget_us = p->quick ? 0.06e6 : 0.25e6,
                                           .all_disturbed = p->test_disturbed };
    if (p->base && het_profile_matches(p->base, dev)) {
        c.prof = het_profile_clone(p->base);
        c.rep.n_reused = c.prof ? het_profile_n_models(c.prof) : 0;
    } else {
        c.prof = het_profile_new_for_device(dev);
    }
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
    dc.kernel_switch_us = 0;
    het_profile_set_device_costs(c.prof, &dc);
    judge(&c);
    set_label(&c);
    if (p->report) *p->report = c.rep;
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
    struct het_tensor *y = het_add(g, x, x);
    het_add(g, y, y);
    het_device *devs[2] = { a, b };
    struct het_mbench mb = { .g = g };
    struct het_mbench_result ta, tb, tab;
    enum het_status st = het_mbench_alloc(&mb, devs, 2, err);
    if (st == HET_OK && !(all_supported(a, g, 0, 2) && all_supported(b, g, 0, 2)))
        st = het_error_set(err, HET_ERR_UNSUPPORTED, "calibrate: hand-off needs add on both devices");
    if (st == HET_OK) st = het_mbench_time_split(a, &mb, 0, 1, t, &ta, err);
    if (st == HET_OK) st = het_mbench_time_split(b, &mb, 1, 1, t, &tb, err);
    if (st == HET_OK) st = het_mbench_time_handoff(a, b, &mb, 1, 1, t, &tab, err);
    het_mbench_free(&mb);
    *extra_us = st == HET_OK ? tab.us - ta.us - tb.us : 0;
    return st;
}

enum het_status het_calibrate_handoff(het_device *from, het_device *to, het_profile *from_profile,
                                      const struct het_calibrate_params *params, het_error *err)
{
    if (!het_device_get_caps(from)->host_timed || !het_device_get_caps(to)->host_timed)
        return het_error_set(err, HET_ERR_UNSUPPORTED, "calibrate: hand-off %s -> %s involves an emulated device",
                             het_device_name(from), het_device_name(to));
    bool quick = params && params->quick;
    const double sizes_quick[] = { 16e3, 4e6 }, sizes_full[] = { 16e3, 256e3, 4e6, 16e6 };
    const double *sizes = quick ? sizes_quick : sizes_full;
    int n = quick ? 2 : 4;
    struct het_mbench_timing t = { .min_reps = quick ? 4 : 5, .max_reps = quick ? 10 : 40, .target_spread = 0.05,
                                   .budget_us = quick ? 0.1e6 : 1e6 };
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
