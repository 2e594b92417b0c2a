/*
 * vk_encode_moe.c — MUL_MAT_ID, the mixture-of-experts matmul (contract in
 * het/graph.h), and the routing ops around it (TOP_K, SUM_ROWS, MOE_SUM:
 * top_k.comp, sum_rows.glsl, moe_sum.comp), so a whole MoE layer, router to
 * weighted sum, stays in one Vulkan split.
 *
 * MUL_MAT_ID has two paths. Both read the ids on the device (through their
 * byte strides), so the ids may be produced by an earlier node of the same
 * split and nothing is read back to the host to route tokens.
 *  - GEMV (decode, few token-slot pairs): each (slot, token) is one GEMV of
 *    the expert its id names over one input column (mul_mat_vec.glsl built
 *    with MUL_MAT_ID). An expert's weights are read once per pair.
 *  - grouped GEMM (prefill): moe_group.comp, one workgroup, counts the pairs
 *    per expert and writes them grouped by expert, with the list of 64-pair
 *    column tiles, into the device scratch buffer; after a barrier,
 *    mul_mat_id.comp runs mul_mat.comp's tiled GEMM over every (row tile,
 *    column tile). The host does not know the counts, so the dispatch covers
 *    the most tiles k*T pairs can form (k*T/64 + the groups that can be
 *    non-empty) and the surplus workgroups exit on reading the count. An
 *    expert's weights are then read once per 64 pairs routed to it.
 * The host cannot group: the ids are usually written by TOP_K in the same
 * command buffer, and reading them back would split the submission.
 */
#include "devices/vulkan/vk_internal.h"

struct pc_mul_mat_id { /* mul_mat_id_pc.glsl */
    uint32_t K, N, M, B2, B3, E, n_b;
    uint32_t a_nb[4], b_nb[4], d_nb[4];
    uint32_t a_off, b_off, d_off;
    uint32_t i_off, i_nb0, i_nb1;
};

struct pc_mul_mat_id_grouped { /* mul_mat_id_grouped_pc.glsl */
    uint32_t K, N, E, k, T, n_b;
    uint32_t a_nb0, a_nb1, a_nb2;
    uint32_t b_nb0, b_nb1, b_nb2;
    uint32_t d_nb0, d_nb1, d_nb2;
    uint32_t a_off, b_off, d_off;
    uint32_t i_off, i_nb0, i_nb1;
    uint32_t pairs_at, tile;
};

/* Column tiles k*T pairs can form at most, `tile` pairs a tile: sum over
 * the non-empty groups of ceil(count / tile) <= k*T / tile + groups, groups
 * <= min(E + 1, k*T) (the extra one holds out-of-range ids). */
static uint64_t grouped_max_tiles(int64_t pairs, int64_t E, uint32_t tile)
{
    int64_t groups = E + 1 < pairs ? E + 1 : pairs;
    return (uint64_t)pairs / tile + (uint64_t)groups;
}

/* Bytes of scratch the grouping writes (layout in mul_mat_id_grouped_pc.glsl). */
static uint64_t grouped_scratch(int64_t pairs, int64_t E, uint32_t tile)
{
    return (HET_VK_MOE_TILES_AT + 3 * grouped_max_tiles(pairs, E, tile) + (uint64_t)pairs) * 4;
}

/* Row tiles of the grouped GEMM kernel: 64 rows (mul_mat_id.comp) or
 * WG * 16 (mul_mat_id_rows.comp). */
static uint64_t grouped_row_tiles(const struct het_vk_ctx *ctx, int64_t N, bool rows)
{
    uint64_t per = rows ? (uint64_t)het_vk_kernel_wg(ctx, HET_VK_K_MUL_MAT_ID_ROWS) * HET_VK_ROWSN_R
                        : HET_VK_GEMM_TILE;
    return ((uint64_t)N + per - 1) / per;
}

/* On GPUs the 64-pair tile pays off once experts see several pairs each:
 * decode and tiny batches keep the GEMV. On CPU-type devices the row kernel
 * takes every pair count: there the GEMV is the slow kernel (storage-buffer
 * loads per lane) and one tile of a single pair already beats it. The
 * grouped path needs a GEMM kernel (the row kernel, or the 64x64 tile where
 * gemm_ok), experts the grouping pass can count, a grid within the dispatch
 * limits and scratch within one descriptor. */
static bool grouped_fits(const struct het_vk_ctx *ctx, const struct het_tensor *a, int64_t pairs, bool rows)
{
    uint32_t tile = rows ? HET_VK_MOE_ROWS_TILE : HET_VK_GEMM_TILE;
    if (rows ? false : !ctx->gemm_ok || pairs <= HET_VK_MOE_GEMV_MAX_PAIRS) return false;
    if (a->ne[2] > HET_VK_MOE_MAX_E) return false;
    return grouped_row_tiles(ctx, a->ne[1], rows) <= ctx->max_groups[0] &&
           grouped_max_tiles(pairs, a->ne[2], tile) <= ctx->max_groups[1] &&
           grouped_scratch(pairs, a->ne[2], tile) <= ctx->max_bind;
}

/* The grouping pass, then (after a barrier) the GEMM over its tiles; rows:
 * the row kernel of CPU-type devices (texel views of weights and input). */
static enum het_status encode_grouped(struct het_vk_ctx *ctx, struct het_tensor *node, int idx,
                                      const struct het_vk_operand *oa, const struct het_vk_operand *ob,
                                      const struct het_vk_operand *oi, const struct het_vk_operand *od, bool rows,
                                      het_error *err)
{
    const struct het_tensor *a = node->src[0], *b = node->src[1], *ids = node->src[2];
    const int64_t k = ids->ne[0], T = ids->ne[1], E = a->ne[2];
    const uint32_t tile = rows ? HET_VK_MOE_ROWS_TILE : HET_VK_GEMM_TILE;
    uint64_t max_tiles = grouped_max_tiles(k * T, E, tile);
    size_t need = (size_t)grouped_scratch(k * T, E, tile);
    struct het_vk_split *s = &ctx->split;
    if (need > s->scratch_need) s->scratch_need = need;
    struct het_vk_operand osc = { .bind = { VK_NULL_HANDLE, 0, need }, .off = 0 }; /* the split's scratch */
    struct pc_mul_mat_id_grouped pc = {
        .K = (uint32_t)a->ne[0], .N = (uint32_t)a->ne[1], .E = (uint32_t)E, .k = (uint32_t)k, .T = (uint32_t)T,
        .n_b = (uint32_t)b->ne[1],
        .a_nb0 = (uint32_t)a->nb[0], .a_nb1 = (uint32_t)a->nb[1], .a_nb2 = (uint32_t)a->nb[2],
        .b_nb0 = (uint32_t)b->nb[0], .b_nb1 = (uint32_t)b->nb[1], .b_nb2 = (uint32_t)b->nb[2],
        .d_nb0 = (uint32_t)node->nb[0], .d_nb1 = (uint32_t)node->nb[1], .d_nb2 = (uint32_t)node->nb[2],
        .a_off = oa->off, .b_off = ob->off, .d_off = od->off,
        .i_off = oi->off, .i_nb0 = (uint32_t)ids->nb[0], .i_nb1 = (uint32_t)ids->nb[1],
        .pairs_at = (uint32_t)(HET_VK_MOE_TILES_AT + 3 * max_tiles), .tile = tile,
    };
    _Static_assert(sizeof pc <= HET_VK_PUSH_WORDS * 4, "grouped mul_mat_id push constants exceed 128 bytes");
    const struct het_vk_operand *group_ops[HET_VK_N_BIND] = { oi, NULL, NULL, &osc };
    const uint32_t one[3] = { 1, 1, 1 };
    enum het_status st = het_vk_emit(ctx, HET_VK_K_MOE_GROUP, HET_TYPE_F32, idx, group_ops, &pc, sizeof pc, one, err);
    if (st != HET_OK) return st;
    const struct het_vk_operand *gemm_ops[HET_VK_N_BIND] = { oa, ob, &osc, od };
    const uint32_t groups[3] = { (uint32_t)grouped_row_tiles(ctx, a->ne[1], rows), (uint32_t)max_tiles, 1 };
    if (rows) {
        VkBufferView tv[HET_VK_N_TEXEL];
        st = het_vk_texel_view(ctx, oa, &tv[0], err);
        if (st == HET_OK) st = het_vk_texel_view(ctx, ob, &tv[1], err);
        if (st == HET_OK)
            st = het_vk_emit_views(ctx, HET_VK_K_MUL_MAT_ID_ROWS, a->type, idx, gemm_ops, tv, &pc, sizeof pc, groups,
                                   err);
    } else {
        st = het_vk_emit(ctx, HET_VK_K_MUL_MAT_ID, a->type, idx, gemm_ops, &pc, sizeof pc, groups, err);
    }
    if (st == HET_OK) s->disp[s->n_disp - 1].after_prev = true; /* reads the groups just written */
    return st;
}

enum het_status het_vk_encode_mul_mat_id(struct het_vk_ctx *ctx, struct het_tensor *node, int idx, het_error *err)
{
    const struct het_tensor *a = node->src[0], *b = node->src[1], *ids = node->src[2];
    struct het_vk_operand oa, ob, oi, od;
    enum het_status st = het_vk_bind_tensor(ctx, a, false, &oa, err);
    if (st == HET_OK) st = het_vk_bind_tensor(ctx, b, false, &ob, err);
    if (st == HET_OK) st = het_vk_bind_tensor(ctx, ids, false, &oi, err);
    if (st == HET_OK) st = het_vk_bind_tensor(ctx, node, true, &od, err);
    if (st != HET_OK) return st;
    const int64_t k = ids->ne[0], T = ids->ne[1];
    bool rows = het_vk_rows_fit(ctx, a, b, &oa, &ob);
    if (grouped_fits(ctx, a, k * T, rows)) return encode_grouped(ctx, node, idx, &oa, &ob, &oi, &od, rows, err);
    struct pc_mul_mat_id pc = {
        .K = (uint32_t)a->ne[0], .N = (uint32_t)a->ne[1], .M = 1,
        .B2 = (uint32_t)k, .B3 = (uint32_t)T, .E = (uint32_t)a->ne[2], .n_b = (uint32_t)b->ne[1],
        .a_off = oa.off, .b_off = ob.off, .d_off = od.off,
        .i_off = oi.off, .i_nb0 = (uint32_t)ids->nb[0], .i_nb1 = (uint32_t)ids->nb[1],
    };
    for (int i = 0; i < 4; i++) {
        pc.a_nb[i] = (uint32_t)a->nb[i];
        pc.b_nb[i] = (uint32_t)b->nb[i];
        pc.d_nb[i] = (uint32_t)node->nb[i];
    }
    _Static_assert(sizeof pc <= HET_VK_PUSH_WORDS * 4, "mul_mat_id push constants exceed 128 bytes");
    const struct het_vk_operand *ops[HET_VK_N_BIND] = { &oa, &ob, &oi, &od };
    uint64_t row_groups = (uint64_t)(a->ne[1] + HET_VK_GEMV_ROWS - 1) / HET_VK_GEMV_ROWS;
    uint32_t groups[3];
    st = het_vk_flat_groups(ctx, row_groups * (uint64_t)(k * T), groups, err);
    if (st != HET_OK) return st;
    return het_vk_emit(ctx, HET_VK_K_MUL_MAT_VEC_ID, a->type, idx, ops, &pc, sizeof pc, groups, err);
}

/* ---- routing: top_k, sum_rows, moe_sum --------------------------------------- */

struct pc_top_k { /* top_k.comp */
    uint32_t ne[4], a_nb[4], d_nb[4];
    uint32_t a_off, d_off, k;
};

struct pc_sum_rows { /* sum_rows.glsl */
    uint32_t ne[4], a_nb[4], d_nb1, d_nb2, d_nb3;
    uint32_t a_off, d_off;
};

struct pc_moe_sum { /* moe_sum.comp */
    uint32_t N, k, T;
    uint32_t x_nb0, x_nb1, x_nb2, w_nb0, w_nb1, d_nb0, d_nb1;
    uint32_t x_off, w_off, d_off;
};

/* TOP_K and SUM_ROWS: one workgroup per row of src0; MOE_SUM: one
 * invocation per output element. */
enum het_status het_vk_encode_moe_route(struct het_vk_ctx *ctx, struct het_tensor *node, int idx, het_error *err)
{
    const struct het_tensor *a = node->src[0], *w = node->op == HET_OP_MOE_SUM ? node->src[1] : NULL;
    struct het_vk_operand oa, ow, od;
    enum het_status st = het_vk_bind_tensor(ctx, a, false, &oa, err);
    if (st == HET_OK && w) st = het_vk_bind_tensor(ctx, w, false, &ow, err);
    if (st == HET_OK) st = het_vk_bind_tensor(ctx, node, true, &od, err);
    if (st != HET_OK) return st;
    const struct het_vk_operand *ops[HET_VK_N_BIND] = { &oa, w ? &ow : NULL, NULL, &od };
    const uint64_t rows = (uint64_t)(a->ne[1] * a->ne[2] * a->ne[3]);
    uint32_t groups[3];
    if (node->op == HET_OP_MOE_SUM) {
        struct pc_moe_sum pc = {
            .N = (uint32_t)a->ne[0], .k = (uint32_t)a->ne[1], .T = (uint32_t)a->ne[2],
            .x_nb0 = (uint32_t)a->nb[0], .x_nb1 = (uint32_t)a->nb[1], .x_nb2 = (uint32_t)a->nb[2],
            .w_nb0 = (uint32_t)w->nb[0], .w_nb1 = (uint32_t)w->nb[1],
            .d_nb0 = (uint32_t)node->nb[0], .d_nb1 = (uint32_t)node->nb[1],
            .x_off = oa.off, .w_off = ow.off, .d_off = od.off,
        };
        uint64_t wg = het_vk_kernel_wg(ctx, HET_VK_K_MOE_SUM), n = (uint64_t)(a->ne[0] * a->ne[2]);
        st = het_vk_flat_groups(ctx, (n + wg - 1) / wg, groups, err);
        if (st != HET_OK) return st;
        return het_vk_emit(ctx, HET_VK_K_MOE_SUM, HET_TYPE_F32, idx, ops, &pc, sizeof pc, groups, err);
    }
    st = het_vk_flat_groups(ctx, rows, groups, err);
    if (st != HET_OK) return st;
    if (node->op == HET_OP_TOP_K) {
        struct pc_top_k pc = { .a_off = oa.off, .d_off = od.off, .k = (uint32_t)node->ne[0] };
        for (int i = 0; i < 4; i++) {
            pc.ne[i] = (uint32_t)a->ne[i];
            pc.a_nb[i] = (uint32_t)a->nb[i];
            pc.d_nb[i] = (uint32_t)node->nb[i];
        }
        return het_vk_emit(ctx, HET_VK_K_TOP_K, HET_TYPE_F32, idx, ops, &pc, sizeof pc, groups, err);
    }
    struct pc_sum_rows pc = { .d_nb1 = (uint32_t)node->nb[1], .d_nb2 = (uint32_t)node->nb[2],
                              .d_nb3 = (uint32_t)node->nb[3], .a_off = oa.off, .d_off = od.off };
    for (int i = 0; i < 4; i++) {
        pc.ne[i] = (uint32_t)a->ne[i];
        pc.a_nb[i] = (uint32_t)a->nb[i];
    }
    return het_vk_emit(ctx, HET_VK_K_SUM_ROWS, HET_TYPE_F32, idx, ops, &pc, sizeof pc, groups, err);
}
