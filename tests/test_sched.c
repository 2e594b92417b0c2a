/*
 * test_sched.c — the graph builders, the lifetime scratch planner and the
 * scheduler's placement/fallback rules, with fake devices whose support and
 * execution are scripted by the test.
 */
#include "het/sched.h"
#include "sched/alloc.h"
#include "sched/device_impl.h"
#include "testutil.h"

#include <stdlib.h>
#include <string.h>

/* A fake device: supports the ops in its mask, records what it ran, and
 * executes add/scale on F32 so results can be checked. */
struct fake { unsigned mask; int ran[64]; int n_ran; int n_sync; };

static bool fake_supports(het_device *d, const struct het_tensor *n)
{
    return (((struct fake *)d->context)->mask >> n->op) & 1u;
}

static enum het_status fake_run(het_device *d, struct het_tensor *const *nodes, int n, het_error *err)
{
    struct fake *f = d->context;
    for (int i = 0; i < n; i++) {
        struct het_tensor *t = nodes[i];
        if (f->n_ran < 64) f->ran[f->n_ran++] = t->id;
        float *y = t->data;
        const float *a = t->src[0]->data;
        for (int64_t k = 0; k < het_nelements(t); k++) {
            if (t->op == HET_OP_ADD) y[k] = a[k] + ((const float *)t->src[1]->data)[k];
            else if (t->op == HET_OP_SCALE) y[k] = a[k] * het_get_op_param_f32(t, 0);
            else if (t->op == HET_OP_SILU) y[k] = a[k]; /* identity stand-in */
        }
    }
    return HET_OK;
}

static enum het_status fake_sync(het_device *d, het_error *err)
{
    ((struct fake *)d->context)->n_sync++;
    return HET_OK;
}

static const struct het_device_i fake_iface = {
    .supports_op = fake_supports, .run_split = fake_run, .sync = fake_sync,
};

static void test_views(void)
{
    het_graph *g = het_graph_init(64);
    const int64_t ne[3] = { 8, 4, 3 };
    struct het_tensor *a = het_new_tensor(g, HET_TYPE_F32, 3, ne);
    struct het_tensor *p = het_permute(g, a, 1, 0, 2, 3);
    CHECK(p->ne[0] == 4 && p->ne[1] == 8 && p->nb[0] == a->nb[1] && p->nb[1] == a->nb[0], "permute strides");
    CHECK(!het_is_contiguous(p), "permuted view is not contiguous");
    struct het_tensor *v = het_view_2d(g, a, 8, 2, a->nb[1], a->nb[1]);
    CHECK(v->view_src == a && v->view_offs == a->nb[1], "view offset");
    struct het_tensor *vv = het_view_1d(g, v, 4, 16);
    CHECK(vv->view_src == a && vv->view_offs == a->nb[1] + 16, "view of a view chains to the owner");
    CHECK(het_view_2d(g, a, 8, 20, a->nb[1], 0) == NULL, "out-of-bounds view rejected");
    het_error err = { 0 };
    CHECK(het_graph_status(g, &err) == HET_ERR_INVALID && strstr(err.msg, "out of bounds"), "sticky error: %s",
          err.msg);
    CHECK(het_add(g, a, a) == NULL, "builders fail after an error");
    het_graph_free(g);
}

static void test_scratch_plan(void)
{
    /* a chain x0 -> x1 -> ... -> x9: only two are live at once */
    het_graph *g = het_graph_init(64);
    const int64_t ne[1] = { 1000 };
    struct het_tensor *x = het_new_tensor(g, HET_TYPE_F32, 1, ne);
    x->flags |= HET_TENSOR_FLAG_INPUT;
    for (int i = 0; i < 10; i++) x = het_scale(g, x, 2.0f);
    x->flags |= HET_TENSOR_FLAG_OUTPUT;
    struct het_scratch_plan plan;
    het_error err = { 0 };
    CHECK(het_scratch_plan_build(&plan, g, &err) == HET_OK, "plan: %s", err.msg);
    size_t one = 4096; /* 4000 bytes aligned to 256 */
    CHECK(plan.naive == 11 * one, "naive sum %zu", plan.naive);
    CHECK(plan.peak <= 3 * one, "peak %zu should be ~ two or three buffers", plan.peak);
    /* live ranges must not overlap: check consecutive producer/consumer pairs */
    for (int i = 0; i < het_graph_n_nodes(g); i++) {
        const struct het_tensor *n = het_graph_node(g, i);
        size_t on = plan.offsets[n - het_graph_tensor(g, 0)], os = plan.offsets[n->src[0] - het_graph_tensor(g, 0)];
        CHECK(on != os, "node %d shares storage with its own input", i);
    }
    het_scratch_plan_free(&plan);
    het_graph_free(g);
}

static het_graph *chain_graph(float **in_data)
{
    het_graph *g = het_graph_init(64);
    const int64_t ne[1] = { 16 };
    struct het_tensor *a = het_new_tensor(g, HET_TYPE_F32, 1, ne);
    a->flags |= HET_TENSOR_FLAG_INPUT;
    struct het_tensor *b = het_scale(g, a, 3.0f);   /* node 0 */
    struct het_tensor *c = het_add(g, b, a);        /* node 1 */
    struct het_tensor *d = het_silu(g, c);          /* node 2 */
    struct het_tensor *e = het_scale(g, d, 0.5f);   /* node 3 */
    e->flags |= HET_TENSOR_FLAG_OUTPUT;
    *in_data = NULL;
    return g;
}

static void test_placement(void)
{
    struct fake f0 = { .mask = (1u << HET_OP_SCALE) | (1u << HET_OP_ADD) }; /* no silu */
    struct fake f1 = { .mask = ~0u };
    het_device *d0 = het_device_new(&fake_iface, HET_DEVICE_CPU, "fake0", &f0);
    het_device *d1 = het_device_new(&fake_iface, HET_DEVICE_VULKAN, "fake1", &f1);
    het_device *devs[2] = { d0, d1 };
    het_error err = { 0 };
    float *unused;

    /* single:fake0 — silu falls back to fake1, counted */
    struct het_sched_params p = { .devices = devs, .n_devices = 2, .policy = HET_POLICY_SINGLE, .single = 0 };
    het_sched *s = het_sched_init(&p, &err);
    het_graph *g = chain_graph(&unused);
    CHECK(het_sched_alloc_graph(s, g, &err) == HET_OK, "alloc: %s", err.msg);
    float *in = het_graph_tensor(g, 0)->data;
    for (int i = 0; i < 16; i++) in[i] = (float)i;
    CHECK(het_sched_compute(s, g, &err) == HET_OK, "compute: %s", err.msg);
    struct het_sched_stats st;
    het_sched_get_stats(s, &st);
    CHECK(st.n_fallbacks == 1, "one fallback, got %llu", (unsigned long long)st.n_fallbacks);
    CHECK(st.last_n_splits == 3, "splits: fake0 [0,1], fake1 [2], fake0 [3]; got %d", st.last_n_splits);
    CHECK(f0.n_ran == 3 && f1.n_ran == 1 && f1.ran[0] == 2, "who ran what");
    CHECK(f0.n_sync >= 1 && f1.n_sync >= 1, "hand-offs synchronise the producer");
    const float *out = het_graph_node(g, 3)->data;
    CHECK(out[5] == 0.5f * (3 * 5 + 5), "result through both devices: %g", out[5]);
    het_sched_free(s);

    /* strict: the same fallback is an error naming the op and device */
    p.strict = true;
    s = het_sched_init(&p, &err);
    CHECK(het_sched_alloc_graph(s, g, &err) == HET_OK, "alloc");
    CHECK(het_sched_compute(s, g, &err) == HET_ERR_UNSUPPORTED && strstr(err.msg, "silu") && strstr(err.msg, "fake0"),
          "strict error: %s", err.msg);
    het_sched_free(s);

    /* alternate: every node changes device when both can run it */
    f0.mask = ~0u;
    f0.n_ran = f1.n_ran = 0;
    p.strict = false;
    p.policy = HET_POLICY_ALTERNATE;
    s = het_sched_init(&p, &err);
    CHECK(het_sched_alloc_graph(s, g, &err) == HET_OK, "alloc");
    CHECK(het_sched_compute(s, g, &err) == HET_OK, "compute: %s", err.msg);
    het_sched_get_stats(s, &st);
    CHECK(st.last_n_splits == 4 && f0.n_ran == 2 && f1.n_ran == 2, "alternate: 4 splits, 2 each (%d)", st.last_n_splits);
    het_sched_free(s);

    /* no device supports it: a clear error */
    f0.mask = f1.mask = 1u << HET_OP_ADD;
    p.policy = HET_POLICY_FIRST;
    s = het_sched_init(&p, &err);
    CHECK(het_sched_alloc_graph(s, g, &err) == HET_OK, "alloc");
    CHECK(het_sched_compute(s, g, &err) == HET_ERR_UNSUPPORTED && strstr(err.msg, "no device supports"), "%s",
          err.msg);
    het_sched_free(s);

    het_graph_free(g);
    het_device_free(d0);
    het_device_free(d1);
}

int main(void)
{
    test_views();
    test_scratch_plan();
    test_placement();
    return het_test_finish();
}
