/*
 * attn_avx2.c — AVX2/FMA/F16C inner kernels of the CPU fused attention.
 *
 * Contracts in devices/cpu/attention.h. Key and value rows are read either
 * as F32 or straight from an F16 cache (converted in registers with F16C),
 * so the cache is never copied. Both products are register-blocked so each
 * loaded vector feeds several FMAs:
 *  - QK: 3 query rows x 4 keys, 12 accumulators running along head_dim,
 *    reduced to 4 scores per row with an hadd tree (1 key at a time for the
 *    last nk % 4 keys).
 *  - PV: 6 query rows x 16 output columns, 12 accumulators; per key, two V
 *    loads and six broadcasts of P feed 12 FMAs.
 * Row remainders reuse the code with fewer rows: the row count is a
 * compile-time constant in each instantiation, so accumulators stay in
 * registers.
 */
#include <immintrin.h>

#include "devices/cpu/arch/avx2/vmath_avx2.h"
#include "devices/cpu/attention.h"
#include "devices/cpu/vec.h"

#define QK_ROWS 3
#define QK_KEYS 4
#define PV_ROWS 6
#define PV_COLS 16 /* two vectors */

#define INLINE static inline __attribute__((always_inline))

/* 8 elements of an F16 (F16 != 0) or F32 row starting at element d. */
INLINE __m256 load8(const int F16, const char *row, int d)
{
    if (F16) return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(row + 2 * (size_t)d)));
    return _mm256_loadu_ps((const float *)(row + 4 * (size_t)d));
}

/* ---- QK ------------------------------------------------------------------- */

/* Scores of NR query rows against NK (1 or 4) keys starting at row k. */
INLINE void qk_block(const int F16, const int NR, const int NK, int hdp, const float *q, const char *k, size_t ldk,
                     float *s, int lds)
{
    __m256 acc[QK_ROWS][QK_KEYS];
#pragma GCC unroll 4
    for (int r = 0; r < NR; r++)
#pragma GCC unroll 4
        for (int c = 0; c < NK; c++) acc[r][c] = _mm256_setzero_ps();

    for (int d = 0; d < hdp; d += 8) {
        __m256 qv[QK_ROWS];
#pragma GCC unroll 4
        for (int r = 0; r < NR; r++) qv[r] = _mm256_load_ps(q + r * hdp + d);
#pragma GCC unroll 4
        for (int c = 0; c < NK; c++) {
            __m256 kv = load8(F16, k + c * ldk, d);
#pragma GCC unroll 4
            for (int r = 0; r < NR; r++) acc[r][c] = _mm256_fmadd_ps(qv[r], kv, acc[r][c]);
        }
    }
#pragma GCC unroll 4
    for (int r = 0; r < NR; r++) {
        if (NK == 1) { s[r * lds] = het_avx2_hsum(acc[r][0]); continue; }
        __m256 t0 = _mm256_hadd_ps(acc[r][0], acc[r][1]);
        __m256 t1 = _mm256_hadd_ps(acc[r][2], acc[r][3]);
        __m256 t2 = _mm256_hadd_ps(t0, t1);
        _mm_storeu_ps(s + r * lds, _mm_add_ps(_mm256_castps256_ps128(t2), _mm256_extractf128_ps(t2, 1)));
    }
}

/* ---- PV ------------------------------------------------------------------- */

/* o[NR rows][NV vectors from column d] += s[NR rows][0..nk) * v[0..nk)[d..]. */
INLINE void pv_block(const int F16, const int NR, const int NV, int nk, int hdp, const float *s, int lds,
                     const char *v, size_t ldv, int d, float *o)
{
    __m256 acc[PV_ROWS][2];
#pragma GCC unroll 8
    for (int r = 0; r < NR; r++)
#pragma GCC unroll 2
        for (int c = 0; c < NV; c++) acc[r][c] = _mm256_load_ps(o + r * hdp + d + 8 * c);

    for (int j = 0; j < nk; j++) {
        __m256 vv[2];
#pragma GCC unroll 2
        for (int c = 0; c < NV; c++) vv[c] = load8(F16, v + j * ldv, d + 8 * c);
#pragma GCC unroll 8
        for (int r = 0; r < NR; r++) {
            __m256 pb = _mm256_broadcast_ss(s + r * lds + j);
#pragma GCC unroll 2
            for (int c = 0; c < NV; c++) acc[r][c] = _mm256_fmadd_ps(pb, vv[c], acc[r][c]);
        }
    }
#pragma GCC unroll 8
    for (int r = 0; r < NR; r++)
#pragma GCC unroll 2
        for (int c = 0; c < NV; c++) _mm256_store_ps(o + r * hdp + d + 8 * c, acc[r][c]);
}

#include "devices/cpu/arch/attn_loops.h"

void het_attn_qk_f32_avx2(int nr, int nk, int hdp, const float *q, const void *k, size_t ldk, float *s, int lds)
{
    qk_all(0, nr, nk, hdp, q, k, ldk, s, lds);
}

void het_attn_qk_f16_avx2(int nr, int nk, int hdp, const float *q, const void *k, size_t ldk, float *s, int lds)
{
    qk_all(1, nr, nk, hdp, q, k, ldk, s, lds);
}

void het_attn_pv_f32_avx2(int nr, int nk, int hdp, const float *s, int lds, const void *v, size_t ldv, float *o)
{
    pv_all(0, nr, nk, hdp, s, lds, v, ldv, o);
}

void het_attn_pv_f16_avx2(int nr, int nk, int hdp, const float *s, int lds, const void *v, size_t ldv, float *o)
{
    pv_all(1, nr, nk, hdp, s, lds, v, ldv, o);
}

/* ---- online softmax ------------------------------------------------------- */

void het_attn_softmax_avx2(int nr, int nk, float *s, int lds, const int *valid, float *m, float *l, float *o,
                           int hdp)
{
    for (int r = 0; r < nr; r++) {
        float *sr = s + (size_t)r * lds;
        int n = valid[r] < nk ? valid[r] : nk;
        if (n <= 0) { memset(sr, 0, (size_t)nk * sizeof(float)); continue; }
        float mb = het_vec_max_f32_avx2(n, sr);
        float m_new = mb > m[r] ? mb : m[r];
        float sum = het_vec_exp_sum_f32_avx2(n, sr, sr, m_new);
        memset(sr + n, 0, (size_t)(nk - n) * sizeof(float));
        if (m_new != m[r]) {
            float alpha = m[r] == -INFINITY ? 0.0f : expf(m[r] - m_new);
            __m256 va = _mm256_set1_ps(alpha);
            float *orow = o + (size_t)r * hdp;
            for (int d = 0; d < hdp; d += 8) _mm256_store_ps(orow + d, _mm256_mul_ps(va, _mm256_load_ps(orow + d)));
            l[r] *= alpha;
            m[r] = m_new;
        }
        l[r] += sum;
    }
}
