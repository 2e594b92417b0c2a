/*
 * quant_impl.h — byte layouts of the GGUF block-quantised formats, shared by
 * the reference (de)quantisers in model/quant.c and model/quant_k.c and by
 * every kernel (CPU SIMD, Vulkan host code) that reads the blocks.
 *
 * One definition per layout lives here so that no module re-declares a block
 * struct. Every struct is byte-packed by construction (only uint8/int8/uint16/
 * int16/float members in an order that needs no padding) and its size is
 * checked against the GGUF type size. fp16 fields hold IEEE binary16 bits.
 *
 * Layout summary (QK = elements per block, value = decoded element):
 *   q4_0  d, qs[16]            element j<16: (qs[j]&15)-8,  j>=16: (qs[j-16]>>4)-8; value = d*q
 *   q4_1  d, m, qs[16]         same nibble order, unsigned;           value = d*q + m
 *   q5_0  d, qh[4], qs[16]     nibble as q4_0, bit 4 from qh bit j;   value = d*(q-16)
 *   q5_1  d, m, qh[4], qs[16]  as q5_0 but unsigned;                  value = d*q + m
 *   q8_0  d, qs[32] int8                                               value = d*q
 *   q8_1  d, s=d*sum(qs), qs[32] int8                                  value = d*q
 *   K-quants use 256-element super-blocks (see quant_k.c for the details).
 */
#ifndef HET_MODEL_QUANT_IMPL_H
#define HET_MODEL_QUANT_IMPL_H

#include <stdint.h>
#include <string.h>

#include "het/type.h"

typedef struct {
    uint16_t d;                     /* scale (fp16)                          */
    uint8_t  qs[HET_QK4_0 / 2];     /* 4-bit quants, two per byte            */
} het_block_q4_0;

typedef struct {
    uint16_t d;                     /* scale (fp16)                          */
    uint16_t m;                     /* minimum (fp16)                        */
    uint8_t  qs[HET_QK4_1 / 2];
} het_block_q4_1;

typedef struct {
    uint16_t d;
    uint8_t  qh[4];                 /* 5th bit of each quant, little endian  */
    uint8_t  qs[HET_QK5_0 / 2];
} het_block_q5_0;

typedef struct {
    uint16_t d;
    uint16_t m;
    uint8_t  qh[4];
    uint8_t  qs[HET_QK5_1 / 2];
} het_block_q5_1;

typedef struct {
    uint16_t d;
    int8_t   qs[HET_QK8_0];
} het_block_q8_0;

typedef struct {
    uint16_t d;
    uint16_t s;                     /* d * sum(qs) (fp16)                    */
    int8_t   qs[HET_QK8_1];
} het_block_q8_1;

/* 16 groups of 16: x = d*(scales&15)*q - dmin*(scales>>4), q in 0..3 */
typedef struct {
    uint8_t  scales[HET_QK_K / 16];
    uint8_t  qs[HET_QK_K / 4];
    uint16_t d;
    uint16_t dmin;
} het_block_q2_k;

/* 16 groups of 16, 6-bit signed group scales, 3-bit quants (2 low + hmask) */
typedef struct {
    uint8_t  hmask[HET_QK_K / 8];
    uint8_t  qs[HET_QK_K / 4];
    uint8_t  scales[12];
    uint16_t d;
} het_block_q3_k;

/* 8 groups of 32: x = d*sc*q - dmin*m, sc/m 6-bit packed in scales[12] */
typedef struct {
    uint16_t d;
    uint16_t dmin;
    uint8_t  scales[HET_K_SCALE_SIZE];
    uint8_t  qs[HET_QK_K / 2];
} het_block_q4_k;

/* as q4_k plus a 5th bit per quant in qh */
typedef struct {
    uint16_t d;
    uint16_t dmin;
    uint8_t  scales[HET_K_SCALE_SIZE];
    uint8_t  qh[HET_QK_K / 8];
    uint8_t  qs[HET_QK_K / 2];
} het_block_q5_k;

/* 16 groups of 16: x = d*scales[g]*(q-32), q 6-bit = 4 low (ql) + 2 high (qh) */
typedef struct {
    uint8_t  ql[HET_QK_K / 2];
    uint8_t  qh[HET_QK_K / 4];
    int8_t   scales[HET_QK_K / 16];
    uint16_t d;
} het_block_q6_k;

/* activation format for K-quant dot products: fp32 scale, sums per 16 */
typedef struct {
    float    d;
    int8_t   qs[HET_QK_K];
    int16_t  bsums[HET_QK_K / 16];
} het_block_q8_k;

_Static_assert(sizeof(het_block_q4_0) == 18,  "q4_0 block size");
_Static_assert(sizeof(het_block_q4_1) == 20,  "q4_1 block size");
_Static_assert(sizeof(het_block_q5_0) == 22,  "q5_0 block size");
_Static_assert(sizeof(het_block_q5_1) == 24,  "q5_1 block size");
_Static_assert(sizeof(het_block_q8_0) == 34,  "q8_0 block size");
_Static_assert(sizeof(het_block_q8_1) == 36,  "q8_1 block size");
_Static_assert(sizeof(het_block_q2_k) == 84,  "q2_K block size");
_Static_assert(sizeof(het_block_q3_k) == 110, "q3_K block size");
_Static_assert(sizeof(het_block_q4_k) == 144, "q4_K block size");
_Static_assert(sizeof(het_block_q5_k) == 176, "q5_K block size");
_Static_assert(sizeof(het_block_q6_k) == 210, "q6_K block size");
_Static_assert(sizeof(het_block_q8_k) == 292, "q8_K block size");

/*
 * Scale and min of group j (0..7) of a q4_K/q5_K block. The twelve bytes hold
 * eight 6-bit scales and eight 6-bit mins: groups 0..3 keep their low 6 bits
 * in bytes j (scale) and j+4 (min); groups 4..7 keep their low 4 bits in the
 * nibbles of byte j+4 and their top 2 bits in the top bits of bytes j-4
 * (scale) and j (min).
 */
static inline void het_q4k_scale_min(int j, const uint8_t *scales, uint8_t *sc, uint8_t *m)
{
    if (j < 4) {
        *sc = scales[j] & 63;
        *m  = scales[j + 4] & 63;
    } else {
        *sc = (uint8_t)((scales[j + 4] & 0x0F) | ((scales[j - 4] >> 6) << 4));
        *m  = (uint8_t)((scales[j + 4] >> 4)   | ((scales[j]     >> 6) << 4));
    }
}

/*
 * Round to the nearest integer, ties to even, as the reference quantisers do
 * (they add 1.5*2^23 so that the FPU's rounding does the work). Inputs are
 * clamped to +-2^22 first and NaN gives 0, so hostile data cannot produce
 * undefined behaviour; for every value the quantisers normally see the
 * result is the plain round-half-even.
 */
static inline int het_nearest_int(float v)
{
    if (!(v == v)) return 0;
    if (v > 4194303.0f) v = 4194303.0f;
    if (v < -4194303.0f) v = -4194303.0f;
    float shifted = v + 12582912.0f;     /* 1.5 * 2^23: integer lands in the mantissa */
    int32_t bits;
    memcpy(&bits, &shifted, sizeof bits);
    return (bits & 0x007FFFFF) - 0x00400000;
}

/* ---- per-type reference rows (n elements, a multiple of the block size) -- */
void het_dequantize_row_q4_0(const void *src, float *dst, int64_t n);
void het_dequantize_row_q4_1(const void *src, float *dst, int64_t n);
void het_dequantize_row_q5_0(const void *src, float *dst, int64_t n);
void het_dequantize_row_q5_1(const void *src, float *dst, int64_t n);
void het_dequantize_row_q8_0(const void *src, float *dst, int64_t n);
void het_dequantize_row_q8_1(const void *src, float *dst, int64_t n);
void het_dequantize_row_q4_k(const void *src, float *dst, int64_t n);
void het_dequantize_row_q5_k(const void *src, float *dst, int64_t n);
void het_dequantize_row_q6_k(const void *src, float *dst, int64_t n);
void het_dequantize_row_q8_k(const void *src, float *dst, int64_t n);

void het_quantize_row_q4_0(const float *src, void *dst, int64_t n);
void het_quantize_row_q4_1(const float *src, void *dst, int64_t n);
void het_quantize_row_q5_0(const float *src, void *dst, int64_t n);
void het_quantize_row_q5_1(const float *src, void *dst, int64_t n);
void het_quantize_row_q8_0(const float *src, void *dst, int64_t n);
void het_quantize_row_q8_1(const float *src, void *dst, int64_t n);
void het_quantize_row_q4_k(const float *src, void *dst, int64_t n);
void het_quantize_row_q5_k(const float *src, void *dst, int64_t n);
void het_quantize_row_q6_k(const float *src, void *dst, int64_t n);
void het_quantize_row_q8_k(const float *src, void *dst, int64_t n);

#endif /* HET_MODEL_QUANT_IMPL_H */
