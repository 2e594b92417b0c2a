/*
 * test_cpu_decode.c — how the CPU device runs a decode-shaped split:
 * matmuls that read the same activation row as one step
 * (het_cpu_mul_mat_group) and runs of small nodes as one step that one
 * thread runs alone (cpu_device.c). Checked for results only, never time:
 *   - het_cpu_mul_mat_group against each node run alone by het_cpu_mul_mat
 *     (same level, one thread): outputs bit for bit, for weight types that
 *     share an activation layout (q4_0, q4_K, q6_K, q5_1) and one that does
 *     not (q8_0: the group stops before it), odd row counts, load-time
 *     panels on some members and not others, b a strided view, dst rows
 *     strided; with threads sharing parts and with the static split, 2 and
 *     3 threads; and how many nodes it takes: not a second b, not b of two
 *     rows, not a member whose output overlaps another's input;
 *   - the residual norm (ADD, RMS_NORM, MUL by a gain) run by the matmul
 *     group it feeds as one step, against the nodes alone, every level,
 *     1-3 threads sharing parts or split statically: each output it stores
 *     bit for bit, the norm's and the gain's outputs left alone when only
 *     the step reads them, the sum alone when a reader of the gain's output
 *     does not join the group, and refused when an output would overwrite
 *     an input the other threads still read (a strided addend among them);
 *   - the same for a prefill's matmuls (b of 40 rows, the wide kernels):
 *     q4_K and q6_K members grouped (at amx), q4_0 not, bit for bit;
 *   - the residual norm before a prefill's matmuls, made and stored by the
 *     step that prepares b's rows (wide levels), bit for bit;
 *   - het_cpu_solo_partition: a run's independent chains in different
 *     parts, each chain's nodes in one; joined by a write into what another
 *     chain reads (reused scratch) or by a view; one part for one thread
 *     or a node that uses scratch;
 *   - the CPU device (2 and 4 threads) on a split of norms, element-wise
 *     nodes (a run of two independent chains among them) and those
 *     matmuls, an 18 MB matrix (cut into parts of at most 1 MB), then a
 *     residual norm into two matmuls,
 *     run many times: every output bit for bit equal to the nodes run one
 *     by one on one thread.
 */
#include <math.h>
#include <stdatomic.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "devices/cpu/cpu_ops.h"
#include "devices/cpu/cpu_solo.h"
#include "devices/cpu/quant_dot.h"
#include "het/device.h"
#include "het/graph.h"
#include "sched/device_impl.h"
#include "testutil.h"

#define K   1024
#define MAX_NODES 16

/* A tensor with its own buffer (freed by the test's end). */
static void *bufs[64];
static int n_bufs;

static void *test_alloc(size_t n)
{
    void *p = aligned_alloc(64, (n + 63) & ~(size_t)63);
    memset(p, 0, n);
    bufs[n_bufs++] = p;
    return p;
}

static void weight_init(struct het_tensor *w, enum het_type type, int64_t n, const char *name)
{
    const int64_t ne[2] = { K, n };
    het_tensor_init(w, type, 2, ne);
    w->data = test_alloc(het_nbytes(w));
    float row[K];
    for (int64_t r = 0; r < n; r++) {
        het_test_fill_normal(row, K, 1.0f);
        het_quantize_row(type, row, (uint8_t *)w->data + r * w->nb[1], K);
    }
    w->flags |= HET_TENSOR_FLAG_WEIGHT;
    snprintf(w->name, sizeof w->name, "%s", name);
}

/* One row of K random floats; strided: a view of every other float of a
 * buffer twice the size. */
static void row_init(struct het_tensor *t, bool strided)
{
    const int64_t ne[2] = { K, 1 };
    het_tensor_init(t, HET_TYPE_F32, 2, ne);
    if (strided) {
        t->nb[0] = 2 * sizeof(float);
        t->nb[1] = t->nb[2] = t->nb[3] = 2 * sizeof(float) * K;
    }
    t->data = test_alloc(t->nb[1]);
    het_test_fill_normal(t->data, strided ? 2 * K : K, 1.0f);
}

/* dst = a x b; dst rows strided (nb0 = 2 floats) when strided */
static void mm_init(struct het_tensor *d, struct het_tensor *a, struct het_tensor *b, bool strided)
{
    const int64_t ne[2] = { a->ne[1], b->ne[1] };
    het_tensor_init(d, HET_TYPE_F32, 2, ne);
    if (strided) {
        d->nb[0] = 2 * sizeof(float);
        d->nb[1] = d->nb[0] * (size_t)ne[0];
        d->nb[2] = d->nb[3] = d->nb[1] * (size_t)ne[1];
    }
    d->data = test_alloc(het_nbytes(d));
    d->op = HET_OP_MUL_MAT;
    d->src[0] = a;
    d->src[1] = b;
    snprintf(d->name, sizeof d->name, "mm %.40s", a->name);
}

/* Every output of nodes[0..n) run one by one with one thread. */
static void run_alone(struct het_tensor *const *nodes, int n, enum het_cpu_isa isa, uint8_t **out)
{
    for (int i = 0; i < n; i++) {
        const size_t ws = het_cpu_work_size(nodes[i], 1, false, 0);
        void *wd = ws ? aligned_alloc(64, (ws + 63) & ~(size_t)63) : NULL;
        const struct het_compute_params p = { .ith = 0, .nth = 1, .wdata = wd, .wsize = ws, .isa = isa };
        enum het_status st = het_cpu_compute(&p, nodes[i]);
        CHECK(st == HET_OK, "%s alone: %s", nodes[i]->name, het_status_name(st));
        free(wd);
        if (out) memcpy(out[i], nodes[i]->data, het_nbytes(nodes[i]));
    }
}

static void poison(struct het_tensor *const *nodes, int n)
{
    for (int i = 0; i < n; i++) memset(nodes[i]->data, 0xff, het_nbytes(nodes[i]));
}

/* het_cpu_mul_mat_group (group), or het_cpu_compute_nodes, over
 * nodes[0..n) in one parallel region of nth threads (sharing parts, or the
 * static split); late (sharing parts): thread 0 starts only once the others
 * have returned, so they take its run's parts, part 0 first among them.
 * Returns the count every thread got (-1 if they disagreed). */
static int run_region(struct het_tensor *const *nodes, int n, int nth, enum het_cpu_isa isa, bool shared, bool group,
                      bool late)
{
    size_t ws = 0;
    for (int i = 0; i < n; i++) {
        const size_t w = het_cpu_work_size(nodes[i], nth, false, 0);
        if (w > ws) ws = w;
    }
    void *wd = ws ? aligned_alloc(64, (ws + 63) & ~(size_t)63) : NULL;
    struct het_cpu_sync sync;
    het_cpu_sync_init(&sync);
    int got[8] = { 0 };
    enum het_status sts[8] = { HET_OK };
    _Atomic int returned = 0;
#pragma omp parallel num_threads(nth)
    {
        struct het_cpu_worker w;
        het_cpu_worker_init(&w, &sync);
        const int ith = omp_get_thread_num();
        const struct het_compute_params p = { .ith = ith, .nth = omp_get_num_threads(), .wdata = wd, .wsize = ws,
                                              .isa = isa, .worker = shared ? &w : NULL };
        if (late && shared && ith == 0)
            while (atomic_load(&returned) < p.nth - 1) {}
        got[ith] = group ? het_cpu_mul_mat_group(&p, nodes, n, NULL, &sts[ith]) : het_cpu_compute_nodes(&p, nodes, n, &sts[ith]);
        if (ith != 0) atomic_fetch_add(&returned, 1);
    }
    free(wd);
    for (int i = 0; i < nth; i++) CHECK(sts[i] == HET_OK, "thread %d: %s", i, het_status_name(sts[i]));
    for (int i = 1; i < nth; i++)
        if (got[i] != got[0]) return -1;
    return got[0];
}

static int run_group(struct het_tensor *const *nodes, int n, int nth, enum het_cpu_isa isa, bool shared)
{
    return run_region(nodes, n, nth, isa, shared, true, false);
}

static int run_nodes(struct het_tensor *const *nodes, int n, int nth, enum het_cpu_isa isa, bool shared)
{
    return run_region(nodes, n, nth, isa, shared, false, false);
}

/* The whole list nodes[0..n), run_region over what is left until none is:
 * returns how many nodes the first call ran. */
static int run_list(struct het_tensor *const *nodes, int n, int nth, enum het_cpu_isa isa, bool shared, bool group,
                    bool late)
{
    int first = 0;
    for (int i = 0; i < n;) {
        const int got = run_region(nodes + i, n - i, nth, isa, shared, group, late);
        CHECK(got >= 1, "%s: from node %d: ran %d", het_cpu_isa_name(isa), i, got);
        if (i == 0) first = got;
        i += got >= 1 ? got : 1;
    }
    return first;
}

static int count_differ(struct het_tensor *const *nodes, int n, uint8_t **want)
{
    int bad = 0;
    for (int i = 0; i < n; i++) bad += memcmp(nodes[i]->data, want[i], het_nbytes(nodes[i])) != 0;
    return bad;
}

static void test_group(enum het_cpu_isa isa)
{
    n_bufs = 0;
    /* b: one row of K floats, every other float of a buffer (strided view) */
    struct het_tensor b, b2, bm;
    const int64_t bmne[2] = { K, 2 };
    row_init(&b, true);
    row_init(&b2, false);
    het_tensor_init(&bm, HET_TYPE_F32, 2, bmne);
    bm.data = test_alloc(het_nbytes(&bm));
    het_test_fill_normal(bm.data, 2 * K, 1.0f);

    struct het_tensor w[6], d[8];
    weight_init(&w[0], HET_TYPE_Q4_K, 301, "wq");
    weight_init(&w[1], HET_TYPE_Q6_K, 67, "wk");
    weight_init(&w[2], HET_TYPE_Q4_0, 290, "wv"); /* enough panels to be cut by rows with 3 threads */
    weight_init(&w[3], HET_TYPE_Q5_1, 45, "wx");
    weight_init(&w[4], HET_TYPE_Q8_0, 99, "w8");
    weight_init(&w[5], HET_TYPE_Q4_0, 77, "wo");
    /* load-time panels on the first and third, as the device makes them */
    void *packed[2] = { NULL, NULL };
    for (int i = 0, j = 0; i < 3; i += 2, j++) {
        const size_t n = het_cpu_mul_mat_repack_size(&w[i], isa);
        if (!n) continue;
        packed[j] = aligned_alloc(64, (n + 63) & ~(size_t)63);
        CHECK(het_cpu_mul_mat_repack(&w[i], isa, packed[j], n) == HET_OK, "repack %s", w[i].name);
        w[i].extra = packed[j];
    }
    for (int i = 0; i < 5; i++) mm_init(&d[i], &w[i], &b, i == 1);
    mm_init(&d[5], &w[5], &b2, false); /* another b */
    mm_init(&d[6], &w[5], &bm, false); /* two rows: no group */
    mm_init(&d[7], &w[2], &bm, false);

    struct het_tensor *nodes[8];
    for (int i = 0; i < 8; i++) nodes[i] = &d[i];
    uint8_t *want[8];
    for (int i = 0; i < 8; i++) want[i] = malloc(het_nbytes(&d[i]));
    poison(nodes, 8); /* the gaps of strided rows too */
    run_alone(nodes, 8, isa, want);

    for (int nth = 2; nth <= 3; nth++) {
        for (int shared = 0; shared < 2; shared++) {
            /* q4_K, q6_K, q4_0, q5_1 share a layout; q8_0's has the block sums */
            poison(nodes, 8);
            int got = run_group(nodes, 8, nth, isa, shared);
            CHECK(got == 4, "%s nth=%d: group of %d, want 4", het_cpu_isa_name(isa), nth, got);
            CHECK(count_differ(nodes, 4, want) == 0, "%s nth=%d shared=%d: group outputs differ from alone",
                  het_cpu_isa_name(isa), nth, shared);
            got = run_group(nodes + 4, 4, nth, isa, shared); /* q8_0, then another b */
            CHECK(got == 1, "%s nth=%d: q8_0 then another b: group of %d, want 1", het_cpu_isa_name(isa), nth, got);
            got = run_group(nodes + 5, 3, nth, isa, shared);
            CHECK(got == 1, "%s nth=%d: b of another tensor: group of %d", het_cpu_isa_name(isa), nth, got);
            got = run_group(nodes + 6, 2, nth, isa, shared);
            CHECK(got == 1, "%s nth=%d: b of two rows: group of %d", het_cpu_isa_name(isa), nth, got);
            got = run_group(nodes + 7, 1, nth, isa, shared);
            CHECK(got == 1, "%s nth=%d: last node: %d", het_cpu_isa_name(isa), nth, got);
            CHECK(count_differ(nodes + 4, 4, want + 4) == 0, "%s nth=%d shared=%d: single outputs differ",
                  het_cpu_isa_name(isa), nth, shared);
            /* the whole list, a group at a time */
            poison(nodes, 8);
            run_list(nodes, 8, nth, isa, shared, true, false);
            CHECK(count_differ(nodes, 8, want) == 0, "%s nth=%d shared=%d: outputs differ", het_cpu_isa_name(isa),
                  nth, shared);
        }
    }
    /* a member whose output is another member's weight is not taken */
    struct het_tensor ov = d[1];
    ov.data = w[0].data;
    struct het_tensor *ovn[2] = { &d[0], &ov };
    CHECK(run_group(ovn, 2, 2, isa, true) == 1, "an output over another member's weights joined the group");
    ov.data = (uint8_t *)b.data + 64;
    CHECK(run_group(ovn, 2, 2, isa, true) == 1, "an output over the shared b joined the group");

    for (int i = 0; i < 8; i++) free(want[i]);
    for (int i = 0; i < 6; i++) w[i].extra = NULL;
    free(packed[0]);
    free(packed[1]);
    for (int i = 0; i < n_bufs; i++) free(bufs[i]);
    n_bufs = 0;
}

/* A prefill's matmuls on one b of many rows (the wide kernels where the
 * level has them): members of one activation layout (q4_K, q6_K) share b's
 * rows, quantised and packed once, and their parts run as one step; q4_0
 * (another layout) stops the group. Outputs bit for bit those of each node
 * alone, b strided, a dst strided, 2 and 3 threads sharing parts (one run
 * with thread 0 late, so the others take its parts) or split statically. */
static void test_group_wide(enum het_cpu_isa isa)
{
    n_bufs = 0;
    enum { M = 40 };
    struct het_tensor b, w[4], d[4];
    const int64_t bne[2] = { K, M };
    het_tensor_init(&b, HET_TYPE_F32, 2, bne);
    b.nb[1] = (K + 16) * sizeof(float); /* rows apart */
    b.nb[2] = b.nb[3] = b.nb[1] * M;
    b.data = test_alloc(b.nb[2]);
    het_test_fill_normal(b.data, (int64_t)(b.nb[2] / sizeof(float)), 1.0f);
    /* enough panels each for 3 threads to cut them by panels (else a
     * member's parts cut M, and it runs alone) */
    weight_init(&w[0], HET_TYPE_Q4_K, 517, "wq");
    weight_init(&w[1], HET_TYPE_Q6_K, 389, "wk");
    weight_init(&w[2], HET_TYPE_Q4_K, 400, "wv");
    weight_init(&w[3], HET_TYPE_Q4_0, 290, "wo");
    struct het_tensor *nodes[4];
    uint8_t *want[4];
    for (int i = 0; i < 4; i++) {
        mm_init(&d[i], &w[i], &b, i == 1);
        nodes[i] = &d[i];
    }
    for (int i = 0; i < 4; i++) want[i] = malloc(het_nbytes(&d[i]));
    poison(nodes, 4);
    run_alone(nodes, 4, isa, want);
    int first = -1;
    for (int nth = 2; nth <= 3; nth++)
        for (int shared = 0; shared < 2; shared++)
            for (int late = 0; late <= shared; late++) {
                poison(nodes, 4);
                const int got = run_list(nodes, 4, nth, isa, shared, true, late);
                CHECK(count_differ(nodes, 4, want) == 0, "%s nth=%d shared=%d late=%d: wide group outputs differ",
                      het_cpu_isa_name(isa), nth, shared, late);
                CHECK(got <= 3, "%s: q4_0 joined the K-quants' group", het_cpu_isa_name(isa));
                if (first < 0) first = got;
                CHECK(got == first, "%s nth=%d: a group of %d, another of %d", het_cpu_isa_name(isa), nth, got, first);
            }
    /* the amx level packs the K-quants' rows one way: all three join */
    if (isa == HET_CPU_ISA_AMX) CHECK(first == 3, "amx: wide group of %d, want 3", first);
    for (int i = 0; i < 4; i++) free(want[i]);
    for (int i = 0; i < n_bufs; i++) free(bufs[i]);
    n_bufs = 0;
}

/* The residual norm before a prefill's matmuls (b of 40 rows): where the
 * level has wide kernels, the step that prepares b's rows computes them
 * from the ADD's inputs and stores the sum, the norm's and the gain's
 * outputs as it goes; every output bit for bit the nodes' alone, the norm's
 * left alone when the MUL is its only reader, 2 and 3 threads sharing
 * parts (thread 0 late once) or split statically. */
static void test_residual_norm_wide(enum het_cpu_isa isa)
{
    n_bufs = 0;
    enum { M = 40 };
    struct het_tensor a, b, gain, sum, norm, h, w[2], d[2];
    const int64_t ne[2] = { K, M }, ge[2] = { K, 1 };
    het_tensor_init(&a, HET_TYPE_F32, 2, ne);
    a.nb[1] = (K + 8) * sizeof(float); /* rows apart */
    a.nb[2] = a.nb[3] = a.nb[1] * M;
    a.data = test_alloc(a.nb[2]);
    het_test_fill_normal(a.data, (int64_t)(a.nb[2] / sizeof(float)), 1.0f);
    het_tensor_init(&b, HET_TYPE_F32, 2, ne);
    b.data = test_alloc(het_nbytes(&b));
    het_test_fill_normal(b.data, K * M, 1.0f);
    het_tensor_init(&gain, HET_TYPE_F32, 2, ge);
    gain.data = test_alloc(het_nbytes(&gain));
    het_test_fill_normal(gain.data, K, 1.0f);
    struct het_tensor *outs[3] = { &sum, &norm, &h };
    const enum het_op ops[3] = { HET_OP_ADD, HET_OP_RMS_NORM, HET_OP_MUL };
    const char *names[3] = { "sum", "norm", "h" };
    for (int i = 0; i < 3; i++) {
        het_tensor_init(outs[i], HET_TYPE_F32, 2, ne);
        outs[i]->data = test_alloc(het_nbytes(outs[i]));
        outs[i]->op = ops[i];
        snprintf(outs[i]->name, sizeof outs[i]->name, "%s", names[i]);
    }
    sum.src[0] = &a;
    sum.src[1] = &b;
    norm.src[0] = &sum;
    const float eps = 1e-6f;
    memcpy(&norm.op_params[0], &eps, sizeof eps);
    h.src[0] = &norm;
    h.src[1] = &gain;
    weight_init(&w[0], HET_TYPE_Q4_K, 517, "wg");
    weight_init(&w[1], HET_TYPE_Q6_K, 389, "wu");
    for (int i = 0; i < 2; i++) mm_init(&d[i], &w[i], &h, i == 1);
    struct het_tensor *nodes[5] = { &sum, &norm, &h, &d[0], &d[1] };
    uint8_t *want[5];
    for (int i = 0; i < 5; i++) want[i] = malloc(het_nbytes(nodes[i]));
    poison(nodes, 5);
    run_alone(nodes, 5, isa, want);
    int first = -1;
    for (int form = 0; form < 2; form++) {
        norm.flags = form ? HET_TENSOR_FLAG_ONE_READER : 0; /* 1: the norm's output not stored */
        for (int nth = 2; nth <= 3; nth++)
            for (int shared = 0; shared < 2; shared++)
                for (int late = 0; late <= shared; late++) {
                    poison(nodes, 5);
                    const int got = run_list(nodes, 5, nth, isa, shared, false, late);
                    /* form 1: the norm's output need not be written, fused or not
                     * (norm_chain.c leaves it too) */
                    int bad = 0;
                    for (int i = 0; i < 5; i++)
                        if (!(i == 1 && form)) bad += memcmp(nodes[i]->data, want[i], het_nbytes(nodes[i])) != 0;
                    if (form && got == 5) bad += ((uint8_t *)norm.data)[0] != 0xff; /* fused: left alone */
                    CHECK(bad == 0, "%s form %d nth=%d shared=%d late=%d (ran %d at once): %d outputs differ",
                          het_cpu_isa_name(isa), form, nth, shared, late, got, bad);
                    if (first < 0) first = got;
                    CHECK(got == first, "%s: ran %d nodes at once, another time %d", het_cpu_isa_name(isa), got, first);
                }
    }
    if (isa == HET_CPU_ISA_AMX) CHECK(first == 5, "amx: the residual norm and both matmuls one step: %d", first);
    norm.flags = 0;
    for (int i = 0; i < 5; i++) free(want[i]);
    for (int i = 0; i < n_bufs; i++) free(bufs[i]);
    n_bufs = 0;
}

/* A decode layer's shape: norm, gain, three matmuls of one row, a q8_0
 * matmul, then small nodes over their outputs. */
/* A small F32 node over its own buffer of n floats (src0, src1 may be NULL). */
static void small_node(struct het_tensor *t, enum het_op op, int64_t n, struct het_tensor *s0,
                       struct het_tensor *s1, const char *name)
{
    const int64_t ne[2] = { n, 1 };
    het_tensor_init(t, HET_TYPE_F32, 2, ne);
    t->data = test_alloc(het_nbytes(t));
    t->op = op;
    t->src[0] = s0;
    t->src[1] = s1;
    snprintf(t->name, sizeof t->name, "%s", name);
}

static void test_solo_partition(void)
{
    n_bufs = 0;
    struct het_tensor x, y, z, g, a, b, c, d, v;
    small_node(&x, HET_OP_NONE, 128, NULL, NULL, "x");
    small_node(&y, HET_OP_NONE, 64, NULL, NULL, "y");
    small_node(&z, HET_OP_NONE, 32, NULL, NULL, "z");
    small_node(&g, HET_OP_NONE, 128, NULL, NULL, "gain");
    small_node(&a, HET_OP_RMS_NORM, 128, &x, NULL, "a");
    small_node(&b, HET_OP_MUL, 128, &a, &g, "b");     /* a -> b: one chain */
    small_node(&c, HET_OP_RMS_NORM, 64, &y, NULL, "c");
    small_node(&d, HET_OP_CPY, 32, &z, NULL, "d");
    struct het_tensor *run[] = { &a, &c, &b, &d };
    uint8_t part[4];
    int np = het_cpu_solo_partition(run, 4, 2, part);
    CHECK(np == 2 && part[0] == part[2] && (part[1] != part[0] || part[3] != part[0]),
          "three chains in two parts: %d parts, %d %d %d %d", np, part[0], part[1], part[2], part[3]);
    np = het_cpu_solo_partition(run, 4, 4, part);
    CHECK(np == 3 && part[0] == part[2] && part[1] != part[0] && part[3] != part[0] && part[1] != part[3],
          "three chains in three parts: %d parts, %d %d %d %d", np, part[0], part[1], part[2], part[3]);
    np = het_cpu_solo_partition(run, 4, 1, part);
    CHECK(np == 1 && !part[0] && !part[1] && !part[2] && !part[3], "one thread: %d parts", np);

    /* c writes where b reads (scratch reused): c joins a and b */
    void *c_own = c.data;
    c.data = (char *)a.data + 16;
    np = het_cpu_solo_partition(run, 4, 4, part);
    CHECK(np == 2 && part[1] == part[0] && part[2] == part[0] && part[3] != part[0],
          "a write into another chain's input: %d parts, %d %d %d %d", np, part[0], part[1], part[2], part[3]);
    c.data = c_own;
    /* d reads a view of b: d joins a and b */
    v = b;
    v.op = HET_OP_VIEW;
    v.ne[0] = 32;
    v.data = (char *)b.data + 64 * sizeof(float);
    d.src[0] = &v;
    np = het_cpu_solo_partition(run, 4, 4, part);
    CHECK(np == 2 && part[3] == part[0] && part[2] == part[0] && part[1] != part[0],
          "a read of a view of another chain's output: %d parts, %d %d %d %d", np, part[0], part[1], part[2], part[3]);
    d.src[0] = &z;
    /* a node with kernel scratch: one part */
    struct het_tensor att = c;
    att.op = HET_OP_ATTN;
    run[1] = &att;
    np = het_cpu_solo_partition(run, 4, 4, part);
    CHECK(np == 1 && !part[0] && !part[1] && !part[2] && !part[3], "attention in the run: %d parts", np);
    for (int i = 0; i < n_bufs; i++) free(bufs[i]);
    n_bufs = 0;
}

/* The residual norm (residual_norm.c): sum = a + b, its RMS_NORM, times a
 * gain, then three matmuls of that row, as one step; against the nodes run
 * one by one: every output the step stores bit for bit, what it need not
 * store left alone, and the cases it must refuse. */
static void test_residual_norm(enum het_cpu_isa isa)
{
    n_bufs = 0;
    struct het_tensor a, b, gain, sum, norm, h, w[4], d[4];
    row_init(&a, true); /* a strided view: every other float */
    row_init(&b, false);
    row_init(&gain, false);
    small_node(&sum, HET_OP_ADD, K, &a, &b, "sum");
    small_node(&norm, HET_OP_RMS_NORM, K, &sum, NULL, "norm");
    const float eps = 1e-6f;
    memcpy(&norm.op_params[0], &eps, sizeof eps);
    small_node(&h, HET_OP_MUL, K, &norm, &gain, "h");
    weight_init(&w[0], HET_TYPE_Q4_0, 301, "wq");
    weight_init(&w[1], HET_TYPE_Q4_K, 67, "wk");
    weight_init(&w[2], HET_TYPE_Q6_K, 290, "wv");
    weight_init(&w[3], HET_TYPE_Q8_0, 45, "w8"); /* another activation layout: not in the group */
    void *packed = NULL;
    const size_t pn = het_cpu_mul_mat_repack_size(&w[0], isa);
    if (pn) {
        packed = aligned_alloc(64, (pn + 63) & ~(size_t)63);
        CHECK(het_cpu_mul_mat_repack(&w[0], isa, packed, pn) == HET_OK, "repack wq");
        w[0].extra = packed;
    }
    for (int i = 0; i < 4; i++) mm_init(&d[i], &w[i], &h, i == 1);
    struct het_tensor *nodes[7] = { &sum, &norm, &h, &d[0], &d[1], &d[2], &d[3] };
    uint8_t *want[7];
    for (int i = 0; i < 7; i++) want[i] = malloc(het_nbytes(nodes[i]));
    poison(nodes, 7);
    run_alone(nodes, 7, isa, want);

    struct het_cpu_residual_norm rn;
    CHECK(het_cpu_fused_len(nodes, 7) == 4 && het_cpu_residual_norm_find(nodes, 7, &rn) == 3 && rn.y == &h &&
              rn.norm_out == &norm,
          "the chain is not found");
    for (int form = 0; form < 3; form++) {
        /* 0: every output stored; 1: the norm's only reader is the MUL (not
         * stored); 2: also the matmuls of the group are all h's readers */
        norm.flags = form >= 1 ? HET_TENSOR_FLAG_ONE_READER : 0;
        h.n_readers = form == 2 ? 3 : 0;
        for (int nth = 1; nth <= 3; nth++) {
            for (int shared = 0; shared < 2; shared++) {
                poison(nodes, 7);
                const int got = run_nodes(nodes, 7, nth, isa, shared);
                CHECK(got == 6, "%s form %d nth=%d: ran %d nodes, want 6", het_cpu_isa_name(isa), form, nth, got);
                int bad = 0;
                for (int i = 0; i < 6; i++) {
                    const bool stored = !(i == 1 && form >= 1) && !(i == 2 && form == 2);
                    if (stored) bad += memcmp(nodes[i]->data, want[i], het_nbytes(nodes[i])) != 0;
                    else        bad += ((uint8_t *)nodes[i]->data)[0] != 0xff; /* left alone */
                }
                CHECK(bad == 0, "%s form %d nth=%d shared=%d: %d outputs differ from the nodes alone",
                      het_cpu_isa_name(isa), form, nth, shared, bad);
            }
        }
    }
    /* thread 0 late: part 0 taken by a thread that made its activations in
     * another part first, and the outputs stored all the same */
    norm.flags = 0;
    h.n_readers = 0;
    poison(nodes, 7);
    CHECK(run_region(nodes, 7, 2, isa, true, false, true) == 6 && count_differ(nodes, 6, want) == 0,
          "%s: part 0 taken late: outputs differ from the nodes alone", het_cpu_isa_name(isa));
    /* h's readers counted as four, the q8_0 one not joining: h must be
     * stored, so the step does not run fused: the sum alone */
    h.n_readers = 4;
    d[3].src[1] = &h;
    CHECK(het_cpu_residual_norm_find(nodes, 7, &rn) == 3 && !rn.y && rn.y_readers == 4, "four readers not seen");
    poison(nodes, 7);
    CHECK(run_nodes(nodes, 7, 2, isa, true) == 1 && !memcmp(sum.data, want[0], het_nbytes(&sum)),
          "a reader left out of the group: not the sum alone");
    h.n_readers = 0;
    /* refused: the sum in place over its input; the gain's output over the
     * addend; a matmul's output over the addend; the sum strided */
    void *own = sum.data;
    sum.data = b.data;
    CHECK(het_cpu_fused_len(nodes, 7) == 1, "a sum over its own input fused");
    sum.data = own;
    own = h.data;
    h.data = b.data;
    CHECK(het_cpu_fused_len(nodes, 7) == 1, "the gain's output over the addend fused");
    h.data = own;
    own = d[0].data;
    d[0].data = b.data;
    CHECK(het_cpu_fused_len(nodes, 7) == 1, "a matmul's output over the addend fused");
    d[0].data = own;
    CHECK(het_cpu_fused_len(nodes, 7) == 4, "the chain is not found again");

    for (int i = 0; i < 7; i++) free(want[i]);
    free(packed);
    for (int i = 0; i < n_bufs; i++) free(bufs[i]);
    n_bufs = 0;
}

static void test_device(int threads)
{
    n_bufs = 0;
    het_error err = { 0 };
    het_device *dev = het_cpu_device_init(threads, &err);
    CHECK(dev != NULL, "cpu device: %s", err.msg);
    if (!dev) return;
    struct het_cpu_features f;
    het_cpu_features_detect(&f);
    const enum het_cpu_isa isa = het_cpu_isa_select(&f);

    const int64_t vne[2] = { K, 1 };
    struct het_tensor x, gain, norm, h, w[5], d[5], sum, prod, sw, xh;
    het_tensor_init(&x, HET_TYPE_F32, 2, vne);
    x.data = test_alloc(het_nbytes(&x));
    het_tensor_init(&gain, HET_TYPE_F32, 1, vne);
    gain.data = test_alloc(het_nbytes(&gain));
    het_tensor_init(&norm, HET_TYPE_F32, 2, vne);
    norm.data = test_alloc(het_nbytes(&norm));
    norm.op = HET_OP_RMS_NORM;
    norm.src[0] = &x;
    const float eps = 1e-6f;
    memcpy(&norm.op_params[0], &eps, sizeof eps);
    snprintf(norm.name, sizeof norm.name, "norm");
    het_tensor_init(&h, HET_TYPE_F32, 2, vne);
    h.data = test_alloc(het_nbytes(&h));
    h.op = HET_OP_MUL;
    h.src[0] = &norm;
    h.src[1] = &gain;
    snprintf(h.name, sizeof h.name, "h");
    /* xh = x as F16, beside the norm: a run of two chains, two parts */
    het_tensor_init(&xh, HET_TYPE_F16, 2, vne);
    xh.data = test_alloc(het_nbytes(&xh));
    xh.op = HET_OP_CPY;
    xh.src[0] = &x;
    snprintf(xh.name, sizeof xh.name, "xh");
    weight_init(&w[0], HET_TYPE_Q4_0, 1024, "wq");
    weight_init(&w[1], HET_TYPE_Q4_K, 512, "wk");
    weight_init(&w[2], HET_TYPE_Q6_K, 517, "wv");
    weight_init(&w[3], HET_TYPE_Q8_0, 1024, "wo");
    /* an output-layer-sized matrix (18 MB): cut into parts of at most 1 MB */
    weight_init(&w[4], HET_TYPE_Q4_0, 32771, "wout");
    for (int i = 0; i < 4; i++) mm_init(&d[i], &w[i], &h, i == 2);
    /* sum = d0 + d3, prod = d0 * d3 (1024 rows each), sw = swiglu(sum, prod) */
    const int64_t one[2] = { 1024, 1 };
    het_tensor_init(&sum, HET_TYPE_F32, 2, one);
    sum.data = test_alloc(het_nbytes(&sum));
    sum.op = HET_OP_ADD;
    sum.src[0] = &d[0];
    sum.src[1] = &d[3];
    snprintf(sum.name, sizeof sum.name, "sum");
    prod = sum;
    prod.data = test_alloc(het_nbytes(&prod));
    prod.op = HET_OP_MUL;
    snprintf(prod.name, sizeof prod.name, "prod");
    sw = sum;
    sw.data = test_alloc(het_nbytes(&sw));
    sw.op = HET_OP_SWIGLU;
    sw.src[0] = &sum;
    sw.src[1] = &prod;
    snprintf(sw.name, sizeof sw.name, "swiglu");
    mm_init(&d[4], &w[4], &sw, false);
    /* then a residual norm into two matmuls, one step (residual_norm.c):
     * r2 = d0 + d3, its norm times the gain, two matmuls of that */
    struct het_tensor r2 = sum, n2 = norm, h2 = h, d5, d6;
    r2.data = test_alloc(het_nbytes(&r2));
    snprintf(r2.name, sizeof r2.name, "r2");
    n2.data = test_alloc(het_nbytes(&n2));
    n2.src[0] = &r2;
    snprintf(n2.name, sizeof n2.name, "n2");
    h2.data = test_alloc(het_nbytes(&h2));
    h2.src[0] = &n2;
    snprintf(h2.name, sizeof h2.name, "h2");
    mm_init(&d5, &w[0], &h2, false);
    mm_init(&d6, &w[1], &h2, true);

    struct het_tensor *wl[5] = { &w[0], &w[1], &w[2], &w[3], &w[4] };
    CHECK(het_device_prepare_weights(dev, wl, 5, &err) == HET_OK, "prepare weights: %s", err.msg);
    struct het_tensor *nodes[] = { &norm, &xh, &h, &d[0], &d[1], &d[2], &d[3], &sum, &prod, &sw, &d[4],
                                   &r2, &n2, &h2, &d5, &d6 };
    CHECK(het_cpu_fused_len(nodes + 11, 5) == 4, "the residual norm is not fused");
    uint8_t part[3];
    CHECK(het_cpu_solo_partition(nodes, 3, threads, part) == 2 && part[0] == part[2] && part[1] != part[0],
          "the first run is not two parts");
    const int n = (int)(sizeof nodes / sizeof nodes[0]);
    size_t work = 0;
    for (int i = 0; i < n; i++) {
        CHECK(het_cpu_supports(nodes[i]), "%s not supported", nodes[i]->name);
        work += het_cpu_node_work(nodes[i]);
    }
    /* as the device decides: big enough on average to share between threads */
    CHECK(work / (size_t)n >= (64u << 10), "split too small to be shared: %zu bytes a node", work / (size_t)n);

    het_test_fill_normal(x.data, K, 2.0f);
    het_test_fill_normal(gain.data, K, 1.0f);
    uint8_t *want[MAX_NODES];
    for (int i = 0; i < n; i++) want[i] = malloc(het_nbytes(nodes[i]));
    poison(nodes, n);
    run_alone(nodes, n, isa, want);

    int failed = 0, runs_wrong = 0;
    for (int rep = 0; rep < 300; rep++) {
        poison(nodes, n);
        if (het_device_run_split(dev, nodes, n, &err) != HET_OK) {
            failed++;
            continue;
        }
        runs_wrong += count_differ(nodes, n, want) > 0;
    }
    CHECK(failed == 0, "%d threads: split failed %d times: %s", threads, failed, err.msg);
    CHECK(runs_wrong == 0, "%d threads: %d of 300 runs differ from the nodes run alone", threads, runs_wrong);
    /* a small node that fails inside a run of small nodes fails the split, naming it */
    struct het_tensor odd;
    const int64_t odd_ne[2] = { 1000, 1 }; /* does not divide prod's rows: invalid */
    het_tensor_init(&odd, HET_TYPE_F32, 2, odd_ne);
    odd.data = test_alloc(het_nbytes(&odd));
    prod.src[1] = &odd;
    const enum het_status st = het_device_run_split(dev, nodes, n, &err);
    CHECK(st == HET_ERR_INVALID && strstr(err.msg, "'prod'"), "a failing small node: %s (%s)", het_status_name(st),
          err.msg);
    prod.src[1] = &d[3];

    for (int i = 0; i < n; i++) free(want[i]);
    het_device_free(dev);
    for (int i = 0; i < n_bufs; i++) free(bufs[i]);
    n_bufs = 0;
}

int main(void)
{
    het_test_seed(4321);
    struct het_cpu_features f;
    het_cpu_features_detect(&f);
    const enum het_cpu_isa best = het_cpu_isa_select(&f);
    for (int lv = HET_CPU_ISA_SCALAR; lv <= (int)best; lv++) test_group((enum het_cpu_isa)lv);
    for (int lv = HET_CPU_ISA_SCALAR; lv <= (int)best; lv++) test_group_wide((enum het_cpu_isa)lv);
    for (int lv = HET_CPU_ISA_SCALAR; lv <= (int)best; lv++) test_residual_norm((enum het_cpu_isa)lv);
    for (int lv = HET_CPU_ISA_SCALAR; lv <= (int)best; lv++) test_residual_norm_wide((enum het_cpu_isa)lv);
    test_solo_partition();
    test_device(2);
    test_device(4);
    return het_test_finish();
}
