/*
 * alloc.h — scratch planning by tensor lifetimes (internal to sched/).
 *
 * Every tensor of a graph that owns storage but has none yet (compute nodes
 * and input leaves) gets an offset in one scratch region. A node's storage
 * is released after its last reader runs (views count as readers of their
 * owner) and reused at once, or for a small tensor HET_SCRATCH_REUSE_DELAY
 * nodes later, so the region's size is near the largest live set rather
 * than the sum of all intermediates. Outputs stay live to the end.
 */
#ifndef HET_SCHED_ALLOC_H
#define HET_SCHED_ALLOC_H

#include "het/graph.h"

#define HET_SCRATCH_ALIGN 256  /* >= every device's storage-buffer offset alignment */
/* Storage of a few rows (at most HET_SCRATCH_DELAY_MAX_BYTES) released
 * after a node's last reader is reused only by nodes this many places
 * later: a device may run a few consecutive nodes on one-row activations
 * (decode) as one step whose threads still read an early node's inputs
 * while another writes a later node's output (the CPU's residual norm and
 * the matmul group it feeds: 3 + HET_CPU_MM_GROUP_MAX nodes). Larger
 * storage (a prefill's) is reused at once: delayed too, it doubled a
 * Qwen3-0.6B pp512 graph's scratch (30 -> 57 MB). */
#define HET_SCRATCH_REUSE_DELAY     8
#define HET_SCRATCH_DELAY_MAX_BYTES ((size_t)64 << 10)

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
