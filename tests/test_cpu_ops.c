/*
 * test_cpu_ops.c — every CPU kernel except matmul against a plain scalar
 * reference written here, on random data.
 *
 * Tensors are built by hand (struct het_tensor fields filled directly) with
 * odd sizes and non-contiguous layouts: permuted dims, gaps between
 * elements and between rows, transposed views. Every kernel runs the way
 * the CPU device runs it (inside one OpenMP parallel region, each thread
 * calling it with its ith) at 1, 2 and 3 threads and at each ISA level this
 * machine has. Output buffers are pre-filled with a byte pattern and padded
 * with guard zones; any byte a kernel must not touch (gaps, guards) is
 * checked to be unchanged.
 *
 * Tolerances (|got - want|, want from a double-precision reference unless
 * stated):
 *   add, mul, scale, cpy, cont, get_rows   exact (same float arithmetic)
 *   silu, swiglu, rms_norm                 1e-6 * |want| + 1e-30
 *   softmax                                2e-6 absolute (outputs in [0, 1])
 *   rope vs ggml-style float reference     5e-7 * max|x|; vs double formula 2e-5 (small positions)
 *   rms_norm -> mul [-> rope] in one pass  exact: the same bits as the three nodes one by one
 *   attention                              5e-5 absolute on O(1) outputs, nmse < 1e-9
 */
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "devices/cpu/cpu_ops.h"
#include "het/graph.h"
#include "testutil.h"

#define GUARD   64   /* guard bytes before and after every buffer */
#define PATTERN 0xA5 /* fill byte of output buffers                */

typedef enum het_status (*kernel_fn)(const struct het_compute_params *, struct het_tensor *);

/* ---------------------------------------------------------------------------
 * Test tensors: a het_tensor over its own malloc'd storage. */

struct tt {
    struct het_tensor t;
    unsigned char    *buf;  /* GUARD + size + GUARD bytes */
    size_t            size; /* bytes of the storage proper */
};

static size_t elem_size(enum het_type type)
{
    return type == HET_TYPE_F32 || type == HET_TYPE_I32 ? 4 : 2;
}

/* Layout: dim order[0] is innermost in memory; gap[k] extra elements after
 * each step of dim order[k] (gap[0] spaces the elements themselves). */
static void tt_make(struct tt *x, enum het_type type, const int64_t ne[4], const int order[4], const int gap[4])
{
    static const int ident[4] = { 0, 1, 2, 3 };
    static const int nogap[4] = { 0, 0, 0, 0 };
    if (!order) order = ident;
    if (!gap) gap = nogap;
    memset(&x->t, 0, sizeof x->t);
    x->t.type = type;
    const size_t es = elem_size(type);
    size_t stride = es * (size_t)(1 + gap[0]), end = 0;
    for (int k = 0; k < 4; k++) {
        int d = order[k];
        x->t.ne[d] = ne[d];
        if (k > 0) stride += es * (size_t)gap[k];
        x->t.nb[d] = stride;
        if (ne[d] > 0) end += (size_t)(ne[d] - 1) * stride;
        stride *= (size_t)ne[d];
    }
    x->size = end + es;
    x->buf = malloc(x->size + 2 * GUARD);
    memset(x->buf, PATTERN, x->size + 2 * GUARD);
    x->t.data = x->buf + GUARD;
    x->t.id = -1;
}

/* Quantised (or any) rows of K elements, rows row_gap bytes apart extra. */
static void tt_make_rows(struct tt *x, enum het_type type, const int64_t ne[4], size_t row_gap)
{
    const struct het_type_traits *tr = het_type_get_traits(type);
    memset(&x->t, 0, sizeof x->t);
    x->t.type = type;
    for (int d = 0; d < 4; d++) x->t.ne[d] = ne[d];
    x->t.nb[0] = tr->type_size;
    x->t.nb[1] = het_type_row_size(type, ne[0]) + row_gap;
    x->t.nb[2] = x->t.nb[1] * (size_t)ne[1];
    x->t.nb[3] = x->t.nb[2] * (size_t)ne[2];
    x->size = x->t.nb[3] * (size_t)ne[3];
    x->buf = malloc(x->size + 2 * GUARD);
    memset(x->buf, PATTERN, x->size + 2 * GUARD);
    x->t.data = x->buf + GUARD;
    x->t.id = -1;
}

static void tt_free(struct tt *x) { free(x->buf); x->buf = NULL; }

static int64_t tt_n(const struct tt *x) { return x->t.ne[0] * x->t.ne[1] * x->t.ne[2] * x->t.ne[3]; }

/* Address of logical element f (flat row-major index). */
static char *tt_ptr(const struct tt *x, int64_t f)
{
    char *p = x->t.data;
    for (int d = 0; d < 4; d++) {
        p += (f % x->t.ne[d]) * x->t.nb[d];
        f /= x->t.ne[d];
    }
    return p;
}

static float tt_get(const struct tt *x, int64_t f)
{
    const char *p = tt_ptr(x, f);
    uint16_t h;
    float v;
    switch (x->t.type) {
    case HET_TYPE_F16:  memcpy(&h, p, 2); return het_fp16_to_fp32(h);
    case HET_TYPE_BF16: memcpy(&h, p, 2); return het_bf16_to_fp32(h);
    case HET_TYPE_I32:  { int32_t i; memcpy(&i, p, 4); return (float)i; }
    default:            memcpy(&v, p, 4); return v;
    }
}

static void tt_set(struct tt *x, int64_t f, float v)
{
    char *p = tt_ptr(x, f);
    uint16_t h;
    switch (x->t.type) {
    case HET_TYPE_F16:  h = het_fp32_to_fp16(v); memcpy(p, &h, 2); break;
    case HET_TYPE_BF16: h = het_fp32_to_bf16(v); memcpy(p, &h, 2); break;
    case HET_TYPE_I32:  { int32_t i = (int32_t)v; memcpy(p, &i, 4); break; }
    default:            memcpy(p, &v, 4); break;
    }
}

static void tt_fill(struct tt *x, float scale)
{
    for (int64_t f = 0; f < tt_n(x); f++) tt_set(x, f, scale * het_test_rand_normal());
}

/* Logical contents as a dense float array (caller frees). */
static float *tt_dense(const struct tt *x)
{
    float *d = malloc((size_t)tt_n(x) * sizeof *d);
    for (int64_t f = 0; f < tt_n(x); f++) d[f] = tt_get(x, f);
    return d;
}

/* True when every byte that is not one of x's logical elements still holds
 * PATTERN (guards, gaps between elements and rows). */
static bool tt_untouched(const struct tt *x)
{
    size_t total = x->size + 2 * GUARD;
    unsigned char *own = calloc(total, 1);
    const size_t es = elem_size(x->t.type);
    for (int64_t f = 0; f < tt_n(x); f++) memset(own + (tt_ptr(x, f) - (char *)x->buf), 1, es);
    bool ok = true;
    for (size_t i = 0; i < total && ok; i++) ok = own[i] || x->buf[i] == PATTERN;
    free(own);
    return ok;
}

/* ---------------------------------------------------------------------------
 * Running a kernel the way the CPU device does. */

static int n_isa;
static enum het_cpu_isa isas[3];
static const int thread_counts[] = { 1, 2, 3 };
#define N_THREAD_COUNTS ((int)(sizeof thread_counts / sizeof thread_counts[0]))

/* the L2 size the attention cases run with (het_compute_params.l2_bytes) */
static size_t attn_l2;

/* shared: the threads take parts from one counter, as in the device (the
 * parts each thread runs differ from run to run); else the static split.
 * Each thread count runs with another stream hint (1: NTA, 2: T0, 3: T1),
 * so that the kernels instantiated per hint (decode attention's F16 rows)
 * all run against the reference at every ISA level. */
static enum het_status run_mode(kernel_fn fn, struct het_tensor *dst, int nth, enum het_cpu_isa isa, bool shared)
{
    size_t ws = dst->op == HET_OP_ATTN ? het_cpu_attn_work_size(dst, nth, attn_l2) : 0;
    void *w = ws ? malloc(ws) : NULL;
    enum het_status st[8];
    int got_nth = 0;
    struct het_cpu_sync sync;
    het_cpu_sync_init(&sync);
#pragma omp parallel num_threads(nth)
    {
        struct het_cpu_worker wk;
        het_cpu_worker_init(&wk, &sync);
        struct het_compute_params p = {
            .ith = omp_get_thread_num(), .nth = omp_get_num_threads(), .wdata = w, .wsize = ws, .isa = isa,
            .worker = shared ? &wk : NULL, .stream = (enum het_cpu_stream)((nth - 1) % HET_CPU_STREAM_COUNT),
            .l2_bytes = attn_l2,
        };
        if (p.ith == 0) got_nth = p.nth;
        st[p.ith] = p.nth == nth ? fn(&p, dst) : HET_ERR_DEVICE;
    }
    free(w);
    if (got_nth != nth) return HET_ERR_DEVICE;
    for (int i = 0; i < nth; i++)
        if (st[i] != HET_OK) return st[i];
    return HET_OK;
}

static enum het_status run(kernel_fn fn, struct het_tensor *dst, int nth, enum het_cpu_isa isa)
{
    return run_mode(fn, dst, nth, isa, true);
}

/* |got - want| <= rel*|want| + abs_tol for all n; prints the first miss. */
static bool close_enough(const char *what, const float *got, const double *want, int64_t n, double rel,
                         double abs_tol)
{
    for (int64_t i = 0; i < n; i++) {
        if ((double)got[i] == want[i]) continue; /* also equal infinities */
        double d = fabs((double)got[i] - want[i]);
        if (!(d <= rel * fabs(want[i]) + abs_tol)) {
            fprintf(stderr, "  %s: element %lld got %.9g want %.9g (diff %.3g)\n", what, (long long)i, got[i],
                    want[i], d);
            return false;
        }
    }
    return true;
}

/* Run fn on dst at every thread count and ISA level; compare with want. */
static void check_op(const char *what, kernel_fn fn, struct tt *dst, const double *want, double rel, double abs_tol)
{
    for (int ii = 0; ii < n_isa; ii++)
        for (int ti = 0; ti <= N_THREAD_COUNTS; ti++) {
            /* every thread count with shared parts, then 3 threads with the static split once */
            if (ti == N_THREAD_COUNTS && ii > 0) break;
            const bool shared = ti < N_THREAD_COUNTS;
            int nth = thread_counts[shared ? ti : N_THREAD_COUNTS - 1];
            memset(dst->buf, PATTERN, dst->size + 2 * GUARD);
            enum het_status st = run_mode(fn, &dst->t, nth, isas[ii], shared);
            CHECK(st == HET_OK, "%s: status %d (nth %d, %s)", what, st, nth, het_cpu_isa_name(isas[ii]));
            float *got = tt_dense(dst);
            CHECK(close_enough(what, got, want, tt_n(dst), rel, abs_tol), "%s: nth %d, %s", what, nth,
                  het_cpu_isa_name(isas[ii]));
            CHECK(tt_untouched(dst), "%s: wrote outside its elements (nth %d, %s)", what, nth,
                  het_cpu_isa_name(isas[ii]));
            free(got);
        }
}

static double *dvec(int64_t n) { return calloc((size_t)n, sizeof(double)); }

/* Flat index of (i0, i1, i2, i3) in a tensor of shape ne. */
static int64_t fidx(const int64_t ne[4], int64_t i0, int64_t i1, int64_t i2, int64_t i3)
{
    return i0 + ne[0] * (i1 + ne[1] * (i2 + ne[2] * i3));
}

/* ---------------------------------------------------------------------------
 * ADD, MUL */

static void test_binary_case(enum het_op op, const int64_t ne[4], const int64_t ne1[4], const int *order0,
                             const int *gap0, const int *gap1, bool in_place)
{
    struct tt a, b, d;
    tt_make(&a, HET_TYPE_F32, ne, order0, gap0);
    tt_make(&b, HET_TYPE_F32, ne1, NULL, gap1);
    tt_fill(&a, 1.0f);
    tt_fill(&b, 1.0f);
    float *va = tt_dense(&a), *vb = tt_dense(&b);
    double *want = dvec(tt_n(&a));
    for (int64_t i3 = 0; i3 < ne[3]; i3++)
        for (int64_t i2 = 0; i2 < ne[2]; i2++)
            for (int64_t i1 = 0; i1 < ne[1]; i1++)
                for (int64_t i0 = 0; i0 < ne[0]; i0++) {
                    float x = va[fidx(ne, i0, i1, i2, i3)];
                    float y = vb[fidx(ne1, i0 % ne1[0], i1 % ne1[1], i2 % ne1[2], i3 % ne1[3])];
                    want[fidx(ne, i0, i1, i2, i3)] = op == HET_OP_ADD ? x + y : x * y;
                }
    char what[96];
    snprintf(what, sizeof what, "%s %lldx%lldx%lld src1 %lldx%lldx%lld%s", op == HET_OP_ADD ? "add" : "mul",
             (long long)ne[0], (long long)ne[1], (long long)ne[2], (long long)ne1[0], (long long)ne1[1],
             (long long)ne1[2], in_place ? " in place" : "");
    kernel_fn fn = op == HET_OP_ADD ? het_cpu_add : het_cpu_mul;
    if (in_place) {
        /* dst is src0's storage: each run must start from fresh src0 data */
        for (int ii = 0; ii < n_isa; ii++)
            for (int ti = 0; ti < N_THREAD_COUNTS; ti++) {
                for (int64_t f = 0; f < tt_n(&a); f++) tt_set(&a, f, va[f]);
                struct het_tensor dt = a.t;
                dt.op = op;
                dt.src[0] = &a.t;
                dt.src[1] = &b.t;
                CHECK(run(fn, &dt, thread_counts[ti], isas[ii]) == HET_OK, "%s: status", what);
                float *got = tt_dense(&a);
                CHECK(close_enough(what, got, want, tt_n(&a), 0, 0), "%s: nth %d", what, thread_counts[ti]);
                CHECK(tt_untouched(&a), "%s: wrote outside", what);
                free(got);
            }
    } else {
        tt_make(&d, HET_TYPE_F32, ne, NULL, gap1);
        d.t.op = op;
        d.t.src[0] = &a.t;
        d.t.src[1] = &b.t;
        check_op(what, fn, &d, want, 0, 0);
        tt_free(&d);
    }
    free(va); free(vb); free(want);
    tt_free(&a); tt_free(&b);
}

static void test_binary(void)
{
    static const int64_t n0s[] = { 1, 7, 33, 172 };
    static const int transposed[4] = { 1, 0, 2, 3 };
    static const int gaps[4] = { 1, 3, 0, 2 };
    static const int rowgaps[4] = { 0, 5, 1, 0 };
    for (int op = 0; op < 2; op++) {
        enum het_op o = op ? HET_OP_MUL : HET_OP_ADD;
        for (int i = 0; i < 4; i++) {
            int64_t n0 = n0s[i];
            const int64_t ne[4] = { n0, 5, 3, 2 };
            const int64_t same[4] = { n0, 5, 3, 2 }, row[4] = { n0, 1, 1, 1 }, col[4] = { 1, 5, 1, 1 };
            const int64_t mixed[4] = { n0, 5, 1, 2 }, one[4] = { 1, 1, 1, 1 };
            test_binary_case(o, ne, same, NULL, NULL, NULL, false);
            test_binary_case(o, ne, row, transposed, gaps, rowgaps, false);
            test_binary_case(o, ne, col, NULL, rowgaps, gaps, false);
            test_binary_case(o, ne, mixed, gaps, NULL, rowgaps, false);
            test_binary_case(o, ne, one, NULL, NULL, NULL, false);
            test_binary_case(o, ne, row, NULL, NULL, NULL, true);
            test_binary_case(o, ne, mixed, transposed, rowgaps, NULL, true);
        }
    }
}

/* ---------------------------------------------------------------------------
 * SCALE, SILU, SWIGLU, RMS_NORM */

static double ref_silu(double x) { return x / (1.0 + exp(-x)); }

static void test_unary_case(enum het_op op, int64_t n0, const int *order, const int *gap, const int *gap_u,
                            bool in_place)
{
    const int64_t ne[4] = { n0, 6, 3, 1 };
    struct tt a, u, d;
    tt_make(&a, HET_TYPE_F32, ne, order, gap);
    tt_make(&u, HET_TYPE_F32, ne, NULL, gap_u);
    tt_fill(&a, 3.0f);
    tt_fill(&u, 1.0f);
    if (n0 > 4) { tt_set(&a, 0, -100.0f); tt_set(&a, 1, 40.0f); tt_set(&a, 2, -30.0f); tt_set(&a, 3, 0.0f); }
    float *va = tt_dense(&a), *vu = tt_dense(&u);
    const float s = 0.3711f, eps = 1e-5f;
    double *want = dvec(tt_n(&a));
    for (int64_t r = 0; r < tt_n(&a) / n0; r++) {
        double ss = 0;
        for (int64_t i = 0; i < n0; i++) ss += (double)va[r * n0 + i] * va[r * n0 + i];
        double inv = 1.0 / sqrt(ss / (double)n0 + eps);
        for (int64_t i = 0; i < n0; i++) {
            double x = va[r * n0 + i];
            double *w = &want[r * n0 + i];
            switch (op) {
            case HET_OP_SCALE:  *w = (float)(va[r * n0 + i] * s); break;
            case HET_OP_SILU:   *w = ref_silu(x); break;
            case HET_OP_SWIGLU: *w = ref_silu(x) * vu[r * n0 + i]; break;
            default:            *w = x * inv; break;
            }
        }
    }
    kernel_fn fn = op == HET_OP_SCALE ? het_cpu_scale : op == HET_OP_SILU ? het_cpu_silu
                 : op == HET_OP_SWIGLU ? het_cpu_swiglu : het_cpu_rms_norm;
    double rel = op == HET_OP_SCALE ? 0 : 1e-6, abs_tol = op == HET_OP_SCALE ? 0 : 1e-30;
    char what[64];
    snprintf(what, sizeof what, "%s n0=%lld%s%s%s", het_op_name(op), (long long)n0, order ? " strided" : "",
             gap_u ? " strided up" : "", in_place ? " in place" : "");
    if (in_place) {
        for (int ii = 0; ii < n_isa; ii++)
            for (int ti = 0; ti < N_THREAD_COUNTS; ti++) {
                for (int64_t f = 0; f < tt_n(&a); f++) tt_set(&a, f, va[f]);
                struct het_tensor dt = a.t;
                dt.op = op;
                dt.src[0] = &a.t;
                dt.src[1] = op == HET_OP_SWIGLU ? &u.t : NULL;
                het_set_op_param_f32(&dt, 0, op == HET_OP_SCALE ? s : eps);
                CHECK(run(fn, &dt, thread_counts[ti], isas[ii]) == HET_OK, "%s: status", what);
                float *got = tt_dense(&a);
                CHECK(close_enough(what, got, want, tt_n(&a), rel, abs_tol), "%s: nth %d %s", what,
                      thread_counts[ti], het_cpu_isa_name(isas[ii]));
                free(got);
            }
    } else {
        tt_make(&d, HET_TYPE_F32, ne, NULL, order ? gap : NULL);
        d.t.op = op;
        d.t.src[0] = &a.t;
        d.t.src[1] = op == HET_OP_SWIGLU ? &u.t : NULL;
        het_set_op_param_f32(&d.t, 0, op == HET_OP_SCALE ? s : eps);
        check_op(what, fn, &d, want, rel, abs_tol);
        tt_free(&d);
    }
    free(va); free(vu); free(want);
    tt_free(&a); tt_free(&u);
}

/* SWIGLU on the two halves of one fused gate|up tensor (rows 2*n_ff long). */
static void test_swiglu_halves(void)
{
    const int64_t n_ff = 45, n_tok = 5;
    const int64_t ne[4] = { 2 * n_ff, n_tok, 1, 1 }, half[4] = { n_ff, n_tok, 1, 1 };
    struct tt gu, d;
    tt_make(&gu, HET_TYPE_F32, ne, NULL, NULL);
    tt_fill(&gu, 2.0f);
    float *v = tt_dense(&gu);
    struct het_tensor g = gu.t, u = gu.t;
    g.ne[0] = u.ne[0] = n_ff;
    u.data = (char *)gu.t.data + n_ff * sizeof(float);
    double *want = dvec(n_ff * n_tok);
    for (int64_t t = 0; t < n_tok; t++)
        for (int64_t i = 0; i < n_ff; i++)
            want[t * n_ff + i] = ref_silu(v[t * 2 * n_ff + i]) * v[t * 2 * n_ff + n_ff + i];
    tt_make(&d, HET_TYPE_F32, half, NULL, NULL);
    d.t.op = HET_OP_SWIGLU;
    d.t.src[0] = &g;
    d.t.src[1] = &u;
    check_op("swiglu halves of gate|up", het_cpu_swiglu, &d, want, 1e-6, 1e-30);
    free(v); free(want);
    tt_free(&gu); tt_free(&d);
}

static void test_unary(void)
{
    static const int64_t n0s[] = { 1, 7, 33, 172, 1024 };
    static const int transposed[4] = { 1, 0, 2, 3 };
    static const int gaps[4] = { 2, 1, 3, 0 };
    static const enum het_op ops[] = { HET_OP_SCALE, HET_OP_SILU, HET_OP_SWIGLU, HET_OP_RMS_NORM };
    for (int o = 0; o < 4; o++)
        for (int i = 0; i < 5; i++) {
            test_unary_case(ops[o], n0s[i], NULL, NULL, NULL, false);
            test_unary_case(ops[o], n0s[i], transposed, gaps, gaps, false);
            test_unary_case(ops[o], n0s[i], NULL, NULL, gaps, false);
            test_unary_case(ops[o], n0s[i], NULL, gaps, NULL, true);
        }
    test_swiglu_halves();
}

/* ---------------------------------------------------------------------------
 * ROPE */

struct rope_case {
    int64_t hd, n_head, n_tok;
    int     n_dims, mode, max_pos;
    float   base, fscale;
    bool    permuted, in_place;
};

/* ggml's way: theta_i built by repeated float multiplication. */
static void rope_ref_float(const struct rope_case *c, const float *x, const int32_t *pos, double *out)
{
    const float theta_scale = powf(c->base, -2.0f / (float)c->n_dims);
    for (int64_t t = 0; t < c->n_tok; t++) {
        for (int64_t h = 0; h < c->n_head; h++) {
            const float *xr = x + (t * c->n_head + h) * c->hd;
            double *yr = out + (t * c->n_head + h) * c->hd;
            float theta = (float)pos[t];
            for (int i = 0; i < c->n_dims / 2; i++) {
                float ang = c->fscale * theta, cs = cosf(ang), sn = sinf(ang);
                theta *= theta_scale;
                int e0 = c->mode == HET_ROPE_NEOX ? i : 2 * i;
                int e1 = c->mode == HET_ROPE_NEOX ? i + c->n_dims / 2 : 2 * i + 1;
                float r0 = xr[e0] * cs - xr[e1] * sn, r1 = xr[e0] * sn + xr[e1] * cs;
                yr[e0] = r0;
                yr[e1] = r1;
            }
            for (int64_t e = c->n_dims; e < c->hd; e++) yr[e] = xr[e];
        }
    }
}

/* The formula in double. */
static void rope_ref_double(const struct rope_case *c, const float *x, const int32_t *pos, double *out)
{
    for (int64_t t = 0; t < c->n_tok; t++)
        for (int64_t h = 0; h < c->n_head; h++) {
            const float *xr = x + (t * c->n_head + h) * c->hd;
            double *yr = out + (t * c->n_head + h) * c->hd;
            for (int i = 0; i < c->n_dims / 2; i++) {
                double th = pos[t] * (double)c->fscale * pow(c->base, -2.0 * i / c->n_dims);
                int e0 = c->mode == HET_ROPE_NEOX ? i : 2 * i;
                int e1 = c->mode == HET_ROPE_NEOX ? i + c->n_dims / 2 : 2 * i + 1;
                yr[e0] = xr[e0] * cos(th) - xr[e1] * sin(th);
                yr[e1] = xr[e0] * sin(th) + xr[e1] * cos(th);
            }
            for (int64_t e = c->n_dims; e < c->hd; e++) yr[e] = xr[e];
        }
}

static void test_rope_case(const struct rope_case *c)
{
    const int64_t ne[4] = { c->hd, c->n_head, c->n_tok, 1 };
    const int64_t pne[4] = { c->n_tok, 1, 1, 1 };
    static const int perm_order[4] = { 0, 2, 1, 3 }; /* stored token-major inside head */
    static const int gaps[4] = { 0, 3, 1, 0 };
    struct tt x, pos, d;
    tt_make(&x, HET_TYPE_F32, ne, c->permuted ? perm_order : NULL, c->permuted ? gaps : NULL);
    tt_make(&pos, HET_TYPE_I32, pne, NULL, NULL);
    tt_fill(&x, 1.0f);
    int32_t *pv = malloc((size_t)c->n_tok * sizeof *pv);
    for (int64_t t = 0; t < c->n_tok; t++) {
        pv[t] = (int32_t)(het_test_rand_u64() % (uint64_t)(c->max_pos + 1));
        tt_set(&pos, t, (float)pv[t]);
    }
    float *vx = tt_dense(&x);
    double *want_f = dvec(tt_n(&x)), *want_d = dvec(tt_n(&x));
    rope_ref_float(c, vx, pv, want_f);
    rope_ref_double(c, vx, pv, want_d);
    float xmax = 0;
    for (int64_t i = 0; i < tt_n(&x); i++) xmax = fabsf(vx[i]) > xmax ? fabsf(vx[i]) : xmax;

    char what[128];
    snprintf(what, sizeof what, "rope %s hd=%lld n_dims=%d heads=%lld tok=%lld maxpos=%d%s%s",
             c->mode == HET_ROPE_NEOX ? "neox" : "normal", (long long)c->hd, c->n_dims, (long long)c->n_head,
             (long long)c->n_tok, c->max_pos, c->permuted ? " strided" : "", c->in_place ? " in place" : "");
    for (int ii = 0; ii < n_isa; ii++)
        for (int ti = 0; ti < N_THREAD_COUNTS; ti++) {
            struct het_tensor dt;
            if (c->in_place) {
                for (int64_t f = 0; f < tt_n(&x); f++) tt_set(&x, f, vx[f]);
                dt = x.t;
            } else {
                tt_make(&d, HET_TYPE_F32, ne, NULL, c->permuted ? gaps : NULL);
                dt = d.t;
            }
            dt.op = HET_OP_ROPE;
            dt.src[0] = &x.t;
            dt.src[1] = &pos.t;
            dt.op_params[0] = c->n_dims;
            dt.op_params[1] = c->mode;
            het_set_op_param_f32(&dt, 2, c->base);
            het_set_op_param_f32(&dt, 3, c->fscale);
            CHECK(run(het_cpu_rope, &dt, thread_counts[ti], isas[ii]) == HET_OK, "%s: status", what);
            struct tt *out = c->in_place ? &x : &d;
            float *got = tt_dense(out);
            CHECK(close_enough(what, got, want_f, tt_n(&x), 0, 5e-7 * xmax), "%s: vs float ref, nth %d",
                  what, thread_counts[ti]);
            if (c->max_pos <= 64)
                CHECK(close_enough(what, got, want_d, tt_n(&x), 0, 2e-5 * xmax), "%s: vs double ref, nth %d",
                      what, thread_counts[ti]);
            if (!c->in_place) {
                CHECK(tt_untouched(&d), "%s: wrote outside", what);
                tt_free(&d);
            }
            free(got);
        }
    free(pv); free(vx); free(want_f); free(want_d);
    tt_free(&x); tt_free(&pos);
}

static void test_rope(void)
{
    static const struct rope_case cases[] = {
        { 8, 8, 7, 8, HET_ROPE_NORMAL, 60, 10000.0f, 1.0f, false, false },
        { 8, 8, 7, 8, HET_ROPE_NEOX, 60, 10000.0f, 1.0f, true, false },
        { 64, 3, 5, 32, HET_ROPE_NORMAL, 50, 10000.0f, 1.0f, true, false },
        { 64, 3, 5, 32, HET_ROPE_NEOX, 50, 500000.0f, 0.25f, false, false },
        { 128, 16, 9, 128, HET_ROPE_NEOX, 4000, 1000000.0f, 1.0f, false, false },
        { 128, 16, 9, 128, HET_ROPE_NORMAL, 4000, 10000.0f, 1.0f, true, true },
        { 300, 2, 4, 260, HET_ROPE_NEOX, 40, 10000.0f, 1.0f, true, false },
        { 300, 2, 4, 260, HET_ROPE_NORMAL, 40, 10000.0f, 1.0f, false, true },
        { 20, 5, 1, 12, HET_ROPE_NEOX, 30, 10000.0f, 1.0f, false, false }, /* decode: split heads */
        { 20, 5, 1, 12, HET_ROPE_NORMAL, 3000, 10000.0f, 1.0f, true, false },
        { 6, 1, 3, 0, HET_ROPE_NORMAL, 10, 10000.0f, 1.0f, true, false },  /* no rotary dims */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) test_rope_case(&cases[i]);
}

/* ---------------------------------------------------------------------------
 * RMS_NORM -> MUL (gain) [-> ROPE] as one pass (het_cpu_norm_chain): bit for
 * bit the nodes run one by one, only the last node's storage written. */

struct chain_case {
    int64_t hd, n_head, n_tok;
    bool    per_head_gain; /* gain (hd, n_head) instead of (hd) */
    bool    rope, strided, in_place;
    int     mode;
};

static bool all_pattern(const struct tt *x)
{
    for (size_t i = 0; i < x->size + 2 * GUARD; i++)
        if (x->buf[i] != PATTERN) return false;
    return true;
}

static void chain_nodes(struct het_tensor *norm, struct het_tensor *mul, struct het_tensor *rope, struct tt *x,
                        struct tt *g, struct tt *pos, int mode, int64_t hd)
{
    norm->op = HET_OP_RMS_NORM;
    norm->src[0] = &x->t;
    het_set_op_param_f32(norm, 0, 1e-6f);
    mul->op = HET_OP_MUL;
    mul->src[0] = norm;
    mul->src[1] = &g->t;
    if (!rope) return;
    rope->op = HET_OP_ROPE;
    rope->src[0] = mul;
    rope->src[1] = &pos->t;
    rope->op_params[0] = (int)(hd & ~(int64_t)1);
    rope->op_params[1] = mode;
    het_set_op_param_f32(rope, 2, 1000000.0f);
    het_set_op_param_f32(rope, 3, 1.0f);
}

static void test_norm_chain_case(const struct chain_case *c)
{
    const int64_t ne[4] = { c->hd, c->n_head, c->n_tok, 1 };
    const int64_t gne[4] = { c->hd, c->per_head_gain ? c->n_head : 1, 1, 1 };
    const int64_t pne[4] = { c->n_tok, 1, 1, 1 };
    static const int perm[4] = { 0, 2, 1, 3 };
    static const int gaps[4] = { 1, 3, 2, 0 };
    struct tt x, g, pos, n1, m1, out, n2, m2;
    tt_make(&x, HET_TYPE_F32, ne, c->strided ? perm : NULL, c->strided ? gaps : NULL);
    tt_make(&g, HET_TYPE_F32, gne, NULL, c->strided ? gaps : NULL);
    tt_make(&pos, HET_TYPE_I32, pne, NULL, NULL);
    tt_fill(&x, 2.0f);
    tt_fill(&g, 1.0f);
    for (int64_t t = 0; t < c->n_tok; t++) tt_set(&pos, t, (float)(het_test_rand_u64() % 5000));
    float *vx = tt_dense(&x);
    char what[160];
    snprintf(what, sizeof what, "norm chain hd=%lld heads=%lld tok=%lld%s%s%s%s", (long long)c->hd,
             (long long)c->n_head, (long long)c->n_tok, c->per_head_gain ? " per-head gain" : "",
             c->rope ? (c->mode == HET_ROPE_NEOX ? " + rope neox" : " + rope normal") : "",
             c->strided ? " strided" : "", c->in_place ? " in place" : "");
    const int used_want = c->rope ? 3 : 2;
    for (int ii = 0; ii < n_isa; ii++) {
        /* the nodes one by one, one thread */
        for (int64_t f = 0; f < tt_n(&x); f++) tt_set(&x, f, vx[f]);
        tt_make(&n1, HET_TYPE_F32, ne, NULL, NULL);
        tt_make(&m1, HET_TYPE_F32, ne, NULL, NULL);
        tt_make(&out, HET_TYPE_F32, ne, NULL, c->strided ? gaps : NULL);
        struct het_tensor *mul1 = c->rope ? &m1.t : &out.t;
        chain_nodes(&n1.t, mul1, c->rope ? &out.t : NULL, &x, &g, &pos, c->mode, c->hd);
        CHECK(run(het_cpu_rms_norm, &n1.t, 1, isas[ii]) == HET_OK, "%s: norm", what);
        CHECK(run(het_cpu_mul, mul1, 1, isas[ii]) == HET_OK, "%s: mul", what);
        if (c->rope) CHECK(run(het_cpu_rope, &out.t, 1, isas[ii]) == HET_OK, "%s: rope", what);
        float *want = tt_dense(&out);
        tt_free(&n1); tt_free(&m1); tt_free(&out);
        for (int ti = 0; ti < N_THREAD_COUNTS; ti++) {
            const int nth = thread_counts[ti];
            for (int64_t f = 0; f < tt_n(&x); f++) tt_set(&x, f, vx[f]);
            tt_make(&n2, HET_TYPE_F32, ne, NULL, NULL);
            tt_make(&m2, HET_TYPE_F32, ne, NULL, NULL);
            struct het_tensor norm = n2.t, mul = m2.t, rope;
            struct tt *res = NULL;
            if (c->in_place) { /* the last node writes over x, element for element */
                if (c->rope) rope = x.t; else mul = x.t;
                res = &x;
            } else {
                tt_make(&out, HET_TYPE_F32, ne, NULL, c->strided ? gaps : NULL);
                if (c->rope) rope = out.t; else mul = out.t;
                res = &out;
            }
            chain_nodes(&norm, &mul, c->rope ? &rope : NULL, &x, &g, &pos, c->mode, c->hd);
            norm.flags = mul.flags = HET_TENSOR_FLAG_ONE_READER;
            struct het_tensor *nodes[4] = { &norm, &mul, &rope, &g.t };
            int used[8];
            enum het_status st[8];
            struct het_cpu_sync sync;
            het_cpu_sync_init(&sync);
#pragma omp parallel num_threads(nth)
            {
                struct het_cpu_worker wk;
                het_cpu_worker_init(&wk, &sync);
                const struct het_compute_params p = {
                    .ith = omp_get_thread_num(), .nth = omp_get_num_threads(), .isa = isas[ii], .worker = &wk,
                };
                used[p.ith] = het_cpu_norm_chain(&p, nodes, c->rope ? 4 : 2, &st[p.ith]);
            }
            for (int t = 0; t < nth; t++) {
                CHECK(used[t] == used_want, "%s: thread %d ran %d nodes as a chain, want %d (nth %d)", what, t,
                      used[t], used_want, nth);
                CHECK(used[t] == 0 || st[t] == HET_OK, "%s: status %d", what, st[t]);
            }
            float *got = tt_dense(res);
            CHECK(!memcmp(got, want, (size_t)tt_n(res) * sizeof *got), "%s: not the nodes' bits (nth %d, %s)",
                  what, nth, het_cpu_isa_name(isas[ii]));
            CHECK(tt_untouched(res), "%s: wrote outside its elements (nth %d)", what, nth);
            CHECK(all_pattern(&n2) && (c->rope ? all_pattern(&m2) : true), "%s: an inner node's storage written",
                  what);
            /* without the flag, or with the reader not the next node, there is no chain */
            norm.flags = 0;
            const struct het_compute_params p1 = { .ith = 0, .nth = 1, .isa = isas[ii] };
            enum het_status s1;
            CHECK(het_cpu_norm_chain(&p1, nodes, 2, &s1) == 0, "%s: a chain without ONE_READER", what);
            norm.flags = HET_TENSOR_FLAG_ONE_READER;
            struct het_tensor *swapped[2] = { &norm, &g.t };
            CHECK(het_cpu_norm_chain(&p1, swapped, 2, &s1) == 0, "%s: a chain without the mul", what);
            free(got);
            tt_free(&n2); tt_free(&m2);
            if (!c->in_place) tt_free(&out);
        }
        free(want);
    }
    free(vx);
    tt_free(&x); tt_free(&g); tt_free(&pos);
}

/* The last node's storage overlapping the norm's input other than element
 * for element: threads writing rows could change rows still to be read, so
 * there is no chain (the nodes run one by one). */
static void test_norm_chain_overlap(void)
{
    const int64_t ne[4] = { 16, 4, 3, 1 }, gne[4] = { 16, 1, 1, 1 };
    struct tt x, g, n;
    tt_make(&x, HET_TYPE_F32, ne, NULL, NULL);
    tt_make(&g, HET_TYPE_F32, gne, NULL, NULL);
    tt_make(&n, HET_TYPE_F32, ne, NULL, NULL);
    struct het_tensor norm = n.t, mul = x.t;
    mul.data = (char *)x.t.data + 16 * sizeof(float); /* one row on */
    mul.ne[2] = 2;
    norm.ne[2] = 2;
    struct het_tensor xv = x.t;
    xv.ne[2] = 2;
    chain_nodes(&norm, &mul, NULL, &(struct tt){ .t = xv }, &g, NULL, 0, 16);
    norm.src[0] = &xv;
    norm.flags = HET_TENSOR_FLAG_ONE_READER;
    struct het_tensor *nodes[2] = { &norm, &mul };
    const struct het_compute_params p = { .ith = 0, .nth = 1, .isa = HET_CPU_ISA_SCALAR };
    enum het_status st;
    CHECK(het_cpu_norm_chain(&p, nodes, 2, &st) == 0, "norm chain: output one row past its input was chained");
    mul.data = x.t.data; /* exactly in place: a chain */
    CHECK(het_cpu_norm_chain(&p, nodes, 2, &st) == 2 && st == HET_OK, "norm chain: in place not chained");
    tt_free(&x); tt_free(&g); tt_free(&n);
}

static void test_norm_chain(void)
{
    static const struct chain_case cases[] = {
        { 1024, 1, 7, false, false, false, false, 0 },           /* a layer's norm: rows of a token */
        { 37, 5, 3, true, false, true, false, 0 },
        { 64, 3, 5, false, false, false, true, 0 },
        { 128, 16, 9, false, true, false, false, HET_ROPE_NEOX }, /* qwen3's q */
        { 128, 8, 1, false, true, false, false, HET_ROPE_NEOX },  /* decode: heads split */
        { 20, 5, 4, true, true, true, false, HET_ROPE_NORMAL },
        { 33, 3, 6, false, true, true, true, HET_ROPE_NEOX },
        { 32, 2, 5, false, true, false, true, HET_ROPE_NORMAL },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) test_norm_chain_case(&cases[i]);
    test_norm_chain_overlap();
}

/* ---------------------------------------------------------------------------
 * SOFTMAX */

static void test_softmax_case(int64_t n0, int64_t n1, bool use_mask, int causal_past, bool strided)
{
    const int64_t ne[4] = { n0, n1, 3, 2 }, mne[4] = { n0, n1, 1, 1 };
    static const int transposed[4] = { 1, 0, 2, 3 };
    static const int gaps[4] = { 1, 2, 0, 1 };
    struct tt x, m, d;
    tt_make(&x, HET_TYPE_F32, ne, strided ? transposed : NULL, strided ? gaps : NULL);
    tt_fill(&x, 4.0f);
    if (use_mask) {
        tt_make(&m, HET_TYPE_F32, mne, NULL, strided ? gaps : NULL);
        for (int64_t f = 0; f < tt_n(&m); f++)
            tt_set(&m, f, het_test_rand_u64() % 4 == 0 ? -INFINITY : het_test_rand_normal());
        for (int64_t i = 0; i < n0; i++) tt_set(&m, (n1 - 1) * n0 + i, -INFINITY); /* last row fully masked */
    }
    const float scale = 0.37f;
    float *vx = tt_dense(&x), *vm = use_mask ? tt_dense(&m) : NULL;
    double *want = dvec(tt_n(&x)), *row = dvec(n0);
    for (int64_t r = 0; r < tt_n(&x) / n0; r++) {
        int64_t i1 = r % n1;
        double mx = -INFINITY, sum = 0;
        for (int64_t j = 0; j < n0; j++) {
            row[j] = (double)vx[r * n0 + j] * scale + (vm ? vm[i1 * n0 + j] : 0.0);
            if (causal_past >= 0 && j > i1 + causal_past) row[j] = -INFINITY;
            mx = row[j] > mx ? row[j] : mx;
        }
        for (int64_t j = 0; j < n0; j++) sum += mx == -INFINITY ? 0 : exp(row[j] - mx);
        for (int64_t j = 0; j < n0; j++) want[r * n0 + j] = sum > 0 ? exp(row[j] - mx) / sum : 0.0;
    }
    tt_make(&d, HET_TYPE_F32, ne, NULL, strided ? gaps : NULL);
    d.t.op = HET_OP_SOFTMAX;
    d.t.src[0] = &x.t;
    d.t.src[1] = use_mask ? &m.t : NULL;
    het_set_op_param_f32(&d.t, 0, scale);
    d.t.op_params[1] = causal_past;
    char what[96];
    snprintf(what, sizeof what, "softmax %lldx%lld mask=%d causal=%d%s", (long long)n0, (long long)n1, use_mask,
             causal_past, strided ? " strided" : "");
    check_op(what, het_cpu_softmax, &d, want, 0, 2e-6);
    free(vx); free(vm); free(want); free(row);
    tt_free(&x); tt_free(&d);
    if (use_mask) tt_free(&m);
}

static void test_softmax(void)
{
    static const int64_t n0s[] = { 1, 7, 33, 172 };
    for (int i = 0; i < 4; i++)
        for (int s = 0; s < 2; s++) {
            test_softmax_case(n0s[i], 5, false, -1, s);
            test_softmax_case(n0s[i], 5, true, -1, s);
            test_softmax_case(n0s[i], 6, false, 0, s);
            test_softmax_case(n0s[i], 4, true, 3, s);
        }
}

/* ---------------------------------------------------------------------------
 * CPY, CONT */

/* Reference conversion of one value into type t and back. */
static double round_to(enum het_type t, float v)
{
    if (t == HET_TYPE_F16) return het_fp16_to_fp32(het_fp32_to_fp16(v));
    if (t == HET_TYPE_BF16) return het_bf16_to_fp32(het_fp32_to_bf16(v));
    return v;
}

static void test_cpy_case(enum het_type ts, const int64_t ne_s[4], const int *order_s, const int *gap_s,
                          enum het_type td, const int64_t ne_d[4], const int *order_d, const int *gap_d,
                          bool cont)
{
    struct tt s, d;
    tt_make(&s, ts, ne_s, order_s, gap_s);
    tt_fill(&s, 10.0f);
    if (tt_n(&s) > 3) { tt_set(&s, 0, 70000.0f); tt_set(&s, 1, 1e-6f); tt_set(&s, 2, -3e-8f); }
    tt_make(&d, td, ne_d, order_d, gap_d);
    float *vs = tt_dense(&s);
    double *want = dvec(tt_n(&s));
    for (int64_t f = 0; f < tt_n(&s); f++) want[f] = round_to(td, vs[f]);
    d.t.op = cont ? HET_OP_CONT : HET_OP_CPY;
    d.t.src[0] = &s.t;
    struct het_tensor view = d.t; /* CPY: src1 is the view dst stands for */
    d.t.src[1] = cont ? NULL : &view;
    char what[96];
    snprintf(what, sizeof what, "%s %s(%lld,%lld,%lld) -> %s(%lld,%lld,%lld)", cont ? "cont" : "cpy",
             het_type_name(ts), (long long)ne_s[0], (long long)ne_s[1], (long long)ne_s[2], het_type_name(td),
             (long long)ne_d[0], (long long)ne_d[1], (long long)ne_d[2]);
    check_op(what, cont ? het_cpu_cont : het_cpu_cpy, &d, want, 0, 0);
    free(vs); free(want);
    tt_free(&s); tt_free(&d);
}

static void test_copy(void)
{
    static const int perm[4] = { 1, 2, 0, 3 }, transposed[4] = { 1, 0, 2, 3 }, vt[4] = { 2, 0, 1, 3 };
    static const int gaps[4] = { 1, 2, 0, 3 }, rowgap[4] = { 0, 7, 0, 0 };
    static const enum het_type types[] = { HET_TYPE_F32, HET_TYPE_F16, HET_TYPE_BF16 };
    const int64_t a[4] = { 33, 5, 4, 1 }, flat[4] = { 165, 4, 1, 1 }, b[4] = { 7, 172, 1, 2 };
    const int64_t c[4] = { 4, 7, 43, 2 };
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++) {
            enum het_type ts = types[i], td = types[j];
            test_cpy_case(ts, a, NULL, NULL, td, a, NULL, NULL, false);
            test_cpy_case(ts, a, perm, gaps, td, flat, NULL, rowgap, false);  /* heads -> flat cache rows */
            test_cpy_case(ts, flat, NULL, NULL, td, a, vt, NULL, false);      /* into a V^T-like layout */
            test_cpy_case(ts, b, transposed, gaps, td, c, NULL, gaps, false); /* different shapes */
            test_cpy_case(ts, a, perm, gaps, td, a, NULL, NULL, true);        /* cont */
            test_cpy_case(ts, b, transposed, NULL, td, b, NULL, NULL, true);
        }
}

/* ---------------------------------------------------------------------------
 * GET_ROWS */

static void test_get_rows_case(enum het_type type, int64_t k, int64_t v, int64_t m, int64_t b2, bool strided)
{
    const int64_t ne[4] = { k, v, b2, 1 }, ine[4] = { m, b2, 1, 1 }, dne[4] = { k, m, b2, 1 };
    static const int gaps[4] = { 1, 2, 1, 0 };
    static const int dgaps[4] = { 1, 3, 2, 0 };
    struct tt a, ids, d;
    const bool plain = type == HET_TYPE_F32 || type == HET_TYPE_F16 || type == HET_TYPE_BF16;
    float *rowf = malloc((size_t)k * sizeof *rowf);
    if (plain) {
        tt_make(&a, type, ne, NULL, strided ? gaps : NULL);
        tt_fill(&a, 1.0f);
    } else {
        tt_make_rows(&a, type, ne, strided ? 6 : 0);
        for (int64_t r = 0; r < v * b2; r++) {
            het_test_fill_normal(rowf, (size_t)k, 1.0f);
            het_quantize_row(type, rowf, (char *)a.t.data + (r % v) * a.t.nb[1] + (r / v) * a.t.nb[2], k);
        }
    }
    tt_make(&ids, HET_TYPE_I32, ine, NULL, strided ? gaps : NULL);
    for (int64_t f = 0; f < tt_n(&ids); f++) tt_set(&ids, f, (float)(het_test_rand_u64() % (uint64_t)v));
    double *want = dvec(k * m * b2);
    for (int64_t j = 0; j < b2; j++)
        for (int64_t i = 0; i < m; i++) {
            int64_t id = (int64_t)tt_get(&ids, j * m + i);
            const char *row = (const char *)a.t.data + id * a.t.nb[1] + j * a.t.nb[2];
            if (plain)
                for (int64_t e = 0; e < k; e++) rowf[e] = tt_get(&a, fidx(ne, e, id, j, 0));
            else
                het_dequantize_row(type, row, rowf, k);
            for (int64_t e = 0; e < k; e++) want[fidx(dne, e, i, j, 0)] = rowf[e];
        }
    tt_make(&d, HET_TYPE_F32, dne, NULL, strided ? dgaps : NULL);
    d.t.op = HET_OP_GET_ROWS;
    d.t.src[0] = &a.t;
    d.t.src[1] = &ids.t;
    char what[96];
    snprintf(what, sizeof what, "get_rows %s k=%lld v=%lld m=%lld b2=%lld%s", het_type_name(type), (long long)k,
             (long long)v, (long long)m, (long long)b2, strided ? " strided" : "");
    check_op(what, het_cpu_get_rows, &d, want, 0, 0);

    /* an id out of range is reported, not read */
    tt_set(&ids, 0, (float)v);
    struct het_compute_params p = { .ith = 0, .nth = 1, .isa = HET_CPU_ISA_SCALAR };
    CHECK(het_cpu_get_rows(&p, &d.t) == HET_ERR_INVALID, "%s: bad id accepted", what);
    free(rowf); free(want);
    tt_free(&a); tt_free(&ids); tt_free(&d);
}

static void test_get_rows(void)
{
    static const enum het_type q32[] = { HET_TYPE_Q8_0, HET_TYPE_Q4_0, HET_TYPE_Q4_1, HET_TYPE_Q5_0,
                                         HET_TYPE_Q5_1 };
    static const enum het_type qk[] = { HET_TYPE_Q4_K, HET_TYPE_Q5_K, HET_TYPE_Q6_K };
    static const enum het_type plain[] = { HET_TYPE_F32, HET_TYPE_F16, HET_TYPE_BF16 };
    for (int s = 0; s < 2; s++) {
        for (int i = 0; i < 3; i++) {
            test_get_rows_case(plain[i], 7, 11, 5, 1, s);
            test_get_rows_case(plain[i], 172, 9, 13, 2, s);
        }
        for (int i = 0; i < 5; i++) test_get_rows_case(q32[i], 96, 10, 7, 2, s);
        for (int i = 0; i < 3; i++) test_get_rows_case(qk[i], 512, 6, 5, 1, s);
    }
}

/* ---------------------------------------------------------------------------
 * ATTN */

struct attn_case {
    int64_t hd, n_head, n_kv_head, n_tok, n_kv, n_batch, n_kv_batch;
    int     n_past;
    enum het_type kv_type;
    int     layout; /* 0 dense, 1 strided q/k/v/dst, 2 V stored transposed (nb0 > elem), 3 head-major K/V */
};

static void attn_ref(const struct attn_case *c, const float *q, const float *k, const float *v, float scale,
                     double *out)
{
    const int64_t hd = c->hd, n_rep = c->n_head / c->n_kv_head;
    const int64_t qne[4] = { hd, c->n_head, c->n_tok, c->n_batch };
    const int64_t kne[4] = { hd, c->n_kv_head, c->n_kv, c->n_kv_batch };
    double *s = dvec(c->n_kv > 0 ? c->n_kv : 1);
    for (int64_t b = 0; b < c->n_batch; b++)
        for (int64_t t = 0; t < c->n_tok; t++)
            for (int64_t h = 0; h < c->n_head; h++) {
                int64_t hk = h / n_rep, bk = b % c->n_kv_batch, lim = t + c->n_past + 1;
                if (lim > c->n_kv) lim = c->n_kv;
                double mx = -INFINITY, sum = 0;
                for (int64_t j = 0; j < lim; j++) {
                    double dot = 0;
                    for (int64_t d = 0; d < hd; d++)
                        dot += (double)q[fidx(qne, d, h, t, b)] * k[fidx(kne, d, hk, j, bk)];
                    s[j] = dot * scale;
                    mx = s[j] > mx ? s[j] : mx;
                }
                for (int64_t j = 0; j < lim; j++) { s[j] = exp(s[j] - mx); sum += s[j]; }
                for (int64_t d = 0; d < hd; d++) {
                    double acc = 0;
                    for (int64_t j = 0; j < lim; j++) acc += s[j] * v[fidx(kne, d, hk, j, bk)];
                    out[fidx(qne, d, h, t, b)] = lim > 0 ? acc / sum : 0.0;
                }
            }
    free(s);
}

/* c run with the L2 size l2 (0: not known) */
static void test_attn_case(const struct attn_case *c, size_t l2)
{
    const int64_t qne[4] = { c->hd, c->n_head, c->n_tok, c->n_batch };
    const int64_t kne[4] = { c->hd, c->n_kv_head, c->n_kv, c->n_kv_batch };
    static const int qorder[4] = { 0, 2, 1, 3 }, vtorder[4] = { 2, 0, 1, 3 }, hmorder[4] = { 0, 2, 1, 3 };
    static const int qgaps[4] = { 0, 3, 2, 1 }, kgaps[4] = { 0, 5, 8, 0 }, egaps[4] = { 1, 1, 2, 0 };
    const bool strided = c->layout == 1 || c->layout == 2;
    const int *korder = c->layout == 3 ? hmorder : NULL;
    struct tt q, k, v, d;
    tt_make(&q, HET_TYPE_F32, qne, strided ? qorder : NULL, strided ? qgaps : NULL);
    tt_make(&k, c->kv_type, kne, korder, strided ? (c->layout == 2 ? egaps : kgaps) : NULL);
    tt_make(&v, c->kv_type, kne, c->layout == 2 ? vtorder : korder, strided ? kgaps : NULL);
    tt_fill(&q, 1.0f);
    tt_fill(&k, 1.0f);
    tt_fill(&v, 1.0f);
    float *vq = tt_dense(&q), *vk = tt_dense(&k), *vv = tt_dense(&v);
    const float scale = 1.0f / sqrtf((float)c->hd) * 1.7f;
    double *want = dvec(tt_n(&q));
    attn_ref(c, vq, vk, vv, scale, want);

    tt_make(&d, HET_TYPE_F32, qne, NULL, strided ? qgaps : NULL);
    d.t.op = HET_OP_ATTN;
    d.t.src[0] = &q.t;
    d.t.src[1] = &k.t;
    d.t.src[2] = &v.t;
    het_set_op_param_f32(&d.t, 0, scale);
    d.t.op_params[1] = c->n_past;
    char what[128];
    snprintf(what, sizeof what, "attn %s hd=%lld heads=%lld/%lld tok=%lld kv=%lld past=%d batch=%lld/%lld lay=%d",
             het_type_name(c->kv_type), (long long)c->hd, (long long)c->n_head, (long long)c->n_kv_head,
             (long long)c->n_tok, (long long)c->n_kv, c->n_past, (long long)c->n_batch,
             (long long)c->n_kv_batch, c->layout);
    attn_l2 = l2;
    if (l2) { /* the F32 K and V of a kv head over 1 MB: kept as F32 only with this L2 */
        CHECK(het_cpu_attn_work_size(&d.t, 1, l2) > het_cpu_attn_work_size(&d.t, 1, 0) + (1u << 20),
              "%s: the L2 of %zu KB keeps the kv head's K and V as F32", what, l2 >> 10);
        snprintf(what + strlen(what), sizeof what - strlen(what), " l2=%zuK", l2 >> 10);
    }
    check_op(what, het_cpu_attn, &d, want, 0, 5e-5);
    attn_l2 = 0;
    float *got = tt_dense(&d);
    float *wf = malloc((size_t)tt_n(&d) * sizeof *wf);
    for (int64_t i = 0; i < tt_n(&d); i++) wf[i] = (float)want[i];
    double nmse = het_test_nmse(got, wf, (size_t)tt_n(&d));
    CHECK(nmse < 1e-9, "%s: nmse %.3g", what, nmse);
    free(got); free(wf);
    free(vq); free(vk); free(vv); free(want);
    tt_free(&q); tt_free(&k); tt_free(&v); tt_free(&d);
}

static void test_attn(void)
{
    static const struct attn_case cases[] = {
        /* hd, heads, kv heads, tok, kv, batch, kv batch, past, type, layout */
        { 8, 8, 4, 7, 7, 1, 1, 0, HET_TYPE_F32, 0 },          /* stories260K shape, prefill */
        { 8, 8, 4, 1, 20, 1, 1, 19, HET_TYPE_F32, 1 },        /* decode */
        { 128, 16, 8, 50, 50, 1, 1, 0, HET_TYPE_F16, 0 },     /* qwen3 shape */
        { 128, 16, 8, 37, 80, 1, 1, 43, HET_TYPE_F16, 1 },    /* n_past > 0, strided */
        { 128, 16, 8, 1, 300, 1, 1, 299, HET_TYPE_F16, 2 },   /* decode, V transposed */
        { 64, 4, 1, 1, 300, 1, 1, 299, HET_TYPE_F16, 0 },     /* MQA decode: split-KV at nth > 1 */
        { 64, 4, 1, 3, 600, 1, 1, 200, HET_TYPE_F32, 1 },     /* split-KV, a split past the causal end */
        { 20, 6, 2, 13, 40, 1, 1, 10, HET_TYPE_F32, 1 },      /* n_rep 3, hd not a multiple of 8 */
        { 100, 6, 6, 29, 29, 1, 1, 0, HET_TYPE_BF16, 0 },     /* no GQA, hd % 16 == 4 */
        { 8, 52, 1, 5, 12, 1, 1, 7, HET_TYPE_F16, 1 },        /* n_rep 52 > tile rows */
        { 32, 4, 2, 9, 20, 2, 1, 11, HET_TYPE_F16, 2 },       /* batch, K/V shared across it */
        { 32, 4, 2, 9, 20, 2, 2, 11, HET_TYPE_F32, 1 },       /* batch with its own K/V */
        { 16, 2, 1, 10, 4, 1, 1, 0, HET_TYPE_F32, 0 },        /* fewer keys than t + n_past */
        { 16, 2, 2, 5, 0, 1, 1, 0, HET_TYPE_F32, 0 },         /* no keys at all: zeros */
        { 64, 4, 2, 100, 140, 1, 1, 33, HET_TYPE_F16, 0 },    /* several tiles and key blocks */
        { 128, 16, 8, 61, 90, 1, 1, 29, HET_TYPE_F16, 3 },    /* head-major cache, read in place */
        { 64, 4, 2, 7, 150, 1, 1, 143, HET_TYPE_F32, 3 },
        { 128, 8, 2, 1, 200, 1, 1, 199, HET_TYPE_F16, 3 },    /* decode from a head-major cache */
        { 48, 4, 2, 11, 30, 1, 1, 19, HET_TYPE_F16, 0 },      /* hd % 32 == 16: AVX-512 PV's half pass */
        /* decode tiles of 1-3 rows: AVX-512 PV with the keys outer (every head dim <= 128 in 16s) */
        { 128, 16, 8, 1, 77, 1, 1, 76, HET_TYPE_F16, 3 },     /* qwen3 decode, head-major cache in place */
        { 64, 6, 2, 1, 45, 1, 1, 44, HET_TYPE_F32, 0 },       /* 3 rows, F32 rows in place */
        { 48, 2, 2, 1, 70, 1, 1, 69, HET_TYPE_F16, 1 },       /* 1 row, strided: converted rows */
        { 112, 3, 3, 3, 33, 1, 1, 30, HET_TYPE_F16, 0 },      /* 3 tokens of 1 head: 3 rows, hd 7 x 16 */
        { 128, 2, 1, 1, 400, 1, 1, 399, HET_TYPE_F16, 3 },    /* one tile: split keys, then merged */
        /* AVX-512 prefill tiles (12 rows and more), scores transposed */
        { 80, 8, 2, 30, 70, 1, 1, 40, HET_TYPE_F16, 3 },      /* 48/24-row tiles, PV's 64 + 16 columns */
        { 16, 4, 4, 13, 13, 1, 1, 0, HET_TYPE_F32, 0 },       /* 13 rows: one vector, a PV row group of 1 */
        { 64, 8, 4, 30, 30, 1, 1, 0, HET_TYPE_BF16, 1 },      /* strided BF16 rows, converted */
        { 16, 4, 4, 20, 0, 1, 1, 0, HET_TYPE_F32, 0 },        /* no keys at all: zeros */
        { 32, 6, 2, 40, 200, 1, 1, 150, HET_TYPE_F16, 2 },    /* V transposed, several key blocks */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) test_attn_case(&cases[i], 0);
    /* a kv head's K and V as F32 over 1 MB (1,160 keys): with a 3 MB L2
     * kept from tile to tile (3/4 of it), without converted block by block */
    static const struct attn_case big = { 128, 4, 2, 60, 1160, 1, 1, 1100, HET_TYPE_F16, 3 };
    test_attn_case(&big, 3u << 20);
    test_attn_case(&big, 0);
}

/* ---------------------------------------------------------------------------
 * bad input is reported, never crashes */

static void test_rejects(void)
{
    const int64_t ne[4] = { 8, 2, 1, 1 }, ne2[4] = { 3, 2, 1, 1 };
    struct tt a, b, d;
    tt_make(&a, HET_TYPE_F32, ne, NULL, NULL);
    tt_make(&b, HET_TYPE_F32, ne2, NULL, NULL);
    tt_make(&d, HET_TYPE_F32, ne, NULL, NULL);
    struct het_compute_params p = { .ith = 0, .nth = 1, .isa = HET_CPU_ISA_SCALAR };
    d.t.src[0] = &a.t;
    d.t.src[1] = &b.t;
    CHECK(het_cpu_add(&p, &d.t) == HET_ERR_INVALID, "add: non-dividing broadcast accepted");
    b.t.type = HET_TYPE_Q4_0;
    CHECK(het_cpu_mul(&p, &d.t) == HET_ERR_UNSUPPORTED, "mul: q4_0 src1 accepted");
    d.t.src[1] = NULL;
    d.t.op_params[0] = 3; /* odd n_dims */
    CHECK(het_cpu_rope(&p, &d.t) == HET_ERR_INVALID, "rope: missing positions accepted");
    d.t.src[1] = &a.t;
    d.t.src[2] = &a.t;
    CHECK(het_cpu_attn(&p, &d.t) != HET_OK, "attn: no work buffer accepted");
    tt_free(&a); tt_free(&b); tt_free(&d);
}

int main(void)
{
    het_test_seed(20240611);
    omp_set_dynamic(0);
    struct het_cpu_features f;
    het_cpu_features_detect(&f);
    isas[n_isa++] = HET_CPU_ISA_SCALAR;
    if (f.avx2) isas[n_isa++] = HET_CPU_ISA_AVX2;
    if (f.avx512) isas[n_isa++] = HET_CPU_ISA_AVX512;

    test_binary();
    test_unary();
    test_rope();
    test_norm_chain();
    test_softmax();
    test_copy();
    test_get_rows();
    test_attn();
    test_rejects();
    return het_test_finish();
}
