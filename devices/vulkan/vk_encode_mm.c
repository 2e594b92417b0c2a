/*
 * vk_encode_mm.c — MUL_MAT and GET_ROWS, the two ops whose weight operand may
 * be larger than one descriptor can address (maxStorageBufferRange is 128 MiB
 * on lavapipe and some GPUs; a 151936 x 1024 output matrix in Q6_K is about
 * 128 MB, in F16 about 311 MB).
 *
 * MUL_MAT binds src0 in windows of whole rows (n) and src1/dst in windows of
 * columns (m), and when the batch planes (dims 2, 3) together are too large,
 * one dispatch per plane; each window is an independent smaller product
 * whose bindings start at the window, so the kernels need no window offsets.
 * M <= 8 uses the GEMV kernel (decode), larger M the tiled GEMM kernel, or
 * GEMV over 8-column windows on a device too small for the GEMM tile. On
 * CPU-type devices the row-per-invocation kernels (mul_mat_rows.glsl) take
 * every product they can.
 * GET_ROWS binds the table in row windows; each window's dispatch copies the
 * ids that fall inside it.
 */
#include "devices/vulkan/vk_internal.h"

struct pc_mul_mat {
    uint32_t K, N, M, B2, B3, r2, r3;
    uint32_t a_nb[4], b_nb[4], d_nb[4];
    uint32_t a_off, b_off, d_off;
};

static size_t row_bytes(const struct het_tensor *t)
{
    const struct het_vk_type *ty = het_vk_type_get(t->type);
    return ty->blck == 1 ? (size_t)(t->ne[0] - 1) * t->nb[0] + ty->bytes : (size_t)(t->ne[0] / ty->blck) * ty->bytes;
}

/* Largest count c <= total with (c-1)*stride + base <= limit (at least 1). */
static int64_t window_count(int64_t total, size_t stride, size_t base, uint64_t limit)
{
    if (stride == 0 || (uint64_t)((size_t)(total - 1) * stride + base) <= limit) return total;
    if (base > limit) return 1; /* the caller's bind reports it */
    int64_t c = (int64_t)((limit - base) / stride) + 1;
    return c < 1 ? 1 : (c > total ? total : c);
}

static size_t batch_extent(const struct het_tensor *t)
{
    return (size_t)(t->ne[2] - 1) * t->nb[2] + (size_t)(t->ne[3] - 1) * t->nb[3];
}

/* Whether the row-per-invocation kernels (mul_mat_rows.glsl) take this
 * product: K a multiple of their 128-weight step; src1 F32 with unit stride
 * and columns at 16-byte aligned offsets in its binding; weights of a type
 * they decode, rows at even byte offsets (F32: 4-byte aligned), plain types
 * with unit element stride; both ranges viewable as texels. */
bool het_vk_rows_fit(const struct het_vk_ctx *ctx, const struct het_tensor *a, const struct het_tensor *b,
                     const struct het_vk_operand *oa, const struct het_vk_operand *ob)
{
    if (!ctx->use_rows || a->ne[0] % 128 || b->type != HET_TYPE_F32 || b->nb[0] != 4) return false;
    if (ob->off % 16 || b->nb[1] % 16 || b->nb[2] % 16 || b->nb[3] % 16) return false;
    if (!het_vk_texel_ok(ctx, oa) || !het_vk_texel_ok(ctx, ob)) return false;
    size_t align = 2;
    switch (a->type) {
    case HET_TYPE_F32:
        align = 4;
        if (a->nb[0] != 4) return false;
        break;
    case HET_TYPE_F16:
        if (a->nb[0] != 2) return false;
        break;
    case HET_TYPE_Q4_0:
    case HET_TYPE_Q8_0:
    case HET_TYPE_Q4_K:
    case HET_TYPE_Q6_K: break;
    default:            return false;
    }
    return oa->off % align == 0 && a->nb[1] % align == 0 && a->nb[2] % align == 0 && a->nb[3] % align == 0;
}

/* One independent sub-product: rows [n0, n0+nc) of src0, columns
 * [m0, m0+mc) of src1/dst, and either all batches (batch < 0) or the one
 * batch plane `batch` of dst (i12 + B2*i13). */
struct mm_window {
    int64_t n0, nc, m0, mc, batch;
};

static enum het_status mm_window_emit(struct het_vk_ctx *ctx, struct het_tensor *node, int idx,
                                      const struct mm_window *w, het_error *err)
{
    const struct het_tensor *a = node->src[0], *b = node->src[1], *d = node;
    const uint8_t *pa = het_vk_tensor_addr(a), *pb = het_vk_tensor_addr(b), *pd = het_vk_tensor_addr(d);
    if (!pa || !pb || !pd) return het_error_set(err, HET_ERR_INVALID, "vulkan: mul_mat '%s' has no storage", d->name);
    bool all = w->batch < 0;
    int64_t r2 = b->ne[2] / a->ne[2], r3 = b->ne[3] / a->ne[3];
    if (!all) { /* move the bases to the batch plane */
        int64_t i12 = w->batch % b->ne[2], i13 = w->batch / b->ne[2];
        pa += (size_t)(i12 / r2) * a->nb[2] + (size_t)(i13 / r3) * a->nb[3];
        pb += (size_t)i12 * b->nb[2] + (size_t)i13 * b->nb[3];
        pd += (size_t)i12 * d->nb[2] + (size_t)i13 * d->nb[3];
    }
    size_t span_a = all && w->nc == a->ne[1] ? het_vk_tensor_span(a) : (size_t)(w->nc - 1) * a->nb[1] + row_bytes(a);
    size_t span_b = (size_t)(w->mc - 1) * b->nb[1] + row_bytes(b) + (all ? batch_extent(b) : 0);
    size_t span_d = (size_t)(w->nc - 1) * d->nb[0] + (size_t)(w->mc - 1) * d->nb[1] + 4 + (all ? batch_extent(d) : 0);
    struct het_vk_operand oa, ob, od;
    enum het_status st = het_vk_bind_span(ctx, pa + (size_t)w->n0 * a->nb[1], span_a, false, false, &oa, err);
    if (st == HET_OK) st = het_vk_bind_span(ctx, pb + (size_t)w->m0 * b->nb[1], span_b, false, false, &ob, err);
    if (st == HET_OK) {
        bool gaps = !(all && w->nc == d->ne[0] && w->mc == d->ne[1] && het_vk_tensor_dense(d));
        st = het_vk_bind_span(ctx, pd + (size_t)w->n0 * d->nb[0] + (size_t)w->m0 * d->nb[1], span_d, true, gaps,
                              &od, err);
    }
    if (st != HET_OK) return st;
    struct pc_mul_mat pc = {
        .K = (uint32_t)a->ne[0], .N = (uint32_t)w->nc, .M = (uint32_t)w->mc,
        .B2 = all ? (uint32_t)b->ne[2] : 1, .B3 = all ? (uint32_t)b->ne[3] : 1,
        .r2 = all ? (uint32_t)r2 : 1, .r3 = all ? (uint32_t)r3 : 1,
        .a_off = oa.off, .b_off = ob.off, .d_off = od.off,
    };
    for (int i = 0; i < 4; i++) {
        pc.a_nb[i] = (uint32_t)a->nb[i];
        pc.b_nb[i] = (uint32_t)b->nb[i];
        pc.d_nb[i] = (uint32_t)d->nb[i];
    }
    const struct het_vk_operand *ops[HET_VK_N_BIND] = { &oa, &ob, NULL, &od };
    uint64_t batches = (uint64_t)pc.B2 * pc.B3;
    uint32_t groups[3];
    if (het_vk_rows_fit(ctx, a, b, &oa, &ob)) {
        enum het_vk_kernel k = w->mc == 1 ? HET_VK_K_MUL_MAT_ROWS1 : HET_VK_K_MUL_MAT_ROWSN;
        uint64_t tm = w->mc == 1 ? 1 : HET_VK_ROWSN_TM, r = w->mc == 1 ? HET_VK_ROWS1_R : HET_VK_ROWSN_R;
        uint64_t per = het_vk_kernel_wg(ctx, k) * r;
        uint64_t gx = ((uint64_t)w->nc + per - 1) / per, gy = ((uint64_t)w->mc + tm - 1) / tm;
        if (gx > ctx->max_groups[0] || gy > ctx->max_groups[1] || batches > ctx->max_groups[2])
            return het_error_set(err, HET_ERR_UNSUPPORTED, "vulkan: mul_mat '%s' exceeds the dispatch limits",
                                 d->name);
        groups[0] = (uint32_t)gx;
        groups[1] = (uint32_t)gy;
        groups[2] = (uint32_t)batches;
        VkBufferView tv[HET_VK_N_TEXEL];
        st = het_vk_texel_view(ctx, &oa, &tv[0], err);
        if (st == HET_OK) st = het_vk_texel_view(ctx, &ob, &tv[1], err);
        if (st != HET_OK) return st;
        return het_vk_emit_views(ctx, k, a->type, idx, ops, tv, &pc, sizeof pc, groups, err);
    }
    if (w->mc <= HET_VK_GEMV_MAX_COLS && (b->ne[1] <= HET_VK_GEMV_MAX_COLS || !ctx->gemm_ok)) {
        uint64_t row_groups = (uint64_t)(w->nc + HET_VK_GEMV_ROWS - 1) / HET_VK_GEMV_ROWS;
        st = het_vk_flat_groups(ctx, row_groups * batches, groups, err);
        if (st != HET_OK) return st;
        return het_vk_emit(ctx, HET_VK_K_MUL_MAT_VEC, a->type, idx, ops, &pc, sizeof pc, groups, err);
    }
    groups[0] = (uint32_t)((w->nc + HET_VK_GEMM_TILE - 1) / HET_VK_GEMM_TILE);
    groups[1] = (uint32_t)((w->mc + HET_VK_GEMM_TILE - 1) / HET_VK_GEMM_TILE);
    groups[2] = (uint32_t)batches;
    if (groups[1] > ctx->max_groups[1])
        return het_error_set(err, HET_ERR_UNSUPPORTED, "vulkan: mul_mat '%s': %lld columns exceed dispatch limits",
                             d->name, (long long)w->mc);
    return het_vk_emit(ctx, HET_VK_K_MUL_MAT, a->type, idx, ops, &pc, sizeof pc, groups, err);
}

/* Windows over n and m for one batch setting (batch < 0: all at once). */
static enum het_status mm_windows(struct het_vk_ctx *ctx, struct het_tensor *node, int idx, int64_t batch,
                                  het_error *err)
{
    const struct het_tensor *a = node->src[0], *b = node->src[1], *d = node;
    bool all = batch < 0;
    int64_t N = a->ne[1], M = b->ne[1];
    bool a_whole = all ? het_vk_tensor_span(a) <= ctx->max_span
                       : (size_t)(N - 1) * a->nb[1] + row_bytes(a) <= ctx->max_span;
    int64_t n_step = a_whole ? N : window_count(N, a->nb[1], row_bytes(a), ctx->max_span);
    int64_t n_step_d = window_count(N, d->nb[0], 4 + (all ? batch_extent(d) : 0), ctx->max_span);
    if (n_step_d < n_step) n_step = n_step_d;
    int64_t m_step_b = window_count(M, b->nb[1], row_bytes(b) + (all ? batch_extent(b) : 0), ctx->max_span);
    size_t dn = (size_t)(n_step - 1) * d->nb[0] + 4 + (all ? batch_extent(d) : 0);
    int64_t m_step_d = window_count(M, d->nb[1], dn, ctx->max_span);
    int64_t m_step = m_step_b < m_step_d ? m_step_b : m_step_d;
    if (!ctx->gemm_ok && m_step > HET_VK_GEMV_MAX_COLS) m_step = HET_VK_GEMV_MAX_COLS; /* GEMV windows */
    for (int64_t n0 = 0; n0 < N; n0 += n_step) {
        for (int64_t m0 = 0; m0 < M; m0 += m_step) {
            struct mm_window w = {
                .n0 = n0, .nc = N - n0 < n_step ? N - n0 : n_step,
                .m0 = m0, .mc = M - m0 < m_step ? M - m0 : m_step,
                .batch = batch,
            };
            enum het_status st = mm_window_emit(ctx, node, idx, &w, err);
            if (st != HET_OK) return st;
        }
    }
    return HET_OK;
}

enum het_status het_vk_encode_mul_mat(struct het_vk_ctx *ctx, struct het_tensor *node, int idx, het_error *err)
{
    const struct het_tensor *a = node->src[0], *b = node->src[1], *d = node;
    int64_t batches = b->ne[2] * b->ne[3];
    /* all batches in one dispatch when one row of src0 (with its planes) and
     * one column of src1 and of dst (with theirs) fit a descriptor */
    bool together = batches == 1 ||
        ((a->ne[2] * a->ne[3] == 1 || het_vk_tensor_span(a) <= ctx->max_span) &&
         row_bytes(b) + batch_extent(b) <= ctx->max_span && 4 + batch_extent(d) <= ctx->max_span);
    if (together) return mm_windows(ctx, node, idx, -1, err);
    for (int64_t z = 0; z < batches; z++) {
        enum het_status st = mm_windows(ctx, node, idx, z, err);
        if (st != HET_OK) return st;
    }
    return HET_OK;
}

struct pc_get_rows {
    uint32_t K;
    uint32_t a_nb[4];
    uint32_t a_ne2, a_ne3;
    uint32_t i_ne[3], i_nb[3];
    uint32_t d_nb[4];
    uint32_t a_off, i_off, d_off;
    uint32_t row_lo, row_cnt, n_rows;
};

enum het_status het_vk_encode_get_rows(struct het_vk_ctx *ctx, struct het_tensor *node, int idx, het_error *err)
{
    const struct het_tensor *a = node->src[0], *ids = node->src[1];
    const uint8_t *pa = het_vk_tensor_addr(a);
    if (!pa) return het_error_set(err, HET_ERR_INVALID, "vulkan: get_rows table '%s' has no storage", a->name);
    struct het_vk_operand oi, od, oa;
    enum het_status st = het_vk_bind_tensor(ctx, ids, false, &oi, err);
    if (st != HET_OK) return st;
    int64_t V = a->ne[1];
    size_t span = het_vk_tensor_span(a);
    int64_t step = span <= ctx->max_span ? V : window_count(V, a->nb[1], row_bytes(a), ctx->max_span);
    uint32_t groups[3];
    st = het_vk_flat_groups(ctx, (uint64_t)(ids->ne[0] * ids->ne[1] * ids->ne[2]), groups, err);
    for (int64_t r0 = 0; st == HET_OK && r0 < V; r0 += step) {
        int64_t cnt = V - r0 < step ? V - r0 : step;
        size_t wspan = cnt == V ? span : (size_t)(cnt - 1) * a->nb[1] + row_bytes(a);
        st = het_vk_bind_span(ctx, pa + (size_t)r0 * a->nb[1], wspan, false, false, &oa, err);
        if (st == HET_OK) st = het_vk_bind_tensor(ctx, node, true, &od, err);
        if (st != HET_OK) break;
        struct pc_get_rows pc = {
            .K = (uint32_t)a->ne[0], .a_ne2 = (uint32_t)a->ne[2], .a_ne3 = (uint32_t)a->ne[3],
            .a_off = oa.off, .i_off = oi.off, .d_off = od.off,
            .row_lo = (uint32_t)r0, .row_cnt = (uint32_t)cnt, .n_rows = (uint32_t)V,
        };
        for (int i = 0; i < 4; i++) {
            pc.a_nb[i] = (uint32_t)a->nb[i];
            pc.d_nb[i] = (uint32_t)node->nb[i];
        }
        for (int i = 0; i < 3; i++) {
            pc.i_ne[i] = (uint32_t)ids->ne[i];
            pc.i_nb[i] = (uint32_t)ids->nb[i];
        }
        const struct het_vk_operand *ops[HET_VK_N_BIND] = { &oa, &oi, NULL, &od };
        st = het_vk_emit(ctx, HET_VK_K_GET_ROWS, a->type, idx, ops, &pc, sizeof pc, groups, err);
    }
    return st;
}
