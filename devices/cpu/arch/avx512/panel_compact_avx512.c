/*
 * panel_compact_avx512.c — AVX-512 kernels over the compact panels (Q40,
 * Q80, Q6C, Q4KC at R = 16: the file's bytes, one zmm holds 4 consecutive k
 * of 16 rows, see quant_dot.h), over the wide panels (32 rows of byte
 * quants) that batch matmuls expand pairs of them into, and over q4_1's
 * nibble panels (U4N). The AVX-512 levels take every other kind from the
 * levels below (matmul.c resolves a NULL entry that way).
 *
 * Compact kernels serve decode: every weight byte is read once per token in
 * one forward stream, so each block asks for its lines some KB
 * ahead and the arithmetic stays well under the memory time. One entry
 * (het_compact_t) goes over the blocks of a panel for every kind: Q40 and
 * Q80 group by group with a block's dequantise-and-dot per kind
 * (het_*_blk), Q6C block by block (het_q6c_t), Q4KC group by group
 * with the group's scales read once (het_q4kc_t).
 * Wide kernels serve prefill the same way: one walker for Q40 and Q80
 * (het_wide_t) and one for the K-quants (het_wide_kq_t), with the kind's
 * offsets and scales, and one expansion walker (het_xexpand_t).
 *
 * Every walker takes `vnni` as a constant: the AVX-512 kernel table
 * (matmul_avx512.c) holds one instance of each without VNNI (level
 * avx512) and one with it (level avx512vnni); the device picks the level
 * once, at init. With VNNI the integer sums use vpdpbusd (u8 weights x s8
 * activations -> i32); without it vpmaddubsw + vpmaddwd give the same i32
 * sums (every u8 operand here is at most 63, so no s16 pair saturates),
 * except for q8_0, whose signed weights take |a| x sign(w, a). With VNNI,
 * q8_0 is made unsigned by xor 0x80 (+128) and 128 * sum(a) taken back off.
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
 * leave the core waiting between panels, so each block asks this far ahead
 * (Zen 4, two threads, measured in one process with the variants
 * interleaved): Q6C 8 KB (its panels from memory ran 1.09-1.23x faster
 * with 12 KB than with 4 KB; once blocks asked after their loads, 8 KB
 * took 0.964-0.997x the token time of 12 KB (Q6_K file), 10 KB the same
 * as either, and 6 KB 1.24x: do not go below 8), the other kinds 6 KB
 * (decode tokens took 0.93-1.03x the time of 4 KB's, median 0.96, over 10
 * runs of Q4_0, Q4_K_M and Q8_0 files; 8 KB and more lost when memory was
 * slow). The expansion of prefill keeps
 * 4 KB (HET_PF_AHEAD, in the header). Q40, Q80 and Q4KC ask for the lines into L2, Q6C (and the
 * expansion) into L1: against a read by the same threads (bench_stream,
 * layer-sized matmuls, 3 runs) q4_0 ran at 0.83-0.91 of the read with L2
 * hints and 0.81-0.89 with L1 ones, q8_0 0.89-0.92 and 0.80-0.88, q4_K
 * 0.90-0.97 and 0.77-0.88, q6_K 0.85-0.86 and 0.84-0.85. Decode tokens,
 * the hints alternating per token in one process, each way round once:
 * L2 hints for every kind took 0.97x the time for Q8_0, 0.98x for Q4_0,
 * 1.00x for Q4_K_M and 1.02x for Q6_K (geometric means of four runs); these
 * hints against L1 ones everywhere 0.968-0.969x (Q8_0), 0.958-0.969x
 * (Q4_0), 0.969-0.987x (Q4_K_M), and the Q6_K file, the same code both
 * ways, 0.999-1.004x. A block asks for its lines after its own loads are
 * issued, not before: tokens took 0.968-0.980x the time (Q6_K), 0.979-
 * 0.985x (Q4_0), 0.996-0.998x (Q4_K_M), 0.995-0.999x (Q8_0), each way
 * round. Prefetches spread among the loads did worse than either (1.06-
 * 1.22x), and so did the same ones unrolled ahead of the block, where the
 * compiler mixes them into the loads (1.01-1.07x): a prefetch that waits
 * for a miss buffer holds up the demand loads behind it.
 * Runs of load-time panels (het_panels_*: decode, every weight byte read
 * once a token) ask with the hint the device's race chose (cpu_stream.c):
 * on the Zen 5 VM with NTA, on the Xeon VM with T1 (NTA there streamed at
 * half T1's rate). Lines asked for with NTA
 * do not stay in L2 and L3 on their way out: a 12 MB buffer read again
 * after a 192 MB stream was still in L3 when the stream asked with NTA (71
 * against 45 GB/s), not with T0 hints. The stream then leaves the KV
 * cache, the activations and the small nodes' vectors where they were.
 * Zen 5, two threads, the hints switched every 8 tokens in one process (the
 * first 2 of each 8 not counted), token time NTA / L2 hints, medians of
 * 95 pairs of 8-token blocks: Q4_0 0.971 on one CCD, 0.975-0.996 on two
 * (five runs); Q4_K_M 0.972 and 0.986; Q6_K 0.976 and 0.984; Q8_0
 * 0.968-0.980 (eight runs, both placements). A first build that read the
 * hint from a thread-local flag at every block had Q4_0 at 0.967-0.981
 * (0.967-0.971 after 1024 tokens of context, 0.966-0.991 beside two busy
 * loops) but Q8_0 at 1.014-1.062 on one CCD. A panel packed into scratch
 * (het_panel_*) keeps the L2 hints: it is read again for every chunk of M. */
#define HET_PF_AHEAD_DECODE 6144
#define HET_PF_AHEAD_Q6C 8192

/* What a walker is walking, for the hints it asks ahead with: one panel
 * packed into scratch (L2 hints), or a run of load-time panels in decode
 * (NTA, T0 or T1, as the device's measures choose: het_cpu_stream). */
enum het_ask { HET_ASK_PANEL, HET_ASK_RUN_NTA, HET_ASK_RUN_T0, HET_ASK_RUN_T1 };
#define HET_ASK_L2(ask)  ((ask) == HET_ASK_PANEL || (ask) == HET_ASK_RUN_T1)
#define HET_ASK_NTA(ask) ((ask) == HET_ASK_RUN_NTA)

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

/* acc + sum of w[j] * a[j] for signed bytes w (q8_0); w biased by +128
 * (wu = w ^ 0x80) with VNNI, where the caller takes 128 * sum(a) off. */
HET_INLINE __m512i het_dp_s8(__m512i acc, __m512i w, __m512i wu, const int8_t *qa, const uint8_t *ua,
                             const bool vnni)
{
    const __m512i sa = het_bc4(qa);
    if (vnni) return _mm512_dpbusd_epi32(acc, wu, sa);
    /* |a| x (w with the sign of a): no vpsignb on zmm */
    const __m512i sw = _mm512_mask_sub_epi8(w, _mm512_movepi8_mask(sa), _mm512_setzero_si512(), w);
    return _mm512_add_epi32(acc, _mm512_madd_epi16(_mm512_maddubs_epi16(het_bc4(ua), sw), _mm512_set1_epi16(1)));
}

/* acc + float(isum) * (dw * da) */
HET_INLINE __m512 het_fscale(__m512 acc, __m512i isum, __m512 dw, float da)
{
    return _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(dw, _mm512_set1_ps(da)), acc);
}

/* Group g's quants of a nibble block (U4N layout: vector g holds groups g
 * and g+4): *lo = group g, *hi = group g + 4, with q6_K's top bits when
 * qh (two vectors) is given. */
HET_INLINE void het_nib_groups(const uint8_t *pb, const __m512i *qh, int g, __m512i *lo, __m512i *hi)
{
    const __m512i m4 = _mm512_set1_epi8(15);
    const __m512i v = _mm512_load_si512((const void *)(pb + 64 * g));
    *lo = _mm512_and_si512(v, m4);
    *hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
    if (qh) {
        *lo = _mm512_or_si512(*lo, het_q6_hi(qh[0], g));
        *hi = _mm512_or_si512(*hi, het_q6_hi(qh[1], g));
    }
}

/* One nibble block against NC activation rows: the low groups (k 0..15)
 * add into s0[c], the high ones (k 16..31) into s1[c] (the same array when
 * the block has one sum). */
HET_INLINE void het_nib_dot(const uint8_t *pb, const __m512i *qh, const uint8_t *const *a, int64_t b, __m512i *s0,
                            __m512i *s1, const int NC, const bool vnni)
{
#pragma GCC unroll 4
    for (int g = 0; g < 4; g++) {
        __m512i lo, hi;
        het_nib_groups(pb, qh, g, &lo, &hi);
#pragma GCC unroll 4
        for (int c = 0; c < NC; c++) {
            const int8_t *qa = HET_QA(a[c], HET_Q8R_BS, b);
            s0[c] = het_dp(s0[c], lo, het_bc4(qa + 4 * g), vnni);
            HET_KEEP(s0[c]);
            s1[c] = het_dp(s1[c], hi, het_bc4(qa + 16 + 4 * g), vnni);
            HET_KEEP(s1[c]);
        }
    }
}

/* ---- compact blocks: block j of group grp (len blocks), activation block b ---------- */

/* Q40: d * (sum(q*a) - 8*sum(a)) */
HET_INLINE void het_q40_blk(const struct het_panel_layout *l, const uint8_t *grp, int64_t j, int64_t len,
                            const uint8_t *const *a, int64_t b, __m512 *acc, const int NC, const bool vnni)
{
    __m512i s[4];
#pragma GCC unroll 4
    for (int c = 0; c < NC; c++) s[c] = _mm512_set1_epi32(-8 * HET_MT(a[c], HET_Q8R_BS, b)->sum32);
    het_nib_dot(grp + 256 * j, NULL, a, b, s, s, NC, vnni);
    const __m512 dv = het_ld_h16(grp + het_cpanel_d_off(l, len) + 32 * j);
#pragma GCC unroll 4
    for (int c = 0; c < NC; c++) acc[c] = het_fscale(acc[c], s[c], dv, HET_MT(a[c], HET_Q8R_BS, b)->d);
}

/* Q80: d * sum(w*a), w signed */
HET_INLINE void het_q80_blk(const struct het_panel_layout *l, const uint8_t *grp, int64_t j, int64_t len,
                            const uint8_t *const *a, int64_t b, __m512 *acc, const int NC, const bool vnni)
{
    const size_t bs = HET_Q8R_BS_ABS;
    const uint8_t *pb = grp + 512 * j;
    __m512i s[4];
#pragma GCC unroll 4
    for (int c = 0; c < NC; c++)
        s[c] = vnni ? _mm512_set1_epi32(-128 * HET_MT(a[c], bs, b)->sum32) : _mm512_setzero_si512();
#pragma GCC unroll 8
    for (int g = 0; g < 8; g++) {
        const __m512i w = _mm512_load_si512((const void *)(pb + 64 * g));
        const __m512i wu = _mm512_xor_si512(w, _mm512_set1_epi8((char)0x80));
#pragma GCC unroll 4
        for (int c = 0; c < NC; c++) {
            s[c] = het_dp_s8(s[c], w, wu, HET_QA(a[c], bs, b) + 4 * g, HET_UA(a[c], bs, b) + 4 * g, vnni);
            HET_KEEP(s[c]);
        }
    }
    const __m512 dv = het_ld_h16(grp + het_cpanel_d_off(l, len) + 32 * j);
#pragma GCC unroll 4
    for (int c = 0; c < NC; c++) acc[c] = het_fscale(acc[c], s[c], dv, HET_MT(a[c], bs, b)->d);
}

/* Q6C: d * (sc_lo * (sum_lo(q*a) + x32[0]) + sc_hi * (...[1])), the
 * rows' int8 half scales applied to the i32 half sums. */
HET_INLINE void het_q6c_blk(const struct het_panel_layout *l, const uint8_t *grp, int64_t j, int64_t len,
                            const uint8_t *const *a, int64_t b, __m512 *acc, const int NC, const bool vnni)
{
    const uint8_t *pb = grp + 384 * j;
    /* int8 (lo, hi) scale pairs of 16 rows -> i32 lo and hi */
    const __m512i sc16 = _mm512_cvtepi8_epi16(_mm256_loadu_si256((const __m256i *)(grp + het_cpanel_sc_off(l, len) + 32 * j)));
    const __m512i scl = _mm512_srai_epi32(_mm512_slli_epi32(sc16, 16), 16);
    const __m512i sch = _mm512_srai_epi32(sc16, 16);
    const __m512i qh[2] = {_mm512_load_si512((const void *)(pb + 256)), _mm512_load_si512((const void *)(pb + 320))};
    __m512i sl[4], sh[4];
#pragma GCC unroll 4
    for (int c = 0; c < NC; c++) {
        const struct het_q8r_meta *m = HET_MT(a[c], HET_Q8R_BS, b);
        sl[c] = _mm512_set1_epi32(m->x32[0]);
        sh[c] = _mm512_set1_epi32(m->x32[1]);
    }
    het_nib_dot(pb, qh, a, b, sl, sh, NC, vnni);
    const __m512 dv = het_ld_h16(grp + het_cpanel_d_off(l, len) + 32 * (j / 8));
#pragma GCC unroll 4
    for (int c = 0; c < NC; c++) {
        const __m512i i = _mm512_add_epi32(_mm512_mullo_epi32(sl[c], scl), _mm512_mullo_epi32(sh[c], sch));
        acc[c] = het_fscale(acc[c], i, dv, HET_MT(a[c], HET_Q8R_BS, b)->d);
    }
}

/* Quant bytes of one block of 16 rows, per compact kind. */
HET_INLINE size_t het_cblk_bytes(enum het_panel_kind kind)
{
    return kind == HET_PANEL_Q80 ? 512 : kind == HET_PANEL_Q6C ? 384 : 256;
}

/* One Q40 or Q80 block (het_*_blk) of kind. */
HET_INLINE void het_cblk(const struct het_panel_layout *l, const uint8_t *grp, int64_t j, int64_t len,
                         const uint8_t *const *a, int64_t b, __m512 *acc, const int NC, const enum het_panel_kind kind,
                         const bool vnni)
{
    switch (kind) {
    case HET_PANEL_Q40: het_q40_blk(l, grp, j, len, a, b, acc, NC, vnni); break;
    default:            het_q80_blk(l, grp, j, len, a, b, acc, NC, vnni); break;
    }
}

/* Q6C's walker (the kind's groups are 16 blocks): every block of one panel
 * against NC activation rows, out[c*ldo + r], block by block. Grouped as
 * het_q4kc_t is (d once a super-block, the offsets constants) its blocks
 * ran 83 -> 106-110 GB/s from L2 and L3 (bench_gemv, Zen 5), but decode
 * tokens took 1.010-1.037x the time (Q6_K file, in-process A/B, one CCD;
 * 1.026-1.057x asking 12-16 KB ahead, two CCDs) and 1.23-1.25x with the
 * group's loop not unrolled. Unrolled as het_compact_t unrolls Q40's and
 * Q80's: a Q4_K_M file's Q6_K output matrix 2774 instead of 2413 us a
 * token, one CCD. Kept as it is. */
HET_INLINE void het_q6c_t(const struct het_panel_layout *l, const uint8_t *panel, const uint8_t *const *a, float *out,
                          size_t ldo, const int NC, const bool vnni, const enum het_ask ask)
{
    enum { G = 16, BLK = 384 }; /* == l->grp, het_cblk_bytes(HET_PANEL_Q6C) */
    /* lines of a block's quants; the last block also asks for the group's scales */
    const int pf = BLK / 64, pf_last = (int)((l->grp_bytes - (size_t)G * BLK) / 64) + pf;
    __m512 acc[4];
#pragma GCC unroll 4
    for (int c = 0; c < NC; c++) acc[c] = _mm512_setzero_ps();
    for (int64_t b = 0; b < l->nb; b++) {
        const int64_t gi = b / G, j = b % G, len = het_cpanel_len(l, gi);
        const uint8_t *grp = het_cpanel_grp(l, panel, gi);
        het_q6c_blk(l, grp, j, len, a, b, acc, NC, vnni);
        /* the block's own loads first: the compiler may not move them past this */
        __asm__ volatile("" ::: "memory");
        het_pf(grp + BLK * (size_t)j, j == G - 1 ? pf_last : pf, HET_PF_AHEAD_Q6C, ask == HET_ASK_RUN_T1,
               HET_ASK_NTA(ask));
    }
#pragma GCC unroll 4
    for (int c = 0; c < NC; c++) _mm512_storeu_ps(out + ldo * (size_t)c, acc[c]);
}

/* Q4KC's walker, group by group: a group is 8 blocks of 256 quant bytes,
 * their sc/m bytes (32 a block) and the rows' fp16 d and dmin (64), so d
 * and dmin are read once a group instead of once a block, and the group's
 * offsets are constants with the layout in locals (the compiler barrier
 * after each block's loads then makes it reload nothing). A block adds
 * d*sc*da*sum(q*a) - dmin*m*s, in the order the block-by-block walker
 * did (the same floats). Every group is full: q4_K rows are whole
 * super-blocks of 256. Zen 5, one thread (bench_gemv): from L2 70 ->
 * 98-105 GB/s, from L3 70 -> 106-109; from memory (bench_stream -t 1)
 * 0.93-0.95 -> 0.95-0.96 of a read of the same bytes. Decode tokens,
 * in-process A/B (Q4_K_M file, new / old): two CCDs 0.976-1.004 (median
 * 0.99), one CCD 0.995-1.016 (median 1.00): a thread that streams its own
 * link's ~42 GB/s needs the faster blocks, one that shares a link does not. */
HET_INLINE void het_q4kc_t(const struct het_panel_layout *lp, const uint8_t *panel, const uint8_t *const *ap,
                           float *out, size_t ldo, const int NC, const bool vnni, const enum het_ask ask)
{
    enum { G = 8, BLK = 256, SCM = 32 };
    const int64_t full = lp->nb / G;
    const size_t gb = lp->grp_bytes; /* G * (BLK + SCM) + 64 */
    const uint8_t *a[4];
#pragma GCC unroll 4
    for (int c = 0; c < NC; c++) a[c] = ap[c];
    const bool l2 = HET_ASK_L2(ask), nta = HET_ASK_NTA(ask);
    const int pf_sc = (int)((gb - (size_t)G * BLK) / 64); /* the group's sc/m, d and dmin lines */
    __m512 acc[4];
#pragma GCC unroll 4
    for (int c = 0; c < NC; c++) acc[c] = _mm512_setzero_ps();
    const uint8_t *grp = panel;
    for (int64_t gi = 0; gi < full; gi++, grp += gb) {
        const uint8_t *scm = grp + G * BLK, *pd = scm + G * SCM;
        const __m512 d = het_ld_h16(pd), dmin = het_ld_h16(pd + 32);
        for (int j = 0; j < G; j++) {
            const int64_t b = gi * G + j;
            __m512i s[4];
#pragma GCC unroll 4
            for (int c = 0; c < NC; c++) s[c] = _mm512_setzero_si512();
            het_nib_dot(grp + BLK * j, NULL, a, b, s, s, NC, vnni);
            const __m512 dsc = _mm512_mul_ps(d, het_ld_u8f(scm + SCM * j));
            const __m512 dm = _mm512_mul_ps(dmin, het_ld_u8f(scm + SCM * j + 16));
#pragma GCC unroll 4
            for (int c = 0; c < NC; c++) {
                const struct het_q8r_meta *m = HET_MT(a[c], HET_Q8R_BS, b);
                acc[c] = het_fscale(acc[c], s[c], dsc, m->d);
                acc[c] = _mm512_fnmadd_ps(dm, _mm512_set1_ps(m->s), acc[c]);
            }
            /* the block's own loads first: the compiler may not move them past this */
            __asm__ volatile("" ::: "memory");
            het_pf(grp + BLK * j, BLK / 64, HET_PF_AHEAD_DECODE, l2, nta);
        }
        het_pf(grp + G * BLK, pf_sc, HET_PF_AHEAD_DECODE, l2, nta);
    }
#pragma GCC unroll 4
    for (int c = 0; c < NC; c++) _mm512_storeu_ps(out + ldo * (size_t)c, acc[c]);
}

/* The compact walker: every block of one panel against NC activation rows,
 * out[c*ldo + r]. Q40 and Q80 go group by group, a full group's 4 blocks
 * unrolled, the layout and the row pointers in locals: a block's offsets
 * are then constants, and the compiler barrier after its loads does not
 * make it read the layout again. That halved the instructions of a block
 * (~75 -> ~37 for Q40 against one row). bench_gemv, one thread, Zen 5:
 * q4_0 from L2 75 -> 108 GB/s, from L3 66 -> 81, from memory 0.87-0.90 ->
 * 0.92-0.94 of a read of the same bytes; q8_0 112 -> 119, 82 -> 89,
 * 0.93-0.95 -> 0.94. */
HET_INLINE void het_compact_t(const struct het_panel_layout *lp, const uint8_t *panel, const uint8_t *const *ap,
                              float *out, size_t ldo, const int NC, const enum het_panel_kind kind, const bool vnni,
                              const enum het_ask ask)
{
    if (kind == HET_PANEL_Q4KC) {
        het_q4kc_t(lp, panel, ap, out, ldo, NC, vnni, ask);
        return;
    }
    if (kind == HET_PANEL_Q6C) {
        het_q6c_t(lp, panel, ap, out, ldo, NC, vnni, ask);
        return;
    }
    const int64_t G = 4; /* == l->grp */
    const size_t blk = het_cblk_bytes(kind);
    const struct het_panel_layout l = { .kind = kind, .R = 16, .nb = lp->nb, .blk_bytes = blk, .grp = G,
                                        .grp_bytes = lp->grp_bytes };
    const uint8_t *a[4];
#pragma GCC unroll 4
    for (int c = 0; c < NC; c++) a[c] = ap[c];
    /* lines of a block's quants; after a group's last block also its scales */
    const int pf = (int)(blk / 64), pf_sc = (int)((l.grp_bytes - (size_t)G * blk) / 64);
    __m512 acc[4];
#pragma GCC unroll 4
    for (int c = 0; c < NC; c++) acc[c] = _mm512_setzero_ps();
    const int64_t full = l.nb / G;
    const uint8_t *grp = panel;
    for (int64_t gi = 0; gi < full; gi++, grp += l.grp_bytes) {
#pragma GCC unroll 4
        for (int64_t j = 0; j < G; j++) {
            het_cblk(&l, grp, j, G, a, gi * G + j, acc, NC, kind, vnni);
            /* the block's own loads first: the compiler may not move them past this */
            __asm__ volatile("" ::: "memory");
            het_pf(grp + blk * (size_t)j, pf, HET_PF_AHEAD_DECODE, HET_ASK_L2(ask), HET_ASK_NTA(ask));
        }
        het_pf(grp + blk * (size_t)G, pf_sc, HET_PF_AHEAD_DECODE, HET_ASK_L2(ask), HET_ASK_NTA(ask));
    }
    const int64_t len = l.nb - full * G; /* a last group of fewer blocks */
    for (int64_t j = 0; j < len; j++) {
        het_cblk(&l, grp, j, len, a, full * G + j, acc, NC, kind, vnni);
        __asm__ volatile("" ::: "memory");
        het_pf(grp + blk * (size_t)j, pf, HET_PF_AHEAD_DECODE, HET_ASK_L2(ask), HET_ASK_NTA(ask));
    }
#pragma GCC unroll 4
    for (int c = 0; c < NC; c++) _mm512_storeu_ps(out + ldo * (size_t)c, acc[c]);
}

/* ---- U4N (q4_1): nibbles as Q40, per block float d[16] and c[16] -------------------- */

/* value d*q + c: acc + d * da * sum(q*a) + c * s */
HET_INLINE void het_u4n_t(const struct het_panel_layout *l, const uint8_t *panel, const uint8_t *const *a,
                          float *out, const int NC, const bool vnni)
{
    __m512 acc[4];
#pragma GCC unroll 4
    for (int c = 0; c < NC; c++) acc[c] = _mm512_setzero_ps();
    const uint8_t *pb = panel;
    for (int64_t b = 0; b < l->nb; b++, pb += l->blk_bytes) {
        __m512i s[4];
#pragma GCC unroll 4
        for (int c = 0; c < NC; c++) s[c] = _mm512_setzero_si512();
        het_nib_dot(pb, NULL, a, b, s, s, NC, vnni);
        const __m512 dv = _mm512_load_ps((const void *)(pb + l->off_d));
        const __m512 cv = _mm512_load_ps((const void *)(pb + l->off_c));
#pragma GCC unroll 4
        for (int c = 0; c < NC; c++) {
            const struct het_q8r_meta *m = HET_MT(a[c], HET_Q8R_BS, b);
            acc[c] = het_fscale(acc[c], s[c], dv, m->d);
            acc[c] = _mm512_fmadd_ps(cv, _mm512_set1_ps(m->s), acc[c]);
        }
    }
#pragma GCC unroll 4
    for (int c = 0; c < NC; c++) _mm512_storeu_ps(out + 16 * c, acc[c]);
}

/* ---- expansion to wide panels (32 rows) ---------------------------------------------
 * Wide block: q[8][32][4] (group g: rows 0..15 from p0, then 16..31 from
 * p1), then scales per row: float d[32] (Q40, Q80), int32 sc[32] and float
 * -(dmin*m)[32] (Q4KC), int32 sc_half[2][32] (Q6C); the K-quants'
 * super-blocks of 8 blocks end with the rows' float d[32]. Nibble quants
 * become bytes
 * (0..15, Q6C 0..63; offsets go through the activation sums in the
 * kernel); Q80 quants stay signed, or become w + 128 (xor 0x80) with VNNI.
 * The compact panels are read here once per matmul, straight from memory
 * (a prefill's weights do not stay in cache), so each block asks
 * HET_PF_AHEAD bytes ahead, as the decode walker asks ahead. */

HET_INLINE void het_xexpand_t(const struct het_panel_layout *l, const void *p0, const void *p1, int64_t b0,
                              int64_t b1, void *dst, const enum het_panel_kind kind, const bool vnni,
                              const bool q40_signed)
{
    const size_t blk = het_cblk_bytes(kind);
    const uint8_t *src[2] = {p0, p1};
    for (int64_t b = b0; b < b1; b++) {
        uint8_t *x = het_x_block(dst, b - b0, kind);
        const int64_t gi = b / l->grp, j = b % l->grp, len = het_cpanel_len(l, gi);
        for (int h = 0; h < 2; h++) {
            const uint8_t *grp = src[h] ? het_cpanel_grp(l, src[h], gi) : NULL;
            const uint8_t *pb = grp ? grp + blk * (size_t)j : NULL;
            /* the compact panels come from memory once per matmul, and
             * nothing else runs meanwhile: ask ahead, as decode does */
            if (pb) het_pf(pb, (int)(blk / 64), HET_PF_AHEAD, false, false);
            float *f = (float *)(void *)(x + 1024) + 16 * h; /* scale vector i at f + 32 * i */
            if (kind == HET_PANEL_Q80) {
                const __m512i bias = _mm512_set1_epi8(vnni ? (char)0x80 : 0);
                for (int g = 0; g < 8; g++) {
                    const __m512i v = pb ? _mm512_load_si512((const void *)(pb + 64 * g)) : _mm512_setzero_si512();
                    _mm512_store_si512((void *)(x + 128 * g + 64 * h), _mm512_xor_si512(v, bias));
                }
            } else {
                __m512i qh[2] = {_mm512_setzero_si512(), _mm512_setzero_si512()};
                if (pb && kind == HET_PANEL_Q6C) {
                    qh[0] = _mm512_load_si512((const void *)(pb + 256));
                    qh[1] = _mm512_load_si512((const void *)(pb + 320));
                }
                static const uint8_t zero[256] __attribute__((aligned(64)));
                for (int g = 0; g < 4; g++) {
                    __m512i lo, hi;
                    het_nib_groups(pb ? pb : zero, kind == HET_PANEL_Q6C ? qh : NULL, g, &lo, &hi);
                    if (q40_signed) {
                        lo = _mm512_sub_epi8(lo, _mm512_set1_epi8(8));
                        hi = _mm512_sub_epi8(hi, _mm512_set1_epi8(8));
                    }
                    _mm512_store_si512((void *)(x + 128 * g + 64 * h), lo);
                    _mm512_store_si512((void *)(x + 128 * (g + 4) + 64 * h), hi);
                }
            }
            __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
            if (kind == HET_PANEL_Q4KC) {
                /* int32 sc, float -dmin*m; the super-block's d after its 8th block */
                __m512i sc = _mm512_setzero_si512();
                const uint8_t *pd = grp ? grp + het_cpanel_d_off(l, len) : NULL;
                if (grp) {
                    const uint8_t *scm = grp + het_cpanel_sc_off(l, len) + 32 * j;
                    sc = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)scm));
                    s1 = _mm512_sub_ps(_mm512_setzero_ps(), _mm512_mul_ps(het_ld_h16(pd + 32), het_ld_u8f(scm + 16)));
                }
                s0 = _mm512_castsi512_ps(sc);
                if (j == 0)
                    _mm512_store_ps((float *)(void *)het_x_sb_d(dst, b - b0) + 16 * h,
                                    pd ? het_ld_h16(pd) : _mm512_setzero_ps());
            } else if (kind == HET_PANEL_Q6C) {
                /* int32 half scales; the super-block's d after its 8th block */
                __m512i sc16 = _mm512_setzero_si512();
                if (grp)
                    sc16 = _mm512_cvtepi8_epi16(_mm256_loadu_si256((const __m256i *)(grp + het_cpanel_sc_off(l, len) + 32 * j)));
                s0 = _mm512_castsi512_ps(_mm512_srai_epi32(_mm512_slli_epi32(sc16, 16), 16));
                s1 = _mm512_castsi512_ps(_mm512_srai_epi32(sc16, 16));
                if (j % 8 == 0)
                    _mm512_store_ps((float *)(void *)het_x_sb_d(dst, b - b0) + 16 * h,
                                    grp ? het_ld_h16(grp + het_cpanel_d_off(l, len) + 32 * (j / 8))
                                        : _mm512_setzero_ps());
            } else if (grp) {
                s0 = het_ld_h16(grp + het_cpanel_d_off(l, len) + 32 * j);
            }
            _mm512_store_ps(f, s0);
            if (kind == HET_PANEL_Q4KC || kind == HET_PANEL_Q6C) _mm512_store_ps(f + 32, s1);
        }
    }
}

/* ---- wide kernels: 32 rows x NC (1..4) ----------------------------------------------- */

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

/* The i32 sum a wide block's pass over activation row a starts from: the
 * kind's offset times the activation sum it applies to (Q6C: per half). */
HET_INLINE __m512i het_x_start(const struct het_q8r_meta *m, int half, const enum het_panel_kind kind, const bool vnni)
{
    switch (kind) {
    case HET_PANEL_Q40: return _mm512_set1_epi32(-8 * m->sum32);
    case HET_PANEL_Q80: return vnni ? _mm512_set1_epi32(-128 * m->sum32) : _mm512_setzero_si512();
    case HET_PANEL_Q6C: return _mm512_set1_epi32(m->x32[half]);
    default:            return _mm512_setzero_si512();
    }
}

/* Groups [g0, g1) of wide block x (activation block b) into the i32 sums
 * s0 (rows 0..15) and s1 (rows 16..31) of NC activation rows. */
HET_INLINE void het_x_groups(const uint8_t *x, int g0, int g1, const uint8_t *const *a, size_t bs, int64_t b,
                             __m512i *s0, __m512i *s1, const int NC, const enum het_panel_kind kind, const bool vnni)
{
#pragma GCC unroll 8
    for (int g = g0; g < g1; g++) {
        const __m512i w0 = _mm512_load_si512((const void *)(x + 128 * g));
        const __m512i w1 = _mm512_load_si512((const void *)(x + 128 * g + 64));
#pragma GCC unroll 4
        for (int c = 0; c < NC; c++) {
            const int8_t *qa = HET_QA(a[c], bs, b) + 4 * g;
            if (kind == HET_PANEL_Q80) {
                /* expanded already biased with VNNI: w0, w1 serve as both forms */
                s0[c] = het_dp_s8(s0[c], w0, w0, qa, HET_UA(a[c], bs, b) + 4 * g, vnni);
                s1[c] = het_dp_s8(s1[c], w1, w1, qa, HET_UA(a[c], bs, b) + 4 * g, vnni);
            } else {
                const __m512i av = het_bc4(qa);
                s0[c] = het_dp(s0[c], w0, av, vnni);
                s1[c] = het_dp(s1[c], w1, av, vnni);
            }
            HET_KEEP(s0[c]);
            HET_KEEP(s1[c]);
        }
    }
}

/* The wide walker of Q40 and Q80: nb expanded blocks of 32 rows against NC
 * activation rows, all 8 groups of a block in one pass. */
HET_INLINE void het_wide_t(int64_t nb, const uint8_t *xp, const uint8_t *const *a, float *out, size_t ldo,
                           bool accumulate, const int NC, const enum het_panel_kind kind, const bool vnni)
{
    const size_t bs = het_q8r_bs_for(kind == HET_PANEL_Q80 ? HET_TYPE_Q8_0 : HET_TYPE_Q4_0);
    __m512 acc[2][4];
#pragma GCC unroll 4
    for (int c = 0; c < NC; c++) acc[0][c] = acc[1][c] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++, xp += het_xpanel_kind_blk_bytes(kind, 16)) {
        __m512i s0[4], s1[4];
#pragma GCC unroll 4
        for (int c = 0; c < NC; c++) s0[c] = s1[c] = het_x_start(HET_MT(a[c], bs, b), 0, kind, vnni);
        het_x_groups(xp, 0, 8, a, bs, b, s0, s1, NC, kind, vnni);
        const __m512 d0 = _mm512_load_ps((const void *)(xp + 1024)), d1 = _mm512_load_ps((const void *)(xp + 1088));
#pragma GCC unroll 4
        for (int c = 0; c < NC; c++) {
            const struct het_q8r_meta *m = HET_MT(a[c], bs, b);
            acc[0][c] = het_fscale(acc[0][c], s0[c], d0, m->d);
            acc[1][c] = het_fscale(acc[1][c], s1[c], d1, m->d);
        }
    }
    het_x_store(acc, out, ldo, accumulate, NC);
}

/* The K-quants' wide walker (Q4KC, Q6C). Their activation rows share d
 * across each group of HET_Q8R_GROUP_K blocks (a super-block, quant_dot.h),
 * so a super-block's sums stay integers: each block's i32 sums (Q6C: each
 * half block's, two passes) are scaled by the rows' small integer scales
 * (vpmulld) and added up, and the rows' d and the activation's d are
 * applied once per super-block. Q4KC's min term (-dmin*m) * s, whose s
 * carries d already, goes straight into acc. Per row vector, activation row
 * and block that is a vpmulld and a vpaddd (Q6C: two of each; Q4KC: and
 * the min's multiply-add), where float scales per block took a conversion
 * and three float operations (Q6C: two and three): vpdpbusd shares its
 * pipes with float work, which is what kept these loops furthest from the
 * int8 peak. bench_matmul -M 512 -p 1, the Qwen3-0.6B layer shapes, three
 * interleaved runs against float scales per block: q4_K 1.05-1.11x as fast
 * on one thread, 1.07-1.17x on two; q6_K 1.02-1.08x and 1.02-1.04x. */
HET_INLINE void het_wide_kq_t(int64_t nb, const uint8_t *xp, const uint8_t *const *a, float *out, size_t ldo,
                              bool accumulate, const int NC, const enum het_panel_kind kind, const bool vnni)
{
    const size_t bs = HET_Q8R_BS;
    const int passes = kind == HET_PANEL_Q6C ? 2 : 1, gpp = 8 / passes;
    __m512 acc[2][4];
#pragma GCC unroll 4
    for (int c = 0; c < NC; c++) acc[0][c] = acc[1][c] = _mm512_setzero_ps();
    for (int64_t b0 = 0; b0 < nb; b0 += HET_Q8R_GROUP_K, xp += HET_X_KQ_SB) {
        const int64_t n = nb - b0 < HET_Q8R_GROUP_K ? nb - b0 : HET_Q8R_GROUP_K;
        __m512i t[2][4];
#pragma GCC unroll 4
        for (int c = 0; c < NC; c++) t[0][c] = t[1][c] = _mm512_setzero_si512();
        for (int64_t i = 0; i < n; i++) {
            const uint8_t *x = xp + (size_t)i * HET_X_KQ_BLK;
            const int64_t b = b0 + i;
#pragma GCC unroll 2
            for (int half = 0; half < passes; half++) {
                __m512i s0[4], s1[4];
#pragma GCC unroll 4
                for (int c = 0; c < NC; c++) s0[c] = s1[c] = het_x_start(HET_MT(a[c], bs, b), half, kind, vnni);
                het_x_groups(x, gpp * half, gpp * (half + 1), a, bs, b, s0, s1, NC, kind, vnni);
                const __m512i sc0 = _mm512_load_si512((const void *)(x + 1024 + 128 * half));
                const __m512i sc1 = _mm512_load_si512((const void *)(x + 1088 + 128 * half));
#pragma GCC unroll 4
                for (int c = 0; c < NC; c++) {
                    t[0][c] = _mm512_add_epi32(t[0][c], _mm512_mullo_epi32(s0[c], sc0));
                    t[1][c] = _mm512_add_epi32(t[1][c], _mm512_mullo_epi32(s1[c], sc1));
                }
            }
            if (kind == HET_PANEL_Q4KC) {
                const __m512 m0 = _mm512_load_ps((const void *)(x + 1152)), m1 = _mm512_load_ps((const void *)(x + 1216));
#pragma GCC unroll 4
                for (int c = 0; c < NC; c++) {
                    const __m512 sv = _mm512_set1_ps(HET_MT(a[c], bs, b)->s);
                    acc[0][c] = _mm512_fmadd_ps(m0, sv, acc[0][c]);
                    acc[1][c] = _mm512_fmadd_ps(m1, sv, acc[1][c]);
                }
            }
        }
        const __m512 d0 = _mm512_load_ps((const void *)(xp + HET_Q8R_GROUP_K * HET_X_KQ_BLK));
        const __m512 d1 = _mm512_load_ps((const void *)(xp + HET_Q8R_GROUP_K * HET_X_KQ_BLK + 64));
#pragma GCC unroll 4
        for (int c = 0; c < NC; c++) {
            const float da = HET_MT(a[c], bs, b0)->d;
            acc[0][c] = het_fscale(acc[0][c], t[0][c], d0, da);
            acc[1][c] = het_fscale(acc[1][c], t[1][c], d1, da);
        }
    }
    het_x_store(acc, out, ldo, accumulate, NC);
}

/* ---- entry points: one instance per (kind, VNNI), NC constant per call ----------------- */

#define HET_NC_CALL(call, kind, vnni)        \
    switch (nc) {                            \
    case 1: call(1, kind, vnni); break;      \
    case 2: call(2, kind, vnni); break;      \
    case 3: call(3, kind, vnni); break;      \
    default: call(4, kind, vnni); break;     \
    }

#define HET_AVX512_COMPACT_DEFS(name, kind, vnni)                                                             \
    void het_panel_##name(const struct het_panel_layout *l, const void *panel, const uint8_t *const *a, int nc, \
                          float *out)                                                                         \
    {                                                                                                         \
        HET_NC_CALL(HET_COMPACT_ONE, kind, vnni)                                                                          \
    }                                                                                                         \
    void het_panels_##name(const struct het_panel_layout *l, const void *panel, size_t stride, int64_t np,     \
                           const uint8_t *const *a, int nc, float *out, size_t ldo, enum het_cpu_stream stream) \
    {                                                                                                         \
        if (stream == HET_CPU_STREAM_T0) {                                                                    \
            HET_NC_CALL(HET_COMPACT_RUN_T0, kind, vnni)                                                       \
        } else if (stream == HET_CPU_STREAM_T1) {                                                             \
            HET_NC_CALL(HET_COMPACT_RUN_T1, kind, vnni)                                                       \
        } else {                                                                                              \
            HET_NC_CALL(HET_COMPACT_RUN_NTA, kind, vnni)                                                      \
        }                                                                                                     \
    }                                                                                                         \
    void het_xexpand_##name(const struct het_panel_layout *l, const void *p0, const void *p1, int64_t b0,      \
                            int64_t b1, void *dst)                                                            \
    {                                                                                                         \
        het_xexpand_t(l, p0, p1, b0, b1, dst, kind, vnni, false);                                             \
    }                                                                                                         \
    void het_xpanel_##name(int R, int64_t nb, const void *xp, const uint8_t *const *a, int nc, float *out,     \
                           size_t ldo, bool accumulate)                                                       \
    {                                                                                                         \
        (void)R;                                                                                              \
        HET_NC_CALL(HET_WIDE_ONE, kind, vnni)                                                                             \
    }

/* the calls HET_NC_CALL makes, with kind and vnni of the instance */
#define HET_COMPACT_ONE(N, kind, vnni) het_compact_t(l, panel, a, out, 16, N, kind, vnni, HET_ASK_PANEL)
#define HET_COMPACT_RUN(N, kind, vnni, ask) \
    for (int64_t i = 0; i < np; i++) het_compact_t(l, (const uint8_t *)panel + (size_t)i * stride, a, out + 16 * i, ldo, N, kind, vnni, ask)
#define HET_COMPACT_RUN_NTA(N, kind, vnni) HET_COMPACT_RUN(N, kind, vnni, HET_ASK_RUN_NTA)
#define HET_COMPACT_RUN_T0(N, kind, vnni)  HET_COMPACT_RUN(N, kind, vnni, HET_ASK_RUN_T0)
#define HET_COMPACT_RUN_T1(N, kind, vnni)  HET_COMPACT_RUN(N, kind, vnni, HET_ASK_RUN_T1)
#define HET_WIDE_ONE(N, kind, vnni)                                                 \
    do {                                                                            \
        if (het_x_kquant(kind)) het_wide_kq_t(nb, xp, a, out, ldo, accumulate, N, kind, vnni); \
        else het_wide_t(nb, xp, a, out, ldo, accumulate, N, kind, vnni);            \
    } while (0)

#define HET_U4N_ONE(N, kind, vnni) het_u4n_t(l, panel, a, out, N, vnni)
#define HET_AVX512_U4N_DEF(name, vnni)                                                                        \
    void het_panel_##name(const struct het_panel_layout *l, const void *panel, const uint8_t *const *a, int nc, \
                          float *out)                                                                         \
    {                                                                                                         \
        HET_NC_CALL(HET_U4N_ONE, HET_PANEL_U4N, vnni)                                                         \
    }

HET_AVX512_U4N_DEF(u4n_avx512, false)
HET_AVX512_U4N_DEF(u4n_avx512vnni, true)
HET_AVX512_COMPACT_DEFS(q40_avx512, HET_PANEL_Q40, false)
HET_AVX512_COMPACT_DEFS(q80_avx512, HET_PANEL_Q80, false)
HET_AVX512_COMPACT_DEFS(q6c_avx512, HET_PANEL_Q6C, false)
HET_AVX512_COMPACT_DEFS(q4kc_avx512, HET_PANEL_Q4KC, false)
HET_AVX512_COMPACT_DEFS(q40_avx512vnni, HET_PANEL_Q40, true)
HET_AVX512_COMPACT_DEFS(q80_avx512vnni, HET_PANEL_Q80, true)
HET_AVX512_COMPACT_DEFS(q6c_avx512vnni, HET_PANEL_Q6C, true)
HET_AVX512_COMPACT_DEFS(q4kc_avx512vnni, HET_PANEL_Q4KC, true)

/* Q40 expanded signed, as q - 8 (-8..7) in the same pass: for kernels whose
 * products take signed weights (the AMX level's tdpbssd, panel_amx.c). A
 * second pass over the expanded bytes had taken 6% of the samples of a
 * 32-column call (perf, bench_matmul -t 1 -T q4_0 -p 1 -S 2048,768 -M 32
 * -w 512 -i amx); in one pass such a call took 239-270 us against 279-282
 * (Xeon VM, three rounds in turn). */
void het_xexpand_q40s_avx512(const struct het_panel_layout *l, const void *p0, const void *p1, int64_t b0, int64_t b1,
                             void *dst)
{
    het_xexpand_t(l, p0, p1, b0, b1, dst, HET_PANEL_Q40, false, true);
}
