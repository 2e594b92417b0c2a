/*
 * gpu_times.h — hetrun's --gpu-times (per-node Vulkan GPU time, summed per
 * phase and printed on stderr at the end; see gpu_times.c).
 */
#ifndef HR_GPU_TIMES_H
#define HR_GPU_TIMES_H

#include "tools/hetrun.h"

#define HR_GPU_MAX_PHASES 8

struct hr_gpu_row {
    char     key[64]; /* op name, or node name with the layer folded */
    int      op;      /* enum het_op of a node row; -1 for op rows    */
    double   us;
    uint64_t calls;
};

struct hr_gpu_phase {
    char               label[32];
    double             total_us;
    struct hr_gpu_row *ops, *nodes;
    int                n_ops, cap_ops, n_nodes, cap_nodes;
};

struct hr_gpu_times {
    struct hr_session  *s;
    bool                on;
    struct hr_gpu_phase phases[HR_GPU_MAX_PHASES];
    int                 n_phases;
};

/* Enable profiling on the session's Vulkan devices when o->gpu_times. */
void hr_gpu_times_begin(struct hr_gpu_times *g, struct hr_session *s, const struct hr_opts *o);
/* Move the records so far into phase `label` (NULL: drop them, e.g. warm-up). */
void hr_gpu_times_take(struct hr_gpu_times *g, const char *label);
/* Print every phase on stderr and free. */
void hr_gpu_times_end(struct hr_gpu_times *g);

#endif /* HR_GPU_TIMES_H */
