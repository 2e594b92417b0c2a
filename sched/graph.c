/*
 * graph.c — the graph arena and the op builders.
 *
 * Builders only record: they allocate a tensor in the graph's arena, set its
 * shape, strides, op, sources and op_params, and append compute nodes to the
 * node list (views are not nodes: they compute nothing and are resolved when
 * storage is assigned). Shape errors are recorded in a sticky status so
 * model code can build a whole graph and check once.
 */
#include "het/graph.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct het_graph {
    struct het_tensor  *arena;     /* all tensors (max_tensors)          */
    int                 n_tensors;
    int                 max_tensors;
    struct het_tensor **nodes;     /* compute nodes in topological order */
    int                 n_nodes;
    het_error           err;       /* sticky: first failure              */
};

het_graph *het_graph_init(int max_tensors)
{
    het_graph *g = calloc(1, sizeof *g);
    if (!g) return NULL;
    g->arena = calloc((size_t)max_tensors, sizeof *g->arena);
    g->nodes = calloc((size_t)max_tensors, sizeof *g->nodes);
    if (!g->arena || !g->nodes) {
        het_graph_free(g);
        return NULL;
    }
    g->max_tensors = max_tensors;
    return g;
}

void het_graph_free(het_graph *g)
{
    if (!g) return;
    free(g->arena);
    free(g->nodes);
    free(g);
}

void het_graph_reset(het_graph *g)
{
    g->n_tensors = 0;
    g->n_nodes = 0;
    g->err.status = HET_OK;
    g->err.msg[0] = 0;
}

int het_graph_n_nodes(const het_graph *g) { return g->n_nodes; }
struct het_tensor *het_graph_node(const het_graph *g, int i) { return g->nodes[i]; }
struct het_tensor *const *het_graph_nodes(const het_graph *g) { return g->nodes; }
int het_graph_n_tensors(const het_graph *g) { return g->n_tensors; }
struct het_tensor *het_graph_tensor(const het_graph *g, int i) { return &g->arena[i]; }

void het_graph_mark_readers(het_graph *g)
{
    uint8_t *reads = calloc((size_t)g->n_nodes + 1, 1);
    for (int i = 0; i < g->n_nodes; i++) {
        struct het_tensor *n = g->nodes[i];
        n->flags &= ~(uint32_t)HET_TENSOR_FLAG_ONE_READER;
        for (int s = 0; reads && s < HET_MAX_SRC && n->src[s]; s++) {
            const struct het_tensor *o = het_tensor_owner(n->src[s]);
            if (o->id >= 0 && o->id < g->n_nodes && g->nodes[o->id] == o && reads[o->id] < 255) reads[o->id]++;
        }
    }
    /* out of memory: no node is marked and every count says "many", which is safe */
    for (int i = 0; i < g->n_nodes; i++) {
        g->nodes[i]->n_readers = reads ? reads[i] : 255;
        if (reads && reads[i] == 1 && !(g->nodes[i]->flags & HET_TENSOR_FLAG_OUTPUT))
            g->nodes[i]->flags |= HET_TENSOR_FLAG_ONE_READER;
    }
    free(reads);
}

enum het_status het_graph_status(const het_graph *g, het_error *err)
{
    if (g->err.status != HET_OK && err) *err = g->err;
    return g->err.status;
}

static struct het_tensor *fail(het_graph *g, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static struct het_tensor *fail(het_graph *g, const char *fmt, ...)
{
    if (g->err.status == HET_OK) {
        va_list ap;
        va_start(ap, fmt);
        het_error_setv(&g->err, HET_ERR_INVALID, fmt, ap);
        va_end(ap);
    }
    return NULL;
}

static struct het_tensor *alloc_tensor(het_graph *g)
{
    if (g->err.status != HET_OK) return NULL;
    if (g->n_tensors >= g->max_tensors) return fail(g, "graph: arena full (%d tensors)", g->max_tensors);
    struct het_tensor *t = &g->arena[g->n_tensors++];
    memset(t, 0, sizeof *t);
    t->id = -1;
    return t;
}

struct het_tensor *het_new_tensor(het_graph *g, enum het_type type, int n_dims, const int64_t *ne)
{
    struct het_tensor *t = alloc_tensor(g);
    if (!t) return NULL;
    het_tensor_init(t, type, n_dims, ne);
    return t;
}

/* A new F32 (or given type) dense result of op over sources, appended as a node. */
/* name = the first a_max characters of a, then b, cut to the name's room:
 * what snprintf("%.*s%s") would write. Every node and view is named as it
 * is built, a few hundred a decode token, and snprintf's format parsing was
 * a measurable part of building the graph. */
static void name_join(char name[HET_MAX_NAME], const char *a, size_t a_max, const char *b)
{
    size_t n = strnlen(a, a_max < HET_MAX_NAME - 1 ? a_max : HET_MAX_NAME - 1);
    memmove(name, a, n); /* (a may be the name itself) */
    size_t m = strnlen(b, HET_MAX_NAME - 1 - n);
    memcpy(name + n, b, m);
    name[n + m] = '\0';
}

/* "#<id>" into buf (room for any int). */
static const char *name_id(char buf[16], int id)
{
    char *p = buf + 15;
    *p = '\0';
    unsigned u = id < 0 ? 0u - (unsigned)id : (unsigned)id;
    do *--p = (char)('0' + u % 10); while (u /= 10);
    if (id < 0) *--p = '-';
    *--p = '#';
    return p;
}

static struct het_tensor *new_node(het_graph *g, enum het_op op, enum het_type type, const int64_t ne[4],
                                   struct het_tensor *s0, struct het_tensor *s1, struct het_tensor *s2)
{
    struct het_tensor *t = alloc_tensor(g);
    if (!t) return NULL;
    het_tensor_init(t, type, 4, ne);
    t->op = op;
    t->src[0] = s0;
    t->src[1] = s1;
    t->src[2] = s2;
    t->id = g->n_nodes;
    char id[16];
    name_join(t->name, het_op_name(op), HET_MAX_NAME, name_id(id, t->id)); /* until the model names it */
    g->nodes[g->n_nodes++] = t;
    return t;
}

/* ---------------------------------------------------------------------------
 * views                                                                     */

static struct het_tensor *new_view(het_graph *g, struct het_tensor *a, size_t offset)
{
    if (!a) return NULL;
    struct het_tensor *t = alloc_tensor(g);
    if (!t) return NULL;
    t->type = a->type;
    t->op = HET_OP_VIEW;
    t->src[0] = a;
    t->view_src = het_tensor_owner(a);
    t->view_offs = (a->view_src ? a->view_offs : 0) + offset;
    t->data = a->data ? (char *)a->data + offset : NULL;
    t->flags = a->flags & (HET_TENSOR_FLAG_WEIGHT | HET_TENSOR_FLAG_STATE);
    name_join(t->name, a->name, 56, " (view)");
    return t;
}

struct het_tensor *het_view_4d(het_graph *g, struct het_tensor *a, int64_t ne0, int64_t ne1, int64_t ne2,
                               int64_t ne3, size_t nb1, size_t nb2, size_t nb3, size_t offset)
{
    struct het_tensor *t = new_view(g, a, offset);
    if (!t) return NULL;
    t->ne[0] = ne0; t->ne[1] = ne1; t->ne[2] = ne2; t->ne[3] = ne3;
    t->nb[0] = a->nb[0]; t->nb[1] = nb1; t->nb[2] = nb2; t->nb[3] = nb3;
    size_t ext = het_nbytes(t), owner_size = het_nbytes(t->view_src);
    if (t->view_offs + ext > owner_size)
        return fail(g, "graph: view of '%s' out of bounds (%zu + %zu > %zu)", a->name, t->view_offs, ext,
                    owner_size);
    return t;
}

struct het_tensor *het_view_3d(het_graph *g, struct het_tensor *a, int64_t ne0, int64_t ne1, int64_t ne2,
                               size_t nb1, size_t nb2, size_t offset)
{
    return het_view_4d(g, a, ne0, ne1, ne2, 1, nb1, nb2, nb2 * (size_t)ne2, offset);
}

struct het_tensor *het_view_2d(het_graph *g, struct het_tensor *a, int64_t ne0, int64_t ne1, size_t nb1,
                               size_t offset)
{
    return het_view_4d(g, a, ne0, ne1, 1, 1, nb1, nb1 * (size_t)ne1, nb1 * (size_t)ne1, offset);
}

struct het_tensor *het_view_1d(het_graph *g, struct het_tensor *a, int64_t ne0, size_t offset)
{
    size_t rs = het_type_row_size(a->type, ne0);
    return het_view_4d(g, a, ne0, 1, 1, 1, rs, rs, rs, offset);
}

static struct het_tensor *reshape(het_graph *g, struct het_tensor *a, int n, const int64_t *ne)
{
    if (!a) return NULL;
    if (!het_is_contiguous(a)) return fail(g, "graph: reshape of non-contiguous '%s'", a->name);
    int64_t n_el = 1;
    for (int i = 0; i < n; i++) n_el *= ne[i];
    if (n_el != het_nelements(a)) return fail(g, "graph: reshape of '%s' changes the element count", a->name);
    struct het_tensor *t = new_view(g, a, 0);
    if (!t) return NULL;
    struct het_tensor tmp;
    het_tensor_init(&tmp, a->type, n, ne);
    memcpy(t->ne, tmp.ne, sizeof t->ne);
    memcpy(t->nb, tmp.nb, sizeof t->nb);
    return t;
}

struct het_tensor *het_reshape_2d(het_graph *g, struct het_tensor *a, int64_t ne0, int64_t ne1)
{
    const int64_t ne[2] = { ne0, ne1 };
    return reshape(g, a, 2, ne);
}

struct het_tensor *het_reshape_3d(het_graph *g, struct het_tensor *a, int64_t ne0, int64_t ne1, int64_t ne2)
{
    const int64_t ne[3] = { ne0, ne1, ne2 };
    return reshape(g, a, 3, ne);
}

struct het_tensor *het_permute(het_graph *g, struct het_tensor *a, int ax0, int ax1, int ax2, int ax3)
{
    const int ax[4] = { ax0, ax1, ax2, ax3 };
    int seen = 0;
    for (int i = 0; i < 4; i++) {
        if (ax[i] < 0 || ax[i] > 3 || (seen & (1 << ax[i]))) return fail(g, "graph: bad permutation");
        seen |= 1 << ax[i];
    }
    struct het_tensor *t = new_view(g, a, 0);
    if (!t) return NULL;
    for (int i = 0; i < 4; i++) {
        t->ne[ax[i]] = a->ne[i];
        t->nb[ax[i]] = a->nb[i];
    }
    return t;
}

struct het_tensor *het_transpose(het_graph *g, struct het_tensor *a)
{
    return het_permute(g, a, 1, 0, 2, 3);
}

/* ---------------------------------------------------------------------------
 * compute ops                                                               */

static bool can_broadcast(const struct het_tensor *a, const struct het_tensor *b)
{
    for (int i = 0; i < 4; i++)
        if (b->ne[i] != 1 && b->ne[i] != a->ne[i]) return false;
    return true;
}

struct het_tensor *het_get_rows(het_graph *g, struct het_tensor *a, struct het_tensor *ids)
{
    if (!a || !ids) return NULL;
    if (ids->type != HET_TYPE_I32) return fail(g, "graph: get_rows ids must be i32");
    const int64_t ne[4] = { a->ne[0], ids->ne[0], ids->ne[1], 1 };
    return new_node(g, HET_OP_GET_ROWS, HET_TYPE_F32, ne, a, ids, NULL);
}

struct het_tensor *het_mul_mat(het_graph *g, struct het_tensor *a, struct het_tensor *b)
{
    if (!a || !b) return NULL;
    if (a->ne[0] != b->ne[0])
        return fail(g, "graph: mul_mat '%s' x '%s': K mismatch (%lld vs %lld)", a->name, b->name,
                    (long long)a->ne[0], (long long)b->ne[0]);
    if (b->type != HET_TYPE_F32) return fail(g, "graph: mul_mat activations '%s' must be f32", b->name);
    if (b->ne[2] % a->ne[2] || b->ne[3] % a->ne[3])
        return fail(g, "graph: mul_mat '%s' cannot broadcast over '%s'", a->name, b->name);
    const int64_t ne[4] = { a->ne[1], b->ne[1], b->ne[2], b->ne[3] };
    return new_node(g, HET_OP_MUL_MAT, HET_TYPE_F32, ne, a, b, NULL);
}

static struct het_tensor *binary(het_graph *g, enum het_op op, struct het_tensor *a, struct het_tensor *b)
{
    if (!a || !b) return NULL;
    if (!can_broadcast(a, b))
        return fail(g, "graph: %s '%s' and '%s' shapes do not broadcast", het_op_name(op), a->name, b->name);
    return new_node(g, op, HET_TYPE_F32, a->ne, a, b, NULL);
}

struct het_tensor *het_add(het_graph *g, struct het_tensor *a, struct het_tensor *b) { return binary(g, HET_OP_ADD, a, b); }
struct het_tensor *het_mul(het_graph *g, struct het_tensor *a, struct het_tensor *b) { return binary(g, HET_OP_MUL, a, b); }

struct het_tensor *het_scale(het_graph *g, struct het_tensor *a, float s)
{
    if (!a) return NULL;
    struct het_tensor *t = new_node(g, HET_OP_SCALE, HET_TYPE_F32, a->ne, a, NULL, NULL);
    if (t) het_set_op_param_f32(t, 0, s);
    return t;
}

struct het_tensor *het_rms_norm(het_graph *g, struct het_tensor *a, float eps)
{
    if (!a) return NULL;
    struct het_tensor *t = new_node(g, HET_OP_RMS_NORM, HET_TYPE_F32, a->ne, a, NULL, NULL);
    if (t) het_set_op_param_f32(t, 0, eps);
    return t;
}

struct het_tensor *het_rope(het_graph *g, struct het_tensor *a, struct het_tensor *pos, int n_dims,
                            enum het_rope_mode mode, float freq_base, float freq_scale)
{
    if (!a || !pos) return NULL;
    if (pos->type != HET_TYPE_I32 || pos->ne[0] != a->ne[2])
        return fail(g, "graph: rope positions must be i32 with one per token");
    if (n_dims <= 0 || n_dims > a->ne[0] || n_dims % 2)
        return fail(g, "graph: rope n_dims %d invalid for head_dim %lld", n_dims, (long long)a->ne[0]);
    struct het_tensor *t = new_node(g, HET_OP_ROPE, HET_TYPE_F32, a->ne, a, pos, NULL);
    if (!t) return NULL;
    t->op_params[0] = n_dims;
    t->op_params[1] = (int32_t)mode;
    het_set_op_param_f32(t, 2, freq_base);
    het_set_op_param_f32(t, 3, freq_scale);
    return t;
}

struct het_tensor *het_softmax(het_graph *g, struct het_tensor *a, struct het_tensor *mask, float scale,
                               int32_t causal_past)
{
    if (!a) return NULL;
    if (mask && (mask->type != HET_TYPE_F32 || mask->ne[0] != a->ne[0] || mask->ne[1] != a->ne[1]))
        return fail(g, "graph: softmax mask shape must be (%lld, %lld) f32", (long long)a->ne[0],
                    (long long)a->ne[1]);
    struct het_tensor *t = new_node(g, HET_OP_SOFTMAX, HET_TYPE_F32, a->ne, a, mask, NULL);
    if (!t) return NULL;
    het_set_op_param_f32(t, 0, scale);
    t->op_params[1] = causal_past;
    return t;
}

struct het_tensor *het_silu(het_graph *g, struct het_tensor *a)
{
    if (!a) return NULL;
    return new_node(g, HET_OP_SILU, HET_TYPE_F32, a->ne, a, NULL, NULL);
}

struct het_tensor *het_swiglu(het_graph *g, struct het_tensor *gate, struct het_tensor *up)
{
    if (!gate || !up) return NULL;
    if (!het_same_shape(gate, up)) return fail(g, "graph: swiglu gate/up shapes differ");
    return new_node(g, HET_OP_SWIGLU, HET_TYPE_F32, gate->ne, gate, up, NULL);
}

struct het_tensor *het_cpy(het_graph *g, struct het_tensor *a, struct het_tensor *dst)
{
    if (!a || !dst) return NULL;
    if (het_nelements(a) != het_nelements(dst))
        return fail(g, "graph: cpy '%s' -> '%s' element counts differ", a->name, dst->name);
    struct het_tensor *t = alloc_tensor(g);
    if (!t) return NULL;
    *t = *dst;                       /* same shape, strides and storage as dst */
    t->op = HET_OP_CPY;
    memset(t->src, 0, sizeof t->src);
    memset(t->op_params, 0, sizeof t->op_params);
    t->src[0] = a;
    t->src[1] = dst;
    t->view_src = het_tensor_owner(dst);
    t->view_offs = dst->view_src ? dst->view_offs : 0;
    t->id = g->n_nodes;
    name_join(t->name, dst->name, 56, " (cpy)");
    g->nodes[g->n_nodes++] = t;
    return t;
}

struct het_tensor *het_cont(het_graph *g, struct het_tensor *a)
{
    if (!a) return NULL;
    return new_node(g, HET_OP_CONT, HET_TYPE_F32, a->ne, a, NULL, NULL);
}

struct het_tensor *het_attn(het_graph *g, struct het_tensor *q, struct het_tensor *k, struct het_tensor *v,
                            float scale, int32_t n_past)
{
    if (!q || !k || !v) return NULL;
    if (q->ne[0] != k->ne[0] || k->ne[0] != v->ne[0] || !het_same_shape(k, v))
        return fail(g, "graph: attn head dims of q/k/v differ");
    if (k->ne[1] <= 0 || q->ne[1] % k->ne[1])
        return fail(g, "graph: attn n_head %lld not a multiple of n_kv_head %lld", (long long)q->ne[1],
                    (long long)k->ne[1]);
    struct het_tensor *t = new_node(g, HET_OP_ATTN, HET_TYPE_F32, q->ne, q, k, v);
    if (!t) return NULL;
    het_set_op_param_f32(t, 0, scale);
    t->op_params[1] = n_past;
    return t;
}

/* ---------------------------------------------------------------------------
 * mixture of experts (contracts in graph.h)                                  */

struct het_tensor *het_mul_mat_id(het_graph *g, struct het_tensor *as, struct het_tensor *b,
                                  struct het_tensor *ids)
{
    if (!as || !b || !ids) return NULL;
    if (ids->type != HET_TYPE_I32) return fail(g, "graph: mul_mat_id ids '%s' must be i32", ids->name);
    if (b->type != HET_TYPE_F32) return fail(g, "graph: mul_mat_id activations '%s' must be f32", b->name);
    if (as->ne[0] != b->ne[0])
        return fail(g, "graph: mul_mat_id '%s' x '%s': K mismatch (%lld vs %lld)", as->name, b->name,
                    (long long)as->ne[0], (long long)b->ne[0]);
    if (as->ne[3] != 1 || b->ne[3] != 1 || ids->ne[2] != 1 || ids->ne[3] != 1)
        return fail(g, "graph: mul_mat_id '%s' takes 3-D experts, 3-D input and 2-D ids", as->name);
    if (ids->ne[1] != b->ne[2])
        return fail(g, "graph: mul_mat_id '%s': %lld tokens of ids but %lld of input", as->name,
                    (long long)ids->ne[1], (long long)b->ne[2]);
    if (b->ne[1] != 1 && b->ne[1] != ids->ne[0])
        return fail(g, "graph: mul_mat_id '%s': input has %lld columns per token, want 1 or k=%lld", as->name,
                    (long long)b->ne[1], (long long)ids->ne[0]);
    const int64_t ne[4] = { as->ne[1], ids->ne[0], ids->ne[1], 1 };
    return new_node(g, HET_OP_MUL_MAT_ID, HET_TYPE_F32, ne, as, b, ids);
}

struct het_tensor *het_top_k(het_graph *g, struct het_tensor *a, int k)
{
    if (!a) return NULL;
    if (a->type != HET_TYPE_F32) return fail(g, "graph: top_k of '%s' needs f32", a->name);
    if (k < 1 || k > a->ne[0])
        return fail(g, "graph: top_k k=%d out of range for rows of %lld", k, (long long)a->ne[0]);
    const int64_t ne[4] = { k, a->ne[1], a->ne[2], a->ne[3] };
    struct het_tensor *t = new_node(g, HET_OP_TOP_K, HET_TYPE_I32, ne, a, NULL, NULL);
    if (t) t->op_params[0] = k;
    return t;
}

struct het_tensor *het_sum_rows(het_graph *g, struct het_tensor *a)
{
    if (!a) return NULL;
    const int64_t ne[4] = { 1, a->ne[1], a->ne[2], a->ne[3] };
    return new_node(g, HET_OP_SUM_ROWS, HET_TYPE_F32, ne, a, NULL, NULL);
}

struct het_tensor *het_div(het_graph *g, struct het_tensor *a, struct het_tensor *b) { return binary(g, HET_OP_DIV, a, b); }

struct het_tensor *het_sigmoid(het_graph *g, struct het_tensor *a)
{
    if (!a) return NULL;
    return new_node(g, HET_OP_SIGMOID, HET_TYPE_F32, a->ne, a, NULL, NULL);
}

struct het_tensor *het_moe_sum(het_graph *g, struct het_tensor *x, struct het_tensor *w)
{
    if (!x || !w) return NULL;
    if (x->type != HET_TYPE_F32 || w->type != HET_TYPE_F32)
        return fail(g, "graph: moe_sum '%s' needs f32 inputs", x->name);
    if (x->ne[3] != 1 || w->ne[0] != x->ne[1] || w->ne[1] != x->ne[2] || w->ne[2] != 1 || w->ne[3] != 1)
        return fail(g, "graph: moe_sum '%s': weights (%lld, %lld) do not match slots x tokens (%lld, %lld)",
                    x->name, (long long)w->ne[0], (long long)w->ne[1], (long long)x->ne[1], (long long)x->ne[2]);
    const int64_t ne[4] = { x->ne[0], x->ne[2], 1, 1 };
    return new_node(g, HET_OP_MOE_SUM, HET_TYPE_F32, ne, x, w, NULL);
}
