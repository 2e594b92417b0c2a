/*
 * peak_avx2.c — the arithmetic limits of the AVX2 kernels, measured: how
 * many int8 multiply-adds per second the quantised matmuls' instructions
 * (vpmaddubsw into 16-bit sums, vpaddw) can retire, and how many F32 FMAs.
 * hetrun bench prints prefill speed beside a bound computed from them, the
 * compute counterpart of the read bandwidth printed beside decode.
 *
 * Independent accumulator chains hide the instructions' latency. The F32
 * operands pass through an empty asm each iteration so the compiler cannot
 * hoist the products out of the loop; the int8 loop is written in assembly.
 * Each function returns the operations it performed (a multiply-add counts
 * two).
 */
#include <immintrin.h>

#include "devices/cpu/cpu_peak.h"

#define KEEP(v) __asm__ volatile("" : "+x"(v))

double het_peak_int8_avx2(int64_t iters, uint32_t *sink)
{
    /* In assembly: with intrinsics the compiler kept the eight accumulators
     * in memory, and the loop measured store forwarding (half the rate).
     * Eight chains s_j += vpmaddubsw(u, v) through four rotating temporaries;
     * the operand values do not change integer timing. */
    int64_t n = iters;
    int32_t out;
    if (n <= 0) return 0;
    __asm__ volatile(
        "vpxor %%xmm0, %%xmm0, %%xmm0\n\t"
        "vpcmpeqb %%ymm1, %%ymm1, %%ymm1\n\t"
        "vpxor %%xmm6, %%xmm6, %%xmm6\n\t"   "vpxor %%xmm7, %%xmm7, %%xmm7\n\t"
        "vpxor %%xmm8, %%xmm8, %%xmm8\n\t"   "vpxor %%xmm9, %%xmm9, %%xmm9\n\t"
        "vpxor %%xmm10, %%xmm10, %%xmm10\n\t" "vpxor %%xmm11, %%xmm11, %%xmm11\n\t"
        "vpxor %%xmm12, %%xmm12, %%xmm12\n\t" "vpxor %%xmm13, %%xmm13, %%xmm13\n\t"
        "1:\n\t"
        "vpmaddubsw %%ymm1, %%ymm0, %%ymm2\n\t"  "vpaddw %%ymm2, %%ymm6, %%ymm6\n\t"
        "vpmaddubsw %%ymm1, %%ymm0, %%ymm3\n\t"  "vpaddw %%ymm3, %%ymm7, %%ymm7\n\t"
        "vpmaddubsw %%ymm1, %%ymm0, %%ymm4\n\t"  "vpaddw %%ymm4, %%ymm8, %%ymm8\n\t"
        "vpmaddubsw %%ymm1, %%ymm0, %%ymm5\n\t"  "vpaddw %%ymm5, %%ymm9, %%ymm9\n\t"
        "vpmaddubsw %%ymm1, %%ymm0, %%ymm2\n\t"  "vpaddw %%ymm2, %%ymm10, %%ymm10\n\t"
        "vpmaddubsw %%ymm1, %%ymm0, %%ymm3\n\t"  "vpaddw %%ymm3, %%ymm11, %%ymm11\n\t"
        "vpmaddubsw %%ymm1, %%ymm0, %%ymm4\n\t"  "vpaddw %%ymm4, %%ymm12, %%ymm12\n\t"
        "vpmaddubsw %%ymm1, %%ymm0, %%ymm5\n\t"  "vpaddw %%ymm5, %%ymm13, %%ymm13\n\t"
        "dec %0\n\t"
        "jnz 1b\n\t"
        "vpaddw %%ymm6, %%ymm13, %%ymm6\n\t"
        "vmovd %%xmm6, %1\n\t"
        "vzeroupper\n\t"
        : "+r"(n), "=r"(out)
        :
        : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11",
          "xmm12", "xmm13", "cc");
    *sink += out;
    return (double)iters * 8 * 32 * 2;
}

double het_peak_f32_avx2(int64_t iters, uint32_t *sink)
{
    /* twelve accumulators, each its own chain: no two FMAs are equal */
    __m256 a = _mm256_set1_ps(1.0f), b = _mm256_set1_ps(1e-7f);
    __m256 c[12];
    for (int j = 0; j < 12; j++) c[j] = _mm256_set1_ps((float)j);
    for (int64_t i = 0; i < iters; i++) {
        KEEP(a);
        KEEP(b);
#pragma GCC unroll 12
        for (int j = 0; j < 12; j++) c[j] = _mm256_fmadd_ps(a, b, c[j]);
    }
    __m256 t = c[0];
    for (int j = 1; j < 12; j++) t = _mm256_add_ps(t, c[j]);
    *sink += (int32_t)_mm256_cvtss_f32(t);
    return (double)iters * 12 * 8 * 2;
}
