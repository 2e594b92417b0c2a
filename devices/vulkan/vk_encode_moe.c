/*
 * vk_encode_moe.c — MUL_MAT_ID, the mixture-of-experts matmul (contract in
 * het/graph.h): each (slot, token) is one GEMV of the expert its id names
 * over one input column, run by mul_mat_vec.glsl built with MUL_MAT_ID. The
 * kernel reads the ids itself (binding 2, through their byte strides), so
 * the ids may be produced by an earlier node of the same split, and nothing
 * is read back to the host to route tokens. Prefill reads an expert's
 * weights once per token routed to it; grouping tokens by expert into GEMMs
 * (as the CPU does) is the next step for GPUs.
 *
 * Also the routing ops around it (TOP_K, SUM_ROWS, MOE_SUM: top_k.comp,
 * sum_rows.glsl, moe_sum.comp), so a whole MoE layer, router to weighted
 * sum, stays in one Vulkan split.
 */
#include "devices/vulkan/vk_internal.h"

struct pc_mul_mat_id { /* mul_mat_id_pc.glsl */
    uint32_t K, N, M, B2, B3, E, n_b;
    uint32_t a_nb[4], b_nb[4], d_nb[4];
    uint32_t a_off, b_off, d_off;
    uint32_t i_off, i_nb0, i_nb1;
};

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
