/*
 * norm_chain.c — RMS_NORM, the MUL by its gain, and a ROPE after them, in
 * one pass over the rows.
 *
 * Every layer multiplies its attention and FFN norms by a gain, and a Qwen3
 * layer also norms each head of q and k, multiplies by a gain and rotates.
 * As nodes, each is a pass over all the rows through memory (a prefill's q
 * is megabytes: past L2) and a step end. When the gain's MUL is the only
 * reader of the norm (HET_TENSOR_FLAG_ONE_READER, set by the scheduler), and
 * the ROPE the only reader of the MUL, a row is normed, scaled and rotated
 * while it is in L1, and only the last node's output is stored: the
 * intermediate nodes' storage is never written.
 *
 * The arithmetic is the nodes': the same float multiplies in the same order
 * (x * s, then * gain) and rope.c's rotation over the finished rows in
 * place, so the result is bit for bit what the nodes make one by one.
 * Threads take parts as the last node would: rows, or for a ROPE tokens (or
 * heads when there are fewer tokens than threads). Any strides.
 */
#include "devices/cpu/cpu_ops.h"
#include "devices/cpu/rope.h"
#include "devices/cpu/vec.h"

struct norm_chain {
    const struct het_tensor *x;    /* the norm's input                        */
    const struct het_tensor *gain; /* the MUL's src[1], broadcast over x's rows */
    struct het_tensor       *y;    /* the chain's last node: its output       */
    float                    eps;
    bool                     rope;
    struct het_rope_args     ra;   /* in place on y                           */
};

static bool chain_f32(const struct het_tensor *t) { return t && t->type == HET_TYPE_F32; }

/* Writing y row by row may not change what a later row reads from t: no
 * shared byte, or t is y itself element for element (in place). */
static bool chain_may_write(const struct het_tensor *y, const struct het_tensor *t)
{
    if (!het_vec_overlap(y, t)) return true;
    if (y->data != t->data || !het_same_shape(y, t)) return false;
    for (int d = 0; d < HET_MAX_DIMS; d++)
        if (y->ne[d] > 1 && y->nb[d] != t->nb[d]) return false;
    return true;
}

/* How many of nodes[0..n) form a chain (0, 2 or 3), filled into *c. */
static int chain_find(struct het_tensor *const *nodes, int n, struct norm_chain *c)
{
    struct het_tensor *norm = nodes[0], *mul = n > 1 ? nodes[1] : NULL;
    if (!mul || norm->op != HET_OP_RMS_NORM || mul->op != HET_OP_MUL) return 0;
    if (!(norm->flags & HET_TENSOR_FLAG_ONE_READER) || mul->src[0] != norm) return 0;
    const struct het_tensor *x = norm->src[0], *g = mul->src[1];
    if (!chain_f32(x) || !chain_f32(norm) || !chain_f32(g) || !chain_f32(mul) || g == norm) return 0;
    if (!x->data || !g->data || !het_same_shape(x, norm) || !het_same_shape(norm, mul)) return 0;
    if (g->ne[0] != x->ne[0]) return 0;
    for (int d = 1; d < HET_MAX_DIMS; d++)
        if (g->ne[d] <= 0 || x->ne[d] % g->ne[d] != 0) return 0;
    *c = (struct norm_chain){ .x = x, .gain = g, .y = mul, .eps = het_get_op_param_f32(norm, 0) };
    int used = 2;
    struct het_tensor *rope = n > 2 ? nodes[2] : NULL;
    if (rope && rope->op == HET_OP_ROPE && rope->src[0] == mul && (mul->flags & HET_TENSOR_FLAG_ONE_READER) &&
        het_same_shape(mul, rope) && rope->src[1] && rope->src[1]->data &&
        het_cpu_rope_args(rope, rope, &c->ra) == HET_OK && !het_vec_overlap(rope, rope->src[1])) {
        c->y = rope;
        c->rope = true;
        used = 3;
    }
    if (!c->y->data || !chain_may_write(c->y, x) || het_vec_overlap(c->y, g)) return 0;
    return used;
}

/* Row (i1, i2, i3) of y = x's row normed, times the gain's row. */
static void chain_row(const struct norm_chain *c, enum het_cpu_isa isa, int64_t i1, int64_t i2, int64_t i3)
{
    const struct het_tensor *x = c->x, *g = c->gain, *y = c->y;
    const int64_t ne0 = x->ne[0];
    const char *rx = het_vec_row(x, i1, i2, i3);
    const char *rg = het_vec_row(g, i1 % g->ne[1], i2 % g->ne[2], i3 % g->ne[3]);
    char *ry = het_vec_row(y, i1, i2, i3);
    const float s = het_cpu_rms_scale(isa, ne0, rx, x->nb[0], c->eps);
    if (x->nb[0] == sizeof(float) && g->nb[0] == sizeof(float) && y->nb[0] == sizeof(float)) {
        het_vec_scale_f32(ne0, (float *)ry, (const float *)rx, s);
        het_vec_mul_f32(ne0, (float *)ry, (const float *)ry, (const float *)rg);
        return;
    }
    for (int64_t i = 0; i < ne0; i++) {
        const float n = *(const float *)(rx + i * x->nb[0]) * s;
        *(float *)(ry + i * y->nb[0]) = n * *(const float *)(rg + i * g->nb[0]);
    }
}

struct chain_heads_ctx {
    const struct norm_chain *c;
    enum het_cpu_isa         isa;
};

/* Heads [h0, h1) of token (i2, i3) made, for rope.c to rotate in place. */
static void chain_heads(const void *ctx, int64_t i2, int64_t i3, int64_t h0, int64_t h1)
{
    const struct chain_heads_ctx *hc = ctx;
    for (int64_t h = h0; h < h1; h++) chain_row(hc->c, hc->isa, h, i2, i3);
}

int het_cpu_norm_chain_len(struct het_tensor *const *nodes, int n)
{
    struct norm_chain c;
    return chain_find(nodes, n, &c);
}

int het_cpu_norm_chain(const struct het_compute_params *p, struct het_tensor *const *nodes, int n,
                       enum het_status *st)
{
    struct norm_chain c;
    const int used = chain_find(nodes, n, &c);
    if (used == 0) return 0;
    *st = HET_OK;
    if (!c.rope) {
        for (struct het_cpu_rows it = het_cpu_rows_begin(p, c.y); het_cpu_rows_next(&it);)
            chain_row(&c, p->isa, it.i1, it.i2, it.i3);
        return used;
    }
    het_cpu_rope_parts(p, &c.ra, chain_heads, &(struct chain_heads_ctx){ &c, p->isa });
    return used;
}
