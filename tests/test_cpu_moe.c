/*
 * test_cpu_moe.c — the CPU's mixture-of-experts ops against plain scalar
 * references: mul_mat_id for every weight type at every ISA level this
 * machine runs (decode and prefill shapes, n_b = 1 and n_b = k, repeated
 * and uneven expert loads), and top_k, sum_rows, div, sigmoid, moe_sum.
 * Every case uses NON-CONTIGUOUS views somewhere: transposed ids, strided
 * inputs (nb0 != 4), padded outputs, a padded expert stride. Outputs start
 * as NaN so an unwritten one fails.
 *
 * mul_mat_id tolerance is test_cpu_matmul's: with int8 activations each
 * output may differ from the exact product by sum over 32-blocks of
 * (amax/127/2) * sum|w| (x1.02), plus 2e-5 of sum|w*x| for float rounding.
 */
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "devices/cpu/cpu_ops.h"
#include "het/graph.h"
#include "testutil.h"

static float nanf_(void) { return NAN; }

/* Run node on nth threads at isa, as the CPU device does (parts from a
 * shared counter). */
static enum het_status run_node(struct het_tensor *dst, int nth, enum het_cpu_isa isa, bool f32_act)
{
    size_t ws = het_cpu_work_size(dst, nth, f32_act, 0);
    void *wdata = ws ? aligned_alloc(64, (ws + 63) & ~(size_t)63) : NULL;
    enum het_status st = HET_OK;
    struct het_cpu_sync sync;
    het_cpu_sync_init(&sync);
#pragma omp parallel num_threads(nth)
    {
        struct het_cpu_worker w;
        het_cpu_worker_init(&w, &sync);
        struct het_compute_params p = {
            .ith = omp_get_thread_num(), .nth = omp_get_num_threads(),
            .wdata = wdata, .wsize = ws, .isa = isa, .f32_act = f32_act, .worker = &w,
        };
        enum het_status s = het_cpu_compute(&p, dst);
        if (s != HET_OK) {
#pragma omp critical
            st = s;
        }
    }
    free(wdata);
    return st;
}

static float ld(const struct het_tensor *t, int64_t i0, int64_t i1, int64_t i2)
{
    float v;
    memcpy(&v, (const char *)t->data + i0 * t->nb[0] + i1 * t->nb[1] + i2 * t->nb[2], 4);
    return v;
}

static void st(struct het_tensor *t, int64_t i0, int64_t i1, int64_t i2, float v)
{
    memcpy((char *)t->data + i0 * t->nb[0] + i1 * t->nb[1] + i2 * t->nb[2], &v, 4);
}

/* A 3-D F32 tensor over its own buffer with element stride es (floats)
 * and `pad` floats after each row and each matrix; NaN everywhere. */
static void *strided_f32(struct het_tensor *t, int64_t n0, int64_t n1, int64_t n2, int es, int pad)
{
    const int64_t ne[3] = {n0, n1, n2};
    het_tensor_init(t, HET_TYPE_F32, 3, ne);
    t->nb[0] = 4 * (size_t)es;
    t->nb[1] = t->nb[0] * (size_t)n0 + 4 * (size_t)pad;
    t->nb[2] = t->nb[1] * (size_t)n1 + 4 * (size_t)pad;
    t->nb[3] = t->nb[2] * (size_t)n2;
    size_t n = t->nb[3] / 4 + 1;
    float *buf = malloc(n * 4);
    for (size_t i = 0; i < n; i++) buf[i] = nanf_();
    t->data = buf;
    return buf;
}

/* ---- mul_mat_id ---------------------------------------------------------- */

struct mmid_case {
    int64_t K, N, E, k, n_b, T;
    int     ids_mode;   /* 0 dense, 1 transposed view                      */
    int     b_es;       /* input element stride (1 dense, 2 strided)       */
    int     d_pad;      /* output padding (0: dense)                       */
    int     skew;       /* 0 uniform routing, 1 most pairs on expert 1,
                           2 repeated ids within a token                   */
};

static void check_mmid(enum het_type type, const struct mmid_case *c, int nth, enum het_cpu_isa isa, bool f32_act)
{
    const int64_t K = c->K, N = c->N, E = c->E, k = c->k, T = c->T;
    /* experts: (K, N, E), each expert padded by 64 bytes (nb2 > nb1*N) */
    struct het_tensor as;
    const int64_t ane[3] = {K, N, E};
    het_tensor_init(&as, type, 3, ane);
    as.nb[2] = as.nb[1] * (size_t)N + 64;
    as.nb[3] = as.nb[2] * (size_t)E;
    uint8_t *a_buf = calloc(1, as.nb[3]);
    float *a_f = malloc(sizeof(float) * (size_t)(K * N * E)), *tmp = malloc(sizeof(float) * (size_t)K);
    for (int64_t e = 0; e < E; e++)
        for (int64_t n = 0; n < N; n++) {
            het_test_fill_normal(tmp, (size_t)K, 1.0f);
            uint8_t *row = a_buf + e * as.nb[2] + n * as.nb[1];
            het_quantize_row(type, tmp, row, K);
            het_dequantize_row(type, row, a_f + (e * N + n) * K, K);
        }
    as.data = a_buf;
    snprintf(as.name, sizeof as.name, "experts");

    struct het_tensor b, d, ids;
    void *b_buf = strided_f32(&b, K, c->n_b, T, c->b_es, 3);
    for (int64_t t = 0; t < T; t++)
        for (int64_t j = 0; j < c->n_b; j++)
            for (int64_t i = 0; i < K; i++) st(&b, i, j, t, het_test_rand_normal() * ((i / 32) % 3 ? 1.0f : 0.1f));
    void *d_buf = strided_f32(&d, N, k, T, c->d_pad ? 2 : 1, c->d_pad);

    /* ids (k, T): dense, or a transposed view of a (T+2, k) buffer */
    const int64_t ine[2] = {k, T};
    het_tensor_init(&ids, HET_TYPE_I32, 2, ine);
    int32_t *i_buf = calloc((size_t)((T + 2) * k), 4);
    if (c->ids_mode == 1) {
        ids.nb[0] = 4 * (size_t)(T + 2);
        ids.nb[1] = 4;
        ids.nb[2] = ids.nb[3] = ids.nb[0] * (size_t)k;
    }
    ids.data = i_buf;
    for (int64_t t = 0; t < T; t++) {
        /* distinct experts per token (a router's top-k), or skewed/repeated */
        int64_t start = (int64_t)(het_test_rand_u64() % (uint64_t)E);
        for (int64_t s = 0; s < k; s++) {
            int32_t e = (int32_t)((start + s * 3) % E);
            if (c->skew == 1 && s == 0) e = 1;
            if (c->skew == 2) e = (int32_t)((start + s / 2) % E);
            memcpy((char *)i_buf + s * ids.nb[0] + t * ids.nb[1], &e, 4);
        }
    }
    if (c->skew != 2 && E >= k) {
        /* make the per-token picks distinct when the stride 3 wrapped */
        for (int64_t t = 0; t < T; t++)
            for (int64_t s = 0; s < k; s++) {
                int32_t e;
                memcpy(&e, (char *)i_buf + s * ids.nb[0] + t * ids.nb[1], 4);
                for (bool dup = true; dup;) {
                    dup = false;
                    for (int64_t r = 0; r < s; r++) {
                        int32_t o;
                        memcpy(&o, (char *)i_buf + r * ids.nb[0] + t * ids.nb[1], 4);
                        if (o == e) dup = true;
                    }
                    if (dup) e = (int32_t)((e + 1) % E);
                }
                memcpy((char *)i_buf + s * ids.nb[0] + t * ids.nb[1], &e, 4);
            }
    }

    d.op = HET_OP_MUL_MAT_ID;
    d.src[0] = &as;
    d.src[1] = &b;
    d.src[2] = &ids;
    CHECK(het_cpu_supports(&d), "%s mul_mat_id not supported", het_type_name(type));
    /* as stored, then (quantised, int8 activations) from load-time panels
     * of every expert, with the stored bytes overwritten so that a read of
     * them shows */
    const size_t psize = f32_act ? 0 : het_cpu_mul_mat_id_repack_size(&as, isa);
    void *packed = psize ? aligned_alloc(64, (psize + 63) & ~(size_t)63) : NULL;
    for (int pass = 0; pass < (packed ? 2 : 1); pass++) {
        if (pass == 1) {
            /* whole, then in pieces across the experts' blocks as the
             * device's threads make them (last first, 1, 2, 3... panels):
             * the same bytes */
            const size_t cap = (psize + 63) & ~(size_t)63;
            uint8_t *whole = aligned_alloc(64, cap);
            memset(whole, 0xa5, cap);
            memset(packed, 0xa5, cap);
            CHECK(het_cpu_mul_mat_id_repack(&as, isa, whole, psize) == HET_OK, "repack %s", het_type_name(type));
            const int64_t items = het_cpu_mul_mat_id_repack_items(&as, isa);
            CHECK(items > 0 && items % as.ne[2] == 0, "%s: %lld panels", het_type_name(type), (long long)items);
            for (int64_t hi = items, len = 1; hi > 0; hi -= len, len++) {
                const int64_t lo = hi > len ? hi - len : 0;
                CHECK(het_cpu_mul_mat_id_repack_range(&as, isa, packed, psize, lo, hi) == HET_OK,
                      "repack %s panels [%lld, %lld)", het_type_name(type), (long long)lo, (long long)hi);
            }
            CHECK(!memcmp(packed, whole, psize), "%s (%s): the experts' panels made in pieces differ",
                  het_type_name(type), het_cpu_isa_name(isa));
            free(whole);
            as.extra = packed;
            memset(a_buf, 0x55, as.nb[3]);
            float *dd = d_buf;
            for (size_t i = 0; i < d.nb[3] / 4 + 1; i++) dd[i] = nanf_();
        }
        enum het_status s = run_node(&d, nth, isa, f32_act);
        CHECK(s == HET_OK, "%s mul_mat_id: %s", het_type_name(type), het_status_name(s));

        const bool quant = het_type_get_traits(type)->is_quantized && !f32_act;
        int bad = 0;
        double worst = 0;
        for (int64_t t = 0; s == HET_OK && t < T; t++)
            for (int64_t sl = 0; sl < k; sl++) {
                int32_t e;
                memcpy(&e, (char *)i_buf + sl * ids.nb[0] + t * ids.nb[1], 4);
                for (int64_t n = 0; n < N; n++) {
                    const float *w = a_f + (e * N + n) * K;
                    double ref = 0, mag = 0, qerr = 0;
                    for (int64_t k0 = 0; k0 < K; k0 += 32) {
                        double amax = 0, wabs = 0;
                        for (int64_t i = k0; i < k0 + 32 && i < K; i++) {
                            const double x = ld(&b, i, sl % c->n_b, t);
                            ref += w[i] * x;
                            mag += fabs(w[i] * x);
                            amax = fmax(amax, fabs(x));
                            wabs += fabs(w[i]);
                        }
                        qerr += amax / 127.0 / 2.0 * wabs;
                    }
                    const double tol = (quant ? 1.02 * qerr : 0.0) + 2e-5 * mag + 1e-6;
                    const float got = ld(&d, n, sl, t);
                    const double err = fabs((double)got - ref);
                    if (!(err <= tol) && bad++ < 3)
                        fprintf(stderr, "  n=%lld slot=%lld t=%lld e=%d: got %g want %g (tol %g)\n", (long long)n,
                                (long long)sl, (long long)t, e, got, ref, tol);
                    if (err / tol > worst) worst = err / tol;
                }
            }
        CHECK(s == HET_OK && bad == 0,
              "%s isa=%s nth=%d K=%lld N=%lld E=%lld k=%lld n_b=%lld T=%lld ids=%d b_es=%d d_pad=%d skew=%d%s%s: "
              "%d bad (worst err/tol %.2f)",
              het_type_name(type), het_cpu_isa_name(isa), nth, (long long)K, (long long)N, (long long)E, (long long)k,
              (long long)c->n_b, (long long)T, c->ids_mode, c->b_es, c->d_pad, c->skew, f32_act ? " f32-act" : "",
              pass ? " packed" : "", bad, worst);
    }

    /* an id out of range fails the node */
    if (T > 0) {
        int32_t saved, badid = (int32_t)E;
        memcpy(&saved, i_buf, 4);
        memcpy(i_buf, &badid, 4);
        CHECK(run_node(&d, nth, isa, f32_act) == HET_ERR_INVALID, "id %d of %lld experts must fail", badid,
              (long long)E);
        badid = -1;
        memcpy(i_buf, &badid, 4);
        CHECK(run_node(&d, nth, isa, f32_act) == HET_ERR_INVALID, "id -1 must fail");
        memcpy(i_buf, &saved, 4);
    }
    free(a_buf); free(a_f); free(tmp); free(b_buf); free(d_buf); free(i_buf); free(packed);
}

static void test_mul_mat_id(enum het_cpu_isa best)
{
    static const enum het_type types[] = {
        HET_TYPE_Q4_0, HET_TYPE_Q4_1, HET_TYPE_Q5_0, HET_TYPE_Q5_1, HET_TYPE_Q8_0,
        HET_TYPE_Q4_K, HET_TYPE_Q5_K, HET_TYPE_Q6_K, HET_TYPE_F32, HET_TYPE_F16, HET_TYPE_BF16,
    };
    for (int lv = HET_CPU_ISA_SCALAR; lv <= (int)best; lv++) {
        for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
            const enum het_type ty = types[ti];
            const int64_t K = het_type_get_traits(ty)->blck_size == 256 ? 256 : 96;
            const struct mmid_case cases[] = {
                /* K  N  E  k n_b  T  ids b_es d_pad skew */
                {K, 13, 4, 2, 1, 1, 1, 2, 0, 0},    /* decode, gate/up: one column shared */
                {K, 7, 6, 3, 3, 1, 0, 1, 2, 0},     /* decode, down: one column per slot */
                {K, 17, 5, 2, 1, 9, 1, 1, 1, 0},    /* prefill, shared column */
                {K, 9, 4, 2, 2, 11, 0, 2, 2, 1},    /* prefill, per slot, skewed load */
                {K, 33, 8, 3, 1, 17, 1, 2, 0, 2},   /* repeated ids inside a token */
                /* decode with rows enough for several parts, cut across experts */
                {K, 701, 6, 3, 3, 1, 1, 2, 1, 0},
                /* prefill whose experts get 8 pairs or more: their columns
                 * quantised once for the node (matmul_id.c, MMID_ROWS_MIN_M),
                 * shared by all slots, then one per slot, skewed */
                {K, 9, 4, 2, 1, 40, 0, 1, 0, 0},
                {K, 11, 4, 2, 2, 37, 1, 2, 1, 1},
            };
            for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
                check_mmid(ty, &cases[i], i == 3 || i == 5 || i == 7 ? 3 : 2, (enum het_cpu_isa)lv, false);
            if (het_type_get_traits(ty)->is_quantized && lv == (int)best) {
                check_mmid(ty, &cases[2], 2, (enum het_cpu_isa)lv, true);
                check_mmid(ty, &cases[0], 2, (enum het_cpu_isa)lv, true);
            }
        }
    }
}

/* ---- routing ops ------------------------------------------------------- */

static void test_top_k(void)
{
    for (int rep = 0; rep < 3; rep++) {
        const int64_t n = rep == 0 ? 1 : 13 + rep * 50, rows = 7, k = rep == 0 ? 1 : 8;
        struct het_tensor a, d;
        /* a as a transposed view: element i of row r at i*nb0 + r*nb1 */
        float *abuf = malloc(sizeof(float) * (size_t)(n * rows + 4));
        const int64_t ane[2] = {n, rows};
        het_tensor_init(&a, HET_TYPE_F32, 2, ane);
        a.nb[0] = 4 * (size_t)rows;
        a.nb[1] = 4;
        a.nb[2] = a.nb[3] = 4 * (size_t)(n * rows);
        a.data = abuf;
        for (int64_t r = 0; r < rows; r++)
            for (int64_t i = 0; i < n; i++) {
                /* few distinct values: plenty of ties; a NaN in row 3 */
                float v = (float)(int)(het_test_rand_u64() % 9) - 4.0f;
                if (r == 3 && i == n / 2) v = nanf_();
                memcpy((char *)abuf + i * a.nb[0] + r * a.nb[1], &v, 4);
            }
        const int64_t dne[2] = {k, rows};
        het_tensor_init(&d, HET_TYPE_I32, 2, dne);
        d.nb[1] = 4 * (size_t)(k + 3); /* padded rows */
        d.nb[2] = d.nb[3] = d.nb[1] * (size_t)rows;
        int32_t *dbuf = malloc(d.nb[2]);
        memset(dbuf, 0xff, d.nb[2]);
        d.data = dbuf;
        d.op = HET_OP_TOP_K;
        d.src[0] = &a;
        d.op_params[0] = (int32_t)k;
        CHECK(run_node(&d, 2, HET_CPU_ISA_SCALAR, false) == HET_OK, "top_k failed");
        int bad = 0;
        for (int64_t r = 0; r < rows; r++) {
            /* reference: repeated selection of the best remaining */
            bool *used = calloc((size_t)n, 1);
            for (int64_t j = 0; j < k; j++) {
                int64_t bi = -1;
                float bv = 0;
                for (int64_t i = 0; i < n; i++) {
                    if (used[i]) continue;
                    float v;
                    memcpy(&v, (char *)abuf + i * a.nb[0] + r * a.nb[1], 4);
                    if (bi < 0 || (isnan(bv) && !isnan(v)) || (!isnan(v) && v > bv)) { bi = i; bv = v; }
                }
                used[bi] = true;
                int32_t got;
                memcpy(&got, (char *)dbuf + j * 4 + r * d.nb[1], 4);
                if (got != bi && bad++ < 3)
                    fprintf(stderr, "  top_k row %lld slot %lld: got %d want %lld\n", (long long)r, (long long)j,
                            got, (long long)bi);
            }
            free(used);
        }
        CHECK(bad == 0, "top_k n=%lld k=%lld: %d wrong indices", (long long)n, (long long)k, bad);
        free(abuf);
        free(dbuf);
    }
}

static void test_small_ops(void)
{
    const int64_t n = 37, k = 5, T = 6;
    /* sum_rows over a strided (element stride 2, padded) input */
    struct het_tensor a, d;
    void *ab = strided_f32(&a, n, k, T, 2, 3);
    for (int64_t t = 0; t < T; t++)
        for (int64_t j = 0; j < k; j++)
            for (int64_t i = 0; i < n; i++) st(&a, i, j, t, het_test_rand_normal());
    void *db = strided_f32(&d, 1, k, T, 1, 2);
    d.op = HET_OP_SUM_ROWS;
    d.src[0] = &a;
    CHECK(run_node(&d, 2, HET_CPU_ISA_SCALAR, false) == HET_OK, "sum_rows failed");
    int bad = 0;
    for (int64_t t = 0; t < T; t++)
        for (int64_t j = 0; j < k; j++) {
            double s = 0;
            for (int64_t i = 0; i < n; i++) s += ld(&a, i, j, t);
            bad += !(fabs(ld(&d, 0, j, t) - s) <= 1e-5 * (1 + fabs(s)));
        }
    CHECK(bad == 0, "sum_rows: %d wrong", bad);

    /* div by a broadcast column, sigmoid; outputs strided */
    struct het_tensor q, y;
    void *qb = strided_f32(&q, 1, k, T, 1, 1);
    for (int64_t t = 0; t < T; t++)
        for (int64_t j = 0; j < k; j++) st(&q, 0, j, t, het_test_rand_uniform(0.5f, 2.0f));
    void *yb = strided_f32(&y, n, k, T, 2, 1);
    y.op = HET_OP_DIV;
    y.src[0] = &a;
    y.src[1] = &q;
    CHECK(run_node(&y, 2, HET_CPU_ISA_AVX2, false) == HET_OK, "div failed");
    bad = 0;
    for (int64_t t = 0; t < T; t++)
        for (int64_t j = 0; j < k; j++)
            for (int64_t i = 0; i < n; i++) {
                float want = ld(&a, i, j, t) / ld(&q, 0, j, t);
                bad += !(fabsf(ld(&y, i, j, t) - want) <= 1e-6f * (1 + fabsf(want)));
            }
    CHECK(bad == 0, "div: %d wrong", bad);
    y.op = HET_OP_SIGMOID;
    y.src[1] = NULL;
    CHECK(run_node(&y, 2, HET_CPU_ISA_AVX2, false) == HET_OK, "sigmoid failed");
    bad = 0;
    for (int64_t t = 0; t < T; t++)
        for (int64_t j = 0; j < k; j++)
            for (int64_t i = 0; i < n; i++) {
                double want = 1.0 / (1.0 + exp(-(double)ld(&a, i, j, t)));
                bad += !(fabs(ld(&y, i, j, t) - want) <= 1e-6);
            }
    CHECK(bad == 0, "sigmoid: %d wrong", bad);

    /* moe_sum: x (n, k, T) strided, w (k, T) a transposed view */
    struct het_tensor w, o;
    float *wb = malloc(sizeof(float) * (size_t)(k * T));
    const int64_t wne[2] = {k, T};
    het_tensor_init(&w, HET_TYPE_F32, 2, wne);
    w.nb[0] = 4 * (size_t)T;
    w.nb[1] = 4;
    w.nb[2] = w.nb[3] = 4 * (size_t)(k * T);
    w.data = wb;
    for (int64_t i = 0; i < k * T; i++) wb[i] = het_test_rand_uniform(0, 1);
    for (int dense = 0; dense < 2; dense++) {
        void *ob = strided_f32(&o, n, T, 1, dense ? 1 : 2, 2);
        o.op = HET_OP_MOE_SUM;
        o.src[0] = dense ? &y : &a;
        o.src[1] = &w;
        CHECK(run_node(&o, 3, HET_CPU_ISA_AVX2, false) == HET_OK, "moe_sum failed");
        bad = 0;
        for (int64_t t = 0; t < T; t++)
            for (int64_t i = 0; i < n; i++) {
                double s = 0, mag = 0;
                for (int64_t j = 0; j < k; j++) {
                    s += (double)wb[j * T + t] * ld(o.src[0], i, j, t);
                    mag += fabs((double)wb[j * T + t] * ld(o.src[0], i, j, t));
                }
                bad += !(fabs(ld(&o, i, t, 0) - s) <= 1e-6 * (1 + mag));
            }
        CHECK(bad == 0, "moe_sum (%s): %d wrong", dense ? "dense x" : "strided x", bad);
        free(ob);
    }
    free(ab); free(db); free(qb); free(yb); free(wb);
}

/* The builders' shape contract. */
static void test_builders(void)
{
    het_graph *g = het_graph_init(64);
    const int64_t ane[3] = {64, 16, 8}, bne[3] = {64, 1, 5}, ine[2] = {2, 5}, bad_ine[2] = {2, 4};
    struct het_tensor *as = het_new_tensor(g, HET_TYPE_Q8_0, 3, ane);
    struct het_tensor *b = het_new_tensor(g, HET_TYPE_F32, 3, bne);
    struct het_tensor *ids = het_new_tensor(g, HET_TYPE_I32, 2, ine);
    struct het_tensor *r = het_mul_mat_id(g, as, b, ids);
    CHECK(r && r->ne[0] == 16 && r->ne[1] == 2 && r->ne[2] == 5 && r->type == HET_TYPE_F32, "mul_mat_id shape");
    struct het_tensor *tk = het_top_k(g, b, 1);
    CHECK(tk && tk->type == HET_TYPE_I32 && tk->ne[0] == 1 && tk->ne[2] == 5, "top_k shape");
    struct het_tensor *ws = het_new_tensor(g, HET_TYPE_F32, 2, ine);
    struct het_tensor *ms = het_moe_sum(g, r, ws);
    CHECK(ms && ms->ne[0] == 16 && ms->ne[1] == 5 && ms->ne[2] == 1, "moe_sum shape");
    CHECK(het_graph_status(g, NULL) == HET_OK, "builders failed");
    struct het_tensor *bad = het_new_tensor(g, HET_TYPE_I32, 2, bad_ine);
    CHECK(!het_mul_mat_id(g, as, b, bad), "ids for 4 tokens over 5 must fail");
    het_error err;
    CHECK(het_graph_status(g, &err) == HET_ERR_INVALID && strstr(err.msg, "tokens"), "error names the mismatch");
    het_graph_reset(g);
    b = het_new_tensor(g, HET_TYPE_F32, 3, bne);
    CHECK(!het_top_k(g, b, 65), "k beyond the row must fail");
    het_graph_free(g);
}

int main(void)
{
    het_test_seed(4242);
    struct het_cpu_features f;
    het_cpu_features_detect(&f);
    const enum het_cpu_isa best = het_cpu_isa_select(&f);
    test_builders();
    test_top_k();
    test_small_ops();
    test_mul_mat_id(best);
    return het_test_finish();
}
