/*
 * get_rows.c — CPU kernel for GET_ROWS (embedding lookup).
 *
 * src0 (K, V, B2, B3) of any type het can dequantise, src1 I32 ids
 * (M, B2, B3) -> dst F32 (K, M, B2, B3):
 *     dst[:, m, b2, b3] = src0[:, ids[m, b2, b3], b2 % B2, b3 % B3]
 * (src0 is broadcast over dims 2 and 3 when it has fewer batches).
 * Rows are dequantised with het_dequantize_row in chunks of GET_ROWS_CHUNK
 * elements (a multiple of every block size), then stored through dst's
 * strides. A quantised row must be one contiguous run of blocks (it is, by
 * construction); F32/F16/BF16 rows may have any element stride. An id out
 * of range fails with HET_ERR_INVALID (and leaves that row unwritten).
 * Threads split the dst rows.
 */
#include "devices/cpu/cpu_ops.h"
#include "devices/cpu/vec.h"

#define GET_ROWS_CHUNK 256 /* = QK_K, a multiple of every block size */

static bool get_rows_plain(enum het_type t)
{
    return t == HET_TYPE_F32 || t == HET_TYPE_F16 || t == HET_TYPE_BF16;
}

/* Copy one source row of a plain type with any element stride. */
static void get_rows_plain_row(enum het_cpu_isa isa, int64_t n, char *y, size_t sy, const char *x, size_t sx,
                               enum het_type t)
{
    if (sy == sizeof(float) && t == HET_TYPE_F32 && sx == sizeof(float)) {
        memcpy(y, x, (size_t)n * sizeof(float));
        return;
    }
    if (sy == sizeof(float) && t == HET_TYPE_F16 && sx == sizeof(uint16_t)) {
        het_vec_f16_to_f32(isa, n, (float *)y, (const uint16_t *)x);
        return;
    }
    for (int64_t i = 0; i < n; i++) *(float *)(y + i * sy) = het_vec_load_elem(t, x + i * sx);
}

/* Dequantise one contiguous source row into a dst row of stride sy. */
static enum het_status get_rows_quant_row(int64_t n, char *y, size_t sy, const char *x, enum het_type t)
{
    const struct het_type_traits *tr = het_type_get_traits(t);
    float buf[GET_ROWS_CHUNK];
    for (int64_t i = 0; i < n; i += GET_ROWS_CHUNK) {
        int64_t k = n - i < GET_ROWS_CHUNK ? n - i : GET_ROWS_CHUNK;
        const char *blk = x + (size_t)(i / tr->blck_size) * tr->type_size;
        float *out = sy == sizeof(float) ? (float *)(y + i * sy) : buf;
        enum het_status st = het_dequantize_row(t, blk, out, k);
        if (st != HET_OK) return st;
        if (out == buf)
            for (int64_t j = 0; j < k; j++) *(float *)(y + (i + j) * sy) = buf[j];
    }
    return HET_OK;
}

static enum het_status get_rows_check(const struct het_tensor *dst)
{
    const struct het_tensor *a = dst->src[0], *ids = dst->src[1];
    if (!a || !ids) return HET_ERR_INVALID;
    if (dst->type != HET_TYPE_F32 || ids->type != HET_TYPE_I32) return HET_ERR_UNSUPPORTED;
    const struct het_type_traits *tr = het_type_get_traits(a->type);
    if (!tr || (!get_rows_plain(a->type) && (!tr->is_quantized || !tr->can_compute))) return HET_ERR_UNSUPPORTED;
    if (a->ne[0] % tr->blck_size != 0) return HET_ERR_INVALID;
    if (dst->ne[0] != a->ne[0] || dst->ne[1] != ids->ne[0] || dst->ne[2] != ids->ne[1] || dst->ne[3] != ids->ne[2])
        return HET_ERR_INVALID;
    if (a->ne[2] <= 0 || a->ne[3] <= 0 || dst->ne[2] % a->ne[2] != 0 || dst->ne[3] % a->ne[3] != 0)
        return HET_ERR_INVALID;
    return HET_OK;
}

enum het_status het_cpu_get_rows(const struct het_compute_params *p, struct het_tensor *dst)
{
    enum het_status st = get_rows_check(dst);
    if (st != HET_OK) return st;
    const struct het_tensor *a = dst->src[0], *ids = dst->src[1];
    const bool plain = get_rows_plain(a->type);

    for (struct het_cpu_rows it = het_cpu_rows_begin(p, dst); het_cpu_rows_next(&it);) {
        const int64_t i1 = it.i1, i2 = it.i2, i3 = it.i3;
        int32_t id = *(const int32_t *)((const char *)ids->data + i1 * ids->nb[0] + i2 * ids->nb[1] +
                                        i3 * ids->nb[2]);
        if (id < 0 || id >= a->ne[1]) { st = HET_ERR_INVALID; continue; }
        char *y = het_vec_row(dst, i1, i2, i3);
        const char *x = het_vec_row(a, id, i2 % a->ne[2], i3 % a->ne[3]);
        if (plain) get_rows_plain_row(p->isa, dst->ne[0], y, dst->nb[0], x, a->nb[0], a->type);
        else {
            enum het_status s = get_rows_quant_row(dst->ne[0], y, dst->nb[0], x, a->type);
            if (s != HET_OK) st = s;
        }
    }
    return st;
}
