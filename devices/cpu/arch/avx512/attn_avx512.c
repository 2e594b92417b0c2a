/*
 * attn_avx512.c — AVX-512 inner kernels (QK and PV) of the CPU fused
 * attention, for head dims that are a multiple of 16: the AVX2 kernels'
 * blocking (arch/attn_loops.h, shared with attn_avx2.c) with zmm vectors,
 * so each FMA does 16 lanes. The
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
 * The online softmax step works on 16 scores at a time (a block's 64 keys
 * are four vectors), with het_avx512_exp, the AVX2 exp on 16 lanes.
 */
#include <immintrin.h>
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "devices/cpu/arch/avx512/vmath_avx512.h"
#include "devices/cpu/attention.h"

#define QK_ROWS 3
#define QK_KEYS 4
#define PV_ROWS 6
#define ATTN_VLEN 16

#define INLINE static inline __attribute__((always_inline))

/* The vector of the shared blocks (attn_loops.h): zmm, 16 floats. */
typedef __m512 attn_vec;
INLINE __m512 attn_vzero(void) { return _mm512_setzero_ps(); }
INLINE __m512 attn_vload(const float *p) { return _mm512_loadu_ps(p); }
INLINE void attn_vstore(float *p, __m512 v) { _mm512_storeu_ps(p, v); }
INLINE __m512 attn_vbcast(const float *s, int i, int j) { return _mm512_set1_ps(s[i + j]); }
INLINE __m512 attn_vfma(__m512 a, __m512 b, __m512 c) { return _mm512_fmadd_ps(a, b, c); }

/* 16 elements of an F16 (F16 != 0) or F32 row starting at element d. */
INLINE __m512 attn_vload_kv(const int F16, const char *row, int d)
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

/* A query row's NK (1 or 4) scores. */
INLINE void attn_scores(const int NK, const __m512 *acc, float *s)
{
    if (NK == 1) s[0] = _mm512_reduce_add_ps(acc[0]);
    else hsum4(acc[0], acc[1], acc[2], acc[3], s);
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

/* Decode's PV (NR <= 3 query rows): all NV * 16 columns of the rows in
 * registers (NR * NV <= 24 accumulators), keys in the outer loop, so each V
 * row is read once, start to end. pv_all's column passes read a block's V
 * rows NV / 2 times, every 128 bytes of each: a strided walk the hardware
 * prefetchers serve poorly when the rows come from memory, as decode's
 * cache rows do. */
INLINE void pv_keys(const int F16, const int NR, const int NV, int nk, int hdp, const float *s, int lds,
                    const char *v, size_t ldv, float *o)
{
    __m512 acc[3][8];
#pragma GCC unroll 3
    for (int r = 0; r < NR; r++)
#pragma GCC unroll 8
        for (int c = 0; c < NV; c++) acc[r][c] = _mm512_loadu_ps(o + r * hdp + 16 * c);
    for (int j = 0; j < nk; j++) {
        const char *row = v + j * ldv;
        __m512 vv[8];
#pragma GCC unroll 8
        for (int c = 0; c < NV; c++) vv[c] = attn_vload_kv(F16, row, 16 * c);
#pragma GCC unroll 3
        for (int r = 0; r < NR; r++) {
            const __m512 pb = _mm512_set1_ps(s[r * lds + j]);
#pragma GCC unroll 8
            for (int c = 0; c < NV; c++) acc[r][c] = _mm512_fmadd_ps(pb, vv[c], acc[r][c]);
        }
    }
#pragma GCC unroll 3
    for (int r = 0; r < NR; r++)
#pragma GCC unroll 8
        for (int c = 0; c < NV; c++) _mm512_storeu_ps(o + r * hdp + 16 * c, acc[r][c]);
}

#define PV_KEYS_NV(F16, NR)                                                                                     \
    switch (hdp / 16) {                                                                                        \
    case 1: pv_keys(F16, NR, 1, nk, hdp, s, lds, v, ldv, o); return true;                                      \
    case 2: pv_keys(F16, NR, 2, nk, hdp, s, lds, v, ldv, o); return true;                                      \
    case 3: pv_keys(F16, NR, 3, nk, hdp, s, lds, v, ldv, o); return true;                                      \
    case 4: pv_keys(F16, NR, 4, nk, hdp, s, lds, v, ldv, o); return true;                                      \
    case 5: pv_keys(F16, NR, 5, nk, hdp, s, lds, v, ldv, o); return true;                                      \
    case 6: pv_keys(F16, NR, 6, nk, hdp, s, lds, v, ldv, o); return true;                                      \
    case 7: pv_keys(F16, NR, 7, nk, hdp, s, lds, v, ldv, o); return true;                                      \
    case 8: pv_keys(F16, NR, 8, nk, hdp, s, lds, v, ldv, o); return true;                                      \
    default: return false;                                                                                     \
    }

/* pv_keys for 1-3 rows and head dims up to 128; false: not its shape. */
INLINE bool pv_decode(const int F16, int nr, int nk, int hdp, const float *s, int lds, const char *v, size_t ldv,
                      float *o)
{
    switch (nr) {
    case 1: PV_KEYS_NV(F16, 1)
    case 2: PV_KEYS_NV(F16, 2)
    case 3: PV_KEYS_NV(F16, 3)
    default: return false;
    }
}

void het_attn_pv_f32_avx512(int nr, int nk, int hdp, const float *s, int lds, const void *v, size_t ldv, float *o)
{
    if (!pv_decode(0, nr, nk, hdp, s, lds, v, ldv, o)) pv_all(0, nr, nk, hdp, s, lds, v, ldv, o);
}

void het_attn_pv_f16_avx512(int nr, int nk, int hdp, const float *s, int lds, const void *v, size_t ldv, float *o)
{
    if (!pv_decode(1, nr, nk, hdp, s, lds, v, ldv, o)) pv_all(1, nr, nk, hdp, s, lds, v, ldv, o);
}

void het_attn_softmax_avx512(int nr, int nk, float *s, int lds, const int *valid, float *m, float *l, float *o,
                             int hdp)
{
    for (int r = 0; r < nr; r++) {
        float *sr = s + (size_t)r * lds;
        const int n = valid[r] < nk ? valid[r] : nk;
        if (n <= 0) { memset(sr, 0, (size_t)nk * sizeof(float)); continue; }
        __m512 mx = _mm512_set1_ps(-INFINITY);
        for (int j = 0; j < n; j += 16) {
            const __mmask16 k = het_avx512_tail(n - j < 16 ? n - j : 16);
            mx = _mm512_mask_max_ps(mx, k, mx, _mm512_maskz_loadu_ps(k, sr + j));
        }
        const float mb = _mm512_reduce_max_ps(mx);
        const float m_new = mb > m[r] ? mb : m[r];
        const __m512 vm = _mm512_set1_ps(m_new);
        __m512 sum = _mm512_setzero_ps();
        for (int j = 0; j < nk; j += 16) { /* the valid scores' exp, zeros after them */
            const __mmask16 store = het_avx512_tail(nk - j < 16 ? nk - j : 16);
            const __mmask16 k = het_avx512_tail(n - j <= 0 ? 0 : n - j < 16 ? n - j : 16);
            const __m512 e = _mm512_maskz_mov_ps(k, het_avx512_exp(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, sr + j), vm)));
            _mm512_mask_storeu_ps(sr + j, store, e);
            sum = _mm512_add_ps(sum, e);
        }
        if (m_new != m[r]) {
            const float alpha = m[r] == -INFINITY ? 0.0f : expf(m[r] - m_new);
            const __m512 va = _mm512_set1_ps(alpha);
            float *orow = o + (size_t)r * hdp;
            for (int d = 0; d < hdp; d += 16) _mm512_storeu_ps(orow + d, _mm512_mul_ps(va, _mm512_loadu_ps(orow + d)));
            l[r] *= alpha;
            m[r] = m_new;
        }
        l[r] += _mm512_reduce_add_ps(sum);
    }
}
