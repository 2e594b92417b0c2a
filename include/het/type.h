/*
 * type.h — element types of het tensors and their storage traits.
 *
 * The numeric values are the GGUF/ggml type ids, so a type read from a GGUF
 * file is used as is after het_type_is_known(). Block-quantised types store
 * blck_size elements in type_size bytes; the byte layouts are exactly the
 * GGUF definitions (model/quant.c implements them bit for bit).
 */
#ifndef HET_TYPE_H
#define HET_TYPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "het/status.h"

#ifdef __cplusplus
extern "C" {
#endif

enum het_type {
    HET_TYPE_F32  = 0,
    HET_TYPE_F16  = 1,
    HET_TYPE_Q4_0 = 2,
    HET_TYPE_Q4_1 = 3,
    /* 4, 5: removed Q4_2/Q4_3, never valid */
    HET_TYPE_Q5_0 = 6,
    HET_TYPE_Q5_1 = 7,
    HET_TYPE_Q8_0 = 8,
    HET_TYPE_Q8_1 = 9,
    HET_TYPE_Q2_K = 10,
    HET_TYPE_Q3_K = 11,
    HET_TYPE_Q4_K = 12,
    HET_TYPE_Q5_K = 13,
    HET_TYPE_Q6_K = 14,
    HET_TYPE_Q8_K = 15,
    /* 16..23: IQ types (sizes known, not computed by het) */
    HET_TYPE_I8   = 24,
    HET_TYPE_I16  = 25,
    HET_TYPE_I32  = 26,
    HET_TYPE_I64  = 27,
    HET_TYPE_F64  = 28,
    /* 29: IQ1_M */
    HET_TYPE_BF16 = 30,
    HET_TYPE_COUNT = 31,
};

/* QK: elements per block. */
#define HET_QK4_0 32
#define HET_QK4_1 32
#define HET_QK5_0 32
#define HET_QK5_1 32
#define HET_QK8_0 32
#define HET_QK8_1 32
#define HET_QK_K  256
#define HET_K_SCALE_SIZE 12

struct het_type_traits {
    const char *name;         /* "q4_0", as ggml and GGUF tools print it           */
    int64_t     blck_size;    /* elements per block (1 for plain types)            */
    size_t      type_size;    /* bytes per block                                   */
    bool        is_quantized; /* block-quantised                                   */
    bool        can_compute;  /* het has dequantisation and kernels for this type  */
};

/* True for every id GGUF may carry with a known size (not necessarily computable). */
bool het_type_is_known(uint32_t type);
const struct het_type_traits *het_type_get_traits(enum het_type type);
const char *het_type_name(enum het_type type);
/* Bytes of a row of n elements; n must be a multiple of the block size. */
size_t het_type_row_size(enum het_type type, int64_t n);
/* Parse "q4_0", "Q4_K", "f16" ...; returns HET_TYPE_COUNT when unknown. */
enum het_type het_type_from_name(const char *name);

/* Scalar conversions (exact, IEEE round-to-nearest-even for narrowing). */
float    het_fp16_to_fp32(uint16_t h);
uint16_t het_fp32_to_fp16(float f);
float    het_bf16_to_fp32(uint16_t h);
uint16_t het_fp32_to_bf16(float f);

/*
 * Reference (scalar) row conversions, bit-exact to the GGUF definitions.
 * n must be a multiple of the type's block size. Supported for F32, F16,
 * BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1 (quantize only as activations),
 * Q4_K, Q5_K, Q6_K, Q8_K; others return HET_ERR_UNSUPPORTED.
 * het_quantize_row uses the same rounding as ggml's reference quantizers
 * (quantize_row_*_ref), so files written by het match llama.cpp's layout.
 */
enum het_status het_dequantize_row(enum het_type type, const void *src, float *dst, int64_t n);
enum het_status het_quantize_row(enum het_type type, const float *src, void *dst, int64_t n);

#ifdef __cplusplus
}
#endif
#endif /* HET_TYPE_H */
