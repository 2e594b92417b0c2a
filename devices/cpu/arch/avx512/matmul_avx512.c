/*
 * matmul_avx512.c — AVX-512 panel kernels of the CPU matrix multiplication
 * for q4_0/q4_1 (U4N), q4_K (U4), q8_0 (S8) and q6_K (U6).
 *
 * They are the AVX2 panel kernels widened to 16 packed rows (one zmm holds
 * k = 4g..4g+3 of 16 rows; het_panel_pack's R=16 layout, which the scalar
 * level also uses and so is tested everywhere). With AVX512-VNNI, vpdpbusd
 * replaces the vpmaddubsw/vpaddw/vpmaddwd chain for U4 and S8 (S8 then
 * biases the weights by +128 to make them unsigned and takes 128*sum(a)
 * back off). The compact and wide panel kernels (decode and prefill of
 * q4_0, q8_0, q4_K, q6_K) are in panel_compact_avx512.c. Everything else
 * (GEMV, quantisation, float weights, U5) comes from the AVX2 level. Kept deliberately close to the AVX2 code: this file
 * cannot run on machines without AVX-512, so each step mirrors a tested one.
 */
#include <immintrin.h>
#include <string.h>

#include "devices/cpu/arch/avx512/panel_compact_avx512.h"
#include "devices/cpu/quant_dot.h"

#define HET_INLINE static inline __attribute__((always_inline))
#define HET_KEEP(v) __asm__("" : "+v"(v))
#define HET_PF_BLOCKS 3

HET_INLINE __m512i het_bcast4_512(const void *p)
{
    int32_t v;
    memcpy(&v, p, 4);
    return _mm512_set1_epi32(v);
}

HET_INLINE const int8_t *het_qs(const uint8_t *row, size_t bs, int64_t b)
{
    return (const int8_t *)(row + (size_t)b * bs);
}

HET_INLINE const struct het_q8r_meta *het_meta(const uint8_t *row, size_t bs, int64_t b)
{
    return (const struct het_q8r_meta *)(row + (size_t)b * bs + bs - 32);
}

/* acc += (d_w * d_a) * float(isum) */
HET_INLINE __m512 het_scale512(__m512 acc, __m512i isum, __m512 dw, float da)
{
    return _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(dw, _mm512_set1_ps(da)), acc);
}

/* U4: value d*q + c, q in 0..15. Without VNNI: two s16 chains per row
 * (even / odd groups; 8 * 2 * 15 * 127 = 30480 fits), one vpmaddwd. */
HET_INLINE void het_panel_u4_t(const struct het_panel_layout *l, const void *panel, const uint8_t *const *a,
                               float *out, const int NC, const bool vnni)
{
    const size_t bs = HET_Q8R_BS;
    const __m512i ones = _mm512_set1_epi16(1);
    __m512 acc[4];
    for (int c = 0; c < NC; c++) acc[c] = _mm512_setzero_ps();
    const uint8_t *pb = panel;
    for (int64_t b = 0; b < l->nb; b++, pb += l->blk_bytes) {
        __m512i p[4], p2[4];
        for (int c = 0; c < NC; c++) p[c] = p2[c] = _mm512_setzero_si512();
#pragma GCC unroll 8
        for (int g = 0; g < 8; g++) {
            const __m512i wv = _mm512_load_si512((const void *)(pb + 64 * g));
#pragma GCC unroll 4
            for (int c = 0; c < NC; c++) {
                const __m512i av = het_bcast4_512(het_qs(a[c], bs, b) + 4 * g);
                if (vnni) {
                    p[c] = _mm512_dpbusd_epi32(p[c], wv, av);
                    HET_KEEP(p[c]);
                } else if (g & 1) {
                    p2[c] = _mm512_add_epi16(p2[c], _mm512_maddubs_epi16(wv, av));
                    HET_KEEP(p2[c]);
                } else {
                    p[c] = _mm512_add_epi16(p[c], _mm512_maddubs_epi16(wv, av));
                    HET_KEEP(p[c]);
                }
            }
        }
        const __m512 dv = _mm512_load_ps((const void *)(pb + l->off_d));
        const __m512 cv = _mm512_load_ps((const void *)(pb + l->off_c));
#pragma GCC unroll 4
        for (int c = 0; c < NC; c++) {
            const struct het_q8r_meta *m = het_meta(a[c], bs, b);
            _mm_prefetch((const char *)het_qs(a[c], bs, b + HET_PF_BLOCKS), _MM_HINT_T0);
            const __m512i i = vnni ? p[c] : _mm512_madd_epi16(_mm512_add_epi16(p[c], p2[c]), ones);
            acc[c] = het_scale512(acc[c], i, dv, m->d);
            acc[c] = _mm512_fmadd_ps(cv, _mm512_set1_ps(m->s), acc[c]);
        }
    }
    for (int c = 0; c < NC; c++) _mm512_storeu_ps(out + 16 * c, acc[c]);
}

/* U4N: U4 kept as nibbles; each 64-byte load is groups g (low nibbles) and
 * g+4 (high nibbles) of the 16 rows. Without VNNI the low and high groups
 * sum in two s16 chains (4 * 2 * 15 * 127 each, 30480 together). */
HET_INLINE void het_panel_u4n_t(const struct het_panel_layout *l, const void *panel, const uint8_t *const *a,
                                float *out, const int NC, const bool vnni)
{
    const size_t bs = HET_Q8R_BS;
    const __m512i ones = _mm512_set1_epi16(1), m4 = _mm512_set1_epi8(15);
    __m512 acc[4];
    for (int c = 0; c < NC; c++) acc[c] = _mm512_setzero_ps();
    const uint8_t *pb = panel;
    for (int64_t b = 0; b < l->nb; b++, pb += l->blk_bytes) {
        __m512i p[4], p2[4];
        for (int c = 0; c < NC; c++) p[c] = p2[c] = _mm512_setzero_si512();
#pragma GCC unroll 4
        for (int g = 0; g < 4; g++) {
            const __m512i v = _mm512_load_si512((const void *)(pb + 64 * g));
            const __m512i lo = _mm512_and_si512(v, m4), hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
#pragma GCC unroll 4
            for (int c = 0; c < NC; c++) {
                const int8_t *qa = het_qs(a[c], bs, b);
                const __m512i a0 = het_bcast4_512(qa + 4 * g), a1 = het_bcast4_512(qa + 16 + 4 * g);
                if (vnni) {
                    p[c] = _mm512_dpbusd_epi32(p[c], lo, a0);
                    HET_KEEP(p[c]);
                    p2[c] = _mm512_dpbusd_epi32(p2[c], hi, a1);
                    HET_KEEP(p2[c]);
                } else {
                    p[c] = _mm512_add_epi16(p[c], _mm512_maddubs_epi16(lo, a0));
                    HET_KEEP(p[c]);
                    p2[c] = _mm512_add_epi16(p2[c], _mm512_maddubs_epi16(hi, a1));
                    HET_KEEP(p2[c]);
                }
            }
        }
        const __m512 dv = _mm512_load_ps((const void *)(pb + l->off_d));
        const __m512 cv = _mm512_load_ps((const void *)(pb + l->off_c));
#pragma GCC unroll 4
        for (int c = 0; c < NC; c++) {
            const struct het_q8r_meta *m = het_meta(a[c], bs, b);
            _mm_prefetch((const char *)het_qs(a[c], bs, b + HET_PF_BLOCKS), _MM_HINT_T0);
            const __m512i i = vnni ? _mm512_add_epi32(p[c], p2[c])
                                   : _mm512_madd_epi16(_mm512_add_epi16(p[c], p2[c]), ones);
            acc[c] = het_scale512(acc[c], i, dv, m->d);
            acc[c] = _mm512_fmadd_ps(cv, _mm512_set1_ps(m->s), acc[c]);
        }
    }
    for (int c = 0; c < NC; c++) _mm512_storeu_ps(out + 16 * c, acc[c]);
}

/* S8: signed weights. VNNI: (w + 128) is unsigned, so
 * dpbusd(w ^ 0x80, a) = sum(w*a) + 128*sum(a); sum32 takes the bias off.
 * Without VNNI: |a| x (w with the sign of a), one vpmaddwd per group
 * (there is no vpsignb on zmm: negate under the sign mask of a). */
HET_INLINE void het_panel_s8_t(const struct het_panel_layout *l, const void *panel, const uint8_t *const *a,
                               float *out, const int NC, const bool vnni)
{
    const size_t bs = HET_Q8R_BS_ABS;
    const __m512i ones = _mm512_set1_epi16(1);
    const __m512i bias = _mm512_set1_epi8((char)0x80);
    __m512 acc[4];
    for (int c = 0; c < NC; c++) acc[c] = _mm512_setzero_ps();
    const uint8_t *pb = panel;
    for (int64_t b = 0; b < l->nb; b++, pb += l->blk_bytes) {
        __m512i is[4];
        for (int c = 0; c < NC; c++) is[c] = _mm512_setzero_si512();
#pragma GCC unroll 8
        for (int g = 0; g < 8; g++) {
            const __m512i wv = _mm512_load_si512((const void *)(pb + 64 * g));
            const __m512i wu = _mm512_xor_si512(wv, bias);
#pragma GCC unroll 4
            for (int c = 0; c < NC; c++) {
                const __m512i sa = het_bcast4_512(het_qs(a[c], bs, b) + 4 * g);
                if (vnni) {
                    is[c] = _mm512_dpbusd_epi32(is[c], wu, sa);
                } else {
                    const __m512i ua = het_bcast4_512(a[c] + (size_t)b * bs + 32 + 4 * g);
                    const __mmask64 neg = _mm512_movepi8_mask(sa);
                    const __m512i sw = _mm512_mask_sub_epi8(wv, neg, _mm512_setzero_si512(), wv);
                    is[c] = _mm512_add_epi32(is[c], _mm512_madd_epi16(_mm512_maddubs_epi16(ua, sw), ones));
                }
                HET_KEEP(is[c]);
            }
        }
        const __m512 dv = _mm512_load_ps((const void *)(pb + l->off_d));
#pragma GCC unroll 4
        for (int c = 0; c < NC; c++) {
            const struct het_q8r_meta *m = het_meta(a[c], bs, b);
            _mm_prefetch((const char *)het_qs(a[c], bs, b + HET_PF_BLOCKS), _MM_HINT_T0);
            __m512i i = is[c];
            if (vnni) i = _mm512_sub_epi32(i, _mm512_set1_epi32(m->sum32 * 128));
            acc[c] = het_scale512(acc[c], i, dv, m->d);
        }
    }
    for (int c = 0; c < NC; c++) _mm512_storeu_ps(out + 16 * c, acc[c]);
}

/* U6 (q6_K): as the AVX2 kernel: two groups' s16 pairs summed (32004 fits),
 * vpmaddwd with the half-block scales, then the -32 offset from sum16. */
HET_INLINE void het_panel_u6_t(const struct het_panel_layout *l, const void *panel, const uint8_t *const *a,
                               float *out, const int NC)
{
    const size_t bs = HET_Q8R_BS;
    __m512 acc[4];
    for (int c = 0; c < NC; c++) acc[c] = _mm512_setzero_ps();
    const uint8_t *pb = panel;
    for (int64_t b = 0; b < l->nb; b++, pb += l->blk_bytes) {
        const uint8_t *sc = pb + l->off_sc;
        __m512i is[4];
        for (int c = 0; c < NC; c++) is[c] = _mm512_setzero_si512();
#pragma GCC unroll 4
        for (int h = 0; h < 4; h++) {
            const __m512i w0 = _mm512_load_si512((const void *)(pb + 128 * h));
            const __m512i w1 = _mm512_load_si512((const void *)(pb + 128 * h + 64));
            const __m512i scv = _mm512_load_si512((const void *)(sc + 64 * (h >> 1)));
#pragma GCC unroll 4
            for (int c = 0; c < NC; c++) {
                const int8_t *ab = het_qs(a[c], bs, b) + 8 * h;
                __m512i t = _mm512_maddubs_epi16(w0, het_bcast4_512(ab));
                t = _mm512_add_epi16(t, _mm512_maddubs_epi16(w1, het_bcast4_512(ab + 4)));
                is[c] = _mm512_add_epi32(is[c], _mm512_madd_epi16(t, scv));
                HET_KEEP(is[c]);
            }
        }
        const __m512i scp = _mm512_load_si512((const void *)(sc + 128));
        const __m512 dv = _mm512_load_ps((const void *)(pb + l->off_d));
#pragma GCC unroll 4
        for (int c = 0; c < NC; c++) {
            const struct het_q8r_meta *m = het_meta(a[c], bs, b);
            _mm_prefetch((const char *)het_qs(a[c], bs, b + HET_PF_BLOCKS), _MM_HINT_T0);
            const __m512i o = _mm512_madd_epi16(scp, het_bcast4_512(m->sum16));
            acc[c] = het_scale512(acc[c], _mm512_sub_epi32(is[c], _mm512_slli_epi32(o, 5)), dv, m->d);
        }
    }
    for (int c = 0; c < NC; c++) _mm512_storeu_ps(out + 16 * c, acc[c]);
}

/* Entry points: constant NC per instance, VNNI chosen per call. */
static void het_panel_u4_avx512(const struct het_panel_layout *l, const void *panel, const uint8_t *const *a,
                                int nc, float *out)
{
    const bool vnni = __builtin_cpu_supports("avx512vnni");
    switch (nc) {
    case 1: vnni ? het_panel_u4_t(l, panel, a, out, 1, true) : het_panel_u4_t(l, panel, a, out, 1, false); break;
    case 2: vnni ? het_panel_u4_t(l, panel, a, out, 2, true) : het_panel_u4_t(l, panel, a, out, 2, false); break;
    case 3: vnni ? het_panel_u4_t(l, panel, a, out, 3, true) : het_panel_u4_t(l, panel, a, out, 3, false); break;
    default: vnni ? het_panel_u4_t(l, panel, a, out, 4, true) : het_panel_u4_t(l, panel, a, out, 4, false); break;
    }
}

static void het_panel_u4n_avx512(const struct het_panel_layout *l, const void *panel, const uint8_t *const *a,
                                 int nc, float *out)
{
    const bool vnni = __builtin_cpu_supports("avx512vnni");
    switch (nc) {
    case 1: vnni ? het_panel_u4n_t(l, panel, a, out, 1, true) : het_panel_u4n_t(l, panel, a, out, 1, false); break;
    case 2: vnni ? het_panel_u4n_t(l, panel, a, out, 2, true) : het_panel_u4n_t(l, panel, a, out, 2, false); break;
    case 3: vnni ? het_panel_u4n_t(l, panel, a, out, 3, true) : het_panel_u4n_t(l, panel, a, out, 3, false); break;
    default: vnni ? het_panel_u4n_t(l, panel, a, out, 4, true) : het_panel_u4n_t(l, panel, a, out, 4, false); break;
    }
}

static void het_panel_s8_avx512(const struct het_panel_layout *l, const void *panel, const uint8_t *const *a,
                                int nc, float *out)
{
    const bool vnni = __builtin_cpu_supports("avx512vnni");
    switch (nc) {
    case 1: vnni ? het_panel_s8_t(l, panel, a, out, 1, true) : het_panel_s8_t(l, panel, a, out, 1, false); break;
    case 2: vnni ? het_panel_s8_t(l, panel, a, out, 2, true) : het_panel_s8_t(l, panel, a, out, 2, false); break;
    case 3: vnni ? het_panel_s8_t(l, panel, a, out, 3, true) : het_panel_s8_t(l, panel, a, out, 3, false); break;
    default: vnni ? het_panel_s8_t(l, panel, a, out, 4, true) : het_panel_s8_t(l, panel, a, out, 4, false); break;
    }
}

static void het_panel_u6_avx512(const struct het_panel_layout *l, const void *panel, const uint8_t *const *a,
                                int nc, float *out)
{
    switch (nc) {
    case 1: het_panel_u6_t(l, panel, a, out, 1); break;
    case 2: het_panel_u6_t(l, panel, a, out, 2); break;
    case 3: het_panel_u6_t(l, panel, a, out, 3); break;
    default: het_panel_u6_t(l, panel, a, out, 4); break;
    }
}

const struct het_mm_kernels het_mm_kernels_avx512 = {
    .panel = {
        [HET_PANEL_U4] = het_panel_u4_avx512,
        [HET_PANEL_S8] = het_panel_s8_avx512,
        [HET_PANEL_U6] = het_panel_u6_avx512,
        [HET_PANEL_U4N] = het_panel_u4n_avx512,
        [HET_PANEL_Q40] = het_panel_q40_avx512,
        [HET_PANEL_Q80] = het_panel_q80_avx512,
        [HET_PANEL_Q6C] = het_panel_q6c_avx512,
        [HET_PANEL_Q4KC] = het_panel_q4kc_avx512,
    },
    .panels = {
        [HET_PANEL_Q40] = het_panels_q40_avx512,
        [HET_PANEL_Q80] = het_panels_q80_avx512,
        [HET_PANEL_Q6C] = het_panels_q6c_avx512,
        [HET_PANEL_Q4KC] = het_panels_q4kc_avx512,
    },
    .panel_rows = 16,
    .xexpand = {
        [HET_PANEL_Q40] = het_xexpand_q40_avx512, [HET_PANEL_Q80] = het_xexpand_q80_avx512,
        [HET_PANEL_Q6C] = het_xexpand_q6c_avx512, [HET_PANEL_Q4KC] = het_xexpand_q4kc_avx512,
    },
    .xpanel = {
        [HET_PANEL_Q40] = het_xpanel_q40_avx512, [HET_PANEL_Q80] = het_xpanel_q80_avx512,
        [HET_PANEL_Q6C] = het_xpanel_q6c_avx512, [HET_PANEL_Q4KC] = het_xpanel_q4kc_avx512,
    },
    .xcols = 4,
};
