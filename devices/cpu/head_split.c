/*
 * head_split.c — a decode layer's per-head nodes and its attention as one
 * step cut by kv heads.
 *
 * Between the q/k/v matmuls and the output matmul, a decode layer runs a few
 * nodes on each head: q's and k's norms, gains and rotations, the cache
 * writes of k and v, then the attention over the cache. Each works head by
 * head (dim 1 is the head: row h of its output depends on row h of its
 * inputs only, its other dims are the tokens), and the q heads of one GQA
 * group read only their kv head. So the block can be cut by groups of kv
 * heads into parts that share no data, each run start to end by one thread:
 * one step end for the block instead of two (the small nodes as one step,
 * then the attention), and, as the q/k/v matmuls hand thread t the rows of
 * the t-th share of the heads, a thread mostly reads what it wrote, which
 * is what counts where cores do not share a cache.
 *
 * A part runs the nodes, in order, on copies of their tensors narrowed to
 * its heads (dim 1 cut to them, data moved to the first), through the same
 * kernels the nodes run on whole, so its outputs are bit for bit theirs.
 * What is narrowed and by how much: a tensor whose dim 1 is the kv head
 * count holds kv heads; one whose dim 1 is the attention's head count, q
 * heads (n_rep of them per kv head); one with a dim 1 of 1 that a node only
 * reads (a gain, the positions) is the same for every head and stays whole.
 * Any other tensor, any other op, a node of one row: the block is not cut.
 *
 * The parts must not touch each other's bytes: the scratch planner reuses
 * storage, and a cache write's view lies inside the attention's view of the
 * cache. Two tensors whose bytes overlap are allowed only when group g of
 * one can meet group g of the other alone: the same stride from one group
 * of heads to the next, each group's bytes within that stride, and one
 * tensor's group inside the other's slot (the cache write's one position
 * inside the attention's rows of the same head). Anything else refuses.
 */
#include "devices/cpu/head_split.h"

#include "devices/cpu/vec.h"

#define HS_MAX_NODES   16
/* Bytes of a head's keys (and of its values) asked for before the part's
 * small nodes run: a short cache's whole rows; a long one's first rows (the
 * attention streams on from there). */
#define HS_KV_AHEAD    (32u << 10)
#define HS_MAX_TENSORS (HS_MAX_NODES * (1 + HET_MAX_SRC))

enum hs_kind { HS_WHOLE, HS_Q, HS_KV };

/* The block's distinct tensors, its nodes first, in order. */
struct hs_block {
    int                n_t;
    struct het_tensor *t[HS_MAX_TENSORS];
    uint8_t            kind[HS_MAX_TENSORS];
    int64_t            n_head, n_kv, rep; /* the attention's q heads, kv heads, q heads per kv head */
};

static int hs_index(const struct hs_block *b, const struct het_tensor *t)
{
    for (int i = 0; i < b->n_t; i++)
        if (b->t[i] == t) return i;
    return -1;
}

/* kv heads first: with as many q heads as kv heads, q is cut alike */
static int hs_kind_of(const struct hs_block *b, const struct het_tensor *t)
{
    if (t->ne[1] == b->n_kv) return HS_KV;
    if (t->ne[1] == b->n_head) return HS_Q;
    if (t->ne[1] == 1) return HS_WHOLE;
    return -1;
}

static int64_t hs_rows(const struct hs_block *b, int kind) { return kind == HS_Q ? b->rep : 1; }

static bool hs_same_ne(const struct het_tensor *x, const struct het_tensor *y)
{
    for (int d = 0; d < HET_MAX_DIMS; d++)
        if (x->ne[d] != y->ne[d]) return false;
    return true;
}

/* Does node t (the block's last when last) work head by head, its sources
 * of the kinds that allows? */
static bool hs_node_ok(const struct hs_block *b, const struct het_tensor *t, bool last)
{
    const int kind = hs_kind_of(b, t);
    const struct het_tensor *s0 = t->src[0], *s1 = t->src[1];
    if (kind != HS_Q && kind != HS_KV) return false;
    if (last) { /* q and the output in q heads, k and v in kv heads, nothing else */
        const struct het_tensor *s2 = t->src[2];
        if (t->op != HET_OP_ATTN || !s0 || !s1 || !s2 || t->src[3]) return false;
        const int q = hs_kind_of(b, s0);
        return (q == HS_Q || q == HS_KV) && hs_rows(b, q) == b->rep && hs_rows(b, kind) == b->rep &&
               hs_kind_of(b, s1) == HS_KV && hs_kind_of(b, s2) == HS_KV;
    }
    if (!s0 || hs_kind_of(b, s0) != kind || !hs_same_ne(s0, t)) return false;
    switch (t->op) {
    case HET_OP_RMS_NORM:
        return !s1;
    case HET_OP_MUL: /* the gain: one row for every head, or the node's own shape */
        return s1 && !t->src[2] &&
               (hs_kind_of(b, s1) == HS_WHOLE || (hs_kind_of(b, s1) == kind && hs_same_ne(s1, t)));
    case HET_OP_ROPE: /* the positions, the frequency factors: by token or dim 0 */
        for (int s = 1; s < HET_MAX_SRC && t->src[s]; s++)
            if (hs_kind_of(b, t->src[s]) != HS_WHOLE) return false;
        return true;
    case HET_OP_CPY: /* into a view of the same shape */
        return s1 && !t->src[2] && hs_kind_of(b, s1) == kind && hs_same_ne(s1, t);
    default:
        return false;
    }
}

static bool hs_build(struct hs_block *b, struct het_tensor *const *nodes, int n)
{
    if (n < 1 || n > HS_MAX_NODES) return false;
    const struct het_tensor *attn = nodes[n - 1];
    if (attn->op != HET_OP_ATTN || !attn->src[0] || !attn->src[1]) return false;
    b->n_head = attn->src[0]->ne[1];
    b->n_kv = attn->src[1]->ne[1];
    if (b->n_kv < 2 || b->n_head < b->n_kv || b->n_head % b->n_kv) return false;
    b->rep = b->n_head / b->n_kv;
    b->n_t = 0;
    for (int i = 0; i < n; i++) {
        if (hs_index(b, nodes[i]) >= 0) return false; /* a node twice */
        b->t[b->n_t++] = nodes[i];
    }
    for (int i = 0; i < n; i++) {
        if (!hs_node_ok(b, nodes[i], i == n - 1)) return false;
        for (int s = 0; s < HET_MAX_SRC && nodes[i]->src[s]; s++)
            if (hs_index(b, nodes[i]->src[s]) < 0) b->t[b->n_t++] = nodes[i]->src[s];
    }
    for (int i = 0; i < b->n_t; i++) b->kind[i] = (uint8_t)hs_kind_of(b, b->t[i]);
    return true;
}

/* A tensor's bytes: where they start and end, one group of heads' bytes
 * (from its first) and the stride from one group to the next. */
struct hs_span {
    uintptr_t lo, hi;
    size_t    group, stride;
};

static struct hs_span hs_span_of(const struct hs_block *b, int i)
{
    const struct het_tensor *t = b->t[i];
    const size_t bytes = het_nbytes(t);
    const int64_t r = hs_rows(b, b->kind[i]);
    return (struct hs_span){ .lo = (uintptr_t)t->data, .hi = (uintptr_t)t->data + bytes,
                             .group = bytes - (size_t)(t->ne[1] - r) * t->nb[1], .stride = t->nb[1] * (size_t)r };
}

/* Whether tensors i and j, at least one written, may be cut into parts
 * that run side by side. */
static bool hs_apart(const struct hs_block *b, const struct hs_span *sp, int i, int j)
{
    const struct hs_span *x = &sp[i], *y = &sp[j];
    if (x->hi <= y->lo || y->hi <= x->lo) return true;
    if (b->kind[i] == HS_WHOLE || b->kind[j] == HS_WHOLE || x->stride != y->stride) return false;
    /* one's group g inside the other's slot g (each group within its stride) */
    if (x->lo >= y->lo) return x->lo - y->lo + x->group <= x->stride;
    return y->lo - x->lo + y->group <= x->stride;
}

int het_cpu_head_split_parts(struct het_tensor *const *nodes, int n, int max_parts)
{
    struct hs_block b;
    if (max_parts < 2 || !hs_build(&b, nodes, n)) return 1;
    struct hs_span sp[HS_MAX_TENSORS];
    for (int i = 0; i < b.n_t; i++) {
        const struct het_tensor *t = b.t[i];
        if (!t->data) return 1;
        for (int d = 0; d < HET_MAX_DIMS; d++)
            if (t->ne[d] > 1 && (int64_t)t->nb[d] <= 0) return 1;
        sp[i] = hs_span_of(&b, i);
        if (sp[i].hi == sp[i].lo) return 1;
        if (b.kind[i] == HS_WHOLE) {
            if (i < n) return 1; /* a node of one row: every part would write it */
            continue;
        }
        if (sp[i].group > sp[i].stride) return 1; /* a tensor's groups of heads apart */
    }
    for (int i = 0; i < n; i++) /* every pair with a node (the nodes write) */
        for (int j = 0; j < b.n_t; j++)
            if (j != i && (j > i || j >= n) && !hs_apart(&b, sp, i, j)) return 1;
    return (int)(b.n_kv < max_parts ? b.n_kv : max_parts);
}

/* The attention's keys and values are its part's largest read and its last:
 * asked for before the norms, ropes and cache writes run, their latency
 * passes meanwhile. Measured (Qwen3-0.6B Q4_0 decode, 2 threads, Zen 5; the
 * same process alternating with and without it token by token): the
 * attention of a part 4.8 -> 3.5 us, asking 0.6 us; tokens 0.9% shorter with
 * the threads on two CCDs, 0.3-0.5% on one. */
static void hs_kv_ahead(const struct het_tensor *kv)
{
    const size_t row = (size_t)kv->ne[0] * kv->nb[0];
    const int64_t most = (int64_t)((HS_KV_AHEAD + row - 1) / row), rows = kv->ne[2] < most ? kv->ne[2] : most;
    for (int64_t h = 0; h < kv->ne[1]; h++) het_vec_prefetch_rows(het_vec_row(kv, h, 0, 0), rows, kv->nb[2], row);
}

enum het_status het_cpu_head_split_run(const struct het_compute_params *p, struct het_tensor *const *nodes, int n,
                                       int part, int n_parts, int *failed)
{
    *failed = 0;
    struct hs_block b;
    if (!hs_build(&b, nodes, n) || part < 0 || part >= n_parts || n_parts > b.n_kv) return HET_ERR_INVALID;
    int64_t g0, g1;
    het_vec_split(b.n_kv, part, n_parts, &g0, &g1);
    /* every tensor narrowed to the part's heads (the whole ones as they are) */
    struct het_tensor cut[HS_MAX_TENSORS];
    struct het_tensor *use[HS_MAX_TENSORS];
    for (int i = 0; i < b.n_t; i++) {
        use[i] = b.t[i];
        if (b.kind[i] == HS_WHOLE) continue;
        const int64_t r = hs_rows(&b, b.kind[i]);
        const size_t off = (size_t)(g0 * r) * b.t[i]->nb[1];
        cut[i] = *b.t[i];
        cut[i].ne[1] = (g1 - g0) * r;
        cut[i].data = (char *)cut[i].data + off;
        cut[i].view_offs += off;
        use[i] = &cut[i];
    }
    for (int i = 0; i < n; i++)
        for (int s = 0; s < HET_MAX_SRC && nodes[i]->src[s]; s++) cut[i].src[s] = use[hs_index(&b, nodes[i]->src[s])];
    hs_kv_ahead(use[n - 1]->src[1]);
    hs_kv_ahead(use[n - 1]->src[2]);
    for (int i = 0, used; i < n; i += used) {
        enum het_status st;
        used = het_cpu_compute_nodes(p, use + i, n - i, &st);
        if (st != HET_OK) {
            *failed = i;
            return st;
        }
    }
    return HET_OK;
}
