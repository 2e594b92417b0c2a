/*
 * attn_avx512.c — AVX-512 inner kernels (QK and PV) of the CPU fused
 * attention, for head dims that are a multiple of 16: the AVX2 kernels'
 * blocking (attn_avx2.c) with zmm vectors, so each FMA does 16 lanes. The
 * online softmax stays the AVX2 one (a small share of the time).
 *
 * Contracts in devices/cpu/attention.h, with hdp % 16 == 0. Key and value
 * rows are read as F32 or straight from an F16 cache (vcvtph2ps):
 *  - QK: 3 query rows x 4 keys, 12 accumulators along head_dim; the 4
 *    accumulators of a row are folded together (128-bit lanes of the 4
 *    keys side by side) before the last in-lane sums, so a row's 4 scores
 *    cost 9 shuffles and adds instead of 4 full reductions.
 *  - PV: 6 query rows x 32 output columns, 12 accumulators; per key, two V
 *    loads and six broadcasts of P feed 12 FMAs.
 * The row counts are compile-time constants per instantiation.
 */
#include <immintrin.h>

#include "devices/cpu/attention.h"

#define QK_ROWS 3
#define QK_KEYS 4
#define PV_ROWS 6
#define PV_COLS 32 /* two vectors */

#define INLINE static inline __attribute__((always_inline))

/* 16 elements of an F16 (F16 != 0) or F32 row starting at element d. */
INLINE __m512 load16(const int F16, const char *row, int d)
{
    if (F16) return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(row + 2 * (size_t)d)));
    return _mm512_loadu_ps((const float *)(row + 4 * (size_t)d));
}

/* The sums of a0..a3 (all 16 lanes each) into s[0..3]. */
INLINE void hsum4(__m512 a0, __m512 a1, __m512 a2, __m512 a3, float *s)
{
    /* 256-bit halves: [a0 | a1] and [a2 | a3], each half folded */
    const __m512 w01 = _mm512_add_ps(_mm512_shuffle_f32x4(a0, a1, 0x44), _mm512_shuffle_f32x4(a0, a1, 0xee));
    const __m512 w23 = _mm512_add_ps(_mm512_shuffle_f32x4(a2, a3, 0x44), _mm512_shuffle_f32x4(a2, a3, 0xee));
    /* 128-bit lanes: [a0, a1, a2, a3] */
    const __m512 x = _mm512_add_ps(_mm512_shuffle_f32x4(w01, w23, 0x88), _mm512_shuffle_f32x4(w01, w23, 0xdd));
    /* in each lane, all four elements become the lane's sum */
    const __m512 y = _mm512_add_ps(x, _mm512_permute_ps(x, 0xb1));
    const __m512 z = _mm512_add_ps(y, _mm512_permute_ps(y, 0x4e));
    const __m512 r = _mm512_permutexvar_ps(_mm512_setr_epi32(0, 4, 8, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0), z);
    _mm_storeu_ps(s, _mm512_castps512_ps128(r));
}

/* ---- QK ------------------------------------------------------------------- */

/* Scores of NR query rows against NK (1 or 4) keys starting at row k. */
INLINE void qk_block(const int F16, const int NR, const int NK, int hdp, const float *q, const char *k, size_t ldk,
                     float *s, int lds)
{
    __m512 acc[QK_ROWS][QK_KEYS];
#pragma GCC unroll 4
    for (int r = 0; r < NR; r++)
#pragma GCC unroll 4
        for (int c = 0; c < NK; c++) acc[r][c] = _mm512_setzero_ps();

    for (int d = 0; d < hdp; d += 16) {
        __m512 qv[QK_ROWS];
#pragma GCC unroll 4
        for (int r = 0; r < NR; r++) qv[r] = _mm512_loadu_ps(q + r * hdp + d);
#pragma GCC unroll 4
        for (int c = 0; c < NK; c++) {
            const __m512 kv = load16(F16, k + c * ldk, d);
#pragma GCC unroll 4
            for (int r = 0; r < NR; r++) acc[r][c] = _mm512_fmadd_ps(qv[r], kv, acc[r][c]);
        }
    }
#pragma GCC unroll 4
    for (int r = 0; r < NR; r++) {
        if (NK == 1) s[r * lds] = _mm512_reduce_add_ps(acc[r][0]);
        else hsum4(acc[r][0], acc[r][1], acc[r][2], acc[r][3], s + r * lds);
    }
}

/* ---- PV ------------------------------------------------------------------- */

/* o[NR rows][NV vectors from column d] += s[NR rows][0..nk) * v[0..nk)[d..]. */
INLINE void pv_block(const int F16, const int NR, const int NV, int nk, int hdp, const float *s, int lds,
                     const char *v, size_t ldv, int d, float *o)
{
    __m512 acc[PV_ROWS][2];
#pragma GCC unroll 8
    for (int r = 0; r < NR; r++)
#pragma GCC unroll 2
        for (int c = 0; c < NV; c++) acc[r][c] = _mm512_loadu_ps(o + r * hdp + d + 16 * c);

    for (int j = 0; j < nk; j++) {
        __m512 vv[2];
#pragma GCC unroll 2
        for (int c = 0; c < NV; c++) vv[c] = load16(F16, v + j * ldv, d + 16 * c);
#pragma GCC unroll 8
        for (int r = 0; r < NR; r++) {
            const __m512 pb = _mm512_set1_ps(s[r * lds + j]);
#pragma GCC unroll 2
            for (int c = 0; c < NV; c++) acc[r][c] = _mm512_fmadd_ps(pb, vv[c], acc[r][c]);
        }
    }
#pragma GCC unroll 8
    for (int r = 0; r < NR; r++)
#pragma GCC unroll 2
        for (int c = 0; c < NV; c++) _mm512_storeu_ps(o + r * hdp + d + 16 * c, acc[r][c]);
}

#include "devices/cpu/arch/attn_loops.h"

void het_attn_qk_f32_avx512(int nr, int nk, int hdp, const float *q, const void *k, size_t ldk, float *s, int lds)
{
    qk_all(0, nr, nk, hdp, q, k, ldk, s, lds);
}

void het_attn_qk_f16_avx512(int nr, int nk, int hdp, const float *q, const void *k, size_t ldk, float *s, int lds)
{
    qk_all(1, nr, nk, hdp, q, k, ldk, s, lds);
}

void het_attn_pv_f32_avx512(int nr, int nk, int hdp, const float *s, int lds, const void *v, size_t ldv, float *o)
{
    pv_all(0, nr, nk, hdp, s, lds, v, ldv, o);
}

void het_attn_pv_f16_avx512(int nr, int nk, int hdp, const float *s, int lds, const void *v, size_t ldv, float *o)
{
    pv_all(1, nr, nk, hdp, s, lds, v, ldv, o);
}
