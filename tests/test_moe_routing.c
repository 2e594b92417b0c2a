/*
 * test_moe_routing.c — the planner costs a mul_mat_id with the experts its
 * layer's router actually chose, once a graph has run: a skewed router
 * (every token among 4 of 16 experts) makes the next plans expect about 4,
 * for its own batch size and for others, and their predictions drop from
 * the uniform expectation's; plans made before are re-made; a scheduler
 * that has run nothing still expects uniform routing. With online
 * correction the experts' node is probed (its ids are kept to the graph's
 * end) and its history is kept under class moe, except on a device that
 * would read in place weights whose file pages were dropped.
 */
#include "het/plan.h"
#include "het/profile.h"
#include "het/sched.h"
#include "sched/device_impl.h"
#include "testutil.h"

#include <math.h>
#include <string.h>
#include <unistd.h>

#define E 16
#define K_USED 2

static bool fake_supports(het_device *d, const struct het_tensor *n) { return true; }
/* a split takes about a millisecond, so online correction earns probing time */
static enum het_status fake_run(het_device *d, struct het_tensor *const *nodes, int n, het_error *err)
{
    usleep(1000);
    return HET_OK;
}
static const struct het_device_i fake_iface = { .supports_op = fake_supports, .run_split = fake_run };

/* experts (64, 32, E) x (64, 1, T) by ids (K_USED, T) named as arch_moe.c names them */
static het_graph *moe_graph(int64_t T)
{
    het_graph *g = het_graph_init(16);
    const int64_t wne[3] = { 64, 32, E }, xne[3] = { 64, 1, T }, ine[2] = { K_USED, T };
    struct het_tensor *w = het_new_tensor(g, HET_TYPE_F32, 3, wne);
    w->flags |= HET_TENSOR_FLAG_WEIGHT;
    static float wdata[64 * 32 * E];
    w->data = (uint8_t *)wdata;
    struct het_tensor *x = het_new_tensor(g, HET_TYPE_F32, 3, xne), *ids = het_new_tensor(g, HET_TYPE_I32, 2, ine);
    x->flags |= HET_TENSOR_FLAG_INPUT;
    ids->flags |= HET_TENSOR_FLAG_INPUT;
    het_tensor_set_name(ids, "ffn_moe_topk.0");
    struct het_tensor *y = het_mul_mat_id(g, w, x, ids);
    het_tensor_set_name(y, "ffn_up_exps.0");
    y->flags |= HET_TENSOR_FLAG_OUTPUT;
    return g;
}

static const struct het_plan_node *plan_of(het_sched *s, het_graph *g)
{
    const struct het_plan *p = NULL;
    het_error err = { 0 };
    CHECK(het_sched_plan(s, g, &p, &err) == HET_OK, "plan: %s", err.msg);
    return p ? &p->nodes[0] : NULL;
}

int main(void)
{
    het_device *dev = het_device_new(&fake_iface, HET_DEVICE_CPU, "fake", NULL);
    het_profile *prof = het_profile_new("fake", "test", HET_DEVICE_CPU, false);
    const struct het_cost_fit fit = { .t0_us = 2, .gbps = 10, .gflops = 100, .m_half = 4 };
    het_profile_set_fit(prof, HET_OPCLASS_MOE, HET_TYPE_F32, &fit, NULL);
    het_profile_set_label(prof, true, "test");
    const het_profile *profs[1] = { prof };
    struct het_sched_params sp = { .devices = &dev, .n_devices = 1, .profiles = profs };
    het_error err = { 0 };
    het_sched *s = het_sched_init(&sp, &err), *fresh = het_sched_init(&sp, &err);
    CHECK(s && fresh, "sched: %s", err.msg);

    het_graph *a = moe_graph(32), *b = moe_graph(8);
    CHECK(het_sched_alloc_graph(s, a, &err) == HET_OK, "alloc: %s", err.msg);
    const double uni_a = het_moe_expected_experts(E, K_USED, 32), uni_b = het_moe_expected_experts(E, K_USED, 8);
    const struct het_plan_node *pn = plan_of(s, a);
    CHECK(pn && fabs(pn->experts - uni_a) < 1e-9 && !(pn->flags & HET_PLAN_ROUTED),
          "before any run: uniform routing, %g experts", pn ? pn->experts : NAN);
    const double pred_uniform_a = pn ? pn->pred_us : NAN;

    /* a skewed router: every token takes 2 of experts {3, 5, 9, 12}, written through the ids' strides */
    struct het_tensor *ids = het_graph_node(a, 0)->src[2];
    const int pick[4] = { 3, 5, 9, 12 };
    for (int64_t t = 0; t < 32; t++)
        for (int64_t j = 0; j < K_USED; j++) {
            int32_t e = pick[(t + 3 * j) % 4];
            memcpy((char *)ids->data + j * ids->nb[0] + t * ids->nb[1], &e, sizeof e);
        }
    CHECK(het_sched_compute(s, a, &err) == HET_OK, "compute: %s", err.msg);

    /* the same graph again: re-planned with the observed count (4 hit: E_eff 4) */
    struct het_sched_stats st;
    het_sched_get_stats(s, &st);
    const uint64_t replans = st.n_replans;
    pn = plan_of(s, a);
    het_sched_get_stats(s, &st);
    const double routed_a = het_moe_expected_experts(4, K_USED, 32);
    CHECK(pn && fabs(pn->experts - routed_a) < 0.05 && (pn->flags & HET_PLAN_ROUTED),
          "after a run: observed routing, %g experts (want %g)", pn ? pn->experts : NAN, routed_a);
    CHECK(st.n_replans > replans || replans > 0, "the observation re-planned (%llu)", (unsigned long long)st.n_replans);
    CHECK(pn && pn->pred_us < pred_uniform_a, "fewer experts, lower prediction: %g vs %g us", pn ? pn->pred_us : NAN,
          pred_uniform_a);

    /* another batch size of the same layer: its E_eff carries over */
    pn = plan_of(s, b);
    const double routed_b = het_moe_expected_experts(4, K_USED, 8);
    CHECK(pn && fabs(pn->experts - routed_b) < 0.05 && (pn->flags & HET_PLAN_ROUTED),
          "8 tokens of the observed layer: %g experts (uniform %g, observed routing %g)", pn ? pn->experts : NAN,
          uni_b, routed_b);
    const double pred_b = pn ? pn->pred_us : NAN;
    pn = plan_of(fresh, b);
    CHECK(pn && fabs(pn->experts - uni_b) < 1e-9 && pn->pred_us > pred_b,
          "a scheduler that ran nothing: uniform %g experts, %g us > %g us", pn ? pn->experts : NAN,
          pn ? pn->pred_us : NAN, pred_b);

    /* online: a mul_mat_id whose ids were computed (a router's top_k) is
     * probed when they are kept to the graph's end, and only then; and not
     * on a device that reads weights in place when another device gave the
     * weights' file pages back (the probe would time their re-read) */
    dev->caps.host_timed = true;
    sp.online = true;
    const struct { bool kept, dropped, repacks, probed; } cases[] = {
        { true, false, false, true }, { false, false, false, false },
        { true, true, false, false }, { true, true, true, true },
    };
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        const bool kept = cases[ci].kept;
        dev->caps.repacks_weights = cases[ci].repacks;
        het_sched *on = het_sched_init(&sp, &err);
        het_graph *c = moe_graph(32);
        if (cases[ci].dropped) het_graph_node(c, 0)->src[0]->flags |= HET_TENSOR_FLAG_DROPPED;
        CHECK(on && het_sched_alloc_graph(on, c, &err) == HET_OK, "online sched: %s", err.msg);
        struct het_tensor *cids = het_graph_node(c, 0)->src[2];
        for (int64_t t = 0; t < 32; t++)
            for (int64_t j = 0; j < K_USED; j++) {
                int32_t e = pick[(t + 3 * j) % 4];
                memcpy((char *)cids->data + j * cids->nb[0] + t * cids->nb[1], &e, sizeof e);
            }
        cids->op = HET_OP_TOP_K; /* computed indices (no node computes them here: the test wrote them) */
        cids->flags = kept ? HET_TENSOR_FLAG_OUTPUT : 0;
        /* a probe that other work on the machine delayed teaches nothing
         * (online.c): the check is that the node was probed, and that what
         * was learned, if anything, is kept under class moe */
        int n_moe = 0, n_other = 0;
        struct het_sched_stats st = { 0 };
        for (int run = 0; run < 6 && on; run++) {
            CHECK(het_sched_compute(on, c, &err) == HET_OK, "online compute: %s", err.msg);
            het_sched_get_stats(on, &st);
        }
        const het_profile *lp = on ? het_sched_profile(on, 0) : NULL;
        for (int i = 0; lp && i < het_profile_n_history(lp); i++) {
            struct het_history_info hi;
            if (het_profile_history_at(lp, i, &hi)) *(hi.cls == HET_OPCLASS_MOE ? &n_moe : &n_other) += hi.n_obs;
        }
        if (cases[ci].probed)
            CHECK(st.n_probes > 0 && n_other == 0 && (n_moe > 0 || st.n_probes_disturbed == st.n_probes),
                  "case %zu: online correction probes the experts' node: %llu probes (%llu disturbed), %d observations",
                  ci, (unsigned long long)st.n_probes, (unsigned long long)st.n_probes_disturbed, n_moe);
        else
            CHECK(st.n_probes == 0 && n_moe == 0, "case %zu (%s): not probed (%llu probes)", ci,
                  kept ? "weights' pages dropped, read in place" : "ids that may be overwritten",
                  (unsigned long long)st.n_probes);
        het_graph_free(c);
        het_sched_free(on);
    }

    het_graph_free(a);
    het_graph_free(b);
    het_sched_free(fresh);
    het_sched_free(s);
    het_profile_free(prof);
    het_device_free(dev);
    return het_test_finish();
}
