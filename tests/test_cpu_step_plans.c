/*
 * test_cpu_step_plans.c — the CPU device's matmul steps planned once with
 * its kept decisions (het_cpu_mm_step_plan, cpu_device.c's
 * cpu_plan_steps) and run from those plans while a split runs again and
 * again under one storage layout, as a decode does token after token:
 *   - a decode layer's matmul steps (a residual norm into q, k and v; o; a
 *     residual norm into gate and up; the SWIGLU into down) with new inputs
 *     at every run: every output bit for bit that of the nodes run one by
 *     one on one thread, at 2 and 3 threads, and the steps counted as run
 *     on plans;
 *   - a matmul over a view whose rows change from run to run (1 to 4):
 *     its plan, made for one row, is dropped once the view changed and the
 *     step is planned live, so its output has every row at every count;
 *   - every such run counted as a decode split in the device's stream
 *     stats (cpu_stream.c races its hints on them), and a run holding a
 *     probe (HET_TENSOR_FLAG_PROBE: a node run to time it) not counted;
 *     one thread's runs, without the pool, counted (and raced) as well.
 * Checked for results and for which steps ran on plans, never time.
 */
#include <stdlib.h>
#include <string.h>

#include "devices/cpu/cpu_ops.h"
#include "het/device.h"
#include "het/graph.h"
#include "sched/device_impl.h"
#include "testutil.h"

#define EMBD 1024
#define QDIM 2048
#define KVDIM 512
#define FFN 3072
#define XROWS 4
#define RUNS 24
#define LAYOUT 7

struct layer {
    het_graph         *g;
    struct het_tensor *nodes[64];
    int                n;
    struct het_tensor *res, *dn, *x;      /* inputs refilled at every run          */
    struct het_tensor *w[8];              /* q, k, v, o, gate, up, down, and the
                                             view's matmul's: q8_0                 */
    struct het_tensor *view, *xm;         /* the changing view and its matmul      */
    void              *bufs[96];
    int                n_bufs;
};

static void *layer_alloc(struct layer *l, size_t n)
{
    void *p = aligned_alloc(64, (n + 63) & ~(size_t)63);
    memset(p, 0, n);
    l->bufs[l->n_bufs++] = p;
    return p;
}

static struct het_tensor *weight(het_graph *g, int64_t k, int64_t n, const char *name)
{
    const int64_t ne[2] = { k, n };
    struct het_tensor *w = het_new_tensor(g, HET_TYPE_Q8_0, 2, ne);
    w->flags |= HET_TENSOR_FLAG_WEIGHT;
    snprintf(w->name, sizeof w->name, "%s", name);
    return w;
}

static void fill_q8_0(struct het_tensor *w)
{
    uint8_t *p = w->data;
    for (size_t i = 0; i < het_nbytes(w); i += 34) { /* a small scale, random quants */
        const uint16_t d = het_fp32_to_fp16(0.01f + 0.001f * (float)(het_test_rand_u64() % 8));
        memcpy(p + i, &d, 2);
        for (int k = 0; k < 32; k++) ((int8_t *)p)[i + 2 + k] = (int8_t)(het_test_rand_u64() % 255 - 127);
    }
}

/* rms_norm(a + b) * gain */
static struct het_tensor *residual_norm(het_graph *g, struct het_tensor *a, struct het_tensor *b,
                                        struct het_tensor **sum)
{
    *sum = het_add(g, a, b);
    struct het_tensor *gain = het_new_tensor_1d(g, HET_TYPE_F32, EMBD);
    return het_mul(g, het_rms_norm(g, *sum, 1e-6f), gain);
}

static bool layer_build(struct layer *l)
{
    memset(l, 0, sizeof *l);
    l->g = het_graph_init(128);
    het_graph *g = l->g;
    l->res = het_new_tensor_1d(g, HET_TYPE_F32, EMBD);
    l->dn = het_new_tensor_1d(g, HET_TYPE_F32, EMBD);
    const int64_t xne[2] = { EMBD, XROWS };
    l->x = het_new_tensor(g, HET_TYPE_F32, 2, xne);
    const char *names[8] = { "q", "k", "v", "o", "gate", "up", "down", "xw" };
    const int64_t kn[8][2] = { { EMBD, QDIM }, { EMBD, KVDIM }, { EMBD, KVDIM }, { QDIM, EMBD },
                               { EMBD, FFN },  { EMBD, FFN },   { FFN, EMBD },   { EMBD, EMBD } };
    for (int i = 0; i < 8; i++) l->w[i] = weight(g, kn[i][0], kn[i][1], names[i]);
    struct het_tensor *x, *x2;
    struct het_tensor *n1 = residual_norm(g, l->res, l->dn, &x);
    struct het_tensor *q = het_mul_mat(g, l->w[0], n1);
    het_mul_mat(g, l->w[1], n1);
    het_mul_mat(g, l->w[2], n1);
    struct het_tensor *o = het_mul_mat(g, l->w[3], q);
    struct het_tensor *n2 = residual_norm(g, x, o, &x2);
    struct het_tensor *sw = het_swiglu(g, het_mul_mat(g, l->w[4], n2), het_mul_mat(g, l->w[5], n2));
    het_add(g, x2, het_mul_mat(g, l->w[6], sw));
    l->view = het_view_2d(g, l->x, EMBD, 1, l->x->nb[1], 0);
    l->xm = het_mul_mat(g, l->w[7], l->view);
    if (het_graph_status(g, NULL) != HET_OK) return false;
    het_graph_mark_readers(g);
    for (int i = 0; i < het_graph_n_tensors(g); i++) {
        struct het_tensor *t = het_graph_tensor(g, i);
        size_t bytes = het_nbytes(t);
        if (t == l->xm) bytes = sizeof(float) * EMBD * XROWS; /* room for the most rows */
        t->data = t->view_src ? (char *)t->view_src->data + t->view_offs : layer_alloc(l, bytes);
        if (t->op == HET_OP_NONE && t->type == HET_TYPE_F32) het_test_fill_normal(t->data, (size_t)het_nelements(t), 1.0f);
    }
    for (int i = 0; i < 8; i++) fill_q8_0(l->w[i]);
    l->n = het_graph_n_nodes(g);
    for (int i = 0; i < l->n; i++) l->nodes[i] = het_graph_node(g, i);
    return true;
}

/* The view over `rows` rows of x, and its matmul's output as many. */
static void layer_move(struct layer *l, int64_t rows)
{
    struct het_tensor *v = l->view, *m = l->xm;
    v->ne[1] = m->ne[1] = rows;
    v->nb[2] = v->nb[3] = v->nb[1] * (size_t)rows;
    m->nb[2] = m->nb[3] = m->nb[1] * (size_t)rows;
}

static void layer_inputs(struct layer *l)
{
    het_test_fill_normal(l->res->data, EMBD, 1.0f);
    het_test_fill_normal(l->dn->data, EMBD, 1.0f);
    het_test_fill_normal(l->x->data, EMBD * XROWS, 1.0f);
    for (int i = 0; i < l->n; i++) memset(l->nodes[i]->data, 0xff, het_nbytes(l->nodes[i]));
}

/* What the layer leaves, in node order: the sums and the matmuls' outputs
 * (a norm, its gain and a SWIGLU that only a matmul reads are made by that
 * matmul as it prepares its activations, never stored). */
static bool layer_output(const struct het_tensor *t) { return t->op == HET_OP_ADD || t->op == HET_OP_MUL_MAT; }

static uint8_t *layer_outputs(const struct layer *l, size_t *n)
{
    *n = 0;
    for (int i = 0; i < l->n; i++) *n += layer_output(l->nodes[i]) ? het_nbytes(l->nodes[i]) : 0;
    uint8_t *o = malloc(*n), *p = o;
    for (int i = 0; i < l->n; i++) {
        if (!layer_output(l->nodes[i])) continue;
        memcpy(p, l->nodes[i]->data, het_nbytes(l->nodes[i]));
        p += het_nbytes(l->nodes[i]);
    }
    return o;
}

static void run_alone(struct layer *l, enum het_cpu_isa isa)
{
    for (int i = 0; i < l->n; i++) {
        const size_t ws = het_cpu_work_size(l->nodes[i], 1, false, 0);
        void *wd = ws ? aligned_alloc(64, (ws + 63) & ~(size_t)63) : NULL;
        const struct het_compute_params p = { .ith = 0, .nth = 1, .wdata = wd, .wsize = ws, .isa = isa };
        const enum het_status st = het_cpu_compute(&p, l->nodes[i]);
        CHECK(st == HET_OK, "%s alone: %s", l->nodes[i]->name, het_status_name(st));
        free(wd);
    }
}

static void test_plans(int threads)
{
    struct layer l;
    if (!layer_build(&l)) {
        CHECK(false, "graph");
        return;
    }
    het_error err = { 0 };
    het_device *dev = het_cpu_device_init(threads, &err);
    CHECK(dev != NULL, "cpu device: %s", err.msg);
    if (!dev) return;
    CHECK(het_device_prepare_weights(dev, l.w, 8, &err) == HET_OK, "prepare weights: %s", err.msg);
    struct het_cpu_features f;
    het_cpu_features_detect(&f);
    const enum het_cpu_isa isa = het_cpu_isa_select(&f);
    int failed = 0, wrong = 0, first_wrong = -1;
    for (int r = 0; r < RUNS; r++) {
        layer_move(&l, r < 6 ? 1 : 1 + r % XROWS); /* one row for a while, then 2, 3, 4, 1, ... */
        layer_inputs(&l);
        run_alone(&l, isa);
        size_t nw, ng;
        uint8_t *want = layer_outputs(&l, &nw);
        for (int i = 0; i < l.n; i++) memset(l.nodes[i]->data, 0xff, het_nbytes(l.nodes[i]));
        if (het_device_run_split_in(dev, l.nodes, l.n, LAYOUT, &err) != HET_OK) failed++;
        uint8_t *got = layer_outputs(&l, &ng);
        if (ng != nw || memcmp(got, want, nw)) {
            wrong++;
            if (first_wrong < 0) first_wrong = r;
        }
        free(want);
        free(got);
    }
    struct het_device_stats st;
    het_device_get_stats(dev, &st);
    CHECK(failed == 0 && wrong == 0, "%d threads: %d of %d runs failed (%s), %d differ from the nodes one by one (first: %d)",
          threads, failed, RUNS, err.msg, wrong, first_wrong);
    /* q/k/v, o, gate/up and down on plans at every run; the view's matmul
     * while its view stays one row (the first 6 runs), dropped since */
    CHECK(st.n_splits_kept == RUNS - 1, "%d threads: %llu of %d runs on kept decisions", threads,
          (unsigned long long)st.n_splits_kept, RUNS);
    CHECK(st.n_steps_kept == 4 * RUNS + 6, "%d threads: %llu steps on plans, not %d", threads,
          (unsigned long long)st.n_steps_kept, 4 * RUNS + 6);
    struct het_cpu_stream_stats cs;
    CHECK(het_cpu_device_stream_stats(dev, &cs) == HET_OK, "stream stats");
    const uint64_t decode = cs.splits_nta + cs.splits_t0 + cs.splits_t1;
    CHECK(decode == RUNS, "%d threads: %llu decode splits, not %d", threads, (unsigned long long)decode, RUNS);
    /* a matmul run alone, as online.c probes one: counted, and not once flagged as a probe */
    struct het_tensor *gate = NULL;
    for (int i = 0; i < l.n && !gate; i++)
        if (l.nodes[i]->op == HET_OP_MUL_MAT && l.nodes[i]->src[0] == l.w[4]) gate = l.nodes[i];
    struct het_tensor alone = *gate, probe = *gate;
    probe.flags |= HET_TENSOR_FLAG_PROBE;
    struct het_tensor *one = &alone;
    CHECK(het_device_run_split(dev, &one, 1, &err) == HET_OK, "the matmul alone: %s", err.msg);
    het_cpu_device_stream_stats(dev, &cs);
    CHECK(cs.splits_nta + cs.splits_t0 + cs.splits_t1 == decode + 1, "%d threads: the matmul alone counted",
          threads);
    one = &probe;
    CHECK(het_device_run_split(dev, &one, 1, &err) == HET_OK, "the matmul as a probe: %s", err.msg);
    het_cpu_device_stream_stats(dev, &cs);
    CHECK(cs.splits_nta + cs.splits_t0 + cs.splits_t1 == decode + 1, "%d threads: a split holding a probe not counted",
          threads);
    het_device_free(dev);
    for (int i = 0; i < l.n_bufs; i++) free(l.bufs[i]);
    het_graph_free(l.g);
}

/* One thread runs its splits alone, without the pool: they race the
 * stream's hints all the same (counted as decode splits). */
static void test_one_thread(void)
{
    struct layer l;
    if (!layer_build(&l)) {
        CHECK(false, "graph");
        return;
    }
    het_error err = { 0 };
    het_device *dev = het_cpu_device_init(1, &err);
    CHECK(dev != NULL, "cpu device: %s", err.msg);
    if (!dev) return;
    CHECK(het_device_prepare_weights(dev, l.w, 8, &err) == HET_OK, "prepare weights: %s", err.msg);
    layer_move(&l, 1);
    int failed = 0;
    for (int r = 0; r < 8; r++) {
        layer_inputs(&l);
        failed += het_device_run_split_in(dev, l.nodes, l.n, LAYOUT, &err) != HET_OK;
    }
    struct het_cpu_stream_stats cs;
    CHECK(het_cpu_device_stream_stats(dev, &cs) == HET_OK && failed == 0, "1 thread: runs and stats (%s)", err.msg);
    CHECK(cs.splits_nta + cs.splits_t0 + cs.splits_t1 == 8 && cs.races >= 1,
          "1 thread: %llu of 8 decode splits counted, %llu races",
          (unsigned long long)(cs.splits_nta + cs.splits_t0 + cs.splits_t1), (unsigned long long)cs.races);
    het_device_free(dev);
    for (int i = 0; i < l.n_bufs; i++) free(l.bufs[i]);
    het_graph_free(l.g);
}

int main(void)
{
    het_test_seed(4242);
    test_plans(2);
    test_plans(3);
    test_one_thread();
    return het_test_finish();
}
