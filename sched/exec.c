/*
 * exec.c — running a plan: its splits, in order, on their devices.
 *
 * Without overlap, a change of device waits for the previous one (the
 * hand-off fence) before the next reads its results. With overlap, a device
 * is waited for only when a later split conflicts with memory it may still
 * be using: reads what it writes, or writes what it reads or writes. The
 * check is by address range, not graph edge, so it also covers what the
 * graph does not show as an edge: the KV cache a CPY fills and attention
 * reads, and scratch reused by the lifetime allocator. The CPU runs its
 * splits on the calling thread, so an asynchronous device's split overlaps
 * whatever the CPU does next.
 *
 * In measurement mode every node is its own split and is waited for, and
 * its wall time is recorded.
 *
 * Coherency (memory/README.md): with a pool, the CPU access window on the
 * pool is open while a device that uses the CPU's mapping (the CPU, an
 * emulated NPU) runs or the caller reads outputs and writes inputs, and
 * closed before any other device's split is submitted; waiting for such a
 * device also closes it, so the CPU's next access starts a fresh window
 * (DMA_BUF_IOCTL_SYNC END / START on dma-buf backings: cache flush before
 * the device reads, invalidate after it wrote). Devices do their own side
 * (Vulkan barriers to HOST, amdxdna SYNC_BO) inside their splits.
 */
#include "sched/sched_impl.h"

#include "sched/clock.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>


/* ---------------------------------------------------------------------------
 * address ranges                                                            */

static bool span_push(struct het_span_list *l, const struct het_tensor *t)
{
    if (!t || !t->data) return true;
    size_t n = het_nbytes(t);
    if (!n) return true;
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 64;
        struct het_span *v = realloc(l->v, (size_t)cap * sizeof *v);
        if (!v) return false;
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = (struct het_span){ (uintptr_t)t->data, (uintptr_t)t->data + n };
    return true;
}

static bool spans_overlap(const struct het_span_list *a, const struct het_span_list *b)
{
    for (int i = 0; i < a->n; i++)
        for (int j = 0; j < b->n; j++)
            if (a->v[i].lo < b->v[j].hi && b->v[j].lo < a->v[i].hi) return true;
    return false;
}

/* reads and writes of nodes[0..n) into r, w (appending) */
static bool split_spans(struct het_tensor *const *nodes, int n, struct het_span_list *r, struct het_span_list *w)
{
    for (int i = 0; i < n; i++) {
        if (!span_push(w, nodes[i])) return false;
        for (int k = 0; k < HET_MAX_SRC; k++)
            if (nodes[i]->src[k] && !(nodes[i]->src[k]->flags & HET_TENSOR_FLAG_WEIGHT) &&
                !span_push(r, nodes[i]->src[k]))
                return false;
    }
    return true;
}

enum het_status het_sched_host_window(het_sched *s, bool open, het_error *err)
{
    if (!s->pool || s->host_open == open) return HET_OK;
    const struct het_slice all = { 0, het_pool_size(s->pool) };
    enum het_status st = open ? het_pool_sync_begin(s->pool, all, HET_POOL_SYNC_RW, err)
                              : het_pool_sync_end(s->pool, all, HET_POOL_SYNC_RW, err);
    if (st != HET_OK) {
        if (err) het_error_prefix(err, "sched: hand-off");
        return st;
    }
    s->host_open = open;
    s->stats.n_host_syncs++;
    return HET_OK;
}

static enum het_status wait_device(het_sched *s, int d, int *failed, het_error *err)
{
    s->pending[d] = false;
    s->reads[d].n = s->writes[d].n = 0;
    enum het_status st = het_device_sync(s->devices[d], err);
    if (st != HET_OK) *failed = d;
    /* the device wrote behind the CPU's back: the next CPU access reopens */
    if (st == HET_OK && !het_device_uses_host_mapping(s->devices[d])) st = het_sched_host_window(s, false, err);
    return st;
}

void het_sched_drain(het_sched *s)
{
    for (int d = 0; d < s->n_devices; d++) {
        if (!s->pending[d]) continue;
        int failed = -1;
        (void)wait_device(s, d, &failed, NULL);
    }
}

void het_sched_exec_free(het_sched *s)
{
    for (int d = 0; d < HET_MAX_DEVICES; d++) {
        free(s->reads[d].v);
        free(s->writes[d].v);
    }
}

/* ---------------------------------------------------------------------------
 * the three ways to run a split                                             */

static enum het_status run(het_sched *s, int d, struct het_tensor *const *nodes, int n, int *failed, het_error *err)
{
    enum het_status st = het_sched_host_window(s, het_device_uses_host_mapping(s->devices[d]), err);
    if (st != HET_OK) return st;
    st = het_device_run_split_in(s->devices[d], nodes, n, s->run_layout, err);
    if (st != HET_OK) *failed = d;
    s->pending[d] = true;
    return st;
}

/* wait for every other device whose in-flight work conflicts with this split */
static enum het_status resolve_hazards(het_sched *s, int d, struct het_tensor *const *nodes, int n, int *failed,
                                       het_error *err)
{
    struct het_span_list r = { 0 }, w = { 0 };
    enum het_status st = HET_OK;
    if (!split_spans(nodes, n, &r, &w)) {
        st = het_error_set(err, HET_ERR_NOMEM, "sched: out of memory tracking splits");
        goto done;
    }
    for (int q = 0; q < s->n_devices && st == HET_OK; q++) {
        if (q == d || !s->pending[q]) continue;
        if (spans_overlap(&w, &s->writes[q]) || spans_overlap(&w, &s->reads[q]) || spans_overlap(&r, &s->writes[q]))
            st = wait_device(s, q, failed, err);
    }
    if (st == HET_OK && !split_spans(nodes, n, &s->reads[d], &s->writes[d]))
        st = het_error_set(err, HET_ERR_NOMEM, "sched: out of memory tracking splits");
done:
    free(r.v);
    free(w.v);
    return st;
}

static enum het_status grow_times(het_sched *s, int n, het_error *err)
{
    if (n > s->cap_node_us) {
        double *t = realloc(s->node_us, (size_t)n * sizeof *t);
        if (!t) return het_error_set(err, HET_ERR_NOMEM, "sched: out of memory for node times");
        s->node_us = t;
        s->cap_node_us = n;
    }
    s->n_node_us = n;
    return HET_OK;
}

static enum het_status execute_measured(het_sched *s, het_graph *g, const struct het_plan *plan, int *failed,
                                        het_error *err)
{
    struct het_tensor *const *nodes = het_graph_nodes(g);
    enum het_status st = grow_times(s, plan->n_nodes, err);
    for (int i = 0; st == HET_OK && i < plan->n_nodes; i++) {
        int d = plan->nodes[i].device;
        double t0 = het_now_us();
        st = run(s, d, nodes + i, 1, failed, err);
        if (st == HET_OK) st = wait_device(s, d, failed, err);
        s->node_us[i] = het_now_us() - t0;
    }
    return st;
}

static enum het_status execute_in_order(het_sched *s, het_graph *g, const struct het_plan *plan, int *failed,
                                        het_error *err)
{
    struct het_tensor *const *nodes = het_graph_nodes(g);
    enum het_status st = HET_OK;
    int prev = -1;
    for (int i = 0; st == HET_OK && i < plan->n_splits; i++) {
        const struct het_plan_split *sp = &plan->splits[i];
        if (s->params.overlap) {
            st = resolve_hazards(s, sp->device, nodes + sp->first, sp->n, failed, err);
        } else if (prev >= 0 && prev != sp->device) {
            st = wait_device(s, prev, failed, err); /* hand-off: the next device reads what this one wrote */
        }
        if (prev >= 0 && prev != sp->device) s->stats.n_handoffs++;
        if (st == HET_OK) st = run(s, sp->device, nodes + sp->first, sp->n, failed, err);
        prev = sp->device;
    }
    for (int d = 0; st == HET_OK && d < s->n_devices; d++)
        if (s->pending[d]) st = wait_device(s, d, failed, err);
    return st;
}

enum het_status het_sched_execute(het_sched *s, het_graph *g, const struct het_plan *plan, int *failed,
                                  het_error *err)
{
    *failed = -1;
    if (plan->n_nodes != het_graph_n_nodes(g))
        return het_error_set(err, HET_ERR_INVALID, "sched: plan of %d nodes for a graph of %d", plan->n_nodes,
                             het_graph_n_nodes(g));
    enum het_status st = s->measure ? execute_measured(s, g, plan, failed, err)
                                    : execute_in_order(s, g, plan, failed, err);
    /* the caller reads the outputs next */
    if (st == HET_OK) st = het_sched_host_window(s, true, err);
    return st;
}

enum het_status het_sched_run_timed(het_sched *s, int d, struct het_tensor *const *nodes, int n, double *us,
                                    het_error *err)
{
    int failed = -1;
    double t0 = het_now_us();
    enum het_status st = run(s, d, nodes, n, &failed, err);
    if (st == HET_OK) st = wait_device(s, d, &failed, err);
    *us = het_now_us() - t0;
    return st;
}
