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

/* Four double accumulators of four lanes: the adds overlap instead of
 * waiting on one another (a single double chain costs 4 cycles per element). */
double het_vec_sumsq_f64_avx2(int64_t n, const float *x)
{
    __m256d a0 = _mm256_setzero_pd(), a1 = a0, a2 = a0, a3 = a0;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m256 v0 = _mm256_loadu_ps(x + i), v1 = _mm256_loadu_ps(x + i + 8);
        const __m256 s0 = _mm256_mul_ps(v0, v0), s1 = _mm256_mul_ps(v1, v1);
        a0 = _mm256_add_pd(a0, _mm256_cvtps_pd(_mm256_castps256_ps128(s0)));
        a1 = _mm256_add_pd(a1, _mm256_cvtps_pd(_mm256_extractf128_ps(s0, 1)));
        a2 = _mm256_add_pd(a2, _mm256_cvtps_pd(_mm256_castps256_ps128(s1)));
        a3 = _mm256_add_pd(a3, _mm256_cvtps_pd(_mm256_extractf128_ps(s1, 1)));
    }
    const __m256d a = _mm256_add_pd(_mm256_add_pd(a0, a1), _mm256_add_pd(a2, a3));
    __m128d h = _mm_add_pd(_mm256_castpd256_pd128(a), _mm256_extractf128_pd(a, 1));
    double sum = _mm_cvtsd_f64(_mm_add_sd(h, _mm_unpackhi_pd(h, h)));
    for (; i < n; i++) sum += (double)(x[i] * x[i]);
    return sum;
}
