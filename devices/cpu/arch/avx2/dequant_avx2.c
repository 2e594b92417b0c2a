/*
 * dequant_avx2.c — AVX2 dequantisation of weight rows to F32, for matmuls
 * that keep their activations in F32 (het_cpu_device_set_f32_activations).
 * That path dequantises one weight row into L1 scratch and runs the F32 dot
 * product on it, so the dequantisation runs once per weight per token and
 * sets the pace; the scalar het_dequantize_row ran at ~1 ns per weight.
 *
 * Each function computes exactly the operations of the reference in
 * model/quant*.c, in the same order and without fused multiply-adds, so the
 * values are bit-identical to het_dequantize_row's.
 */
#include <immintrin.h>

#include "devices/cpu/arch/avx2/dequant_avx2.h"
#include "model/quant_impl.h"

/* 16 signed bytes times scale d, as floats at y[0..16) */
static inline void store16(__m128i q, __m256 d, float *y)
{
    _mm256_storeu_ps(y, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)), d));
    _mm256_storeu_ps(y + 8, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(q, 8))), d));
}

void het_dequant_q4_0_avx2(const void *src, float *y, int64_t n)
{
    const het_block_q4_0 *x = src;
    const __m128i m4 = _mm_set1_epi8(0x0F), eight = _mm_set1_epi8(8);
    for (int64_t i = 0; i < n / HET_QK4_0; i++, y += HET_QK4_0) {
        const __m256 d = _mm256_set1_ps(het_fp16_to_fp32(x[i].d));
        const __m128i q = _mm_loadu_si128((const __m128i *)x[i].qs);
        store16(_mm_sub_epi8(_mm_and_si128(q, m4), eight), d, y);
        store16(_mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(q, 4), m4), eight), d, y + 16);
    }
}

void het_dequant_q8_0_avx2(const void *src, float *y, int64_t n)
{
    const het_block_q8_0 *x = src;
    for (int64_t i = 0; i < n / HET_QK8_0; i++, y += HET_QK8_0) {
        const __m256 d = _mm256_set1_ps(het_fp16_to_fp32(x[i].d));
        store16(_mm_loadu_si128((const __m128i *)x[i].qs), d, y);
        store16(_mm_loadu_si128((const __m128i *)(x[i].qs + 16)), d, y + 16);
    }
}

/* 16 unsigned 4-bit codes q: dl * q - ml (no FMA: the reference rounds twice) */
static inline void store16_affine(__m128i q, __m256 dl, __m256 ml, float *y)
{
    const __m256 a = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(q));
    const __m256 b = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(q, 8)));
    _mm256_storeu_ps(y, _mm256_sub_ps(_mm256_mul_ps(dl, a), ml));
    _mm256_storeu_ps(y + 8, _mm256_sub_ps(_mm256_mul_ps(dl, b), ml));
}

void het_dequant_q4_k_avx2(const void *src, float *y, int64_t n)
{
    const het_block_q4_k *x = src;
    const __m128i m4 = _mm_set1_epi8(0x0F);
    for (int64_t i = 0; i < n / HET_QK_K; i++) {
        const float d = het_fp16_to_fp32(x[i].d), dmin = het_fp16_to_fp32(x[i].dmin);
        for (int p = 0; p < 4; p++, y += 64) {
            uint8_t sc0, m0, sc1, m1;
            het_q4k_scale_min(2 * p, x[i].scales, &sc0, &m0);
            het_q4k_scale_min(2 * p + 1, x[i].scales, &sc1, &m1);
            const __m256 dl0 = _mm256_set1_ps(d * sc0), ml0 = _mm256_set1_ps(dmin * m0);
            const __m256 dl1 = _mm256_set1_ps(d * sc1), ml1 = _mm256_set1_ps(dmin * m1);
            for (int h = 0; h < 2; h++) {
                const __m128i q = _mm_loadu_si128((const __m128i *)(x[i].qs + 32 * p + 16 * h));
                store16_affine(_mm_and_si128(q, m4), dl0, ml0, y + 16 * h);
                store16_affine(_mm_and_si128(_mm_srli_epi16(q, 4), m4), dl1, ml1, y + 32 + 16 * h);
            }
        }
    }
}

/* 16 signed codes q times (d * sc): the reference's d * sc[g] * q */
static inline void store16_scaled(__m128i q, float d, int sc, float *y)
{
    store16(q, _mm256_set1_ps(d * (float)sc), y);
}

void het_dequant_q6_k_avx2(const void *src, float *y, int64_t n)
{
    const het_block_q6_k *x = src;
    const __m128i m4 = _mm_set1_epi8(0x0F), m3 = _mm_set1_epi8(3), k32 = _mm_set1_epi8(32);
    for (int64_t i = 0; i < n / HET_QK_K; i++) {
        const float d = het_fp16_to_fp32(x[i].d);
        for (int h = 0; h < 2; h++, y += 128) {
            const uint8_t *ql = x[i].ql + 64 * h, *qh = x[i].qh + 32 * h;
            const int8_t *sc = x[i].scales + 8 * h;
            for (int g = 0; g < 2; g++) { /* l in [16g, 16g + 16) */
                const __m128i a = _mm_loadu_si128((const __m128i *)(ql + 16 * g));
                const __m128i b = _mm_loadu_si128((const __m128i *)(ql + 32 + 16 * g));
                const __m128i hi = _mm_loadu_si128((const __m128i *)(qh + 16 * g));
                const __m128i h0 = _mm_slli_epi16(_mm_and_si128(hi, m3), 4);
                const __m128i h1 = _mm_slli_epi16(_mm_and_si128(_mm_srli_epi16(hi, 2), m3), 4);
                const __m128i h2 = _mm_slli_epi16(_mm_and_si128(_mm_srli_epi16(hi, 4), m3), 4);
                const __m128i h3 = _mm_slli_epi16(_mm_and_si128(_mm_srli_epi16(hi, 6), m3), 4);
                const __m128i q0 = _mm_sub_epi8(_mm_or_si128(_mm_and_si128(a, m4), h0), k32);
                const __m128i q1 = _mm_sub_epi8(_mm_or_si128(_mm_and_si128(b, m4), h1), k32);
                const __m128i q2 = _mm_sub_epi8(_mm_or_si128(_mm_and_si128(_mm_srli_epi16(a, 4), m4), h2), k32);
                const __m128i q3 = _mm_sub_epi8(_mm_or_si128(_mm_and_si128(_mm_srli_epi16(b, 4), m4), h3), k32);
                store16_scaled(q0, d, sc[g], y + 16 * g);
                store16_scaled(q1, d, sc[g + 2], y + 32 + 16 * g);
                store16_scaled(q2, d, sc[g + 4], y + 64 + 16 * g);
                store16_scaled(q3, d, sc[g + 6], y + 96 + 16 * g);
            }
        }
    }
}

