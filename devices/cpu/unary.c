/*
 * unary.c — CPU kernels for SCALE, SILU, SWIGLU and SIGMOID (element-wise, F32).
 *
 * SCALE: dst = src0 * s (op_params[0] = float s).
 * SILU: dst = src0 * sigmoid(src0). SIGMOID: dst = 1 / (1 + exp(-src0)).
 * SWIGLU: dst = silu(src0) * src1, src0 the gate and src1 the up
 * projection, same shape. dst may share storage with an input (in place).
 * A matmul that alone reads a SWIGLU computes its rows itself as it
 * prepares its activations (het_cpu_swiglu_row, matmul.c), so they are
 * never stored; the node uses the same row function, so both give the same
 * bits. Rows whose elements are all contiguous use the vec.h helpers; any other
 * layout goes element by element through the byte strides. Threads split
 * dst rows.
 */
#include "devices/cpu/cpu_ops.h"
#include "devices/cpu/vec.h"

enum unary_op { UNARY_SCALE, UNARY_SILU, UNARY_SWIGLU, UNARY_SIGMOID };

static float unary_apply(enum unary_op op, float x, float u, float s)
{
    switch (op) {
    case UNARY_SCALE: return x * s;
    case UNARY_SILU:  return het_silu_f32(x);
    case UNARY_SIGMOID: return 1.0f / (1.0f + expf(-x));
    default:          return het_silu_f32(x) * u;
    }
}

static void unary_row_dense(enum unary_op op, enum het_cpu_isa isa, int64_t n, float *y, const float *x,
                            const float *u, float s)
{
    switch (op) {
    case UNARY_SCALE: het_vec_scale_f32(n, y, x, s); break;
    case UNARY_SILU:  het_vec_silu_f32(isa, n, y, x); break;
    case UNARY_SIGMOID: for (int64_t i = 0; i < n; i++) y[i] = 1.0f / (1.0f + expf(-x[i])); break;
    default:          het_vec_swiglu_f32(isa, n, y, x, u); break;
    }
}

void het_cpu_swiglu_row(enum het_cpu_isa isa, const struct het_tensor *sw, int64_t i1, int64_t i2, int64_t i3,
                        float *y, size_t sy)
{
    const struct het_tensor *x = sw->src[0], *u = sw->src[1];
    const char *rx = het_vec_row(x, i1, i2, i3), *ru = het_vec_row(u, i1, i2, i3);
    const int64_t ne0 = sw->ne[0];
    if (sw->nb[0] == sizeof(float) && sy == sizeof(float) && x->nb[0] == sizeof(float) && u->nb[0] == sizeof(float)) {
        het_vec_swiglu_f32(isa, ne0, y, (const float *)rx, (const float *)ru);
        return;
    }
    for (int64_t i = 0; i < ne0; i++) {
        const float vx = *(const float *)(rx + i * x->nb[0]), vu = *(const float *)(ru + i * u->nb[0]);
        *(float *)((char *)y + i * sy) = unary_apply(UNARY_SWIGLU, vx, vu, 0.0f);
    }
}

static enum het_status unary_compute(enum unary_op op, const struct het_compute_params *p, struct het_tensor *dst)
{
    const struct het_tensor *x = dst->src[0];
    const struct het_tensor *u = op == UNARY_SWIGLU ? dst->src[1] : NULL;
    if (!x || (op == UNARY_SWIGLU && !u)) return HET_ERR_INVALID;
    if (x->type != HET_TYPE_F32 || dst->type != HET_TYPE_F32 || (u && u->type != HET_TYPE_F32))
        return HET_ERR_UNSUPPORTED;
    if (!het_same_shape(x, dst) || (u && !het_same_shape(u, dst))) return HET_ERR_INVALID;

    const float s = op == UNARY_SCALE ? het_get_op_param_f32(dst, 0) : 0.0f;
    const int64_t ne0 = dst->ne[0];
    const bool dense = dst->nb[0] == sizeof(float) && x->nb[0] == sizeof(float) &&
                       (!u || u->nb[0] == sizeof(float));

    for (struct het_cpu_rows it = het_cpu_rows_begin(p, dst); het_cpu_rows_next(&it);) {
        const int64_t i1 = it.i1, i2 = it.i2, i3 = it.i3;
        char *ry = het_vec_row(dst, i1, i2, i3);
        if (op == UNARY_SWIGLU) { /* the row as a matmul that reads it makes it (het_cpu_swiglu_row) */
            het_cpu_swiglu_row(p->isa, dst, i1, i2, i3, (float *)ry, dst->nb[0]);
            continue;
        }
        const char *rx = het_vec_row(x, i1, i2, i3);
        const char *ru = u ? het_vec_row(u, i1, i2, i3) : NULL;
        if (dense) {
            unary_row_dense(op, p->isa, ne0, (float *)ry, (const float *)rx, (const float *)ru, s);
            continue;
        }
        for (int64_t i = 0; i < ne0; i++) {
            float vx = *(const float *)(rx + i * x->nb[0]);
            float vu = ru ? *(const float *)(ru + i * u->nb[0]) : 0.0f;
            *(float *)(ry + i * dst->nb[0]) = unary_apply(op, vx, vu, s);
        }
    }
    return HET_OK;
}

enum het_status het_cpu_scale(const struct het_compute_params *p, struct het_tensor *dst)
{
    return unary_compute(UNARY_SCALE, p, dst);
}

enum het_status het_cpu_silu(const struct het_compute_params *p, struct het_tensor *dst)
{
    return unary_compute(UNARY_SILU, p, dst);
}

enum het_status het_cpu_swiglu(const struct het_compute_params *p, struct het_tensor *dst)
{
    return unary_compute(UNARY_SWIGLU, p, dst);
}

enum het_status het_cpu_sigmoid(const struct het_compute_params *p, struct het_tensor *dst)
{
    return unary_compute(UNARY_SIGMOID, p, dst);
}
