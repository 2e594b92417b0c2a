/*
 * vk_support.c — which nodes the Vulkan kernels can run (pure checks).
 *
 * supports_op is called by the planner for every node, so it looks only at
 * metadata: op, types, shape relations and whether each operand's byte span
 * fits a descriptor (weights of MUL_MAT and GET_ROWS may exceed it: those
 * encoders bind them in windows). Also the tensor helpers every encoder uses
 * (host address through view chains, byte span, density) and the table of
 * element types the kernels read.
 */
#include "devices/vulkan/vk_internal.h"

static const struct het_vk_type vk_types[] = {
    { HET_TYPE_F32,  1,   4   },
    { HET_TYPE_F16,  1,   2   },
    { HET_TYPE_Q4_0, 32,  18  },
    { HET_TYPE_Q8_0, 32,  34  },
    { HET_TYPE_Q4_K, 256, 144 },
    { HET_TYPE_Q6_K, 256, 210 },
    { HET_TYPE_I32,  1,   4   },
};

const struct het_vk_type *het_vk_type_get(enum het_type type)
{
    for (size_t i = 0; i < sizeof vk_types / sizeof vk_types[0]; i++)
        if (vk_types[i].type == type) return &vk_types[i];
    return NULL;
}

bool het_vk_type_is_weight(enum het_type type) { return type != HET_TYPE_I32 && het_vk_type_get(type) != NULL; }
bool het_vk_type_is_float(enum het_type t) { return t == HET_TYPE_F32 || t == HET_TYPE_F16; }

uint8_t *het_vk_tensor_addr(const struct het_tensor *t)
{
    if (t->data) return t->data;
    if (t->view_src) {
        uint8_t *base = het_vk_tensor_addr(t->view_src);
        return base ? base + t->view_offs : NULL;
    }
    return NULL;
}

size_t het_vk_tensor_span(const struct het_tensor *t)
{
    const struct het_vk_type *ty = het_vk_type_get(t->type);
    if (!ty) return 0;
    for (int i = 0; i < HET_MAX_DIMS; i++)
        if (t->ne[i] <= 0) return 0;
    size_t n = ty->blck == 1 ? ty->bytes + (size_t)(t->ne[0] - 1) * t->nb[0]
                             : (size_t)(t->ne[0] / ty->blck) * ty->bytes;
    for (int i = 1; i < HET_MAX_DIMS; i++) n += (size_t)(t->ne[i] - 1) * t->nb[i];
    return n;
}

bool het_vk_tensor_dense(const struct het_tensor *t)
{
    const struct het_vk_type *ty = het_vk_type_get(t->type);
    if (!ty || t->nb[0] != ty->bytes) return false;
    size_t expect = (size_t)(t->ne[0] / ty->blck) * ty->bytes;
    for (int i = 1; i < HET_MAX_DIMS; i++) {
        if (t->ne[i] != 1 && t->nb[i] != expect) return false;
        expect *= (size_t)t->ne[i];
    }
    return true;
}

static int64_t nelem(const struct het_tensor *t) { return t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3]; }

/* Strides and alignment the byte-addressed kernels can use. */
static bool layout_ok(const struct het_tensor *t)
{
    const struct het_vk_type *ty = het_vk_type_get(t->type);
    if (!ty) return false;
    for (int i = 0; i < HET_MAX_DIMS; i++) {
        if (t->ne[i] < 1 || t->ne[i] > 0x7FFFFFFF) return false;
        if (t->ne[i] > 1 && t->nb[i] > 0xFFFFFFFFu) return false; /* 32-bit byte strides in the kernels */
    }
    if (ty->blck > 1) return t->nb[0] == ty->bytes && t->ne[0] % ty->blck == 0 && t->nb[1] % 2 == 0;
    uint32_t align = ty->bytes < 4 ? ty->bytes : 4; /* F16 at 2-byte, F32/I32 at 4-byte offsets */
    for (int i = 0; i < HET_MAX_DIMS; i++)
        if (t->nb[i] % align) return false;
    return true;
}

/* Operand that must fit one descriptor. */
static bool fits(const struct het_vk_ctx *ctx, const struct het_tensor *t)
{
    return layout_ok(t) && het_vk_tensor_span(t) <= ctx->max_span;
}

static bool same_shape(const struct het_tensor *a, const struct het_tensor *b)
{
    for (int i = 0; i < HET_MAX_DIMS; i++)
        if (a->ne[i] != b->ne[i]) return false;
    return true;
}

static bool broadcastable(const struct het_tensor *b, const struct het_tensor *a)
{
    for (int i = 0; i < HET_MAX_DIMS; i++)
        if (b->ne[i] != 1 && b->ne[i] != a->ne[i]) return false;
    return true;
}

static bool f32(const struct het_tensor *t) { return t->type == HET_TYPE_F32; }

static bool supports_mul_mat(const struct het_vk_ctx *ctx, const struct het_tensor *n)
{
    const struct het_tensor *a = n->src[0], *b = n->src[1];
    if (!het_vk_type_is_weight(a->type) || !f32(b) || !f32(n)) return false;
    if (!layout_ok(a) || !layout_ok(b) || !layout_ok(n)) return false;
    if (a->ne[0] != b->ne[0] || b->ne[2] % a->ne[2] || b->ne[3] % a->ne[3]) return false;
    if (n->ne[0] != a->ne[1] || n->ne[1] != b->ne[1] || n->ne[2] != b->ne[2] || n->ne[3] != b->ne[3]) return false;
    /* src0 is bound per row window, src1 and dst per column window, and
     * per batch plane when the planes together are too large */
    const struct het_vk_type *ty = het_vk_type_get(a->type);
    size_t row = ty->blck == 1 ? (size_t)(a->ne[0] - 1) * a->nb[0] + ty->bytes
                               : (size_t)(a->ne[0] / ty->blck) * ty->bytes;
    size_t col_b = (size_t)(b->ne[0] - 1) * b->nb[0] + 4;
    if (row > ctx->max_span || col_b > ctx->max_span || 4 > ctx->max_span) return false;
    if ((a->ne[1] + HET_VK_GEMM_TILE - 1) / HET_VK_GEMM_TILE > ctx->max_groups[0]) return false;
    return n->ne[2] * n->ne[3] <= ctx->max_groups[2];
}

/* MUL_MAT_ID (het/graph.h): experts (K, N, E), x (K, n_b, T) with n_b 1 or
 * k, ids I32 (k, T), dst (N, k, T); every operand inside one descriptor
 * (the experts of a 30B-A3B-shaped Q4_0 layer are about 113 MB). */
static bool supports_mul_mat_id(const struct het_vk_ctx *ctx, const struct het_tensor *n)
{
    const struct het_tensor *a = n->src[0], *b = n->src[1], *ids = n->src[2];
    if (!het_vk_type_is_weight(a->type) || !f32(b) || !f32(n) || ids->type != HET_TYPE_I32) return false;
    if (!fits(ctx, a) || !fits(ctx, b) || !fits(ctx, ids) || !fits(ctx, n)) return false;
    int64_t k = ids->ne[0], T = ids->ne[1];
    if (a->ne[3] != 1 || b->ne[3] != 1 || ids->ne[2] != 1 || ids->ne[3] != 1 || n->ne[3] != 1) return false;
    if (a->ne[0] != b->ne[0] || (b->ne[1] != 1 && b->ne[1] != k) || b->ne[2] != T) return false;
    if (n->ne[0] != a->ne[1] || n->ne[1] != k || n->ne[2] != T) return false;
    uint64_t groups = (uint64_t)((a->ne[1] + HET_VK_GEMV_ROWS - 1) / HET_VK_GEMV_ROWS) * (uint64_t)(k * T);
    return groups <= (uint64_t)ctx->max_groups[0] * ctx->max_groups[1];
}

/* The routing ops (het/graph.h): TOP_K F32 rows -> I32 (k, rows); SUM_ROWS
 * F32 rows -> (1, rows); MOE_SUM x (N, k, T), w (k, T) -> (N, T). */
static bool supports_moe_route(const struct het_vk_ctx *ctx, const struct het_tensor *n)
{
    const struct het_tensor *a = n->src[0], *w = n->src[1];
    if (!f32(a) || !fits(ctx, a) || !fits(ctx, n)) return false;
    switch (n->op) {
    case HET_OP_TOP_K:
        return n->type == HET_TYPE_I32 && n->ne[0] >= 1 && n->ne[0] <= a->ne[0] && n->ne[1] == a->ne[1] &&
               n->ne[2] == a->ne[2] && n->ne[3] == a->ne[3];
    case HET_OP_SUM_ROWS:
        return f32(n) && n->ne[0] == 1 && n->ne[1] == a->ne[1] && n->ne[2] == a->ne[2] && n->ne[3] == a->ne[3];
    case HET_OP_MOE_SUM:
        return w && f32(w) && f32(n) && fits(ctx, w) && a->ne[3] == 1 && w->ne[0] == a->ne[1] &&
               w->ne[1] == a->ne[2] && w->ne[2] == 1 && w->ne[3] == 1 && n->ne[0] == a->ne[0] &&
               n->ne[1] == a->ne[2] && n->ne[2] == 1 && n->ne[3] == 1;
    default:
        return false;
    }
}

static bool supports_get_rows(const struct het_vk_ctx *ctx, const struct het_tensor *n)
{
    const struct het_tensor *a = n->src[0], *ids = n->src[1];
    if (!het_vk_type_is_weight(a->type) || ids->type != HET_TYPE_I32 || !f32(n)) return false;
    if (!layout_ok(a) || !fits(ctx, ids) || !fits(ctx, n) || ids->ne[3] != 1) return false;
    if (n->ne[0] != a->ne[0] || n->ne[1] != ids->ne[0] || n->ne[2] != ids->ne[1] || n->ne[3] != ids->ne[2])
        return false;
    if (ids->ne[1] % a->ne[2] || ids->ne[2] % a->ne[3]) return false; /* src0 broadcast over dims 2, 3 */
    /* a table larger than a descriptor is bound in row windows (2-D only) */
    if (het_vk_tensor_span(a) <= ctx->max_span) return true;
    struct het_tensor one = *a;
    one.ne[1] = 1;
    return a->ne[2] * a->ne[3] == 1 && het_vk_tensor_span(&one) <= ctx->max_span;
}

static bool supports_attn(const struct het_vk_ctx *ctx, const struct het_tensor *n)
{
    const struct het_tensor *q = n->src[0], *k = n->src[1], *v = n->src[2];
    if (!f32(q) || !f32(n) || !het_vk_type_is_float(k->type) || !het_vk_type_is_float(v->type)) return false;
    if (!fits(ctx, q) || !fits(ctx, k) || !fits(ctx, v) || !fits(ctx, n)) return false;
    if (!same_shape(q, n) || k->ne[3] != v->ne[3] || (k->ne[3] != 1 && k->ne[3] != q->ne[3])) return false;
    if (q->ne[0] > HET_VK_ATTN_MAX_HD || k->ne[0] != q->ne[0] || v->ne[0] != q->ne[0]) return false;
    if (k->ne[1] != v->ne[1] || k->ne[2] != v->ne[2] || q->ne[1] % k->ne[1]) return false;
    return true;
}

static bool supports_rope(const struct het_vk_ctx *ctx, const struct het_tensor *n)
{
    const struct het_tensor *a = n->src[0], *pos = n->src[1];
    int32_t n_dims = n->op_params[0], mode = n->op_params[1];
    if (!f32(a) || !f32(n) || !pos || pos->type != HET_TYPE_I32 || !same_shape(a, n)) return false;
    if (!fits(ctx, a) || !fits(ctx, pos) || !fits(ctx, n) || pos->ne[0] < a->ne[2]) return false;
    if (n_dims < 0 || n_dims % 2 || n_dims > a->ne[0]) return false;
    return mode == HET_ROPE_NORMAL || mode == HET_ROPE_NEOX;
}

static bool supports_softmax(const struct het_vk_ctx *ctx, const struct het_tensor *n)
{
    const struct het_tensor *a = n->src[0], *m = n->src[1];
    if (!f32(a) || !f32(n) || !same_shape(a, n) || !fits(ctx, a) || !fits(ctx, n)) return false;
    if (!m) return true;
    return f32(m) && fits(ctx, m) && m->ne[0] >= a->ne[0] && a->ne[2] % m->ne[2] == 0 && a->ne[3] % m->ne[3] == 0;
}

static bool supports_eltwise(const struct het_vk_ctx *ctx, const struct het_tensor *n)
{
    const struct het_tensor *a = n->src[0], *b = n->src[1];
    bool two = n->op == HET_OP_ADD || n->op == HET_OP_MUL || n->op == HET_OP_SWIGLU || n->op == HET_OP_DIV;
    if (!het_vk_type_is_float(a->type) || !het_vk_type_is_float(n->type)) return false;
    if (!same_shape(a, n) || !fits(ctx, a) || !fits(ctx, n)) return false;
    if (!two) return true;
    return b && het_vk_type_is_float(b->type) && fits(ctx, b) && broadcastable(b, a);
}

bool het_vk_supports(const struct het_vk_ctx *ctx, const struct het_tensor *node)
{
    if (ctx->lost) return false;
    for (int i = 0; i < HET_MAX_SRC; i++)
        if (node->src[i] && !het_vk_type_get(node->src[i]->type)) return false;
    if (node->op != HET_OP_NONE && node->op != HET_OP_VIEW && nelem(node) > 0x7FFFFFFF) return false;
    switch (node->op) {
    case HET_OP_NONE:
    case HET_OP_VIEW:     return true;
    case HET_OP_MUL_MAT:  return node->src[0] && node->src[1] && supports_mul_mat(ctx, node);
    case HET_OP_GET_ROWS: return node->src[0] && node->src[1] && supports_get_rows(ctx, node);
    case HET_OP_MUL_MAT_ID:
        return node->src[0] && node->src[1] && node->src[2] && supports_mul_mat_id(ctx, node);
    case HET_OP_TOP_K:
    case HET_OP_SUM_ROWS:
    case HET_OP_MOE_SUM:  return node->src[0] && supports_moe_route(ctx, node);
    case HET_OP_ADD:
    case HET_OP_MUL:
    case HET_OP_SCALE:
    case HET_OP_SILU:
    case HET_OP_SWIGLU:
    case HET_OP_DIV:
    case HET_OP_SIGMOID:  return node->src[0] && supports_eltwise(ctx, node);
    case HET_OP_RMS_NORM:
        return node->src[0] && f32(node->src[0]) && f32(node) && same_shape(node->src[0], node) &&
               fits(ctx, node->src[0]) && fits(ctx, node);
    case HET_OP_ROPE:     return node->src[0] && supports_rope(ctx, node);
    case HET_OP_SOFTMAX:  return node->src[0] && supports_softmax(ctx, node);
    case HET_OP_CPY:
        return node->src[0] && node->src[1] && het_vk_type_is_float(node->src[0]->type) &&
               het_vk_type_is_float(node->src[1]->type) && nelem(node->src[0]) == nelem(node->src[1]) &&
               fits(ctx, node->src[0]) && fits(ctx, node->src[1]);
    case HET_OP_CONT:
        return node->src[0] && het_vk_type_is_float(node->src[0]->type) && het_vk_type_is_float(node->type) &&
               nelem(node->src[0]) == nelem(node) && fits(ctx, node->src[0]) && fits(ctx, node);
    case HET_OP_ATTN:     return node->src[0] && node->src[1] && node->src[2] && supports_attn(ctx, node);
    default:              return false;
    }
}
