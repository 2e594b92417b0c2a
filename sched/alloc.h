/*
 * alloc.h — scratch planning by tensor lifetimes (internal to sched/).
 *
 * Every tensor of a graph that owns storage but has none yet (compute nodes
 * and input leaves) gets an offset in one scratch region. A node's storage
 * is released after its last reader runs (views count as readers of their
 * owner), so the region's size is near the largest live set rather than the
 * sum of all intermediates. Outputs stay live to the end.
 */
#ifndef HET_SCHED_ALLOC_H
#define HET_SCHED_ALLOC_H

#include "het/graph.h"

#define HET_SCRATCH_ALIGN 256  /* >= every device's storage-buffer offset alignment */

struct het_scratch_plan {
    size_t  peak;     /* bytes needed with reuse                          */
    size_t  naive;    /* bytes needed without reuse                       */
    size_t *offsets;  /* per arena tensor; SIZE_MAX when not in scratch   */
    int     n;
};

/* Plan g's scratch; plan->offsets is malloc'ed (het_scratch_plan_free). */
enum het_status het_scratch_plan_build(struct het_scratch_plan *plan, const het_graph *g, het_error *err);
void            het_scratch_plan_free(struct het_scratch_plan *plan);
/* Point every planned tensor at base + offset, then resolve all views. */
void            het_scratch_plan_apply(const struct het_scratch_plan *plan, het_graph *g, void *base);

#endif /* HET_SCHED_ALLOC_H */
