/*
 * test_cpu_attn_split.c — the CPU device on a decode layer's per-head nodes
 * and attention (q and k normed, scaled and rotated, k and v written into
 * F16 caches viewed head-major, attention over the cache) after a matmul of
 * 4 MB, so that the split is shared between threads: the small nodes as the
 * solo step of their chains (cpu_solo.c), the attention as a step of its
 * own. Run 200 times with 2 and 3 threads, a short cache and a long one:
 * every output bit for bit that of the nodes run one by one on one thread;
 * then moved on step by step under one storage layout, the device keeping
 * its decisions where the nodes did not change. Checked for results and
 * for which runs kept their decisions, never time.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "devices/cpu/cpu_ops.h"
#include "het/device.h"
#include "het/graph.h"
#include "sched/device_impl.h"
#include "testutil.h"

struct block {
    het_graph         *g;
    struct het_tensor *nodes[16];
    int                n;
    struct het_tensor *q, *k, *v, *kc, *vc, *pos; /* inputs and the caches */
    void              *bufs[64];
    int                n_bufs;
};

struct block_case {
    int64_t hd, n_head, n_kv, n_ctx, n_past;
};

static void *block_alloc(struct block *b, size_t n)
{
    void *p = aligned_alloc(64, (n + 63) & ~(size_t)63);
    memset(p, 0, n);
    b->bufs[b->n_bufs++] = p;
    return p;
}

static struct het_tensor *norm_gain(het_graph *g, struct het_tensor *x, struct het_tensor *gain)
{
    return het_mul(g, het_rms_norm(g, x, 1e-6f), gain);
}

/* The nodes of one Qwen3 decode layer's block (q and k normed and scaled
 * before the rope), storage given to every tensor. */
static bool block_build(struct block *b, const struct block_case *c)
{
    memset(b, 0, sizeof *b);
    b->g = het_graph_init(256);
    het_graph *g = b->g;
    const int64_t qne[3] = { c->hd, c->n_head, 1 }, kne[3] = { c->hd, c->n_kv, 1 };
    b->q = het_new_tensor(g, HET_TYPE_F32, 3, qne);
    b->k = het_new_tensor(g, HET_TYPE_F32, 3, kne);
    b->v = het_new_tensor(g, HET_TYPE_F32, 3, kne);
    b->pos = het_new_tensor_1d(g, HET_TYPE_I32, 1);
    const int64_t cne[3] = { c->hd, c->n_ctx, c->n_kv };
    b->kc = het_new_tensor(g, HET_TYPE_F16, 3, cne);
    b->vc = het_new_tensor(g, HET_TYPE_F16, 3, cne);
    struct het_tensor *gq = het_new_tensor_1d(g, HET_TYPE_F32, c->hd), *gk = het_new_tensor_1d(g, HET_TYPE_F32, c->hd);
    struct het_tensor *q = het_rope(g, norm_gain(g, b->q, gq), b->pos, (int)c->hd, HET_ROPE_NEOX, 1000000.0f, 1.0f);
    struct het_tensor *k = het_rope(g, norm_gain(g, b->k, gk), b->pos, (int)c->hd, HET_ROPE_NEOX, 1000000.0f, 1.0f);
    /* the caches (hd, n_ctx, n_kv) seen as (hd, n_kv, tokens): head-major */
    const size_t row = b->kc->nb[1], head = b->kc->nb[2];
    het_cpy(g, k, het_view_3d(g, b->kc, c->hd, c->n_kv, 1, head, row, (size_t)c->n_past * row));
    het_cpy(g, b->v, het_view_3d(g, b->vc, c->hd, c->n_kv, 1, head, row, (size_t)c->n_past * row));
    struct het_tensor *keys = het_view_3d(g, b->kc, c->hd, c->n_kv, c->n_past + 1, head, row, 0);
    struct het_tensor *vals = het_view_3d(g, b->vc, c->hd, c->n_kv, c->n_past + 1, head, row, 0);
    het_attn(g, q, keys, vals, 1.0f / sqrtf((float)c->hd), (int32_t)c->n_past);
    if (het_graph_status(g, NULL) != HET_OK) return false;
    het_graph_mark_readers(g);
    for (int i = 0; i < het_graph_n_tensors(g); i++) {
        struct het_tensor *t = het_graph_tensor(g, i);
        t->data = t->view_src ? (char *)t->view_src->data + t->view_offs : block_alloc(b, het_nbytes(t));
    }
    b->n = het_graph_n_nodes(g);
    for (int i = 0; i < b->n; i++) b->nodes[i] = het_graph_node(g, i);
    het_test_fill_normal(b->q->data, (size_t)het_nelements(b->q), 2.0f);
    het_test_fill_normal(b->k->data, (size_t)het_nelements(b->k), 2.0f);
    het_test_fill_normal(b->v->data, (size_t)het_nelements(b->v), 1.0f);
    het_test_fill_normal(gq->data, (size_t)c->hd, 1.0f);
    het_test_fill_normal(gk->data, (size_t)c->hd, 1.0f);
    *(int32_t *)b->pos->data = (int32_t)c->n_past;
    /* the cache's earlier positions */
    float *tmp = malloc(sizeof(float) * (size_t)het_nelements(b->kc));
    for (int s = 0; s < 2; s++) {
        struct het_tensor *cache = s ? b->vc : b->kc;
        het_test_fill_normal(tmp, (size_t)het_nelements(cache), 1.0f);
        for (int64_t i = 0; i < het_nelements(cache); i++) ((uint16_t *)cache->data)[i] = het_fp32_to_fp16(tmp[i]);
    }
    free(tmp);
    return true;
}

static void block_free(struct block *b)
{
    for (int i = 0; i < b->n_bufs; i++) free(b->bufs[i]);
    het_graph_free(b->g);
}

/* What the block leaves: the rotated q and k, the attention's output and
 * both caches (a norm and its gain that alone feed a rope are never stored:
 * norm_chain.c). */
static bool block_output(const struct het_tensor *t) { return t->op == HET_OP_ROPE || t->op == HET_OP_ATTN; }

struct outputs {
    uint8_t *bytes;
    size_t   n;
};

static void outputs_take(const struct block *b, struct outputs *o)
{
    size_t n = het_nbytes(b->kc) + het_nbytes(b->vc);
    for (int i = 0; i < b->n; i++) n += block_output(b->nodes[i]) ? het_nbytes(b->nodes[i]) : 0;
    o->bytes = malloc(n);
    o->n = 0;
    for (int i = 0; i < b->n; i++) {
        if (!block_output(b->nodes[i])) continue;
        memcpy(o->bytes + o->n, b->nodes[i]->data, het_nbytes(b->nodes[i]));
        o->n += het_nbytes(b->nodes[i]);
    }
    memcpy(o->bytes + o->n, b->kc->data, het_nbytes(b->kc));
    o->n += het_nbytes(b->kc);
    memcpy(o->bytes + o->n, b->vc->data, het_nbytes(b->vc));
    o->n += het_nbytes(b->vc);
}

/* The caches as they were before the block, the nodes' outputs poisoned. */
static void block_reset(struct block *b, const uint8_t *kc0, const uint8_t *vc0)
{
    memcpy(b->kc->data, kc0, het_nbytes(b->kc));
    memcpy(b->vc->data, vc0, het_nbytes(b->vc));
    for (int i = 0; i < b->n; i++)
        if (!b->nodes[i]->view_src) memset(b->nodes[i]->data, 0xff, het_nbytes(b->nodes[i]));
}

static void run_alone(struct block *b, enum het_cpu_isa isa)
{
    for (int i = 0; i < b->n; i++) {
        const size_t ws = het_cpu_work_size(b->nodes[i], 1, false, 0);
        void *wd = ws ? aligned_alloc(64, (ws + 63) & ~(size_t)63) : NULL;
        const struct het_compute_params p = { .ith = 0, .nth = 1, .wdata = wd, .wsize = ws, .isa = isa };
        const enum het_status st = het_cpu_compute(&p, b->nodes[i]);
        CHECK(st == HET_OK, "%s alone: %s", b->nodes[i]->name, het_status_name(st));
        free(wd);
    }
}

/* A matmul of 4 MB of weights (prepared by dev) to run before the block:
 * the split is then shared between threads. */
static void block_matmul(struct block *b, het_device *dev, struct het_tensor *w, struct het_tensor *x,
                         struct het_tensor *mm)
{
    het_error err = { 0 };
    const int64_t wne[2] = { 1024, 4096 }, xne[2] = { 1024, 1 }, mne[2] = { 4096, 1 };
    het_tensor_init(w, HET_TYPE_Q8_0, 2, wne);
    w->data = block_alloc(b, het_nbytes(w));
    snprintf(w->name, sizeof w->name, "w");
    for (size_t i = 0; i < het_nbytes(w); i += 34) { /* q8_0 blocks: a small scale, random quants */
        const uint16_t d = het_fp32_to_fp16(0.01f);
        memcpy((uint8_t *)w->data + i, &d, 2);
        for (int k = 0; k < 32; k++) ((int8_t *)w->data)[i + 2 + k] = (int8_t)(het_test_rand_u64() % 255 - 127);
    }
    het_tensor_init(x, HET_TYPE_F32, 2, xne);
    x->data = block_alloc(b, het_nbytes(x));
    het_test_fill_normal(x->data, 1024, 1.0f);
    het_tensor_init(mm, HET_TYPE_F32, 2, mne);
    mm->data = block_alloc(b, het_nbytes(mm));
    mm->op = HET_OP_MUL_MAT;
    mm->src[0] = w;
    mm->src[1] = x;
    snprintf(mm->name, sizeof mm->name, "mm");
    struct het_tensor *wl[1] = { w };
    CHECK(het_device_prepare_weights(dev, wl, 1, &err) == HET_OK, "prepare weights: %s", err.msg);
}

/* A device of `threads` threads and the block of c after the matmul:
 * nodes[0..n). */
struct rig {
    het_device        *dev;
    struct block       b;
    struct het_tensor  w, x, mm;
    struct het_tensor *nodes[17];
    int                n;
};

static bool rig_open(struct rig *r, int threads, const struct block_case *c)
{
    het_error err = { 0 };
    r->dev = het_cpu_device_init(threads, &err);
    CHECK(r->dev != NULL, "cpu device: %s", err.msg);
    if (!r->dev) return false;
    if (!block_build(&r->b, c)) {
        CHECK(false, "device: graph");
        het_device_free(r->dev);
        return false;
    }
    block_matmul(&r->b, r->dev, &r->w, &r->x, &r->mm);
    r->nodes[0] = &r->mm;
    for (int i = 0; i < r->b.n; i++) r->nodes[1 + i] = r->b.nodes[i];
    r->n = r->b.n + 1;
    return true;
}

static void rig_close(struct rig *r)
{
    het_device_free(r->dev);
    block_free(&r->b);
}

/* The device on a large matmul and the block (shared between threads),
 * with a short cache and a long one. */
static void test_device(int threads, int64_t n_past)
{
    const struct block_case c = { 128, 16, 8, n_past + 44, n_past };
    struct rig r;
    if (!rig_open(&r, threads, &c)) return;
    het_error err = { 0 };
    het_device *dev = r.dev;
    struct block *b = &r.b;
    struct het_tensor *const *nodes = r.nodes, *mm = &r.mm;
    const int n = r.n;
    uint8_t *kc0 = malloc(het_nbytes(b->kc)), *vc0 = malloc(het_nbytes(b->vc));
    memcpy(kc0, b->kc->data, het_nbytes(b->kc));
    memcpy(vc0, b->vc->data, het_nbytes(b->vc));
    block_reset(b, kc0, vc0);
    CHECK(het_device_run_split(dev, nodes, 1, &err) == HET_OK, "device: the matmul: %s", err.msg);
    float *mm_want = malloc(het_nbytes(mm));
    memcpy(mm_want, mm->data, het_nbytes(mm));
    struct het_cpu_features f;
    het_cpu_features_detect(&f);
    block_reset(b, kc0, vc0);
    run_alone(b, het_cpu_isa_select(&f));
    struct outputs want;
    outputs_take(b, &want);
    int failed = 0, wrong = 0;
    for (int rep = 0; rep < 200; rep++) {
        block_reset(b, kc0, vc0);
        memset(mm->data, 0xff, het_nbytes(mm));
        if (het_device_run_split(dev, nodes, n, &err) != HET_OK) {
            failed++;
            continue;
        }
        struct outputs got;
        outputs_take(b, &got);
        wrong += got.n != want.n || memcmp(got.bytes, want.bytes, want.n) || memcmp(mm->data, mm_want, het_nbytes(mm));
        free(got.bytes);
    }
    CHECK(failed == 0, "device, %d threads: %d of 200 runs failed: %s", threads, failed, err.msg);
    CHECK(wrong == 0, "device, %d threads: %d of 200 runs differ from the nodes one by one", threads, wrong);
    free(want.bytes);
    free(mm_want);
    free(kc0);
    free(vc0);
    rig_close(&r);
}

/* The block moved on to position p as het_arch_llama_advance moves a
 * decode graph: the cache writes' views to row p, the attention's cache
 * views to p + 1 rows, its n_past and the rope's position. */
static void block_move(struct block *b, int64_t p)
{
    const size_t row = b->kc->nb[1];
    for (int i = 0; i < b->n; i++) {
        struct het_tensor *t = b->nodes[i];
        if (t->op == HET_OP_CPY) {
            t->view_offs = (size_t)p * row;
            t->src[1]->view_offs = t->view_offs;
            t->data = (char *)t->view_src->data + t->view_offs;
            t->src[1]->data = t->data;
        } else if (t->op == HET_OP_ATTN) {
            t->op_params[1] = (int32_t)p;
            for (int s = 1; s <= 2; s++) {
                t->src[s]->ne[2] = p + 1;
                t->src[s]->nb[3] = t->src[s]->nb[2] * (size_t)(p + 1);
            }
        }
    }
    *(int32_t *)b->pos->data = (int32_t)p;
}

/* The device runs a split again under one storage layout
 * (het_device.layout) as the block moves on, keeping its decisions about
 * the nodes that did not change: every step's outputs bit for bit those of
 * the nodes one by one, the decisions kept at every step but the first and
 * the one where the attention's cache grows past a small node's size
 * (HET_CPU_SOLO_MAX_BYTES: 16 KB of q and output + 4 KB a position, so
 * between positions 10 and 12), where they are made anew. */
static void test_kept(int threads)
{
    const struct block_case c = { 128, 16, 8, 40, 4 };
    struct rig r;
    if (!rig_open(&r, threads, &c)) return;
    het_error err = { 0 };
    het_device *dev = r.dev;
    struct block *b = &r.b;
    struct het_cpu_features f;
    het_cpu_features_detect(&f);
    uint8_t *kc0 = malloc(het_nbytes(b->kc)), *vc0 = malloc(het_nbytes(b->vc));
    int wrong = 0, failed = 0, steps = 0;
    for (int64_t p = 4; p <= 18; p += 2, steps++) {
        block_move(b, p);
        memcpy(kc0, b->kc->data, het_nbytes(b->kc));
        memcpy(vc0, b->vc->data, het_nbytes(b->vc));
        block_reset(b, kc0, vc0);
        run_alone(b, het_cpu_isa_select(&f));
        struct outputs want, got;
        outputs_take(b, &want);
        block_reset(b, kc0, vc0);
        if (het_device_run_split_in(dev, r.nodes, r.n, 7, &err) != HET_OK) failed++;
        outputs_take(b, &got);
        wrong += got.n != want.n || memcmp(got.bytes, want.bytes, want.n);
        free(want.bytes);
        free(got.bytes);
    }
    struct het_device_stats st;
    het_device_get_stats(dev, &st);
    CHECK(failed == 0 && wrong == 0, "kept, %d threads: %d of %d steps failed, %d differ from the nodes one by one",
          threads, failed, steps, wrong);
    CHECK(st.n_splits_kept == (uint64_t)steps - 2, "kept, %d threads: %llu of %d steps ran on kept decisions, not %d",
          threads, (unsigned long long)st.n_splits_kept, steps, steps - 2);
    free(kc0);
    free(vc0);
    rig_close(&r);
}

int main(void)
{
    het_test_seed(777);
    test_device(2, 20);
    test_device(3, 20);
    test_device(2, 600);
    test_kept(2);
    test_kept(3);
    return het_test_finish();
}
