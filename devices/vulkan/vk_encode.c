/*
 * vk_encode.c — turning graph nodes into dispatch records.
 *
 * Each encoder binds its operands (vk_memory.c finds the buffer range from
 * the tensor's host address), fills the kernel's push constants (shapes,
 * byte strides, byte offsets inside the bound ranges; the structs below
 * mirror the `PC` blocks of the shaders field for field) and queues the
 * dispatch. Sources are bound before the destination so that, in mirrored
 * memory, an in-place node still uploads what it reads. MUL_MAT and
 * GET_ROWS, which may need several windows, are in vk_encode_mm.c.
 */
#include "devices/vulkan/vk_internal.h"

#include <stdlib.h>
#include <string.h>

_Static_assert(sizeof(float) == 4, "push constants assume 32-bit float");

static uint32_t u32(size_t v) { return (uint32_t)v; }

static void put4(uint32_t dst[4], const int64_t src[4])
{
    for (int i = 0; i < 4; i++) dst[i] = (uint32_t)src[i];
}

static void put4nb(uint32_t dst[4], const size_t src[4])
{
    for (int i = 0; i < 4; i++) dst[i] = (uint32_t)src[i];
}

static uint64_t nelem(const struct het_tensor *t) { return (uint64_t)(t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3]); }
static uint32_t is_f16(const struct het_tensor *t) { return t->type == HET_TYPE_F16; }

enum het_status het_vk_flat_groups(const struct het_vk_ctx *ctx, uint64_t total, uint32_t groups[3], het_error *err)
{
    uint64_t x = total < ctx->max_groups[0] ? total : ctx->max_groups[0];
    if (x == 0) x = 1;
    uint64_t y = (total + x - 1) / x;
    if (y > ctx->max_groups[1])
        return het_error_set(err, HET_ERR_UNSUPPORTED, "vulkan: %llu workgroups exceed the dispatch limits",
                             (unsigned long long)total);
    groups[0] = (uint32_t)x;
    groups[1] = (uint32_t)(y ? y : 1);
    groups[2] = 1;
    return HET_OK;
}

enum het_status het_vk_emit(struct het_vk_ctx *ctx, enum het_vk_kernel k, enum het_type variant, int node,
                            const struct het_vk_operand *const ops[HET_VK_N_BIND], const void *push,
                            size_t push_size, const uint32_t groups[3], het_error *err)
{
    struct het_vk_split *s = &ctx->split;
    VkPipeline pipe;
    enum het_status st = het_vk_pipeline_get(ctx, k, variant, &pipe, err);
    if (st != HET_OK) return st;
    if (s->n_disp == s->cap_disp) {
        int cap = s->cap_disp ? 2 * s->cap_disp : 64;
        void *p = realloc(s->disp, (size_t)cap * sizeof *s->disp);
        if (!p) return het_error_set(err, HET_ERR_NOMEM, "vulkan: out of memory for dispatches");
        s->disp = p;
        s->cap_disp = cap;
    }
    struct het_vk_dispatch *d = &s->disp[s->n_disp++];
    memset(d, 0, sizeof *d);
    d->pipe = pipe;
    d->node = node;
    for (int i = 0; i < HET_VK_N_BIND; i++)
        d->bind[i] = ops[i] ? ops[i]->bind : (struct het_vk_bind){ ctx->dummy, 0, VK_WHOLE_SIZE };
    memcpy(d->push, push, push_size);
    d->push_size = (uint32_t)push_size;
    memcpy(d->groups, groups, sizeof d->groups);
    return HET_OK;
}

enum het_status het_vk_emit_views(struct het_vk_ctx *ctx, enum het_vk_kernel k, enum het_type variant, int node,
                                  const struct het_vk_operand *const ops[HET_VK_N_BIND],
                                  const VkBufferView tview[HET_VK_N_TEXEL], const void *push, size_t push_size,
                                  const uint32_t groups[3], het_error *err)
{
    enum het_status st = het_vk_emit(ctx, k, variant, node, ops, push, push_size, groups, err);
    if (st == HET_OK)
        for (int i = 0; i < HET_VK_N_TEXEL; i++) ctx->split.disp[ctx->split.n_disp - 1].tview[i] = tview[i];
    return st;
}

enum het_status het_vk_bind_tensor(struct het_vk_ctx *ctx, const struct het_tensor *t, bool write,
                                   struct het_vk_operand *op, het_error *err)
{
    const uint8_t *addr = het_vk_tensor_addr(t);
    if (!addr) return het_error_set(err, HET_ERR_INVALID, "vulkan: tensor '%s' has no storage", t->name);
    return het_vk_bind_span(ctx, addr, het_vk_tensor_span(t), write, write && !het_vk_tensor_dense(t), op, err);
}

/* ---- element-wise ---------------------------------------------------------- */

struct pc_eltwise {
    uint32_t ne[4], d_nb[4], a_nb[4], b_ne[4], b_nb[4];
    uint32_t a_off, b_off, d_off, types;
    float    param;
    uint32_t n;
};

static enum het_status enc_eltwise(struct het_vk_ctx *ctx, struct het_tensor *node, int idx, enum het_vk_kernel k,
                                   het_error *err)
{
    const bool two = k <= HET_VK_K_SWIGLU || k == HET_VK_K_DIV;
    const struct het_tensor *a = node->src[0], *b = two ? node->src[1] : NULL;
    struct het_vk_operand oa, ob, od;
    enum het_status st = het_vk_bind_tensor(ctx, a, false, &oa, err);
    if (st == HET_OK && b) st = het_vk_bind_tensor(ctx, b, false, &ob, err);
    if (st == HET_OK) st = het_vk_bind_tensor(ctx, node, true, &od, err);
    if (st != HET_OK) return st;
    struct pc_eltwise pc = { .a_off = oa.off, .d_off = od.off, .n = (uint32_t)nelem(node) };
    put4(pc.ne, node->ne);
    put4nb(pc.d_nb, node->nb);
    put4nb(pc.a_nb, a->nb);
    pc.types = is_f16(a) | (is_f16(node) << 2);
    if (b) {
        put4(pc.b_ne, b->ne);
        put4nb(pc.b_nb, b->nb);
        pc.b_off = ob.off;
        pc.types |= is_f16(b) << 1;
    } else {
        for (int i = 0; i < 4; i++) pc.b_ne[i] = 1;
    }
    pc.param = k == HET_VK_K_SCALE ? het_get_op_param_f32(node, 0) : 0.0f;
    uint32_t wg = het_vk_kernel_wg(ctx, k), groups[3];
    st = het_vk_flat_groups(ctx, (nelem(node) + wg - 1) / wg, groups, err);
    if (st != HET_OK) return st;
    const struct het_vk_operand *ops[HET_VK_N_BIND] = { &oa, b ? &ob : NULL, NULL, &od };
    return het_vk_emit(ctx, k, (enum het_type)pc.types, idx, ops, &pc, sizeof pc, groups, err); /* F16 bits */
}

/* ---- copies ---------------------------------------------------------------- */

struct pc_copy {
    uint32_t a_ne[4], a_nb[4], d_ne[4], d_nb[4];
    uint32_t a_off, d_off, types, n;
};

static enum het_status enc_copy(struct het_vk_ctx *ctx, const struct het_tensor *src, const struct het_tensor *dst,
                                int idx, het_error *err)
{
    struct het_vk_operand oa, od;
    enum het_status st = het_vk_bind_tensor(ctx, src, false, &oa, err);
    if (st == HET_OK) st = het_vk_bind_tensor(ctx, dst, true, &od, err);
    if (st != HET_OK) return st;
    struct pc_copy pc = { .a_off = oa.off, .d_off = od.off, .n = (uint32_t)nelem(src) };
    put4(pc.a_ne, src->ne);
    put4nb(pc.a_nb, src->nb);
    put4(pc.d_ne, dst->ne);
    put4nb(pc.d_nb, dst->nb);
    pc.types = is_f16(src) | (is_f16(dst) << 2);
    uint32_t groups[3];
    uint32_t wg = het_vk_kernel_wg(ctx, HET_VK_K_COPY);
    st = het_vk_flat_groups(ctx, (nelem(src) + wg - 1) / wg, groups, err);
    if (st != HET_OK) return st;
    const struct het_vk_operand *ops[HET_VK_N_BIND] = { &oa, NULL, NULL, &od };
    return het_vk_emit(ctx, HET_VK_K_COPY, (enum het_type)pc.types, idx, ops, &pc, sizeof pc, groups, err);
}

/* ---- row kernels ---------------------------------------------------------------- */

struct pc_rms_norm {
    uint32_t ne[4], a_nb[4], d_nb[4];
    uint32_t a_off, d_off;
    float    eps;
};

static enum het_status enc_rms_norm(struct het_vk_ctx *ctx, struct het_tensor *node, int idx, het_error *err)
{
    const struct het_tensor *a = node->src[0];
    struct het_vk_operand oa, od;
    enum het_status st = het_vk_bind_tensor(ctx, a, false, &oa, err);
    if (st == HET_OK) st = het_vk_bind_tensor(ctx, node, true, &od, err);
    if (st != HET_OK) return st;
    struct pc_rms_norm pc = { .a_off = oa.off, .d_off = od.off, .eps = het_get_op_param_f32(node, 0) };
    put4(pc.ne, node->ne);
    put4nb(pc.a_nb, a->nb);
    put4nb(pc.d_nb, node->nb);
    uint32_t groups[3];
    st = het_vk_flat_groups(ctx, nelem(node) / (uint64_t)node->ne[0], groups, err);
    if (st != HET_OK) return st;
    const struct het_vk_operand *ops[HET_VK_N_BIND] = { &oa, NULL, NULL, &od };
    /* CPU-type devices: a subgroup per row, no barrier (rms_norm_rows.comp) */
    enum het_vk_kernel k = ctx->use_rows && ctx->use_subgroup ? HET_VK_K_RMS_NORM_ROWS : HET_VK_K_RMS_NORM;
    return het_vk_emit(ctx, k, HET_TYPE_F32, idx, ops, &pc, sizeof pc, groups, err);
}

struct pc_softmax {
    uint32_t ne[4], a_nb[4], d_nb[4], m_nb[4];
    uint32_t m_ne1, m_ne2, m_ne3;
    uint32_t a_off, d_off, m_off, has_mask;
    float    scale;
    int32_t  causal_past;
};

static enum het_status enc_softmax(struct het_vk_ctx *ctx, struct het_tensor *node, int idx, het_error *err)
{
    const struct het_tensor *a = node->src[0], *m = node->src[1];
    struct het_vk_operand oa, om, od;
    enum het_status st = het_vk_bind_tensor(ctx, a, false, &oa, err);
    if (st == HET_OK && m) st = het_vk_bind_tensor(ctx, m, false, &om, err);
    if (st == HET_OK) st = het_vk_bind_tensor(ctx, node, true, &od, err);
    if (st != HET_OK) return st;
    struct pc_softmax pc = {
        .a_off = oa.off, .d_off = od.off, .m_off = m ? om.off : 0, .has_mask = m != NULL, .m_ne1 = 1, .m_ne2 = 1, .m_ne3 = 1,
        .scale = het_get_op_param_f32(node, 0), .causal_past = node->op_params[1],
    };
    put4(pc.ne, node->ne);
    put4nb(pc.a_nb, a->nb);
    put4nb(pc.d_nb, node->nb);
    if (m) {
        put4nb(pc.m_nb, m->nb);
        pc.m_ne1 = (uint32_t)m->ne[1];
        pc.m_ne2 = (uint32_t)m->ne[2];
        pc.m_ne3 = (uint32_t)m->ne[3];
    }
    uint32_t groups[3];
    st = het_vk_flat_groups(ctx, nelem(node) / (uint64_t)node->ne[0], groups, err);
    if (st != HET_OK) return st;
    const struct het_vk_operand *ops[HET_VK_N_BIND] = { &oa, m ? &om : NULL, NULL, &od };
    return het_vk_emit(ctx, HET_VK_K_SOFTMAX, HET_TYPE_F32, idx, ops, &pc, sizeof pc, groups, err);
}

struct pc_rope {
    uint32_t ne[4], a_nb[4], d_nb[4];
    uint32_t p_nb0, a_off, p_off, d_off, n_dims, mode;
    float    freq_base, freq_scale;
};

static enum het_status enc_rope(struct het_vk_ctx *ctx, struct het_tensor *node, int idx, het_error *err)
{
    const struct het_tensor *a = node->src[0], *pos = node->src[1];
    struct het_vk_operand oa, op, od;
    enum het_status st = het_vk_bind_tensor(ctx, a, false, &oa, err);
    if (st == HET_OK) st = het_vk_bind_tensor(ctx, pos, false, &op, err);
    if (st == HET_OK) st = het_vk_bind_tensor(ctx, node, true, &od, err);
    if (st != HET_OK) return st;
    struct pc_rope pc = {
        .p_nb0 = u32(pos->nb[0]), .a_off = oa.off, .p_off = op.off, .d_off = od.off,
        .n_dims = (uint32_t)node->op_params[0], .mode = (uint32_t)node->op_params[1],
        .freq_base = het_get_op_param_f32(node, 2), .freq_scale = het_get_op_param_f32(node, 3),
    };
    put4(pc.ne, node->ne);
    put4nb(pc.a_nb, a->nb);
    put4nb(pc.d_nb, node->nb);
    uint64_t slots = pc.n_dims / 2 + (uint64_t)(node->ne[0] - pc.n_dims + 1) / 2;
    uint64_t total = slots * (nelem(node) / (uint64_t)node->ne[0]);
    uint32_t wg = het_vk_kernel_wg(ctx, HET_VK_K_ROPE), groups[3];
    st = het_vk_flat_groups(ctx, (total + wg - 1) / wg, groups, err);
    if (st != HET_OK) return st;
    const struct het_vk_operand *ops[HET_VK_N_BIND] = { &oa, &op, NULL, &od };
    return het_vk_emit(ctx, HET_VK_K_ROPE, HET_TYPE_F32, idx, ops, &pc, sizeof pc, groups, err);
}

struct pc_attn {
    uint32_t hd, n_head, n_tok, n_kv, n_kv_head, n_batch, kv_batch;
    uint32_t q_nb[4], k_nb[4], v_nb[4], d_nb[4];
    uint32_t q_off, k_off, v_off, d_off, types;
    float    scale;
    int32_t  n_past;
};

/* Whether attn_rows.comp (CPU-type devices) takes this attention: head
 * size a multiple of 32 up to 256 whose rows split evenly into 16-byte
 * texels over the subgroup, K and V of one type with unit element stride,
 * their bases and rows 16-byte aligned in their bindings, their ranges
 * viewable as texels. */
static bool attn_rows_fit(const struct het_vk_ctx *ctx, const struct het_tensor *q, const struct het_tensor *k,
                          const struct het_tensor *v, const struct het_vk_operand *ok, const struct het_vk_operand *ov)
{
    int64_t hd = q->ne[0];
    if (!ctx->use_rows || hd % 32 || hd > HET_VK_ATTN_MAX_HD || k->type != v->type) return false;
    size_t es = k->type == HET_TYPE_F16 ? 2 : 4;
    if (k->nb[0] != es || v->nb[0] != es || (size_t)hd * es / 16 % ctx->info.subgroup_size) return false;
    const struct het_tensor *kv[2] = { k, v };
    const struct het_vk_operand *op[2] = { ok, ov };
    for (int i = 0; i < 2; i++)
        if (op[i]->off % 16 || kv[i]->nb[1] % 16 || kv[i]->nb[2] % 16 || kv[i]->nb[3] % 16 ||
            !het_vk_texel_ok(ctx, op[i]))
            return false;
    return true;
}

static enum het_status enc_attn(struct het_vk_ctx *ctx, struct het_tensor *node, int idx, het_error *err)
{
    const struct het_tensor *q = node->src[0], *k = node->src[1], *v = node->src[2];
    struct het_vk_operand oq, ok, ov, od;
    enum het_status st = het_vk_bind_tensor(ctx, q, false, &oq, err);
    if (st == HET_OK) st = het_vk_bind_tensor(ctx, k, false, &ok, err);
    if (st == HET_OK) st = het_vk_bind_tensor(ctx, v, false, &ov, err);
    if (st == HET_OK) st = het_vk_bind_tensor(ctx, node, true, &od, err);
    if (st != HET_OK) return st;
    struct pc_attn pc = {
        .hd = (uint32_t)q->ne[0], .n_head = (uint32_t)q->ne[1], .n_tok = (uint32_t)q->ne[2],
        .n_kv = (uint32_t)k->ne[2], .n_kv_head = (uint32_t)k->ne[1],
        .n_batch = (uint32_t)q->ne[3], .kv_batch = (uint32_t)k->ne[3],
        .q_off = oq.off, .k_off = ok.off, .v_off = ov.off, .d_off = od.off,
        .types = is_f16(k) | (is_f16(v) << 1),
        .scale = het_get_op_param_f32(node, 0), .n_past = node->op_params[1],
    };
    for (int i = 0; i < 4; i++) {
        pc.q_nb[i] = u32(q->nb[i]);
        pc.k_nb[i] = u32(k->nb[i]);
        pc.v_nb[i] = u32(v->nb[i]);
        pc.d_nb[i] = u32(node->nb[i]);
    }
    uint32_t groups[3];
    const struct het_vk_operand *ops[HET_VK_N_BIND] = { &oq, &ok, &ov, &od };
    if (attn_rows_fit(ctx, q, k, v, &ok, &ov)) { /* a subgroup per workgroup, a query token per invocation */
        uint64_t sg = ctx->info.subgroup_size, blocks = (pc.n_tok + sg - 1) / sg;
        st = het_vk_flat_groups(ctx, blocks * pc.n_head * pc.n_batch, groups, err);
        if (st != HET_OK) return st;
        uint32_t code = (uint32_t)(q->ne[0] / 32 - 1) + (k->type == HET_TYPE_F16 ? 8u : 0u);
        VkBufferView tv[HET_VK_N_TEXEL];
        st = het_vk_texel_view(ctx, &ok, &tv[0], err);
        if (st == HET_OK) st = het_vk_texel_view(ctx, &ov, &tv[1], err);
        if (st != HET_OK) return st;
        return het_vk_emit_views(ctx, HET_VK_K_ATTN_ROWS, (enum het_type)code, idx, ops, tv, &pc, sizeof pc, groups,
                                 err);
    }
    st = het_vk_flat_groups(ctx, (uint64_t)pc.n_head * pc.n_tok * pc.n_batch, groups, err);
    if (st != HET_OK) return st;
    return het_vk_emit(ctx, HET_VK_K_ATTN, HET_TYPE_F32, idx, ops, &pc, sizeof pc, groups, err);
}

enum het_status het_vk_encode_node(struct het_vk_ctx *ctx, struct het_tensor *node, int idx, het_error *err)
{
    if (!het_vk_supports(ctx, node))
        return het_error_set(err, HET_ERR_UNSUPPORTED, "vulkan: node '%s' (op %d, type %d) is not supported",
                             node->name, (int)node->op, (int)node->type);
    if (nelem(node) == 0) return HET_OK;
    switch (node->op) {
    case HET_OP_NONE:
    case HET_OP_VIEW:     return HET_OK;
    case HET_OP_ADD:      return enc_eltwise(ctx, node, idx, HET_VK_K_ADD, err);
    case HET_OP_MUL:      return enc_eltwise(ctx, node, idx, HET_VK_K_MUL, err);
    case HET_OP_SWIGLU:   return enc_eltwise(ctx, node, idx, HET_VK_K_SWIGLU, err);
    case HET_OP_SCALE:    return enc_eltwise(ctx, node, idx, HET_VK_K_SCALE, err);
    case HET_OP_SILU:     return enc_eltwise(ctx, node, idx, HET_VK_K_SILU, err);
    case HET_OP_DIV:      return enc_eltwise(ctx, node, idx, HET_VK_K_DIV, err);
    case HET_OP_SIGMOID:  return enc_eltwise(ctx, node, idx, HET_VK_K_SIGMOID, err);
    case HET_OP_CPY:      return enc_copy(ctx, node->src[0], node->src[1], idx, err);
    case HET_OP_CONT:     return enc_copy(ctx, node->src[0], node, idx, err);
    case HET_OP_RMS_NORM: return enc_rms_norm(ctx, node, idx, err);
    case HET_OP_SOFTMAX:  return enc_softmax(ctx, node, idx, err);
    case HET_OP_ROPE:     return enc_rope(ctx, node, idx, err);
    case HET_OP_ATTN:     return enc_attn(ctx, node, idx, err);
    case HET_OP_MUL_MAT:  return het_vk_encode_mul_mat(ctx, node, idx, err);
    case HET_OP_GET_ROWS: return het_vk_encode_get_rows(ctx, node, idx, err);
    case HET_OP_MUL_MAT_ID: return het_vk_encode_mul_mat_id(ctx, node, idx, err);
    case HET_OP_TOP_K:
    case HET_OP_SUM_ROWS:
    case HET_OP_MOE_SUM:  return het_vk_encode_moe_route(ctx, node, idx, err);
    default:
        return het_error_set(err, HET_ERR_UNSUPPORTED, "vulkan: op %d", (int)node->op);
    }
}
