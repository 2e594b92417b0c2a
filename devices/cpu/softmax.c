/*
 * softmax.c — CPU kernel for SOFTMAX over rows of ne0.
 *
 * src0 (n_kv, n_q, ne2, ne3) F32; optional src1 mask F32 (>= n_kv, rows)
 * added to row i1 as mask row i1 % rows, broadcast over dims 2 and 3.
 * op_params: [0] float scale, [1] causal_past (-1 = no causal mask): in row
 * i1 the elements j > i1 + causal_past are masked out.
 *     y = softmax(x * scale + mask)
 * A row with every element masked (all -inf) comes out as zeros, not NaN.
 * dst may be src0. Threads split rows.
 */
#include <math.h>

#include "devices/cpu/cpu_ops.h"
#include "devices/cpu/vec.h"

struct softmax_args {
    const struct het_tensor *x, *mask;
    struct het_tensor       *y;
    float                    scale;
    int32_t                  causal_past;
    enum het_cpu_isa         isa;
};

/* Elements of row i1 not cut by the causal mask. */
static int64_t softmax_limit(const struct softmax_args *a, int64_t i1)
{
    int64_t n = a->y->ne[0];
    if (a->causal_past < 0) return n;
    int64_t lim = i1 + a->causal_past + 1;
    return lim < n ? lim : n;
}

static float softmax_in(const struct softmax_args *a, const char *rx, const char *rm, int64_t j)
{
    float v = *(const float *)(rx + j * a->x->nb[0]) * a->scale;
    return rm ? v + *(const float *)(rm + j * a->mask->nb[0]) : v;
}

/* Row with nb0 == 4 for x, y and mask: build the logits in y, then exp in place. */
static void softmax_row_dense(const struct softmax_args *a, float *y, const float *x, const float *m, int64_t lim)
{
    const int64_t n = a->y->ne[0];
    for (int64_t j = 0; j < lim; j++) y[j] = x[j] * a->scale + (m ? m[j] : 0.0f);
    float mx = het_vec_max_f32(a->isa, lim, y);
    if (mx == -INFINITY) lim = 0;
    if (lim > 0) {
        float sum = het_vec_exp_sum_f32(a->isa, lim, y, y, mx);
        het_vec_scale_f32(lim, y, y, 1.0f / sum);
    }
    for (int64_t j = lim; j < n; j++) y[j] = 0.0f;
}

/* Any strides: three passes (max, exp and sum, normalise). */
static void softmax_row_strided(const struct softmax_args *a, char *ry, const char *rx, const char *rm, int64_t lim)
{
    const int64_t n = a->y->ne[0];
    const size_t sy = a->y->nb[0];
    float mx = -INFINITY;
    for (int64_t j = 0; j < lim; j++) {
        float v = softmax_in(a, rx, rm, j);
        mx = v > mx ? v : mx;
    }
    if (mx == -INFINITY) lim = 0;
    double sum = 0;
    for (int64_t j = 0; j < lim; j++) {
        float e = expf(softmax_in(a, rx, rm, j) - mx);
        *(float *)(ry + j * sy) = e;
        sum += e;
    }
    float inv = lim > 0 ? (float)(1.0 / sum) : 0.0f;
    for (int64_t j = 0; j < n; j++) {
        float *py = (float *)(ry + j * sy);
        *py = j < lim ? *py * inv : 0.0f;
    }
}

static enum het_status softmax_check(const struct het_tensor *dst)
{
    const struct het_tensor *x = dst->src[0], *m = dst->src[1];
    if (!x) return HET_ERR_INVALID;
    if (x->type != HET_TYPE_F32 || dst->type != HET_TYPE_F32 || (m && m->type != HET_TYPE_F32))
        return HET_ERR_UNSUPPORTED;
    if (!het_same_shape(x, dst)) return HET_ERR_INVALID;
    if (m && (m->ne[0] < x->ne[0] || m->ne[1] < 1)) return HET_ERR_INVALID;
    return HET_OK;
}

enum het_status het_cpu_softmax(const struct het_compute_params *p, struct het_tensor *dst)
{
    enum het_status st = softmax_check(dst);
    if (st != HET_OK) return st;
    struct softmax_args a = {
        .x = dst->src[0], .mask = dst->src[1], .y = dst,
        .scale = het_get_op_param_f32(dst, 0), .causal_past = dst->op_params[1], .isa = p->isa,
    };
    const bool dense = dst->nb[0] == sizeof(float) && a.x->nb[0] == sizeof(float) &&
                       (!a.mask || a.mask->nb[0] == sizeof(float));

    for (struct het_cpu_rows it = het_cpu_rows_begin(p, dst); het_cpu_rows_next(&it);) {
        const int64_t i1 = it.i1, i2 = it.i2, i3 = it.i3;
        char *ry = het_vec_row(dst, i1, i2, i3);
        const char *rx = het_vec_row(a.x, i1, i2, i3);
        const char *rm = a.mask ? (const char *)a.mask->data + (i1 % a.mask->ne[1]) * a.mask->nb[1] : NULL;
        int64_t lim = softmax_limit(&a, i1);
        if (lim < 0) lim = 0;
        if (dense) softmax_row_dense(&a, (float *)ry, (const float *)rx, (const float *)rm, lim);
        else       softmax_row_strided(&a, ry, rx, rm, lim);
    }
    return HET_OK;
}
