/*
 * npu_kernel.h — the NPU GEMM/GEMV contract as executable C (internal).
 *
 * Activations enter as int8 with one dynamic f32 scale per activation group
 * of A elements along K (A = act_group: 32, or K for one scale per row):
 * for group a, d_a = amax_a/127, q = round-half-even(x * 127/amax_a),
 * |q| <= 127; or as bf16. Weights in the tile layout of npu_layout.h
 * (weight groups g of 32); the output is f32:
 *   int8:  out[m][n] = sum_a d_a * S_a,   a = 0 .. K/A - 1 ascending,
 *          S_a = sum_{g in a} ( s_g * I_g - b_g * X_g ),  g ascending,
 *          I_g = sum_{k in g} (w_k - zp) * q_k  (exact int32),
 *          X_g = sum_{k in g} q_k               (exact int32);
 *          (A = 32: out = sum_g d_g (s_g I_g - b_g X_g); A = K: d * sum_g ...)
 *   bf16:  out[m][n] = sum_g ( s_g * F_g - b_g * Y_g ), F_g and Y_g the same
 *          sums over bf16 values in f32 (k ascending);
 * with s_g = scale hi + lo and b_g = bias hi + lo of row n, group g; every
 * sum in f32 (S_a from +0, the sum over a from its first term). The hardware
 * kernels compute the same integer sums; only the order of the f32
 * accumulation may differ. M is padded with zero rows to the kernel's M
 * tile before the call; the emulator computes those rows too, exactly as
 * the NPU would.
 */
#ifndef HET_NPU_KERNEL_H
#define HET_NPU_KERNEL_H

#include <stddef.h>
#include <stdint.h>

#include "devices/npu/npu_layout.h"
#include "het/npu.h"

#define HET_NPU_MAX_MCHUNK 128   /* rows one kernel call takes (largest M tile) */

/* One chunk of quantised activations (Mpad rows of K), carved from one buffer. */
struct het_npu_actbuf {
    enum het_npu_act fmt;
    int64_t   M, Mpad, K, n_groups;
    int64_t   group;     /* int8: K elements per scale (32 or K); bf16: 0 */
    int64_t   n_scales;  /* int8: K / group; bf16: 0                      */
    float    *scale;   /* [Mpad][n_scales]    int8: d per activation group */
    int8_t   *q;       /* [Mpad][K]           int8 values                */
    int32_t  *gsum;    /* [Mpad][n_groups]    int8: sum of q per group    */
    uint16_t *bf;      /* [Mpad][K]           bf16 values                 */
    float    *gsumf;   /* [Mpad][n_groups]    bf16: sum per group (f32)   */
};

/* Bytes of the buffer het_npu_act_bind needs (group: int8 activation group,
 * 32 or K, a multiple of 32 dividing K; ignored for bf16). */
size_t het_npu_act_bytes(enum het_npu_act fmt, int64_t Mpad, int64_t K, int64_t group);
/* Lay the arrays out in buf (64-byte aligned, het_npu_act_bytes long). */
void   het_npu_act_bind(struct het_npu_actbuf *a, void *buf, enum het_npu_act fmt, int64_t M, int64_t Mpad,
                        int64_t K, int64_t group);
/* Quantise row m (< Mpad) from K contiguous floats; rows >= M must get x = NULL (zeros). */
void   het_npu_act_set_row(struct het_npu_actbuf *a, int64_t m, const float *x);

/* Scale and rounding of one activation group of n elements: returns d =
 * amax/127 and writes the int8 values, as the contract defines them (NaN
 * and q = 0 when the group holds inf or NaN). */
float  het_npu_quantize_group_i8(const float *x, int64_t n, int8_t *q);
/* A row of K elements in groups of `group`: K/group scales into d. */
void   het_npu_quantize_row_i8(const float *x, int64_t K, int64_t group, int8_t *q, float *d);

/*
 * Run tiles [t0, t1) of plane data against the activations: writes
 * out[m * ldo + n] for m < a->Mpad and n in [t0*32, t1*32) (padding columns
 * beyond N included). ldo >= Npad floats.
 */
void het_npu_kernel_run(const struct het_npu_wdesc *d, const void *plane, const struct het_npu_actbuf *a,
                        float *out, size_t ldo, int64_t t0, int64_t t1);

#endif /* HET_NPU_KERNEL_H */
