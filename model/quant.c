/*
 * quant.c — reference (scalar) conversion between float rows and the GGUF
 * storage types: F32/F16/BF16 and the 32-element legacy blocks Q4_0, Q4_1,
 * Q5_0, Q5_1, Q8_0, Q8_1; plus het_dequantize_row/het_quantize_row, the
 * dispatch over every supported type (K-quants are in quant_k.c).
 *
 * Dequantisation follows the GGUF definitions bit for bit. Quantisation
 * reproduces ggml's reference quantisers (quantize_row_*_ref) operation by
 * operation, in the same float order, so a row quantised here has the same
 * bytes as llama.cpp's output without an importance matrix. These are the
 * correctness references that the SIMD kernels are tested against; they are
 * deliberately plain.
 */
#include "model/quant_impl.h"

/* The byte-exact results depend on every multiply and add being rounded
 * separately: forbid the compiler from fusing them into FMAs (GCC does so by
 * default whenever the target has FMA). */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

#include <float.h>
#include <math.h>

/* Truncate toward zero and clamp to [lo, hi], NaN -> lo. For in-range values
 * this is exactly C's float->int conversion that the reference uses. */
static inline int trunc_clamp(float v, int lo, int hi)
{
    if (!(v > (float)lo)) return lo;
    if (v >= (float)hi) return hi;
    return (int)v;
}

/* roundf() clamped to int8, NaN -> 0 */
static inline int8_t round_i8(float v)
{
    if (!(v == v)) return 0;
    if (v >= 127.0f) return 127;
    if (v <= -128.0f) return -128;
    return (int8_t)roundf(v);
}

/* Signed value of largest magnitude in x[0..n) (the first one on ties). */
static float signed_absmax(const float *x, int n)
{
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < n; j++) {
        if (amax < fabsf(x[j])) {
            amax = fabsf(x[j]);
            max  = x[j];
        }
    }
    return max;
}

static void min_max(const float *x, int n, float *mn, float *mx)
{
    float lo = FLT_MAX, hi = -FLT_MAX;
    for (int j = 0; j < n; j++) {
        if (x[j] < lo) lo = x[j];
        if (x[j] > hi) hi = x[j];
    }
    *mn = lo;
    *mx = hi;
}

/* ---- Q4_0: d = max/-8, q = x/d + 8 --------------------------------------- */

void het_quantize_row_q4_0(const float *x, void *dst, int64_t n)
{
    het_block_q4_0 *y = dst;
    for (int64_t i = 0; i < n / HET_QK4_0; i++, x += HET_QK4_0) {
        const float d  = signed_absmax(x, HET_QK4_0) / -8;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = het_fp32_to_fp16(d);
        for (int j = 0; j < HET_QK4_0 / 2; j++) {
            int lo = trunc_clamp(x[j] * id + 8.5f, 0, 15);
            int hi = trunc_clamp(x[j + HET_QK4_0 / 2] * id + 8.5f, 0, 15);
            y[i].qs[j] = (uint8_t)(lo | (hi << 4));
        }
    }
}

void het_dequantize_row_q4_0(const void *src, float *y, int64_t n)
{
    const het_block_q4_0 *x = src;
    for (int64_t i = 0; i < n / HET_QK4_0; i++, y += HET_QK4_0) {
        const float d = het_fp16_to_fp32(x[i].d);
        for (int j = 0; j < HET_QK4_0 / 2; j++) {
            y[j]                 = (float)((x[i].qs[j] & 0x0F) - 8) * d;
            y[j + HET_QK4_0 / 2] = (float)((x[i].qs[j] >> 4) - 8) * d;
        }
    }
}

/* ---- Q4_1: d = (max-min)/15, m = min, q = (x-min)/d ---------------------- */

void het_quantize_row_q4_1(const float *x, void *dst, int64_t n)
{
    het_block_q4_1 *y = dst;
    for (int64_t i = 0; i < n / HET_QK4_1; i++, x += HET_QK4_1) {
        float mn, mx;
        min_max(x, HET_QK4_1, &mn, &mx);
        const float d  = (mx - mn) / 15;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = het_fp32_to_fp16(d);
        y[i].m = het_fp32_to_fp16(mn);
        for (int j = 0; j < HET_QK4_1 / 2; j++) {
            int lo = trunc_clamp((x[j] - mn) * id + 0.5f, 0, 15);
            int hi = trunc_clamp((x[j + HET_QK4_1 / 2] - mn) * id + 0.5f, 0, 15);
            y[i].qs[j] = (uint8_t)(lo | (hi << 4));
        }
    }
}

void het_dequantize_row_q4_1(const void *src, float *y, int64_t n)
{
    const het_block_q4_1 *x = src;
    for (int64_t i = 0; i < n / HET_QK4_1; i++, y += HET_QK4_1) {
        const float d = het_fp16_to_fp32(x[i].d);
        const float m = het_fp16_to_fp32(x[i].m);
        for (int j = 0; j < HET_QK4_1 / 2; j++) {
            y[j]                 = (float)(x[i].qs[j] & 0x0F) * d + m;
            y[j + HET_QK4_1 / 2] = (float)(x[i].qs[j] >> 4) * d + m;
        }
    }
}

/* ---- Q5_0 / Q5_1: 4 low bits in qs as Q4, bit 4 of element j in qh bit j -- */

static void pack_q5(const int *q, uint8_t qs[16], uint8_t qh[4])
{
    uint32_t h = 0;
    for (int j = 0; j < 16; j++) {
        qs[j] = (uint8_t)((q[j] & 0x0F) | ((q[j + 16] & 0x0F) << 4));
        h |= (uint32_t)((q[j] >> 4) & 1) << j;
        h |= (uint32_t)((q[j + 16] >> 4) & 1) << (j + 16);
    }
    for (int b = 0; b < 4; b++) qh[b] = (uint8_t)(h >> (8 * b));
}

static void unpack_q5(const uint8_t qs[16], const uint8_t qh[4], int *q)
{
    uint32_t h = (uint32_t)qh[0] | (uint32_t)qh[1] << 8 | (uint32_t)qh[2] << 16 | (uint32_t)qh[3] << 24;
    for (int j = 0; j < 16; j++) {
        q[j]      = (qs[j] & 0x0F) | (int)(((h >> j) & 1) << 4);
        q[j + 16] = (qs[j] >> 4)   | (int)(((h >> (j + 16)) & 1) << 4);
    }
}

void het_quantize_row_q5_0(const float *x, void *dst, int64_t n)
{
    het_block_q5_0 *y = dst;
    int q[HET_QK5_0];
    for (int64_t i = 0; i < n / HET_QK5_0; i++, x += HET_QK5_0) {
        const float d  = signed_absmax(x, HET_QK5_0) / -16;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = het_fp32_to_fp16(d);
        for (int j = 0; j < HET_QK5_0; j++) q[j] = trunc_clamp(x[j] * id + 16.5f, 0, 31);
        pack_q5(q, y[i].qs, y[i].qh);
    }
}

void het_dequantize_row_q5_0(const void *src, float *y, int64_t n)
{
    const het_block_q5_0 *x = src;
    int q[HET_QK5_0];
    for (int64_t i = 0; i < n / HET_QK5_0; i++, y += HET_QK5_0) {
        const float d = het_fp16_to_fp32(x[i].d);
        unpack_q5(x[i].qs, x[i].qh, q);
        for (int j = 0; j < HET_QK5_0; j++) y[j] = (float)(q[j] - 16) * d;
    }
}

void het_quantize_row_q5_1(const float *x, void *dst, int64_t n)
{
    het_block_q5_1 *y = dst;
    int q[HET_QK5_1];
    for (int64_t i = 0; i < n / HET_QK5_1; i++, x += HET_QK5_1) {
        float mn, mx;
        min_max(x, HET_QK5_1, &mn, &mx);
        const float d  = (mx - mn) / 31;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = het_fp32_to_fp16(d);
        y[i].m = het_fp32_to_fp16(mn);
        for (int j = 0; j < HET_QK5_1; j++) q[j] = trunc_clamp((x[j] - mn) * id + 0.5f, 0, 31);
        pack_q5(q, y[i].qs, y[i].qh);
    }
}

void het_dequantize_row_q5_1(const void *src, float *y, int64_t n)
{
    const het_block_q5_1 *x = src;
    int q[HET_QK5_1];
    for (int64_t i = 0; i < n / HET_QK5_1; i++, y += HET_QK5_1) {
        const float d = het_fp16_to_fp32(x[i].d);
        const float m = het_fp16_to_fp32(x[i].m);
        unpack_q5(x[i].qs, x[i].qh, q);
        for (int j = 0; j < HET_QK5_1; j++) y[j] = (float)q[j] * d + m;
    }
}

/* ---- Q8_0 / Q8_1: d = amax/127, q = round(x/d) --------------------------- */

static float absmax(const float *x, int n)
{
    float amax = 0.0f;
    for (int j = 0; j < n; j++) amax = fmaxf(amax, fabsf(x[j]));
    return amax;
}

void het_quantize_row_q8_0(const float *x, void *dst, int64_t n)
{
    het_block_q8_0 *y = dst;
    for (int64_t i = 0; i < n / HET_QK8_0; i++, x += HET_QK8_0) {
        const float d  = absmax(x, HET_QK8_0) / 127;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = het_fp32_to_fp16(d);
        for (int j = 0; j < HET_QK8_0; j++) y[i].qs[j] = round_i8(x[j] * id);
    }
}

void het_dequantize_row_q8_0(const void *src, float *y, int64_t n)
{
    const het_block_q8_0 *x = src;
    for (int64_t i = 0; i < n / HET_QK8_0; i++, y += HET_QK8_0) {
        const float d = het_fp16_to_fp32(x[i].d);
        for (int j = 0; j < HET_QK8_0; j++) y[j] = (float)x[i].qs[j] * d;
    }
}

void het_quantize_row_q8_1(const float *x, void *dst, int64_t n)
{
    het_block_q8_1 *y = dst;
    for (int64_t i = 0; i < n / HET_QK8_1; i++, x += HET_QK8_1) {
        const float d  = absmax(x, HET_QK8_1) / 127;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        int sum = 0;
        y[i].d = het_fp32_to_fp16(d);
        for (int j = 0; j < HET_QK8_1; j++) {
            y[i].qs[j] = round_i8(x[j] * id);
            sum += y[i].qs[j];
        }
        y[i].s = het_fp32_to_fp16((float)sum * d);
    }
}

void het_dequantize_row_q8_1(const void *src, float *y, int64_t n)
{
    const het_block_q8_1 *x = src;
    for (int64_t i = 0; i < n / HET_QK8_1; i++, y += HET_QK8_1) {
        const float d = het_fp16_to_fp32(x[i].d);
        for (int j = 0; j < HET_QK8_1; j++) y[j] = (float)x[i].qs[j] * d;
    }
}

/* ---- plain float types ---------------------------------------------------- */

static void dequantize_row_f32(const void *src, float *y, int64_t n)
{
    memcpy(y, src, (size_t)n * sizeof(float));
}

static void quantize_row_f32(const float *x, void *dst, int64_t n)
{
    memcpy(dst, x, (size_t)n * sizeof(float));
}

static void dequantize_row_f16(const void *src, float *y, int64_t n)
{
    const uint16_t *x = src;
    for (int64_t i = 0; i < n; i++) y[i] = het_fp16_to_fp32(x[i]);
}

static void quantize_row_f16(const float *x, void *dst, int64_t n)
{
    uint16_t *y = dst;
    for (int64_t i = 0; i < n; i++) y[i] = het_fp32_to_fp16(x[i]);
}

static void dequantize_row_bf16(const void *src, float *y, int64_t n)
{
    const uint16_t *x = src;
    for (int64_t i = 0; i < n; i++) y[i] = het_bf16_to_fp32(x[i]);
}

static void quantize_row_bf16(const float *x, void *dst, int64_t n)
{
    uint16_t *y = dst;
    for (int64_t i = 0; i < n; i++) y[i] = het_fp32_to_bf16(x[i]);
}

/* ---- dispatch ------------------------------------------------------------- */

struct row_codec {
    void (*to_float)(const void *src, float *dst, int64_t n);
    void (*from_float)(const float *src, void *dst, int64_t n);
};

static const struct row_codec codecs[HET_TYPE_COUNT] = {
    [HET_TYPE_F32]  = { dequantize_row_f32,      quantize_row_f32      },
    [HET_TYPE_F16]  = { dequantize_row_f16,      quantize_row_f16      },
    [HET_TYPE_BF16] = { dequantize_row_bf16,     quantize_row_bf16     },
    [HET_TYPE_Q4_0] = { het_dequantize_row_q4_0, het_quantize_row_q4_0 },
    [HET_TYPE_Q4_1] = { het_dequantize_row_q4_1, het_quantize_row_q4_1 },
    [HET_TYPE_Q5_0] = { het_dequantize_row_q5_0, het_quantize_row_q5_0 },
    [HET_TYPE_Q5_1] = { het_dequantize_row_q5_1, het_quantize_row_q5_1 },
    [HET_TYPE_Q8_0] = { het_dequantize_row_q8_0, het_quantize_row_q8_0 },
    [HET_TYPE_Q8_1] = { het_dequantize_row_q8_1, het_quantize_row_q8_1 },
    [HET_TYPE_Q4_K] = { het_dequantize_row_q4_k, het_quantize_row_q4_k },
    [HET_TYPE_Q5_K] = { het_dequantize_row_q5_k, het_quantize_row_q5_k },
    [HET_TYPE_Q6_K] = { het_dequantize_row_q6_k, het_quantize_row_q6_k },
    [HET_TYPE_Q8_K] = { het_dequantize_row_q8_k, het_quantize_row_q8_k },
};

/* NULL when the type has no codec; HET_ERR_INVALID-worthy shapes are the
 * caller's to report. */
static const struct row_codec *codec_for(enum het_type type)
{
    if (!het_type_is_known((uint32_t)type) || !codecs[type].to_float) return NULL;
    return &codecs[type];
}

static enum het_status check_row(enum het_type type, const void *a, const void *b, int64_t n)
{
    if (!het_type_is_known((uint32_t)type)) return HET_ERR_INVALID;
    if (!codec_for(type)) return HET_ERR_UNSUPPORTED;
    if (n < 0 || n % het_type_get_traits(type)->blck_size != 0) return HET_ERR_INVALID;
    if (n > 0 && (!a || !b)) return HET_ERR_INVALID;
    return HET_OK;
}

enum het_status het_dequantize_row(enum het_type type, const void *src, float *dst, int64_t n)
{
    enum het_status st = check_row(type, src, dst, n);
    if (st != HET_OK) return st;
    if (n > 0) codecs[type].to_float(src, dst, n);
    return HET_OK;
}

enum het_status het_quantize_row(enum het_type type, const float *src, void *dst, int64_t n)
{
    enum het_status st = check_row(type, src, dst, n);
    if (st != HET_OK) return st;
    if (n > 0) codecs[type].from_float(src, dst, n);
    return HET_OK;
}
