/*
 * test_plan_accuracy.c — the planner's accuracy budget on synthetic
 * profiles with answers computable by hand: budget 0 puts nothing on the
 * lossy device, a large budget everything it is faster for, intermediate
 * budgets the groups with the best time saved per unit of KL (not simply
 * the cheapest in KL); pins, single:DEV and first; the default KL of nodes
 * no group matches; the planning time of a 28-layer graph with a budget
 * (printed, never asserted); the scheduler planning with a budget (its
 * plan cache keyed on it). Also the logits comparison (KL by hand, top-1,
 * non-finite values) and sensitivity tables as JSON (round trip, errors).
 */
#include "het/accuracy.h"
#include "het/plan.h"
#include "het/sched.h"
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* bandwidth-bound profile: every node costs bytes / gbps */
static het_profile *make_profile(const char *name, enum het_device_kind kind, double gbps)
{
    het_profile *p = het_profile_new(name, "synthetic", kind, false);
    struct het_cost_fit f = { .t0_us = 0, .gbps = gbps, .gflops = 1e6, .m_half = 0, .error = 0 };
    for (int c = 0; c < HET_OPCLASS_COUNT; c++) {
        het_profile_set_fit(p, (enum het_op_class)c, HET_TYPE_Q4_0, &f, NULL);
        het_profile_set_fit(p, (enum het_op_class)c, HET_TYPE_F32, &f, NULL);
    }
    /* the NPU approximates (int8 activations): its profile says so, as the device's caps would */
    struct het_profile_device_costs dc = { .split_us = 0, .lossy = kind == HET_DEVICE_NPU, .peak_gbps = gbps,
                                           .peak_gflops = 1e6 };
    het_profile_set_device_costs(p, &dc);
    het_profile_set_label(p, true, "synthetic");
    return p;
}

static bool supports_all(void *user, int d, const struct het_tensor *n)
{
    (void)user;
    (void)d;
    (void)n;
    return true;
}

/* only matmuls on the npu (device index *user) */
static bool supports_npu_matmul(void *user, int d, const struct het_tensor *n)
{
    return d != *(int *)user || n->op == HET_OP_MUL_MAT;
}

struct fixture {
    het_profile *prof[2];
    struct het_plan_device dev[2];
    struct het_handoff_table ho;   /* zero: no hand-off or split costs */
    struct het_plan_params pp;
    struct het_sensitivity sens;
    struct het_plan_accuracy acc;
};

/* cpu 10 GB/s, npu 40 GB/s (a lossy profile); npu_first swaps the order */
static void fixture_init(struct fixture *f, bool npu_first)
{
    memset(f, 0, sizeof *f);
    het_profile *cpu = make_profile("cpu", HET_DEVICE_CPU, 10), *npu = make_profile("npu", HET_DEVICE_NPU, 40);
    f->prof[0] = npu_first ? npu : cpu;
    f->prof[1] = npu_first ? cpu : npu;
    for (int i = 0; i < 2; i++) f->dev[i] = (struct het_plan_device){ het_profile_device_name(f->prof[i]), f->prof[i], false };
    f->pp = (struct het_plan_params){ .devices = f->dev, .n_devices = 2, .supports = supports_all, .handoffs = &f->ho };
    het_sensitivity_add(&f->sens, "a.*", 1e-3, NAN, 2, NULL);
    het_sensitivity_add(&f->sens, "b.*", 1e-3, NAN, 2, NULL);
    het_sensitivity_add(&f->sens, "c.*", 5e-3, NAN, 2, NULL);
    f->acc = (struct het_plan_accuracy){ .budget_kl = NAN, .sens = &f->sens, .node_kl = 3e-4 };
}

static void fixture_free(struct fixture *f)
{
    het_profile_free(f->prof[0]);
    het_profile_free(f->prof[1]);
}

/* Independent q4_0 matmuls (K 1024) of one input: a.0 a.1 (N 4096), b.0 b.1
 * (N 1024), c.0 c.1 (N 16384), d.0 (N 2048, in no group). Time saved on the
 * npu is proportional to N, so per unit of KL: a 8.2e6, c 6.6e6, b 2.0e6. */
static het_graph *groups_graph(void)
{
    het_graph *g = het_graph_init(32);
    const int64_t xne[2] = { 1024, 1 };
    struct het_tensor *x = het_new_tensor(g, HET_TYPE_F32, 2, xne);
    const char *names[] = { "a.0", "b.0", "c.0", "a.1", "b.1", "c.1", "d.0" };
    const int64_t ns[] = { 4096, 1024, 16384, 4096, 1024, 16384, 2048 };
    for (int i = 0; i < 7; i++) {
        const int64_t wne[2] = { 1024, ns[i] };
        struct het_tensor *w = het_new_tensor(g, HET_TYPE_Q4_0, 2, wne);
        w->flags |= HET_TENSOR_FLAG_WEIGHT;
        het_tensor_set_name(het_mul_mat(g, w, x), "%s", names[i]);
    }
    return g;
}

static int node_index(const het_graph *g, const char *name)
{
    for (int i = 0; i < het_graph_n_nodes(g); i++)
        if (!strcmp(het_graph_node(g, i)->name, name)) return i;
    return -1;
}

/* "a.0 a.1 d.0": the nodes on device d, in graph order */
static void on_device(const het_graph *g, const struct het_plan *p, int d, char *buf, size_t size)
{
    size_t o = 0;
    buf[0] = 0;
    for (int i = 0; i < p->n_nodes; i++)
        if (p->nodes[i].device == d)
            o += (size_t)snprintf(buf + o, size > o ? size - o : 0, "%s%s", o ? " " : "", het_graph_node(g, i)->name);
}

static bool plan_with(struct fixture *f, const het_graph *g, double budget, struct het_plan *plan, char *npu_nodes,
                      size_t size)
{
    f->acc.budget_kl = budget;
    f->pp.accuracy = &f->acc;
    het_error err = { 0 };
    bool ok = het_plan_build(&f->pp, g, plan, &err) == HET_OK;
    CHECK(ok, "plan (budget %g): %s", budget, err.msg);
    int npu = het_profile_device_kind(f->dev[0].profile) == HET_DEVICE_NPU ? 0 : 1;
    on_device(g, plan, npu, npu_nodes, size);
    return ok;
}

static void test_budget(void)
{
    struct fixture f;
    fixture_init(&f, false);
    het_graph *g = groups_graph();
    struct het_plan plan = { 0 };
    char got[256];
    het_error err = { 0 };

    CHECK(het_plan_device_lossy(&f.pp, 1) && !het_plan_device_lossy(&f.pp, 0), "a profile that says lossy is lossy");
    f.pp.lossy_mask = 1;
    CHECK(het_plan_device_lossy(&f.pp, 0), "or one the caller says is");
    f.pp.lossy_mask = 0;
    /* without accuracy input: every node is faster on the npu */
    CHECK(het_plan_build(&f.pp, g, &plan, &err) == HET_OK, "plan: %s", err.msg);
    on_device(g, &plan, 1, got, sizeof got);
    CHECK(!strcmp(got, "a.0 b.0 c.0 a.1 b.1 c.1 d.0"), "no budget: all on the npu, got '%s'", got);
    CHECK(isnan(plan.pred_kl) && plan.n_kept == 0, "no prediction asked");
    const double free_us = plan.total_us;

    /* a prediction without a cap */
    plan_with(&f, g, NAN, &plan, got, sizeof got);
    CHECK(!strcmp(got, "a.0 b.0 c.0 a.1 b.1 c.1 d.0"), "budget NAN: no cap, got '%s'", got);
    CHECK(fabs(plan.pred_kl - 7.3e-3) < 1e-12, "predicted KL = 1e-3 + 1e-3 + 5e-3 + 3e-4: %g", plan.pred_kl);
    int a0 = node_index(g, "a.0"), d0 = node_index(g, "d.0");
    CHECK(fabs(plan.nodes[a0].kl - 5e-4) < 1e-15 && plan.nodes[a0].group == 0, "a group's KL shared by its nodes");
    CHECK(fabs(plan.nodes[d0].kl - 3e-4) < 1e-15 && plan.nodes[d0].group == -1, "no group: the given node KL");

    /* budget 0: nothing on the lossy device, every moved node flagged */
    plan_with(&f, g, 0, &plan, got, sizeof got);
    CHECK(!strcmp(got, ""), "budget 0: nothing on the npu, got '%s'", got);
    CHECK(plan.pred_kl == 0 && plan.n_kept == 7 && plan.budget_kl == 0, "pred %g, kept %d", plan.pred_kl, plan.n_kept);
    CHECK((plan.nodes[a0].flags & HET_PLAN_ACCURACY) && !isnan(plan.nodes[a0].alt_us[1]),
          "flagged, the npu's prediction still shown");
    CHECK(plan.total_us > free_us, "the cap costs time: %.1f > %.1f us", plan.total_us, free_us);

    /* large budget: the same as no cap */
    plan_with(&f, g, 1.0, &plan, got, sizeof got);
    CHECK(!strcmp(got, "a.0 b.0 c.0 a.1 b.1 c.1 d.0") && plan.n_kept == 0, "budget 1: all, got '%s'", got);
    CHECK(fabs(plan.total_us - free_us) < 1e-9, "and as fast");

    /* 2.5e-3: a (best ratio) fits, c (5e-3) does not, b (1e-3) does, d (3e-4, ratio
     * 2048/3e-4 = 6.8e6, between a and c) fits before c: a + d + b = 2.3e-3 */
    plan_with(&f, g, 2.5e-3, &plan, got, sizeof got);
    CHECK(!strcmp(got, "a.0 b.0 a.1 b.1 d.0"), "budget 2.5e-3: a, b and d, got '%s'", got);
    CHECK(fabs(plan.pred_kl - 2.3e-3) < 1e-12 && plan.n_kept == 2, "pred %g kept %d", plan.pred_kl, plan.n_kept);
    CHECK(plan.nodes[node_index(g, "c.0")].flags & HET_PLAN_ACCURACY, "c flagged");

    /* 6.5e-3: a, d, then c (ratio beats b even though b is cheaper in KL); b no longer fits */
    plan_with(&f, g, 6.5e-3, &plan, got, sizeof got);
    CHECK(!strcmp(got, "a.0 c.0 a.1 c.1 d.0"), "budget 6.5e-3: a, c, d by time per KL, got '%s'", got);
    CHECK(fabs(plan.pred_kl - 6.3e-3) < 1e-12 && plan.pred_kl <= 6.5e-3, "pred %g", plan.pred_kl);

    /* a pin is explicit: it stays (and counts) even over the budget */
    struct het_plan_pin pin = { "b.0", 1 };
    f.pp.pins = &pin;
    f.pp.n_pins = 1;
    plan_with(&f, g, 0, &plan, got, sizeof got);
    CHECK(!strcmp(got, "b.0"), "budget 0 with b.0 pinned: only b.0, got '%s'", got);
    CHECK(fabs(plan.pred_kl - 5e-4) < 1e-15 && !(plan.nodes[node_index(g, "b.0")].flags & HET_PLAN_ACCURACY),
          "the pin's KL counts: %g", plan.pred_kl);
    /* with budget left after the pin: 1e-3 - 5e-4 affords d (3e-4) only */
    plan_with(&f, g, 1e-3, &plan, got, sizeof got);
    CHECK(!strcmp(got, "b.0 d.0"), "budget 1e-3, b.0 pinned: b.0 and d.0, got '%s'", got);
    f.pp.pins = NULL;
    f.pp.n_pins = 0;

    /* single:npu is explicit too; alternate ignores the budget */
    f.pp.policy = &het_policy_single;
    f.pp.policy_device = 1;
    plan_with(&f, g, 0, &plan, got, sizeof got);
    CHECK(!strcmp(got, "a.0 b.0 c.0 a.1 b.1 c.1 d.0") && plan.n_kept == 0, "single:npu, budget 0: '%s'", got);
    f.pp.policy_device = 0;
    plan_with(&f, g, 0, &plan, got, sizeof got);
    CHECK(!strcmp(got, ""), "single:cpu: '%s'", got);
    f.pp.policy = &het_policy_fastest;

    het_plan_free(&plan);
    het_graph_free(g);
    fixture_free(&f);
}

/* first policy with the npu first in the set: the budget moves nodes to the
 * next capable device without counting fallbacks */
static void test_first_policy(void)
{
    struct fixture f;
    fixture_init(&f, true);
    int npu = 0;
    f.pp.supports = supports_npu_matmul;
    f.pp.supports_user = &npu;
    f.pp.policy = &het_policy_first;
    het_graph *g = groups_graph();
    struct het_plan plan = { 0 };
    char got[256];
    plan_with(&f, g, NAN, &plan, got, sizeof got);
    CHECK(!strcmp(got, "a.0 b.0 c.0 a.1 b.1 c.1 d.0"), "first, no cap: the npu (first) takes all, got '%s'", got);
    plan_with(&f, g, 0, &plan, got, sizeof got);
    CHECK(!strcmp(got, "") && plan.n_fallbacks == 0, "first, budget 0: all on the cpu, no fallbacks, got '%s' (%d)",
          got, plan.n_fallbacks);
    plan_with(&f, g, 1.2e-3, &plan, got, sizeof got);
    CHECK(!strcmp(got, "a.0 a.1"), "first, budget 1.2e-3: a only (d would fit but a comes first), got '%s'", got);
    het_plan_free(&plan);
    het_graph_free(g);
    fixture_free(&f);
}

/* ---------------------------------------------------------------------------
 * planning time, 28 layers                                                  */

static void test_plan_time(void)
{
    struct fixture f;
    fixture_init(&f, false);
    for (int a = 0; a < 2; a++)
        for (int b = 0; b < 2; b++)
            if (a != b) f.ho.c[a][b] = (struct het_handoff_cost){ 5, 0 };
    int npu = 1;
    f.pp.supports = supports_npu_matmul;
    f.pp.supports_user = &npu;
    memset(&f.sens, 0, sizeof f.sens);
    const char *classes[] = { "attn_q.*", "attn_k.*", "attn_v.*", "attn_output.*", "ffn_gate.*", "ffn_up.*",
                              "ffn_down.*", "logits" };
    for (int i = 0; i < 8; i++) het_sensitivity_add(&f.sens, classes[i], 1e-4 * (i + 1), NAN, 28, NULL);
    for (int phase = 0; phase < 2; phase++) {
        het_graph *g = het_test_qwen3_graph(phase ? 128 : 1);
        het_error err = { 0 };
        CHECK(het_graph_status(g, &err) == HET_OK, "graph: %s", err.msg);
        struct het_plan plan = { 0 };
        const double budgets[] = { NAN, 0, 1e-3, 1 };
        for (int b = -1; b < 4; b++) {
            f.acc.budget_kl = b >= 0 ? budgets[b] : NAN;
            f.pp.accuracy = b >= 0 ? &f.acc : NULL;
            const int reps = 20;
            double best = INFINITY, sum = 0;
            for (int r = 0; r < reps; r++) {
                double t0 = het_test_now_ms();
                CHECK(het_plan_build(&f.pp, g, &plan, &err) == HET_OK, "%s", err.msg);
                double ms = het_test_now_ms() - t0;
                best = fmin(best, ms);
                sum += ms;
            }
            int on_npu = 0;
            for (int i = 0; i < plan.n_nodes; i++) on_npu += plan.nodes[i].device == 1;
            printf("28 layers, %s, %d nodes, %s %g: planned in %.3f ms (mean %.3f); %d on the npu, %d kept off, "
                   "predicted KL %.2e\n", phase ? "prefill 128" : "decode", plan.n_nodes,
                   b < 0 ? "no accuracy input" : "budget", b < 0 ? NAN : budgets[b], best, sum / reps, on_npu,
                   plan.n_kept, plan.pred_kl);
            if (b >= 0) CHECK(!(plan.pred_kl > budgets[b] * (1 + 1e-9)), "within the budget: %g", plan.pred_kl);
            if (b == 1) CHECK(on_npu == 0, "budget 0: %d on the npu", on_npu);
        }
        het_plan_free(&plan);
        het_graph_free(g);
    }
    fixture_free(&f);
}

/* ---------------------------------------------------------------------------
 * comparing logits                                                          */

static void test_compare(void)
{
    const float same[4] = { 1, 2, 3, 4 };
    CHECK(het_accuracy_kl(same, same, 4) == 0, "identical rows: KL 0");
    /* p = (1/2, 1/2), q = (3/4, 1/4): KL = (ln(2/3) + ln 2) / 2 = ln(4/3) / 2 */
    const float p[2] = { 5, 5 }, q[2] = { logf(3.0f), 0 };
    double kl = het_accuracy_kl(p, q, 2);
    CHECK(fabs(kl - 0.5 * log(4.0 / 3.0)) < 1e-7, "two classes by hand: %.9f", kl);
    CHECK(het_accuracy_kl(q, p, 2) > 0 && fabs(het_accuracy_kl(q, p, 2) - kl) > 1e-3, "not symmetric");
    const float shifted[4] = { 101, 102, 103, 104 };
    CHECK(het_accuracy_kl(same, shifted, 4) < 1e-12, "softmax is shift-invariant");
    const float bad[2] = { NAN, 0 }, inf[2] = { INFINITY, 0 };
    CHECK(isnan(het_accuracy_kl(bad, p, 2)), "a NaN reference: NAN");
    CHECK(isinf(het_accuracy_kl(p, inf, 2)), "a non-finite test row: infinite KL");

    /* three positions: agree, disagree, agree */
    const float ref[3][3] = { { 0, 1, 0 }, { 2, 1, 0 }, { 0, 0, 3 } };
    const float tst[3][3] = { { 0, 1, 0.1f }, { 1, 2, 0 }, { 0, 0, 3 } };
    struct het_accuracy a;
    double kls[3];
    int32_t top[6];
    het_accuracy_compare(&ref[0][0], &tst[0][0], 3, 3, &a, kls, top);
    CHECK(a.n_positions == 3 && a.n_agree == 2 && fabs(a.top1 - 2.0 / 3) < 1e-12, "top-1 2 of 3");
    CHECK(top[2] == 0 && top[3] == 1 && top[4] == 2 && top[5] == 2, "argmaxes");
    CHECK(a.kl_max_pos == 1 && a.kl_max == kls[1] && kls[2] == 0, "max at the disagreeing position");
    CHECK(fabs(a.kl_mean - (kls[0] + kls[1] + kls[2]) / 3) < 1e-15, "mean");
}

/* ---------------------------------------------------------------------------
 * sensitivity tables                                                        */

static void test_sensitivity_json(void)
{
    struct het_sensitivity s = { .measured = true, .n_positions = 70 };
    snprintf(s.model, sizeof s.model, "stories260K-q8_0.gguf");
    snprintf(s.device, sizeof s.device, "npu");
    snprintf(s.label, sizeof s.label, "measured");
    het_error err = { 0 };
    CHECK(het_sensitivity_add(&s, "attn_q.*", 2e-4, 0.96, 5, &err) == HET_OK, "%s", err.msg);
    CHECK(het_sensitivity_add(&s, "logits", 1.5e-5, NAN, 1, &err) == HET_OK, "%s", err.msg);
    CHECK(het_sensitivity_add(&s, "x", -1, NAN, 1, &err) == HET_ERR_INVALID, "negative KL refused");
    CHECK(het_sensitivity_add(&s, "", 0, NAN, 1, &err) == HET_ERR_INVALID, "empty pattern refused");
#ifdef HET_HAVE_JANSSON
    char path[64];
    snprintf(path, sizeof path, "/tmp/het-sens-%ld.json", (long)getpid());
    CHECK(het_sensitivity_save(&s, path, &err) == HET_OK, "save: %s", err.msg);
    struct het_sensitivity r;
    CHECK(het_sensitivity_load(path, &r, &err) == HET_OK, "load: %s", err.msg);
    remove(path);
    CHECK(r.n_groups == 2 && !strcmp(r.groups[0].pattern, "attn_q.*") && r.groups[0].kl == 2e-4 &&
          r.groups[0].top1 == 0.96 && r.groups[0].n_nodes == 5 && isnan(r.groups[1].top1), "round trip");
    CHECK(r.measured && r.n_positions == 70 && !strcmp(r.device, "npu") && !strcmp(r.model, s.model), "header");
    static const struct { const char *json, *want; } bad[] = {
        { "{\"format\":\"het-profile\",\"version\":1,\"device\":\"npu\",\"groups\":[]}", "format" },
        { "{\"format\":\"het-sensitivity\",\"version\":1,\"device\":\"npu\",\"groups\":[{\"pattern\":\"a\","
          "\"kl\":-1}]}", "groups[0].kl" },
        { "{\"format\":\"het-sensitivity\",\"version\":1,\"device\":\"npu\",\"groups\":[{\"pattern\":\"a\","
          "\"kl\":1,\"foo\":2}]}", "groups[0].foo: unknown field" },
        { "{\"format\":\"het-sensitivity\",\"version\":1,\"groups\":[]}", "device" },
        { "{\"format\":\"het-sensitivity\",\"version\":1,\"device\":\"npu\",\"groups\":[1]}", "groups[0]" },
        { "{\"format\":", "line 1" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        het_error e = { 0 };
        enum het_status st = het_sensitivity_from_json(bad[i].json, strlen(bad[i].json), "t.json", &r, &e);
        CHECK(st == HET_ERR_FORMAT && strstr(e.msg, bad[i].want), "bad %zu: '%s' should name '%s'", i, e.msg,
              bad[i].want);
    }
#endif
    char p1[4096], p2[4096];
    setenv("XDG_CACHE_HOME", "/tmp/het-cache-test", 1);
    CHECK(het_sensitivity_cache_path("m.gguf:1:2", "npu", p1, sizeof p1, &err) == HET_OK, "%s", err.msg);
    CHECK(het_sensitivity_cache_path("m.gguf:1:3", "npu", p2, sizeof p2, &err) == HET_OK, "%s", err.msg);
    CHECK(strstr(p1, "/tmp/het-cache-test/het/profiles/sensitivity-") == p1 && strcmp(p1, p2), "keyed: %s", p1);
}

static int count_on(const struct het_plan *p, int d)
{
    int n = 0;
    for (int i = 0; i < p->n_nodes; i++) n += p->nodes[i].device == d;
    return n;
}

/* The scheduler takes the budget (params.accuracy or het_sched_set_accuracy)
 * and its plan cache keys on it. Two CPU devices, the second with an NPU
 * profile (so the planner takes it as lossy and faster). */
static void test_sched_budget(void)
{
    struct fixture f;
    fixture_init(&f, false);
    het_error err = { 0 };
    het_device *dev[2] = { het_cpu_device_init(1, &err), het_cpu_device_init(1, &err) };
    CHECK(dev[0] && dev[1], "cpu devices: %s", err.msg);
    if (!dev[0] || !dev[1]) goto out;
    het_graph *g = groups_graph();
    static char never_read[64]; /* the CPU supports only matmuls with storage; planning reads none */
    for (int i = 0; i < het_graph_n_nodes(g); i++) {
        struct het_tensor *t = (struct het_tensor *)het_graph_node(g, i);
        t->data = t->src[0]->data = t->src[1]->data = never_read;
    }
    struct het_sched_params sp = { .devices = dev, .n_devices = 2, .profiles = (const het_profile *const *)f.prof };
    het_sched *s = het_sched_init(&sp, &err);
    CHECK(s, "sched: %s", err.msg);
    if (!s) goto out_g;
    const struct het_plan *p = NULL;
    struct het_sched_stats st;
    CHECK(het_sched_plan(s, g, &p, &err) == HET_OK && count_on(p, 1) == 7 && isnan(p->pred_kl),
          "no accuracy: all 7 on the lossy device (%d): %s", p ? count_on(p, 1) : -1, err.msg);
    if (!p) goto out_s;
    f.acc.budget_kl = 0;
    het_sched_set_accuracy(s, &f.acc);
    CHECK(het_sched_plan(s, g, &p, &err) == HET_OK && count_on(p, 1) == 0 && p->n_kept == 7 && p->pred_kl == 0,
          "budget 0: nothing on the lossy device (%d, kept %d)", count_on(p, 1), p->n_kept);
    CHECK(het_sched_plan(s, g, &p, &err) == HET_OK && count_on(p, 1) == 0, "budget 0 again");
    het_sched_get_stats(s, &st);
    CHECK(st.n_plans == 2 && st.n_plan_cache_hits == 1, "the same budget reuses the plan (%llu built, %llu hits)",
          (unsigned long long)st.n_plans, (unsigned long long)st.n_plan_cache_hits);
    f.acc.budget_kl = 1; /* changed in place: the cache keys on it */
    CHECK(het_sched_plan(s, g, &p, &err) == HET_OK && count_on(p, 1) == 7 && p->n_kept == 0 && p->pred_kl > 0,
          "budget 1: all 7 back on the lossy device (%d)", count_on(p, 1));
    f.acc.budget_kl = 3e-3; /* a and b fit (2e-3 with d's 3e-4: 2.3e-3), c does not */
    CHECK(het_sched_plan(s, g, &p, &err) == HET_OK && count_on(p, 1) == 5 && p->pred_kl <= 3e-3,
          "budget 3e-3: c kept off (%d on the lossy device, KL %g)", count_on(p, 1), p->pred_kl);
    het_sched_set_accuracy(s, NULL);
    CHECK(het_sched_plan(s, g, &p, &err) == HET_OK && count_on(p, 1) == 7 && isnan(p->budget_kl),
          "accuracy removed: all 7 on the lossy device");
    het_sched_get_stats(s, &st);
    CHECK(st.n_plans == 5, "each change re-planned (%llu built)", (unsigned long long)st.n_plans);
out_s:
    het_sched_free(s);
    f.acc.budget_kl = 0;
    sp.accuracy = &f.acc; /* given at init */
    s = het_sched_init(&sp, &err);
    CHECK(s && het_sched_plan(s, g, &p, &err) == HET_OK && count_on(p, 1) == 0, "params.accuracy, budget 0: %s",
          err.msg);
    het_sched_free(s);
out_g:
    het_graph_free(g);
out:
    het_device_free(dev[0]);
    het_device_free(dev[1]);
    fixture_free(&f);
}

int main(void)
{
    test_compare();
    test_sensitivity_json();
    test_budget();
    test_first_policy();
    test_plan_time();
    test_sched_budget();
    return het_test_finish();
}
