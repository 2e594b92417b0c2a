/*
 * norm.c — CPU kernel for RMS_NORM.
 *
 * Per row of ne0 elements: y = x / sqrt(mean(x^2) + eps), eps being
 * op_params[0] (float). The sum of squares is accumulated in double and the
 * scale computed as 1/sqrtf(mean + eps) in float, as llama.cpp does, so
 * results match it closely. F32 in and out, any strides, dst may be src0.
 */
#include <math.h>

#include "devices/cpu/cpu_ops.h"
#include "devices/cpu/vec.h"

float het_cpu_rms_scale(enum het_cpu_isa isa, int64_t n, const char *x, size_t sx, float eps)
{
    double sum = 0;
    if (sx == sizeof(float)) {
        sum = het_vec_sumsq_f64(isa, n, (const float *)x);
    } else {
        for (int64_t i = 0; i < n; i++) {
            float v = *(const float *)(x + i * sx);
            sum += (double)(v * v);
        }
    }
    return 1.0f / sqrtf((float)(sum / (double)n) + eps);
}

enum het_status het_cpu_rms_norm(const struct het_compute_params *p, struct het_tensor *dst)
{
    const struct het_tensor *x = dst->src[0];
    if (!x) return HET_ERR_INVALID;
    if (x->type != HET_TYPE_F32 || dst->type != HET_TYPE_F32) return HET_ERR_UNSUPPORTED;
    if (!het_same_shape(x, dst)) return HET_ERR_INVALID;

    const float eps = het_get_op_param_f32(dst, 0);
    const int64_t ne0 = dst->ne[0];
    const bool dense = dst->nb[0] == sizeof(float) && x->nb[0] == sizeof(float);

    for (struct het_cpu_rows it = het_cpu_rows_begin(p, dst); het_cpu_rows_next(&it);) {
        const int64_t i1 = it.i1, i2 = it.i2, i3 = it.i3;
        char *ry = het_vec_row(dst, i1, i2, i3);
        const char *rx = het_vec_row(x, i1, i2, i3);
        float s = het_cpu_rms_scale(p->isa, ne0, rx, x->nb[0], eps);
        if (dense) {
            het_vec_scale_f32(ne0, (float *)ry, (const float *)rx, s);
            continue;
        }
        for (int64_t i = 0; i < ne0; i++)
            *(float *)(ry + i * dst->nb[0]) = *(const float *)(rx + i * x->nb[0]) * s;
    }
    return HET_OK;
}
