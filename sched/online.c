/*
 * online.c — correcting the devices' profiles while graphs run (with
 * params.online), StarPU-style: every execution feeds the history models
 * (policy/history.c) and plans are rebuilt when those move.
 *
 * After a graph has run, the scheduler times a few of its nodes alone on a
 * device ("probes"): a copy of the node whose output goes to a probe buffer,
 * run as one split and waited for, twice (the faster counts: the first may
 * build a pipeline or meet a busy core), minus the device's split overhead.
 * Inputs are read where the graph left them (values do not change a
 * kernel's time); nothing the graph or the caller reads is written. Nodes
 * that write through a view (the KV-cache copy) or read indices the graph
 * computed are never probed, unless those indices are kept to the graph's
 * end (a MoE layer's expert ids: its mul_mat_id nodes are probed, costed
 * with the experts the plan assumed). Nor does a device that reads weights
 * in place probe a node whose weights' file pages a repacking device gave
 * back: it would time their re-read from the file. A node whose kernel the
 * device has not built yet (caps.builds_kernels: lavapipe compiles each
 * pipeline with LLVM, up to a second) is probed only when the credit left
 * pays the build as the device has measured it; before it has built
 * anything, not at all: calibration measured that device, and exploring
 * it online is worth a few percent of a run, not a second of it.
 *
 * Which nodes: first the (device, class, type, shape bucket) keys of the
 * graph that have fewer than HET_HISTORY_MIN_OBS observations, on every
 * device that can run them, alternating between the devices the plan chose
 * and the ones it rejected, each list by the predicted time at stake (a
 * device rejected because its prediction is huge is exactly the one to
 * check). Then, once a plan's keys are all observed, one probe every
 * ONLINE_REFRESH graphs on the least recently observed key, so a history
 * follows a device whose speed drifts. When a plan's measured time misses
 * its prediction by more than HET_SCHED_REPLAN_MARGIN for ONLINE_MISSES
 * graphs in a row, its chosen keys are probed at every graph for a while.
 * Probing is paid from a credit: each graph earns ONLINE_BUDGET of its own
 * time, or ONLINE_EARLY_BUDGET while the plan is unproven (a scheduler's
 * first ONLINE_EARLY graphs) or known to miss its prediction (it already
 * loses more than that), and probes run only while the credit is positive
 * (the last may overdraw it; later graphs repay). What the early rate
 * earned and a graph did not spend is dropped, so a long first prefill
 * does not pay for probing during the graphs after it. So learning never costs a run
 * more than that share of its time, whatever the graph's size: a tiny
 * model's 0.1 ms decode graphs explore over more graphs instead of paying
 * milliseconds each (they did: 16x slower decode for a 24-token run).
 *
 * A history that moves bumps its profile's generation; the next plan
 * lookup sees the change, drops the cached plans and builds new ones
 * (counted in n_replans, logged).
 */
#include "sched/sched_impl.h"

#include "sched/clock.h"
#include "sched/contention.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define ONLINE_REFRESH 16     /* graphs between refresh probes once explored   */
#define ONLINE_MISSES  3      /* consecutive misses that trigger re-probing    */
#define ONLINE_BUDGET       0.02  /* of each graph's time earned for probing       */
#define ONLINE_EARLY_BUDGET 0.25  /* ... early on, or while a plan misses          */
#define ONLINE_EARLY        4     /* graphs a scheduler's plans are unproven       */
#define ONLINE_CREDIT_MAX   10000 /* µs of credit saved up at most                 */
#define MAX_CAND       96

struct cand {
    int      dev, node;
    uint32_t bucket;
    struct het_op_cost cost;
    double   stake;       /* predicted µs of the key's nodes on dev         */
    bool     chosen;      /* the plan runs (some of) these nodes on dev      */
    uint64_t serial;      /* last observation (0: never)                     */
    int      n_obs;
};

/* ---------------------------------------------------------------------------
 * set-up                                                                    */

/* The scheduler learns into its own copies of the profiles. */
enum het_status het_sched_online_init(het_sched *s, het_error *err)
{
    for (int i = 0; i < s->n_devices; i++) {
        if (s->owned_profiles[i]) continue;
        s->owned_profiles[i] = het_profile_clone(s->profiles[i]);
        if (!s->owned_profiles[i]) return het_error_set(err, HET_ERR_NOMEM, "sched: out of memory");
        s->profiles[i] = s->owned_profiles[i];
    }
    return HET_OK;
}

void het_sched_online_free(het_sched *s)
{
    if (!s->probe_buf) return;
    for (int i = 0; i < s->n_devices; i++)
        if (!(s->disabled >> i & 1u)) het_device_unregister_memory(s->devices[i], s->probe_buf);
    free(s->probe_buf);
    s->probe_buf = NULL;
}

uint64_t het_sched_online_generation(const het_sched *s)
{
    uint64_t g = 0;
    for (int i = 0; i < s->n_devices; i++) g += het_profile_generation(s->profiles[i]);
    return g;
}

static bool learns(const het_sched *s, int d)
{
    /* an emulated NPU's wall time is the CPU's: its profile is its cost model */
    const het_device *dev = s->devices[d];
    return !(s->disabled >> d & 1u) && het_device_get_caps(dev)->host_timed;
}

/* a node whose copy can run alone without touching what the graph keeps */
static bool probeable(const struct het_tensor *t)
{
    if (t->view_src || t->op == HET_OP_CPY || t->op == HET_OP_NONE || t->op == HET_OP_VIEW) return false;
    for (int k = 0; k < HET_MAX_SRC; k++) {
        const struct het_tensor *x = t->src[k];
        /* computed indices, unless kept to the graph's end (a MoE router's ids): others may be overwritten */
        if (x && x->type == HET_TYPE_I32 && x->op != HET_OP_NONE &&
            !(het_tensor_owner((struct het_tensor *)x)->flags & HET_TENSOR_FLAG_OUTPUT))
            return false;
    }
    return true;
}

/* Would device d read weights in place whose file pages another device gave
 * back (HET_TENSOR_FLAG_DROPPED)? A probe there would fault them in from the
 * file: it times the disk, not the device, and fills memory that the run
 * does not use (a 30B mixture's experts, re-read per probe, made the default
 * devices lose to the CPU alone while the plan was all-CPU). Such keys keep
 * their calibrated prediction. */
static bool faults_weights(const het_sched *s, int d, const struct het_tensor *t)
{
    if (het_device_get_caps(s->devices[d])->repacks_weights) return false;
    for (int k = 0; k < HET_MAX_SRC; k++)
        if (t->src[k] && (het_tensor_owner((struct het_tensor *)t->src[k])->flags & HET_TENSOR_FLAG_DROPPED))
            return true;
    return false;
}

/* What node's first run on device d would add by building its kernel: 0
 * when d builds none or has run that kind of node already; otherwise what
 * a build took there so far, and INFINITY before d has built anything (a
 * CPU-type Vulkan driver compiles with LLVM: up to a second a kernel). */
static double build_cost_us(const het_sched *s, int d, const struct het_tensor *node)
{
    const het_device *dev = s->devices[d];
    if (!het_device_get_caps(dev)->builds_kernels || het_device_has_run(dev, node)) return 0;
    const double b = het_device_build_estimate_us(dev);
    return isfinite(b) ? b : INFINITY;
}

static enum het_status probe_buffer(het_sched *s, size_t need, het_error *err)
{
    if (need <= s->probe_size) return HET_OK;
    het_sched_online_free(s);
    size_t size = (need + need / 4 + 4095) & ~(size_t)4095;
    s->probe_buf = aligned_alloc(4096, size);
    if (!s->probe_buf) return het_error_set(err, HET_ERR_NOMEM, "sched: no memory for a %zu-byte probe", size);
    memset(s->probe_buf, 0, size);
    s->probe_size = size;
    for (int i = 0; i < s->n_devices; i++) {
        if (s->disabled >> i & 1u) continue;
        enum het_status st = het_device_register_memory(s->devices[i], s->probe_buf, size, HET_MEMORY_SCRATCH, err);
        if (st != HET_OK) {
            for (int k = 0; k < i; k++)
                if (!(s->disabled >> k & 1u)) het_device_unregister_memory(s->devices[k], s->probe_buf);
            free(s->probe_buf);
            s->probe_buf = NULL;
            s->probe_size = 0;
            return st;
        }
    }
    return HET_OK;
}

/* ---------------------------------------------------------------------------
 * one probe                                                                 */

/* µs node takes alone on device d (its output redirected): the first
 * undisturbed run of up to four, minus the split overhead. A run is
 * disturbed when a thread of the process waited for a core during it
 * (sched/contention.c); the first run is a warm-up (it may build a
 * pipeline). Runs stop at the deadline (the second always runs).
 * *us = NAN when every run was disturbed: on a machine that busy the time
 * says more about the machine than about the node, and is not learned.
 * HET_ERR_UNSUPPORTED when d refuses the copy. */
static enum het_status probe(het_sched *s, int d, const struct het_tensor *node, double deadline, double *us,
                             het_error *err)
{
    enum het_status st = probe_buffer(s, het_nbytes(node), err);
    if (st != HET_OK) return st;
    struct het_tensor copy = *node;
    copy.data = s->probe_buf;
    copy.flags &= ~(uint32_t)HET_TENSOR_FLAG_OUTPUT;
    copy.flags |= HET_TENSOR_FLAG_PROBE;
    struct het_tensor *one = &copy;
    if (!het_device_supports_op(s->devices[d], one)) return HET_ERR_UNSUPPORTED;
    double clean = INFINITY;
    for (int r = 0; r < 4 && st == HET_OK && clean == INFINITY; r++) {
        if (r >= 2 && het_now_us() > deadline) break;
        double t = 0;
        struct het_contention a, b;
        het_contention_now(&a);
        st = het_sched_run_timed(s, d, &one, 1, &t, err);
        het_contention_now(&b);
        if (r > 0 && !het_contention_disturbed(&a, &b, t)) clean = t;
    }
    if (st != HET_OK) return st;
    s->stats.n_probes++;
    *us = NAN;
    if (clean == INFINITY) {
        s->stats.n_probes_disturbed++;
        return HET_OK;
    }
    struct het_profile_device_costs dc;
    het_profile_get_device_costs(s->profiles[d], &dc);
    double split = isfinite(dc.split_us) && dc.split_us > 0 ? dc.split_us : 0;
    *us = fmax(clean - fmin(split, 0.5 * clean), 0.01);
    return HET_OK;
}

/* ---------------------------------------------------------------------------
 * what to probe                                                             */

static int gather(het_sched *s, const het_graph *g, const struct het_plan *plan, struct cand *c)
{
    int n = 0;
    for (int i = 0; i < plan->n_nodes; i++) {
        const struct het_tensor *t = het_graph_node(g, i);
        if (!probeable(t)) continue;
        struct het_op_cost oc; /* as the plan costed it (a mul_mat_id: with the experts it assumed) */
        het_op_cost_with_experts(t, plan->nodes[i].experts, &oc);
        if (oc.cls == HET_OPCLASS_NONE) continue;
        for (int d = 0; d < s->n_devices; d++) {
            double alt = plan->nodes[i].alt_us[d];
            if (isnan(alt) || !learns(s, d) || faults_weights(s, d, t)) continue;
            struct het_history_stat hs;
            het_profile_history_of(s->profiles[d], &oc, &hs);
            uint32_t b = het_op_cost_bucket(&oc);
            int k = 0;
            while (k < n && !(c[k].dev == d && c[k].bucket == b)) k++;
            if (k == n) {
                if (n == MAX_CAND) continue;
                c[n++] = (struct cand){ .dev = d, .node = i, .bucket = b, .cost = oc, .serial = hs.serial,
                                        .n_obs = hs.n_obs };
            }
            c[k].stake += isfinite(alt) ? alt : 0;
            c[k].chosen |= plan->nodes[i].device == d;
        }
    }
    return n;
}

/* the candidate to probe next: chosen keys on even turns, rejected ones on
 * odd turns (either when the other list is empty), most at stake first;
 * refresh: the least recently observed. -1 when none is left. */
static int pick(const struct cand *c, int n, const bool *done, int turn, bool refresh)
{
    int best[2] = { -1, -1 };
    for (int k = 0; k < n; k++) {
        if (done[k]) continue;
        int side = c[k].chosen ? 0 : 1, b = best[side];
        bool better = b < 0 || (refresh ? c[k].serial < c[b].serial : c[k].stake > c[b].stake);
        if (better) best[side] = k;
    }
    int want = turn % 2;
    return best[want] >= 0 ? best[want] : best[1 - want];
}

/* ---------------------------------------------------------------------------
 * after a graph                                                             */

static bool missed(double measured_us, double predicted_us)
{
    if (!(measured_us > 0) || !(predicted_us > 0)) return false;
    return fabs(log(measured_us / predicted_us)) > log1p(HET_SCHED_REPLAN_MARGIN);
}

enum het_status het_sched_online_after(het_sched *s, const het_graph *g, struct het_plan_cache_entry *e,
                                       double measured_us, het_error *err)
{
    const struct het_plan *plan = &e->plan;
    s->n_online_graphs++;
    e->n_runs++;
    e->last_us = measured_us;
    if (missed(measured_us, plan->total_us)) {
        if (++e->n_missed == ONLINE_MISSES) {
            s->stats.n_plan_misses++;
            e->reprobe = 2 * s->n_devices * HET_OPCLASS_COUNT; /* graphs of refresh probes, then let it be */
            het_sched_info(s, "a plan keeps missing its predicted time by more than %.0f%%: timing its nodes again",
                          100 * HET_SCHED_REPLAN_MARGIN);
        }
    } else {
        e->n_missed = 0;
    }
    bool early = e->reprobe > 0 || s->n_online_graphs <= ONLINE_EARLY;
    if (measured_us > 0)
        s->probe_credit_us = fmin(s->probe_credit_us + (early ? ONLINE_EARLY_BUDGET : ONLINE_BUDGET) * measured_us,
                                  ONLINE_CREDIT_MAX);
    bool refresh_due = e->reprobe > 0 || s->n_online_graphs % ONLINE_REFRESH == 0;
    if ((e->explored && !refresh_due) || s->probe_credit_us <= 0) {
        if (early) s->probe_credit_us = fmin(s->probe_credit_us, 0);
        return HET_OK;
    }

    struct cand *c = malloc(MAX_CAND * sizeof *c);
    bool *done = calloc(MAX_CAND, sizeof *done);
    enum het_status st = HET_OK;
    if (!c || !done) {
        st = het_error_set(err, HET_ERR_NOMEM, "sched: out of memory choosing probes");
        goto out;
    }
    int n = gather(s, g, plan, c), n_under = 0;
    for (int k = 0; k < n; k++) {
        done[k] = c[k].n_obs >= HET_HISTORY_MIN_OBS;
        n_under += !done[k];
    }
    bool refresh = n_under == 0;
    if (refresh) {
        e->explored = true;
        if (!refresh_due) goto out;
        if (e->reprobe > 0) e->reprobe--;
        for (int k = 0; k < n; k++) done[k] = e->reprobe > 0 && !c[k].chosen; /* a miss: the plan's own keys */
    }
    const double budget = s->probe_credit_us, t0 = het_now_us();
    bool probed = false;
    for (int turn = 0;; turn++) {
        if (probed && (refresh || het_now_us() - t0 > budget)) break;
        /* rejected keys first on odd graphs, chosen ones first on even graphs */
        int k = pick(c, n, done, turn + (int)(s->n_online_graphs % 2), refresh);
        if (k < 0) break;
        const struct het_tensor *node = het_graph_node(g, c[k].node);
        /* a kernel not built yet is probed only when the credit left pays
         * its build: it is never repaid by what the probe teaches */
        if (build_cost_us(s, c[k].dev, node) > budget - (het_now_us() - t0)) {
            done[k] = true;
            continue;
        }
        probed = true;
        /* a key short of observations gets them in one go, budget allowing */
        int want = refresh ? 1 : HET_HISTORY_MIN_OBS - c[k].n_obs;
        for (int r = 0; r < want && st == HET_OK; r++) {
            if (r > 0 && het_now_us() - t0 > budget) break;
            double us = 0;
            st = probe(s, c[k].dev, node, t0 + budget, &us, err);
            if (st == HET_ERR_UNSUPPORTED) { /* the copy's memory or layout: the node is not probed */
                st = HET_OK;
                break;
            }
            if (st == HET_OK && isnan(us)) continue; /* disturbed: nothing learned */
            if (st == HET_OK) st = het_profile_observe(s->owned_profiles[c[k].dev], &c[k].cost, us, err);
        }
        done[k] = true;
        if (st != HET_OK) break;
    }
    s->probe_credit_us -= het_now_us() - t0;
    s->stats.probe_us += het_now_us() - t0;
out:
    if (early) s->probe_credit_us = fmin(s->probe_credit_us, 0); /* the early rate is not saved up */
    free(c);
    free(done);
    return st;
}
