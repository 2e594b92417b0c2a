/*
 * residual_norm.c — a layer's residual ADD, the RMS_NORM of its sum and the
 * MUL by the norm's gain, computed by the matmuls that read the gain's
 * output, as they prepare their activations.
 *
 * In decode those three nodes are a few microseconds of one thread's work
 * between two matmul steps, and a step of their own: one thread adds and
 * norms while the other waits, then both read what it wrote. On a machine
 * whose threads sit on two core complexes (AMD CCDs) every such hand-off
 * crosses the fabric (~200 ns a cache line against ~50 ns within one), and
 * the step cost 2.4 us of a 150 us layer twice a layer (traced, Zen 5 VM).
 * Here each thread of the matmul step computes the row itself into its own
 * activations, and the thread that takes the step's first part also stores
 * the outputs something else reads: the sum (the next residual's input),
 * the norm's own output only when a node other than the MUL reads it (as
 * norm_chain.c does), the gain's only when a node outside the step does
 * (het_tensor.n_readers; then every matmul that reads it must join the
 * group, or nothing runs fused). A step end is gone.
 * A prefill's matmul group (b of 8 rows and more, the wide kernels)
 * prepares b's rows in a step of its own before its products: there each
 * row is made by one thread, which stores that row's outputs (matmul.c's
 * het_mm_prepare), and two passes over the layer's activations are gone
 * with the ADD and the norm-chain nodes.
 *
 * The arithmetic is the nodes': the sum, then the norm's scale from the
 * sum's row (het_cpu_rms_scale, over contiguous floats as the add's output
 * is required to be), x * s, then * gain, each rounded as the nodes round
 * it; the results are bit for bit theirs. The outputs may share no byte
 * with the inputs or with each other, nor with the matmuls' weights and
 * outputs: the threads read the inputs while one of them writes. (The
 * scratch planner, sched/alloc.c, reuses one-row storage only 8 nodes
 * after its release for this; before, the gain's output and the matmuls'
 * outputs took the sum's inputs' storage, and nothing fused.)
 */
#include "devices/cpu/cpu_ops.h"
#include "devices/cpu/vec.h"

#include <string.h>

static bool rn_f32(const struct het_tensor *t) { return t && t->type == HET_TYPE_F32 && t->data; }

/* May w (written by one thread while others read) be stored beside t? */
static bool rn_apart(const struct het_tensor *w, const struct het_tensor *t)
{
    return !w || !t || !het_vec_overlap(w, t);
}

bool het_cpu_residual_norm_apart(const struct het_cpu_residual_norm *r, const struct het_tensor *mm)
{
    const struct het_tensor *in[3] = { r->a, r->b, r->gain };
    const struct het_tensor *out[3] = { r->sum, r->norm_out, r->y };
    for (int o = 0; o < 3; o++)
        if (!rn_apart(out[o], mm) || !rn_apart(out[o], mm->src[0])) return false;
    /* one row (decode): each thread makes it inside its first part while
     * others may already write their outputs. More rows run fused only
     * where the rows are made in a step of their own, before any product
     * (a prefill's wide matmuls, matmul.c): there the matmuls' outputs may
     * take the inputs' storage (the scratch planner reuses it at once). */
    const struct het_tensor *s = r->sum;
    if (s->ne[1] * s->ne[2] * s->ne[3] > 1) return true;
    for (int i = 0; i < 3; i++)
        if (!rn_apart(mm, in[i])) return false;
    return true;
}

int het_cpu_residual_norm_find(struct het_tensor *const *nodes, int n, struct het_cpu_residual_norm *r)
{
    if (n < 4) return 0;
    struct het_tensor *sum = nodes[0], *norm = nodes[1], *mul = nodes[2], *mm = nodes[3];
    if (sum->op != HET_OP_ADD || norm->op != HET_OP_RMS_NORM || mul->op != HET_OP_MUL || mm->op != HET_OP_MUL_MAT)
        return 0;
    if (norm->src[0] != sum || mul->src[0] != norm || mm->src[1] != mul) return 0;
    const struct het_tensor *a = sum->src[0], *b = sum->src[1], *g = mul->src[1];
    if (!rn_f32(sum) || !rn_f32(norm) || !rn_f32(mul) || !rn_f32(a) || !rn_f32(b) || !rn_f32(g)) return 0;
    if (g == norm || !het_same_shape(a, sum) || !het_same_shape(sum, norm) || !het_same_shape(norm, mul)) return 0;
    /* the sum's rows contiguous (the norm's scale reads them so); the
     * addend and the gain broadcast over rows only, as binary.c allows */
    if (sum->nb[0] != sizeof(float) || b->ne[0] != sum->ne[0] || g->ne[0] != sum->ne[0]) return 0;
    for (int d = 1; d < HET_MAX_DIMS; d++)
        if (b->ne[d] <= 0 || sum->ne[d] % b->ne[d] != 0 || g->ne[d] <= 0 || sum->ne[d] % g->ne[d] != 0) return 0;
    *r = (struct het_cpu_residual_norm){
        .a = a, .b = b, .gain = g, .sum = sum, .y = mul, .eps = het_get_op_param_f32(norm, 0),
        .norm_out = (norm->flags & HET_TENSOR_FLAG_ONE_READER) ? NULL : norm,
    };
    /* the MUL's output need not be written when the matmuls right after it
     * are all that read it (the scheduler's count; none in a bare graph)
     * and all of them join the step (het_cpu_mul_mat_group checks):
     * its storage is often the ADD's input's, reused once the ADD is done */
    const int readers = mul->n_readers;
    if (!(mul->flags & HET_TENSOR_FLAG_OUTPUT) && readers >= 1 && readers <= HET_CPU_MM_GROUP_MAX &&
        readers <= n - 3) {
        bool all = true;
        for (int i = 0; i < readers; i++)
            all = all && nodes[3 + i]->op == HET_OP_MUL_MAT && nodes[3 + i]->src[1] == mul && nodes[3 + i]->src[0] != mul;
        if (all) {
            r->y = NULL;
            r->y_readers = readers;
        }
    }
    const struct het_tensor *out[3] = { r->sum, r->norm_out, r->y };
    for (int o = 0; o < 3; o++) {
        if (!out[o]) continue;
        if (!rn_apart(out[o], a) || !rn_apart(out[o], b) || !rn_apart(out[o], g)) return 0;
        for (int q = o + 1; q < 3; q++)
            if (!rn_apart(out[o], out[q])) return 0;
    }
    return het_cpu_residual_norm_apart(r, mm) ? 3 : 0;
}

/* Stores row y (contiguous) into row (i1, i2, i3) of t. */
static void rn_store(const struct het_tensor *t, int64_t i1, int64_t i2, int64_t i3, const float *y)
{
    char *row = het_vec_row(t, i1, i2, i3);
    if (t->nb[0] == sizeof(float)) {
        memcpy(row, y, (size_t)t->ne[0] * sizeof(float));
        return;
    }
    for (int64_t i = 0; i < t->ne[0]; i++) memcpy(row + i * t->nb[0], &y[i], sizeof(float));
}

void het_cpu_residual_norm_row(enum het_cpu_isa isa, const struct het_cpu_residual_norm *r, int64_t i1, int64_t i2,
                               int64_t i3, float *y, bool store)
{
    const struct het_tensor *a = r->a, *b = r->b, *g = r->gain;
    const int64_t ne0 = r->sum->ne[0];
    const char *ra = het_vec_row(a, i1, i2, i3);
    const char *rb = het_vec_row(b, i1 % b->ne[1], i2 % b->ne[2], i3 % b->ne[3]);
    const char *rg = het_vec_row(g, i1 % g->ne[1], i2 % g->ne[2], i3 % g->ne[3]);
    if (a->nb[0] == sizeof(float) && b->nb[0] == sizeof(float)) {
        het_vec_add_f32(ne0, y, (const float *)ra, (const float *)rb);
    } else {
        for (int64_t i = 0; i < ne0; i++) y[i] = *(const float *)(ra + i * a->nb[0]) + *(const float *)(rb + i * b->nb[0]);
    }
    if (store) rn_store(r->sum, i1, i2, i3, y);
    const float s = het_cpu_rms_scale(isa, ne0, (const char *)y, sizeof(float), r->eps);
    het_vec_scale_f32(ne0, y, y, s);
    if (store && r->norm_out) rn_store(r->norm_out, i1, i2, i3, y);
    if (g->nb[0] == sizeof(float)) {
        het_vec_mul_f32(ne0, y, y, (const float *)rg);
    } else {
        for (int64_t i = 0; i < ne0; i++) y[i] *= *(const float *)(rg + i * g->nb[0]);
    }
    if (store && r->y) rn_store(r->y, i1, i2, i3, y);
}
