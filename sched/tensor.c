/*
 * tensor.c — queries on tensor metadata (sizes, contiguity, view owners).
 * Pure functions: no allocation, no device knowledge.
 */
#include "het/graph.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int64_t het_nelements(const struct het_tensor *t)
{
    return t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
}

int64_t het_nrows(const struct het_tensor *t)
{
    return t->ne[1] * t->ne[2] * t->ne[3];
}

size_t het_row_size(const struct het_tensor *t)
{
    return het_type_row_size(t->type, t->ne[0]);
}

size_t het_nbytes(const struct het_tensor *t)
{
    /* extent from element 0 to one past the last byte, any strides */
    for (int i = 0; i < HET_MAX_DIMS; i++)
        if (t->ne[i] <= 0) return 0;
    const struct het_type_traits *tr = het_type_get_traits(t->type);
    size_t n = (size_t)(t->ne[0] / tr->blck_size) * t->nb[0];
    if (tr->blck_size == 1) n = tr->type_size + (size_t)(t->ne[0] - 1) * t->nb[0];
    for (int i = 1; i < HET_MAX_DIMS; i++) n += (size_t)(t->ne[i] - 1) * t->nb[i];
    return n;
}

bool het_is_contiguous(const struct het_tensor *t)
{
    const struct het_type_traits *tr = het_type_get_traits(t->type);
    size_t expect = tr->type_size;
    if (t->nb[0] != expect) return false;
    expect = het_type_row_size(t->type, t->ne[0]);
    for (int i = 1; i < HET_MAX_DIMS; i++) {
        if (t->ne[i] != 1 && t->nb[i] != expect) return false;
        expect *= (size_t)t->ne[i];
    }
    return true;
}

bool het_is_contiguous_rows(const struct het_tensor *t)
{
    return t->nb[0] == het_type_get_traits(t->type)->type_size;
}

bool het_same_shape(const struct het_tensor *a, const struct het_tensor *b)
{
    for (int i = 0; i < HET_MAX_DIMS; i++)
        if (a->ne[i] != b->ne[i]) return false;
    return true;
}

struct het_tensor *het_tensor_owner(struct het_tensor *t)
{
    while (t->view_src) t = t->view_src;
    return t;
}

void het_tensor_init(struct het_tensor *t, enum het_type type, int n_dims, const int64_t *ne)
{
    memset(t, 0, sizeof *t);
    t->type = type;
    t->id = -1;
    for (int i = 0; i < HET_MAX_DIMS; i++) t->ne[i] = i < n_dims ? ne[i] : 1;
    const struct het_type_traits *tr = het_type_get_traits(type);
    t->nb[0] = tr->type_size;
    t->nb[1] = het_type_row_size(type, t->ne[0]);
    for (int i = 2; i < HET_MAX_DIMS; i++) t->nb[i] = t->nb[i - 1] * (size_t)t->ne[i - 1];
}

void het_tensor_set_name(struct het_tensor *t, const char *fmt, ...)
{
    if (!t) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t->name, sizeof t->name, fmt, ap);
    va_end(ap);
}

static const char *const op_names[HET_OP_COUNT] = {
    [HET_OP_NONE] = "none",         [HET_OP_VIEW] = "view",       [HET_OP_GET_ROWS] = "get_rows",
    [HET_OP_MUL_MAT] = "mul_mat",   [HET_OP_ADD] = "add",         [HET_OP_MUL] = "mul",
    [HET_OP_SCALE] = "scale",       [HET_OP_RMS_NORM] = "rms_norm", [HET_OP_ROPE] = "rope",
    [HET_OP_SOFTMAX] = "softmax",   [HET_OP_SILU] = "silu",       [HET_OP_SWIGLU] = "swiglu",
    [HET_OP_CPY] = "cpy",           [HET_OP_CONT] = "cont",       [HET_OP_ATTN] = "attn",
    [HET_OP_MUL_MAT_ID] = "mul_mat_id", [HET_OP_TOP_K] = "top_k", [HET_OP_SUM_ROWS] = "sum_rows",
    [HET_OP_DIV] = "div",           [HET_OP_SIGMOID] = "sigmoid", [HET_OP_MOE_SUM] = "moe_sum",
};
_Static_assert(HET_OP_COUNT == 21, "update op_names when adding an op");

const char *het_op_name(enum het_op op)
{
    return (unsigned)op < HET_OP_COUNT ? op_names[op] : "?";
}
