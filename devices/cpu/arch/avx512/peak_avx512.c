/*
 * peak_avx512.c — the AVX-512 counterpart of peak_avx2.c: int8
 * multiply-adds with vpdpbusd where the CPU has VNNI (what the AVX-512
 * panel kernels then use), else vpmaddubsw + vpaddw on zmm, and F32 FMAs
 * on zmm. Same contract: returns the operations performed.
 */
#include <immintrin.h>

#include "devices/cpu/cpu_peak.h"

#define KEEP(v) __asm__ volatile("" : "+v"(v))

double het_peak_int8_avx512(int64_t iters, bool vnni, uint32_t *sink)
{
    /* eight chains with distinct weights (equal products would be computed
     * once); 8 + 8 + 1 of the 32 registers */
    __m512i w[8], s[8], a = _mm512_set1_epi8(5);
    for (int j = 0; j < 8; j++) {
        w[j] = _mm512_set1_epi8((char)(j + 1));
        s[j] = _mm512_setzero_si512();
    }
    if (vnni) {
        for (int64_t i = 0; i < iters; i++) {
            KEEP(a);
#pragma GCC unroll 8
            for (int j = 0; j < 8; j++) s[j] = _mm512_dpbusd_epi32(s[j], w[j], a);
        }
    } else {
        for (int64_t i = 0; i < iters; i++) {
            KEEP(a);
#pragma GCC unroll 8
            for (int j = 0; j < 8; j++) s[j] = _mm512_add_epi16(s[j], _mm512_maddubs_epi16(w[j], a));
        }
    }
    __m512i t = s[0];
    for (int j = 1; j < 8; j++) t = _mm512_add_epi32(t, s[j]);
    *sink += _mm_cvtsi128_si32(_mm512_castsi512_si128(t));
    return (double)iters * 8 * 64 * 2;
}

double het_peak_f32_avx512(int64_t iters, uint32_t *sink)
{
    __m512 a = _mm512_set1_ps(1.0f), b = _mm512_set1_ps(1e-7f);
    __m512 c[12];
    for (int j = 0; j < 12; j++) c[j] = _mm512_set1_ps((float)j);
    for (int64_t i = 0; i < iters; i++) {
        KEEP(a);
        KEEP(b);
#pragma GCC unroll 12
        for (int j = 0; j < 12; j++) c[j] = _mm512_fmadd_ps(a, b, c[j]);
    }
    __m512 t = c[0];
    for (int j = 1; j < 12; j++) t = _mm512_add_ps(t, c[j]);
    *sink += (int32_t)_mm512_cvtss_f32(t);
    return (double)iters * 12 * 16 * 2;
}
