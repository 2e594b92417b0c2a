/*
 * sched.h — placing a graph on a device set and running it.
 *
 * het_sched owns the device set, the plan for each graph and the scratch
 * memory of activations. Running a graph is three steps:
 *   het_sched_alloc_graph   assign storage to every node, by lifetimes;
 *   (caller writes inputs)  e.g. token ids, positions;
 *   het_sched_compute       plan (placement + splits) and execute.
 * Placement is the planner's (het/plan.h): a pure function of the graph,
 * the devices' profiles, the policy, the pins and (optionally) an accuracy
 * budget for lossy devices; plans are cached per graph shape (model, phase,
 * batch bucket), device set and accuracy budget. When a node cannot run
 * where the policy wants it, that is a fallback: it is logged and counted,
 * and with strict it is an error instead. When a device fails a split
 * (error, timeout, device lost), the graph is re-planned without it and run
 * again on the others: the request completes, the event is logged and
 * counted.
 *
 * Memory: with params.pool set, the scheduler registers that pool once with
 * every device of the set (one import of the whole region each) and carves
 * the activations' scratch out of it, so every tensor a graph touches lies
 * in memory all devices share and a hand-off between devices copies
 * nothing. The executor enforces the coherency rules of memory/README.md at
 * each hand-off. Without a pool, scratch is host memory registered with
 * every device.
 */
#ifndef HET_SCHED_H
#define HET_SCHED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "het/device.h"
#include "het/graph.h"
#include "het/plan.h"
#include "het/pool.h"
#include "het/profile.h"
#include "het/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct het_sched het_sched;

#define HET_SCHED_MAX_PINS 16
/* The scheduler keeps a plan that mixes devices only when it is predicted
 * 5% faster than the best one-device plan (het_plan_params.single_margin):
 * a judgement, not a measurement. Calibrated predictions err by several
 * percent (bench/policy_quality.sh checks them to 15%), so a smaller
 * predicted gain is as likely a loss. */
#define HET_SCHED_SINGLE_MARGIN 0.05

struct het_sched_params {
    het_device *const   *devices;     /* priority order: earlier is preferred        */
    int                  n_devices;
    const struct het_policy *policy;  /* het_policies[] (het/plan.h); NULL: fastest */
    int                  policy_device; /* a NAME:DEV policy's device: index into devices */
    bool                 strict;      /* a fallback is an error                       */
    /* (optional) cost models per device (not owned; must outlive the
     * scheduler). NULL array or entries: that device's unmeasured default. */
    const het_profile *const *profiles;
    /* (optional) --pin PATTERN=DEVICE rules, copied */
    const struct het_plan_pin *pins;
    int                  n_pins;
    /* run independent splits on different devices concurrently (splits are
     * issued in order; a device is waited for only when a later split reads
     * or overwrites memory it is still using) */
    bool                 overlap;
    /* (optional) log callback for fallbacks and failed devices; NULL = silent (counted) */
    void (*log)(void *user, const char *line);
    /* (optional) callback for online correction's notices (a plan missing its
     * prediction, re-planning); NULL = silent (counted in het_sched_stats) */
    void (*log_info)(void *user, const char *line);
    void                *log_user;
    /* (optional) the shared memory pool (not owned; must outlive the
     * scheduler and the devices, which may keep repacked weights in it).
     * Registered with every device at init (a device that refuses it fails
     * init); scratch becomes a slice of it. */
    het_pool            *pool;
    /* (optional) predict the KL of each plan and, with a budget, keep lossy
     * devices (the NPU) to what it affords (het/plan.h, het/accuracy.h). Not
     * owned: it and its sensitivity table must outlive the scheduler (or the
     * next het_sched_set_accuracy). */
    const struct het_plan_accuracy *accuracy;
    /* learn while running (sched/online.c): time nodes alone on the devices
     * after a graph (a bounded share of its time), feed the profiles' history
     * models and re-plan when they move or a plan keeps missing its
     * prediction by more than HET_SCHED_REPLAN_MARGIN. The scheduler learns
     * into its own copies of the profiles: het_sched_profile returns them,
     * to be saved (het_profile_cache_store) when the run ends. */
    bool                 online;
};

/* A plan whose measured time is off its prediction by more than this
 * factor (1 + margin, either way) several graphs in a row is re-examined. */
#define HET_SCHED_REPLAN_MARGIN 0.5

het_sched *het_sched_init(const struct het_sched_params *params, het_error *err);
void       het_sched_free(het_sched *s);   /* NULL is a no-op; does not free devices */

/* Make a host region usable by every device of the set (weights, KV cache).
 * A region inside the scheduler's pool is already usable: nothing to do.
 * One that straddles the pool's edge is HET_ERR_INVALID. */
enum het_status het_sched_register_memory(het_sched *s, void *base, size_t size, int kind, het_error *err);
/* The pool given at init, or NULL. */
het_pool *het_sched_pool(const het_sched *s);

/* A graph will be built and run soon (optional, before building it): the
 * devices get ready meanwhile (the CPU wakes its sleeping threads, so that
 * their cores are back by the time the graph runs). */
void het_sched_expect_run(het_sched *s);
/* Assign storage to every node and to leaf tensors without data. */
enum het_status het_sched_alloc_graph(het_sched *s, het_graph *g, het_error *err);
/* The same storage again for g, the graph of the last het_sched_alloc_graph,
 * changed in place since without a tensor added and without a change to
 * what any tensor that owns storage holds (only views moved or resized, as
 * het_arch_llama_advance moves a decode step's cache views): the plan is not
 * made again. Any other graph: het_sched_alloc_graph. */
enum het_status het_sched_realloc_graph(het_sched *s, het_graph *g, het_error *err);
/* Plan and run g (after het_sched_alloc_graph and writing the inputs). */
enum het_status het_sched_compute(het_sched *s, het_graph *g, het_error *err);
/* Plan g without running it (cached like compute's plans). *out stays valid
 * until the next plan or compute on s. */
enum het_status het_sched_plan(het_sched *s, const het_graph *g, const struct het_plan **out, het_error *err);
/* The plan the last compute ran (NULL before the first). */
const struct het_plan *het_sched_last_plan(const het_sched *s);
/* Measurement: each node runs as its own split and is waited for, and its
 * wall time is kept (het_sched_node_times). Slower; for `hetrun plan --measure`. */
void          het_sched_set_measure(het_sched *s, bool on);
/* µs per node of the last measured compute; *n receives the count. */
const double *het_sched_node_times(const het_sched *s, int *n);
/* Dry run: compute plans (and allocates) but runs nothing; outputs are
 * garbage. For `hetrun plan` without --measure. */
void          het_sched_set_dry_run(het_sched *s, bool on);
/* Replace params.accuracy (NULL: none); the plans cached so far are
 * dropped. The cache also keys on the budget and the default node KL, so
 * changing those in place re-plans; a table changed in place needs this
 * call again. */
void          het_sched_set_accuracy(het_sched *s, const struct het_plan_accuracy *accuracy);
/* The graph of the last compute (valid while its owner keeps it). */
const het_graph *het_sched_last_graph(const het_sched *s);
/* Can device i of the set run node? (the device's supports_op; for planners outside the scheduler) */
bool het_sched_device_supports(const het_sched *s, int i, const struct het_tensor *node);
/* The profile the planner uses for device i (given or default). */
const het_profile *het_sched_profile(const het_sched *s, int i);

struct het_sched_stats {
    size_t   scratch_peak_bytes;   /* scratch needed with lifetime reuse       */
    size_t   scratch_naive_bytes;  /* sum of all intermediates, no reuse       */
    size_t   scratch_reserved;     /* bytes of the scratch region (pool slice)  */
    uint64_t n_fallbacks;          /* nodes run off the policy's device        */
    uint64_t n_graphs;
    int      last_n_splits;
    uint64_t n_device_failures;    /* splits a device failed (then re-planned) */
    uint64_t n_plans;              /* plans built (not from the cache)         */
    uint64_t n_plan_cache_hits;
    double   last_plan_us;         /* wall time of the last plan built, µs     */
    double   last_pred_us;         /* predicted time of the last graph run     */
    uint32_t disabled_devices;     /* bit i: device i failed and is excluded   */
    uint64_t n_handoffs;           /* consecutive splits on different devices  */
    uint64_t n_host_syncs;         /* CPU access window opened/closed on the pool */
    uint64_t n_accuracy_kept;      /* nodes run off lossy devices by the accuracy budget (summed) */
    int      last_n_kept;          /* of the last graph run                     */
    double   last_pred_kl;         /* predicted KL per position of the last graph (NAN: no accuracy given) */
    uint64_t n_probes;             /* nodes timed alone for the history models (online) */
    uint64_t n_probes_disturbed;   /* of which preempted every time: not learned        */
    double   probe_us;             /* wall time spent probing, µs (inside het_sched_compute) */
    uint64_t n_replans;            /* plan caches dropped because the histories moved  */
    uint64_t n_plan_misses;        /* plans that kept missing their prediction          */
    double   last_measured_us;     /* wall time of the last graph's execution (online)  */
};
void het_sched_get_stats(const het_sched *s, struct het_sched_stats *out);
int         het_sched_n_devices(const het_sched *s);
het_device *het_sched_device(const het_sched *s, int i);

#ifdef __cplusplus
}
#endif
#endif /* HET_SCHED_H */
