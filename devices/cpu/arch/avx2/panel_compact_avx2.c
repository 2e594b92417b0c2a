/*
 * panel_compact_avx2.c — AVX2 kernels over the compact panels (Q40, Q80,
 * Q6C, Q4KC: the file's bytes, rows interleaved 8 at a time, see quant_dot.h),
 * over the wide panels that batch matmuls expand them into, and over q4_1's
 * nibble panels (U4N), which share the compact kinds' nibble loop.
 *
 * Compact kernels serve decode and small batches: one 8-row panel against
 * 1..4 activation rows, reading no more bytes than the GGUF blocks. Their
 * s16 pair sums start from the activation's precomputed offsets (off8 for
 * q4_0's -8, off32 for q6_K's -32, see struct het_q8r_meta), so the offset
 * costs no instruction in the inner loop and each sum ends in range.
 *
 * Wide kernels serve prefill: 16 rows (two panels, quants expanded to
 * bytes) against 1..3 activation rows. A broadcast of 4 activation bytes
 * then feeds two vpmaddubsw, which is what bounds these loops on cores
 * whose broadcasts share the vector ports (Zen 3): about 2.5 vector
 * instructions per vpmaddubsw instead of 3.5 for 8 rows x 4 from nibbles.
 * Each kernel computes exactly the formula of het_panel_gemm_scalar.
 */
#include <immintrin.h>
#include <string.h>

#include "devices/cpu/arch/avx2/panel_compact_avx2.h"

#define HET_INLINE static inline __attribute__((always_inline))
/* Keep v in a register here: stops gcc from re-associating the s16 chains
 * into trees of live products (register spills). */
#define HET_KEEP(v) __asm__("" : "+x"(v))

#define HET_QA(row, bs, b)   ((const int8_t *)((row) + (size_t)(b) * (bs)))
#define HET_UA(row, bs, b)   ((row) + (size_t)(b) * (bs) + 32)
#define HET_MT(row, bs, b)   ((const struct het_q8r_meta *)((row) + (size_t)(b) * (bs) + (bs) - 32))

HET_INLINE __m256i het_bc4(const void *p)
{
    int32_t v;
    memcpy(&v, p, 4);
    return _mm256_set1_epi32(v);
}

/* Compact panels are streamed once per token in decode: the hardware
 * prefetchers alone leave the core waiting on memory between panels, so
 * each block asks for its lines this far ahead (the next panels follow in
 * memory; past the end a prefetch is harmless), after its own loads: on
 * Zen 4 at this level, tokens then took 0.985-0.993x the time (Q4_0),
 * 0.992-0.997x (Q6_K), 0.981-0.992x (Q8_0), 1.000-1.003x (Q4_K_M) of
 * asking before them (see panel_compact_avx512.c). Runs of load-time
 * panels ask with the hint the device's race chose, as at the AVX-512
 * level (cpu_stream.c); NTA against T0 on Zen 5 at this
 * level, token time NTA / T0 hints in one process, medians of 95 pairs of
 * 8-token blocks, Q4_0 0.981-1.002 (six runs, median 0.986), Q4_K_M
 * 0.978-0.983, Q6_K 0.981-0.982, Q8_0 0.972-0.974. */
#define HET_PF_AHEAD 4096

/* Called once the block's loads are written: the compiler may not move
 * them past the barrier. */
HET_INLINE void het_prefetch_ahead(const uint8_t *p, int lines, const enum het_cpu_stream hint)
{
    __asm__ volatile("" ::: "memory");
    if (hint == HET_CPU_STREAM_NTA)
        for (int i = 0; i < lines; i++) _mm_prefetch((const char *)p + HET_PF_AHEAD + 64 * i, _MM_HINT_NTA);
    else if (hint == HET_CPU_STREAM_T1)
        for (int i = 0; i < lines; i++) _mm_prefetch((const char *)p + HET_PF_AHEAD + 64 * i, _MM_HINT_T1);
    else
        for (int i = 0; i < lines; i++) _mm_prefetch((const char *)p + HET_PF_AHEAD + 64 * i, _MM_HINT_T0);
}

/* 8 fp16 scales -> floats */
HET_INLINE __m256 het_ld_h8(const uint8_t *p) { return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p)); }

/* acc + float(isum) * (dw * da) */
HET_INLINE __m256 het_fscale(__m256 acc, __m256i isum, __m256 dw, const float *da)
{
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(dw, _mm256_broadcast_ss(da)), acc);
}

/* q6_K's top 2 bits of group g from a qh vector (defined with Q6C below). */
HET_INLINE __m256i het_q6_hi(__m256i qh, int g);

/* One nibble block of 8 rows (4 vectors; vector g holds groups g and g+4)
 * against NC activation rows at their block b: the low groups (k 0..15)
 * add s16 pair sums into s0[c], the high ones (k 16..31) into s1[c] (the
 * same array when the block has one sum), with q6_K's top bits from qh[0]
 * and qh[1] when qh is given. */
HET_INLINE void het_nib_dot8(const uint8_t *pb, const __m256i *qh, const uint8_t *const *a, size_t bs, int64_t b,
                             __m256i *s0, __m256i *s1, const int NC)
{
    const __m256i m4 = _mm256_set1_epi8(15);
#pragma GCC unroll 4
    for (int g = 0; g < 4; g++) {
        const __m256i v = _mm256_load_si256((const __m256i *)(pb + 32 * g));
        __m256i lo = _mm256_and_si256(v, m4), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
        if (qh) {
            lo = _mm256_or_si256(lo, het_q6_hi(qh[0], g));
            hi = _mm256_or_si256(hi, het_q6_hi(qh[1], g));
        }
#pragma GCC unroll 4
        for (int c = 0; c < NC; c++) {
            const int8_t *qa = HET_QA(a[c], bs, b);
            s0[c] = _mm256_add_epi16(s0[c], _mm256_maddubs_epi16(lo, het_bc4(qa + 4 * g)));
            HET_KEEP(s0[c]);
            s1[c] = _mm256_add_epi16(s1[c], _mm256_maddubs_epi16(hi, het_bc4(qa + 16 + 4 * g)));
            HET_KEEP(s1[c]);
        }
    }
}

/* ---- Q40 and Q80: 8 rows, groups of 4 blocks -------------------------------------- */

/* Q40 block j of a group whose fp16 scales start d_off bytes in, against
 * NC activation rows at their block b: d * (sum(q*a) - 8*sum(a)). */
HET_INLINE void het_q40_blk(const uint8_t *grp, size_t d_off, int64_t j, const uint8_t *const *a, int64_t b,
                            __m256 *acc, const int NC)
{
    const size_t bs = HET_Q8R_BS;
    const __m256i ones = _mm256_set1_epi16(1);
    __m256i s[4];
#pragma GCC unroll 4
    for (int c = 0; c < NC; c++) s[c] = het_bc4(HET_MT(a[c], bs, b)->off8);
    het_nib_dot8(grp + 128 * j, NULL, a, bs, b, s, s, NC);
    const __m256 dv = het_ld_h8(grp + d_off + 16 * j);
#pragma GCC unroll 4
    for (int c = 0; c < NC; c++)
        acc[c] = het_fscale(acc[c], _mm256_madd_epi16(s[c], ones), dv, &HET_MT(a[c], bs, b)->d);
}

/* Q80 block j likewise: |a| x sign(w, a) */
HET_INLINE void het_q80_blk(const uint8_t *grp, size_t d_off, int64_t j, const uint8_t *const *a, int64_t b,
                            __m256 *acc, const int NC)
{
    const size_t bs = HET_Q8R_BS_ABS;
    const __m256i ones = _mm256_set1_epi16(1);
    const uint8_t *pb = grp + 256 * j;
    __m256i is[4];
#pragma GCC unroll 4
    for (int c = 0; c < NC; c++) is[c] = _mm256_setzero_si256();
#pragma GCC unroll 8
    for (int g = 0; g < 8; g++) {
        const __m256i wv = _mm256_load_si256((const __m256i *)(pb + 32 * g));
#pragma GCC unroll 4
        for (int c = 0; c < NC; c++) {
            const __m256i sa = het_bc4(HET_QA(a[c], bs, b) + 4 * g);
            const __m256i ua = het_bc4(HET_UA(a[c], bs, b) + 4 * g);
            is[c] = _mm256_add_epi32(is[c], _mm256_madd_epi16(_mm256_maddubs_epi16(ua, _mm256_sign_epi8(wv, sa)), ones));
            HET_KEEP(is[c]);
        }
    }
    const __m256 dv = het_ld_h8(grp + d_off + 16 * j);
#pragma GCC unroll 4
    for (int c = 0; c < NC; c++) acc[c] = het_fscale(acc[c], is[c], dv, &HET_MT(a[c], bs, b)->d);
}

/* Every block of one Q40 (q80 false) or Q80 panel against NC activation
 * rows, out[c*ldo + r]: group by group, a full group's 4 blocks unrolled,
 * the layout and the row pointers in locals, so that a block's offsets are
 * constants and the barrier after its loads does not make the compiler read
 * them again (as the AVX-512 walker, panel_compact_avx512.c). A block asks
 * for its lines after its loads; a group's last block also for the
 * group's scales (one line). */
HET_INLINE void het_c4_t(const struct het_panel_layout *l, const uint8_t *panel, const uint8_t *const *ap, float *out,
                         size_t ldo, const int NC, const bool q80, const enum het_cpu_stream hint)
{
    const size_t blk = q80 ? 256 : 128, grp_bytes = l->grp_bytes;
    const int pf = q80 ? 4 : 2;
    const int64_t nb = l->nb, full = nb / 4;
    const uint8_t *a[4];
#pragma GCC unroll 4
    for (int c = 0; c < NC; c++) a[c] = ap[c];
    __m256 acc[4];
#pragma GCC unroll 4
    for (int c = 0; c < NC; c++) acc[c] = _mm256_setzero_ps();
    const uint8_t *grp = panel;
    for (int64_t gi = 0; gi < full; gi++, grp += grp_bytes) {
#pragma GCC unroll 4
        for (int64_t j = 0; j < 4; j++) {
            if (q80) het_q80_blk(grp, 4 * blk, j, a, 4 * gi + j, acc, NC);
            else het_q40_blk(grp, 4 * blk, j, a, 4 * gi + j, acc, NC);
            het_prefetch_ahead(grp + blk * (size_t)j, j == 3 ? pf + 1 : pf, hint);
        }
    }
    const int64_t len = nb - 4 * full; /* a last group of fewer blocks */
    for (int64_t j = 0; j < len; j++) {
        if (q80) het_q80_blk(grp, (size_t)len * blk, j, a, 4 * full + j, acc, NC);
        else het_q40_blk(grp, (size_t)len * blk, j, a, 4 * full + j, acc, NC);
        het_prefetch_ahead(grp + blk * (size_t)j, pf, hint);
    }
#pragma GCC unroll 4
    for (int c = 0; c < NC; c++) _mm256_storeu_ps(out + ldo * (size_t)c, acc[c]);
}

HET_INLINE void het_q40_t(const struct het_panel_layout *l, const uint8_t *panel, const uint8_t *const *a,
                          float *out, size_t ldo, const int NC, const enum het_cpu_stream hint)
{
    het_c4_t(l, panel, a, out, ldo, NC, false, hint);
}

HET_INLINE void het_q80_t(const struct het_panel_layout *l, const uint8_t *panel, const uint8_t *const *a,
                          float *out, size_t ldo, const int NC, const enum het_cpu_stream hint)
{
    het_c4_t(l, panel, a, out, ldo, NC, true, hint);
}

/* ---- Q6C: 8 rows of q6_K ---------------------------------------------------------
 * Each nibble vector of groups g / g+4 gets its top 2 bits from qh[0] / qh[1]
 * (bits 2g..2g+1 moved to bits 4..5; 16-bit shifts are safe because only
 * bits 4..5 of each byte are kept). The half blocks sum in s16 from off32
 * (4 * 2 * 63 * 127 plus the offset stays within +-32512), then vpmaddwd
 * applies the rows' int8 half scales. */
HET_INLINE __m256i het_q6_hi(__m256i qh, int g)
{
    const __m256i m30 = _mm256_set1_epi8(0x30);
    switch (g) {
    case 0:  return _mm256_and_si256(_mm256_slli_epi16(qh, 4), m30);
    case 1:  return _mm256_and_si256(_mm256_slli_epi16(qh, 2), m30);
    case 2:  return _mm256_and_si256(qh, m30);
    default: return _mm256_and_si256(_mm256_srli_epi16(qh, 2), m30);
    }
}

HET_INLINE void het_q6c_t(const struct het_panel_layout *l, const uint8_t *panel, const uint8_t *const *a,
                          float *out, size_t ldo, const int NC, const enum het_cpu_stream hint)
{
    const size_t bs = HET_Q8R_BS;
    /* int8 scale pairs (lo, hi) of rows 0..7 -> (lo, lo) and (hi, hi) */
    const __m128i dup_lo = _mm_setr_epi8(0, 0, 2, 2, 4, 4, 6, 6, 8, 8, 10, 10, 12, 12, 14, 14);
    const __m128i dup_hi = _mm_setr_epi8(1, 1, 3, 3, 5, 5, 7, 7, 9, 9, 11, 11, 13, 13, 15, 15);
    __m256 acc[4];
#pragma GCC unroll 4
    for (int c = 0; c < NC; c++) acc[c] = _mm256_setzero_ps();
    for (int64_t b = 0; b < l->nb; b++) {
        const int64_t gi = b / 16, j = b % 16, len = het_cpanel_len(l, gi);
        const uint8_t *grp = het_cpanel_grp(l, panel, gi), *pb = grp + 192 * j;
        const uint8_t *psc = grp + het_cpanel_sc_off(l, len) + 16 * j;
        const uint8_t *pd = grp + het_cpanel_d_off(l, len) + 16 * (j / 8);
        const __m128i sc8 = _mm_loadu_si128((const __m128i *)psc);
        const __m256i scl = _mm256_cvtepi8_epi16(_mm_shuffle_epi8(sc8, dup_lo));
        const __m256i sch = _mm256_cvtepi8_epi16(_mm_shuffle_epi8(sc8, dup_hi));
        const __m256i qh[2] = {_mm256_load_si256((const __m256i *)(pb + 128)),
                               _mm256_load_si256((const __m256i *)(pb + 160))};
        __m256i sl[4], sh[4];
#pragma GCC unroll 4
        for (int c = 0; c < NC; c++) {
            const struct het_q8r_meta *m = HET_MT(a[c], bs, b);
            sl[c] = het_bc4(m->off32[0]);
            sh[c] = het_bc4(m->off32[1]);
        }
        het_nib_dot8(pb, qh, a, bs, b, sl, sh, NC);
        const __m256 dv = het_ld_h8(pd);
#pragma GCC unroll 4
        for (int c = 0; c < NC; c++) {
            const __m256i i = _mm256_add_epi32(_mm256_madd_epi16(sl[c], scl), _mm256_madd_epi16(sh[c], sch));
            acc[c] = het_fscale(acc[c], i, dv, &HET_MT(a[c], bs, b)->d);
        }
        het_prefetch_ahead(pb, j == 15 ? 8 : 3, hint);
    }
#pragma GCC unroll 4
    for (int c = 0; c < NC; c++) _mm256_storeu_ps(out + ldo * (size_t)c, acc[c]);
}

/* ---- U4N (q4_1): nibbles as Q40, per block float d[8] and c[8] ------------------------
 * Each 32-byte load is groups g (low nibbles) and g+4 (high nibbles) of the
 * 8 rows; the low and the high groups sum in two s16 chains, which keeps
 * U4's bound (30480). Value d*q + c: acc + d * da * sum(q*a) + c * s. */
HET_INLINE void het_u4n_t(const struct het_panel_layout *l, const uint8_t *panel, const uint8_t *const *a, float *out,
                          size_t ldo, const int NC, const enum het_cpu_stream hint)
{
    (void)hint; /* this walker asks for nothing ahead */
    const size_t bs = HET_Q8R_BS;
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 acc[4];
#pragma GCC unroll 4
    for (int c = 0; c < NC; c++) acc[c] = _mm256_setzero_ps();
    const uint8_t *pb = panel;
    for (int64_t b = 0; b < l->nb; b++, pb += l->blk_bytes) {
        __m256i p[4], p2[4];
#pragma GCC unroll 4
        for (int c = 0; c < NC; c++) p[c] = p2[c] = _mm256_setzero_si256();
        het_nib_dot8(pb, NULL, a, bs, b, p, p2, NC);
        const __m256 dv = _mm256_load_ps((const float *)(pb + l->off_d));
        const __m256 cv = _mm256_load_ps((const float *)(pb + l->off_c));
#pragma GCC unroll 4
        for (int c = 0; c < NC; c++) {
            const struct het_q8r_meta *m = HET_MT(a[c], bs, b);
            _mm_prefetch((const char *)HET_QA(a[c], bs, b + HET_AVX2_PF_ACT_BLOCKS), _MM_HINT_T0);
            const __m256i i = _mm256_madd_epi16(_mm256_add_epi16(p[c], p2[c]), ones);
            acc[c] = het_fscale(acc[c], i, dv, &m->d);
            acc[c] = _mm256_fmadd_ps(cv, _mm256_set1_ps(m->s), acc[c]);
        }
    }
#pragma GCC unroll 4
    for (int c = 0; c < NC; c++) _mm256_storeu_ps(out + ldo * (size_t)c, acc[c]);
}

/* ---- Q4KC: 8 rows of q4_K: d*sc*da*sum(q*a) - dmin*m*s --------------------------------
 * The nibbles as Q40; the s16 pair sums start from 0 (8 * 2 * 15 * 127
 * fits), the block's sc and m bytes scale the rows' d and dmin. */
HET_INLINE __m256 het_ld_u8x8(const uint8_t *p)
{
    return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)p)));
}

HET_INLINE void het_q4kc_t(const struct het_panel_layout *l, const uint8_t *panel, const uint8_t *const *ap,
                           float *out, size_t ldo, const int NC, const enum het_cpu_stream hint)
{
    /* every group is full (q4_K rows are whole super-blocks of 8 blocks):
     * its offsets are constants, and with the row pointers in locals the
     * barrier after each block's loads makes the compiler reload nothing
     * (as the AVX-512 walker). On Zen 5 at this level (bench_gemv -T q4_K,
     * HET_CPU_ISA=avx2): 48 -> 53-55 GB/s from L2 and L3; decode tokens
     * in-process, new / old, Q4_K_M: 0.992-1.002 (median 0.995) */
    enum { G = 8, BLK = 128, SCM = 16 };
    const size_t bs = HET_Q8R_BS, gb = l->grp_bytes; /* G * (BLK + SCM) + 32 */
    const int64_t ng = l->nb / G;
    const uint8_t *a[4];
#pragma GCC unroll 4
    for (int c = 0; c < NC; c++) a[c] = ap[c];
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 acc[4];
#pragma GCC unroll 4
    for (int c = 0; c < NC; c++) acc[c] = _mm256_setzero_ps();
    const uint8_t *grp = panel;
    for (int64_t gi = 0; gi < ng; gi++, grp += gb) {
        const uint8_t *scm = grp + G * BLK, *pd = scm + G * SCM;
        const __m256 dv = het_ld_h8(pd), mv = het_ld_h8(pd + 16);
        for (int j = 0; j < G; j++) {
            const int64_t b = gi * G + j;
            const uint8_t *pb = grp + BLK * j;
            __m256i s[4];
#pragma GCC unroll 4
            for (int c = 0; c < NC; c++) s[c] = _mm256_setzero_si256();
            het_nib_dot8(pb, NULL, a, bs, b, s, s, NC);
            const __m256 dsc = _mm256_mul_ps(dv, het_ld_u8x8(scm + SCM * j));
            const __m256 dm = _mm256_mul_ps(mv, het_ld_u8x8(scm + SCM * j + 8));
#pragma GCC unroll 4
            for (int c = 0; c < NC; c++) {
                const struct het_q8r_meta *m = HET_MT(a[c], bs, b);
                acc[c] = het_fscale(acc[c], _mm256_madd_epi16(s[c], ones), dsc, &m->d);
                acc[c] = _mm256_fnmadd_ps(dm, _mm256_broadcast_ss(&m->s), acc[c]);
            }
            het_prefetch_ahead(pb, BLK / 64, hint);
        }
        het_prefetch_ahead(grp + G * BLK, 3, hint); /* the group's sc/m, d and dmin lines */
    }
#pragma GCC unroll 4
    for (int c = 0; c < NC; c++) _mm256_storeu_ps(out + ldo * (size_t)c, acc[c]);
}

#define HET_COMPACT_DISPATCH(name, body)                                                             \
    void name(const struct het_panel_layout *l, const void *panel, const uint8_t *const *a, int nc,  \
              float *out)                                                                            \
    {                                                                                                \
        switch (nc) {                                                                                \
        case 1: body(l, panel, a, out, 8, 1, HET_CPU_STREAM_T0); break;                              \
        case 2: body(l, panel, a, out, 8, 2, HET_CPU_STREAM_T0); break;                              \
        case 3: body(l, panel, a, out, 8, 3, HET_CPU_STREAM_T0); break;                              \
        default: body(l, panel, a, out, 8, 4, HET_CPU_STREAM_T0); break;                             \
        }                                                                                            \
    }

/* np consecutive panels in one call (decode: no per-panel call, the
 * results go straight to dst rows), asking ahead with the hint the device
 * chose (NTA, T0 or T1; one instance of the walker each way: the hint is a
 * constant inside it). */
#define HET_COMPACT_RUN_NC(body, hint)                                                               \
    switch (nc) {                                                                                    \
    case 1: for (int64_t i = 0; i < np; i++) body(l, pp + i * stride, a, out + 8 * i, ldo, 1, hint); break; \
    case 2: for (int64_t i = 0; i < np; i++) body(l, pp + i * stride, a, out + 8 * i, ldo, 2, hint); break; \
    case 3: for (int64_t i = 0; i < np; i++) body(l, pp + i * stride, a, out + 8 * i, ldo, 3, hint); break; \
    default: for (int64_t i = 0; i < np; i++) body(l, pp + i * stride, a, out + 8 * i, ldo, 4, hint); break; \
    }
#define HET_COMPACT_RUN(name, body)                                                                  \
    void name(const struct het_panel_layout *l, const void *panel, size_t stride, int64_t np,        \
              const uint8_t *const *a, int nc, float *out, size_t ldo, enum het_cpu_stream stream)   \
    {                                                                                                \
        const uint8_t *pp = panel;                                                                   \
        if (stream == HET_CPU_STREAM_T0) {                                                           \
            HET_COMPACT_RUN_NC(body, HET_CPU_STREAM_T0)                                              \
        } else if (stream == HET_CPU_STREAM_T1) {                                                    \
            HET_COMPACT_RUN_NC(body, HET_CPU_STREAM_T1)                                              \
        } else {                                                                                     \
            HET_COMPACT_RUN_NC(body, HET_CPU_STREAM_NTA)                                             \
        }                                                                                            \
    }

HET_COMPACT_DISPATCH(het_panel_q40_avx2, het_q40_t)
HET_COMPACT_DISPATCH(het_panel_q80_avx2, het_q80_t)
HET_COMPACT_DISPATCH(het_panel_q6c_avx2, het_q6c_t)
HET_COMPACT_DISPATCH(het_panel_q4kc_avx2, het_q4kc_t)
HET_COMPACT_DISPATCH(het_panel_u4n_avx2, het_u4n_t)
HET_COMPACT_RUN(het_panels_q40_avx2, het_q40_t)
HET_COMPACT_RUN(het_panels_q80_avx2, het_q80_t)
HET_COMPACT_RUN(het_panels_q6c_avx2, het_q6c_t)
HET_COMPACT_RUN(het_panels_q4kc_avx2, het_q4kc_t)

/* ---- expansion to wide panels ------------------------------------------------------ */

/* Quants of block b of compact panel p (Q40 / Q80, 8 rows) and its 8 fp16
 * scales. */
HET_INLINE const uint8_t *het_x_block(const struct het_panel_layout *l, const uint8_t *p, int64_t b,
                                      const uint8_t **d)
{
    const int64_t gi = b / 4, j = b % 4;
    const uint8_t *grp = het_cpanel_grp(l, p, gi);
    *d = grp + het_cpanel_d_off(l, het_cpanel_len(l, gi)) + 16 * j;
    return grp + l->blk_bytes * (size_t)j;
}

void het_xexpand_q40_avx2(const struct het_panel_layout *l, const void *p0, const void *p1, int64_t b0, int64_t b1,
                          void *dst)
{
    const __m256i m4 = _mm256_set1_epi8(15);
    uint8_t *x = dst;
    const uint8_t *src[2] = {p0, p1};
    for (int64_t b = b0; b < b1; b++, x += het_xpanel_blk_bytes(8)) {
#pragma GCC unroll 4
        for (int h = 0; h < 2; h++) {
            const uint8_t *pd = NULL, *q = src[h] ? het_x_block(l, src[h], b, &pd) : NULL;
            for (int g = 0; g < 4; g++) {
                __m256i v = _mm256_setzero_si256();
                if (q) v = _mm256_load_si256((const __m256i *)(q + 32 * g));
                _mm256_store_si256((__m256i *)(x + 64 * g + 32 * h), _mm256_and_si256(v, m4));
                _mm256_store_si256((__m256i *)(x + 64 * (g + 4) + 32 * h),
                                   _mm256_and_si256(_mm256_srli_epi16(v, 4), m4));
            }
            _mm256_store_ps((float *)(x + 512) + 8 * h, q ? het_ld_h8(pd) : _mm256_setzero_ps());
        }
    }
}

void het_xexpand_q80_avx2(const struct het_panel_layout *l, const void *p0, const void *p1, int64_t b0, int64_t b1,
                          void *dst)
{
    uint8_t *x = dst;
    const uint8_t *src[2] = {p0, p1};
    for (int64_t b = b0; b < b1; b++, x += het_xpanel_blk_bytes(8)) {
#pragma GCC unroll 4
        for (int h = 0; h < 2; h++) {
            const uint8_t *pd = NULL, *q = src[h] ? het_x_block(l, src[h], b, &pd) : NULL;
            for (int g = 0; g < 8; g++) {
                __m256i v = _mm256_setzero_si256();
                if (q) v = _mm256_load_si256((const __m256i *)(q + 32 * g));
                _mm256_store_si256((__m256i *)(x + 64 * g + 32 * h), v);
            }
            _mm256_store_ps((float *)(x + 512) + 8 * h, q ? het_ld_h8(pd) : _mm256_setzero_ps());
        }
    }
}

/* ---- wide kernels: 16 rows x NC (1..3) ------------------------------------------- */

/* 16 results per activation row to out + c*ldo, added to what is there
 * when accumulate (K chunks after the first) */
HET_INLINE void het_x_store(__m256 acc[2][3], float *out, size_t ldo, bool accumulate, const int NC)
{
#pragma GCC unroll 4
    for (int c = 0; c < NC; c++) {
        float *o = out + ldo * (size_t)c;
        if (accumulate) {
            acc[0][c] = _mm256_add_ps(acc[0][c], _mm256_loadu_ps(o));
            acc[1][c] = _mm256_add_ps(acc[1][c], _mm256_loadu_ps(o + 8));
        }
        _mm256_storeu_ps(o, acc[0][c]);
        _mm256_storeu_ps(o + 8, acc[1][c]);
    }
}

/* unsigned byte quants, -8 from off8 (q4_0) */
HET_INLINE void het_xu4_t(int64_t nb, const uint8_t *xp, const uint8_t *const *a, float *out, size_t ldo,
                          bool accumulate, const int NC)
{
    const size_t bs = HET_Q8R_BS;
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 acc[2][3];
#pragma GCC unroll 4
    for (int c = 0; c < NC; c++) acc[0][c] = acc[1][c] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++, xp += het_xpanel_blk_bytes(8)) {
        __m256i s0[3], s1[3];
#pragma GCC unroll 4
        for (int c = 0; c < NC; c++) s0[c] = s1[c] = het_bc4(HET_MT(a[c], bs, b)->off8);
#pragma GCC unroll 8
        for (int g = 0; g < 8; g++) {
            const __m256i w0 = _mm256_load_si256((const __m256i *)(xp + 64 * g));
            const __m256i w1 = _mm256_load_si256((const __m256i *)(xp + 64 * g + 32));
#pragma GCC unroll 3
            for (int c = 0; c < NC; c++) {
                const __m256i av = het_bc4(HET_QA(a[c], bs, b) + 4 * g);
                s0[c] = _mm256_add_epi16(s0[c], _mm256_maddubs_epi16(w0, av));
                HET_KEEP(s0[c]);
                s1[c] = _mm256_add_epi16(s1[c], _mm256_maddubs_epi16(w1, av));
                HET_KEEP(s1[c]);
            }
        }
        const __m256 d0 = _mm256_load_ps((const float *)(xp + 512)), d1 = _mm256_load_ps((const float *)(xp + 544));
#pragma GCC unroll 3
        for (int c = 0; c < NC; c++) {
            const float *da = &HET_MT(a[c], bs, b)->d;
            acc[0][c] = het_fscale(acc[0][c], _mm256_madd_epi16(s0[c], ones), d0, da);
            acc[1][c] = het_fscale(acc[1][c], _mm256_madd_epi16(s1[c], ones), d1, da);
        }
    }
    het_x_store(acc, out, ldo, accumulate, NC);
}

/* signed byte quants (q8_0): |a| x sign(w, a) */
HET_INLINE void het_xs8_t(int64_t nb, const uint8_t *xp, const uint8_t *const *a, float *out, size_t ldo,
                          bool accumulate, const int NC)
{
    const size_t bs = HET_Q8R_BS_ABS;
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 acc[2][3];
#pragma GCC unroll 4
    for (int c = 0; c < NC; c++) acc[0][c] = acc[1][c] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++, xp += het_xpanel_blk_bytes(8)) {
        __m256i s0[3], s1[3];
#pragma GCC unroll 4
        for (int c = 0; c < NC; c++) s0[c] = s1[c] = _mm256_setzero_si256();
#pragma GCC unroll 8
        for (int g = 0; g < 8; g++) {
            const __m256i w0 = _mm256_load_si256((const __m256i *)(xp + 64 * g));
            const __m256i w1 = _mm256_load_si256((const __m256i *)(xp + 64 * g + 32));
#pragma GCC unroll 3
            for (int c = 0; c < NC; c++) {
                const __m256i sa = het_bc4(HET_QA(a[c], bs, b) + 4 * g);
                const __m256i ua = het_bc4(HET_UA(a[c], bs, b) + 4 * g);
                s0[c] = _mm256_add_epi32(s0[c], _mm256_madd_epi16(_mm256_maddubs_epi16(ua, _mm256_sign_epi8(w0, sa)), ones));
                HET_KEEP(s0[c]);
                s1[c] = _mm256_add_epi32(s1[c], _mm256_madd_epi16(_mm256_maddubs_epi16(ua, _mm256_sign_epi8(w1, sa)), ones));
                HET_KEEP(s1[c]);
            }
        }
        const __m256 d0 = _mm256_load_ps((const float *)(xp + 512)), d1 = _mm256_load_ps((const float *)(xp + 544));
#pragma GCC unroll 3
        for (int c = 0; c < NC; c++) {
            const float *da = &HET_MT(a[c], bs, b)->d;
            acc[0][c] = het_fscale(acc[0][c], s0[c], d0, da);
            acc[1][c] = het_fscale(acc[1][c], s1[c], d1, da);
        }
    }
    het_x_store(acc, out, ldo, accumulate, NC);
}

#define HET_WIDE_DISPATCH(name, body)                                                                \
    void name(int R, int64_t nb, const void *xp, const uint8_t *const *a, int nc, float *out, size_t ldo, \
              bool accumulate)                                                                       \
    {                                                                                                \
        (void)R;                                                                                     \
        switch (nc) {                                                                                \
        case 1: body(nb, xp, a, out, ldo, accumulate, 1); break;                                     \
        case 2: body(nb, xp, a, out, ldo, accumulate, 2); break;                                     \
        default: body(nb, xp, a, out, ldo, accumulate, 3); break;                                    \
        }                                                                                            \
    }

HET_WIDE_DISPATCH(het_xpanel_q40_avx2, het_xu4_t)
HET_WIDE_DISPATCH(het_xpanel_q80_avx2, het_xs8_t)
