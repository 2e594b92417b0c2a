/*
 * cpu_solo.h — runs of small nodes cut into parts that share no data
 * (cpu_solo.c), for the CPU device's solo steps (cpu_device.c).
 */
#ifndef HET_CPU_SOLO_H
#define HET_CPU_SOLO_H

#include <stdint.h>

#include "het/graph.h"

/* Cut nodes[0..n), a run of small nodes that cpu_device.c runs as one
 * step, into at most max_parts parts that can run at the same time, each
 * on one thread, its nodes in their order: part[i] is node i's part (0 ..
 * returned count - 1). Two nodes land in one part when either writes bytes
 * the other reads or writes (address ranges over the tensors' extents, so
 * views and reused scratch are covered), directly or through other nodes;
 * the groups so joined are then shared out by bytes, largest first. One
 * part (all zeros) when max_parts is 1, when there is only one such group,
 * or when a node needs kernel scratch (matmul, attention: every part would
 * want thread 0's). */
int het_cpu_solo_partition(struct het_tensor *const *nodes, int n, int max_parts, uint8_t *part);

#endif /* HET_CPU_SOLO_H */
