/*
 * attn_avx2.c — AVX2/FMA/F16C inner kernels of the CPU fused attention.
 *
 * Contracts in devices/cpu/attention.h. Key and value rows are read either
 * as F32 or straight from an F16 cache (converted in registers with F16C),
 * so the cache is never copied. Both products are register-blocked so each
 * loaded vector feeds several FMAs (the blocks and the loops around them
 * are arch/attn_loops.h, shared with attn_avx512.c; this file gives them
 * ymm vectors):
 *  - QK: 3 query rows x 4 keys, 12 accumulators running along head_dim,
 *    reduced to 4 scores per row with an hadd tree (1 key at a time for the
 *    last nk % 4 keys).
 *  - PV: 6 query rows x 16 output columns, 12 accumulators; per key, two V
 *    loads and six broadcasts of P feed 12 FMAs. Decode's 1-3 rows take
 *    wider passes over the columns instead (pv_decode).
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
#define ATTN_VLEN 8

#define INLINE static inline __attribute__((always_inline))

/* The vector of the shared blocks (attn_loops.h): ymm, 8 floats; q and o
 * rows are 32-byte aligned scratch. */
typedef __m256 attn_vec;
INLINE __m256 attn_vzero(void) { return _mm256_setzero_ps(); }
INLINE __m256 attn_vload(const float *p) { return _mm256_load_ps(p); }
INLINE void attn_vstore(float *p, __m256 v) { _mm256_store_ps(p, v); }
INLINE __m256 attn_vbcast(const float *s, int i, int j) { return _mm256_broadcast_ss(s + i + j); }
INLINE __m256 attn_vfma(__m256 a, __m256 b, __m256 c) { return _mm256_fmadd_ps(a, b, c); }

/* 8 elements of an F16 (F16 != 0) or F32 row starting at element d. */
INLINE __m256 attn_vload_kv(const int F16, const char *row, int d)
{
    if (F16) return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(row + 2 * (size_t)d)));
    return _mm256_loadu_ps((const float *)(row + 4 * (size_t)d));
}

/* A query row's NK (1 or 4) scores: 4 by an hadd tree. */
INLINE void attn_scores(const int NK, const __m256 *acc, float *s)
{
    if (NK == 1) {
        s[0] = het_avx2_hsum(acc[0]);
        return;
    }
    __m256 t0 = _mm256_hadd_ps(acc[0], acc[1]);
    __m256 t1 = _mm256_hadd_ps(acc[2], acc[3]);
    __m256 t2 = _mm256_hadd_ps(t0, t1);
    _mm_storeu_ps(s, _mm_add_ps(_mm256_castps256_ps128(t2), _mm256_extractf128_ps(t2, 1)));
}

#include "devices/cpu/arch/attn_loops.h"

void het_attn_qk_f32_avx2(int nr, int nk, int hdp, const float *q, const void *k, size_t ldk, float *s, int lds)
{
    qk_all(0, nr, nk, hdp, q, k, ldk, s, lds);
}

ATTN_QK_F16_DEF(het_attn_qk_f16_avx2, HET_CPU_STREAM_NTA)
ATTN_QK_F16_DEF(het_attn_qk_f16_t0_avx2, HET_CPU_STREAM_T0)
ATTN_QK_F16_DEF(het_attn_qk_f16_t1_avx2, HET_CPU_STREAM_T1)

/* Decode's PV (NR <= 3 query rows). 16 ymm registers cannot hold a whole
 * output row of 2 or 3 query rows (128 columns: 16 vectors a row), so the
 * columns go in passes of NV vectors (NR * NV <= 12 accumulators), keys
 * inner: each pass reads one contiguous run of every V row, NV * 32 bytes of
 * F16, where pv_all's passes read 32 bytes of each row, twice as many
 * passes with rows 256 bytes apart. The first pass asks for each row
 * ATTN_PF_KEYS keys ahead, whole, so the later passes find it in the
 * caches. */
INLINE void pv_pass(const int F16, const int NR, const int NV, int nk, int hdp, const float *s, int lds,
                    const char *v, size_t ldv, int d0, bool pf, float *o)
{
    __m256 acc[3][8];
#pragma GCC unroll 3
    for (int r = 0; r < NR; r++)
#pragma GCC unroll 8
        for (int c = 0; c < NV; c++) acc[r][c] = _mm256_load_ps(o + r * hdp + d0 + 8 * c);
    for (int j = 0; j < nk; j++) {
        const char *row = v + j * ldv;
        if (F16 && pf) attn_pf_row(row + (size_t)ATTN_PF_KEYS * ldv, (size_t)hdp * 2); /* attn_loops.h says why */
        __m256 pb[3];
#pragma GCC unroll 3
        for (int r = 0; r < NR; r++) pb[r] = _mm256_broadcast_ss(s + r * lds + j);
#pragma GCC unroll 8
        for (int c = 0; c < NV; c++) {
            const __m256 vv = attn_vload_kv(F16, row, d0 + 8 * c);
#pragma GCC unroll 3
            for (int r = 0; r < NR; r++) acc[r][c] = _mm256_fmadd_ps(pb[r], vv, acc[r][c]);
        }
    }
#pragma GCC unroll 3
    for (int r = 0; r < NR; r++)
#pragma GCC unroll 8
        for (int c = 0; c < NV; c++) _mm256_store_ps(o + r * hdp + d0 + 8 * c, acc[r][c]);
}

/* Passes of NV vectors, then single vectors for the rest of hdp. */
#define PV_PASSES(F16, NR, NV)                                                                                 \
    do {                                                                                                       \
        int d = 0;                                                                                             \
        for (; d + 8 * (NV) <= hdp; d += 8 * (NV)) pv_pass(F16, NR, NV, nk, hdp, s, lds, v, ldv, d, d == 0, o); \
        for (; d < hdp; d += 8) pv_pass(F16, NR, 1, nk, hdp, s, lds, v, ldv, d, d == 0, o);                      \
    } while (0)

/* pv_pass for 1-3 rows (hdp a multiple of 8, as attention.c pads it);
 * false: not its shape. */
INLINE bool pv_decode(const int F16, int nr, int nk, int hdp, const float *s, int lds, const char *v, size_t ldv,
                      float *o)
{
    if (hdp % 8) return false;
    switch (nr) {
    case 1: PV_PASSES(F16, 1, 8); return true;
    case 2: PV_PASSES(F16, 2, 4); return true;
    case 3: PV_PASSES(F16, 3, 4); return true;
    default: return false;
    }
}

void het_attn_pv_f32_avx2(int nr, int nk, int hdp, const float *s, int lds, const void *v, size_t ldv, float *o)
{
    if (!pv_decode(0, nr, nk, hdp, s, lds, v, ldv, o)) pv_all(0, nr, nk, hdp, s, lds, v, ldv, o);
}

void het_attn_pv_f16_avx2(int nr, int nk, int hdp, const float *s, int lds, const void *v, size_t ldv, float *o)
{
    if (!pv_decode(1, nr, nk, hdp, s, lds, v, ldv, o)) pv_all(1, nr, nk, hdp, s, lds, v, ldv, o);
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
