/*
 * panel_compact_avx512.h — entry points of panel_compact_avx512.c (compact,
 * wide and U4N panel kernels, R = 16) for the two AVX-512 kernel tables in
 * matmul_avx512.c: each kernel once without VNNI (suffix _avx512) and once
 * with it (_avx512vnni). Only for files compiled with the AVX-512 flags.
 */
#ifndef HET_CPU_PANEL_COMPACT_AVX512_H
#define HET_CPU_PANEL_COMPACT_AVX512_H

#include <immintrin.h>

#include "devices/cpu/quant_dot.h"

/* Ask for `lines` cache lines `ahead` bytes past p: NTA, into L2 (T1) or
 * into L1 (T0). The expansion of prefill's compact panels (this file's and
 * the AMX level's) asks HET_PF_AHEAD ahead into L1; panel_compact_avx512.c
 * says how the distances were measured. */
#define HET_PF_AHEAD 4096
static inline __attribute__((always_inline)) void het_pf(const uint8_t *p, int lines, size_t ahead, const bool l2,
                                                         const bool nta)
{
    if (nta)
        for (int i = 0; i < lines; i++) _mm_prefetch((const char *)p + ahead + 64 * i, _MM_HINT_NTA);
    else if (l2)
        for (int i = 0; i < lines; i++) _mm_prefetch((const char *)p + ahead + 64 * i, _MM_HINT_T1);
    else
        for (int i = 0; i < lines; i++) _mm_prefetch((const char *)p + ahead + 64 * i, _MM_HINT_T0);
}

/* q6_K's top 2 bits of group g (of 4) from a qh vector: bits 2g..2g+1
 * moved to bits 4..5 (16-bit shifts are safe: only bits 4..5 are kept).
 * The compact q6_K kernels and the AMX level's expansion unpack with it. */
static inline __attribute__((always_inline)) __m512i het_q6_hi(__m512i qh, int g)
{
    const __m512i m30 = _mm512_set1_epi8(0x30);
    switch (g) {
    case 0:  return _mm512_and_si512(_mm512_slli_epi16(qh, 4), m30);
    case 1:  return _mm512_and_si512(_mm512_slli_epi16(qh, 2), m30);
    case 2:  return _mm512_and_si512(qh, m30);
    default: return _mm512_and_si512(_mm512_srli_epi16(qh, 2), m30);
    }
}

/* het_panel_fn, het_panels_fn, het_xexpand_fn and het_xpanel_fn of one
 * compact kind at one level */
#define HET_AVX512_COMPACT_DECLS(name)                                                                           \
    void het_panel_##name(const struct het_panel_layout *l, const void *panel, const uint8_t *const *a, int nc,  \
                          float *out);                                                                          \
    void het_panels_##name(const struct het_panel_layout *l, const void *panel, size_t stride, int64_t np,       \
                           const uint8_t *const *a, int nc, float *out, size_t ldo,                             \
                           enum het_cpu_stream stream);                                                         \
    void het_xexpand_##name(const struct het_panel_layout *l, const void *p0, const void *p1, int64_t b0,        \
                            int64_t b1, void *dst);                                                             \
    void het_xpanel_##name(int R, int64_t nb, const void *xp, const uint8_t *const *a, int nc, float *out,       \
                           size_t ldo, bool accumulate);

void het_panel_u4n_avx512(const struct het_panel_layout *l, const void *panel, const uint8_t *const *a, int nc,
                          float *out);
void het_panel_u4n_avx512vnni(const struct het_panel_layout *l, const void *panel, const uint8_t *const *a, int nc,
                              float *out);
HET_AVX512_COMPACT_DECLS(q40_avx512)
HET_AVX512_COMPACT_DECLS(q80_avx512)
HET_AVX512_COMPACT_DECLS(q6c_avx512)
HET_AVX512_COMPACT_DECLS(q4kc_avx512)
HET_AVX512_COMPACT_DECLS(q40_avx512vnni)
HET_AVX512_COMPACT_DECLS(q80_avx512vnni)
HET_AVX512_COMPACT_DECLS(q6c_avx512vnni)
HET_AVX512_COMPACT_DECLS(q4kc_avx512vnni)
/* Q40's expansion with the quants made signed, q - 8 */
void het_xexpand_q40s_avx512(const struct het_panel_layout *l, const void *p0, const void *p1, int64_t b0, int64_t b1,
                             void *dst);

/* The K-quants' wide blocks come in super-blocks: 8 blocks of 1280 bytes,
 * then the rows' float d[32] (het_xpanel_kind_blk_bytes). Block i of a
 * chunk, and the d of its super-block (the AVX-512 expansion writes them,
 * the AVX-512 wide kernels read them; the AMX level has wide super-blocks of
 * its own, panel_amx.c): */
#define HET_X_KQ_BLK 1280
#define HET_X_KQ_SB  (HET_Q8R_GROUP_K * HET_X_KQ_BLK + 128)
_Static_assert(HET_X_KQ_SB == HET_Q8R_GROUP_K * 81 * 16, "het_xpanel_kind_blk_bytes(Q4KC, 16) is a super-block's share");

static inline bool het_x_kquant(enum het_panel_kind kind) { return kind == HET_PANEL_Q4KC || kind == HET_PANEL_Q6C; }

static inline uint8_t *het_x_sb_d(void *dst, int64_t i)
{
    return (uint8_t *)dst + (size_t)(i / HET_Q8R_GROUP_K) * HET_X_KQ_SB + HET_Q8R_GROUP_K * HET_X_KQ_BLK;
}

static inline uint8_t *het_x_block(void *dst, int64_t i, const enum het_panel_kind kind)
{
    if (het_x_kquant(kind))
        return (uint8_t *)dst + (size_t)(i / HET_Q8R_GROUP_K) * HET_X_KQ_SB + (size_t)(i % HET_Q8R_GROUP_K) * HET_X_KQ_BLK;
    return (uint8_t *)dst + (size_t)i * het_xpanel_kind_blk_bytes(kind, 16);
}

#endif /* HET_CPU_PANEL_COMPACT_AVX512_H */
