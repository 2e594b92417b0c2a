/*
 * alloc.c — scratch planning by tensor lifetimes (see alloc.h).
 *
 * A best-fit free list over offsets with coalescing; the region grows at
 * its end when nothing fits. Graphs have a few thousand tensors at most, so
 * a sorted array of free blocks is plenty.
 */
#include "sched/alloc.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct free_block { size_t off, size; };

struct offset_allocator {
    struct free_block *blocks;   /* sorted by offset, non-adjacent */
    int                n, cap;
    size_t             end;      /* high-water mark                */
};

static size_t align_up(size_t x) { return (x + HET_SCRATCH_ALIGN - 1) & ~(size_t)(HET_SCRATCH_ALIGN - 1); }

static size_t oa_alloc(struct offset_allocator *a, size_t size)
{
    int best = -1;
    for (int i = 0; i < a->n; i++)
        if (a->blocks[i].size >= size && (best < 0 || a->blocks[i].size < a->blocks[best].size)) best = i;
    if (best >= 0) {
        size_t off = a->blocks[best].off;
        a->blocks[best].off += size;
        a->blocks[best].size -= size;
        if (a->blocks[best].size == 0) {
            memmove(&a->blocks[best], &a->blocks[best + 1], (size_t)(a->n - best - 1) * sizeof *a->blocks);
            a->n--;
        }
        return off;
    }
    /* grow: extend a free block that touches the end, else append */
    if (a->n > 0 && a->blocks[a->n - 1].off + a->blocks[a->n - 1].size == a->end) {
        size_t off = a->blocks[a->n - 1].off;
        a->n--;
        a->end = off + size;
        return off;
    }
    size_t off = a->end;
    a->end += size;
    return off;
}

static int oa_free(struct offset_allocator *a, size_t off, size_t size)
{
    int i = 0;
    while (i < a->n && a->blocks[i].off < off) i++;
    if (a->n == a->cap) {
        int cap = a->cap ? a->cap * 2 : 64;
        struct free_block *nb = realloc(a->blocks, (size_t)cap * sizeof *nb);
        if (!nb) return -1;
        a->blocks = nb;
        a->cap = cap;
    }
    memmove(&a->blocks[i + 1], &a->blocks[i], (size_t)(a->n - i) * sizeof *a->blocks);
    a->blocks[i] = (struct free_block){ off, size };
    a->n++;
    /* coalesce with the next, then the previous */
    if (i + 1 < a->n && a->blocks[i].off + a->blocks[i].size == a->blocks[i + 1].off) {
        a->blocks[i].size += a->blocks[i + 1].size;
        memmove(&a->blocks[i + 1], &a->blocks[i + 2], (size_t)(a->n - i - 2) * sizeof *a->blocks);
        a->n--;
    }
    if (i > 0 && a->blocks[i - 1].off + a->blocks[i - 1].size == a->blocks[i].off) {
        a->blocks[i - 1].size += a->blocks[i].size;
        memmove(&a->blocks[i], &a->blocks[i + 1], (size_t)(a->n - i - 1) * sizeof *a->blocks);
        a->n--;
    }
    return 0;
}

/* Does t need scratch storage? (owns storage, has none yet) */
static bool needs_storage(const struct het_tensor *t)
{
    return !t->view_src && !t->data && t->op != HET_OP_VIEW;
}

static int tensor_index(const het_graph *g, const struct het_tensor *t)
{
    /* arena tensors are one array; anything else (weights, caches) is not ours */
    uintptr_t first = (uintptr_t)het_graph_tensor(g, 0), p = (uintptr_t)t;
    uintptr_t end = first + (uintptr_t)het_graph_n_tensors(g) * sizeof *t;
    if (p < first || p >= end || (p - first) % sizeof *t) return -1;
    return (int)((p - first) / sizeof *t);
}

/* Storage released at a node, waiting out HET_SCRATCH_REUSE_DELAY nodes. */
struct pending_free {
    size_t off, size;
    int    at; /* the node from which it may be reused */
};

struct pending_list {
    struct pending_free *v;
    int                  n, cap;
};

static int pending_push(struct pending_list *p, size_t off, size_t size, int at)
{
    if (p->n == p->cap) {
        int cap = p->cap ? p->cap * 2 : 64;
        struct pending_free *nv = realloc(p->v, (size_t)cap * sizeof *nv);
        if (!nv) return -1;
        p->v = nv;
        p->cap = cap;
    }
    p->v[p->n++] = (struct pending_free){ off, size, at };
    return 0;
}

/* Nodes after its release before storage of `size` bytes is reused (0: the
 * next node). See alloc.h. */
static int reuse_delay(size_t size)
{
    return size <= HET_SCRATCH_DELAY_MAX_BYTES ? HET_SCRATCH_REUSE_DELAY : 0;
}

/* Into the free list: what may be reused from node i on. */
static int pending_release(struct pending_list *p, struct offset_allocator *a, int i)
{
    int kept = 0;
    for (int k = 0; k < p->n; k++) {
        if (p->v[k].at > i) {
            p->v[kept++] = p->v[k];
            continue;
        }
        if (oa_free(a, p->v[k].off, p->v[k].size)) return -1;
    }
    p->n = kept;
    return 0;
}

enum het_status het_scratch_plan_build(struct het_scratch_plan *plan, const het_graph *g, het_error *err)
{
    int nt = het_graph_n_tensors(g), nn = het_graph_n_nodes(g);
    memset(plan, 0, sizeof *plan);
    if (nt == 0) return HET_OK;
    plan->n = nt;
    plan->offsets = malloc((size_t)nt * sizeof *plan->offsets);
    int *uses = calloc((size_t)nt, sizeof *uses);
    struct offset_allocator oa = { 0 };
    struct pending_list pend = { 0 };
    enum het_status st = HET_OK;
    if (!plan->offsets || !uses) {
        st = het_error_set(err, HET_ERR_NOMEM, "sched: out of memory planning scratch");
        goto done;
    }
    for (int i = 0; i < nt; i++) plan->offsets[i] = SIZE_MAX;

    /* readers per storage owner */
    for (int i = 0; i < nn; i++) {
        const struct het_tensor *n = het_graph_node(g, i);
        for (int s = 0; s < HET_MAX_SRC && n->src[s]; s++) {
            int o = tensor_index(g, het_tensor_owner(n->src[s]));
            if (o >= 0) uses[o]++;
        }
    }
    /* input leaves first: live for the whole graph */
    for (int i = 0; i < nt; i++) {
        const struct het_tensor *t = het_graph_tensor(g, i);
        if (t->op != HET_OP_NONE || !needs_storage(t)) continue;
        size_t sz = align_up(het_nbytes(t));
        plan->offsets[i] = oa_alloc(&oa, sz);
        plan->naive += sz;
    }
    for (int i = 0; i < nn; i++) {
        const struct het_tensor *n = het_graph_node(g, i);
        int idx = tensor_index(g, n);
        if (pending_release(&pend, &oa, i)) goto nomem;
        if (idx >= 0 && needs_storage(n)) {
            size_t sz = align_up(het_nbytes(n));
            plan->offsets[idx] = oa_alloc(&oa, sz);
            plan->naive += sz;
            if (uses[idx] == 0 && !(n->flags & HET_TENSOR_FLAG_OUTPUT) &&
                pending_push(&pend, plan->offsets[idx], sz, i + reuse_delay(sz)))
                goto nomem;
        }
        for (int s = 0; s < HET_MAX_SRC && n->src[s]; s++) {
            const struct het_tensor *owner = het_tensor_owner(n->src[s]);
            int o = tensor_index(g, owner);
            if (o < 0 || plan->offsets[o] == SIZE_MAX || owner->op == HET_OP_NONE) continue;
            const size_t sz = align_up(het_nbytes(owner));
            if (--uses[o] == 0 && !(owner->flags & HET_TENSOR_FLAG_OUTPUT) &&
                pending_push(&pend, plan->offsets[o], sz, i + reuse_delay(sz)))
                goto nomem;
        }
    }
    plan->peak = oa.end;
    goto done;
nomem:
    st = het_error_set(err, HET_ERR_NOMEM, "sched: out of memory planning scratch");
done:
    free(uses);
    free(pend.v);
    free(oa.blocks);
    if (st != HET_OK) het_scratch_plan_free(plan);
    return st;
}

void het_scratch_plan_free(struct het_scratch_plan *plan)
{
    free(plan->offsets);
    memset(plan, 0, sizeof *plan);
}

void het_scratch_plan_apply(const struct het_scratch_plan *plan, het_graph *g, void *base)
{
    int nt = het_graph_n_tensors(g);
    for (int i = 0; i < nt && i < plan->n; i++)
        if (plan->offsets[i] != SIZE_MAX) het_graph_tensor(g, i)->data = (char *)base + plan->offsets[i];
    /* views (created after their sources, so one pass in order suffices) */
    for (int i = 0; i < nt; i++) {
        struct het_tensor *t = het_graph_tensor(g, i);
        if (t->view_src && t->view_src->data) t->data = (char *)t->view_src->data + t->view_offs;
    }
}
