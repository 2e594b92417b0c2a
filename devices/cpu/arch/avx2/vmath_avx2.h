/*
 * vmath_avx2.h — AVX2 math building blocks for the CPU kernels (internal).
 *
 * Only for files compiled with -mavx2 -mfma -mf16c (devices/cpu/arch/avx2/).
 * het_avx2_exp is a polynomial exp accurate to about 2 ulp on the range
 * softmax and silu need; it returns exactly 0 below about -87.3 (so masked
 * -INFINITY scores vanish) and saturates near FLT_MAX above 88.
 */
#ifndef HET_CPU_VMATH_AVX2_H
#define HET_CPU_VMATH_AVX2_H

#include <immintrin.h>

/* exp(x) lane-wise: x = n*ln2 + r with |r| <= ln2/2, exp(r) by a degree-6
 * Taylor polynomial (error < 2e-7 relative on that interval), times 2^n
 * built directly in the exponent field. */
static inline __m256 het_avx2_exp(__m256 x)
{
    const __m256 lo = _mm256_set1_ps(-87.33f);
    const __m256 hi = _mm256_set1_ps(88.3f);
    __m256 underflow = _mm256_cmp_ps(x, lo, _CMP_LT_OQ);
    __m256 xc = _mm256_min_ps(_mm256_max_ps(x, lo), hi);

    __m256 n = _mm256_round_ps(_mm256_mul_ps(xc, _mm256_set1_ps(1.44269504088896341f)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), xc);   /* ln2 high part */
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);        /* ln2 low part  */

    __m256 p = _mm256_set1_ps(1.0f / 720.0f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));

    __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    __m256 y = _mm256_mul_ps(p, _mm256_castsi256_ps(e));
    return _mm256_andnot_ps(underflow, y);
}

/* silu(x) = x / (1 + exp(-x)) lane-wise. */
static inline __m256 het_avx2_silu(__m256 x)
{
    __m256 e = het_avx2_exp(_mm256_sub_ps(_mm256_setzero_ps(), x));
    return _mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0f), e));
}

/* Sum of the 8 lanes. */
static inline float het_avx2_hsum(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* Max of the 8 lanes. */
static inline float het_avx2_hmax(__m256 v)
{
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* Mask selecting the first n (0..8) lanes, for tails. */
static inline __m256i het_avx2_tail_mask(int n)
{
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

#endif /* HET_CPU_VMATH_AVX2_H */
