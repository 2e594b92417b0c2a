/*
 * plan.h — the planner: which device runs each node of a graph (public).
 *
 * het_plan_build is a pure function of (graph, devices' profiles, hand-off
 * costs, policy, pins) -> plan. It touches no device, so it is unit-tested
 * with synthetic profiles, and `hetrun plan --profile` uses it to plan for
 * devices that are not present. Device support is asked through a callback
 * (het_device_supports_op in the scheduler; the profiles' models in a
 * simulation).
 *
 * The fastest policy minimises predicted whole-graph time, hand-offs
 * included: exact dynamic programming along the topological order (state =
 * device of the previous node, a transition costs the new split's start and
 * the hand-off of the tensors that cross), refined for DAGs by re-running
 * it with the previous answer's placement of distant producers (residuals,
 * the KV cache); and when the executor overlaps splits, a HEFT-like list
 * schedule (earliest finish per node, devices running concurrently) is
 * tried too and the shorter predicted makespan wins.
 *
 * Times are microseconds. A prediction that came from an unmeasured default
 * or a roofline guess is flagged HET_PLAN_UNMEASURED, so every output can
 * say so.
 *
 * Accuracy budget: a lossy device (the NPU: int8 activations) changes the
 * output a little. Given a budget (mean KL per position, het/accuracy.h)
 * and a sensitivity table (KL per group of nodes, measured or estimated),
 * the planner first plans freely, then, if the predicted KL of what it put
 * on lossy devices exceeds the budget, keeps the groups with the best time
 * saved per unit of KL there until the budget is spent and re-plans with
 * the others kept off every lossy device (flagged HET_PLAN_ACCURACY). The
 * KL of groups is taken as additive. Pins and single:DEV are explicit and
 * are never overridden (their KL still counts); alternate ignores the
 * budget.
 */
#ifndef HET_PLAN_H
#define HET_PLAN_H

#include <stdbool.h>
#include <stdint.h>

#include "het/graph.h"
#include "het/profile.h"
#include "het/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define HET_PLAN_MAX_DEVICES 8

/* ---------------------------------------------------------------------------
 * Placement policies (sched/policy_*.c, one file each): which device each
 * node wants before the planner places the rest by predicted time. A node
 * its wanted device cannot run is a fallback (HET_PLAN_FALLBACK); a pin
 * overrides the policy. */

/* What a policy sees of one node. */
struct het_policy_ctx {
    int           n_devices;
    int           device;    /* the device a NAME:DEV policy names, else -1          */
    const double *cost;      /* [n_devices] predicted µs of the node; NAN: cannot run */
    const bool   *disabled;  /* [n_devices] excluded devices                          */
    int           prev;      /* device of the previous node (sequential policies), -1 */
};

struct het_policy {
    const char *name;         /* "fastest", "first", "single", "alternate"          */
    const char *description;  /* one line                                            */
    /* the device the node wants, or -1 for any (placed by predicted time) */
    int       (*wanted)(const struct het_policy_ctx *ctx);
    bool        takes_device;   /* named NAME:DEV (single)                           */
    bool        sequential;     /* wanted() depends on the previous node's placement:
                                   nodes are placed one by one, nothing optimised    */
    bool        honours_budget; /* the accuracy budget may keep its nodes off lossy devices */
};

extern const struct het_policy het_policy_fastest, het_policy_first, het_policy_single, het_policy_alternate;
/* Every policy, NULL-terminated (sched/policies.c). */
extern const struct het_policy *const het_policies[];
/* The policy called name, or NULL. */
const struct het_policy *het_policy_find(const char *name);
/* "NAME" or "NAME:DEV" (DEV: a device name or a prefix of one, as pins):
 * *policy and *device (-1 when the policy takes none). NULL or "": fastest. */
enum het_status het_policy_from_name(const char *spec, const char *const *dev_names, int n_devices,
                                 const struct het_policy **policy, int *device, het_error *err);

/* --pin PATTERN=DEVICE: nodes whose name or op name matches the glob run on device. */
struct het_plan_pin {
    char pattern[64];
    int  device;          /* index into the plan's devices */
};

/* Parse "PATTERN=DEV[,PATTERN=DEV...]"; DEV is a device name or a prefix of
 * one ("vulkan" matches "vulkan0"). Up to max pins; *n receives the count. */
enum het_status het_plan_pins_parse(const char *spec, const char *const *dev_names, int n_devices,
                                    struct het_plan_pin *out, int max, int *n, het_error *err);
/* Index of the first pin matching node, or -1. */
int het_plan_pin_match(const struct het_plan_pin *pins, int n_pins, const struct het_tensor *node);

struct het_handoff_cost {
    double fixed_us;  /* fence + cache maintenance                  */
    double gbps;      /* copy rate; 0 = memory shared, no copy      */
};
/* c[a][b]: handing a tensor from device a to device b */
struct het_handoff_table {
    struct het_handoff_cost c[HET_PLAN_MAX_DEVICES][HET_PLAN_MAX_DEVICES];
};

struct het_plan_device {
    const char        *name;
    const het_profile *profile;   /* NULL: costs unknown (predictions 0, flagged unmeasured) */
    bool               disabled;  /* excluded (failed earlier): never planned on             */
};
/* Is device d of params lossy? (its profile's costs say so, or bit d of params->lossy_mask) */
struct het_plan_params;
bool het_plan_device_lossy(const struct het_plan_params *params, int d);

/* Estimated KL per position of one matmul on a lossy device, for nodes no
 * sensitivity group covers: above what was measured with int8 per-row
 * activations on the test models (0.5-1e-4 per layer matmul of the tiny
 * ones, 1.5e-5 for their logits; KL of several nodes adds up to less than
 * their sum) and far above the per-32 default (down to 1e-14 on q8_0), so
 * predictions from it err high. A measured table replaces it
 * (docs/accuracy.md). */
#define HET_PLAN_DEFAULT_NODE_KL 2e-4

struct het_sensitivity; /* het/accuracy.h */
struct het_plan_accuracy {
    double budget_kl;                    /* mean KL per position allowed; NAN or < 0: no cap        */
    const struct het_sensitivity *sens;  /* (optional) KL per group of nodes                        */
    double node_kl;                      /* a lossy node no group matches; 0: HET_PLAN_DEFAULT_NODE_KL */
};

/* Default hand-off from a to b when a's profile did not measure it (µs). */
#define HET_PLAN_DEFAULT_HANDOFF_US 20.0
/* Fill t from the profiles' measured hand-offs (defaults where missing). */
void het_handoff_table_from_profiles(struct het_handoff_table *t, const struct het_plan_device *devices, int n);

struct het_plan_params {
    const struct het_plan_device *devices;  /* priority order: earlier wins ties            */
    int                           n_devices;
    /* can device d run node? (required) */
    bool (*supports)(void *user, int device, const struct het_tensor *node);
    void *supports_user;
    const struct het_handoff_table *handoffs; /* NULL: from the profiles                     */
    const struct het_policy      *policy;     /* NULL: het_policy_fastest                     */
    int                           policy_device; /* a NAME:DEV policy's device index          */
    const struct het_plan_pin    *pins;
    int                           n_pins;
    bool                          strict;     /* a fallback (pin/single not honoured) is an error */
    bool                          overlap;    /* the executor overlaps independent splits      */
    /* (optional) predict the KL of the placement and, with a budget, cap lossy devices */
    const struct het_plan_accuracy *accuracy;
    uint32_t                      lossy_mask; /* bit d: device d approximates (beside NPU profiles) */
    /* a placement mixing devices is kept only when predicted faster than the
     * best one-device placement by this fraction (0: the optimum, always) */
    double                        single_margin;
    /* (optional) the experts a mul_mat_id node will hit, when known (the
     * routers' observed choices: the scheduler's); NAN or NULL: the count
     * uniform routing expects (het_moe_expected_experts) */
    double (*experts_hit)(void *user, const struct het_tensor *node);
    void   *experts_user;
};

enum het_plan_node_flag {
    HET_PLAN_PINNED     = 1u << 0, /* placed by a pin                              */
    HET_PLAN_FALLBACK   = 1u << 1, /* the policy's/pin's device cannot run it      */
    HET_PLAN_UNMEASURED = 1u << 2, /* its prediction is a default or roofline guess */
    HET_PLAN_ACCURACY   = 1u << 3, /* kept off the lossy devices by the accuracy budget */
    HET_PLAN_ROUTED     = 1u << 4, /* mul_mat_id costed with the routers' observed experts */
};

struct het_plan_node {
    int16_t device;                        /* where it runs                                  */
    int16_t wanted;                        /* the policy's or pin's device (fallback: != device) */
    uint8_t flags;                         /* enum het_plan_node_flag                        */
    double  pred_us;                       /* the node on its device                         */
    double  enter_us;                      /* split start + hand-off charged before it (0 inside a split) */
    double  alt_us[HET_PLAN_MAX_DEVICES];  /* the node on each device; NAN: cannot run there */
    double  kl;                            /* predicted KL it adds where it runs (0 off lossy devices) */
    int16_t group;                         /* its sensitivity group, -1 none (accuracy given)  */
    double  experts;                       /* mul_mat_id: experts its prediction assumes hit (else 0) */
};

struct het_plan_split {
    int    device, first, n;
    double pred_us;                        /* nodes + split start + hand-off into it */
};

struct het_plan {
    int                    n_nodes, n_devices, n_splits;
    struct het_plan_node  *nodes;
    struct het_plan_split *splits;
    double                 total_us;       /* predicted whole graph (makespan when overlapping)  */
    double                 serial_us;      /* nodes + split starts + hand-offs, one after another */
    double                 handoff_us;     /* of which hand-offs and split starts               */
    int                    n_fallbacks;
    int                    n_unmeasured;   /* nodes whose prediction is a default/guess        */
    const char            *method;         /* "dp", "list", "alternate"                          */
    double                 pred_kl;        /* predicted KL per position (NAN: no accuracy given) */
    double                 budget_kl;      /* the budget applied (NAN: none)                     */
    int                    n_kept;         /* nodes kept off lossy devices by the budget         */
    int                    cap_nodes;      /* allocated entries of nodes and splits (internal)   */
};

/* Plan g. out is overwritten (its arrays reused/grown); free with
 * het_plan_free. Errors: a node no device supports; strict fallbacks. */
enum het_status het_plan_build(const struct het_plan_params *params, const het_graph *g, struct het_plan *out,
                               het_error *err);
void            het_plan_free(struct het_plan *plan);   /* frees the arrays; NULL is a no-op */
/* Deep copy (for caches). */
enum het_status het_plan_copy(struct het_plan *dst, const struct het_plan *src, het_error *err);

/* Where does device b become faster than device a for an (n x k) matmul of
 * weight type wt, paying `handoff_us` to move to b? Returns the smallest M
 * (activation rows) with b faster, and its FLOPs in *flops; 0 when b is
 * faster already at M = 1; NAN when b is never faster up to M = 65536 or a
 * profile has no model for wt. */
double het_plan_crossover(const het_profile *a, const het_profile *b, enum het_type wt, int64_t n, int64_t k,
                          double handoff_us, double *flops);

#ifdef __cplusplus
}
#endif
#endif /* HET_PLAN_H */
