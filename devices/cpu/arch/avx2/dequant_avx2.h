/*
 * dequant_avx2.h — AVX2 weight-row dequantisers (dequant_avx2.c), entries of
 * the AVX2 kernel table's dequant[]: n elements (whole blocks) to F32,
 * bit-identical to het_dequantize_row.
 */
#ifndef HET_DEQUANT_AVX2_H
#define HET_DEQUANT_AVX2_H

#include <stdint.h>

void het_dequant_q4_0_avx2(const void *src, float *y, int64_t n);
void het_dequant_q8_0_avx2(const void *src, float *y, int64_t n);
void het_dequant_q4_k_avx2(const void *src, float *y, int64_t n);
void het_dequant_q6_k_avx2(const void *src, float *y, int64_t n);

#endif /* HET_DEQUANT_AVX2_H */
