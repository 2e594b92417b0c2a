/*
 * cpu_dispatch.c — maps each op to its CPU kernel and answers the CPU's
 * capability questions (supports, work size). The kernels themselves live
 * in one file per op family (matmul.c, norm.c, rope.c, ...).
 */
#include "devices/cpu/cpu_ops.h"

static bool is_float(enum het_type t)
{
    return t == HET_TYPE_F32 || t == HET_TYPE_F16 || t == HET_TYPE_BF16;
}

bool het_cpu_supports(const struct het_tensor *node)
{
    const struct het_tensor *s0 = node->src[0], *s1 = node->src[1];
    switch (node->op) {
    case HET_OP_MUL_MAT:  return het_cpu_mul_mat_supports(node);
    case HET_OP_GET_ROWS: return het_type_get_traits(s0->type)->can_compute && s1->type == HET_TYPE_I32;
    case HET_OP_ADD:
    case HET_OP_MUL:
    case HET_OP_DIV:
    case HET_OP_SWIGLU:   return s0->type == HET_TYPE_F32 && s1->type == HET_TYPE_F32;
    case HET_OP_MUL_MAT_ID: return het_cpu_mul_mat_id_supports(node);
    case HET_OP_MOE_SUM:  return s0->type == HET_TYPE_F32 && s1->type == HET_TYPE_F32;
    case HET_OP_TOP_K:
    case HET_OP_SUM_ROWS:
    case HET_OP_SIGMOID:
    case HET_OP_SCALE:
    case HET_OP_RMS_NORM:
    case HET_OP_SILU:     return s0->type == HET_TYPE_F32;
    case HET_OP_ROPE:     return s0->type == HET_TYPE_F32 && s1->type == HET_TYPE_I32;
    case HET_OP_SOFTMAX:  return s0->type == HET_TYPE_F32 && (!s1 || s1->type == HET_TYPE_F32);
    case HET_OP_CPY:      return is_float(s0->type) && is_float(node->type);
    case HET_OP_CONT:     return is_float(s0->type);
    case HET_OP_ATTN:
        return s0->type == HET_TYPE_F32 && (s1->type == HET_TYPE_F16 || s1->type == HET_TYPE_F32) &&
               node->src[2]->type == s1->type;
    default:              return false;
    }
}

size_t het_cpu_work_size(const struct het_tensor *node, int nth, bool f32_act, size_t l2_bytes)
{
    switch (node->op) {
    case HET_OP_MUL_MAT: return het_cpu_mul_mat_work_size(node, nth, f32_act);
    case HET_OP_ATTN:    return het_cpu_attn_work_size(node, nth, l2_bytes);
    case HET_OP_MUL_MAT_ID: return het_cpu_mul_mat_id_work_size(node, nth, f32_act);
    default:             return 0;
    }
}

size_t het_cpu_node_work(const struct het_tensor *node)
{
    size_t bytes = het_nbytes(node);
    for (int i = 0; i < HET_MAX_SRC && node->src[i]; i++) bytes += het_nbytes(node->src[i]);
    const struct het_tensor *a = node->src[0], *b = node->src[1];
    if (node->op == HET_OP_MUL_MAT && a && b) /* the weights pass once per 4 rows of b */
        bytes += het_nbytes(a) * (size_t)((het_nrows(b) + 3) / 4 - 1);
    if (node->op == HET_OP_ATTN && b && node->src[2] && b->ne[1] > 0) /* K, V: once per 48 query rows of a kv head */
        bytes += (het_nbytes(b) + het_nbytes(node->src[2])) * (size_t)((het_nrows(a) / b->ne[1] + 47) / 48 - 1);
    return bytes;
}

enum het_status het_cpu_compute(const struct het_compute_params *p, struct het_tensor *node)
{
    switch (node->op) {
    case HET_OP_MUL_MAT:  return het_cpu_mul_mat(p, node);
    case HET_OP_GET_ROWS: return het_cpu_get_rows(p, node);
    case HET_OP_ADD:      return het_cpu_add(p, node);
    case HET_OP_MUL:      return het_cpu_mul(p, node);
    case HET_OP_SCALE:    return het_cpu_scale(p, node);
    case HET_OP_RMS_NORM: return het_cpu_rms_norm(p, node);
    case HET_OP_ROPE:     return het_cpu_rope(p, node);
    case HET_OP_SOFTMAX:  return het_cpu_softmax(p, node);
    case HET_OP_SILU:     return het_cpu_silu(p, node);
    case HET_OP_SWIGLU:   return het_cpu_swiglu(p, node);
    case HET_OP_CPY:      return het_cpu_cpy(p, node);
    case HET_OP_CONT:     return het_cpu_cont(p, node);
    case HET_OP_ATTN:     return het_cpu_attn(p, node);
    case HET_OP_MUL_MAT_ID: return het_cpu_mul_mat_id(p, node);
    case HET_OP_TOP_K:    return het_cpu_top_k(p, node);
    case HET_OP_SUM_ROWS: return het_cpu_sum_rows(p, node);
    case HET_OP_DIV:      return het_cpu_div(p, node);
    case HET_OP_SIGMOID:  return het_cpu_sigmoid(p, node);
    case HET_OP_MOE_SUM:  return het_cpu_moe_sum(p, node);
    default:              return HET_ERR_UNSUPPORTED;
    }
}

/* The step that matmuls lead at nodes[0], given het_cpu_fused_len's len
 * there (het_cpu_mm_step_plan). */
static int mm_step_plan(const struct het_compute_params *p, struct het_tensor *const *nodes, int n, int len,
                        struct het_cpu_mm_step *s, enum het_status *st)
{
    *st = HET_OK;
    if (nodes[0]->op == HET_OP_MUL_MAT) return het_cpu_mm_step_group(p, nodes, n, NULL, s, st);
    if (len > 1 && nodes[0]->op == HET_OP_ADD) {
        struct het_cpu_residual_norm r;
        if (!het_cpu_residual_norm_find(nodes, n, &r)) return 0;
        const int ng = het_cpu_mm_step_group(p, nodes + 3, n - 3, &r, s, st);
        return ng > 0 ? 3 + ng : 0;
    }
    if (len > 1 && nodes[0]->op == HET_OP_SWIGLU) return het_cpu_mm_step_swiglu(p, nodes[1], s, st);
    return 0;
}

int het_cpu_mm_step_plan(const struct het_compute_params *p, struct het_tensor *const *nodes, int n,
                         struct het_cpu_mm_step *s, enum het_status *st)
{
    *st = HET_OK;
    if (n < 1) return 0;
    return mm_step_plan(p, nodes, n, nodes[0]->op == HET_OP_MUL_MAT ? 1 : het_cpu_fused_len(nodes, n), s, st);
}

int het_cpu_compute_nodes(const struct het_compute_params *p, struct het_tensor *const *nodes, int n,
                          enum het_status *st)
{
    if (n < 1) {
        *st = HET_OK;
        return 0;
    }
    /* the fusions het_cpu_fused_len finds, and nothing else, run fused */
    const int len = nodes[0]->op == HET_OP_MUL_MAT ? 1 : het_cpu_fused_len(nodes, n);
    _Alignas(64) unsigned char buf[HET_CPU_MM_STEP_BYTES];
    struct het_cpu_mm_step *s = (struct het_cpu_mm_step *)(void *)buf;
    const int planned = mm_step_plan(p, nodes, n, len, s, st);
    if (planned > 0) return *st == HET_OK ? het_cpu_mm_step_run(p, s, st) : planned;
    /* a residual norm whose matmuls do not make their own activations
     * (F32 activations, more rows than a decode): the sum alone, and the
     * nodes after it as nodes */
    if (len > 1 && nodes[0]->op == HET_OP_ADD) {
        *st = het_cpu_add(p, nodes[0]);
        return 1;
    }
    if (len > 1) {
        const int used = het_cpu_norm_chain(p, nodes, len, st);
        if (used > 0) return used;
    }
    *st = het_cpu_compute(p, nodes[0]);
    return 1;
}

int het_cpu_fused_len(struct het_tensor *const *nodes, int n)
{
    if (n > 1 && het_cpu_mul_mat_takes_swiglu(nodes[0], nodes[1])) return 2;
    struct het_cpu_residual_norm rn;
    if (n > 3 && nodes[0]->op == HET_OP_ADD && het_cpu_residual_norm_find(nodes, n, &rn)) return 4;
    const int chain = n > 1 && nodes[0]->op == HET_OP_RMS_NORM ? het_cpu_norm_chain_len(nodes, n) : 0;
    return chain > 1 ? chain : 1;
}
