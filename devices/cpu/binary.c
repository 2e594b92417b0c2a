/*
 * binary.c — CPU kernels for element-wise ADD, MUL and DIV.
 *
 * dst = src0 (op) src1, all F32, with src1 broadcast over src0: every dim of
 * src1 divides src0's (normally 1 or equal) and is indexed modulo its size.
 * dst may share storage with src0 (in place): each element is read before it
 * is written at the same position, so that is safe. Threads split dst rows.
 */
#include "devices/cpu/cpu_ops.h"
#include "devices/cpu/vec.h"

enum binary_op { BINARY_ADD, BINARY_MUL, BINARY_DIV };

static inline float binary_apply(enum binary_op op, float a, float b)
{
    return op == BINARY_ADD ? a + b : op == BINARY_MUL ? a * b : a / b;
}

/* One dst row when every run is contiguous (nb0 == 4 everywhere). */
static void binary_row_dense(enum binary_op op, int64_t n, float *y, const float *a, const float *b, int64_t nb)
{
    if (nb == 1) {
        float s = b[0];
        for (int64_t i = 0; i < n; i++) y[i] = binary_apply(op, a[i], s);
        return;
    }
    if (op == BINARY_DIV) {
        for (int64_t i = 0; i < n; i++) y[i] = a[i] / b[i % nb];
        return;
    }
    for (int64_t i = 0; i < n; i += nb) {
        if (op == BINARY_ADD) het_vec_add_f32(nb, y + i, a + i, b);
        else                  het_vec_mul_f32(nb, y + i, a + i, b);
    }
}

/* One dst row with arbitrary element strides (bytes). */
static void binary_row_strided(enum binary_op op, int64_t n, char *y, size_t sy, const char *a, size_t sa,
                               const char *b, size_t sb, int64_t nb)
{
    for (int64_t i = 0; i < n; i++) {
        float va = *(const float *)(a + i * sa);
        float vb = *(const float *)(b + (i % nb) * sb);
        *(float *)(y + i * sy) = binary_apply(op, va, vb);
    }
}

static enum het_status binary_check(const struct het_tensor *dst)
{
    const struct het_tensor *a = dst->src[0], *b = dst->src[1];
    if (!a || !b) return HET_ERR_INVALID;
    if (a->type != HET_TYPE_F32 || b->type != HET_TYPE_F32 || dst->type != HET_TYPE_F32)
        return HET_ERR_UNSUPPORTED;
    for (int d = 0; d < HET_MAX_DIMS; d++) {
        if (dst->ne[d] != a->ne[d] || b->ne[d] <= 0 || a->ne[d] % b->ne[d] != 0) return HET_ERR_INVALID;
    }
    return HET_OK;
}

static enum het_status binary_compute(enum binary_op op, const struct het_compute_params *p, struct het_tensor *dst)
{
    enum het_status st = binary_check(dst);
    if (st != HET_OK) return st;
    const struct het_tensor *a = dst->src[0], *b = dst->src[1];
    const int64_t ne0 = dst->ne[0];
    const bool dense = dst->nb[0] == sizeof(float) && a->nb[0] == sizeof(float) && b->nb[0] == sizeof(float);

    for (struct het_cpu_rows it = het_cpu_rows_begin(p, dst); het_cpu_rows_next(&it);) {
        char *y = het_vec_row(dst, it.i1, it.i2, it.i3);
        const char *ra = het_vec_row(a, it.i1, it.i2, it.i3);
        const char *rb = het_vec_row(b, it.i1 % b->ne[1], it.i2 % b->ne[2], it.i3 % b->ne[3]);
        if (dense) binary_row_dense(op, ne0, (float *)y, (const float *)ra, (const float *)rb, b->ne[0]);
        else       binary_row_strided(op, ne0, y, dst->nb[0], ra, a->nb[0], rb, b->nb[0], b->ne[0]);
    }
    return HET_OK;
}

enum het_status het_cpu_add(const struct het_compute_params *p, struct het_tensor *dst)
{
    return binary_compute(BINARY_ADD, p, dst);
}

enum het_status het_cpu_mul(const struct het_compute_params *p, struct het_tensor *dst)
{
    return binary_compute(BINARY_MUL, p, dst);
}

enum het_status het_cpu_div(const struct het_compute_params *p, struct het_tensor *dst)
{
    return binary_compute(BINARY_DIV, p, dst);
}
