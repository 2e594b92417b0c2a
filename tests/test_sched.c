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
 * executes add/scale on F32 so results can be checked. fail != OK makes
 * every run_split fail with that status (a broken device). */
struct fake { unsigned mask; int ran[64]; int n_ran; int n_sync; enum het_status fail; };

static bool fake_supports(het_device *d, const struct het_tensor *n)
{
    return (((struct fake *)d->context)->mask >> n->op) & 1u;
}

static enum het_status fake_run(het_device *d, struct het_tensor *const *nodes, int n, het_error *err)
{
    struct fake *f = d->context;
    if (f->fail != HET_OK) return het_error_set(err, f->fail, "fake: broken");
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

/* A chain x0 -> x1 -> ... -> x10 of n floats each: its scratch plan. */
static het_graph *scratch_chain(int64_t n, struct het_scratch_plan *plan)
{
    het_graph *g = het_graph_init(64);
    const int64_t ne[1] = { n };
    struct het_tensor *x = het_new_tensor(g, HET_TYPE_F32, 1, ne);
    x->flags |= HET_TENSOR_FLAG_INPUT;
    for (int i = 0; i < 10; i++) x = het_scale(g, x, 2.0f);
    x->flags |= HET_TENSOR_FLAG_OUTPUT;
    het_error err = { 0 };
    CHECK(het_scratch_plan_build(plan, g, &err) == HET_OK, "plan: %s", err.msg);
    return g;
}

static size_t node_offset(const het_graph *g, const struct het_scratch_plan *plan, const struct het_tensor *t)
{
    return plan->offsets[t - het_graph_tensor(g, 0)];
}

static void test_scratch_plan(void)
{
    /* large tensors (a prefill's): only two are live at once, storage reused at once */
    struct het_scratch_plan plan;
    het_graph *g = scratch_chain(100000, &plan);
    size_t one = 400128; /* 400000 bytes aligned to 256 */
    CHECK(one > HET_SCRATCH_DELAY_MAX_BYTES, "the large chain is not large");
    CHECK(plan.naive == 11 * one, "naive sum %zu", plan.naive);
    CHECK(plan.peak <= 3 * one, "peak %zu should be ~ two or three buffers", plan.peak);
    /* live ranges must not overlap: check consecutive producer/consumer pairs */
    for (int i = 0; i < het_graph_n_nodes(g); i++) {
        const struct het_tensor *n = het_graph_node(g, i);
        CHECK(node_offset(g, &plan, n) != node_offset(g, &plan, n->src[0]), "node %d shares storage with its own input", i);
    }
    het_scratch_plan_free(&plan);
    het_graph_free(g);

    /* small ones (decode's rows): storage freed at a node is not reused by
     * the next HET_SCRATCH_REUSE_DELAY nodes, and the plan stays bounded */
    g = scratch_chain(1000, &plan);
    one = 4096; /* 4000 bytes aligned to 256 */
    CHECK(plan.peak <= (HET_SCRATCH_REUSE_DELAY + 3) * one, "small chain's peak %zu", plan.peak);
    int reused_early = 0;
    const int nn = het_graph_n_nodes(g);
    for (int i = 0; i < nn; i++) {
        /* node i's storage (or the input's, i = -1) is read by node i + 1 and
         * may be reused from node i + 1 + HET_SCRATCH_REUSE_DELAY on */
        const struct het_tensor *t = i < 0 ? het_graph_node(g, 0)->src[0] : het_graph_node(g, i);
        for (int j = i + 1; j < nn && j <= i + 1 + HET_SCRATCH_REUSE_DELAY - 1; j++)
            reused_early += node_offset(g, &plan, het_graph_node(g, j)) == node_offset(g, &plan, t);
    }
    CHECK(reused_early == 0, "small storage reused within %d nodes %d times", HET_SCRATCH_REUSE_DELAY, reused_early);
    het_scratch_plan_free(&plan);
    het_graph_free(g);
}

/* het_graph_mark_readers: one reader (through a view too) marked; two
 * readers, a node reading it twice, an output, and a leaf not. */
static void test_mark_readers(void)
{
    het_graph *g = het_graph_init(64);
    const int64_t ne[2] = { 8, 4 };
    struct het_tensor *x = het_new_tensor(g, HET_TYPE_F32, 2, ne);
    struct het_tensor *a = het_scale(g, x, 2.0f);                 /* read by b only        */
    struct het_tensor *b = het_scale(g, a, 2.0f);                 /* read by c and d       */
    struct het_tensor *c = het_scale(g, b, 2.0f);                 /* read through a view   */
    struct het_tensor *d = het_add(g, b, het_reshape_2d(g, c, 8, 4)); /* read by e, twice  */
    struct het_tensor *e = het_mul(g, d, d);
    struct het_tensor *f = het_scale(g, e, 2.0f);                 /* the output            */
    CHECK(f != NULL, "graph build");
    f->flags |= HET_TENSOR_FLAG_OUTPUT;
    b->flags |= HET_TENSOR_FLAG_ONE_READER; /* stale: must be cleared */
    het_graph_mark_readers(g);
    const struct het_tensor *marked[] = { a, c, e }, *unmarked[] = { x, b, d, f };
    for (size_t i = 0; i < sizeof marked / sizeof *marked; i++)
        CHECK(marked[i]->flags & HET_TENSOR_FLAG_ONE_READER, "mark readers: %s not marked", marked[i]->name);
    for (size_t i = 0; i < sizeof unmarked / sizeof *unmarked; i++)
        CHECK(!(unmarked[i]->flags & HET_TENSOR_FLAG_ONE_READER), "mark readers: %s marked", unmarked[i]->name);
    het_graph_free(g);
}

/* A graph allocated by a scheduler points into its scratch; before another
 * scheduler allocates it, forget that storage (the first one freed it). */
static void forget_storage(het_graph *g)
{
    for (int i = 0; i < het_graph_n_tensors(g); i++) het_graph_tensor(g, i)->data = NULL;
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
    struct het_sched_params p = { .devices = devs, .n_devices = 2, .policy = &het_policy_single, .policy_device = 0 };
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
    forget_storage(g);
    CHECK(het_sched_alloc_graph(s, g, &err) == HET_OK, "alloc");
    CHECK(het_sched_compute(s, g, &err) == HET_ERR_UNSUPPORTED && strstr(err.msg, "silu") && strstr(err.msg, "fake0"),
          "strict error: %s", err.msg);
    het_sched_free(s);

    /* alternate: every node changes device when both can run it */
    f0.mask = ~0u;
    f0.n_ran = f1.n_ran = 0;
    p.strict = false;
    p.policy = &het_policy_alternate;
    s = het_sched_init(&p, &err);
    forget_storage(g);
    CHECK(het_sched_alloc_graph(s, g, &err) == HET_OK, "alloc");
    CHECK(het_sched_compute(s, g, &err) == HET_OK, "compute: %s", err.msg);
    het_sched_get_stats(s, &st);
    CHECK(st.last_n_splits == 4 && f0.n_ran == 2 && f1.n_ran == 2, "alternate: 4 splits, 2 each (%d)", st.last_n_splits);
    het_sched_free(s);

    /* no device supports it: a clear error */
    f0.mask = f1.mask = 1u << HET_OP_ADD;
    p.policy = &het_policy_first;
    s = het_sched_init(&p, &err);
    forget_storage(g);
    CHECK(het_sched_alloc_graph(s, g, &err) == HET_OK, "alloc");
    CHECK(het_sched_compute(s, g, &err) == HET_ERR_UNSUPPORTED && strstr(err.msg, "no device supports"), "%s",
          err.msg);
    het_sched_free(s);

    het_graph_free(g);
    het_device_free(d0);
    het_device_free(d1);
}

static void count_log(void *user, const char *line) { (*(int *)user)++; }

/* fastest with profiles; the plan cache; pins */
static void test_fastest(void)
{
    struct fake f0 = { .mask = ~0u }, f1 = { .mask = ~0u };
    het_device *d0 = het_device_new(&fake_iface, HET_DEVICE_CPU, "fake0", &f0);
    het_device *d1 = het_device_new(&fake_iface, HET_DEVICE_VULKAN, "fake1", &f1);
    het_device *devs[2] = { d0, d1 };
    het_profile *p0 = het_profile_new("fake0", "", HET_DEVICE_CPU, false);
    het_profile *p1 = het_profile_new("fake1", "", HET_DEVICE_VULKAN, false);
    struct het_cost_fit slow = { .t0_us = 10, .gbps = 1, .gflops = 1, .m_half = 1 };
    struct het_cost_fit fast = { .t0_us = 1, .gbps = 100, .gflops = 100, .m_half = 1 };
    for (int c = 0; c < HET_OPCLASS_COUNT; c++) {
        het_profile_set_fit(p0, (enum het_op_class)c, HET_TYPE_F32, &slow, NULL);
        het_profile_set_fit(p1, (enum het_op_class)c, HET_TYPE_F32, &fast, NULL);
    }
    const het_profile *profs[2] = { p0, p1 };
    het_error err = { 0 };
    float *unused;
    struct het_sched_params p = { .devices = devs, .n_devices = 2, .profiles = profs };
    het_sched *s = het_sched_init(&p, &err);
    het_graph *g = chain_graph(&unused);
    CHECK(het_sched_alloc_graph(s, g, &err) == HET_OK, "alloc: %s", err.msg);
    float *in = het_graph_tensor(g, 0)->data;
    for (int i = 0; i < 16; i++) in[i] = (float)i;
    CHECK(het_sched_compute(s, g, &err) == HET_OK && het_sched_compute(s, g, &err) == HET_OK, "compute: %s", err.msg);
    struct het_sched_stats st;
    het_sched_get_stats(s, &st);
    CHECK(f1.n_ran == 8 && f0.n_ran == 0, "everything on the faster device (%d/%d)", f0.n_ran, f1.n_ran);
    CHECK(st.n_plans == 1 && st.n_plan_cache_hits == 1, "second compute reuses the plan (%llu built)",
          (unsigned long long)st.n_plans);
    const struct het_plan *plan = het_sched_last_plan(s);
    CHECK(plan && plan->total_us > 0 && plan->n_unmeasured == 4, "the plan is visible, unmeasured profiles flagged");
    const float *out = het_graph_node(g, 3)->data;
    CHECK(out[5] == 0.5f * (3 * 5 + 5), "result %g", out[5]);
    het_sched_free(s);

    /* a pin moves the add to the slow device */
    struct het_plan_pin pin = { .pattern = "add", .device = 0 };
    p.pins = &pin;
    p.n_pins = 1;
    s = het_sched_init(&p, &err);
    forget_storage(g);
    CHECK(het_sched_alloc_graph(s, g, &err) == HET_OK, "alloc: %s", err.msg);
    in = het_graph_tensor(g, 0)->data;
    for (int i = 0; i < 16; i++) in[i] = (float)i;
    CHECK(het_sched_compute(s, g, &err) == HET_OK, "%s", err.msg);
    out = het_graph_node(g, 3)->data;
    plan = het_sched_last_plan(s);
    CHECK(plan->nodes[1].device == 0 && (plan->nodes[1].flags & HET_PLAN_PINNED), "pinned add on fake0");
    /* 9 us saved per node on fake1 is less than two 20 us default hand-offs */
    CHECK(plan->n_splits == 1, "the chain follows the pin rather than pay hand-offs (%d splits)", plan->n_splits);
    CHECK(out[5] == 0.5f * (3 * 5 + 5), "result %g", out[5]);
    het_sched_free(s);

    /* measurement: one node a split, waited for, timed */
    p.n_pins = 0;
    s = het_sched_init(&p, &err);
    forget_storage(g);
    het_sched_set_measure(s, true);
    f1.n_sync = 0;
    CHECK(het_sched_alloc_graph(s, g, &err) == HET_OK && het_sched_compute(s, g, &err) == HET_OK, "%s", err.msg);
    int nt = 0;
    const double *times = het_sched_node_times(s, &nt);
    CHECK(nt == 4 && times && times[0] >= 0 && f1.n_sync == 4, "4 node times, 4 waits (%d, %d)", nt, f1.n_sync);
    het_sched_free(s);

    het_graph_free(g);
    het_profile_free(p0);
    het_profile_free(p1);
    het_device_free(d0);
    het_device_free(d1);
}

/* a device that fails: re-planned without it, the request completes */
static void test_recovery(void)
{
    struct fake f0 = { .mask = ~0u }, f1 = { .mask = ~0u, .fail = HET_ERR_DEVICE_LOST };
    het_device *d0 = het_device_new(&fake_iface, HET_DEVICE_CPU, "fake0", &f0);
    het_device *d1 = het_device_new(&fake_iface, HET_DEVICE_VULKAN, "fake1", &f1);
    het_device *devs[2] = { d0, d1 };
    het_error err = { 0 };
    int lines = 0;
    float *unused;
    struct het_sched_params p = { .devices = devs, .n_devices = 2, .policy = &het_policy_single, .policy_device = 1,
                                  .strict = true, .log = count_log, .log_user = &lines };
    het_sched *s = het_sched_init(&p, &err);
    het_graph *g = chain_graph(&unused);
    CHECK(het_sched_alloc_graph(s, g, &err) == HET_OK, "alloc: %s", err.msg);
    float *in = het_graph_tensor(g, 0)->data;
    for (int i = 0; i < 16; i++) in[i] = (float)i;
    CHECK(het_sched_compute(s, g, &err) == HET_OK, "the request completes: %s", err.msg);
    struct het_sched_stats st;
    het_sched_get_stats(s, &st);
    CHECK(st.n_device_failures == 1 && st.disabled_devices == 2u && lines == 1, "failure counted and logged");
    CHECK(f0.n_ran == 4, "the graph ran again on fake0 (%d)", f0.n_ran);
    const float *out = het_graph_node(g, 3)->data;
    CHECK(out[7] == 0.5f * (3 * 7 + 7), "result after recovery %g", out[7]);
    CHECK(het_sched_compute(s, g, &err) == HET_OK && f0.n_ran == 8, "later graphs avoid the failed device");
    het_sched_free(s);

    /* the only device fails: the error comes back */
    het_device *only[1] = { d1 };
    struct het_sched_params p1 = { .devices = only, .n_devices = 1 };
    s = het_sched_init(&p1, &err);
    forget_storage(g);
    CHECK(het_sched_alloc_graph(s, g, &err) == HET_OK, "alloc");
    CHECK(het_sched_compute(s, g, &err) == HET_ERR_DEVICE_LOST && strstr(err.msg, "fake1"), "%s", err.msg);
    het_sched_free(s);
    het_graph_free(g);
    het_device_free(d0);
    het_device_free(d1);
}

/* overlap: independent branches on two devices need no wait between them */
static void test_overlap_exec(void)
{
    struct fake f0 = { .mask = ~0u }, f1 = { .mask = ~0u };
    het_device *d0 = het_device_new(&fake_iface, HET_DEVICE_CPU, "fake0", &f0);
    het_device *d1 = het_device_new(&fake_iface, HET_DEVICE_VULKAN, "fake1", &f1);
    het_device *devs[2] = { d0, d1 };
    het_error err = { 0 };
    het_graph *g = het_graph_init(32);
    const int64_t ne[1] = { 16 };
    struct het_tensor *x = het_new_tensor(g, HET_TYPE_F32, 1, ne);
    x->flags |= HET_TENSOR_FLAG_INPUT;
    struct het_tensor *a = het_scale(g, x, 2.0f), *b = het_scale(g, x, 3.0f);
    het_tensor_set_name(b, "branch_b");
    het_add(g, a, b)->flags |= HET_TENSOR_FLAG_OUTPUT;
    struct het_plan_pin pins[2] = { { .pattern = "branch_b", .device = 1 }, { .pattern = "*", .device = 0 } };
    for (int ov = 0; ov < 2; ov++) {
        f0.n_sync = f1.n_sync = 0;
        struct het_sched_params p = { .devices = devs, .n_devices = 2, .pins = pins, .n_pins = 2, .overlap = ov };
        het_sched *s = het_sched_init(&p, &err);
        forget_storage(g);
        CHECK(het_sched_alloc_graph(s, g, &err) == HET_OK, "alloc: %s", err.msg);
        float *in = x->data;
        for (int i = 0; i < 16; i++) in[i] = (float)i;
        CHECK(het_sched_compute(s, g, &err) == HET_OK, "compute: %s", err.msg);
        const float *out = het_graph_node(g, 2)->data;
        CHECK(out[3] == 15.0f, "overlap %d: result %g", ov, out[3]);
        CHECK(f1.n_sync == 1, "overlap %d: the branch's device waited for once", ov);
        CHECK(f0.n_sync == (ov ? 1 : 2), "overlap %d: fake0 waited for %d times", ov, f0.n_sync);
        het_sched_free(s);
    }
    het_graph_free(g);
    het_device_free(d0);
    het_device_free(d1);
}

int main(void)
{
    test_views();
    test_scratch_plan();
    test_mark_readers();
    test_placement();
    test_fastest();
    test_recovery();
    test_overlap_exec();
    return het_test_finish();
}
