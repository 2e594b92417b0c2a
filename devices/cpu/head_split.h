/*
 * head_split.h — a decode layer's per-head nodes and its attention as one
 * step cut by kv heads (head_split.c), for the CPU device (cpu_device.c).
 */
#ifndef HET_CPU_HEAD_SPLIT_H
#define HET_CPU_HEAD_SPLIT_H

#include "devices/cpu/cpu_ops.h"

/* Into how many parts, at most max_parts, nodes[0..n) can be cut by groups
 * of kv heads: nodes[n-1] an ATTN, every node before it a per-head node
 * (RMS_NORM, MUL, ROPE, CPY) whose tensors hold q heads, kv heads or, read
 * only, one row for all (a gain, the positions), and no two parts touching
 * the same bytes. 1: not such a block (it runs as it would otherwise). */
int het_cpu_head_split_parts(struct het_tensor *const *nodes, int n, int max_parts);

/* Part `part` of n_parts of such a block: every node on its share of the
 * kv heads (and their q heads), in order, by the calling thread alone (p's
 * ith 0, nth 1; its scratch at least het_cpu_attn_work_size(attention, 1)).
 * On failure *failed is the node that failed. */
enum het_status het_cpu_head_split_run(const struct het_compute_params *p, struct het_tensor *const *nodes, int n,
                                       int part, int n_parts, int *failed);

#endif /* HET_CPU_HEAD_SPLIT_H */
