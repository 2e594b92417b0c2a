/*
 * sched.c — the scheduler object: device set, profiles, scratch memory, the
 * plans (built by the planner, sched/plan.c, and cached per graph shape,
 * device set and accuracy budget), and recovery when a device fails.
 *
 * Placement follows the configured policy through the planner: fastest
 * (predicted time from the profiles), first capable device, one device, or
 * alternate, with pins on top. A node the wanted device cannot run goes
 * elsewhere: a fallback, logged and counted, or an error under strict.
 * Running the splits is sched/exec.c. When a device fails a split, it is
 * excluded, the graph is re-planned on the remaining devices and run again
 * from its start: intermediate results may already have been overwritten by
 * scratch reuse, while the inputs (live for the whole graph) and the KV
 * cache writes (idempotent) make a full re-run safe.
 *
 * With a pool (params.pool), the pool is registered once with every device
 * here, and scratch is a slice of it, replaced by a bigger slice when a
 * graph needs more; memory already inside the pool needs no registration.
 */
#include "sched/sched_impl.h"

#include "sched/alloc.h"

#include "sched/clock.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void vlog(void (*cb)(void *, const char *), void *user, const char *fmt, va_list ap)
{
    if (!cb) return;
    char line[512];
    vsnprintf(line, sizeof line, fmt, ap);
    cb(user, line);
}

void het_sched_log(het_sched *s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vlog(s->params.log, s->params.log_user, fmt, ap);
    va_end(ap);
}

void het_sched_info(het_sched *s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vlog(s->params.log_info, s->params.log_user, fmt, ap);
    va_end(ap);
}


static enum het_status check_params(const struct het_sched_params *params, het_error *err)
{
    if (params->n_devices < 1 || params->n_devices > HET_MAX_DEVICES)
        return het_error_set(err, HET_ERR_INVALID, "sched: need 1..%d devices, got %d", HET_MAX_DEVICES,
                             params->n_devices);
    if (params->policy && params->policy->takes_device &&
        (params->policy_device < 0 || params->policy_device >= params->n_devices))
        return het_error_set(err, HET_ERR_INVALID, "sched: policy %s names device %d of %d", params->policy->name,
                             params->policy_device, params->n_devices);
    if (params->n_pins < 0 || params->n_pins > HET_SCHED_MAX_PINS || (params->n_pins && !params->pins))
        return het_error_set(err, HET_ERR_INVALID, "sched: %d pins (at most %d)", params->n_pins, HET_SCHED_MAX_PINS);
    for (int i = 0; i < params->n_pins; i++)
        if (params->pins[i].device < 0 || params->pins[i].device >= params->n_devices)
            return het_error_set(err, HET_ERR_INVALID, "sched: pin '%s' names device %d of %d",
                                 params->pins[i].pattern, params->pins[i].device, params->n_devices);
    return HET_OK;
}

/* One import of the whole pool per device; on a refusal, undo the others. */
static enum het_status register_pool(het_sched *s, het_pool *pool, het_error *err)
{
    for (int i = 0; i < s->n_devices; i++) {
        enum het_status st = het_device_register_pool(s->devices[i], pool, err);
        if (st != HET_OK) {
            while (i-- > 0) het_device_unregister_pool(s->devices[i], pool);
            if (err) het_error_prefix(err, "sched");
            return st;
        }
    }
    s->pool = pool;
    return HET_OK;
}

het_sched *het_sched_init(const struct het_sched_params *params, het_error *err)
{
    if (check_params(params, err) != HET_OK) return NULL;
    het_sched *s = calloc(1, sizeof *s);
    if (!s) {
        het_error_set(err, HET_ERR_NOMEM, "sched: out of memory");
        return NULL;
    }
    s->params = *params;
    s->n_devices = params->n_devices;
    for (int i = 0; i < s->n_devices; i++) {
        s->devices[i] = params->devices[i];
        s->profiles[i] = params->profiles ? params->profiles[i] : NULL;
        if (!s->profiles[i]) {
            s->owned_profiles[i] = het_profile_default(s->devices[i]);
            s->profiles[i] = s->owned_profiles[i];
            if (!s->profiles[i]) {
                het_error_set(err, HET_ERR_NOMEM, "sched: out of memory");
                het_sched_free(s);
                return NULL;
            }
        }
    }
    for (int i = 0; i < params->n_pins; i++) s->pins[i] = params->pins[i];
    s->params.devices = NULL;
    s->params.profiles = NULL;
    s->params.pins = s->pins;
    if (params->pool && register_pool(s, params->pool, err) != HET_OK) {
        het_sched_free(s);
        return NULL;
    }
    s->online = params->online;
    if (s->online && het_sched_online_init(s, err) != HET_OK) {
        het_sched_free(s);
        return NULL;
    }
    s->plan_gen = het_sched_online_generation(s) + s->routing.generation;
    return s;
}

static void release_scratch(het_sched *s)
{
    if (!s->scratch) return;
    if (s->pool) {
        het_pool_release(s->pool, s->scratch_slice, NULL);
        s->scratch_slice = (struct het_slice){ 0, 0 };
    } else {
        for (int i = 0; i < s->n_devices; i++) het_device_unregister_memory(s->devices[i], s->scratch);
        free(s->scratch);
    }
    s->scratch = NULL;
    s->scratch_size = 0;
}

void het_sched_free(het_sched *s)
{
    if (!s) return;
    het_sched_online_free(s);
    het_moe_routing_free(&s->routing);
    release_scratch(s);
    het_scratch_plan_free(&s->alloc_plan);
    if (s->pool)
        for (int i = 0; i < s->n_devices; i++) het_device_unregister_pool(s->devices[i], s->pool);
    for (int i = 0; i < HET_PLAN_CACHE; i++) het_plan_free(&s->cache[i].plan);
    for (int i = 0; i < s->n_devices; i++) het_profile_free(s->owned_profiles[i]);
    het_sched_exec_free(s);
    free(s->node_us);
    free(s);
}

int het_sched_n_devices(const het_sched *s) { return s->n_devices; }
het_device *het_sched_device(const het_sched *s, int i) { return s->devices[i]; }
const het_profile *het_sched_profile(const het_sched *s, int i) { return s->profiles[i]; }
bool het_sched_device_supports(const het_sched *s, int i, const struct het_tensor *node)
{
    return i >= 0 && i < s->n_devices && het_device_supports_op(s->devices[i], node);
}
const struct het_plan *het_sched_last_plan(const het_sched *s) { return s->last; }
void het_sched_set_measure(het_sched *s, bool on) { s->measure = on; }
void het_sched_set_dry_run(het_sched *s, bool on) { s->dry_run = on; }
const het_graph *het_sched_last_graph(const het_sched *s) { return s->last_graph; }

void het_sched_get_stats(const het_sched *s, struct het_sched_stats *out)
{
    *out = s->stats;
    out->disabled_devices = s->disabled;
}

const double *het_sched_node_times(const het_sched *s, int *n)
{
    *n = s->n_node_us;
    return s->node_us;
}

het_pool *het_sched_pool(const het_sched *s) { return s->pool; }

enum het_status het_sched_register_memory(het_sched *s, void *base, size_t size, int kind, het_error *err)
{
    size_t off = 0;
    if (s->pool && size && het_pool_offset_of(s->pool, base, &off)) {
        if (size <= het_pool_size(s->pool) - off) return HET_OK; /* imported with the pool */
        return het_error_set(err, HET_ERR_INVALID, "sched: region %p+%zu runs past the end of the memory pool", base,
                             size);
    }
    if (s->pool && size && het_pool_offset_of(s->pool, (const char *)base + size - 1, NULL))
        return het_error_set(err, HET_ERR_INVALID, "sched: region %p+%zu starts before the memory pool", base, size);
    for (int i = 0; i < s->n_devices; i++) {
        if (s->disabled >> i & 1u) continue;
        enum het_status st = het_device_register_memory(s->devices[i], base, size, (enum het_memory_kind)kind, err);
        if (st != HET_OK) return st;
    }
    return HET_OK;
}

/* Scratch as a pool slice: the bigger slice is taken before the old one is
 * given back (so a refusal leaves the old one), then, if the pool is too
 * full for both, after. Without headroom when headroom does not fit. */
static enum het_status grow_scratch_pool(het_sched *s, size_t need, het_error *err)
{
    size_t want[2] = { need + need / 4, need };
    struct het_slice sl = { 0, 0 };
    enum het_status st = HET_ERR_NOMEM;
    for (int pass = 0; pass < 2 && st != HET_OK; pass++) {
        if (pass == 1) release_scratch(s);           /* the old slice may be what is in the way */
        for (int k = 0; k < 2 && st != HET_OK; k++) st = het_pool_alloc(s->pool, want[k], 0, &sl, err);
    }
    if (st != HET_OK) {
        het_error_prefix(err, "sched: no room for %zu bytes of scratch in the memory pool", need);
        return st;
    }
    release_scratch(s);
    s->scratch_slice = sl;
    s->scratch = het_pool_ptr(s->pool, sl.offset);
    s->scratch_size = sl.size;
    return HET_OK;
}

static enum het_status grow_scratch(het_sched *s, size_t need, het_error *err)
{
    if (need <= s->scratch_size) return HET_OK;
    if (s->pool) return grow_scratch_pool(s, need, err);
    release_scratch(s);
    size_t size = (need + need / 4 + 4095) & ~(size_t)4095;  /* headroom: fewer re-registrations */
    s->scratch = aligned_alloc(4096, size);
    if (!s->scratch) return het_error_set(err, HET_ERR_NOMEM, "sched: cannot allocate %zu bytes of scratch", size);
    s->scratch_size = size;
    return het_sched_register_memory(s, s->scratch, size, HET_MEMORY_SCRATCH, err);
}

void het_sched_expect_run(het_sched *s)
{
    for (int i = 0; i < s->n_devices; i++) het_device_expect_run(s->devices[i]);
}

/* A value for a new storage layout no earlier one of this process is
 * likely to share: the monotonic clock in nanoseconds (a device keeps
 * decisions under it for node arrays that a freed graph's successor may
 * reuse at the same address, under another scheduler's count), and always
 * above this scheduler's last. */
static uint64_t new_layout(const het_sched *s)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t v = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
    return v > s->layout_last ? v : s->layout_last + 1;
}

enum het_status het_sched_alloc_graph(het_sched *s, het_graph *g, het_error *err)
{
    enum het_status st = het_graph_status(g, err);
    if (st != HET_OK) return st;
    struct het_scratch_plan plan;
    st = het_scratch_plan_build(&plan, g, err);
    if (st != HET_OK) return st;
    st = grow_scratch(s, plan.peak ? plan.peak : 1, err);
    if (st == HET_OK) st = het_sched_host_window(s, true, err); /* the caller writes the inputs next */
    if (st == HET_OK) {
        het_scratch_plan_apply(&plan, g, s->scratch);
        het_graph_mark_readers(g);
        s->stats.scratch_peak_bytes = plan.peak;
        s->stats.scratch_naive_bytes = plan.naive;
        s->stats.scratch_reserved = s->scratch_size;
    }
    het_scratch_plan_free(&s->alloc_plan);
    s->alloc_graph = NULL;
    s->layout = 0;
    if (st != HET_OK) {
        het_scratch_plan_free(&plan);
        return st;
    }
    s->alloc_plan = plan; /* kept for het_sched_realloc_graph */
    s->alloc_graph = g;
    s->alloc_base = s->scratch;
    s->layout = s->layout_last = new_layout(s);
    return HET_OK;
}

/* Planning a decode graph's scratch took ~50 us a token (Qwen3-0.6B, 650
 * nodes), as long as a tenth of a layer, for the same plan every time. */
enum het_status het_sched_realloc_graph(het_sched *s, het_graph *g, het_error *err)
{
    if (g != s->alloc_graph || het_graph_n_tensors(g) != s->alloc_plan.n || !s->scratch ||
        s->scratch != s->alloc_base || s->scratch_size < s->alloc_plan.peak)
        return het_sched_alloc_graph(s, g, err);
    enum het_status st = het_graph_status(g, err);
    if (st == HET_OK) st = het_sched_host_window(s, true, err); /* the caller writes the inputs next */
    if (st == HET_OK) het_scratch_plan_apply(&s->alloc_plan, g, s->scratch);
    return st;
}

/* ---------------------------------------------------------------------------
 * plans and their cache                                                     */

/* Shape of a graph for the cache: per node its op, name, types, weight
 * identity and shape, with every dimension but the first bucketed to a
 * power of two (the batch bucket: 100 and 128 tokens share a plan, prefill
 * and decode do not). The KV length is not part of it. */
static uint64_t bucket(int64_t v)
{
    uint64_t b = 1;
    while ((int64_t)b < v) b <<= 1;
    return b;
}

static uint64_t mix(uint64_t h, uint64_t v) { return (h ^ v) * 0x100000001b3ull; }

static uint64_t graph_key(const het_graph *g)
{
    int n = het_graph_n_nodes(g);
    uint64_t h = mix(0xcbf29ce484222325ull, (uint64_t)n);
    for (int i = 0; i < n; i++) {
        const struct het_tensor *t = het_graph_node(g, i);
        h = mix(h, (uint64_t)t->op);
        h = mix(h, (uint64_t)t->ne[0]);
        for (int d = 1; d < HET_MAX_DIMS; d++) h = mix(h, bucket(t->ne[d]));
        for (const char *c = t->name; *c; c++) h = mix(h, (unsigned char)*c);
        const struct het_tensor *w = t->src[0];
        if (w) {
            h = mix(h, (uint64_t)w->type);
            if (w->flags & HET_TENSOR_FLAG_WEIGHT) h = mix(h, (uint64_t)(uintptr_t)w->data);
        }
    }
    return h ? h : 1;
}

static double experts_cb(void *user, const struct het_tensor *node)
{
    return het_moe_routing_experts(&((const het_sched *)user)->routing, node);
}

static bool supports_cb(void *user, int d, const struct het_tensor *node)
{
    het_sched *s = user;
    return het_device_supports_op(s->devices[d], node);
}

static void log_fallbacks(het_sched *s, const het_graph *g, const struct het_plan *plan)
{
    for (int i = 0; i < plan->n_nodes; i++) {
        const struct het_plan_node *pn = &plan->nodes[i];
        if (!(pn->flags & HET_PLAN_FALLBACK)) continue;
        const struct het_tensor *n = het_graph_node(g, i);
        het_sched_log(s, "fallback: %s '%s' (%s) cannot run on %s%s, running on %s", het_op_name(n->op), n->name,
                      n->src[0] ? het_type_name(n->src[0]->type) : "-", s->devices[pn->wanted]->name,
                      (pn->flags & HET_PLAN_PINNED) ? " (pinned)" : "", s->devices[pn->device]->name);
    }
}

static enum het_status build_plan(het_sched *s, const het_graph *g, struct het_plan *out, bool strict,
                                  het_error *err)
{
    struct het_plan_device devs[HET_MAX_DEVICES];
    for (int i = 0; i < s->n_devices; i++)
        devs[i] = (struct het_plan_device){ s->devices[i]->name, s->profiles[i], (s->disabled >> i & 1u) != 0 };
    const struct het_policy *pol = s->params.policy ? s->params.policy : &het_policy_fastest;
    int dev = s->params.policy_device;
    if (pol->takes_device && (s->disabled >> dev & 1u)) pol = &het_policy_fastest; /* its device failed */
    struct het_plan_params pp = {
        .devices = devs, .n_devices = s->n_devices, .supports = supports_cb, .supports_user = s,
        .experts_hit = experts_cb, .experts_user = s,
        .policy = pol, .policy_device = dev, .single_margin = HET_SCHED_SINGLE_MARGIN,
        .pins = s->pins, .n_pins = s->params.n_pins,
        .strict = strict, .overlap = s->params.overlap && !s->measure, .accuracy = s->params.accuracy,
    };
    double t0 = het_now_us();
    enum het_status st = het_plan_build(&pp, g, out, err);
    s->stats.last_plan_us = het_now_us() - t0;
    s->stats.n_plans++;
    return st;
}

/* The accuracy settings a plan was made under, for the cache key (0: none). */
static uint64_t accuracy_key(const struct het_plan_accuracy *a)
{
    if (!a) return 0;
    uint64_t b, k;
    memcpy(&b, &a->budget_kl, sizeof b);
    memcpy(&k, &a->node_kl, sizeof k);
    return mix(mix(mix(0x9e3779b97f4a7c15ull, b), k), (uint64_t)(uintptr_t)a->sens);
}

void het_sched_set_accuracy(het_sched *s, const struct het_plan_accuracy *accuracy)
{
    s->params.accuracy = accuracy;
    for (int i = 0; i < HET_PLAN_CACHE; i++) s->cache[i].key = 0; /* arrays kept for reuse */
}

/* graph_key of g, found once per storage layout of the allocated graph:
 * what het_sched_realloc_graph lets change (views' offsets and extents) is
 * not in it, views being no nodes (a decode token saved 13-19 us of a
 * 648-node walk; bench/README.md, session 29). */
static uint64_t graph_key_of(het_sched *s, const het_graph *g)
{
    const bool kept = g == s->alloc_graph && s->layout;
    if (kept && s->key_layout == s->layout) return s->key_graph;
    const uint64_t k = graph_key(g);
    if (kept) {
        s->key_layout = s->layout;
        s->key_graph = k;
    }
    return k;
}

/* The cached plan for g on the current device set, building it if needed. */
static enum het_status get_plan(het_sched *s, const het_graph *g, const struct het_plan **out, het_error *err)
{
    uint64_t key = mix(graph_key_of(s, g), accuracy_key(s->params.accuracy));
    if (!key) key = 1;
    uint64_t gen = het_sched_online_generation(s) + s->routing.generation;
    if (gen != s->plan_gen) { /* the histories or the routing moved: every cached plan is out of date */
        s->plan_gen = gen;
        s->stats.n_replans++;
        for (int i = 0; i < HET_PLAN_CACHE; i++) s->cache[i].key = 0;
        het_sched_info(s, "re-planning: node times or experts hit observed while running moved the cost model");
    }
    uint32_t set = s->disabled | (s->measure ? 1u << 31 : 0);
    for (int i = 0; i < HET_PLAN_CACHE; i++)
        if (s->cache[i].key == key && s->cache[i].disabled == set) {
            s->stats.n_plan_cache_hits++;
            *out = &s->cache[i].plan;
            return HET_OK;
        }
    struct het_plan_cache_entry *e = &s->cache[s->cache_next];
    e->key = 0;
    /* after a device failure strict no longer applies: the request must complete */
    enum het_status st = build_plan(s, g, &e->plan, s->params.strict && !s->disabled, err);
    if (st != HET_OK) return st;
    log_fallbacks(s, g, &e->plan);
    e->n_runs = e->n_missed = e->reprobe = 0;
    e->last_us = 0;
    e->explored = false;
    e->key = key;
    e->disabled = set;
    s->cache_next = (s->cache_next + 1) % HET_PLAN_CACHE;
    *out = &e->plan;
    return HET_OK;
}

enum het_status het_sched_plan(het_sched *s, const het_graph *g, const struct het_plan **out, het_error *err)
{
    enum het_status st = het_graph_status(g, err);
    if (st != HET_OK) return st;
    return get_plan(s, g, out, err);
}

/* ---------------------------------------------------------------------------
 * compute, with recovery from a failing device                             */

/* Feed the histories after a graph; a failing probe turns learning off, it
 * never fails the graph (whose results are already complete). */
static void learn(het_sched *s, const het_graph *g, const struct het_plan *plan)
{
    struct het_plan_cache_entry *e = NULL;
    for (int i = 0; i < HET_PLAN_CACHE && !e; i++)
        if (&s->cache[i].plan == plan) e = &s->cache[i];
    if (!e) return;
    het_error err = { 0 };
    if (het_sched_online_after(s, g, e, s->stats.last_measured_us, &err) != HET_OK) {
        s->online = false;
        het_sched_log(s, "learning node times stopped: %s", err.msg);
    }
    (void)het_sched_host_window(s, true, NULL); /* the caller reads the outputs next */
}

/* Count the experts the routers chose (ids are read on the host: the CPU
 * access window opens, as it does before the caller reads the outputs). */
static void observe_routing(het_sched *s, const het_graph *g)
{
    bool any = false;
    for (int i = 0; i < het_graph_n_nodes(g) && !any; i++) {
        const struct het_tensor *n = het_graph_node(g, i);
        any = n->op == HET_OP_MUL_MAT_ID && n->ne[2] > 1;
    }
    if (!any || het_sched_host_window(s, true, NULL) != HET_OK) return;
    het_moe_routing_observe(&s->routing, g);
}

static int n_enabled(const het_sched *s)
{
    int n = 0;
    for (int i = 0; i < s->n_devices; i++) n += !(s->disabled >> i & 1u);
    return n;
}

enum het_status het_sched_compute(het_sched *s, het_graph *g, het_error *err)
{
    for (;;) {
        const struct het_plan *plan = NULL;
        enum het_status st = het_sched_plan(s, g, &plan, err);
        if (st != HET_OK) return st;
        s->last = plan;
        s->stats.n_graphs++;
        s->stats.last_n_splits = plan->n_splits;
        s->stats.n_fallbacks += (uint64_t)plan->n_fallbacks;
        s->stats.n_accuracy_kept += (uint64_t)plan->n_kept;
        s->stats.last_n_kept = plan->n_kept;
        s->stats.last_pred_kl = plan->pred_kl;
        s->stats.last_pred_us = plan->total_us;
        s->last_graph = g;
        if (s->dry_run) return HET_OK;
        s->run_layout = g == s->alloc_graph ? s->layout : 0;
        int failed = -1;
        double t0 = het_now_us();
        st = het_sched_execute(s, g, plan, &failed, err);
        s->stats.last_measured_us = het_now_us() - t0;
        if (st == HET_OK && !s->measure) observe_routing(s, g);
        if (st == HET_OK && s->online && !s->measure) learn(s, g, plan);
        if (st == HET_OK || failed < 0) return st;
        s->stats.n_device_failures++;
        het_sched_drain(s);
        if (n_enabled(s) <= 1) return st;
        s->disabled |= 1u << failed;
        het_sched_log(s, "device %s failed a split (%s): re-planning without it and running the graph again",
                      s->devices[failed]->name, err ? err->msg : het_status_name(st));
        s->last = NULL;
    }
}
