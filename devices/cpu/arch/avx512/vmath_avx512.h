/*
 * vmath_avx512.h — AVX-512 math building blocks for the CPU kernels
 * (internal; only for files compiled with the AVX-512 flags, arch/avx512/).
 *
 * het_avx512_exp is het_avx2_exp (arch/avx2/vmath_avx2.h) on 16 lanes: the
 * same range reduction, the same degree-6 polynomial and the same clamping
 * (exactly 0 below about -87.3, so masked -INFINITY scores vanish; saturated
 * near FLT_MAX above 88), with 2^n applied by vscalefps.
 */
#ifndef HET_CPU_VMATH_AVX512_H
#define HET_CPU_VMATH_AVX512_H

#include <immintrin.h>

/* exp(x) lane-wise */
static inline __m512 het_avx512_exp(__m512 x)
{
    const __m512 lo = _mm512_set1_ps(-87.33f);
    const __m512 hi = _mm512_set1_ps(88.3f);
    const __mmask16 underflow = _mm512_cmp_ps_mask(x, lo, _CMP_LT_OQ);
    const __m512 xc = _mm512_min_ps(_mm512_max_ps(x, lo), hi);

    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(xc, _mm512_set1_ps(1.44269504088896341f)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), xc);  /* ln2 high part */
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);       /* ln2 low part  */

    __m512 p = _mm512_set1_ps(1.0f / 720.0f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    return _mm512_maskz_mov_ps((__mmask16)~underflow, _mm512_scalef_ps(p, n));
}

/* silu(x) = x / (1 + exp(-x)) lane-wise. */
static inline __m512 het_avx512_silu(__m512 x)
{
    const __m512 e = het_avx512_exp(_mm512_sub_ps(_mm512_setzero_ps(), x));
    return _mm512_div_ps(x, _mm512_add_ps(_mm512_set1_ps(1.0f), e));
}

/* Mask of the first n (0..16) lanes, for tails. */
static inline __mmask16 het_avx512_tail(int n) { return (__mmask16)((1u << n) - 1u); }

#endif /* HET_CPU_VMATH_AVX512_H */
