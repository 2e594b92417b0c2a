/*
 * vec_avx2.c — AVX2/FMA/F16C versions of the vec.h row helpers.
 *
 * Same contracts as the portable helpers in devices/cpu/vec.h (which call
 * these when the kernel ISA level is AVX2 or above); tails are handled with
 * masked loads and stores, so n can be anything and nothing past x[n-1] or
 * y[n-1] is touched.
 */
#include <immintrin.h>
#include <string.h>

#include "devices/cpu/arch/avx2/vmath_avx2.h"
#include "devices/cpu/vec.h"

void het_vec_silu_f32_avx2(int64_t n, float *y, const float *x)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, het_avx2_silu(_mm256_loadu_ps(x + i)));
    if (i < n) {
        __m256i m = het_avx2_tail_mask((int)(n - i));
        _mm256_maskstore_ps(y + i, m, het_avx2_silu(_mm256_maskload_ps(x + i, m)));
    }
}

void het_vec_swiglu_f32_avx2(int64_t n, float *y, const float *g, const float *u)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_mul_ps(het_avx2_silu(_mm256_loadu_ps(g + i)), _mm256_loadu_ps(u + i)));
    if (i < n) {
        __m256i m = het_avx2_tail_mask((int)(n - i));
        __m256 v = _mm256_mul_ps(het_avx2_silu(_mm256_maskload_ps(g + i, m)), _mm256_maskload_ps(u + i, m));
        _mm256_maskstore_ps(y + i, m, v);
    }
}

float het_vec_max_f32_avx2(int64_t n, const float *x)
{
    __m256 m = _mm256_set1_ps(-INFINITY);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) m = _mm256_max_ps(m, _mm256_loadu_ps(x + i));
    float r = het_avx2_hmax(m);
    for (; i < n; i++) r = x[i] > r ? x[i] : r;
    return r;
}

float het_vec_exp_sum_f32_avx2(int64_t n, float *y, const float *x, float m)
{
    const __m256 vm = _mm256_set1_ps(m);
    __m256 sum = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 e = het_avx2_exp(_mm256_sub_ps(_mm256_loadu_ps(x + i), vm));
        _mm256_storeu_ps(y + i, e);
        sum = _mm256_add_ps(sum, e);
    }
    if (i < n) {
        __m256i mask = het_avx2_tail_mask((int)(n - i));
        __m256 e = het_avx2_exp(_mm256_sub_ps(_mm256_maskload_ps(x + i, mask), vm));
        e = _mm256_and_ps(e, _mm256_castsi256_ps(mask));
        _mm256_maskstore_ps(y + i, mask, e);
        sum = _mm256_add_ps(sum, e);
    }
    return het_avx2_hsum(sum);
}

void het_vec_f16_to_f32_avx2(int64_t n, float *y, const uint16_t *x)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(x + i))));
    if (i < n) {
        uint16_t tmp[8] = {0};
        memcpy(tmp, x + i, (size_t)(n - i) * sizeof *x);
        __m256 v = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)tmp));
        _mm256_maskstore_ps(y + i, het_avx2_tail_mask((int)(n - i)), v);
    }
}

void het_vec_f32_to_f16_avx2(int64_t n, uint16_t *y, const float *x)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(y + i), _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
    if (i < n) {
        uint16_t tmp[8];
        __m256 v = _mm256_maskload_ps(x + i, het_avx2_tail_mask((int)(n - i)));
        _mm_storeu_si128((__m128i *)tmp, _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
        memcpy(y + i, tmp, (size_t)(n - i) * sizeof *y);
    }
}
