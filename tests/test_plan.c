/*
 * test_plan.c — the planner on synthetic profiles with known answers: a
 * device with a high launch cost and a high rate gets exactly the large
 * matmuls; a CPU/GPU crossover at a size computable by hand; a hand-off
 * cost that keeps a chain on one device; the DP against brute force on
 * random chains; pins, strict pins, unsupported ops, alternate/single;
 * overlap of independent branches; and the time to plan a 28-layer graph
 * (printed, never asserted).
 */
#include "het/plan.h"
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* a profile where every class of every type has the same fit */
static het_profile *make_profile(const char *name, enum het_device_kind kind, double t0, double gbps, double gflops,
                                 double split_us, bool async)
{
    het_profile *p = het_profile_new(name, "synthetic", kind, false);
    struct het_cost_fit f = { .t0_us = t0, .gbps = gbps, .gflops = gflops, .m_half = 0, .error = 0 };
    enum het_type types[] = { HET_TYPE_F32, HET_TYPE_F16, HET_TYPE_Q4_0, HET_TYPE_Q8_0 };
    for (int c = 0; c < HET_OPCLASS_COUNT; c++)
        for (int t = 0; t < 4; t++) het_profile_set_fit(p, (enum het_op_class)c, types[t], &f, NULL);
    struct het_profile_device_costs dc = { .split_us = split_us, .async = async, .peak_gbps = gbps,
                                           .peak_gflops = gflops };
    het_profile_set_device_costs(p, &dc);
    het_profile_set_label(p, true, "synthetic");
    return p;
}

/* device support: bit op of mask[d] */
struct support { unsigned mask[HET_PLAN_MAX_DEVICES]; };
static bool supports(void *user, int d, const struct het_tensor *n)
{
    return (((struct support *)user)->mask[d] >> n->op) & 1u;
}

struct fixture {
    het_profile *prof[3];
    struct het_plan_device dev[3];
    struct support sup;
    struct het_handoff_table ho;
    struct het_plan_params pp;
};

static void fixture_init(struct fixture *f, int n, het_profile *a, het_profile *b, het_profile *c)
{
    memset(f, 0, sizeof *f);
    het_profile *p[3] = { a, b, c };
    for (int i = 0; i < n; i++) {
        f->prof[i] = p[i];
        f->dev[i] = (struct het_plan_device){ het_profile_device_name(p[i]), p[i], false };
        f->sup.mask[i] = ~0u;
    }
    f->pp = (struct het_plan_params){ .devices = f->dev, .n_devices = n, .supports = supports,
                                      .supports_user = &f->sup, .handoffs = &f->ho };
}

static void fixture_free(struct fixture *f)
{
    for (int i = 0; i < 3; i++) het_profile_free(f->prof[i]);
}

static double predict(const het_profile *p, const struct het_tensor *t) { return het_profile_predict(p, t); }

/* --------------------------------------------------------------------------- */

static void test_large_matmuls_to_gpu(void)
{
    struct fixture f;
    fixture_init(&f, 2, make_profile("cpu", HET_DEVICE_CPU, 1, 20, 100, 0, false),
                 make_profile("gpu", HET_DEVICE_VULKAN, 300, 100, 5000, 0, true), NULL);
    het_graph *g = het_graph_init(64);
    const int64_t xne[2] = { 1024, 32 };
    struct het_tensor *x = het_new_tensor(g, HET_TYPE_F32, 2, xne);
    const int64_t ns[] = { 32, 4096, 64, 16384, 128, 8192, 256 };
    for (int i = 0; i < 7; i++) {
        const int64_t wne[2] = { 1024, ns[i] };
        het_mul_mat(g, het_new_tensor(g, HET_TYPE_Q4_0, 2, wne), x);
    }
    struct het_plan plan = { 0 };
    het_error err = { 0 };
    CHECK(het_plan_build(&f.pp, g, &plan, &err) == HET_OK, "plan: %s", err.msg);
    for (int i = 0; i < 7; i++) {
        const struct het_tensor *t = het_graph_node(g, i);
        bool gpu_faster = predict(f.prof[1], t) < predict(f.prof[0], t);
        CHECK(plan.nodes[i].device == (gpu_faster ? 1 : 0), "node %d (N=%lld) on the faster device", i,
              (long long)ns[i]);
        CHECK(gpu_faster == (ns[i] >= 4096), "only the large matmuls are faster on the gpu (N=%lld)", (long long)ns[i]);
        CHECK(!isnan(plan.nodes[i].alt_us[0]) && !isnan(plan.nodes[i].alt_us[1]), "alternatives predicted");
    }
    CHECK(!strcmp(plan.method, "dp") && plan.n_unmeasured == 0, "method %s", plan.method);
    het_plan_free(&plan);
    het_graph_free(g);
    fixture_free(&f);
}

/* cpu: t = flops / 100 GFLOP/s; gpu: t = 100 us + flops / 10 TFLOP/s; bytes free.
 * Equal at flops = 100 / (1e-5 - 1e-7) = 1.0101e7, i.e. M = 4.82 for 1024x1024. */
static void test_crossover(void)
{
    struct fixture f;
    fixture_init(&f, 2, make_profile("cpu", HET_DEVICE_CPU, 0, 1e6, 100, 0, false),
                 make_profile("gpu", HET_DEVICE_VULKAN, 100, 1e6, 10000, 0, true), NULL);
    double flops = 0;
    double m = het_plan_crossover(f.prof[0], f.prof[1], HET_TYPE_Q4_0, 1024, 1024, 0, &flops);
    CHECK(m == 5, "crossover at M = 5, got %g", m);
    CHECK(fabs(flops - 2.0 * 1024 * 1024 * 5) < 1, "crossover flops %g", flops);
    printf("q4_0 1024x1024 matmul: cpu below M=%g (%.1f MFLOP), gpu above\n", m, flops / 1e6);
    double m2 = het_plan_crossover(f.prof[0], f.prof[1], HET_TYPE_Q4_0, 1024, 1024, 50, NULL);
    CHECK(m2 == 8, "a 50 us hand-off moves it to M = 8 (1.5e7 flops), got %g", m2);
    CHECK(het_plan_crossover(f.prof[1], f.prof[0], HET_TYPE_Q4_0, 1024, 1024, 0, NULL) == 0,
          "the reverse direction: cpu wins from the start");
    CHECK(isnan(het_plan_crossover(f.prof[0], f.prof[1], HET_TYPE_Q6_K, 1024, 1024, 0, NULL)), "no q6_k model: NAN");

    /* the planner agrees, one matmul at M = 4 and one at M = 5 */
    het_graph *g = het_graph_init(32);
    const int64_t wne[2] = { 1024, 1024 }, x4[2] = { 1024, 4 }, x5[2] = { 1024, 5 };
    struct het_tensor *w = het_new_tensor(g, HET_TYPE_Q4_0, 2, wne);
    het_mul_mat(g, w, het_new_tensor(g, HET_TYPE_F32, 2, x4));
    het_mul_mat(g, w, het_new_tensor(g, HET_TYPE_F32, 2, x5));
    struct het_plan plan = { 0 };
    het_error err = { 0 };
    CHECK(het_plan_build(&f.pp, g, &plan, &err) == HET_OK, "plan: %s", err.msg);
    CHECK(plan.nodes[0].device == 0 && plan.nodes[1].device == 1, "M=4 on cpu, M=5 on gpu: %d %d",
          plan.nodes[0].device, plan.nodes[1].device);
    het_plan_free(&plan);
    het_graph_free(g);
    fixture_free(&f);
}

/* x -> scale -> scale -> ... : the gpu is a little faster per node */
static het_graph *chain(int n, int64_t size)
{
    het_graph *g = het_graph_init(4 * n + 8);
    struct het_tensor *x = het_new_tensor_1d(g, HET_TYPE_F32, size);
    for (int i = 0; i < n; i++) x = het_scale(g, x, 1.5f);
    return g;
}

static void test_handoff_keeps_chain(void)
{
    struct fixture f;
    fixture_init(&f, 2, make_profile("cpu", HET_DEVICE_CPU, 10, 10, 100, 0, false),
                 make_profile("gpu", HET_DEVICE_VULKAN, 10, 20, 100, 0, false), NULL);
    struct het_plan plan = { 0 };
    het_error err = { 0 };
    f.ho.c[0][1] = f.ho.c[1][0] = (struct het_handoff_cost){ 1000, 0 };
    f.sup.mask[1] &= ~(1u << HET_OP_SCALE);
    /* 512 kB a node (cpu 62 us, gpu 36 us); the first node only runs on the
     * cpu: with costly hand-offs the rest stays there */
    het_graph *g2 = het_graph_init(32);
    struct het_tensor *x = het_new_tensor_1d(g2, HET_TYPE_F32, 1 << 16);
    x = het_scale(g2, x, 2.0f);
    for (int i = 0; i < 5; i++) x = het_silu(g2, x);
    CHECK(het_plan_build(&f.pp, g2, &plan, &err) == HET_OK, "plan: %s", err.msg);
    int on_cpu = 0;
    for (int i = 0; i < plan.n_nodes; i++) on_cpu += plan.nodes[i].device == 0;
    CHECK(on_cpu == 6 && plan.n_splits == 1, "1000 us hand-off: the chain stays on the cpu (%d of 6)", on_cpu);
    /* cheap hand-offs: everything after the first node moves to the faster gpu */
    f.ho.c[0][1] = f.ho.c[1][0] = (struct het_handoff_cost){ 5, 0 };
    CHECK(het_plan_build(&f.pp, g2, &plan, &err) == HET_OK, "plan: %s", err.msg);
    CHECK(plan.nodes[0].device == 0 && plan.n_splits == 2 && plan.nodes[5].device == 1,
          "5 us hand-off: cpu then gpu (%d splits)", plan.n_splits);
    CHECK(fabs(plan.handoff_us - 5) < 1e-9, "one hand-off charged: %g", plan.handoff_us);
    het_plan_free(&plan);
    het_graph_free(g2);
    fixture_free(&f);
}

/* independent reference: serial cost of an assignment of a chain */
static double chain_cost(const struct fixture *f, const het_graph *g, const int *a)
{
    double t = 0;
    for (int i = 0; i < het_graph_n_nodes(g); i++) {
        const struct het_tensor *n = het_graph_node(g, i);
        struct het_profile_device_costs dc;
        het_profile_get_device_costs(f->prof[a[i]], &dc);
        t += predict(f->prof[a[i]], n);
        if (i == 0 || a[i] != a[i - 1]) t += dc.split_us;
        if (i > 0 && a[i] != a[i - 1]) {
            const struct het_handoff_cost *h = &f->ho.c[a[i - 1]][a[i]];
            t += h->fixed_us + (h->gbps > 0 ? het_nelements(n) * 4.0 / (h->gbps * 1e3) : 0);
        }
    }
    return t;
}

static void test_dp_vs_brute_force(void)
{
    het_test_seed(42);
    for (int trial = 0; trial < 20; trial++) {
        struct fixture f;
        het_profile *p[3];
        for (int d = 0; d < 3; d++)
            p[d] = make_profile(d == 0 ? "a" : d == 1 ? "b" : "c", HET_DEVICE_CPU, het_test_rand_uniform(1, 50),
                                het_test_rand_uniform(5, 100), 100, het_test_rand_uniform(0, 30), false);
        fixture_init(&f, 3, p[0], p[1], p[2]);
        for (int a = 0; a < 3; a++)
            for (int b = 0; b < 3; b++)
                if (a != b) f.ho.c[a][b] = (struct het_handoff_cost){ het_test_rand_uniform(0, 40),
                                                                      het_test_rand_uniform(1, 50) };
        for (int d = 0; d < 3; d++) /* each device lacks one op */
            f.sup.mask[d] &= ~(1u << (d == 0 ? HET_OP_SILU : d == 1 ? HET_OP_SCALE : HET_OP_RMS_NORM));
        int n = 7;
        het_graph *g = het_graph_init(32);
        struct het_tensor *x = het_new_tensor_1d(g, HET_TYPE_F32, 4096);
        for (int i = 0; i < n; i++) {
            int64_t ne = 1024 * (1 + (int64_t)(het_test_rand_u64() % 64));
            struct het_tensor *v = het_view_1d(g, x, ne < x->ne[0] ? ne : x->ne[0], 0);
            int op = (int)(het_test_rand_u64() % 3);
            x = op == 0 ? het_silu(g, v) : op == 1 ? het_scale(g, v, 2) : het_rms_norm(g, v, 1e-5f);
        }
        struct het_plan plan = { 0 };
        het_error err = { 0 };
        CHECK(het_plan_build(&f.pp, g, &plan, &err) == HET_OK, "plan: %s", err.msg);
        double best = INFINITY;
        int a[8];
        for (int code = 0; code < 2187; code++) { /* 3^7 */
            bool ok = true;
            for (int i = 0, c = code; i < n; i++, c /= 3) {
                a[i] = c % 3;
                ok &= supports(&f.sup, a[i], het_graph_node(g, i));
            }
            if (ok) best = fmin(best, chain_cost(&f, g, a));
        }
        int pa[8];
        for (int i = 0; i < n; i++) pa[i] = plan.nodes[i].device;
        CHECK(fabs(plan.serial_us - best) < 1e-6 * best, "trial %d: DP %g vs brute force %g", trial, plan.serial_us,
              best);
        CHECK(fabs(chain_cost(&f, g, pa) - plan.serial_us) < 1e-6 * best, "trial %d: the plan's own total", trial);
        het_plan_free(&plan);
        het_graph_free(g);
        fixture_free(&f);
    }
}

static void test_pins_and_policies(void)
{
    struct fixture f;
    fixture_init(&f, 2, make_profile("cpu", HET_DEVICE_CPU, 1, 20, 100, 0, false),
                 make_profile("vulkan0", HET_DEVICE_VULKAN, 1, 100, 5000, 0, true), NULL);
    het_graph *g = het_graph_init(64);
    const int64_t xne[2] = { 1024, 64 }, wne[2] = { 1024, 4096 };
    struct het_tensor *x = het_new_tensor(g, HET_TYPE_F32, 2, xne);
    struct het_tensor *y = het_mul_mat(g, het_new_tensor(g, HET_TYPE_Q4_0, 2, wne), x);
    het_tensor_set_name(y, "ffn_up.3");
    struct het_tensor *z = het_rms_norm(g, y, 1e-5f);
    het_tensor_set_name(z, "norm.3");
    struct het_tensor *r = het_rope(g, het_reshape_3d(g, z, 128, 32, 64), het_new_tensor_1d(g, HET_TYPE_I32, 64), 128,
                                    HET_ROPE_NEOX, 10000, 1);
    het_tensor_set_name(r, "q.3");
    struct het_plan plan = { 0 };
    het_error err = { 0 };

    CHECK(het_plan_build(&f.pp, g, &plan, &err) == HET_OK, "plan: %s", err.msg);
    CHECK(plan.nodes[0].device == 1 && plan.nodes[2].device == 1, "all on the fast vulkan0 by default");

    /* pins: a glob on the node name and one on the op name */
    struct het_plan_pin pins[4];
    int np = 0;
    const char *names[2] = { "cpu", "vulkan0" };
    CHECK(het_plan_pins_parse("ffn_*=cpu,rope=cpu", names, 2, pins, 4, &np, &err) == HET_OK && np == 2,
          "parse pins: %s", err.msg);
    CHECK(het_plan_pins_parse("ffn_*=tpu", names, 2, pins + 2, 2, &np, &err) == HET_ERR_INVALID &&
          strstr(err.msg, "tpu"), "unknown device in a pin: %s", err.msg);
    CHECK(het_plan_pins_parse("nonsense", names, 2, pins + 2, 2, &np, &err) == HET_ERR_INVALID, "a pin needs '='");
    np = 2;
    f.pp.pins = pins;
    f.pp.n_pins = np;
    CHECK(het_plan_build(&f.pp, g, &plan, &err) == HET_OK, "plan: %s", err.msg);
    CHECK(plan.nodes[0].device == 0 && (plan.nodes[0].flags & HET_PLAN_PINNED), "ffn_up.3 pinned to cpu");
    CHECK(plan.nodes[2].device == 0 && (plan.nodes[2].flags & HET_PLAN_PINNED), "rope pinned to cpu by op name");
    CHECK(!(plan.nodes[1].flags & HET_PLAN_PINNED), "norm not pinned");

    /* a pin to a device that cannot run the node: fallback, or an error under strict */
    f.sup.mask[0] &= ~(1u << HET_OP_ROPE);
    CHECK(het_plan_build(&f.pp, g, &plan, &err) == HET_OK, "plan: %s", err.msg);
    CHECK(plan.nodes[2].device == 1 && (plan.nodes[2].flags & HET_PLAN_FALLBACK) && plan.n_fallbacks == 1,
          "rope falls back to vulkan0");
    f.pp.strict = true;
    CHECK(het_plan_build(&f.pp, g, &plan, &err) == HET_ERR_UNSUPPORTED && strstr(err.msg, "rope") &&
          strstr(err.msg, "cpu") && strstr(err.msg, "pinned"), "strict pin: %s", err.msg);
    f.pp.strict = false;
    f.pp.n_pins = 0;

    /* unsupported ops are routed to a device that has them, whatever it costs */
    f.sup.mask[0] = ~0u;
    f.sup.mask[1] &= ~(1u << HET_OP_RMS_NORM);
    CHECK(het_plan_build(&f.pp, g, &plan, &err) == HET_OK, "plan: %s", err.msg);
    CHECK(plan.nodes[1].device == 0 && isnan(plan.nodes[1].alt_us[1]), "norm routed to the cpu");
    CHECK(plan.n_fallbacks == 0, "routing by the fastest policy is not a fallback");

    /* single:cpu, and no device at all */
    f.pp.policy = &het_policy_single;
    f.pp.policy_device = 0;
    CHECK(het_plan_build(&f.pp, g, &plan, &err) == HET_OK && plan.n_splits == 1 && plan.nodes[0].device == 0,
          "single: one split on the cpu");
    f.sup.mask[0] &= ~(1u << HET_OP_RMS_NORM);
    CHECK(het_plan_build(&f.pp, g, &plan, &err) == HET_ERR_UNSUPPORTED && strstr(err.msg, "no device supports"),
          "%s", err.msg);
    f.sup.mask[0] = f.sup.mask[1] = ~0u;

    /* alternate: a change of device at every node */
    f.pp.policy = &het_policy_alternate;
    CHECK(het_plan_build(&f.pp, g, &plan, &err) == HET_OK && plan.n_splits == 3 && plan.nodes[0].device == 0 &&
          plan.nodes[1].device == 1 && plan.nodes[2].device == 0, "alternate: 3 splits");
    /* disabled devices are never planned on */
    f.pp.policy = &het_policy_fastest;
    f.dev[1].disabled = true;
    CHECK(het_plan_build(&f.pp, g, &plan, &err) == HET_OK && plan.n_splits == 1 && plan.nodes[0].device == 0,
          "a disabled device is skipped");
    het_plan_free(&plan);
    het_graph_free(g);
    fixture_free(&f);
}

/* x -> (A, B) -> A + B: two equal devices; overlapping the branches halves the time */
static void test_overlap(void)
{
    struct fixture f;
    fixture_init(&f, 2, make_profile("cpu", HET_DEVICE_CPU, 1, 50, 200, 0, false),
                 make_profile("gpu", HET_DEVICE_VULKAN, 1, 50, 200, 0, true), NULL);
    f.ho.c[0][1] = f.ho.c[1][0] = (struct het_handoff_cost){ 10, 0 };
    het_graph *g = het_graph_init(32);
    const int64_t xne[2] = { 2048, 64 }, wne[2] = { 2048, 2048 };
    struct het_tensor *x = het_new_tensor(g, HET_TYPE_F32, 2, xne);
    struct het_tensor *a = het_mul_mat(g, het_new_tensor(g, HET_TYPE_F16, 2, wne), x);
    struct het_tensor *b = het_mul_mat(g, het_new_tensor(g, HET_TYPE_F16, 2, wne), x);
    het_add(g, a, b);
    struct het_plan serial = { 0 }, over = { 0 };
    het_error err = { 0 };
    CHECK(het_plan_build(&f.pp, g, &serial, &err) == HET_OK, "plan: %s", err.msg);
    f.pp.overlap = true;
    CHECK(het_plan_build(&f.pp, g, &over, &err) == HET_OK, "plan: %s", err.msg);
    printf("branches: serial %.0f us (%s), overlapped %.0f us (%s)\n", serial.total_us, serial.method, over.total_us,
           over.method);
    CHECK(serial.n_splits == 1, "without overlap one device does everything");
    CHECK(!strcmp(over.method, "list") && over.nodes[0].device != over.nodes[1].device,
          "with overlap the branches run on both devices");
    CHECK(over.total_us < 0.7 * serial.total_us, "overlap predicted faster: %g vs %g", over.total_us,
          serial.total_us);
    /* the same two devices on the CPU's cores (lavapipe beside the CPU): one
     * resource, so running both at once earns nothing */
    for (int d = 0; d < 2; d++) {
        het_profile *p = (het_profile *)f.dev[d].profile;
        struct het_profile_device_costs dc;
        het_profile_get_device_costs(p, &dc);
        dc.shares_cpu_cores = true;
        het_profile_set_device_costs(p, &dc);
    }
    struct het_plan shared = { 0 };
    CHECK(het_plan_build(&f.pp, g, &shared, &err) == HET_OK, "plan: %s", err.msg);
    CHECK(shared.total_us >= serial.total_us * (1 - 1e-9), "no overlap credit on shared cores: %g vs serial %g",
          shared.total_us, serial.total_us);
    het_plan_free(&shared);
    het_plan_free(&serial);
    het_plan_free(&over);
    het_graph_free(g);
    fixture_free(&f);
}

/* The what-if ryzen-ai-7040 on the Qwen3-0.6B-shaped graph. What its figures
 * imply, not a measurement: prefill's matmuls go to the 780M (8.3 TFLOPS
 * against the CPU's 845 GFLOP/s on the same memory) and the NPU (150 us a
 * dispatch, 2 TOP/s) wins nothing in either phase. (Decode is printed, not
 * checked: the roofline's half rate at M = 8 makes the CPU's GEMV compute
 * bound, which is the weak point of these figures.) */
static bool what_if_supports(void *user, int d, const struct het_tensor *node)
{
    het_profile *const *p = user;
    return het_profile_has_model(p[d], node);
}

static void test_what_if(void)
{
    het_profile *p[3] = { NULL };
    int n = 0;
    het_error err = { 0 };
    CHECK(het_profile_what_if("ryzen-ai-7040", p, 3, &n, &err) == HET_OK && n == 3, "ryzen-ai-7040: %s", err.msg);
    if (n != 3) return;
    int k = 0;
    CHECK(het_profile_what_if("ryzen-ai-9999", p, 3, &k, &err) == HET_ERR_INVALID && k == 0, "unknown machine");
    CHECK(het_profile_what_if_desc("ryzen-ai-7040") && !het_profile_what_if_desc("x") &&
          !strcmp(het_profile_what_if_name(0), "ryzen-ai-7040"), "names and descriptions");
    struct het_profile_device_costs dc[3];
    struct het_plan_device dev[3];
    for (int d = 0; d < 3; d++) {
        CHECK(!het_profile_is_measured(p[d]) && strstr(het_profile_label(p[d]), "what-if ryzen-ai-7040 (unmeasured)"),
              "label '%s'", het_profile_label(p[d]));
        het_profile_get_device_costs(p[d], &dc[d]);
        dev[d] = (struct het_plan_device){ het_profile_device_name(p[d]), p[d], false };
    }
    CHECK(dc[0].shares_cpu_cores && !dc[0].async && dc[1].async && !dc[1].shares_cpu_cores, "cpu and igpu caps");
    CHECK(dc[2].lossy && !dc[2].async && dc[2].kernel_switch_us == 2000, "the NPU: lossy, synchronous, 2 ms switch");
    struct het_plan_params pp = { .devices = dev, .n_devices = 3, .supports = what_if_supports, .supports_user = p };
    for (int phase = 0; phase < 2; phase++) {
        het_graph *g = het_test_qwen3_graph(phase ? 128 : 1);
        struct het_plan plan = { 0 };
        CHECK(het_plan_build(&pp, g, &plan, &err) == HET_OK, "plan: %s", err.msg);
        int mm = 0, per[3] = { 0 };
        for (int i = 0; i < plan.n_nodes; i++) {
            if (het_graph_node(g, i)->op != HET_OP_MUL_MAT) continue;
            mm++;
            per[plan.nodes[i].device]++;
        }
        printf("what-if ryzen-ai-7040 %s: %d matmuls: zen4 %d, radeon780m %d, xdna1 %d; predicted %.0f us\n",
               phase ? "prefill 128" : "decode", mm, per[0], per[1], per[2], plan.total_us);
        CHECK(per[2] == 0, "the NPU wins no matmul");
        if (phase) CHECK(per[1] == mm, "prefill: every matmul on the 780M (%d of %d)", per[1], mm);
        het_plan_free(&plan);
        het_graph_free(g);
    }
    for (int d = 0; d < 3; d++) het_profile_free(p[d]);
}

/* the policies' table, their names, and what each wants of a node */
static void test_policy_table(void)
{
    int n = 0;
    for (; het_policies[n]; n++) {
        const struct het_policy *p = het_policies[n];
        CHECK(p->name && *p->name && p->description && *p->description && p->wanted, "policy %d complete", n);
        CHECK(het_policy_find(p->name) == p, "find %s", p->name);
    }
    CHECK(n == 4, "four policies, got %d", n);
    const char *names[2] = { "cpu", "vulkan0" };
    const struct het_policy *p = NULL;
    int d = 7;
    het_error err = { 0 };
    CHECK(het_policy_from_name(NULL, names, 2, &p, &d, &err) == HET_OK && p == &het_policy_fastest && d == -1,
          "no policy named: fastest");
    CHECK(het_policy_from_name("single:vulkan", names, 2, &p, &d, &err) == HET_OK && p == &het_policy_single && d == 1,
          "single:vulkan is vulkan0 (%d)", d);
    CHECK(het_policy_from_name("first", names, 2, &p, &d, &err) == HET_OK && p == &het_policy_first && d == -1, "first");
    CHECK(het_policy_from_name("single", names, 2, &p, &d, &err) == HET_ERR_INVALID && strstr(err.msg, "single:DEV"),
          "single needs a device: %s", err.msg);
    CHECK(het_policy_from_name("fastest:cpu", names, 2, &p, &d, &err) == HET_ERR_INVALID &&
          strstr(err.msg, "takes no device"), "fastest takes none: %s", err.msg);
    CHECK(het_policy_from_name("single:npu", names, 2, &p, &d, &err) == HET_ERR_INVALID && strstr(err.msg, "npu"),
          "single:npu not in the set: %s", err.msg);
    CHECK(het_policy_from_name("bogus", names, 2, &p, &d, &err) == HET_ERR_INVALID &&
          strstr(err.msg, "fastest, first, single:DEV, alternate"), "unknown names the table: %s", err.msg);
    double both[2] = { 5, 1 }, gpu_only[2] = { NAN, 1 };
    bool off[2] = { false, false };
    struct het_policy_ctx c = { .n_devices = 2, .device = -1, .cost = both, .disabled = off, .prev = -1 };
    CHECK(het_policy_fastest.wanted(&c) == -1, "fastest wants no device");
    CHECK(het_policy_first.wanted(&c) == 0, "first: the first device");
    c.cost = gpu_only;
    CHECK(het_policy_first.wanted(&c) == 1, "first: the first device that can run it");
    c.device = 1;
    CHECK(het_policy_single.wanted(&c) == 1, "single: its device");
    c.prev = 0;
    CHECK(het_policy_alternate.wanted(&c) == 1, "alternate: the next device");
    c.prev = 1;
    CHECK(het_policy_alternate.wanted(&c) == 0, "alternate: round robin");
    off[0] = true;
    CHECK(het_policy_alternate.wanted(&c) == 1, "alternate: skips a disabled device");
}

/* ---------------------------------------------------------------------------
 * a 28-layer Qwen3-0.6B-shaped graph, for the planning time                  */

static void test_plan_time(void)
{
    struct fixture f;
    fixture_init(&f, 3, make_profile("cpu", HET_DEVICE_CPU, 2, 40, 300, 3, false),
                 make_profile("vulkan0", HET_DEVICE_VULKAN, 8, 80, 3000, 60, true),
                 make_profile("npu", HET_DEVICE_NPU, 31, 38, 10000, 150, true));
    for (int a = 0; a < 3; a++)
        for (int b = 0; b < 3; b++)
            if (a != b) f.ho.c[a][b] = (struct het_handoff_cost){ 20, 0 };
    f.sup.mask[2] = 1u << HET_OP_MUL_MAT; /* the NPU only does matmuls */
    for (int phase = 0; phase < 2; phase++) {
        het_graph *g = het_test_qwen3_graph(phase ? 128 : 1);
        het_error err = { 0 };
        CHECK(het_graph_status(g, &err) == HET_OK, "graph: %s", err.msg);
        struct het_plan plan = { 0 };
        for (int ov = 0; ov < 2; ov++) {
            f.pp.overlap = ov;
            double t0 = het_test_now_ms();
            int reps = 20;
            for (int r = 0; r < reps; r++) CHECK(het_plan_build(&f.pp, g, &plan, &err) == HET_OK, "%s", err.msg);
            double ms = (het_test_now_ms() - t0) / reps;
            int per[3] = { 0 };
            for (int i = 0; i < plan.n_nodes; i++) per[plan.nodes[i].device]++;
            printf("%s, %d nodes, overlap %d: planned in %.3f ms (%s); predicted %.0f us, %d splits, "
                   "cpu/vulkan/npu %d/%d/%d nodes\n", phase ? "prefill 128" : "decode", plan.n_nodes, ov, ms,
                   plan.method, plan.total_us, plan.n_splits, per[0], per[1], per[2]);
            CHECK(plan.n_nodes > 500 && plan.total_us > 0, "a full plan");
        }
        het_plan_free(&plan);
        het_graph_free(g);
    }
    fixture_free(&f);
}

static void test_unmeasured(void)
{
    const struct het_roofline r = { .gbps = 40, .gflops = 200, .t0_us = 1, .split_us = 3, .source = "test" };
    het_profile *d = het_profile_from_roofline("cpu", "", HET_DEVICE_CPU, NULL, &r);
    struct het_plan_device dev = { "cpu", d, false };
    struct support sup = { { ~0u } };
    struct het_plan_params pp = { .devices = &dev, .n_devices = 1, .supports = supports, .supports_user = &sup };
    het_graph *g = chain(3, 1000);
    struct het_plan plan = { 0 };
    het_error err = { 0 };
    CHECK(het_plan_build(&pp, g, &plan, &err) == HET_OK, "plan: %s", err.msg);
    CHECK(plan.n_unmeasured == 3 && (plan.nodes[0].flags & HET_PLAN_UNMEASURED), "defaults are flagged unmeasured");
    het_plan_free(&plan);
    het_graph_free(g);
    het_profile_free(d);
}

int main(void)
{
    test_large_matmuls_to_gpu();
    test_crossover();
    test_handoff_keeps_chain();
    test_dp_vs_brute_force();
    test_pins_and_policies();
    test_policy_table();
    test_what_if();
    test_overlap();
    test_unmeasured();
    test_plan_time();
    return het_test_finish();
}
