/*
 * sched.h — placing a graph on a device set and running it.
 *
 * het_sched owns the device set, the plan for each graph and the scratch
 * memory of activations. Running a graph is three steps:
 *   het_sched_alloc_graph   assign storage to every node, by lifetimes;
 *   (caller writes inputs)  e.g. token ids, positions;
 *   het_sched_compute       plan (placement + splits) and execute.
 * Placement is a pure function of the graph, the devices and the policy.
 * When a node cannot run where the policy wants it, that is a fallback: it
 * is logged and counted, and with strict it is an error instead.
 */
#ifndef HET_SCHED_H
#define HET_SCHED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "het/device.h"
#include "het/graph.h"
#include "het/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct het_sched het_sched;

enum het_policy_kind {
    HET_POLICY_FIRST = 0,  /* each node on the first device (in set order) that supports it */
    HET_POLICY_SINGLE,     /* everything on one device; others only by (counted) fallback   */
    HET_POLICY_ALTERNATE,  /* change device at every split (testing the hand-offs)          */
};

struct het_sched_params {
    het_device *const   *devices;     /* priority order: earlier is preferred        */
    int                  n_devices;
    enum het_policy_kind policy;
    int                  single;      /* HET_POLICY_SINGLE: index into devices       */
    bool                 strict;      /* a fallback is an error                       */
    /* (optional) log callback for fallbacks and decisions; NULL = silent (counted) */
    void (*log)(void *user, const char *line);
    void                *log_user;
};

het_sched *het_sched_init(const struct het_sched_params *params, het_error *err);
void       het_sched_free(het_sched *s);   /* NULL is a no-op; does not free devices */

/* Make a host region usable by every device of the set (weights, KV cache). */
enum het_status het_sched_register_memory(het_sched *s, void *base, size_t size, int kind, het_error *err);

/* Assign storage to every node and to leaf tensors without data. */
enum het_status het_sched_alloc_graph(het_sched *s, het_graph *g, het_error *err);
/* Plan and run g (after het_sched_alloc_graph and writing the inputs). */
enum het_status het_sched_compute(het_sched *s, het_graph *g, het_error *err);

struct het_sched_stats {
    size_t   scratch_peak_bytes;   /* scratch needed with lifetime reuse       */
    size_t   scratch_naive_bytes;  /* sum of all intermediates, no reuse       */
    size_t   scratch_reserved;     /* bytes of the scratch region              */
    uint64_t n_fallbacks;          /* nodes run off the policy's device        */
    uint64_t n_graphs;
    int      last_n_splits;
};
void het_sched_get_stats(const het_sched *s, struct het_sched_stats *out);
int         het_sched_n_devices(const het_sched *s);
het_device *het_sched_device(const het_sched *s, int i);

#ifdef __cplusplus
}
#endif
#endif /* HET_SCHED_H */
