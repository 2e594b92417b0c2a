/*
 * cpu_profile.h — opt-in per-node timing of the CPU device (internal).
 *
 * With HET_CPU_PROFILE set in the environment the CPU device times every
 * node on thread 0 (from the node's start to the barrier that ends it) and
 * adds the time to a row keyed by op, weight type and — for matmuls — the
 * weight's name without its layer prefix ("blk.3.ffn_up.weight" ->
 * "ffn_up.weight") and whether it ran as decode (M < 4) or batch. When the
 * device is freed the table goes to the file HET_CPU_PROFILE names, or to
 * stderr for "1" / "-" / "stderr" (a diagnostic the user asked for; the
 * library otherwise never prints). Unset, the device pays one pointer test
 * per node. HET_CPU_PROFILE_CLOCK=thread times with thread 0's CPU time
 * instead of wall time: with one thread on a busy machine that leaves out
 * the time other processes took.
 */
#ifndef HET_CPU_PROFILE_H
#define HET_CPU_PROFILE_H

#include "het/graph.h"

struct het_cpu_profile;

/* NULL when HET_CPU_PROFILE is unset (or on allocation failure). */
struct het_cpu_profile *het_cpu_profile_new(void);
/* Writes the table where HET_CPU_PROFILE says, then frees. NULL: no-op. */
void het_cpu_profile_free(struct het_cpu_profile *p);

double het_cpu_profile_now_us(const struct het_cpu_profile *p);
/* Adds one run of nodes[0..n) taking us microseconds: one node, or matmuls
 * that ran as one step (het_cpu_mul_mat_group), a row of their own keyed by
 * the weights' names joined with '+'. */
void het_cpu_profile_add(struct het_cpu_profile *p, struct het_tensor *const *nodes, int n, double us);
/* Adds the fixed cost of one split (parallel region entry and exit). */
void het_cpu_profile_add_split(struct het_cpu_profile *p, double us);

#endif /* HET_CPU_PROFILE_H */
