/*
 * test_cpu_matmul.c — het_cpu_mul_mat against a plain double-precision
 * reference (weights dequantised with het_dequantize_row), for every weight
 * type, at every ISA level this machine can run, through the same one
 * OpenMP region per call that the CPU device uses.
 *
 * Tolerance. For quantised weights the kernel rounds each 32-element block
 * of activations to int8 (step d = amax/127), so each output may differ from
 * the exact product by at most sum_b (d_b / 2) * sum_{k in b} |w_k|; the
 * reference computes that bound per output and the test allows it (x1.02)
 * plus float rounding (2e-5 of sum |w*x|). Float weights get the rounding
 * term only, and so do quantised weights with F32 activations (the device's
 * exact mode: weights dequantised, activations never rounded). Outputs are
 * checked one by one, and a no-op kernel would fail.
 */
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "devices/cpu/cpu_ops.h"
#include "devices/cpu/quant_dot.h"
#include "het/graph.h"
#include "testutil.h"

struct mm_case {
    enum het_type type;
    int64_t K, N, M;
    int64_t a2, b2;     /* batch: b2 a multiple of a2 (GQA)                */
    int     b_mode;     /* 0 dense, 1 padded rows, 2 transposed view      */
    bool    a_trans;    /* float a stored transposed (nb0 != elem size)   */
    bool    dst_pad;    /* dst with padded rows                           */
    bool    prepack;    /* a->extra holds load-time panels                */
    bool    f32_act;    /* F32 activations x dequantised weights          */
};

static const char *mode_name[] = {"dense", "padded", "transposed"};

/* Weights of a case: the quantised bytes and their dequantised floats. */
struct mm_data {
    struct het_tensor a, b, dst;
    void  *a_buf, *b_buf, *d_buf;
    float *a_f;   /* dequantised a, [a2][N][K]                            */
    float *b_f;   /* b values, [b2][M][K]                                 */
};

static void fill_activations(float *x, int64_t n)
{
    /* normal values with a per-32 magnitude change so block scales differ */
    for (int64_t i = 0; i < n; i++) {
        static const float mag[4] = {0.05f, 1.0f, 3.0f, 0.4f};
        x[i] = het_test_rand_normal() * mag[(i / 32) % 4];
    }
}

static bool make_case(const struct mm_case *c, struct mm_data *d)
{
    memset(d, 0, sizeof(*d));
    const int64_t K = c->K, N = c->N, M = c->M;
    const size_t rs = het_type_row_size(c->type, K);
    /* a: (K, N, a2), quantised from random floats */
    int64_t ane[3] = {K, N, c->a2};
    het_tensor_init(&d->a, c->type, 3, ane);
    d->a_f = malloc(sizeof(float) * (size_t)(K * N * c->a2));
    float *tmp = malloc(sizeof(float) * (size_t)K);
    if (c->a_trans) {
        /* storage (N, K) of elements, viewed as (K, N): nb0 = N*es, nb1 = es */
        const size_t es = het_type_row_size(c->type, 1);
        d->a_buf = calloc(1, es * (size_t)(K * N * c->a2));
        d->a.nb[0] = es * (size_t)N;
        d->a.nb[1] = es;
        d->a.nb[2] = es * (size_t)(N * K);
        d->a.nb[3] = d->a.nb[2] * (size_t)c->a2;
        uint8_t *one = malloc(es);
        for (int64_t i = 0; i < K * N * c->a2; i++) {
            float v = het_test_rand_normal();
            het_quantize_row(c->type, &v, one, 1);
            het_dequantize_row(c->type, one, &v, 1);
            const int64_t k = i % K, n = (i / K) % N, b = i / (K * N);
            memcpy((uint8_t *)d->a_buf + k * d->a.nb[0] + n * d->a.nb[1] + b * d->a.nb[2], one, es);
            d->a_f[i] = v;
        }
        free(one);
    } else {
        d->a_buf = malloc(rs * (size_t)(N * c->a2));
        for (int64_t r = 0; r < N * c->a2; r++) {
            het_test_fill_normal(tmp, (size_t)K, 1.0f);
            uint8_t *row = (uint8_t *)d->a_buf + (size_t)r * rs;
            if (het_quantize_row(c->type, tmp, row, K) != HET_OK) return false;
            if (het_dequantize_row(c->type, row, d->a_f + r * K, K) != HET_OK) return false;
        }
    }
    d->a.data = d->a_buf;
    free(tmp);

    /* b: (K, M, b2) F32 in one of three storage modes */
    int64_t bne[3] = {K, M, c->b2};
    het_tensor_init(&d->b, HET_TYPE_F32, 3, bne);
    d->b_f = malloc(sizeof(float) * (size_t)(K * M * c->b2));
    fill_activations(d->b_f, K * M * c->b2);
    const int64_t kp = K + 7, mp = M + 3;
    d->b_buf = calloc((size_t)(kp * mp * c->b2), sizeof(float));
    if (c->b_mode == 1) {
        d->b.nb[1] = sizeof(float) * (size_t)kp;
    } else if (c->b_mode == 2) {
        d->b.nb[0] = sizeof(float) * (size_t)mp;
        d->b.nb[1] = sizeof(float);
    }
    if (c->b_mode) {
        d->b.nb[2] = sizeof(float) * (size_t)(kp * mp);
        d->b.nb[3] = d->b.nb[2] * (size_t)c->b2;
    }
    for (int64_t i = 0; i < K * M * c->b2; i++) {
        const int64_t k = i % K, m = (i / K) % M, b = i / (K * M);
        memcpy((uint8_t *)d->b_buf + k * d->b.nb[0] + m * d->b.nb[1] + b * d->b.nb[2], &d->b_f[i], 4);
    }
    d->b.data = d->b_buf;

    int64_t dne[3] = {N, M, c->b2};
    het_tensor_init(&d->dst, HET_TYPE_F32, 3, dne);
    if (c->dst_pad) {
        d->dst.nb[1] = sizeof(float) * (size_t)(N + 5);
        d->dst.nb[2] = d->dst.nb[1] * (size_t)M;
        d->dst.nb[3] = d->dst.nb[2] * (size_t)c->b2;
    }
    d->d_buf = malloc(d->dst.nb[2] * (size_t)c->b2);
    d->dst.data = d->d_buf;
    d->dst.op = HET_OP_MUL_MAT;
    d->dst.src[0] = &d->a;
    d->dst.src[1] = &d->b;
    return true;
}

static void free_case(struct mm_data *d)
{
    free(d->a_buf); free(d->b_buf); free(d->d_buf); free(d->a_f); free(d->b_f);
}

/* Run the kernel in one parallel region, one call per thread: shared, the
 * threads take parts from one counter as in the device (which thread runs
 * which part differs from run to run); else each takes a static share. */
typedef enum het_status (*mm_fn)(const struct het_compute_params *, struct het_tensor *);

static enum het_status run_mm_fn_stream(mm_fn fn, struct het_tensor *dst, int nth, enum het_cpu_isa isa,
                                        bool f32_act, bool shared, enum het_cpu_stream stream)
{
    /* more scratch than asked for, and not a multiple of the threads' lines,
     * as the device's (grown for the largest node) is: each thread's part of
     * it must still be its own */
    size_t ws = het_cpu_mul_mat_work_size(dst, nth, f32_act);
    if (ws) ws += 200;
    void *wdata = ws ? aligned_alloc(64, (ws + 63) & ~(size_t)63) : NULL;
    if (wdata) memset(wdata, 0xa5, ws);
    enum het_status st = HET_OK;
    struct het_cpu_sync sync;
    het_cpu_sync_init(&sync);
#pragma omp parallel num_threads(nth)
    {
        struct het_cpu_worker w;
        het_cpu_worker_init(&w, &sync);
        struct het_compute_params p = {
            .ith = omp_get_thread_num(), .nth = omp_get_num_threads(),
            .wdata = wdata, .wsize = ws, .isa = isa, .f32_act = f32_act, .worker = shared ? &w : NULL,
            .stream = stream,
        };
        enum het_status s = fn(&p, dst);
        if (s != HET_OK) {
#pragma omp critical
            st = s;
        }
    }
    free(wdata);
    return st;
}

static enum het_status run_mm_fn(mm_fn fn, struct het_tensor *dst, int nth, enum het_cpu_isa isa, bool f32_act,
                                 bool shared)
{
    return run_mm_fn_stream(fn, dst, nth, isa, f32_act, shared, HET_CPU_STREAM_NTA);
}

static enum het_status run_mm_mode(struct het_tensor *dst, int nth, enum het_cpu_isa isa, bool f32_act, bool shared)
{
    return run_mm_fn(het_cpu_mul_mat, dst, nth, isa, f32_act, shared);
}

static enum het_status run_mm(struct het_tensor *dst, int nth, enum het_cpu_isa isa, bool f32_act)
{
    return run_mm_mode(dst, nth, isa, f32_act, true);
}

/* Attach load-time panels for isa to a (the CPU device's repack). They are
 * made in pieces as the device's threads make them (het_cpu_mul_mat_repack_range,
 * here from the last panel back, pieces of 1, 2, 3, ... panels) and must be
 * byte for byte one whole het_cpu_mul_mat_repack. */
static void *attach_packed(struct het_tensor *a, enum het_cpu_isa isa)
{
    const size_t n = het_cpu_mul_mat_repack_size(a, isa);
    CHECK(n > 0, "%s: no repack form", het_type_name(a->type));
    if (!n) return NULL;
    const size_t cap = (n + 63) & ~(size_t)63;
    void *buf = aligned_alloc(64, cap), *whole = aligned_alloc(64, cap);
    memset(buf, 0xa5, cap);
    memset(whole, 0xa5, cap);
    enum het_status st = het_cpu_mul_mat_repack(a, isa, whole, n);
    CHECK(st == HET_OK, "%s: repack failed: %s", het_type_name(a->type), het_status_name(st));
    const int64_t items = het_cpu_mul_mat_repack_items(a, isa);
    CHECK(items > 0, "%s: no panels", het_type_name(a->type));
    for (int64_t hi = items, len = 1; hi > 0 && st == HET_OK; hi -= len, len++) {
        const int64_t lo = hi > len ? hi - len : 0;
        st = het_cpu_mul_mat_repack_range(a, isa, buf, n, lo, hi);
        CHECK(st == HET_OK, "%s: panels [%lld, %lld) failed: %s", het_type_name(a->type), (long long)lo,
              (long long)hi, het_status_name(st));
    }
    CHECK(!memcmp(buf, whole, n), "%s (%s): the panels made in pieces differ from one repack", het_type_name(a->type),
          het_cpu_isa_name(isa));
    CHECK(het_cpu_mul_mat_repack_range(a, isa, buf, n, 0, items + 1) == HET_ERR_INVALID, "a range past the panels");
    free(whole);
    a->extra = buf;
    return buf;
}

static bool check_case(const struct mm_case *c, int nth, enum het_cpu_isa isa)
{
    struct mm_data d;
    if (!make_case(c, &d)) {
        CHECK(false, "%s: cannot build case", het_type_name(c->type));
        return false;
    }
    void *packed_scalar = NULL, *packed = NULL;
    /* fill dst with NaN so unwritten outputs fail */
    memset(d.d_buf, 0xff, d.dst.nb[2] * (size_t)c->b2);
    /* the scalar level's output first: SIMD levels must match it closely */
    const size_t dbytes = d.dst.nb[2] * (size_t)c->b2;
    uint8_t *scalar_out = malloc(dbytes);
    enum het_status st = HET_OK;
    if (isa != HET_CPU_ISA_SCALAR) {
        if (c->prepack) packed_scalar = attach_packed(&d.a, HET_CPU_ISA_SCALAR);
        /* the reference with the static split, the level under test with shared parts */
        st = run_mm_mode(&d.dst, nth, HET_CPU_ISA_SCALAR, c->f32_act, false);
        memcpy(scalar_out, d.d_buf, dbytes);
        memset(d.d_buf, 0xff, dbytes);
        d.a.extra = NULL;
    }
    if (c->prepack) packed = attach_packed(&d.a, isa);
    if (st == HET_OK) st = run_mm(&d.dst, nth, isa, c->f32_act);
    bool ok = st == HET_OK;
    CHECK(ok, "%s: het_cpu_mul_mat returned %s", het_type_name(c->type), het_status_name(st));
    const bool quant = het_type_get_traits(c->type)->is_quantized && !c->f32_act;
    double worst = 0.0;
    int bad = 0;
    for (int64_t bb = 0; ok && bb < c->b2; bb++) {
        const int64_t ab = bb / (c->b2 / c->a2);
        for (int64_t m = 0; m < c->M; m++) {
            const float *x = d.b_f + (bb * c->M + m) * c->K;
            for (int64_t n = 0; n < c->N; n++) {
                const float *w = d.a_f + (ab * c->N + n) * c->K;
                double ref = 0, mag = 0, qerr = 0;
                /* the activations' blocks of 32 share d in groups (q4_K batches: 8) */
                const int64_t gk = 32 * (int64_t)het_q8r_group_for(c->type, c->K, c->M);
                for (int64_t k0 = 0; k0 < c->K; k0 += gk) {
                    double amax = 0, wabs = 0;
                    for (int64_t k = k0; k < k0 + gk && k < c->K; k++) {
                        ref += (double)w[k] * x[k];
                        mag += fabs((double)w[k] * x[k]);
                        amax = fmax(amax, fabs(x[k]));
                        wabs += fabs(w[k]);
                    }
                    qerr += amax / 127.0 / 2.0 * wabs;
                }
                const double tol = (quant ? 1.02 * qerr : 0.0) + 2e-5 * mag + 1e-6;
                float got;
                memcpy(&got, (uint8_t *)d.d_buf + n * d.dst.nb[0] + m * d.dst.nb[1] + bb * d.dst.nb[2], 4);
                const double err = fabs((double)got - ref);
                bool close = true;
                if (isa != HET_CPU_ISA_SCALAR) {
                    /* same formula on the same int8 activations: only the
                     * float summation order differs */
                    float sref;
                    memcpy(&sref, scalar_out + n * d.dst.nb[0] + m * d.dst.nb[1] + bb * d.dst.nb[2], 4);
                    close = fabs((double)got - sref) <= 1e-5 * mag + 1e-6;
                    if (!close && bad < 3)
                        fprintf(stderr, "  n=%lld m=%lld: %s %g vs scalar %g\n", (long long)n, (long long)m,
                                het_cpu_isa_name(isa), got, sref);
                }
                if (!(err <= tol) || !close) {
                    if (bad++ < 3)
                        fprintf(stderr, "  n=%lld m=%lld b=%lld: got %g want %g (tol %g)\n", (long long)n,
                                (long long)m, (long long)bb, got, ref, tol);
                }
                if (tol > 0 && err / tol > worst) worst = err / tol;
            }
        }
    }
    CHECK(ok && bad == 0, "%s isa=%s nth=%d K=%lld N=%lld M=%lld batch=%lld/%lld b=%s%s%s%s%s: %d bad outputs (worst err/tol %.2f)",
          het_type_name(c->type), het_cpu_isa_name(isa), nth, (long long)c->K, (long long)c->N, (long long)c->M,
          (long long)c->a2, (long long)c->b2, mode_name[c->b_mode], c->a_trans ? " a^T" : "",
          c->dst_pad ? " dst-padded" : "", c->prepack ? " prepacked" : "", c->f32_act ? " f32-act" : "", bad, worst);
    free(packed_scalar);
    free(packed);
    free(scalar_out);
    free_case(&d);
    return bad == 0;
}

/* A buffer in a->extra that is not a matching het_cpu_packed is ignored. */
static void test_foreign_extra(void)
{
    struct mm_case c = {HET_TYPE_Q4_0, 64, 9, 2, 1, 1, 0, false, false, false, false};
    struct mm_data d;
    if (!make_case(&c, &d)) return;
    struct het_cpu_packed bogus = {.magic = HET_CPU_PACKED_MAGIC, .type = HET_TYPE_Q4_0, .K = 64, .N = 8};
    d.a.extra = &bogus;
    enum het_status st = run_mm(&d.dst, 2, HET_CPU_ISA_SCALAR, false);
    float got, ref = 0;
    memcpy(&got, d.d_buf, 4);
    for (int k = 0; k < 64; k++) ref += d.a_f[k] * d.b_f[k];
    CHECK(st == HET_OK && fabsf(got - ref) < 0.05f * (1 + fabsf(ref)), "foreign extra: got %g want %g", got, ref);
    CHECK(het_cpu_mul_mat_repack_size(&d.b, HET_CPU_ISA_AVX2) == 0, "f32 has no repack form");
    free_case(&d);
}

/* het_cpu_mul_mat_ahead names exactly the bytes a decode streams: the
 * load-time panels after their header when a->extra holds them, else the
 * rows, with several threads each its share of them in turn; nothing for a
 * batch (M > 4) or another op. */
static void test_ahead(enum het_cpu_isa isa)
{
    for (int64_t M = 1; M <= 5; M += 4) {
        struct mm_case c = {HET_TYPE_Q4_K, 512, 37, M, 2, 2, 0, false, false, false, false};
        struct mm_data d;
        if (!make_case(&c, &d)) return;
        const uint8_t *base = NULL;
        size_t step = 1;
        size_t n = het_cpu_mul_mat_ahead(&d.dst, 1, &base, &step);
        CHECK(M > 4 ? n == 0 : n == het_nbytes(&d.a) && base == d.a_buf, "M=%lld rows: %zu bytes at %p", (long long)M,
              n, (const void *)base);
        n = het_cpu_mul_mat_ahead(&d.dst, 3, &base, &step);
        CHECK(M > 4 || (n == step && step == het_nbytes(&d.a) / 3 / 64 * 64), "M=%lld rows, 3 threads: %zu a thread, "
              "%zu apart", (long long)M, n, step);
        void *packed = attach_packed(&d.a, isa);
        const size_t size = het_cpu_mul_mat_repack_size(&d.a, isa);
        base = NULL;
        n = het_cpu_mul_mat_ahead(&d.dst, 1, &base, &step);
        CHECK(M > 4 ? n == 0
                    : base == (const uint8_t *)packed + HET_CPU_PACKED_HEADER && n == size - HET_CPU_PACKED_HEADER,
              "M=%lld panels (%s): %zu of %zu bytes", (long long)M, het_cpu_isa_name(isa), n, size);
        n = het_cpu_mul_mat_ahead(&d.dst, 2, &base, &step);
        CHECK(M > 4 || (n == step && step == (size - HET_CPU_PACKED_HEADER) / 2 / 64 * 64),
              "M=%lld panels, 2 threads: %zu a thread, %zu apart", (long long)M, n, step);
        CHECK(het_cpu_mul_mat_ahead(&d.b, 2, &base, &step) == 0, "a leaf is no matmul");
        d.a.extra = NULL;
        free(packed);
        free_case(&d);
    }
}

/* A 4-D weight (ne2, ne3 > 1) packed in pieces, and whole: the panels of
 * slice (i2, i3) are those of that slice repacked alone, in i3-major,
 * i2-next order (the layout het_cpu_mul_mat reads). Random bytes: packing
 * moves and decodes them, never rejects them. */
static void test_repack_4d(enum het_cpu_isa best)
{
    static const enum het_type types[] = {HET_TYPE_Q4_0, HET_TYPE_Q8_0, HET_TYPE_Q4_K, HET_TYPE_Q6_K};
    for (int lv = HET_CPU_ISA_SCALAR; lv <= (int)best; lv++)
        for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
            const enum het_cpu_isa isa = (enum het_cpu_isa)lv;
            const int64_t ne[4] = {256, 37, 2, 3};
            struct het_tensor a, v;
            het_tensor_init(&a, types[t], 4, ne);
            uint8_t *bytes = malloc(het_nbytes(&a));
            for (size_t i = 0; i < het_nbytes(&a); i++) bytes[i] = (uint8_t)het_test_rand_u64();
            a.data = bytes;
            const size_t n = het_cpu_mul_mat_repack_size(&a, isa);
            const int64_t items = het_cpu_mul_mat_repack_items(&a, isa);
            CHECK(n > 0 && items > 0 && items % 6 == 0, "%s (%s): %zu bytes, %lld panels", het_type_name(a.type),
                  het_cpu_isa_name(isa), n, (long long)items);
            uint8_t *whole = aligned_alloc(64, (n + 63) & ~(size_t)63), *one = aligned_alloc(64, (n + 63) & ~(size_t)63);
            if (n && whole && one) {
                memset(whole, 0xa5, n);
                CHECK(het_cpu_mul_mat_repack(&a, isa, whole, n) == HET_OK, "repack");
                memset(one, 0xa5, n); /* in pieces of 1, 2, 3, ... panels, first to last */
                for (int64_t lo = 0, len = 1; lo < items; lo += len, len++)
                    CHECK(het_cpu_mul_mat_repack_range(&a, isa, one, n, lo, lo + len < items ? lo + len : items) == HET_OK,
                          "repack in pieces");
                CHECK(!memcmp(one, whole, n), "%s (%s): 4-D panels made in pieces differ", het_type_name(a.type),
                      het_cpu_isa_name(isa));
                const struct het_cpu_packed *h = (const void *)whole;
                const int64_t per = items / 6;
                for (int64_t i3 = 0; i3 < 3; i3++)
                    for (int64_t i2 = 0; i2 < 2; i2++) {
                        het_tensor_init(&v, a.type, 2, ne);
                        v.data = bytes + i2 * a.nb[2] + i3 * a.nb[3];
                        const size_t vn = het_cpu_mul_mat_repack_size(&v, isa);
                        memset(one, 0xa5, vn);
                        CHECK(het_cpu_mul_mat_repack(&v, isa, one, vn) == HET_OK, "repack of a slice");
                        const size_t at = HET_CPU_PACKED_HEADER + (size_t)((i3 * 2 + i2) * per) * h->panel_stride;
                        CHECK(!memcmp(whole + at, one + HET_CPU_PACKED_HEADER, vn - HET_CPU_PACKED_HEADER),
                              "%s (%s): slice (%lld, %lld) is not where it belongs", het_type_name(a.type),
                              het_cpu_isa_name(isa), (long long)i2, (long long)i3);
                    }
            }
            free(whole);
            free(one);
            free(bytes);
            a.data = NULL;
        }
}

/* A 2-D weight's panels in segments a gap apart (the CPU device's layout
 * with several threads, quant_dot.h), made in pieces from the last panel
 * back: every M, from decode's 1 to a batch's, every thread count and way
 * of sharing parts, and decode's runs asking ahead with NTA or T0
 * (het_cpu_stream) give the bytes the panels in one run give, and
 * het_cpu_mul_mat_ahead names segment r for thread r. Panel counts that do not divide
 * into the segments included. */
static void test_segments(enum het_cpu_isa best)
{
    static const enum het_type types[] = {HET_TYPE_Q4_0, HET_TYPE_Q8_0, HET_TYPE_Q4_K, HET_TYPE_Q6_K};
    static const int64_t Ns[] = {149, 128}, Ms[] = {1, 3, 40};
    for (int lv = HET_CPU_ISA_SCALAR; lv <= (int)best; lv++)
        for (size_t t = 0; t < sizeof types / sizeof types[0]; t++)
            for (size_t ni = 0; ni < 2; ni++)
                for (size_t mi = 0; mi < 3; mi++)
                    for (int n_seg = 2; n_seg <= 3; n_seg++) {
                        const enum het_cpu_isa isa = (enum het_cpu_isa)lv;
                        struct mm_case c = {types[t], 256, Ns[ni], Ms[mi], 1, 1, 0, false, false, false, false};
                        struct mm_data d;
                        if (!make_case(&c, &d)) return;
                        const size_t out = sizeof(float) * (size_t)(c.N * c.M);
                        void *whole = attach_packed(&d.a, isa);
                        CHECK(run_mm(&d.dst, 2, isa, false) == HET_OK, "one run");
                        float *ref = malloc(out);
                        memcpy(ref, d.d_buf, out);
                        const size_t sb = het_cpu_mul_mat_seg_bytes(&d.a, isa, n_seg) + 192;
                        const size_t n = HET_CPU_PACKED_HEADER + sb * (size_t)n_seg;
                        uint8_t *seg = aligned_alloc(64, n);
                        memset(seg, 0xa5, n);
                        const int64_t items = het_cpu_mul_mat_repack_items(&d.a, isa);
                        for (int64_t hi = items, len = 1; hi > 0; hi -= len, len++) {
                            const int64_t lo = hi > len ? hi - len : 0;
                            CHECK(het_cpu_mul_mat_repack_seg(&d.a, isa, seg, n_seg, sb, lo, hi) == HET_OK,
                                  "segments: panels [%lld, %lld)", (long long)lo, (long long)hi);
                        }
                        CHECK(het_cpu_mul_mat_repack_seg(&d.a, isa, seg, n_seg, sb - 256, 0, 1) == HET_ERR_INVALID,
                              "segments closer than their panels");
                        d.a.extra = seg;
                        for (int nth = 1; nth <= 3; nth++)
                            for (int shared = 0; shared < 2; shared++)
                                for (int sh = 0; sh < HET_CPU_STREAM_COUNT; sh++) {
                                    memset(d.d_buf, 0, out);
                                    CHECK(run_mm_fn_stream(het_cpu_mul_mat, &d.dst, nth, isa, false, shared,
                                                           (enum het_cpu_stream)sh) == HET_OK, "segments run");
                                    CHECK(!memcmp(d.d_buf, ref, out), "%s (%s) N=%lld M=%lld in %d segments, %d threads "
                                          "(%s, decode runs asking with %s): not the one run's result",
                                          het_type_name(c.type), het_cpu_isa_name(isa), (long long)c.N, (long long)c.M,
                                          n_seg, nth, shared ? "shared" : "static", sh ? "T0" : "NTA");
                                }
                        const uint8_t *base = NULL;
                        size_t step = 0;
                        const size_t an = het_cpu_mul_mat_ahead(&d.dst, n_seg, &base, &step);
                        const int64_t per = (items + n_seg - 1) / n_seg;
                        CHECK(c.M > 4 || (base == seg + HET_CPU_PACKED_HEADER && step == sb &&
                                          an == (size_t)per * ((const struct het_cpu_packed *)(void *)seg)->panel_stride),
                              "ahead: segment r at r * %zu, not %zu", sb, step);
                        d.a.extra = NULL;
                        free(seg);
                        free(whole);
                        free(ref);
                        free_case(&d);
                    }
    /* a 3-D weight is never cut into segments */
    struct mm_case c = {HET_TYPE_Q4_0, 256, 32, 1, 2, 2, 0, false, false, false, false};
    struct mm_data d;
    if (!make_case(&c, &d)) return;
    uint8_t buf[64] __attribute__((aligned(64)));
    CHECK(het_cpu_mul_mat_seg_bytes(&d.a, best, 2) == 0 &&
              het_cpu_mul_mat_repack_seg(&d.a, best, buf, 2, 1 << 20, 0, 1) == HET_ERR_INVALID,
          "a 3-D weight in segments");
    free_case(&d);
}

static void test_supports(void)
{
    struct het_tensor a, b, dst;
    int64_t ane[2] = {64, 8}, bne[2] = {64, 3}, dne[2] = {8, 3};
    het_tensor_init(&a, HET_TYPE_Q4_0, 2, ane);
    het_tensor_init(&b, HET_TYPE_F32, 2, bne);
    het_tensor_init(&dst, HET_TYPE_F32, 2, dne);
    float buf[512];
    a.data = buf; b.data = buf; dst.data = buf;
    dst.op = HET_OP_MUL_MAT;
    dst.src[0] = &a;
    dst.src[1] = &b;
    CHECK(het_cpu_mul_mat_supports(&dst), "q4_0 x f32 should be supported");
    b.type = HET_TYPE_F16;
    CHECK(!het_cpu_mul_mat_supports(&dst), "f16 activations must be refused");
    b.type = HET_TYPE_F32;
    b.ne[0] = 32;
    CHECK(!het_cpu_mul_mat_supports(&dst), "mismatched K must be refused");
    b.ne[0] = 64;
    a.type = HET_TYPE_Q2_K;
    CHECK(!het_cpu_mul_mat_supports(&dst), "q2_K has no kernel and must be refused");
    a.type = HET_TYPE_Q4_0;
    dst.ne[0] = 7;
    CHECK(!het_cpu_mul_mat_supports(&dst), "wrong dst shape must be refused");
}

/* The SIMD dequantisers of the F32-activation path give het_dequantize_row's
 * values bit for bit, on random blocks (random scales, all codes). */
static void test_dequant(enum het_cpu_isa best)
{
    const struct het_mm_kernels *levels[] = { &het_mm_kernels_avx2, &het_mm_kernels_avx512,
                                              &het_mm_kernels_avx512vnni, &het_mm_kernels_amx };
    for (int lv = HET_CPU_ISA_AVX2; lv <= (int)best; lv++) {
        const struct het_mm_kernels *k = levels[lv - HET_CPU_ISA_AVX2];
        for (int t = 0; t < HET_TYPE_COUNT; t++) {
            if (!k->dequant[t]) continue;
            const int64_t bs = het_type_get_traits((enum het_type)t)->blck_size, n = bs * 7;
            const size_t rs = het_type_row_size((enum het_type)t, n);
            uint8_t *row = malloc(rs);
            float *want = malloc(sizeof(float) * (size_t)n), *got = malloc(sizeof(float) * (size_t)n);
            int bad = 0;
            for (int rep = 0; rep < 20; rep++) {
                for (size_t i = 0; i < rs; i++) row[i] = (uint8_t)(het_test_rand_u64() >> 56);
                /* finite fp16 scales (exponent below 31) of any sign and size */
                const size_t ts = het_type_get_traits((enum het_type)t)->type_size;
                for (int64_t b = 0; b < n / bs; b++) {
                    uint8_t *blk = row + (size_t)b * ts;
                    size_t off = t == HET_TYPE_Q6_K ? ts - 2 : 0;
                    blk[off + 1] &= 0xBB;
                    if (t == HET_TYPE_Q4_K) blk[3] &= 0xBB; /* dmin */
                }
                het_dequantize_row((enum het_type)t, row, want, n);
                memset(got, 0xff, sizeof(float) * (size_t)n);
                k->dequant[t](row, got, n);
                bad += memcmp(want, got, sizeof(float) * (size_t)n) != 0;
            }
            CHECK(bad == 0, "%s dequant at %s differs from het_dequantize_row in %d of 20 rows",
                  het_type_name((enum het_type)t), het_cpu_isa_name((enum het_cpu_isa)lv), bad);
            free(row); free(want); free(got);
        }
    }
}

/* Every level's own activation quantiser (a level without one uses the one
 * below) writes het_q8r_quantize_scalar's bytes
 * (quants, |quants|, the block's d, s and integer sums), for rows with an
 * all-zero block, a block of one sign, a block of ties (k + 0.5 at d = 1) and
 * random data. */
static void test_quantize(enum het_cpu_isa best)
{
    const struct het_mm_kernels *levels[] = { &het_mm_kernels_avx2, &het_mm_kernels_avx512,
                                              &het_mm_kernels_avx512vnni, &het_mm_kernels_amx };
    const int64_t K = 32 * 72; /* more blocks than a quantiser may take at once */
    float *x = malloc(sizeof(float) * (size_t)K);
    for (int form = 0; form < 3; form++) { /* plain, with |q|, blocks sharing d in groups of 8 */
        const int with_abs = form == 1;
        struct het_q8r_layout ql;
        het_q8r_layout_init(&ql, K, with_abs);
        if (form == 2) ql.group = HET_Q8R_GROUP_K;
        uint8_t *want = malloc(ql.row_bytes), *got = malloc(ql.row_bytes);
        for (int lv = HET_CPU_ISA_AVX2; lv <= (int)best; lv++) {
            const struct het_mm_kernels *k = levels[lv - HET_CPU_ISA_AVX2];
            if (!k->quantize) continue;
            int bad = 0, bad_d = 0;
            for (int rep = 0; rep < 20; rep++) {
                for (int64_t i = 0; i < K; i++) x[i] = het_test_rand_normal() * (float)(1 + rep);
                for (int64_t i = 0; i < 32; i++) x[i] = 0.0f;                 /* block 0: zeros      */
                for (int64_t i = 32; i < 64; i++) x[i] = -fabsf(x[i]);         /* block 1: negative   */
                /* block 2: d = 127/127 = 1 exactly, so k + 0.5 are ties (to even) */
                for (int64_t i = 64; i < 96; i++) x[i] = (float)(i % 7 - 3) + 0.5f;
                x[64] = 127.0f;
                for (int64_t i = K - 256; i < K; i++) x[i] = 0.0f; /* a whole group of zeros */
                memset(want, 0xaa, ql.row_bytes);
                memset(got, 0x55, ql.row_bytes);
                het_q8r_quantize_scalar(x, &ql, want);
                k->quantize(x, &ql, got);
                bad += memcmp(want, got, ql.row_bytes) != 0;
                /* the scalar one's d: the amax of the block's group / 127 */
                for (int64_t b = 0; b < ql.nb; b++) {
                    float amax = 0;
                    for (int64_t i = (b - b % ql.group) * 32; i < (b - b % ql.group + ql.group) * 32; i++)
                        amax = fmaxf(amax, fabsf(x[i]));
                    bad_d += het_q8r_meta(want, ql.bs, b)->d != amax / 127.0f;
                }
            }
            CHECK(bad == 0, "q8r quantiser at %s (form %d) differs from the scalar one in %d of 20 rows",
                  het_cpu_isa_name((enum het_cpu_isa)lv), form, bad);
            CHECK(bad_d == 0, "q8r quantiser (form %d): %d blocks' d is not their group's amax / 127", form, bad_d);
        }
        free(want);
        free(got);
    }
    free(x);
}

/* A SWIGLU that only the matmul reads, computed by the matmul as it
 * prepares its activations (het_cpu_mul_mat_swiglu): bit for bit the
 * SWIGLU node then the matmul, with the SWIGLU's storage never written.
 * Gate and up dense or strided, decode and batch sizes, load-time panels,
 * F32 activations, 1-3 threads. */
struct sw_case {
    enum het_type type;
    int64_t K, N, M;
    bool strided, prepack, f32_act;
};

static void check_swiglu_case(const struct sw_case *c, enum het_cpu_isa isa)
{
    const struct mm_case mc = { c->type, c->K, c->N, c->M, 1, 1, 0, false, false, false, c->f32_act };
    struct mm_data d;
    if (!make_case(&mc, &d)) {
        CHECK(false, "swiglu %s: cannot build case", het_type_name(c->type));
        return;
    }
    void *packed = c->prepack ? attach_packed(&d.a, isa) : NULL;
    const int64_t K = c->K, M = c->M, ne[2] = { K, M };
    struct het_tensor g, u, sw;
    het_tensor_init(&g, HET_TYPE_F32, 2, ne);
    het_tensor_init(&u, HET_TYPE_F32, 2, ne);
    het_tensor_init(&sw, HET_TYPE_F32, 2, ne);
    const size_t gb = sizeof(float) * (size_t)((K + 3) * (M + 2)) * 2;
    float *gbuf = malloc(gb), *ubuf = malloc(gb), *sbuf = malloc(sizeof(float) * (size_t)(K * M));
    if (c->strided) { /* gate: a transposed view; up: padded, every other element */
        g.nb[0] = sizeof(float) * (size_t)M;
        g.nb[1] = sizeof(float);
        u.nb[0] = 2 * sizeof(float);
        u.nb[1] = 2 * sizeof(float) * (size_t)(K + 3);
        g.nb[2] = g.nb[3] = sizeof(float) * (size_t)(K * M);
        u.nb[2] = u.nb[3] = u.nb[1] * (size_t)M;
    }
    g.data = gbuf;
    u.data = ubuf;
    for (int64_t m = 0; m < M; m++)
        for (int64_t k = 0; k < K; k++) {
            const float vg = 2.0f * het_test_rand_normal(), vu = het_test_rand_normal();
            memcpy((char *)gbuf + k * g.nb[0] + m * g.nb[1], &vg, 4);
            memcpy((char *)ubuf + k * u.nb[0] + m * u.nb[1], &vu, 4);
        }
    sw.op = HET_OP_SWIGLU;
    sw.src[0] = &g;
    sw.src[1] = &u;
    sw.data = sbuf;
    sw.flags = HET_TENSOR_FLAG_ONE_READER;
    d.dst.src[1] = &sw;
    char what[128];
    snprintf(what, sizeof what, "swiglu into mul_mat %s K=%lld N=%lld M=%lld%s%s%s (%s)", het_type_name(c->type),
             (long long)K, (long long)c->N, (long long)M, c->strided ? " strided" : "", c->prepack ? " panels" : "",
             c->f32_act ? " f32-act" : "", het_cpu_isa_name(isa));
    CHECK(het_cpu_mul_mat_takes_swiglu(&sw, &d.dst), "%s: not taken", what);

    /* the nodes one by one */
    const size_t dbytes = d.dst.nb[2] * (size_t)1;
    float *want = malloc(dbytes), *got = malloc(dbytes);
    {
        struct het_cpu_sync sync;
        het_cpu_sync_init(&sync);
        struct het_cpu_worker w;
        het_cpu_worker_init(&w, &sync);
        const struct het_compute_params p = { .ith = 0, .nth = 1, .isa = isa, .worker = &w };
        CHECK(het_cpu_swiglu(&p, &sw) == HET_OK, "%s: swiglu node", what);
    }
    CHECK(run_mm(&d.dst, 2, isa, c->f32_act) == HET_OK, "%s: mul_mat", what);
    memcpy(want, d.d_buf, dbytes);
    for (int nth = 1; nth <= 3; nth++) {
        memset(sbuf, 0xa5, sizeof(float) * (size_t)(K * M));
        memset(d.d_buf, 0, dbytes);
        const enum het_status st = run_mm_fn(het_cpu_mul_mat_swiglu, &d.dst, nth, isa, c->f32_act, true);
        CHECK(st == HET_OK, "%s: status %s (nth %d)", what, het_status_name(st), nth);
        memcpy(got, d.d_buf, dbytes);
        CHECK(!memcmp(got, want, dbytes), "%s: not the nodes' bits (nth %d)", what, nth);
        bool untouched = true;
        for (size_t i = 0; i < sizeof(float) * (size_t)(K * M); i++) untouched = untouched && ((uint8_t *)sbuf)[i] == 0xa5;
        CHECK(untouched, "%s: the swiglu's storage written (nth %d)", what, nth);
    }
    /* not taken: another reader may exist, or the output lies over the gate;
     * the scratch size stays the same (the device keeps it by shapes, not by
     * flags or storage) */
    const size_t ws_taken = het_cpu_mul_mat_work_size(&d.dst, 3, c->f32_act);
    sw.flags = 0;
    CHECK(!het_cpu_mul_mat_takes_swiglu(&sw, &d.dst), "%s: taken without ONE_READER", what);
    CHECK(het_cpu_mul_mat_work_size(&d.dst, 3, c->f32_act) == ws_taken, "%s: scratch size follows the flag", what);
    sw.flags = HET_TENSOR_FLAG_ONE_READER;
    void *dd = d.dst.data;
    d.dst.data = gbuf;
    CHECK(!het_cpu_mul_mat_takes_swiglu(&sw, &d.dst), "%s: taken with the output over the gate", what);
    d.dst.data = dd;
    free(want); free(got); free(gbuf); free(ubuf); free(sbuf);
    free(packed);
    d.a.extra = NULL;
    free_case(&d);
}

/* The AMX level's q4_0 and q8_0 batches (tile sums, packed activations)
 * give avx512vnni's outputs bit for bit: the same integer sums, then the
 * same float operations in the same order. Tails of 16 rows, K in chunks,
 * GQA batches, padded b rows and dst. */
static void test_amx_same_bits(enum het_cpu_isa best)
{
    if (best < HET_CPU_ISA_AMX) {
        fprintf(stderr, "amx: not on this machine (its kernels cannot run here)\n");
        return;
    }
    static const enum het_type types[] = {HET_TYPE_Q4_0, HET_TYPE_Q8_0};
    for (size_t t = 0; t < sizeof types / sizeof *types; t++) {
        const struct mm_case cases[] = {
            {types[t], 96, 40, 16, 1, 1, 0, false, false, true, false},
            {types[t], 160, 33, 83, 1, 1, 1, false, true, true, false},
            {types[t], 7424, 20, 37, 1, 1, 0, false, false, true, false},
            {types[t], 96, 17, 21, 2, 4, 2, false, false, false, false},
        };
        for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
            struct mm_data d;
            if (!make_case(&cases[i], &d)) {
                CHECK(false, "amx: cannot build case");
                continue;
            }
            const size_t dbytes = d.dst.nb[2] * (size_t)cases[i].b2;
            uint8_t *want = malloc(dbytes);
            void *packed = cases[i].prepack ? attach_packed(&d.a, HET_CPU_ISA_AVX512VNNI) : NULL;
            memset(d.d_buf, 0xff, dbytes);
            enum het_status st = run_mm(&d.dst, 2, HET_CPU_ISA_AVX512VNNI, false);
            memcpy(want, d.d_buf, dbytes);
            free(packed);
            d.a.extra = NULL;
            packed = cases[i].prepack ? attach_packed(&d.a, HET_CPU_ISA_AMX) : NULL;
            memset(d.d_buf, 0xff, dbytes);
            if (st == HET_OK) st = run_mm(&d.dst, 2, HET_CPU_ISA_AMX, false);
            int diff = 0;
            for (int64_t bb = 0; bb < cases[i].b2; bb++)
                for (int64_t m = 0; m < cases[i].M; m++) {
                    const size_t o = (size_t)(m * d.dst.nb[1] + bb * d.dst.nb[2]);
                    diff += memcmp(want + o, (uint8_t *)d.d_buf + o, (size_t)cases[i].N * sizeof(float)) != 0;
                }
            CHECK(st == HET_OK && diff == 0, "%s K=%lld N=%lld M=%lld: amx differs from avx512vnni in %d rows (%s)",
                  het_type_name(types[t]), (long long)cases[i].K, (long long)cases[i].N, (long long)cases[i].M, diff,
                  het_status_name(st));
            free(packed);
            free(want);
            free_case(&d);
        }
    }
}

static void test_swiglu_fused(enum het_cpu_isa best)
{
    static const enum het_type types[] = { HET_TYPE_F32, HET_TYPE_F16, HET_TYPE_Q4_0, HET_TYPE_Q8_0, HET_TYPE_Q4_K,
                                           HET_TYPE_Q6_K };
    for (int lv = HET_CPU_ISA_SCALAR; lv <= (int)best; lv++)
        for (size_t t = 0; t < sizeof types / sizeof *types; t++) {
            const enum het_type ty = types[t];
            const bool q = ty != HET_TYPE_F32 && ty != HET_TYPE_F16;
            const int64_t K = q && het_type_get_traits(ty)->blck_size == 256 ? 512 : 96;
            const struct sw_case cases[] = {
                { ty, K, 37, 1, false, false, false }, /* decode */
                { ty, K, 37, 1, true, q, false },
                { ty, K, 70, 3, false, q, false },
                { ty, K, 33, 13, true, q, false },     /* a batch: wide kernels */
                { ty, K, 17, 9, false, false, q },     /* F32 activations */
            };
            for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) check_swiglu_case(&cases[i], (enum het_cpu_isa)lv);
        }
}

int main(void)
{
    het_test_seed(1234);
    test_supports();
    test_foreign_extra();

    struct het_cpu_features f;
    het_cpu_features_detect(&f);
    const enum het_cpu_isa best = het_cpu_isa_select(&f);
    fprintf(stderr, "cpu: avx2=%d avx512=%d vnni=%d; testing up to %s\n", f.avx2, f.avx512, f.avx512_vnni,
            het_cpu_isa_name(best));
    test_dequant(best);
    test_quantize(best);
    test_ahead(best);
    test_repack_4d(best);
    test_segments(best);
    test_swiglu_fused(best);
    test_amx_same_bits(best);

    static const enum het_type qtypes[] = {
        HET_TYPE_Q4_0, HET_TYPE_Q4_1, HET_TYPE_Q5_0, HET_TYPE_Q5_1, HET_TYPE_Q8_0,
        HET_TYPE_Q4_K, HET_TYPE_Q5_K, HET_TYPE_Q6_K,
    };
    static const enum het_type ftypes[] = {HET_TYPE_F32, HET_TYPE_F16, HET_TYPE_BF16};

    for (int lv = HET_CPU_ISA_SCALAR; lv <= (int)best; lv++) {
        const enum het_cpu_isa isa = (enum het_cpu_isa)lv;
        for (size_t t = 0; t < sizeof(qtypes) / sizeof(qtypes[0]); t++) {
            const enum het_type ty = qtypes[t];
            const int64_t bs = het_type_get_traits(ty)->blck_size;
            const int64_t K1 = bs == 256 ? 256 : 32 * 3, K2 = bs == 256 ? 768 : 32 * 5;
            const struct mm_case cases[] = {
                {ty, K1, 1, 1, 1, 1, 0, false, false, false, false},
                {ty, K2, 3, 1, 1, 1, 0, false, false, false, false},
                {ty, K1, 17, 3, 1, 1, 1, false, false, false, false},
                {ty, K2, 33, 4, 1, 1, 0, false, true, false, false},
                {ty, K1, 17, 5, 1, 1, 2, false, false, false, false},
                {ty, K2, 33, 17, 1, 1, 1, false, false, false, false},
                {ty, K1, 40, 33, 1, 1, 0, false, true, false, false},
                {ty, K1, 9, 6, 2, 4, 1, false, false, false, false},     /* GQA broadcast */
                {ty, K2, 3, 9, 1, 2, 2, false, true, false, false},
                {ty, 2 * K2, 130, 12, 1, 1, 0, false, false, false, false},
                {ty, K1, 17, 1, 1, 1, 0, false, false, true, false},   /* load-time panels */
                {ty, K2, 33, 3, 1, 1, 2, false, true, true, false},
                {ty, K1, 9, 6, 2, 4, 1, false, false, true, false},
                {ty, K1, 70, 1, 1, 1, 0, false, false, true, false},   /* decode: runs of panels */
                {ty, K2, 36, 3, 2, 4, 0, false, true, true, false},    /* runs over batches */
                /* one strided b row: each thread quantises it in its first part */
                {ty, K2, 33, 1, 1, 1, 2, false, true, true, false},
                /* rows long enough that the wide kernels split K in chunks */
                {ty, 7424, 20, 9, 1, 1, 0, false, true, true, false},
                /* more rows than one wide call takes (AMX: 64, then a lone group of 16) */
                {ty, K2, 33, 70, 1, 1, 1, false, false, true, false},
                /* F32 activations (exact mode): no int8 rounding allowed for */
                {ty, K1, 1, 1, 1, 1, 0, false, false, false, true},
                {ty, K2, 17, 5, 1, 1, 1, false, true, false, true},
                {ty, K1, 9, 6, 2, 4, 2, false, false, false, true},
                {ty, K2, 33, 17, 1, 1, 2, false, true, true, true}, /* panels present, unused */
            };
            for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                check_case(&cases[i], 2, isa);
                if (i == 5 || i == 7 || i == 15) check_case(&cases[i], 3, isa);
            }
        }
        for (size_t t = 0; t < sizeof(ftypes) / sizeof(ftypes[0]); t++) {
            const enum het_type ty = ftypes[t];
            const struct mm_case cases[] = {
                {ty, 13, 1, 1, 1, 1, 0, false, false, false, false},
                {ty, 172, 7, 3, 1, 1, 1, false, false, false, false},
                {ty, 64, 17, 5, 1, 1, 2, false, true, false, false},
                {ty, 128, 33, 9, 2, 8, 1, false, false, false, false},   /* attention-like GQA */
                {ty, 40, 5, 6, 2, 4, 2, true, false, false, false},      /* transposed a (V^T) */
                {ty, 256, 20, 70, 1, 1, 0, false, false, false, false},
            };
            for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                check_case(&cases[i], 2, isa);
                if (i == 3) check_case(&cases[i], 3, isa);
            }
        }
    }
    return het_test_finish();
}
