/*
 * test_npu_emul.c — the emulated NPU's MUL_MAT through the device vtable
 * (register_memory, prepare_weights, run_split) against scalar references.
 *
 * Bound. With int8 activations the device replaces each activation group a
 * (act_group A = 32 elements, or the whole row) of row x by d_a*q, d_a =
 * amax_a/127, |x_k - d_a q_k| <= d_a/2, so each output may differ from the
 * exact product sum_k W_k x_k (W the GGUF dequantisation) by at most
 * sum_a (d_a/2) sum_{k in a} |W_k|. Every output is checked against that
 * bound (x 1.0001 for the rounding of d and of x*127/amax) plus float
 * slack. A second, tight check compares with the contract computed in
 * double on the same int8 values (sum_a d_a sum_{k in a} W_k q_k): only f32
 * accumulation may differ, bounded by (groups + 8) * 2^-23 *
 * sum_a d_a sum_{k in a} (|s (q - zp)| + |bias|) |q_k|. The tight check is
 * what fails if the device used another group than the test expects: the
 * activations' magnitude changes from one 32-element group to the next.
 * bf16 activations: |x - bf16(x)| <= 2^-9 |x|, bound sum_k |W_k x_k| 2^-9.
 *
 * Cases: every supported weight type, K multiples of 32, odd N and M (M
 * padded to the 32-row tile, several M-chunks), strided and transposed
 * activations, padded dst rows, broadcast of the weights over dims 2 and 3;
 * each run resident (act_group 32, the default), streamed through a tiny
 * staging ring (bit-identical to resident), with the weights in a memfd
 * pool, per-row (act_group K), and with bf16 activations. A NaN in a row
 * gives NaN in that row only (both groups); unwritten outputs are caught by
 * a NaN fill. Bad act_group values are refused. MUL_MAT_ID: the experts as
 * planes, strided ids, one kernel call per expert hit, every output on its
 * row's contract, resident and streamed, and an out-of-range id refused.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "devices/npu/npu_kernel.h"
#include "het/npu.h"
#include "het/pool.h"
#include "het/profile.h"
#include "model/quant_impl.h"
#include "sched/device_impl.h"
#include "testutil.h"

struct mm_case {
    enum het_type type;
    int64_t K, N, M;
    int64_t a2, a3, b2, b3;  /* weight planes and activation batch (broadcast) */
    int     x_mode;          /* 0 dense, 1 padded rows, 2 transposed           */
    bool    dst_pad;
};

struct mm_data {
    struct het_tensor w, x, y;
    uint8_t *w_buf, *x_buf, *y_buf;
    size_t   y_bytes;
    float   *w_f;     /* dequantised weights [plane][N][K]                 */
    float   *w_t;     /* |s (q - zp)| + |bias| per weight (slack)           */
    float   *x_f;     /* activations [b][M][K]                              */
};

/* |scale * (q - zp)| + |bias| of each element of a GGUF row (the terms the
 * NPU sums separately before they cancel). */
static void abs_terms(enum het_type type, const uint8_t *row, int64_t K, float *out)
{
    for (int64_t g = 0; g < K / 32; g++) {
        float s = 0, b = 0;
        int q[32];
        if (type == HET_TYPE_Q4_0 || type == HET_TYPE_Q4_1) {
            const uint8_t *qs = type == HET_TYPE_Q4_0 ? ((const het_block_q4_0 *)row)[g].qs : ((const het_block_q4_1 *)row)[g].qs;
            for (int j = 0; j < 16; j++) { q[j] = qs[j] & 15; q[j + 16] = qs[j] >> 4; }
            if (type == HET_TYPE_Q4_0) {
                s = het_fp16_to_fp32(((const het_block_q4_0 *)row)[g].d);
                for (int j = 0; j < 32; j++) q[j] -= 8;
            } else {
                s = het_fp16_to_fp32(((const het_block_q4_1 *)row)[g].d);
                b = het_fp16_to_fp32(((const het_block_q4_1 *)row)[g].m);
            }
        } else if (type == HET_TYPE_Q8_0) {
            const het_block_q8_0 *bl = (const het_block_q8_0 *)row + g;
            s = het_fp16_to_fp32(bl->d);
            for (int j = 0; j < 32; j++) q[j] = bl->qs[j];
        } else {
            const het_block_q4_k *bl = (const het_block_q4_k *)row + g / 8;
            uint8_t sc, m;
            het_q4k_scale_min((int)(g % 8), bl->scales, &sc, &m);
            s = het_fp16_to_fp32(bl->d) * sc;
            b = het_fp16_to_fp32(bl->dmin) * m;
            const uint8_t *qs = bl->qs + 32 * ((g % 8) / 2);
            for (int j = 0; j < 32; j++) q[j] = (g % 2) ? qs[j] >> 4 : qs[j] & 15;
        }
        for (int j = 0; j < 32; j++) out[g * 32 + j] = fabsf(s * (float)q[j]) + fabsf(b);
    }
}

static void make_case(const struct mm_case *c, struct mm_data *d)
{
    memset(d, 0, sizeof *d);
    const int64_t K = c->K, N = c->N, M = c->M, wp = c->a2 * c->a3, xb = c->b2 * c->b3;
    const int64_t wne[4] = { K, N, c->a2, c->a3 };
    het_tensor_init(&d->w, c->type, 4, wne);
    het_tensor_set_name(&d->w, "w.%s", het_type_name(c->type));
    d->w.flags = HET_TENSOR_FLAG_WEIGHT;
    const size_t rs = het_type_row_size(c->type, K);
    d->w_buf = malloc(rs * (size_t)(N * wp));
    d->w_f = malloc(sizeof(float) * (size_t)(K * N * wp));
    d->w_t = malloc(sizeof(float) * (size_t)(K * N * wp));
    float *tmp = malloc(sizeof(float) * (size_t)K);
    for (int64_t r = 0; r < N * wp; r++) {
        het_test_fill_normal(tmp, (size_t)K, 0.5f);
        uint8_t *row = d->w_buf + (size_t)r * rs;
        het_quantize_row(c->type, tmp, row, K);
        het_dequantize_row(c->type, row, d->w_f + r * K, K);
        abs_terms(c->type, row, K, d->w_t + r * K);
    }
    free(tmp);
    d->w.data = d->w_buf;

    const int64_t xne[4] = { K, M, c->b2, c->b3 };
    het_tensor_init(&d->x, HET_TYPE_F32, 4, xne);
    het_tensor_set_name(&d->x, "x");
    const int64_t kp = K + 5, mp = M + 3;
    if (c->x_mode == 1) d->x.nb[1] = sizeof(float) * (size_t)kp;
    if (c->x_mode == 2) { d->x.nb[0] = sizeof(float) * (size_t)mp; d->x.nb[1] = sizeof(float); }
    if (c->x_mode) {
        d->x.nb[2] = sizeof(float) * (size_t)(kp * mp);
        d->x.nb[3] = d->x.nb[2] * (size_t)c->b2;
    }
    d->x_buf = calloc((size_t)(kp * mp * xb), sizeof(float));
    d->x_f = malloc(sizeof(float) * (size_t)(K * M * xb));
    for (int64_t i = 0; i < K * M * xb; i++) {
        static const float mag[3] = { 0.1f, 2.0f, 0.7f }, gmag[4] = { 1.0f, 8.0f, 0.25f, 2.0f };
        const int64_t k = i % K, m = (i / K) % M, b = i / (K * M);
        d->x_f[i] = het_test_rand_normal() * mag[m % 3] * gmag[(k / 32 + m) % 4];   /* scale differs per group */
        memcpy(d->x_buf + k * d->x.nb[0] + m * d->x.nb[1] + (b % c->b2) * d->x.nb[2] + (b / c->b2) * d->x.nb[3],
               &d->x_f[i], 4);
    }
    d->x.data = d->x_buf;

    const int64_t yne[4] = { N, M, c->b2, c->b3 };
    het_tensor_init(&d->y, HET_TYPE_F32, 4, yne);
    het_tensor_set_name(&d->y, "y");
    if (c->dst_pad) {
        d->y.nb[1] = sizeof(float) * (size_t)(N + 7);
        d->y.nb[2] = d->y.nb[1] * (size_t)M;
        d->y.nb[3] = d->y.nb[2] * (size_t)c->b2;
    }
    d->y_bytes = d->y.nb[3] * (size_t)c->b3;
    d->y_buf = malloc(d->y_bytes);
    d->y.data = d->y_buf;
    d->y.op = HET_OP_MUL_MAT;
    d->y.src[0] = &d->w;
    d->y.src[1] = &d->x;
}

static void free_case(struct mm_data *d)
{
    free(d->w_buf); free(d->x_buf); free(d->y_buf); free(d->w_f); free(d->w_t); free(d->x_f);
}

static float y_at(const struct mm_data *d, int64_t n, int64_t m, int64_t b2, int64_t b3)
{
    float v;
    memcpy(&v, d->y_buf + n * d->y.nb[0] + m * d->y.nb[1] + b2 * d->y.nb[2] + b3 * d->y.nb[3], 4);
    return v;
}

/* Check every output against the bounds (ag: int8 activation group, 32 or
 * K; 0: bf16); returns the number of bad ones. */
static int check_outputs(const struct mm_case *c, const struct mm_data *d, int64_t ag, const char *label)
{
    const int64_t K = c->K, N = c->N, M = c->M;
    const enum het_npu_act act = ag ? HET_NPU_ACT_INT8 : HET_NPU_ACT_BF16;
    int8_t *q = malloc((size_t)K);
    float *dg = malloc(sizeof(float) * (size_t)K);
    int bad = 0;
    double worst_q = 0, worst_c = 0;
    for (int64_t b3 = 0; b3 < c->b3; b3++)
        for (int64_t b2 = 0; b2 < c->b2; b2++) {
            const int64_t plane = (b3 / (c->b3 / c->a3)) * c->a2 + b2 / (c->b2 / c->a2);
            for (int64_t m = 0; m < M; m++) {
                const float *x = d->x_f + ((b3 * c->b2 + b2) * M + m) * K;
                if (ag) het_npu_quantize_row_i8(x, K, ag, q, dg);
                for (int64_t n = 0; n < N; n++) {
                    const float *w = d->w_f + (plane * N + n) * K, *t = d->w_t + (plane * N + n) * K;
                    double ref = 0, contract = 0, wabs_d = 0, mag = 0, tq_d = 0;
                    for (int64_t k = 0; k < K; k++) {
                        const double dk = ag ? dg[k / ag] : 0.0;   /* the scale of k's activation group */
                        ref += (double)w[k] * x[k];
                        wabs_d += fabs(w[k]) * dk;
                        mag += fabs((double)w[k] * x[k]);
                        contract += (double)w[k] * q[k] * dk;
                        tq_d += (double)t[k] * abs(q[k]) * dk;
                    }
                    const double got = y_at(d, n, m, b2, b3);
                    double bound, slack, cerr = 0, ctol = 1;
                    if (act == HET_NPU_ACT_INT8) {
                        bound = 1.0001 * wabs_d / 2.0;        /* sum_a (d_a/2) sum_{k in a} |W_k| */
                        slack = (double)(K / 32 + 8) * 0x1p-23 * tq_d + 1e-30;
                        cerr = fabs(got - contract);
                        ctol = slack;
                    } else {
                        bound = mag * 0x1p-9;
                        slack = (double)(K + 8) * 0x1p-23 * mag + 1e-30;
                    }
                    const double e = fabs(got - ref);
                    if (!(e <= bound + slack) || !(cerr <= ctol)) {
                        if (bad++ < 3)
                            fprintf(stderr, "  %s n=%lld m=%lld b=%lld,%lld: got %.9g ref %.9g (bound %.3g) contract %.9g "
                                    "(tol %.3g)\n", label, (long long)n, (long long)m, (long long)b2, (long long)b3, got,
                                    ref, bound + slack, contract, ctol);
                    }
                    if (bound + slack > 0) worst_q = fmax(worst_q, e / (bound + slack));
                    if (act == HET_NPU_ACT_INT8) worst_c = fmax(worst_c, cerr / ctol);
                }
            }
        }
    free(q);
    free(dg);
    CHECK(bad == 0, "%s %s K=%lld N=%lld M=%lld w=%lldx%lld x=%lldx%lld mode=%d%s: %d outputs out of bound "
          "(worst err/bound %.3f, contract %.3f)", label, het_type_name(c->type), (long long)K, (long long)N,
          (long long)M, (long long)c->a2, (long long)c->a3, (long long)c->b2, (long long)c->b3, c->x_mode,
          c->dst_pad ? " dst-padded" : "", bad, worst_q, worst_c);
    return bad;
}

enum run_kind { RUN_RESIDENT, RUN_STREAMED, RUN_POOL, RUN_ROW, RUN_BF16 };
static const char *run_name[] = { "resident", "streamed", "pool", "per-row", "bf16" };

static size_t g_staging;   /* staging slot for the streamed run: 1.5 tile columns of the case */

static het_device *make_device(enum run_kind kind, het_pool *pool, het_error *err)
{
    struct het_npu_params p;
    het_npu_params_default(&p, HET_NPU_EMULATE);
    p.no_cache = true;
    p.n_threads = 2;
    if (kind == RUN_STREAMED) {
        p.pin_budget = 1;             /* nothing fits: every weight streams */
        p.staging_bytes = g_staging;  /* one tile column per chunk          */
    }
    if (kind == RUN_POOL) p.pool = pool;
    p.act_group = kind == RUN_ROW ? HET_NPU_ACT_GROUP_ROW : HET_NPU_ACT_GROUP_32;
    if (kind == RUN_BF16) p.act = HET_NPU_ACT_BF16;
    return het_npu_device_init_params(&p, err);
}

/* Run one case on one device; returns the output bytes (caller frees). */
static uint8_t *run_case(const struct mm_case *c, struct mm_data *d, enum run_kind kind, het_pool *pool)
{
    het_error err = {0};
    het_device *dev = make_device(kind, pool, &err);
    CHECK(dev != NULL, "device (%s): %s", run_name[kind], err.msg);
    if (!dev) return NULL;
    memset(d->y_buf, 0xff, d->y_bytes);                 /* NaN: unwritten outputs fail */
    d->w.extra = NULL;
    struct het_tensor *wp = &d->w, *node = &d->y;
    enum het_status st = het_device_register_memory(dev, d->x_buf, 4096, HET_MEMORY_SCRATCH, &err);
    if (st == HET_OK) st = het_device_prepare_weights(dev, &wp, 1, &err);
    CHECK(het_device_supports_op(dev, node), "%s: supports_op false for %s K=%lld", run_name[kind],
          het_type_name(c->type), (long long)c->K);
    if (st == HET_OK) st = het_device_run_split(dev, &node, 1, &err);
    CHECK(st == HET_OK, "%s run: %s", run_name[kind], err.msg);
    struct het_npu_stats s;
    het_npu_get_stats(dev, &s);
    const int64_t mt = c->M == 1 ? 1 : 32, mtot = (c->M + mt - 1) / mt * mt;
    CHECK(s.matmuls == 1 && s.padded_rows == (uint64_t)((mtot - c->M) * c->b2 * c->b3),
          "%s: matmuls %llu padded rows %llu, expected %lld", run_name[kind], (unsigned long long)s.matmuls,
          (unsigned long long)s.padded_rows, (long long)((mtot - c->M) * c->b2 * c->b3));
    if (kind == RUN_STREAMED) {   /* every plane, one tile column per chunk */
        struct het_npu_wdesc one;
        const int64_t ne1[4] = { c->K, 32, 1, 1 };
        het_npu_layout_plan(&one, c->type, ne1, NULL);
        const uint64_t want = (uint64_t)one.total_bytes * (uint64_t)((c->N + 31) / 32) * (uint64_t)(c->b2 * c->b3);
        CHECK(s.streamed_bytes == want, "streamed %llu bytes, expected %llu", (unsigned long long)s.streamed_bytes,
              (unsigned long long)want);
    }
    else
        CHECK(s.streamed_bytes == 0, "%s run streamed %llu bytes", run_name[kind], (unsigned long long)s.streamed_bytes);
    check_outputs(c, d, kind == RUN_BF16 ? 0 : kind == RUN_ROW ? c->K : 32, run_name[kind]);
    uint8_t *out = malloc(d->y_bytes);
    memcpy(out, d->y_buf, d->y_bytes);
    het_device_free(dev);
    return out;
}

static void check_case(const struct mm_case *c, het_pool *pool)
{
    struct mm_data d;
    make_case(c, &d);
    struct het_npu_wdesc one;
    const int64_t ne1[4] = { c->K, 32, 1, 1 };
    het_npu_layout_plan(&one, c->type, ne1, NULL);
    g_staging = one.total_bytes * 3 / 2;
    uint8_t *res = run_case(c, &d, RUN_RESIDENT, pool);
    uint8_t *str = run_case(c, &d, RUN_STREAMED, pool);
    uint8_t *pol = pool ? run_case(c, &d, RUN_POOL, pool) : NULL;
    uint8_t *row = run_case(c, &d, RUN_ROW, pool);
    free(run_case(c, &d, RUN_BF16, pool));
    if (res && row) CHECK(memcmp(res, row, d.y_bytes) != 0, "%s: per-row output equals per-32", het_type_name(c->type));
    free(row);
    if (res && str) CHECK(memcmp(res, str, d.y_bytes) == 0, "%s: streamed output differs from resident", het_type_name(c->type));
    if (res && pol) CHECK(memcmp(res, pol, d.y_bytes) == 0, "%s: pool output differs from resident", het_type_name(c->type));
    free(res);
    free(str);
    free(pol);
    free_case(&d);
}

/* inf in one activation row: that row's outputs are NaN, the others exact as before (both groups). */
static void check_nonfinite_row(enum run_kind kind)
{
    const struct mm_case c = { HET_TYPE_Q8_0, 64, 35, 3, 1, 1, 1, 1, 0, false };
    struct mm_data d;
    make_case(&c, &d);
    const float inf = INFINITY;
    memcpy(d.x_buf + 5 * d.x.nb[0] + 1 * d.x.nb[1], &inf, 4);
    het_error err = {0};
    het_device *dev = make_device(kind, NULL, &err);
    struct het_tensor *node = &d.y;
    CHECK(dev && het_device_run_split(dev, &node, 1, &err) == HET_OK, "run: %s", err.msg);
    int nan_row = 0, nan_other = 0;
    for (int64_t m = 0; m < c.M; m++)
        for (int64_t n = 0; n < c.N; n++) {
            const bool isn = isnan(y_at(&d, n, m, 0, 0));
            if (m == 1) nan_row += isn; else nan_other += isn;
        }
    CHECK(nan_row == c.N && nan_other == 0, "%s: inf in row 1: %d NaN in that row, %d elsewhere", run_name[kind],
          nan_row, nan_other);
    struct het_npu_stats s;
    het_npu_get_stats(dev, &s);
    CHECK(s.lazy_repacks == 1, "an unprepared weight was not repacked at first use (%llu)",
          (unsigned long long)s.lazy_repacks);
    het_device_free(dev);
    free_case(&d);
}

/* The contract's activation rounding: d = amax/127, |q| <= 127, the largest
 * element maps to +-127, every |x - d q| <= d/2 (round to nearest), ties to
 * even; per group: each group's scale from its own amax, a non-finite value
 * poisons only its group's scale. */
static void check_quantize_rows(void)
{
    enum { K = 256 };
    float x[K], dg[K / 32];
    int8_t q[K], q1[K];
    int bad = 0;
    for (int trial = 0; trial < 200; trial++) {
        const float scale = trial % 3 == 0 ? 1e-3f : trial % 3 == 1 ? 1.0f : 300.0f;
        het_test_fill_normal(x, K, scale);
        if (trial % 10 == 0) for (int k = 0; k < K; k += 2) x[k] = 0.0f;
        if (trial % 7 == 0) for (int k = 64; k < 96; k++) x[k] = 0.0f;   /* an all-zero group */
        for (int k = 0; k < K; k++) x[k] *= (float)(1 + (k / 32) % 5);  /* groups of different size */
        const float d = het_npu_quantize_group_i8(x, K, q);
        float amax = 0;
        for (int k = 0; k < K; k++) amax = fmaxf(amax, fabsf(x[k]));
        bad += d != amax / 127.0f;
        for (int k = 0; k < K; k++) {
            bad += q[k] == -128;
            bad += fabs((double)x[k] - (double)d * q[k]) > 0.5000001 * d;
            if (fabsf(x[k]) == amax) bad += abs(q[k]) != 127;
        }
        het_npu_quantize_row_i8(x, K, K, q1, dg);                  /* group K: the row function */
        bad += dg[0] != d || memcmp(q, q1, K) != 0;
        het_npu_quantize_row_i8(x, K, 32, q1, dg);
        for (int g = 0; g < K / 32; g++) {
            float ga = 0;
            for (int k = g * 32; k < g * 32 + 32; k++) ga = fmaxf(ga, fabsf(x[k]));
            bad += dg[g] != ga / 127.0f;
            for (int k = g * 32; k < g * 32 + 32; k++) {
                bad += q1[k] == -128 || fabs((double)x[k] - (double)dg[g] * q1[k]) > 0.5000001 * dg[g];
                if (fabsf(x[k]) == ga && ga > 0) bad += abs(q1[k]) != 127;
                if (ga == 0) bad += q1[k] != 0;
            }
        }
    }
    /* exact ties: amax 127 gives d = 1, so x = 2.5 -> 2 and 3.5 -> 4 (half to even), -0.5 -> 0 */
    for (int k = 0; k < K; k++) x[k] = 0.0f;
    x[0] = 127.0f; x[1] = 2.5f; x[2] = 3.5f; x[3] = -0.5f; x[4] = -1.5f;
    const float d = het_npu_quantize_group_i8(x, K, q);
    bad += d != 1.0f || q[0] != 127 || q[1] != 2 || q[2] != 4 || q[3] != 0 || q[4] != -2;
    for (int k = 0; k < K; k++) x[k] = 0.0f;
    bad += het_npu_quantize_group_i8(x, K, q) != 0.0f || q[7] != 0;
    /* a NaN in group 2: only that group's scale is NaN (the kernel turns the whole row NaN) */
    het_test_fill_normal(x, K, 1.0f);
    x[70] = NAN;
    het_npu_quantize_row_i8(x, K, 32, q1, dg);
    for (int g = 0; g < K / 32; g++) bad += (g == 2) != (bool)isnan(dg[g]);
    for (int k = 64; k < 96; k++) bad += q1[k] != 0;
    CHECK(bad == 0, "activation quantisation broke the contract %d times", bad);
}

/* act_group values: 32 and per-row accepted (description says which), others refused. */
static void check_act_group_params(void)
{
    het_error err = {0};
    struct het_npu_params p;
    het_npu_params_default(&p, HET_NPU_EMULATE);
    p.no_cache = true;
    static const struct { int ag; const char *env; const char *desc; } ok[] = {
        { 0, NULL, "int8 per-32" }, { 32, "row", "int8 per-32" }, { HET_NPU_ACT_GROUP_ROW, NULL, "int8 per-row" },
        { 0, "row", "int8 per-row" }, { 0, "32", "int8 per-32" },
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        if (ok[i].env) setenv("HET_NPU_ACT_GROUP", ok[i].env, 1);
        else unsetenv("HET_NPU_ACT_GROUP");
        p.act_group = ok[i].ag;
        het_device *dev = het_npu_device_init_params(&p, &err);
        CHECK(dev && strstr(het_device_description(dev), ok[i].desc), "act_group %d env %s: %s", ok[i].ag,
              ok[i].env ? ok[i].env : "-", dev ? het_device_description(dev) : err.msg);
        het_device_free(dev);
    }
    unsetenv("HET_NPU_ACT_GROUP");
    const int bad_ag[] = { 64, 1, -2 };
    for (size_t i = 0; i < sizeof bad_ag / sizeof bad_ag[0]; i++) {
        p.act_group = bad_ag[i];
        het_device *dev = het_npu_device_init_params(&p, &err);
        CHECK(!dev && err.status == HET_ERR_INVALID && strstr(err.msg, "act_group"), "act_group %d accepted (%s)",
              bad_ag[i], err.msg);
        het_device_free(dev);
    }
    setenv("HET_NPU_ACT_GROUP", "16", 1);
    p.act_group = 0;
    het_device *dev = het_npu_device_init_params(&p, &err);
    CHECK(!dev && err.status == HET_ERR_INVALID && strstr(err.msg, "HET_NPU_ACT_GROUP='16'"), "env 16: %s", err.msg);
    het_device_free(dev);
    unsetenv("HET_NPU_ACT_GROUP");
}

static void check_device_api(void)
{
    het_error err = {0};
    het_device *dev = het_npu_device_init(HET_NPU_EMULATE, &err);
    CHECK(dev != NULL, "emulated device: %s", err.msg);
    if (!dev) return;
    CHECK(strcmp(het_device_name(dev), "npu") == 0, "name '%s'", het_device_name(dev));
    CHECK(strstr(het_device_description(dev), "(emulated)") != NULL, "desc '%s'", het_device_description(dev));
    CHECK(het_device_is_emulated(dev) && het_device_kind(dev) == HET_DEVICE_NPU && het_npu_is_npu(dev), "flags");
    const struct het_npu_profile *p = het_npu_get_profile(dev);
    CHECK(p && p->emulated && fabs(p->dispatch_us - 150.0) < 1e-9 && fabs(p->weight_gbps - 38.5) < 1e-9,
          "default XDNA1 profile");
    /* 0.15 ms + bytes / 38.5 GB/s: a 4096 x 4096 q4_0 GEMV (layout 5 bpw = 10.5 MB) ~ 0.42 ms */
    const double t = het_npu_profile_matmul_us(p, HET_TYPE_Q4_0, 4096, 4096, 1);
    CHECK(t > 150.0 + 10485760.0 / 38.5e3 - 1 && t < 150.0 + 10485760.0 / 38.5e3 + 20, "GEMV prediction %.1f us", t);
    CHECK(het_npu_profile_matmul_us(p, HET_TYPE_Q4_0, 4096, 4096, 512) > t, "prefill not dearer than decode");
    /* caps: synchronous, lossy, on the CPU's cores and mapping, never timed */
    const struct het_device_caps *caps = het_device_get_caps(dev);
    CHECK(!caps->async && caps->lossy && caps->host_mapped && caps->shares_cpu_cores && !caps->host_timed &&
          caps->repacks_weights, "emulated NPU caps");
    /* its default profile is its own cost model (the one NPU model), with its caps */
    het_profile *hp = het_profile_default(dev);
    CHECK(hp != NULL, "default profile");
    if (hp) {
        struct het_cost_fit f;
        CHECK(het_profile_get_fit(hp, HET_OPCLASS_MATMUL, HET_TYPE_Q4_K, &f), "q4_K fit");
        CHECK(!het_profile_get_fit(hp, HET_OPCLASS_MATMUL, HET_TYPE_Q6_K, &f), "q6_K fit on the NPU");
        CHECK(strstr(het_profile_label(hp), "NPU XDNA1 cost model") && !het_profile_is_measured(hp), "label '%s'",
              het_profile_label(hp));
        struct het_profile_device_costs dc;
        het_profile_get_device_costs(hp, &dc);
        CHECK(!dc.async && dc.lossy && dc.shares_cpu_cores && dc.kernel_switch_us == p->switch_us,
              "profile costs: async %d lossy %d shares %d", dc.async, dc.lossy, dc.shares_cpu_cores);
        /* the fitted profile follows the formula: a 4096 x 4096 q4_0 GEMV */
        struct het_op_cost c = { .cls = HET_OPCLASS_MATMUL, .wtype = HET_TYPE_Q4_0, .m = 1,
                                 .flops = 2.0 * 4096 * 4096, .bytes = 4096.0 * 4096 * 18 / 32 + 8192 * 4.0 };
        double fit_us = het_profile_predict_cost(hp, &c);
        CHECK(fabs(fit_us / t - 1) < 0.15, "profile GEMV %.1f us vs cost model %.1f us", fit_us, t);
        het_profile_free(hp);
    }
    enum het_npu_mode m;
    CHECK(het_npu_parse_mode("emulate", &m, &err) == HET_OK && m == HET_NPU_EMULATE, "parse emulate");
    CHECK(het_npu_parse_mode("hw", &m, &err) == HET_OK && m == HET_NPU_HARDWARE, "parse hw");
    CHECK(het_npu_parse_mode("", &m, &err) == HET_OK && m == HET_NPU_OFF, "parse empty");
    CHECK(het_npu_parse_mode("gpu", &m, &err) == HET_ERR_INVALID && strstr(err.msg, "gpu"), "parse gpu: %s", err.msg);
    CHECK(het_npu_device_init(HET_NPU_OFF, &err) == NULL && err.status == HET_ERR_INVALID, "mode off accepted");
    het_device_free(dev);
    het_device_free(NULL);
}

/* MUL_MAT_ID: E experts as the planes of one weight (make_case with a2 = E),
 * x (K, n_b, T) as the case's activations (M = n_b, b2 = T), ids (k, T)
 * strided in both dims, dst (N, k, T) with padded rows. Every output is
 * checked against the int8 contract of its own (slot, token) row, tightly;
 * the stats count one kernel call per expert hit; a bad id is an error. */
static void check_mul_mat_id(enum het_type type, int64_t K, int64_t n_b, enum run_kind kind)
{
    const int64_t E = 5, k = 3, T = 6, N = 37;
    const struct mm_case c = { type, K, N, n_b, E, 1, T, 1, n_b == 1 ? 0 : 1, false };
    struct mm_data d;
    make_case(&c, &d);
    struct het_npu_wdesc one;
    const int64_t ne1[4] = { K, 32, 1, 1 };
    het_npu_layout_plan(&one, type, ne1, NULL);
    g_staging = one.total_bytes * 3 / 2;
    /* ids: element (s, t) at byte 8 s + (8 k + 4) t; experts 1 and 3 never chosen when n_b == 1 */
    const size_t inb0 = 8, inb1 = 8 * (size_t)k + 4;
    uint8_t *ibuf = calloc(inb1 * (size_t)T, 1);
    int32_t want_calls = 0;
    bool hit[5] = { false };
    for (int64_t t = 0; t < T; t++)
        for (int64_t s = 0; s < k; s++) {
            static const int32_t pick_all[3] = { 0, 2, 4 };
            int32_t e = n_b == 1 ? pick_all[(s + t) % 3] : (int32_t)((t + 2 * s) % E);
            memcpy(ibuf + (size_t)s * inb0 + (size_t)t * inb1, &e, 4);
            if (!hit[e]) want_calls++;
            hit[e] = true;
        }
    struct het_tensor ids, y;
    const int64_t ine[4] = { k, T, 1, 1 }, yne[4] = { N, k, T, 1 };
    het_tensor_init(&ids, HET_TYPE_I32, 2, ine);
    ids.nb[0] = inb0;
    ids.nb[1] = inb1;
    ids.nb[2] = ids.nb[3] = inb1 * (size_t)T;
    ids.data = ibuf;
    het_tensor_init(&y, HET_TYPE_F32, 3, yne);
    y.nb[1] = sizeof(float) * (size_t)(N + 3);
    y.nb[2] = y.nb[1] * (size_t)k;
    y.nb[3] = y.nb[2] * (size_t)T;
    uint8_t *ybuf = malloc(y.nb[3]);
    memset(ybuf, 0xff, y.nb[3]); /* NaN: unwritten outputs fail */
    y.data = ybuf;
    y.op = HET_OP_MUL_MAT_ID;
    y.src[0] = &d.w;
    y.src[1] = &d.x;
    y.src[2] = &ids;
    het_error err = {0};
    het_device *dev = make_device(kind, NULL, &err);
    CHECK(dev != NULL, "mul_mat_id device: %s", err.msg);
    if (!dev) goto out;
    struct het_tensor *wp = &d.w, *node = &y;
    d.w.extra = NULL;
    enum het_status st = het_device_prepare_weights(dev, &wp, 1, &err);
    CHECK(het_device_supports_op(dev, node), "mul_mat_id %s: supports_op false", het_type_name(type));
    if (st == HET_OK) st = het_device_run_split(dev, &node, 1, &err);
    CHECK(st == HET_OK, "mul_mat_id %s %s: %s", het_type_name(type), run_name[kind], err.msg);
    struct het_npu_stats ns;
    het_npu_get_stats(dev, &ns);
    CHECK(ns.matmuls == (uint64_t)want_calls, "mul_mat_id %s: %llu kernel calls, want one per expert hit (%d)",
          het_type_name(type), (unsigned long long)ns.matmuls, want_calls);
    int8_t *q = malloc((size_t)K);
    float *dg = malloc(sizeof(float) * (size_t)K);
    int bad = 0;
    for (int64_t t = 0; t < T; t++)
        for (int64_t s = 0; s < k; s++) {
            int32_t e;
            memcpy(&e, ibuf + (size_t)s * inb0 + (size_t)t * inb1, 4);
            const float *x = d.x_f + (t * n_b + s % n_b) * K;
            het_npu_quantize_row_i8(x, K, 32, q, dg);
            for (int64_t n = 0; n < N; n++) {
                const float *w = d.w_f + (e * N + n) * K, *tt = d.w_t + (e * N + n) * K;
                double contract = 0, tq_d = 0;
                for (int64_t i = 0; i < K; i++) {
                    contract += (double)w[i] * q[i] * dg[i / 32];
                    tq_d += (double)tt[i] * abs(q[i]) * dg[i / 32];
                }
                float got;
                memcpy(&got, ybuf + (size_t)n * 4 + (size_t)s * y.nb[1] + (size_t)t * y.nb[2], 4);
                const double tol = (double)(K / 32 + 8) * 0x1p-23 * tq_d + 1e-30;
                if (!(fabs(got - contract) <= tol) && bad++ < 3)
                    fprintf(stderr, "  mul_mat_id n=%lld s=%lld t=%lld: got %.9g contract %.9g\n", (long long)n,
                            (long long)s, (long long)t, got, contract);
            }
        }
    CHECK(bad == 0, "mul_mat_id %s K=%lld n_b=%lld %s: %d outputs off the contract", het_type_name(type),
          (long long)K, (long long)n_b, run_name[kind], bad);
    free(q);
    free(dg);
    int32_t wrong = (int32_t)E;
    memcpy(ibuf + inb0 + inb1, &wrong, 4);
    st = het_device_run_split(dev, &node, 1, &err);
    CHECK(st == HET_ERR_INVALID && strstr(err.msg, "outside"), "mul_mat_id with expert id %d: status %d (%s)",
          (int)wrong, (int)st, err.msg);
    het_device_free(dev);
out:
    free(ybuf);
    free(ibuf);
    free_case(&d);
}

int main(void)
{
    unsetenv("HET_NPU_ACT_GROUP");   /* the default (32) unless a run says otherwise */
    het_test_seed(77);
    struct het_pool_params pp = { .size = (size_t)64 << 20, .n_order = 1, .order = { HET_POOL_BACKING_MEMFD } };
    het_error err = {0};
    het_pool *pool = het_pool_init(&pp, &err);
    CHECK(pool != NULL, "memfd pool: %s", err.msg);
    const struct mm_case cases[] = {
        { HET_TYPE_Q4_0,  96, 45,  1, 1, 1, 1, 1, 0, false },  /* decode GEMV           */
        { HET_TYPE_Q4_1,  64, 77, 37, 1, 1, 1, 1, 2, false },  /* M padded, x^T         */
        { HET_TYPE_Q8_0, 160, 33,  5, 1, 1, 1, 1, 1, true  },  /* strided x, padded dst */
        { HET_TYPE_Q4_K, 512, 40, 33, 2, 1, 4, 1, 1, true  },  /* broadcast over dim 2  */
        { HET_TYPE_Q4_0, 128, 70,  3, 1, 2, 3, 2, 2, false },  /* broadcast dims 2 and 3 */
        { HET_TYPE_Q4_K, 256, 31,  1, 1, 1, 1, 1, 2, false },  /* GEMV, N < one tile     */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) check_case(&cases[i], pool);
    check_nonfinite_row(RUN_RESIDENT);
    check_nonfinite_row(RUN_ROW);
    check_mul_mat_id(HET_TYPE_Q4_0, 96, 1, RUN_RESIDENT);
    check_mul_mat_id(HET_TYPE_Q8_0, 64, 3, RUN_RESIDENT);
    check_mul_mat_id(HET_TYPE_Q4_K, 256, 3, RUN_STREAMED);
    check_mul_mat_id(HET_TYPE_Q4_1, 64, 1, RUN_STREAMED);
    check_quantize_rows();
    check_act_group_params();
    check_device_api();
    het_pool_free(pool);
    return het_test_finish();
}
