/*
 * panel_compact_avx512.c — AVX-512 kernels over the compact panels (Q40,
 * Q80, Q6C, Q4KC at R = 16: the file's bytes, one zmm holds 4 consecutive k
 * of 16 rows, see quant_dot.h) and over the wide panels (32 rows of byte
 * quants) that batch matmuls expand Q40 / Q80 panels into.
 *
 * Compact kernels serve decode: every weight byte is read once per token in
 * one forward stream, so each block asks for its lines HET_PF_AHEAD bytes
 * ahead and the arithmetic stays well under the memory time. Integer sums
 * use vpdpbusd (u8 weights x s8 activations -> i32) where the CPU has
 * AVX512-VNNI; otherwise vpmaddubsw + vpmaddwd give the same i32 sums (every
 * u8 operand here is at most 63, so no s16 pair saturates), except for q8_0
 * whose signed weights take |a| x sign(w, a). With VNNI, q8_0 is made
 * unsigned by xor 0x80 (+128) and 128 * sum(a) is taken back off.
 *
 * Wide kernels serve prefill: 32 rows x 1..4 activation rows per call, the
 * quants already bytes (q8_0 biased to unsigned at expansion when VNNI is
 * there; the K-quants' sub-block scales already multiplied into float
 * per-row scales), so the inner loop is loads, broadcasts and vpdpbusd.
 * Each kernel computes exactly the formula of het_panel_gemm_scalar.
 */
#include <immintrin.h>
#include <string.h>

#include "devices/cpu/arch/avx512/panel_compact_avx512.h"

#define HET_INLINE static inline __attribute__((always_inline))
#define HET_KEEP(v) __asm__("" : "+v"(v))

#define HET_QA(row, bs, b) ((const int8_t *)((row) + (size_t)(b) * (bs)))
#define HET_UA(row, bs, b) ((row) + (size_t)(b) * (bs) + 32)
#define HET_MT(row, bs, b) ((const struct het_q8r_meta *)((row) + (size_t)(b) * (bs) + (bs) - 32))

/* Decode streams the panels once per token; the hardware prefetchers alone
 * leave the core waiting between panels, so each block asks this far ahead. */
#define HET_PF_AHEAD 4096

HET_INLINE void het_pf(const uint8_t *p, int lines)
{
    for (int i = 0; i < lines; i++) _mm_prefetch((const char *)p + HET_PF_AHEAD + 64 * i, _MM_HINT_T0);
}

HET_INLINE __m512i het_bc4(const void *p)
{
    int32_t v;
    memcpy(&v, p, 4);
    return _mm512_set1_epi32(v);
}

/* 16 fp16 scales -> floats */
HET_INLINE __m512 het_ld_h16(const uint8_t *p) { return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p)); }

/* 16 bytes -> 16 floats */
HET_INLINE __m512 het_ld_u8f(const uint8_t *p)
{
    return _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)p)));
}

/* acc + i32 sum of u[j] * s[j] over each lane's 4 bytes (u <= 127 without
 * VNNI: the s16 pairs cannot saturate) */
HET_INLINE __m512i het_dp(__m512i acc, __m512i u, __m512i s, const bool vnni)
{
    if (vnni) return _mm512_dpbusd_epi32(acc, u, s);
    return _mm512_add_epi32(acc, _mm512_madd_epi16(_mm512_maddubs_epi16(u, s), _mm512_set1_epi16(1)));
}

/* acc + float(isum) * (dw * da) */
HET_INLINE __m512 het_fscale(__m512 acc, __m512i isum, __m512 dw, float da)
{
    return _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(dw, _mm512_set1_ps(da)), acc);
}

/* ---- Q40: 16 rows of q4_0 nibbles; isum = sum(q*a) - 8*sum(a) ------------------------ */

HET_INLINE void het_q40_t(const struct het_panel_layout *l, const uint8_t *panel, const uint8_t *const *a,
                          float *out, size_t ldo, const int NC, const bool vnni)
{
    const size_t bs = HET_Q8R_BS;
    const __m512i m4 = _mm512_set1_epi8(15);
    __m512 acc[4];
#pragma GCC unroll 4
    for (int c = 0; c < NC; c++) acc[c] = _mm512_setzero_ps();
    for (int64_t b = 0; b < l->nb; b++) {
        const int64_t gi = b / 4, j = b % 4, len = het_cpanel_len(l, gi);
        const uint8_t *grp = het_cpanel_grp(l, panel, gi), *pb = grp + 256 * j;
        const uint8_t *pd = grp + het_cpanel_d_off(l, len) + 32 * j;
        het_pf(pb, j == 3 ? 6 : 4);
        __m512i s[4];
#pragma GCC unroll 4
        for (int c = 0; c < NC; c++) s[c] = _mm512_set1_epi32(-8 * HET_MT(a[c], bs, b)->sum32);
#pragma GCC unroll 4
        for (int g = 0; g < 4; g++) {
            const __m512i v = _mm512_load_si512((const void *)(pb + 64 * g));
            const __m512i lo = _mm512_and_si512(v, m4), hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
#pragma GCC unroll 4
            for (int c = 0; c < NC; c++) {
                const int8_t *qa = HET_QA(a[c], bs, b);
                s[c] = het_dp(s[c], lo, het_bc4(qa + 4 * g), vnni);
                HET_KEEP(s[c]);
                s[c] = het_dp(s[c], hi, het_bc4(qa + 16 + 4 * g), vnni);
                HET_KEEP(s[c]);
            }
        }
        const __m512 dv = het_ld_h16(pd);
#pragma GCC unroll 4
        for (int c = 0; c < NC; c++) acc[c] = het_fscale(acc[c], s[c], dv, HET_MT(a[c], bs, b)->d);
    }
#pragma GCC unroll 4
    for (int c = 0; c < NC; c++) _mm512_storeu_ps(out + ldo * (size_t)c, acc[c]);
}

/* ---- Q80: 16 rows of q8_0 bytes ------------------------------------------------------ */

HET_INLINE void het_q80_t(const struct het_panel_layout *l, const uint8_t *panel, const uint8_t *const *a,
                          float *out, size_t ldo, const int NC, const bool vnni)
{
    const size_t bs = HET_Q8R_BS_ABS;
    const __m512i bias = _mm512_set1_epi8((char)0x80), ones = _mm512_set1_epi16(1);
    __m512 acc[4];
#pragma GCC unroll 4
    for (int c = 0; c < NC; c++) acc[c] = _mm512_setzero_ps();
    for (int64_t b = 0; b < l->nb; b++) {
        const int64_t gi = b / 4, j = b % 4, len = het_cpanel_len(l, gi);
        const uint8_t *grp = het_cpanel_grp(l, panel, gi), *pb = grp + 512 * j;
        const uint8_t *pd = grp + het_cpanel_d_off(l, len) + 32 * j;
        het_pf(pb, j == 3 ? 10 : 8);
        __m512i s[4];
#pragma GCC unroll 4
        for (int c = 0; c < NC; c++)
            s[c] = vnni ? _mm512_set1_epi32(-128 * HET_MT(a[c], bs, b)->sum32) : _mm512_setzero_si512();
#pragma GCC unroll 8
        for (int g = 0; g < 8; g++) {
            const __m512i wv = _mm512_load_si512((const void *)(pb + 64 * g));
            const __m512i wu = _mm512_xor_si512(wv, bias);
#pragma GCC unroll 4
            for (int c = 0; c < NC; c++) {
                const __m512i sa = het_bc4(HET_QA(a[c], bs, b) + 4 * g);
                if (vnni) {
                    s[c] = _mm512_dpbusd_epi32(s[c], wu, sa);
                } else {
                    /* |a| x (w with the sign of a): no vpsignb on zmm */
                    const __m512i ua = het_bc4(HET_UA(a[c], bs, b) + 4 * g);
                    const __m512i sw = _mm512_mask_sub_epi8(wv, _mm512_movepi8_mask(sa), _mm512_setzero_si512(), wv);
                    s[c] = _mm512_add_epi32(s[c], _mm512_madd_epi16(_mm512_maddubs_epi16(ua, sw), ones));
                }
                HET_KEEP(s[c]);
            }
        }
        const __m512 dv = het_ld_h16(pd);
#pragma GCC unroll 4
        for (int c = 0; c < NC; c++) acc[c] = het_fscale(acc[c], s[c], dv, HET_MT(a[c], bs, b)->d);
    }
#pragma GCC unroll 4
    for (int c = 0; c < NC; c++) _mm512_storeu_ps(out + ldo * (size_t)c, acc[c]);
}

/* ---- Q6C: 16 rows of q6_K ---------------------------------------------------------------
 * Groups g / g+4 take their top 2 bits from qh[0] / qh[1] (bits 2g..2g+1
 * moved to bits 4..5; 16-bit shifts are safe because only bits 4..5 of each
 * byte are kept). Each half block sums in i32 from -32 * sum16[h], then the
 * rows' int8 half scales multiply: isum = sc0 * s0 + sc1 * s1. */
HET_INLINE __m512i het_q6_hi(__m512i qh, int g)
{
    const __m512i m30 = _mm512_set1_epi8(0x30);
    switch (g) {
    case 0:  return _mm512_and_si512(_mm512_slli_epi16(qh, 4), m30);
    case 1:  return _mm512_and_si512(_mm512_slli_epi16(qh, 2), m30);
    case 2:  return _mm512_and_si512(qh, m30);
    default: return _mm512_and_si512(_mm512_srli_epi16(qh, 2), m30);
    }
}

HET_INLINE void het_q6c_t(const struct het_panel_layout *l, const uint8_t *panel, const uint8_t *const *a,
                          float *out, size_t ldo, const int NC, const bool vnni)
{
    const size_t bs = HET_Q8R_BS;
    const __m512i m4 = _mm512_set1_epi8(15);
    __m512 acc[4];
#pragma GCC unroll 4
    for (int c = 0; c < NC; c++) acc[c] = _mm512_setzero_ps();
    for (int64_t b = 0; b < l->nb; b++) {
        const int64_t gi = b / 16, j = b % 16, len = het_cpanel_len(l, gi);
        const uint8_t *grp = het_cpanel_grp(l, panel, gi), *pb = grp + 384 * j;
        const uint8_t *psc = grp + het_cpanel_sc_off(l, len) + 32 * j;
        const uint8_t *pd = grp + het_cpanel_d_off(l, len) + 32 * (j / 8);
        het_pf(pb, j == 15 ? 15 : 6);
        /* int8 (lo, hi) scale pairs of 16 rows -> i32 lo and hi */
        const __m512i sc16 = _mm512_cvtepi8_epi16(_mm256_loadu_si256((const __m256i *)psc));
        const __m512i scl = _mm512_srai_epi32(_mm512_slli_epi32(sc16, 16), 16);
        const __m512i sch = _mm512_srai_epi32(sc16, 16);
        const __m512i qh0 = _mm512_load_si512((const void *)(pb + 256));
        const __m512i qh1 = _mm512_load_si512((const void *)(pb + 320));
        __m512i sl[4], sh[4];
#pragma GCC unroll 4
        for (int c = 0; c < NC; c++) {
            const struct het_q8r_meta *m = HET_MT(a[c], bs, b);
            sl[c] = _mm512_set1_epi32(-32 * m->sum16[0]);
            sh[c] = _mm512_set1_epi32(-32 * m->sum16[1]);
        }
#pragma GCC unroll 4
        for (int g = 0; g < 4; g++) {
            const __m512i v = _mm512_load_si512((const void *)(pb + 64 * g));
            const __m512i lo = _mm512_or_si512(_mm512_and_si512(v, m4), het_q6_hi(qh0, g));
            const __m512i hi = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(v, 4), m4), het_q6_hi(qh1, g));
#pragma GCC unroll 4
            for (int c = 0; c < NC; c++) {
                const int8_t *qa = HET_QA(a[c], bs, b);
                sl[c] = het_dp(sl[c], lo, het_bc4(qa + 4 * g), vnni);
                HET_KEEP(sl[c]);
                sh[c] = het_dp(sh[c], hi, het_bc4(qa + 16 + 4 * g), vnni);
                HET_KEEP(sh[c]);
            }
        }
        const __m512 dv = het_ld_h16(pd);
#pragma GCC unroll 4
        for (int c = 0; c < NC; c++) {
            const __m512i i = _mm512_add_epi32(_mm512_mullo_epi32(sl[c], scl), _mm512_mullo_epi32(sh[c], sch));
            acc[c] = het_fscale(acc[c], i, dv, HET_MT(a[c], bs, b)->d);
        }
    }
#pragma GCC unroll 4
    for (int c = 0; c < NC; c++) _mm512_storeu_ps(out + ldo * (size_t)c, acc[c]);
}

/* ---- Q4KC: 16 rows of q4_K: d*sc*da*sum(q*a) - dmin*m*s ----------------------------- */

HET_INLINE void het_q4kc_t(const struct het_panel_layout *l, const uint8_t *panel, const uint8_t *const *a,
                           float *out, size_t ldo, const int NC, const bool vnni)
{
    const size_t bs = HET_Q8R_BS;
    const __m512i m4 = _mm512_set1_epi8(15);
    __m512 acc[4];
#pragma GCC unroll 4
    for (int c = 0; c < NC; c++) acc[c] = _mm512_setzero_ps();
    const int64_t ng = (l->nb + l->grp - 1) / l->grp;
    for (int64_t gi = 0; gi < ng; gi++) {
        const int64_t len = het_cpanel_len(l, gi);
        const uint8_t *grp = het_cpanel_grp(l, panel, gi);
        const uint8_t *scm = grp + het_cpanel_sc_off(l, len);
        const uint8_t *pd = grp + het_cpanel_d_off(l, len);
        const __m512 dv = het_ld_h16(pd), mv = het_ld_h16(pd + 32);
        for (int64_t j = 0; j < len; j++) {
            const int64_t b = gi * l->grp + j;
            const uint8_t *pb = grp + 256 * j;
            het_pf(pb, j == len - 1 ? 9 : 4);
            __m512i s[4];
#pragma GCC unroll 4
            for (int c = 0; c < NC; c++) s[c] = _mm512_setzero_si512();
#pragma GCC unroll 4
            for (int g = 0; g < 4; g++) {
                const __m512i v = _mm512_load_si512((const void *)(pb + 64 * g));
                const __m512i lo = _mm512_and_si512(v, m4), hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
#pragma GCC unroll 4
                for (int c = 0; c < NC; c++) {
                    const int8_t *qa = HET_QA(a[c], bs, b);
                    s[c] = het_dp(s[c], lo, het_bc4(qa + 4 * g), vnni);
                    HET_KEEP(s[c]);
                    s[c] = het_dp(s[c], hi, het_bc4(qa + 16 + 4 * g), vnni);
                    HET_KEEP(s[c]);
                }
            }
            const __m512 dsc = _mm512_mul_ps(dv, het_ld_u8f(scm + 32 * j));
            const __m512 dm = _mm512_mul_ps(mv, het_ld_u8f(scm + 32 * j + 16));
#pragma GCC unroll 4
            for (int c = 0; c < NC; c++) {
                const struct het_q8r_meta *m = HET_MT(a[c], bs, b);
                acc[c] = het_fscale(acc[c], s[c], dsc, m->d);
                acc[c] = _mm512_fnmadd_ps(dm, _mm512_set1_ps(m->s), acc[c]);
            }
        }
    }
#pragma GCC unroll 4
    for (int c = 0; c < NC; c++) _mm512_storeu_ps(out + ldo * (size_t)c, acc[c]);
}

/* ---- entry points: NC constant per instance, VNNI chosen per call ---------------------- */

#define HET_NC_SWITCH(body, l, panel, a, out, ldo, nc, vnni)                                 \
    switch (nc) {                                                                           \
    case 1: vnni ? body(l, panel, a, out, ldo, 1, true) : body(l, panel, a, out, ldo, 1, false); break; \
    case 2: vnni ? body(l, panel, a, out, ldo, 2, true) : body(l, panel, a, out, ldo, 2, false); break; \
    case 3: vnni ? body(l, panel, a, out, ldo, 3, true) : body(l, panel, a, out, ldo, 3, false); break; \
    default: vnni ? body(l, panel, a, out, ldo, 4, true) : body(l, panel, a, out, ldo, 4, false); break; \
    }

#define HET_COMPACT_ENTRY(name, body)                                                                   \
    void name(const struct het_panel_layout *l, const void *panel, const uint8_t *const *a, int nc,     \
              float *out)                                                                               \
    {                                                                                                   \
        const bool vnni = __builtin_cpu_supports("avx512vnni");                                        \
        HET_NC_SWITCH(body, l, (const uint8_t *)panel, a, out, 16, nc, vnni)                           \
    }

/* np consecutive full panels in one call (decode: results straight to dst). */
#define HET_COMPACT_RUN(name, body)                                                                     \
    void name(const struct het_panel_layout *l, const void *panel, size_t stride, int64_t np,           \
              const uint8_t *const *a, int nc, float *out, size_t ldo)                                  \
    {                                                                                                   \
        const bool vnni = __builtin_cpu_supports("avx512vnni");                                        \
        const uint8_t *pp = panel;                                                                      \
        for (int64_t i = 0; i < np; i++)                                                                \
            HET_NC_SWITCH(body, l, pp + (size_t)i * stride, a, out + 16 * i, ldo, nc, vnni)            \
    }

HET_COMPACT_ENTRY(het_panel_q40_avx512, het_q40_t)
HET_COMPACT_ENTRY(het_panel_q80_avx512, het_q80_t)
HET_COMPACT_ENTRY(het_panel_q6c_avx512, het_q6c_t)
HET_COMPACT_ENTRY(het_panel_q4kc_avx512, het_q4kc_t)
HET_COMPACT_RUN(het_panels_q40_avx512, het_q40_t)
HET_COMPACT_RUN(het_panels_q80_avx512, het_q80_t)
HET_COMPACT_RUN(het_panels_q6c_avx512, het_q6c_t)
HET_COMPACT_RUN(het_panels_q4kc_avx512, het_q4kc_t)

/* ---- expansion to wide panels (32 rows) ---------------------------------------------------
 * Wide block: q[8][32][4] (group g: rows 0..15 from p0, then 16..31 from
 * p1), then float d[32]. Q40 quants become 0..15 (-8 taken off through
 * sum32 in the kernel); Q80 quants stay signed, or become w + 128 (xor
 * 0x80) when the kernel will use VNNI. */

HET_INLINE const uint8_t *het_x_block(const struct het_panel_layout *l, const uint8_t *p, int64_t b,
                                      const uint8_t **d)
{
    const int64_t gi = b / 4, j = b % 4;
    const uint8_t *grp = het_cpanel_grp(l, p, gi);
    *d = grp + het_cpanel_d_off(l, het_cpanel_len(l, gi)) + 32 * j;
    return grp + l->blk_bytes * (size_t)j;
}

void het_xexpand_q40_avx512(const struct het_panel_layout *l, const void *p0, const void *p1, int64_t b0, int64_t b1,
                            void *dst)
{
    const __m512i m4 = _mm512_set1_epi8(15);
    uint8_t *x = dst;
    const uint8_t *src[2] = {p0, p1};
    for (int64_t b = b0; b < b1; b++, x += het_xpanel_blk_bytes(16)) {
        for (int h = 0; h < 2; h++) {
            const uint8_t *pd = NULL, *q = src[h] ? het_x_block(l, src[h], b, &pd) : NULL;
            for (int g = 0; g < 4; g++) {
                __m512i v = _mm512_setzero_si512();
                if (q) v = _mm512_load_si512((const void *)(q + 64 * g));
                _mm512_store_si512((void *)(x + 128 * g + 64 * h), _mm512_and_si512(v, m4));
                _mm512_store_si512((void *)(x + 128 * (g + 4) + 64 * h),
                                   _mm512_and_si512(_mm512_srli_epi16(v, 4), m4));
            }
            _mm512_store_ps((void *)(x + 1024 + 64 * h), q ? het_ld_h16(pd) : _mm512_setzero_ps());
        }
    }
}

void het_xexpand_q80_avx512(const struct het_panel_layout *l, const void *p0, const void *p1, int64_t b0, int64_t b1,
                            void *dst)
{
    const __m512i bias = _mm512_set1_epi8(__builtin_cpu_supports("avx512vnni") ? (char)0x80 : 0);
    uint8_t *x = dst;
    const uint8_t *src[2] = {p0, p1};
    for (int64_t b = b0; b < b1; b++, x += het_xpanel_blk_bytes(16)) {
        for (int h = 0; h < 2; h++) {
            const uint8_t *pd = NULL, *q = src[h] ? het_x_block(l, src[h], b, &pd) : NULL;
            for (int g = 0; g < 8; g++) {
                __m512i v = _mm512_setzero_si512();
                if (q) v = _mm512_load_si512((const void *)(q + 64 * g));
                _mm512_store_si512((void *)(x + 128 * g + 64 * h), _mm512_xor_si512(v, bias));
            }
            _mm512_store_ps((void *)(x + 1024 + 64 * h), q ? het_ld_h16(pd) : _mm512_setzero_ps());
        }
    }
}

/* Q4KC: quants as Q40 (0..15); float d*sc and -(dmin*m) per row and block,
 * computed as the compact kernel computes them. */
void het_xexpand_q4kc_avx512(const struct het_panel_layout *l, const void *p0, const void *p1, int64_t b0,
                             int64_t b1, void *dst)
{
    const __m512i m4 = _mm512_set1_epi8(15);
    uint8_t *x = dst;
    const uint8_t *src[2] = {p0, p1};
    for (int64_t b = b0; b < b1; b++, x += het_xpanel_kind_blk_bytes(HET_PANEL_Q4KC, 16)) {
        const int64_t gi = b / l->grp, j = b % l->grp, len = het_cpanel_len(l, gi);
        for (int h = 0; h < 2; h++) {
            const uint8_t *grp = src[h] ? het_cpanel_grp(l, src[h], gi) : NULL;
            const uint8_t *q = grp ? grp + 256 * j : NULL;
            for (int g = 0; g < 4; g++) {
                __m512i v = _mm512_setzero_si512();
                if (q) v = _mm512_load_si512((const void *)(q + 64 * g));
                _mm512_store_si512((void *)(x + 128 * g + 64 * h), _mm512_and_si512(v, m4));
                _mm512_store_si512((void *)(x + 128 * (g + 4) + 64 * h),
                                   _mm512_and_si512(_mm512_srli_epi16(v, 4), m4));
            }
            __m512 dsc = _mm512_setzero_ps(), c = _mm512_setzero_ps();
            if (grp) {
                const uint8_t *scm = grp + het_cpanel_sc_off(l, len) + 32 * j, *pd = grp + het_cpanel_d_off(l, len);
                dsc = _mm512_mul_ps(het_ld_h16(pd), het_ld_u8f(scm));
                c = _mm512_sub_ps(_mm512_setzero_ps(), _mm512_mul_ps(het_ld_h16(pd + 32), het_ld_u8f(scm + 16)));
            }
            _mm512_store_ps((void *)(x + 1024 + 64 * h), dsc);
            _mm512_store_ps((void *)(x + 1152 + 64 * h), c);
        }
    }
}

/* Q6C: quants 0..63 (groups 0..3 the first half block, 4..7 the second);
 * float d*sc of each half per row and block. */
void het_xexpand_q6c_avx512(const struct het_panel_layout *l, const void *p0, const void *p1, int64_t b0, int64_t b1,
                            void *dst)
{
    const __m512i m4 = _mm512_set1_epi8(15);
    uint8_t *x = dst;
    const uint8_t *src[2] = {p0, p1};
    for (int64_t b = b0; b < b1; b++, x += het_xpanel_kind_blk_bytes(HET_PANEL_Q6C, 16)) {
        const int64_t gi = b / l->grp, j = b % l->grp, len = het_cpanel_len(l, gi);
        for (int h = 0; h < 2; h++) {
            const uint8_t *grp = src[h] ? het_cpanel_grp(l, src[h], gi) : NULL;
            const uint8_t *pb = grp ? grp + 384 * j : NULL;
            __m512i qh0 = _mm512_setzero_si512(), qh1 = _mm512_setzero_si512();
            if (pb) {
                qh0 = _mm512_load_si512((const void *)(pb + 256));
                qh1 = _mm512_load_si512((const void *)(pb + 320));
            }
            for (int g = 0; g < 4; g++) {
                __m512i v = _mm512_setzero_si512();
                if (pb) v = _mm512_load_si512((const void *)(pb + 64 * g));
                _mm512_store_si512((void *)(x + 128 * g + 64 * h),
                                   _mm512_or_si512(_mm512_and_si512(v, m4), het_q6_hi(qh0, g)));
                _mm512_store_si512((void *)(x + 128 * (g + 4) + 64 * h),
                                   _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(v, 4), m4), het_q6_hi(qh1, g)));
            }
            __m512 ds0 = _mm512_setzero_ps(), ds1 = _mm512_setzero_ps();
            if (grp) {
                const uint8_t *psc = grp + het_cpanel_sc_off(l, len) + 32 * j;
                const __m512 dv = het_ld_h16(grp + het_cpanel_d_off(l, len) + 32 * (j / 8));
                const __m512i sc16 = _mm512_cvtepi8_epi16(_mm256_loadu_si256((const __m256i *)psc));
                ds0 = _mm512_mul_ps(dv, _mm512_cvtepi32_ps(_mm512_srai_epi32(_mm512_slli_epi32(sc16, 16), 16)));
                ds1 = _mm512_mul_ps(dv, _mm512_cvtepi32_ps(_mm512_srai_epi32(sc16, 16)));
            }
            _mm512_store_ps((void *)(x + 1024 + 64 * h), ds0);
            _mm512_store_ps((void *)(x + 1152 + 64 * h), ds1);
        }
    }
}

/* ---- wide kernels: 32 rows x NC (1..4) ------------------------------------------------ */

HET_INLINE void het_x_store(__m512 acc[2][4], float *out, size_t ldo, bool accumulate, const int NC)
{
#pragma GCC unroll 4
    for (int c = 0; c < NC; c++) {
        float *o = out + ldo * (size_t)c;
        if (accumulate) {
            acc[0][c] = _mm512_add_ps(acc[0][c], _mm512_loadu_ps(o));
            acc[1][c] = _mm512_add_ps(acc[1][c], _mm512_loadu_ps(o + 16));
        }
        _mm512_storeu_ps(o, acc[0][c]);
        _mm512_storeu_ps(o + 16, acc[1][c]);
    }
}

/* S8 == false: unsigned quants 0..15 with the -8 through sum32 (q4_0).
 * S8 == true: q8_0, biased by +128 (VNNI) or signed (sign trick). */
HET_INLINE void het_xwide_t(int64_t nb, const uint8_t *xp, const uint8_t *const *a, float *out, size_t ldo,
                            bool accumulate, const int NC, const bool S8, const bool vnni)
{
    const size_t bs = S8 ? HET_Q8R_BS_ABS : HET_Q8R_BS;
    const int off = S8 ? -128 : -8;
    const __m512i ones = _mm512_set1_epi16(1);
    __m512 acc[2][4];
#pragma GCC unroll 4
    for (int c = 0; c < NC; c++) acc[0][c] = acc[1][c] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++, xp += het_xpanel_blk_bytes(16)) {
        __m512i s0[4], s1[4];
#pragma GCC unroll 4
        for (int c = 0; c < NC; c++)
            s0[c] = s1[c] = (S8 && !vnni) ? _mm512_setzero_si512()
                                          : _mm512_set1_epi32(off * HET_MT(a[c], bs, b)->sum32);
#pragma GCC unroll 8
        for (int g = 0; g < 8; g++) {
            const __m512i w0 = _mm512_load_si512((const void *)(xp + 128 * g));
            const __m512i w1 = _mm512_load_si512((const void *)(xp + 128 * g + 64));
#pragma GCC unroll 4
            for (int c = 0; c < NC; c++) {
                const __m512i av = het_bc4(HET_QA(a[c], bs, b) + 4 * g);
                if (S8 && !vnni) {
                    const __m512i ua = het_bc4(HET_UA(a[c], bs, b) + 4 * g);
                    const __mmask64 neg = _mm512_movepi8_mask(av);
                    const __m512i sw0 = _mm512_mask_sub_epi8(w0, neg, _mm512_setzero_si512(), w0);
                    const __m512i sw1 = _mm512_mask_sub_epi8(w1, neg, _mm512_setzero_si512(), w1);
                    s0[c] = _mm512_add_epi32(s0[c], _mm512_madd_epi16(_mm512_maddubs_epi16(ua, sw0), ones));
                    s1[c] = _mm512_add_epi32(s1[c], _mm512_madd_epi16(_mm512_maddubs_epi16(ua, sw1), ones));
                } else {
                    s0[c] = het_dp(s0[c], w0, av, vnni);
                    s1[c] = het_dp(s1[c], w1, av, vnni);
                }
                HET_KEEP(s0[c]);
                HET_KEEP(s1[c]);
            }
        }
        const __m512 d0 = _mm512_load_ps((const void *)(xp + 1024)), d1 = _mm512_load_ps((const void *)(xp + 1088));
#pragma GCC unroll 4
        for (int c = 0; c < NC; c++) {
            const float da = HET_MT(a[c], bs, b)->d;
            acc[0][c] = het_fscale(acc[0][c], s0[c], d0, da);
            acc[1][c] = het_fscale(acc[1][c], s1[c], d1, da);
        }
    }
    het_x_store(acc, out, ldo, accumulate, NC);
}

/* Q4KC wide: sum(q*a) from 0, then d*sc*da*sum + (-dmin*m)*s. */
HET_INLINE void het_xq4k_t(int64_t nb, const uint8_t *xp, const uint8_t *const *a, float *out, size_t ldo,
                           bool accumulate, const int NC, const bool vnni)
{
    const size_t bs = HET_Q8R_BS;
    __m512 acc[2][4];
#pragma GCC unroll 4
    for (int c = 0; c < NC; c++) acc[0][c] = acc[1][c] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++, xp += het_xpanel_kind_blk_bytes(HET_PANEL_Q4KC, 16)) {
        __m512i s0[4], s1[4];
#pragma GCC unroll 4
        for (int c = 0; c < NC; c++) s0[c] = s1[c] = _mm512_setzero_si512();
#pragma GCC unroll 8
        for (int g = 0; g < 8; g++) {
            const __m512i w0 = _mm512_load_si512((const void *)(xp + 128 * g));
            const __m512i w1 = _mm512_load_si512((const void *)(xp + 128 * g + 64));
#pragma GCC unroll 4
            for (int c = 0; c < NC; c++) {
                const __m512i av = het_bc4(HET_QA(a[c], bs, b) + 4 * g);
                s0[c] = het_dp(s0[c], w0, av, vnni);
                s1[c] = het_dp(s1[c], w1, av, vnni);
                HET_KEEP(s0[c]);
                HET_KEEP(s1[c]);
            }
        }
        const __m512 d0 = _mm512_load_ps((const void *)(xp + 1024)), d1 = _mm512_load_ps((const void *)(xp + 1088));
        const __m512 c0 = _mm512_load_ps((const void *)(xp + 1152)), c1 = _mm512_load_ps((const void *)(xp + 1216));
#pragma GCC unroll 4
        for (int c = 0; c < NC; c++) {
            const struct het_q8r_meta *m = HET_MT(a[c], bs, b);
            const __m512 sv = _mm512_set1_ps(m->s);
            acc[0][c] = _mm512_fmadd_ps(c0, sv, het_fscale(acc[0][c], s0[c], d0, m->d));
            acc[1][c] = _mm512_fmadd_ps(c1, sv, het_fscale(acc[1][c], s1[c], d1, m->d));
        }
    }
    het_x_store(acc, out, ldo, accumulate, NC);
}

/* Q6C wide: each half block from -32 * sum16[half], scaled by d*sc_half. */
HET_INLINE void het_xq6_t(int64_t nb, const uint8_t *xp, const uint8_t *const *a, float *out, size_t ldo,
                          bool accumulate, const int NC, const bool vnni)
{
    const size_t bs = HET_Q8R_BS;
    __m512 acc[2][4];
#pragma GCC unroll 4
    for (int c = 0; c < NC; c++) acc[0][c] = acc[1][c] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++, xp += het_xpanel_kind_blk_bytes(HET_PANEL_Q6C, 16)) {
#pragma GCC unroll 2
        for (int half = 0; half < 2; half++) {
            __m512i s0[4], s1[4];
#pragma GCC unroll 4
            for (int c = 0; c < NC; c++) s0[c] = s1[c] = _mm512_set1_epi32(-32 * HET_MT(a[c], bs, b)->sum16[half]);
#pragma GCC unroll 4
            for (int g = 4 * half; g < 4 * half + 4; g++) {
                const __m512i w0 = _mm512_load_si512((const void *)(xp + 128 * g));
                const __m512i w1 = _mm512_load_si512((const void *)(xp + 128 * g + 64));
#pragma GCC unroll 4
                for (int c = 0; c < NC; c++) {
                    const __m512i av = het_bc4(HET_QA(a[c], bs, b) + 4 * g);
                    s0[c] = het_dp(s0[c], w0, av, vnni);
                    s1[c] = het_dp(s1[c], w1, av, vnni);
                    HET_KEEP(s0[c]);
                    HET_KEEP(s1[c]);
                }
            }
            const __m512 d0 = _mm512_load_ps((const void *)(xp + 1024 + 128 * half));
            const __m512 d1 = _mm512_load_ps((const void *)(xp + 1088 + 128 * half));
#pragma GCC unroll 4
            for (int c = 0; c < NC; c++) {
                const float da = HET_MT(a[c], bs, b)->d;
                acc[0][c] = het_fscale(acc[0][c], s0[c], d0, da);
                acc[1][c] = het_fscale(acc[1][c], s1[c], d1, da);
            }
        }
    }
    het_x_store(acc, out, ldo, accumulate, NC);
}

#define HET_WIDE_KQ_ENTRY(name, body)                                                                       \
    void name(int R, int64_t nb, const void *xp, const uint8_t *const *a, int nc, float *out, size_t ldo,   \
              bool accumulate)                                                                              \
    {                                                                                                       \
        (void)R;                                                                                            \
        const bool vnni = __builtin_cpu_supports("avx512vnni");                                            \
        switch (nc) {                                                                                       \
        case 1: vnni ? body(nb, xp, a, out, ldo, accumulate, 1, true)                                       \
                     : body(nb, xp, a, out, ldo, accumulate, 1, false); break;                              \
        case 2: vnni ? body(nb, xp, a, out, ldo, accumulate, 2, true)                                       \
                     : body(nb, xp, a, out, ldo, accumulate, 2, false); break;                              \
        case 3: vnni ? body(nb, xp, a, out, ldo, accumulate, 3, true)                                       \
                     : body(nb, xp, a, out, ldo, accumulate, 3, false); break;                              \
        default: vnni ? body(nb, xp, a, out, ldo, accumulate, 4, true)                                      \
                      : body(nb, xp, a, out, ldo, accumulate, 4, false); break;                             \
        }                                                                                                   \
    }

HET_WIDE_KQ_ENTRY(het_xpanel_q4kc_avx512, het_xq4k_t)
HET_WIDE_KQ_ENTRY(het_xpanel_q6c_avx512, het_xq6_t)

#define HET_WIDE_ENTRY(name, S8)                                                                            \
    void name(int R, int64_t nb, const void *xp, const uint8_t *const *a, int nc, float *out, size_t ldo,   \
              bool accumulate)                                                                              \
    {                                                                                                       \
        (void)R;                                                                                            \
        const bool vnni = __builtin_cpu_supports("avx512vnni");                                            \
        switch (nc) {                                                                                       \
        case 1: vnni ? het_xwide_t(nb, xp, a, out, ldo, accumulate, 1, S8, true)                           \
                     : het_xwide_t(nb, xp, a, out, ldo, accumulate, 1, S8, false); break;                  \
        case 2: vnni ? het_xwide_t(nb, xp, a, out, ldo, accumulate, 2, S8, true)                           \
                     : het_xwide_t(nb, xp, a, out, ldo, accumulate, 2, S8, false); break;                  \
        case 3: vnni ? het_xwide_t(nb, xp, a, out, ldo, accumulate, 3, S8, true)                           \
                     : het_xwide_t(nb, xp, a, out, ldo, accumulate, 3, S8, false); break;                  \
        default: vnni ? het_xwide_t(nb, xp, a, out, ldo, accumulate, 4, S8, true)                          \
                      : het_xwide_t(nb, xp, a, out, ldo, accumulate, 4, S8, false); break;                 \
        }                                                                                                   \
    }

HET_WIDE_ENTRY(het_xpanel_q40_avx512, false)
HET_WIDE_ENTRY(het_xpanel_q80_avx512, true)
