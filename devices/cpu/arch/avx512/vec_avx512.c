/*
 * vec_avx512.c — AVX-512 versions of the vec.h row helpers whose time is
 * arithmetic rather than memory: silu and swiglu (an exp and a divide per
 * element; at prefill swiglu's rows are 3 x n_ff floats per token and took
 * as long as quantising every matmul's activations). Same contracts as the
 * portable helpers and the AVX2 twins (vec_avx2.c); tails use masked loads
 * and stores, so nothing past x[n-1] or y[n-1] is touched.
 */
#include <immintrin.h>

#include "devices/cpu/arch/avx512/vmath_avx512.h"
#include "devices/cpu/vec.h"

void het_vec_silu_f32_avx512(int64_t n, float *y, const float *x)
{
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, het_avx512_silu(_mm512_loadu_ps(x + i)));
    if (i < n) {
        const __mmask16 m = het_avx512_tail((int)(n - i));
        _mm512_mask_storeu_ps(y + i, m, het_avx512_silu(_mm512_maskz_loadu_ps(m, x + i)));
    }
}

void het_vec_swiglu_f32_avx512(int64_t n, float *y, const float *g, const float *u)
{
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(y + i, _mm512_mul_ps(het_avx512_silu(_mm512_loadu_ps(g + i)), _mm512_loadu_ps(u + i)));
    if (i < n) {
        const __mmask16 m = het_avx512_tail((int)(n - i));
        const __m512 v = _mm512_mul_ps(het_avx512_silu(_mm512_maskz_loadu_ps(m, g + i)), _mm512_maskz_loadu_ps(m, u + i));
        _mm512_mask_storeu_ps(y + i, m, v);
    }
}
