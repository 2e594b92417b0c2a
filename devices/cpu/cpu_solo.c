/*
 * cpu_solo.c — a run of small nodes cut into parts that share no data.
 *
 * The CPU device runs a run of small nodes (decode's norms, element-wise
 * ops, rope, cache writes) as one step, so the threads pay one step end for
 * the run instead of one per node. Run by one thread, the others wait for
 * it. But such a run is often several independent chains: in a Qwen3 decode
 * layer, q's norm, gain and rope; k's, and its cache write; v's cache write.
 * Those chains can run side by side, one thread each, in the same one step.
 *
 * Independence is decided on memory, not on the graph's edges: the scratch
 * planner reuses storage by lifetimes in the node order, so a node may
 * write where a node of another chain, later in that order, still reads.
 * Two nodes conflict when one writes an address range the other reads or
 * writes; ranges are the tensors' extents (het_nbytes from their data
 * pointer), which cover views, strides and in-place ops conservatively.
 */
#include "devices/cpu/cpu_solo.h"

#include <string.h>

/* Longest run cut into parts: the conflict test is quadratic in it (decode
 * runs have about ten nodes). */
#define SOLO_MAX_NODES 64

struct solo_range {
    uintptr_t lo, hi; /* [lo, hi); lo == hi: nothing */
};

static struct solo_range solo_range_of(const struct het_tensor *t)
{
    struct solo_range r = { 0, 0 };
    if (!t || !t->data) return r;
    r.lo = (uintptr_t)t->data;
    r.hi = r.lo + het_nbytes(t);
    return r;
}

static bool solo_overlap(struct solo_range a, struct solo_range b)
{
    return a.lo < a.hi && b.lo < b.hi && a.lo < b.hi && b.lo < a.hi;
}

/* A node's bytes: what it writes, then what each source holds. */
struct solo_touch {
    struct solo_range r[1 + HET_MAX_SRC];
    int               n;
};

static void solo_touch_of(const struct het_tensor *t, struct solo_touch *x)
{
    x->r[0] = solo_range_of(t);
    x->n = 1;
    for (int s = 0; s < HET_MAX_SRC && t->src[s]; s++) x->r[x->n++] = solo_range_of(t->src[s]);
}

/* Does node x write what y reads or writes? */
static bool solo_writes_into(const struct solo_touch *x, const struct solo_touch *y)
{
    for (int i = 0; i < y->n; i++)
        if (solo_overlap(x->r[0], y->r[i])) return true;
    return false;
}

static bool solo_needs_scratch(const struct het_tensor *t)
{
    return t->op == HET_OP_MUL_MAT || t->op == HET_OP_MUL_MAT_ID || t->op == HET_OP_ATTN;
}

static int solo_root(int *up, int i)
{
    while (up[i] != i) i = up[i] = up[up[i]];
    return i;
}

int het_cpu_solo_partition(struct het_tensor *const *nodes, int n, int max_parts, uint8_t *part)
{
    memset(part, 0, (size_t)(n > 0 ? n : 0));
    if (max_parts < 2 || n < 2 || n > SOLO_MAX_NODES) return 1;
    if (max_parts > 255) max_parts = 255;
    for (int i = 0; i < n; i++) {
        const struct het_tensor *t = nodes[i];
        if (solo_needs_scratch(t) || !t->data) return 1;
        for (int s = 0; s < HET_MAX_SRC && t->src[s]; s++)
            if (!t->src[s]->data) return 1;
    }

    /* groups of nodes joined by conflicts (each node's ranges found once) */
    struct solo_touch touch[SOLO_MAX_NODES];
    int up[SOLO_MAX_NODES];
    for (int i = 0; i < n; i++) {
        up[i] = i;
        solo_touch_of(nodes[i], &touch[i]);
    }
    for (int i = 0; i < n; i++)
        for (int k = i + 1; k < n; k++)
            if (solo_writes_into(&touch[i], &touch[k]) || solo_writes_into(&touch[k], &touch[i]))
                up[solo_root(up, i)] = solo_root(up, k);

    /* each group's bytes, then the groups to parts, largest first, each to
     * the part with the fewest bytes so far */
    size_t bytes[SOLO_MAX_NODES] = { 0 };
    int n_groups = 0;
    for (int i = 0; i < n; i++) {
        size_t b = 0;
        for (int k = 0; k < touch[i].n; k++) b += touch[i].r[k].hi - touch[i].r[k].lo;
        const int r = solo_root(up, i);
        if (r == i) n_groups++;
        bytes[r] += b + 1; /* (+1: a group is never empty) */
    }
    if (n_groups < 2) return 1;
    const int n_parts = n_groups < max_parts ? n_groups : max_parts;
    size_t load[256] = { 0 };
    int group_part[SOLO_MAX_NODES];
    for (int placed = 0; placed < n_groups; placed++) {
        int g = -1;
        for (int i = 0; i < n; i++)
            if (bytes[i] && (g < 0 || bytes[i] > bytes[g])) g = i;
        int best = 0;
        for (int q = 1; q < n_parts; q++)
            if (load[q] < load[best]) best = q;
        load[best] += bytes[g];
        group_part[g] = best;
        bytes[g] = 0;
    }
    for (int i = 0; i < n; i++) part[i] = (uint8_t)group_part[solo_root(up, i)];
    return n_parts;
}
