/*
 * sched_impl.h — the insides of het_sched, shared by the scheduler object
 * (sched.c: devices, scratch, plans and their cache, recovery) and the
 * executor (exec.c: running a plan's splits). Internal to sched/.
 */
#ifndef HET_SCHED_IMPL_H
#define HET_SCHED_IMPL_H

#include "het/sched.h"
#include "sched/alloc.h"
#include "sched/device_impl.h"

#define HET_MAX_DEVICES  8
#define HET_PLAN_CACHE   8

struct het_plan_cache_entry {
    uint64_t        key;        /* graph shape hash (0: empty)         */
    uint32_t        disabled;   /* device set the plan was made for    */
    struct het_plan plan;
    /* online correction (online.c), reset when the entry gets a new plan */
    int             n_runs;     /* graphs run with it                  */
    double          last_us;    /* measured wall time of the last one  */
    int             n_missed;   /* consecutive misses of the prediction */
    int             reprobe;    /* graphs left of probing after a miss  */
    bool            explored;   /* every key of it has been observed    */
};

/* what the routers of a MoE model chose, per layer (moe_routing.c) */
#define HET_MOE_ROUTING_MARGIN 0.2 /* an E_eff moving more than this re-plans */
struct het_moe_layer {
    char   name[64];   /* the layer's ids tensor ("ffn_moe_topk.N")                      */
    double e_eff;      /* experts uniform routing would need to hit what was observed   */
    double planned;    /* e_eff when the generation last changed                        */
    int    n_obs, last_t, last_hit;
};
struct het_moe_routing {
    struct het_moe_layer *v;
    int                   n, cap;
    uint64_t              generation;
};
/* Count the experts each mul_mat_id's ids hit in g (after it ran); update the layers. */
void   het_moe_routing_observe(struct het_moe_routing *r, const het_graph *g);
/* Experts node (a mul_mat_id) is expected to hit from its layer's
 * observations; NAN when there are none. */
double het_moe_routing_experts(const struct het_moe_routing *r, const struct het_tensor *node);
void   het_moe_routing_free(struct het_moe_routing *r);

/* memory a device may still be reading or writing (overlap executor) */
struct het_span { uintptr_t lo, hi; };
struct het_span_list { struct het_span *v; int n, cap; };

struct het_sched {
    het_device          *devices[HET_MAX_DEVICES];
    int                  n_devices;
    struct het_sched_params params;
    const het_profile   *profiles[HET_MAX_DEVICES];
    het_profile         *owned_profiles[HET_MAX_DEVICES]; /* defaults made here */
    struct het_plan_pin  pins[HET_SCHED_MAX_PINS];
    uint32_t             disabled;       /* devices that failed: never planned on */

    void                *scratch;        /* host region shared by all devices */
    size_t               scratch_size;
    het_pool            *pool;           /* params.pool: registered with every device */
    struct het_slice     scratch_slice;  /* scratch's slice when there is a pool       */
    bool                 host_open;      /* CPU access window on the pool is open      */
    /* the last het_sched_alloc_graph: its graph, plan (of as many tensors
     * as the graph had) and the scratch it was applied to
     * (het_sched_realloc_graph gives it again) */
    const het_graph     *alloc_graph;
    struct het_scratch_plan alloc_plan;
    const void          *alloc_base;
    /* alloc_graph's storage layout, as the devices are told it
     * (het_device.layout): a new value at every het_sched_alloc_graph, kept
     * by het_sched_realloc_graph; 0 while there is none. run_layout: what
     * the splits of the graph being computed run under (0 for any graph
     * but alloc_graph). */
    uint64_t             layout;
    uint64_t             layout_last;    /* the last value layout took */
    uint64_t             run_layout;
    uint64_t             key_layout;     /* the layout key_graph was found under (0: none) */
    uint64_t             key_graph;      /* graph_key of alloc_graph under it              */

    struct het_plan_cache_entry cache[HET_PLAN_CACHE];
    int                  cache_next;
    const struct het_plan *last;         /* plan of the last compute           */

    bool                 measure;        /* one node a split, timed            */
    bool                 dry_run;        /* plan only                          */
    const het_graph     *last_graph;
    double              *node_us;
    int                  n_node_us, cap_node_us;

    struct het_span_list reads[HET_MAX_DEVICES], writes[HET_MAX_DEVICES]; /* pending per device */
    bool                 pending[HET_MAX_DEVICES];

    struct het_sched_stats stats;

    /* online correction (online.c) */
    bool                 online;         /* params.online, until a probe fails      */
    uint64_t             plan_gen;       /* profile generations the cached plans saw */
    uint64_t             n_online_graphs;
    double               probe_credit_us; /* probing time earned and not yet spent (online.c) */
    void                *probe_buf;      /* output of probed nodes, registered      */
    size_t               probe_size;

    struct het_moe_routing routing;      /* the routers' observed choices (moe_routing.c) */
};

void het_sched_log(het_sched *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* to params.log_info: what online correction decided */
void het_sched_info(het_sched *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Open (CPU about to read/write pool memory) or close (a device other than
 * the CPU is about to) the CPU access window on the pool: the dma-buf
 * DMA_BUF_IOCTL_SYNC START/END of memory/README.md. No-op without a pool or
 * when already in that state. */
enum het_status het_sched_host_window(het_sched *s, bool open, het_error *err);

/* Run plan's splits on g (exec.c). On a device's failure, *failed is its
 * index (else -1) and the error is returned. */
enum het_status het_sched_execute(het_sched *s, het_graph *g, const struct het_plan *plan, int *failed,
                                  het_error *err);
/* Wait for every device with work in flight; errors are ignored (recovery). */
void            het_sched_drain(het_sched *s);
void            het_sched_exec_free(het_sched *s);
/* Run nodes[0..n) on device d as one split and wait; *us: its wall time. */
enum het_status het_sched_run_timed(het_sched *s, int d, struct het_tensor *const *nodes, int n, double *us,
                                    het_error *err);

/* online.c: learn into owned copies of the profiles; after each graph, feed
 * the history models (probes) and count misses; the profiles' summed
 * generation, which the plan cache compares with plan_gen. */
enum het_status het_sched_online_init(het_sched *s, het_error *err);
enum het_status het_sched_online_after(het_sched *s, const het_graph *g, struct het_plan_cache_entry *e,
                                       double measured_us, het_error *err);
uint64_t        het_sched_online_generation(const het_sched *s);
void            het_sched_online_free(het_sched *s);

#endif /* HET_SCHED_IMPL_H */
