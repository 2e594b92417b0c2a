/*
 * matmul_avx2.c — AVX2 (+FMA, F16C) kernels of the CPU matrix
 * multiplication: activation quantisation, GEMV kernels that stream weight
 * rows in their file layout (decode), panel kernels over 8-row packed panels
 * (prefill), and float-weight dot products.
 *
 * Integer dot products use vpmaddubsw (u8 x s8 -> pairs summed to s16): the
 * weights' quants are kept unsigned (q4_0's -8 and the like are folded into
 * the per-block offset term, see quant_dot.c), so no sign fix-up is needed
 * and, for 4-bit quants, the s16 pairs of a whole 32-block can be summed
 * without overflow (8 groups * 2 * 15 * 127 = 30480) before one vpmaddwd.
 * q8_0 is signed: |a| x sign(w, a) with |a| stored in the q8r row.
 * Each kernel computes exactly the formula of its scalar reference.
 */
#include <immintrin.h>
#include <string.h>

#include "devices/cpu/arch/avx2/dequant_avx2.h"
#include "devices/cpu/arch/avx2/panel_compact_avx2.h"
#include "devices/cpu/quant_dot.h"
#include "model/quant_impl.h"

#define HET_INLINE static inline __attribute__((always_inline))

/* ---- small helpers ---------------------------------------------------------- */

HET_INLINE float het_hsum_ps(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

HET_INLINE float het_h2f_f16c(uint16_t h) { return _cvtsh_ss(h); }

/* Keep v in a register at this point. Stops the compiler from re-associating
 * a chain of integer adds into a tree of simultaneously live products,
 * which spills registers in the panel kernels. */
#define HET_KEEP(v) __asm__("" : "+x"(v))

#define HET_META(row, bs, b) ((const struct het_q8r_meta *)((row) + (size_t)(b) * (bs) + (bs) - 32))
#define HET_QS(row, bs, b)   ((const int8_t *)((row) + (size_t)(b) * (bs)))
#define HET_UA(row, bs, b)   ((row) + (size_t)(b) * (bs) + 32)

HET_INLINE __m256i het_bcast4(const void *p)
{
    int32_t v;
    memcpy(&v, p, 4);
    return _mm256_set1_epi32(v);
}

/* 16 bytes of nibbles -> 32 bytes: low nibbles first, then high nibbles.
 * The broadcast load puts the bytes in both lanes; one variable shift moves
 * the high lane's nibbles down. */
HET_INLINE __m256i het_nibbles32(const uint8_t *qs)
{
    const __m256i x = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)qs));
    return _mm256_and_si256(_mm256_srlv_epi64(x, _mm256_setr_epi64x(0, 0, 4, 4)), _mm256_set1_epi8(15));
}

/* ---- activation quantisation ------------------------------------------------- */

static void het_q8r_quantize_avx2(const float *x, const struct het_q8r_layout *l, void *dst)
{
    uint8_t *row = dst;
    const __m256 sign = _mm256_set1_ps(-0.0f);
    const __m256i perm = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    __m256 gam = _mm256_setzero_ps();
    for (int64_t b = 0; b < l->nb; b++) {
        const float *xb = x + b * 32;
        uint8_t *blk = row + (size_t)b * l->bs;
        __m256 v0 = _mm256_loadu_ps(xb), v1 = _mm256_loadu_ps(xb + 8);
        __m256 v2 = _mm256_loadu_ps(xb + 16), v3 = _mm256_loadu_ps(xb + 24);
        __m256 am = _mm256_max_ps(_mm256_max_ps(_mm256_andnot_ps(sign, v0), _mm256_andnot_ps(sign, v1)),
                                  _mm256_max_ps(_mm256_andnot_ps(sign, v2), _mm256_andnot_ps(sign, v3)));
        if (l->group > 1) { /* blocks sharing d: the amax of the whole group, found at its first block */
            if (b % l->group == 0)
                for (int64_t i = 32; i < 32 * (int64_t)l->group; i += 8)
                    am = _mm256_max_ps(am, _mm256_andnot_ps(sign, _mm256_loadu_ps(xb + i)));
            else
                am = gam;
            gam = am;
        }
        __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(am), _mm256_extractf128_ps(am, 1));
        m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
        m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
        const float amax = _mm_cvtss_f32(m4);
        const float d = amax / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        const __m256 idv = _mm256_set1_ps(id);
        __m256i i0 = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v0, idv), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
        __m256i i1 = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v1, idv), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
        __m256i i2 = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v2, idv), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
        __m256i i3 = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v3, idv), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
        /* pair-slot sums per half: hadd leaves [h0 slot0, h0 slot1, h1 slot0,
         * h1 slot1] in each 128-bit lane (elements 0-3 / 4-7 of each 8) */
        const __m256i ps = _mm256_hadd_epi32(_mm256_add_epi32(i0, i1), _mm256_add_epi32(i2, i3));
        int32_t P[4];
        _mm_storeu_si128((__m128i *)P, _mm_add_epi32(_mm256_castsi256_si128(ps), _mm256_extracti128_si256(ps, 1)));
        const int32_t lo = P[0] + P[1], hi = P[2] + P[3];
        /* pack 32 x i32 -> 32 x i8; the packs work per 128-bit lane, so
         * restore element order with one dword permute */
        __m256i w01 = _mm256_packs_epi32(i0, i1), w23 = _mm256_packs_epi32(i2, i3);
        __m256i q = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(w01, w23), perm);
        /* the scalar reference clamps to +-127; only -128 can come out here */
        q = _mm256_max_epi8(q, _mm256_set1_epi8(-127));
        _mm256_storeu_si256((__m256i *)blk, q);
        if (l->with_abs) _mm256_storeu_si256((__m256i *)(blk + 32), _mm256_abs_epi8(q));
        struct het_q8r_meta m = {
            .d = d, .s = d * (float)(lo + hi), .sum32 = lo + hi, .x32 = {-32 * lo, -32 * hi},
            .off8 = {(int16_t)(-8 * (P[0] + P[2])), (int16_t)(-8 * (P[1] + P[3]))},
            .off32 = {{(int16_t)(-32 * P[0]), (int16_t)(-32 * P[1])}, {(int16_t)(-32 * P[2]), (int16_t)(-32 * P[3])}},
        };
        memset(blk + l->bs - 32, 0, 32);
        memcpy(blk + l->bs - 32, &m, sizeof m);
    }
}

/* ---- GEMV: one weight row in file layout x NC q8r rows ------------------------ */

/* GEMV kernels keep two accumulators per activation row, acc0 for even and
 * acc1 for odd blocks, so that NC=1 is not bound by the FMA latency; the
 * block bodies take the accumulator array so that every index is constant. */
HET_INLINE void het_zero_acc(__m256 *acc, int NC)
{
    for (int c = 0; c < NC; c++) acc[c] = _mm256_setzero_ps();
}

HET_INLINE void het_acc_out(const __m256 *acc0, const __m256 *acc1, int NC, const float *extra, float *out)
{
    for (int c = 0; c < NC; c++) out[c] = het_hsum_ps(_mm256_add_ps(acc0[c], acc1[c])) + (extra ? extra[c] : 0.0f);
}

HET_INLINE void het_q4_0_block(const het_block_q4_0 *x, const uint8_t *const *a, int64_t b, __m256 *acc,
                               const int NC)
{
    const size_t bs = HET_Q8R_BS;
    const __m256i q = het_nibbles32(x->qs);
    const __m256 dw = _mm256_set1_ps(het_h2f_f16c(x->d));
#pragma GCC unroll 4
    for (int c = 0; c < NC; c++) {
        const struct het_q8r_meta *m = HET_META(a[c], bs, b);
        const __m256i av = _mm256_loadu_si256((const __m256i *)HET_QS(a[c], bs, b));
        __m256i i = _mm256_madd_epi16(_mm256_maddubs_epi16(q, av), _mm256_set1_epi16(1));
        /* -8 * sum(a): subtracting sum32 from each of the 8 lanes */
        i = _mm256_sub_epi32(i, _mm256_set1_epi32(m->sum32));
        acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(i), _mm256_mul_ps(dw, _mm256_broadcast_ss(&m->d)), acc[c]);
    }
}

HET_INLINE void het_gemv_q4_0_t(int64_t K, const void *w, const uint8_t *const *a, float *out, const int NC)
{
    const het_block_q4_0 *x = w;
    __m256 acc0[4], acc1[4];
    het_zero_acc(acc0, NC);
    het_zero_acc(acc1, NC);
    const int64_t nb = K / 32;
    int64_t b = 0;
    for (; b + 2 <= nb; b += 2) {
        het_q4_0_block(x + b, a, b, acc0, NC);
        het_q4_0_block(x + b + 1, a, b + 1, acc1, NC);
    }
    if (b < nb) het_q4_0_block(x + b, a, b, acc0, NC);
    het_acc_out(acc0, acc1, NC, NULL, out);
}

HET_INLINE void het_q8_0_block(const het_block_q8_0 *x, const uint8_t *const *a, int64_t b, __m256 *acc,
                               const int NC)
{
    const size_t bs = HET_Q8R_BS_ABS;
    const __m256i q = _mm256_loadu_si256((const __m256i *)x->qs);
    const __m256 dw = _mm256_set1_ps(het_h2f_f16c(x->d));
#pragma GCC unroll 4
    for (int c = 0; c < NC; c++) {
        const __m256i av = _mm256_loadu_si256((const __m256i *)HET_QS(a[c], bs, b));
        const __m256i ua = _mm256_loadu_si256((const __m256i *)HET_UA(a[c], bs, b));
        const __m256i i = _mm256_madd_epi16(_mm256_maddubs_epi16(ua, _mm256_sign_epi8(q, av)), _mm256_set1_epi16(1));
        acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(i), _mm256_mul_ps(dw, _mm256_broadcast_ss(&HET_META(a[c], bs, b)->d)),
                                 acc[c]);
    }
}

HET_INLINE void het_gemv_q8_0_t(int64_t K, const void *w, const uint8_t *const *a, float *out, const int NC)
{
    const het_block_q8_0 *x = w;
    __m256 acc0[4], acc1[4];
    het_zero_acc(acc0, NC);
    het_zero_acc(acc1, NC);
    const int64_t nb = K / 32;
    int64_t b = 0;
    for (; b + 2 <= nb; b += 2) {
        het_q8_0_block(x + b, a, b, acc0, NC);
        het_q8_0_block(x + b + 1, a, b + 1, acc1, NC);
    }
    if (b < nb) het_q8_0_block(x + b, a, b, acc0, NC);
    het_acc_out(acc0, acc1, NC, NULL, out);
}

/* q4_K / q5_K: eight 32-blocks per super-block with float scale d*sc and
 * offset -dmin*m (times the activation block's s). */
HET_INLINE void het_gemv_q45k_t(int64_t K, const void *w, const uint8_t *const *a, float *out, const int NC,
                                const bool five)
{
    const size_t bs = HET_Q8R_BS;
    const __m256i ones = _mm256_set1_epi16(1);
    const __m256i m4 = _mm256_set1_epi8(15);
    __m256 acc0[4], acc1[4];
    float off[4] = {0, 0, 0, 0};
    het_zero_acc(acc0, NC);
    het_zero_acc(acc1, NC);
    const int64_t nsb = K / 256;
    for (int64_t sb = 0; sb < nsb; sb++) {
        const het_block_q4_k *x4 = (const het_block_q4_k *)w + sb;
        const het_block_q5_k *x5 = (const het_block_q5_k *)w + sb;
        const uint8_t *scales = five ? x5->scales : x4->scales;
        const uint8_t *qs = five ? x5->qs : x4->qs;
        const float d = het_h2f_f16c(five ? x5->d : x4->d), dmin = het_h2f_f16c(five ? x5->dmin : x4->dmin);
        float dsc[8], mn[8];
        for (int j = 0; j < 8; j++) {
            uint8_t sc, m;
            het_q4k_scale_min(j, scales, &sc, &m);
            dsc[j] = d * (float)sc;
            mn[j] = -dmin * (float)m;
        }
        /* q5_K: bits 2j and 2j+1 of qh[l] are bit 4 of chunk j's two quants;
         * hb is shifted down 2 per chunk (16-bit shifts: only bits 0 and 1 of
         * each byte are used, and those never come from the other byte) */
        __m256i hb = five ? _mm256_loadu_si256((const __m256i *)x5->qh) : _mm256_setzero_si256();
        const __m256i bit4 = _mm256_set1_epi8(16);
        for (int j = 0; j < 4; j++) {
            const __m256i v = _mm256_loadu_si256((const __m256i *)(qs + 32 * j));
            __m256i q0 = _mm256_and_si256(v, m4);
            __m256i q1 = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
            if (five) {
                q0 = _mm256_or_si256(q0, _mm256_and_si256(_mm256_slli_epi16(hb, 4), bit4));
                q1 = _mm256_or_si256(q1, _mm256_and_si256(_mm256_slli_epi16(hb, 3), bit4));
                hb = _mm256_srli_epi16(hb, 2);
            }
            const int64_t b0 = sb * 8 + 2 * j;
            const __m256 s0 = _mm256_set1_ps(dsc[2 * j]), s1 = _mm256_set1_ps(dsc[2 * j + 1]);
#pragma GCC unroll 4
            for (int c = 0; c < NC; c++) {
                const struct het_q8r_meta *m0 = HET_META(a[c], bs, b0), *m1 = HET_META(a[c], bs, b0 + 1);
                const __m256i a0 = _mm256_loadu_si256((const __m256i *)HET_QS(a[c], bs, b0));
                const __m256i a1 = _mm256_loadu_si256((const __m256i *)HET_QS(a[c], bs, b0 + 1));
                const __m256i i0 = _mm256_madd_epi16(_mm256_maddubs_epi16(q0, a0), ones);
                const __m256i i1 = _mm256_madd_epi16(_mm256_maddubs_epi16(q1, a1), ones);
                acc0[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(i0), _mm256_mul_ps(s0, _mm256_broadcast_ss(&m0->d)),
                                          acc0[c]);
                acc1[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(i1), _mm256_mul_ps(s1, _mm256_broadcast_ss(&m1->d)),
                                          acc1[c]);
                off[c] += mn[2 * j] * m0->s + mn[2 * j + 1] * m1->s;
            }
        }
    }
    het_acc_out(acc0, acc1, NC, off, out);
}

/* q6_K: block t (32 elements) of a super-block has two 16-element halves
 * with int8 scales sc[2t], sc[2t+1]; vpmaddwd applies them to the s16 pairs
 * (lanes 0-7 hold the first half). The -32 offset is taken off the s16
 * pairs first, as maddubs(32, a) (both fit: -8128..16002). */
/* One half (128 elements, blocks 4hh..4hh+3) of a q6_K super-block; even
 * blocks go to acc0, odd ones to acc1. */
HET_INLINE void het_q6_k_half(const het_block_q6_k *x, int hh, const uint8_t *const *a, int64_t sb, __m256 *acc0,
                              __m256 *acc1, const int NC)
{
    const size_t bs = HET_Q8R_BS;
    const __m256i m4 = _mm256_set1_epi8(15), m30 = _mm256_set1_epi8(0x30), k32 = _mm256_set1_epi8(32);
    const __m256 d = _mm256_set1_ps(het_h2f_f16c(x->d));
    const __m128i sc8 = _mm_loadu_si128((const __m128i *)x->scales);
    const __m256i ql0 = _mm256_loadu_si256((const __m256i *)(x->ql + 64 * hh));
    const __m256i ql1 = _mm256_loadu_si256((const __m256i *)(x->ql + 64 * hh + 32));
    const __m256i qh = _mm256_loadu_si256((const __m256i *)(x->qh + 32 * hh));
    __m256i q[4];
    q[0] = _mm256_or_si256(_mm256_and_si256(ql0, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 4), m30));
    q[1] = _mm256_or_si256(_mm256_and_si256(ql1, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 2), m30));
    q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), m4), _mm256_and_si256(qh, m30));
    q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), m4),
                           _mm256_and_si256(_mm256_srli_epi16(qh, 2), m30));
    /* bytes [sc[2t] x8, sc[2t+1] x8] -> int16 */
    __m128i ctrl = _mm_add_epi8(_mm_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1),
                                _mm_set1_epi8((char)(8 * hh)));
#pragma GCC unroll 4
    for (int tt = 0; tt < 4; tt++) {
        const __m256i scv = _mm256_cvtepi8_epi16(_mm_shuffle_epi8(sc8, ctrl));
        ctrl = _mm_add_epi8(ctrl, _mm_set1_epi8(2));
        const int64_t b = sb * 8 + 4 * hh + tt;
        __m256 *acc = (tt & 1) ? acc1 : acc0;
#pragma GCC unroll 4
        for (int c = 0; c < NC; c++) {
            const __m256i av = _mm256_loadu_si256((const __m256i *)HET_QS(a[c], bs, b));
            const __m256i p = _mm256_sub_epi16(_mm256_maddubs_epi16(q[tt], av), _mm256_maddubs_epi16(k32, av));
            const __m256i i = _mm256_madd_epi16(p, scv);
            acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(i), _mm256_mul_ps(d, _mm256_broadcast_ss(&HET_META(a[c], bs, b)->d)),
                                     acc[c]);
        }
    }
}

/* q6_K: block t (32 elements) of a super-block has two 16-element halves
 * with int8 scales sc[2t], sc[2t+1]; vpmaddwd applies them to the s16 pairs
 * (lanes 0-7 hold the first half). The -32 offset is taken off the s16
 * pairs first, as maddubs(32, a) (both fit: -8128..16002). */
HET_INLINE void het_gemv_q6_k_t(int64_t K, const void *w, const uint8_t *const *a, float *out, const int NC)
{
    __m256 acc0[4], acc1[4];
    het_zero_acc(acc0, NC);
    het_zero_acc(acc1, NC);
    const int64_t nsb = K / 256;
    for (int64_t sb = 0; sb < nsb; sb++) {
        const het_block_q6_k *x = (const het_block_q6_k *)w + sb;
        het_q6_k_half(x, 0, a, sb, acc0, acc1, NC);
        het_q6_k_half(x, 1, a, sb, acc0, acc1, NC);
    }
    het_acc_out(acc0, acc1, NC, NULL, out);
}

/* Dispatch on NC so each instance has constant trip counts. */
#define HET_GEMV_DISPATCH(name, body)                                                                \
    static void name(int64_t K, const void *w, const uint8_t *const *a, int nc, float *out)         \
    {                                                                                                \
        switch (nc) {                                                                                \
        case 1: body(K, w, a, out, 1); break;                                                        \
        case 2: body(K, w, a, out, 2); break;                                                        \
        case 3: body(K, w, a, out, 3); break;                                                        \
        default: body(K, w, a, out, 4); break;                                                       \
        }                                                                                            \
    }

#define HET_Q4K(K, w, a, out, n) het_gemv_q45k_t(K, w, a, out, n, false)
#define HET_Q5K(K, w, a, out, n) het_gemv_q45k_t(K, w, a, out, n, true)
HET_GEMV_DISPATCH(het_gemv_q4_0_avx2, het_gemv_q4_0_t)
HET_GEMV_DISPATCH(het_gemv_q8_0_avx2, het_gemv_q8_0_t)
HET_GEMV_DISPATCH(het_gemv_q4_k_avx2, HET_Q4K)
HET_GEMV_DISPATCH(het_gemv_q5_k_avx2, HET_Q5K)
HET_GEMV_DISPATCH(het_gemv_q6_k_avx2, het_gemv_q6_k_t)
#undef HET_Q4K
#undef HET_Q5K

/* ---- panel kernels: 8 packed rows x NC q8r rows ----------------------------------- */

/* Block epilogue shared by the kernels: acc += (d_w * d_a) * float(isum). */
HET_INLINE __m256 het_panel_scale(__m256 acc, __m256i isum, __m256 dw, float da)
{
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(dw, _mm256_set1_ps(da)), acc);
}

/* U5 (q5_0, q5_1, q5_K): unsigned quants 0..31, value d*q + c. The s16
 * sums are taken per half block (4 groups * 2 * 31 * 127 = 31496 fits). */
HET_INLINE void het_panel_u5_t(const struct het_panel_layout *l, const void *panel, const uint8_t *const *a,
                               float *out, const int NC)
{
    const size_t bs = HET_Q8R_BS;
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 acc[4];
    for (int c = 0; c < NC; c++) acc[c] = _mm256_setzero_ps();
    const uint8_t *pb = panel;
    for (int64_t b = 0; b < l->nb; b++, pb += l->blk_bytes) {
        __m256i p[4], p2[4];
        for (int c = 0; c < NC; c++) p[c] = p2[c] = _mm256_setzero_si256();
#pragma GCC unroll 8
        for (int g = 0; g < 8; g++) {
            const __m256i wv = _mm256_load_si256((const __m256i *)(pb + 32 * g));
#pragma GCC unroll 4
            for (int c = 0; c < NC; c++) {
                const __m256i t = _mm256_maddubs_epi16(wv, het_bcast4(HET_QS(a[c], bs, b) + 4 * g));
                /* two chains, one per half block */
                if (g >= 4) {
                    p2[c] = _mm256_add_epi16(p2[c], t);
                    HET_KEEP(p2[c]);
                } else {
                    p[c] = _mm256_add_epi16(p[c], t);
                    HET_KEEP(p[c]);
                }
            }
        }
        const __m256 dv = _mm256_load_ps((const float *)(pb + l->off_d));
        const __m256 cv = _mm256_load_ps((const float *)(pb + l->off_c));
#pragma GCC unroll 4
        for (int c = 0; c < NC; c++) {
            const struct het_q8r_meta *m = HET_META(a[c], bs, b);
            _mm_prefetch((const char *)HET_QS(a[c], bs, b + HET_AVX2_PF_ACT_BLOCKS), _MM_HINT_T0);
            const __m256i i = _mm256_add_epi32(_mm256_madd_epi16(p[c], ones), _mm256_madd_epi16(p2[c], ones));
            acc[c] = het_panel_scale(acc[c], i, dv, m->d);
            acc[c] = _mm256_fmadd_ps(cv, _mm256_set1_ps(m->s), acc[c]);
        }
    }
    for (int c = 0; c < NC; c++) _mm256_storeu_ps(out + 8 * c, acc[c]);
}

#define HET_PANEL_DISPATCH(name, body)                                                               \
    static void name(const struct het_panel_layout *l, const void *panel, const uint8_t *const *a,  \
                     int nc, float *out)                                                             \
    {                                                                                                \
        switch (nc) {                                                                                \
        case 1: body(l, panel, a, out, 1); break;                                                    \
        case 2: body(l, panel, a, out, 2); break;                                                    \
        case 3: body(l, panel, a, out, 3); break;                                                    \
        default: body(l, panel, a, out, 4); break;                                                   \
        }                                                                                            \
    }

HET_PANEL_DISPATCH(het_panel_u5_avx2, het_panel_u5_t)

/* ---- float weights ------------------------------------------------------------------ */

HET_INLINE __m256 het_load8(enum het_type t, const void *w, int64_t k)
{
    if (t == HET_TYPE_F32) return _mm256_loadu_ps((const float *)w + k);
    const __m128i h = _mm_loadu_si128((const __m128i *)((const uint16_t *)w + k));
    if (t == HET_TYPE_F16) return _mm256_cvtph_ps(h);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

HET_INLINE float het_load1(enum het_type t, const void *w, int64_t k)
{
    if (t == HET_TYPE_F32) return ((const float *)w)[k];
    const uint16_t h = ((const uint16_t *)w)[k];
    return t == HET_TYPE_F16 ? het_h2f_f16c(h) : het_bf16_to_fp32(h);
}

/* NR weight rows x NC rows of x; U independent accumulators per pair so the
 * small shapes (GEMV) are not bound by FMA latency. */
HET_INLINE void het_fdot_t(enum het_type t, int64_t K, const void *const *w, const float *const *x, float *out,
                           const int NR, const int NC, const int U)
{
    __m256 acc[4][2][4];
    for (int u = 0; u < U; u++)
        for (int r = 0; r < NR; r++)
            for (int c = 0; c < NC; c++) acc[u][r][c] = _mm256_setzero_ps();
    int64_t k = 0;
    for (; k + 8 * U <= K; k += 8 * U) {
#pragma GCC unroll 4
        for (int u = 0; u < U; u++) {
            __m256 wv[2];
            for (int r = 0; r < NR; r++) wv[r] = het_load8(t, w[r], k + 8 * u);
#pragma GCC unroll 4
            for (int c = 0; c < NC; c++) {
                const __m256 xv = _mm256_loadu_ps(x[c] + k + 8 * u);
                for (int r = 0; r < NR; r++) acc[u][r][c] = _mm256_fmadd_ps(wv[r], xv, acc[u][r][c]);
            }
        }
    }
    for (; k + 8 <= K; k += 8) {
        __m256 wv[2];
        for (int r = 0; r < NR; r++) wv[r] = het_load8(t, w[r], k);
        for (int c = 0; c < NC; c++) {
            const __m256 xv = _mm256_loadu_ps(x[c] + k);
            for (int r = 0; r < NR; r++) acc[0][r][c] = _mm256_fmadd_ps(wv[r], xv, acc[0][r][c]);
        }
    }
    for (int r = 0; r < NR; r++) {
        for (int c = 0; c < NC; c++) {
            __m256 s = acc[0][r][c];
            for (int u = 1; u < U; u++) s = _mm256_add_ps(s, acc[u][r][c]);
            float v = het_hsum_ps(s);
            for (int64_t kk = k; kk < K; kk++) v += het_load1(t, w[r], kk) * x[c][kk];
            out[r * 4 + c] = v;
        }
    }
}

HET_INLINE void het_fdot_any(enum het_type t, int64_t K, const void *const *w, int nr, const float *const *x, int nc,
                             float *out)
{
    if (nr == 2) {
        switch (nc) {
        case 1: het_fdot_t(t, K, w, x, out, 2, 1, 2); break;
        case 2: het_fdot_t(t, K, w, x, out, 2, 2, 1); break;
        case 3: het_fdot_t(t, K, w, x, out, 2, 3, 1); break;
        default: het_fdot_t(t, K, w, x, out, 2, 4, 1); break;
        }
    } else {
        switch (nc) {
        case 1: het_fdot_t(t, K, w, x, out, 1, 1, 4); break;
        case 2: het_fdot_t(t, K, w, x, out, 1, 2, 2); break;
        case 3: het_fdot_t(t, K, w, x, out, 1, 3, 1); break;
        default: het_fdot_t(t, K, w, x, out, 1, 4, 1); break;
        }
    }
}

static void het_fdot_f32_avx2(int64_t K, const void *const *w, int nr, const float *const *x, int nc, float *out)
{
    het_fdot_any(HET_TYPE_F32, K, w, nr, x, nc, out);
}

static void het_fdot_f16_avx2(int64_t K, const void *const *w, int nr, const float *const *x, int nc, float *out)
{
    het_fdot_any(HET_TYPE_F16, K, w, nr, x, nc, out);
}

static void het_fdot_bf16_avx2(int64_t K, const void *const *w, int nr, const float *const *x, int nc, float *out)
{
    het_fdot_any(HET_TYPE_BF16, K, w, nr, x, nc, out);
}

const struct het_mm_kernels het_mm_kernels_avx2 = {
    .quantize = het_q8r_quantize_avx2,
    .gemv = {
        [HET_TYPE_Q4_0] = het_gemv_q4_0_avx2, [HET_TYPE_Q8_0] = het_gemv_q8_0_avx2,
        [HET_TYPE_Q4_K] = het_gemv_q4_k_avx2, [HET_TYPE_Q5_K] = het_gemv_q5_k_avx2,
        [HET_TYPE_Q6_K] = het_gemv_q6_k_avx2,
    },
    .fdot = {
        [HET_TYPE_F32] = het_fdot_f32_avx2, [HET_TYPE_F16] = het_fdot_f16_avx2,
        [HET_TYPE_BF16] = het_fdot_bf16_avx2,
    },
    .dequant = {
        [HET_TYPE_Q4_0] = het_dequant_q4_0_avx2, [HET_TYPE_Q8_0] = het_dequant_q8_0_avx2,
        [HET_TYPE_Q4_K] = het_dequant_q4_k_avx2, [HET_TYPE_Q6_K] = het_dequant_q6_k_avx2,
    },
    .panel = {
        [HET_PANEL_U5] = het_panel_u5_avx2, [HET_PANEL_U4N] = het_panel_u4n_avx2, [HET_PANEL_Q40] = het_panel_q40_avx2,
        [HET_PANEL_Q80] = het_panel_q80_avx2, [HET_PANEL_Q6C] = het_panel_q6c_avx2,
        [HET_PANEL_Q4KC] = het_panel_q4kc_avx2,
    },
    .panels = {
        [HET_PANEL_Q40] = het_panels_q40_avx2, [HET_PANEL_Q80] = het_panels_q80_avx2,
        [HET_PANEL_Q6C] = het_panels_q6c_avx2, [HET_PANEL_Q4KC] = het_panels_q4kc_avx2,
    },
    .panel_rows = 8,
    .xexpand = {[HET_PANEL_Q40] = het_xexpand_q40_avx2, [HET_PANEL_Q80] = het_xexpand_q80_avx2},
    .xpanel = {[HET_PANEL_Q40] = het_xpanel_q40_avx2, [HET_PANEL_Q80] = het_xpanel_q80_avx2},
    .xcols = 3,
};
