/*
 * sched.c — the scheduler object: device set, placement, scratch memory and
 * execution of splits.
 *
 * Placement here follows the configured policy (first capable device, one
 * device, or alternate). A node the policy's device cannot run goes to the
 * first device that can: a fallback, logged and counted, or an error under
 * strict. Consecutive nodes on one device form a split; at a change of
 * device the previous device is synchronised (the hand-off fence) before
 * the next one reads its results.
 */
#include "het/sched.h"

#include "sched/alloc.h"
#include "sched/device_impl.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HET_MAX_DEVICES 8

struct het_split { int device, first, n; };

struct het_sched {
    het_device          *devices[HET_MAX_DEVICES];
    int                  n_devices;
    struct het_sched_params params;

    void                *scratch;        /* host region shared by all devices */
    size_t               scratch_size;

    int                 *assign;         /* node -> device, per compute        */
    struct het_split    *splits;
    int                  cap_nodes;
    struct het_sched_stats stats;
};

static void sched_log(het_sched *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sched_log(het_sched *s, const char *fmt, ...)
{
    if (!s->params.log) return;
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    s->params.log(s->params.log_user, line);
}

het_sched *het_sched_init(const struct het_sched_params *params, het_error *err)
{
    if (params->n_devices < 1 || params->n_devices > HET_MAX_DEVICES) {
        het_error_set(err, HET_ERR_INVALID, "sched: need 1..%d devices, got %d", HET_MAX_DEVICES,
                      params->n_devices);
        return NULL;
    }
    if (params->policy == HET_POLICY_SINGLE && (params->single < 0 || params->single >= params->n_devices)) {
        het_error_set(err, HET_ERR_INVALID, "sched: single-device policy names device %d of %d", params->single,
                      params->n_devices);
        return NULL;
    }
    het_sched *s = calloc(1, sizeof *s);
    if (!s) {
        het_error_set(err, HET_ERR_NOMEM, "sched: out of memory");
        return NULL;
    }
    s->params = *params;
    s->n_devices = params->n_devices;
    for (int i = 0; i < s->n_devices; i++) s->devices[i] = params->devices[i];
    s->params.devices = NULL;
    return s;
}

static void release_scratch(het_sched *s)
{
    if (!s->scratch) return;
    for (int i = 0; i < s->n_devices; i++) het_device_unregister_memory(s->devices[i], s->scratch);
    free(s->scratch);
    s->scratch = NULL;
    s->scratch_size = 0;
}

void het_sched_free(het_sched *s)
{
    if (!s) return;
    release_scratch(s);
    free(s->assign);
    free(s->splits);
    free(s);
}

int het_sched_n_devices(const het_sched *s) { return s->n_devices; }
het_device *het_sched_device(const het_sched *s, int i) { return s->devices[i]; }
void het_sched_get_stats(const het_sched *s, struct het_sched_stats *out) { *out = s->stats; }

enum het_status het_sched_register_memory(het_sched *s, void *base, size_t size, int kind, het_error *err)
{
    for (int i = 0; i < s->n_devices; i++) {
        enum het_status st = het_device_register_memory(s->devices[i], base, size, (enum het_memory_kind)kind, err);
        if (st != HET_OK) return st;
    }
    return HET_OK;
}

static enum het_status grow_scratch(het_sched *s, size_t need, het_error *err)
{
    if (need <= s->scratch_size) return HET_OK;
    release_scratch(s);
    size_t size = (need + need / 4 + 4095) & ~(size_t)4095;  /* headroom: fewer re-registrations */
    s->scratch = aligned_alloc(4096, size);
    if (!s->scratch) return het_error_set(err, HET_ERR_NOMEM, "sched: cannot allocate %zu bytes of scratch", size);
    s->scratch_size = size;
    return het_sched_register_memory(s, s->scratch, size, HET_MEMORY_SCRATCH, err);
}

enum het_status het_sched_alloc_graph(het_sched *s, het_graph *g, het_error *err)
{
    enum het_status st = het_graph_status(g, err);
    if (st != HET_OK) return st;
    struct het_scratch_plan plan;
    st = het_scratch_plan_build(&plan, g, err);
    if (st != HET_OK) return st;
    st = grow_scratch(s, plan.peak ? plan.peak : 1, err);
    if (st == HET_OK) {
        het_scratch_plan_apply(&plan, g, s->scratch);
        s->stats.scratch_peak_bytes = plan.peak;
        s->stats.scratch_naive_bytes = plan.naive;
        s->stats.scratch_reserved = s->scratch_size;
    }
    het_scratch_plan_free(&plan);
    return st;
}

/* ---------------------------------------------------------------------------
 * placement                                                                 */

static int first_capable(het_sched *s, const struct het_tensor *n, int skip)
{
    for (int d = 0; d < s->n_devices; d++)
        if (d != skip && het_device_supports_op(s->devices[d], n)) return d;
    return -1;
}

static enum het_status place_node(het_sched *s, const struct het_tensor *n, int want, int *out, het_error *err)
{
    if (het_device_supports_op(s->devices[want], n)) {
        *out = want;
        return HET_OK;
    }
    int d = first_capable(s, n, want);
    if (d < 0)
        return het_error_set(err, HET_ERR_UNSUPPORTED, "sched: no device supports %s '%s' (%s)", het_op_name(n->op),
                             n->name, n->src[0] ? het_type_name(n->src[0]->type) : "-");
    s->stats.n_fallbacks++;
    sched_log(s, "fallback: %s '%s' (%s) cannot run on %s, running on %s", het_op_name(n->op), n->name,
              n->src[0] ? het_type_name(n->src[0]->type) : "-", s->devices[want]->name, s->devices[d]->name);
    if (s->params.strict)
        return het_error_set(err, HET_ERR_UNSUPPORTED, "sched: --strict: %s '%s' cannot run on %s",
                             het_op_name(n->op), n->name, s->devices[want]->name);
    *out = d;
    return HET_OK;
}

static enum het_status plan_graph(het_sched *s, het_graph *g, int *n_splits, het_error *err)
{
    int nn = het_graph_n_nodes(g);
    if (nn > s->cap_nodes) {
        int *a = realloc(s->assign, (size_t)nn * sizeof *a);
        if (a) s->assign = a;
        struct het_split *sp = realloc(s->splits, (size_t)nn * sizeof *sp);
        if (sp) s->splits = sp;
        if (!a || !sp) return het_error_set(err, HET_ERR_NOMEM, "sched: out of memory planning");
        s->cap_nodes = nn;
    }
    int cur = -1, ns = 0;
    for (int i = 0; i < nn; i++) {
        const struct het_tensor *n = het_graph_node(g, i);
        int want;
        switch (s->params.policy) {
        case HET_POLICY_SINGLE:    want = s->params.single; break;
        case HET_POLICY_ALTERNATE: want = cur < 0 ? 0 : (cur + 1) % s->n_devices; break;
        default:                   want = first_capable(s, n, -1); if (want < 0) want = 0; break;
        }
        int d = 0;
        enum het_status st = place_node(s, n, want, &d, err);
        if (st != HET_OK) return st;
        s->assign[i] = d;
        if (ns == 0 || s->splits[ns - 1].device != d) s->splits[ns++] = (struct het_split){ d, i, 0 };
        s->splits[ns - 1].n++;
        cur = d;
    }
    *n_splits = ns;
    return HET_OK;
}

/* ---------------------------------------------------------------------------
 * execution                                                                 */

enum het_status het_sched_compute(het_sched *s, het_graph *g, het_error *err)
{
    int ns = 0;
    enum het_status st = plan_graph(s, g, &ns, err);
    if (st != HET_OK) return st;
    s->stats.n_graphs++;
    s->stats.last_n_splits = ns;

    struct het_tensor *const *nodes = het_graph_nodes(g);
    int prev = -1;
    for (int i = 0; i < ns; i++) {
        const struct het_split *sp = &s->splits[i];
        if (prev >= 0 && prev != sp->device) {
            /* hand-off: the next device reads what the previous one wrote */
            st = het_device_sync(s->devices[prev], err);
            if (st != HET_OK) return st;
        }
        st = het_device_run_split(s->devices[sp->device], nodes + sp->first, sp->n, err);
        if (st != HET_OK) return st;
        prev = sp->device;
    }
    if (prev >= 0) st = het_device_sync(s->devices[prev], err);
    return st;
}
