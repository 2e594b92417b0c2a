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
 * Decode's QK (attn_loops.h) and PV over an F16 cache ask for the rows
 * ATTN_PF_KEYS keys ahead, with NTA (each is read once).
 * The row counts are compile-time constants per instantiation.
 * The online softmax step works on 16 scores at a time (a block's 64 keys
 * are four vectors), with het_avx512_exp, the AVX2 exp on 16 lanes.
 *
 * Prefill tiles (het_attn_t_*, contracts in attention.h) keep queries and
 * scores transposed, 16 rows to a vector:
 *  - QK: 8 keys x 3 row vectors, 24 accumulators; per element of head_dim,
 *    3 query loads and 8 key broadcasts feed 24 FMAs.
 *  - softmax: the row max, exp and sum across 16 rows at once.
 *  - PV: 6 rows x 64 output columns, 24 accumulators; per key, 4 value
 *    loads and 6 broadcasts of P feed 24 FMAs.
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

ATTN_QK_F16_DEF(het_attn_qk_f16_avx512, HET_CPU_STREAM_NTA)
ATTN_QK_F16_DEF(het_attn_qk_f16_t0_avx512, HET_CPU_STREAM_T0)
ATTN_QK_F16_DEF(het_attn_qk_f16_t1_avx512, HET_CPU_STREAM_T1)

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
        if (F16) attn_pf_once(F16, row + (size_t)ATTN_PF_KEYS * ldv, (size_t)NV * 32); /* attn_loops.h says why */
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

/* an F16 cache's PV asking ahead with one hint (attn_loops.h) */
#define ATTN_PV_F16_DEF(name, hint)                                                                            \
    void name(int nr, int nk, int hdp, const float *s, int lds, const void *v, size_t ldv, float *o)           \
    {                                                                                                          \
        if (!pv_decode(ATTN_F16(hint), nr, nk, hdp, s, lds, v, ldv, o))                                        \
            pv_all(ATTN_F16(hint), nr, nk, hdp, s, lds, v, ldv, o);                                            \
    }
ATTN_PV_F16_DEF(het_attn_pv_f16_avx512, HET_CPU_STREAM_NTA)
ATTN_PV_F16_DEF(het_attn_pv_f16_t0_avx512, HET_CPU_STREAM_T0)
ATTN_PV_F16_DEF(het_attn_pv_f16_t1_avx512, HET_CPU_STREAM_T1)

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

/* ---- prefill tiles: scores transposed (attention.h, het_attn_t_*) ------------------ */

/* qt[d * ldt + r] = q[r * hdp + d] for r < 16 * nrv (zero for r >= nr). */
void het_attn_t_transpose_avx512(int nr, int hdp, const float *q, float *qt, int ldt)
{
    const __m512i idx = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                           _mm512_set1_epi32(hdp));
    for (int r0 = 0; r0 < nr; r0 += 16) {
        const __mmask16 k = het_avx512_tail(nr - r0 < 16 ? nr - r0 : 16);
        const float *base = q + (size_t)r0 * hdp;
        for (int d = 0; d < hdp; d++)
            _mm512_storeu_ps(qt + (size_t)d * ldt + r0,
                             _mm512_mask_i32gather_ps(_mm512_setzero_ps(), k, idx, base + d, 4));
    }
}

/* st[j * ldt + 16 v ..] for 8 keys from j0 and NRV row vectors: every d adds
 * the key's element (broadcast) times 16 rows of queries. */
INLINE void t_qk_keys(const int NRV, int hdp, const float *qt, int ldt, const float *kf, float *st)
{
    __m512 acc[8][3];
#pragma GCC unroll 8
    for (int j = 0; j < 8; j++)
#pragma GCC unroll 3
        for (int v = 0; v < NRV; v++) acc[j][v] = _mm512_setzero_ps();
    for (int d = 0; d < hdp; d++) {
        __m512 qv[3];
#pragma GCC unroll 3
        for (int v = 0; v < NRV; v++) qv[v] = _mm512_loadu_ps(qt + (size_t)d * ldt + 16 * v);
#pragma GCC unroll 8
        for (int j = 0; j < 8; j++) {
            const __m512 kb = _mm512_set1_ps(kf[(size_t)j * hdp + d]);
#pragma GCC unroll 3
            for (int v = 0; v < NRV; v++) acc[j][v] = _mm512_fmadd_ps(kb, qv[v], acc[j][v]);
        }
    }
#pragma GCC unroll 8
    for (int j = 0; j < 8; j++)
#pragma GCC unroll 3
        for (int v = 0; v < NRV; v++) _mm512_storeu_ps(st + (size_t)j * ldt + 16 * v, acc[j][v]);
}

void het_attn_t_qk_avx512(int nrv, int nk8, int hdp, const float *qt, int ldt, const float *kf, float *st)
{
    for (int j0 = 0; j0 < nk8; j0 += 8) {
        const float *k = kf + (size_t)j0 * hdp;
        float *s = st + (size_t)j0 * ldt;
        switch (nrv) {
        case 1: t_qk_keys(1, hdp, qt, ldt, k, s); break;
        case 2: t_qk_keys(2, hdp, qt, ldt, k, s); break;
        default: t_qk_keys(3, hdp, qt, ldt, k, s); break;
        }
    }
}

void het_attn_t_softmax_avx512(int nr, int nk, float *st, int ldt, const int *valid, float *m, float *l, float *o,
                               int hdp)
{
    const __m512 ninf = _mm512_set1_ps(-INFINITY);
    for (int r0 = 0; r0 < nr; r0 += 16) {
        const __mmask16 rows = het_avx512_tail(nr - r0 < 16 ? nr - r0 : 16);
        const __m512i cnt = _mm512_maskz_loadu_epi32(rows, valid + r0); /* rows past nr see nothing */
        const __m512 m_old = _mm512_mask_loadu_ps(ninf, rows, m + r0);
        __m512 mx = ninf;
        for (int j = 0; j < nk; j++) {
            const __mmask16 k = _mm512_cmpgt_epi32_mask(cnt, _mm512_set1_epi32(j));
            mx = _mm512_mask_max_ps(mx, k, mx, _mm512_loadu_ps(st + (size_t)j * ldt + r0));
        }
        const __m512 m_new = _mm512_max_ps(m_old, mx);
        const __mmask16 seen = _mm512_cmp_ps_mask(m_new, ninf, _CMP_NEQ_OQ); /* a row with a key so far */
        __m512 sum = _mm512_setzero_ps();
        for (int j = 0; j < nk; j++) {
            float *s = st + (size_t)j * ldt + r0;
            const __mmask16 k = _mm512_cmpgt_epi32_mask(cnt, _mm512_set1_epi32(j)) & seen;
            const __m512 e = _mm512_maskz_mov_ps(k, het_avx512_exp(_mm512_sub_ps(_mm512_loadu_ps(s), m_new)));
            _mm512_storeu_ps(s, e);
            sum = _mm512_add_ps(sum, e);
        }
        /* exp(m_old - m_new): 0 where m_old is -inf (het_avx512_exp underflows), 1 for rows without keys */
        const __mmask16 grew = _mm512_cmp_ps_mask(m_new, m_old, _CMP_NEQ_OQ) & seen;
        const __m512 alpha = _mm512_mask_mov_ps(_mm512_set1_ps(1.0f), grew,
                                                het_avx512_exp(_mm512_sub_ps(m_old, m_new)));
        const __m512 l_new = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(rows, l + r0), alpha, sum);
        _mm512_mask_storeu_ps(l + r0, rows, l_new);
        _mm512_mask_storeu_ps(m + r0, rows, m_new);
        float a[16];
        _mm512_storeu_ps(a, alpha);
        for (int r = 0; r < 16 && (grew >> r); r++) {
            if (!(grew >> r & 1)) continue;
            float *orow = o + (size_t)(r0 + r) * hdp;
            const __m512 va = _mm512_set1_ps(a[r]);
            for (int d = 0; d < hdp; d += 16) _mm512_storeu_ps(orow + d, _mm512_mul_ps(va, _mm512_loadu_ps(orow + d)));
        }
    }
}

/* o[R rows from r0][NV vectors from c0] += sum_j st[j][r] * vf[j][c..]. */
INLINE void t_pv_block(const int R, const int NV, int nk, int hdp, const float *st, int ldt, const float *vf,
                       float *o)
{
    __m512 acc[6][4];
#pragma GCC unroll 6
    for (int r = 0; r < R; r++)
#pragma GCC unroll 4
        for (int c = 0; c < NV; c++) acc[r][c] = _mm512_loadu_ps(o + (size_t)r * hdp + 16 * c);
    for (int j = 0; j < nk; j++) {
        __m512 vv[4];
#pragma GCC unroll 4
        for (int c = 0; c < NV; c++) vv[c] = _mm512_loadu_ps(vf + (size_t)j * hdp + 16 * c);
#pragma GCC unroll 6
        for (int r = 0; r < R; r++) {
            const __m512 p = _mm512_set1_ps(st[(size_t)j * ldt + r]);
#pragma GCC unroll 4
            for (int c = 0; c < NV; c++) acc[r][c] = _mm512_fmadd_ps(p, vv[c], acc[r][c]);
        }
    }
#pragma GCC unroll 6
    for (int r = 0; r < R; r++)
#pragma GCC unroll 4
        for (int c = 0; c < NV; c++) _mm512_storeu_ps(o + (size_t)r * hdp + 16 * c, acc[r][c]);
}

#define T_PV_NV(R)                                                                                             \
    switch (nv) {                                                                                              \
    case 1: t_pv_block(R, 1, nk, hdp, s, ldt, v, oo); break;                                                  \
    case 2: t_pv_block(R, 2, nk, hdp, s, ldt, v, oo); break;                                                  \
    case 3: t_pv_block(R, 3, nk, hdp, s, ldt, v, oo); break;                                                  \
    default: t_pv_block(R, 4, nk, hdp, s, ldt, v, oo); break;                                                 \
    }

void het_attn_t_pv_avx512(int nr, int nk, int hdp, const float *st, int ldt, const float *vf, float *o)
{
    for (int c0 = 0; c0 < hdp; c0 += 64) {
        const int nv = (hdp - c0) / 16 < 4 ? (hdp - c0) / 16 : 4;
        for (int r0 = 0; r0 < nr; r0 += 6) {
            const float *s = st + r0, *v = vf + c0;
            float *oo = o + (size_t)r0 * hdp + c0;
            switch (nr - r0 < 6 ? nr - r0 : 6) {
            case 1: T_PV_NV(1) break;
            case 2: T_PV_NV(2) break;
            case 3: T_PV_NV(3) break;
            case 4: T_PV_NV(4) break;
            case 5: T_PV_NV(5) break;
            default: T_PV_NV(6) break;
            }
        }
    }
}
