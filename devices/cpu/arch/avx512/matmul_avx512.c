/*
 * matmul_avx512.c — the kernel tables of the two AVX-512 levels of the CPU
 * matrix multiplication: avx512 (F/BW/VL/DQ, integer sums by vpmaddubsw +
 * vpmaddwd) and avx512vnni (the same kernels with vpdpbusd). The kernels
 * are in panel_compact_avx512.c, each instantiated once per level; the
 * device picks the level once, from cpuid, and HET_CPU_ISA=avx512 selects
 * the first on a VNNI machine, so both run in the tests there.
 *
 * Panels of 16 rows (one zmm holds k = 4g..4g+3 of 16 rows): compact ones
 * for q4_0, q8_0, q6_K and q4_K (decode, and expanded to wide ones for
 * prefill), nibble panels for q4_1. A NULL entry is taken from the level
 * below (matmul.c): GEMV, float weights and q5 come from AVX2. The
 * activation quantiser is here: prefill quantises every row of b once per
 * matmul, which took about a tenth of the wide kernels' time with AVX2's.
 */
#include <immintrin.h>
#include <stddef.h>
#include <string.h>

#include "devices/cpu/arch/avx512/panel_compact_avx512.h"
#include "devices/cpu/quant_dot.h"

/* het_q8r_quantize_scalar's bytes, 32 floats (two zmm) per block: the same
 * float operations (amax, d = amax/127, x * (1/d) rounded to nearest even by
 * the default MXCSR mode); the i32 -> i8 narrowing saturates, and the one
 * value that can leave [-127, 127] (-128) is clamped as in the reference.
 * One block's work is a long chain (a horizontal max, two divides, the
 * sums), which kept a block-at-a-time loop at about 30 cycles per block: so
 * the blocks' maxima come first, then d and 1/d for 16 blocks per vector
 * divide, then the quants. The integer metadata is one 128-bit vector
 * ([P00 P01 P10 P11], the pair-slot sums of the two halves, from one
 * reduction of both halves together), written with plain stores. */
_Static_assert(offsetof(struct het_q8r_meta, sum32) == 8 && offsetof(struct het_q8r_meta, x32) == 12 &&
                   offsetof(struct het_q8r_meta, off8) == 20 && offsetof(struct het_q8r_meta, off32) == 24 &&
                   sizeof(struct het_q8r_meta) == 32,
               "het_q8r_quantize_avx512 writes the metadata by these offsets");

#define HET_QZ_CHUNK 64 /* blocks whose scales are found at once */

static void het_q8r_quantize_avx512(const float *x, const struct het_q8r_layout *l, void *dst)
{
    uint8_t *row = dst;
    const __m512 absmask = _mm512_castsi512_ps(_mm512_set1_epi32(0x7fffffff));
    const __m512i lo127 = _mm512_set1_epi32(-127), hi127 = _mm512_set1_epi32(127);
    const __m512i pick = _mm512_setr_epi32(0, 2, 8, 10, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
    float dv[HET_QZ_CHUNK] __attribute__((aligned(64))), iv[HET_QZ_CHUNK] __attribute__((aligned(64)));
    for (int64_t b0 = 0; b0 < l->nb; b0 += HET_QZ_CHUNK) {
        const int nc = l->nb - b0 < HET_QZ_CHUNK ? (int)(l->nb - b0) : HET_QZ_CHUNK;
        for (int j = 0; j < nc; j++) {
            const float *xb = x + (b0 + j) * 32;
            const __m512 a = _mm512_max_ps(_mm512_and_ps(_mm512_loadu_ps(xb), absmask),
                                           _mm512_and_ps(_mm512_loadu_ps(xb + 16), absmask));
            dv[j] = _mm512_reduce_max_ps(a);
        }
        for (int j = 0; j < nc; j += l->group) /* blocks sharing d: their amax (chunks hold whole groups) */
            for (int i = 1; i < l->group; i++) dv[j] = dv[j] > dv[j + i] ? dv[j] : dv[j + i];
        for (int j = 0; j < nc; j++) dv[j] = dv[j - j % l->group];
        for (int j = 0; j < nc; j += 16) { /* d = amax / 127, 1/d (0 where d == 0, as d != 0.0f) */
            const __mmask16 k = (__mmask16)(nc - j < 16 ? (1u << (nc - j)) - 1u : 0xffffu);
            const __m512 d = _mm512_div_ps(_mm512_maskz_load_ps(k, dv + j), _mm512_set1_ps(127.0f));
            const __mmask16 nz = _mm512_cmp_ps_mask(d, _mm512_setzero_ps(), _CMP_NEQ_UQ);
            _mm512_mask_store_ps(dv + j, k, d);
            _mm512_mask_store_ps(iv + j, k, _mm512_maskz_div_ps(nz, _mm512_set1_ps(1.0f), d));
        }
        for (int j = 0; j < nc; j++) {
            const float *xb = x + (b0 + j) * 32;
            uint8_t *blk = row + (size_t)(b0 + j) * l->bs;
            const float d = dv[j];
            const __m512 idv = _mm512_set1_ps(iv[j]);
            const __m512i c0 = _mm512_min_epi32(_mm512_max_epi32(_mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(xb), idv)), lo127), hi127);
            const __m512i c1 = _mm512_min_epi32(_mm512_max_epi32(_mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(xb + 16), idv)), lo127), hi127);
            const __m256i q = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm512_cvtepi32_epi8(c0)), _mm512_cvtepi32_epi8(c1), 1);
            _mm256_storeu_si256((__m256i *)(void *)blk, q);
            if (l->with_abs) _mm256_storeu_si256((__m256i *)(void *)(blk + 32), _mm256_abs_epi8(q));
            /* 128-bit lanes [c0 L0+L2, c0 L1+L3, c1 L0+L2, c1 L1+L3], then each
             * half's total in lanes 0 and 2, where dword i sums the elements
             * with index % 4 == i; adjacent dwords summed give a pair slot */
            __m512i t = _mm512_add_epi32(_mm512_shuffle_i32x4(c0, c1, 0x44), _mm512_shuffle_i32x4(c0, c1, 0xee));
            t = _mm512_add_epi32(t, _mm512_shuffle_i32x4(t, t, 0xb1));
            t = _mm512_add_epi32(t, _mm512_shuffle_epi32(t, _MM_PERM_CDAB));
            const __m128i P = _mm512_castsi512_si128(_mm512_permutexvar_epi32(pick, t)); /* P00 P01 P10 P11 */
            const __m128i halves = _mm_hadd_epi32(P, P);                                 /* lo hi lo hi     */
            const __m128i slots = _mm_add_epi32(P, _mm_shuffle_epi32(P, _MM_SHUFFLE(1, 0, 3, 2)));
            const __m128i o8 = _mm_sub_epi32(_mm_setzero_si128(), _mm_slli_epi32(slots, 3));
            const __m128i o32 = _mm_sub_epi32(_mm_setzero_si128(), _mm_slli_epi32(P, 5));
            /* int16 off8[2], off32[2][2] (then two zero words, not stored) */
            const __m128i w = _mm_packs_epi32(_mm_unpacklo_epi64(o8, o32), _mm_unpackhi_epi64(o32, _mm_setzero_si128()));
            const int32_t sum32 = _mm_cvtsi128_si32(halves) + _mm_extract_epi32(halves, 1);
            /* d, s, sum32, int32 x32[2] = -32 * each half's sum, then the int16 offsets */
            uint8_t *mt = blk + l->bs - 32;
            const float s = d * (float)sum32;
            const int32_t w8 = _mm_extract_epi32(w, 2);
            memcpy(mt, &d, 4);
            memcpy(mt + 4, &s, 4);
            memcpy(mt + 8, &sum32, 4);
            _mm_storel_epi64((__m128i *)(void *)(mt + 12), _mm_sub_epi32(_mm_setzero_si128(), _mm_slli_epi32(halves, 5)));
            _mm_storel_epi64((__m128i *)(void *)(mt + 20), w);
            memcpy(mt + 28, &w8, 4);
        }
    }
}

/* lv: avx512 or avx512vnni */
#define HET_AVX512_TABLE(lv)                                                                                  \
    {                                                                                                         \
        .quantize = het_q8r_quantize_avx512,                                                                  \
        .panel = {                                                                                            \
            [HET_PANEL_U4N] = het_panel_u4n_##lv,                                                             \
            [HET_PANEL_Q40] = het_panel_q40_##lv, [HET_PANEL_Q80] = het_panel_q80_##lv,                       \
            [HET_PANEL_Q6C] = het_panel_q6c_##lv, [HET_PANEL_Q4KC] = het_panel_q4kc_##lv,                     \
        },                                                                                                    \
        .panels = {                                                                                           \
            [HET_PANEL_Q40] = het_panels_q40_##lv, [HET_PANEL_Q80] = het_panels_q80_##lv,                     \
            [HET_PANEL_Q6C] = het_panels_q6c_##lv, [HET_PANEL_Q4KC] = het_panels_q4kc_##lv,                   \
        },                                                                                                    \
        .panel_rows = 16,                                                                                     \
        .xexpand = {                                                                                          \
            [HET_PANEL_Q40] = het_xexpand_q40_##lv, [HET_PANEL_Q80] = het_xexpand_q80_##lv,                   \
            [HET_PANEL_Q6C] = het_xexpand_q6c_##lv, [HET_PANEL_Q4KC] = het_xexpand_q4kc_##lv,                 \
        },                                                                                                    \
        .xpanel = {                                                                                           \
            [HET_PANEL_Q40] = het_xpanel_q40_##lv, [HET_PANEL_Q80] = het_xpanel_q80_##lv,                     \
            [HET_PANEL_Q6C] = het_xpanel_q6c_##lv, [HET_PANEL_Q4KC] = het_xpanel_q4kc_##lv,                   \
        },                                                                                                    \
        .xcols = 4,                                                                                           \
    }

const struct het_mm_kernels het_mm_kernels_avx512 = HET_AVX512_TABLE(avx512);
const struct het_mm_kernels het_mm_kernels_avx512vnni = HET_AVX512_TABLE(avx512vnni);
