/*
 * npu_kernel.h — the NPU GEMM/GEMV contract as executable C (internal).
 *
 * Activations enter as int8 with one f32 scale per row (d = amax/127,
 * q = round-half-even(x * 127/amax), |q| <= 127) or as bf16; weights in the
 * tile layout of npu_layout.h; the output is f32:
 *   int8:  out[m][n] = d_m * sum_g ( s_g * I_g - b_g * X_g ),
 *          I_g = sum_{k in g} (w_k - zp) * q_k  (exact int32),
 *          X_g = sum_{k in g} q_k               (exact int32);
 *   bf16:  out[m][n] = sum_g ( s_g * F_g - b_g * Y_g ), F_g and Y_g the same
 *          sums over bf16 values in f32 (k ascending);
 * with s_g = scale hi + lo and b_g = bias hi + lo of row n, group g, and the
 * f32 sum over g taken in ascending order. The hardware kernels compute the
 * same integer sums; only the order of the f32 accumulation may differ.
 * M is padded with zero rows to the kernel's M tile before the call; the
 * emulator computes those rows too, exactly as the NPU would.
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
    float    *scale;   /* [Mpad]              int8: d per row            */
    int8_t   *q;       /* [Mpad][K]           int8 values                */
    int32_t  *gsum;    /* [Mpad][n_groups]    int8: sum of q per group    */
    uint16_t *bf;      /* [Mpad][K]           bf16 values                 */
    float    *gsumf;   /* [Mpad][n_groups]    bf16: sum per group (f32)   */
};

/* Bytes of the buffer het_npu_act_bind needs. */
size_t het_npu_act_bytes(enum het_npu_act fmt, int64_t Mpad, int64_t K);
/* Lay the arrays out in buf (64-byte aligned, het_npu_act_bytes long). */
void   het_npu_act_bind(struct het_npu_actbuf *a, void *buf, enum het_npu_act fmt, int64_t M, int64_t Mpad,
                        int64_t K);
/* Quantise row m (< Mpad) from K contiguous floats; rows >= M must get x = NULL (zeros). */
void   het_npu_act_set_row(struct het_npu_actbuf *a, int64_t m, const float *x);

/* Scale and rounding of one row: d = amax/127 and the int8 values, as the
 * contract defines them (exposed for tests and the hardware path). */
float  het_npu_quantize_row_i8(const float *x, int64_t K, int8_t *q);

/*
 * Run tiles [t0, t1) of plane data against the activations: writes
 * out[m * ldo + n] for m < a->Mpad and n in [t0*32, t1*32) (padding columns
 * beyond N included). ldo >= Npad floats.
 */
void het_npu_kernel_run(const struct het_npu_wdesc *d, const void *plane, const struct het_npu_actbuf *a,
                        float *out, size_t ldo, int64_t t0, int64_t t1);

#endif /* HET_NPU_KERNEL_H */
