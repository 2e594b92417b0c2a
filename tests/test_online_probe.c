/*
 * test_online_probe.c — what online correction (sched/online.c) refuses to
 * time, on two fake devices: "cpu" runs the graph (its profile is cheap)
 * and "gpu" is rejected by the plan, so every "gpu" observation comes from
 * a probe.
 *   - A device that builds kernels on first use (caps.builds_kernels) and
 *     has built nothing yet: not probed (the build's cost is unknown; a
 *     lavapipe pipeline takes up to a second of LLVM).
 *   - Its builds measured cheap (1 us each): probed.
 *   - Its builds measured at 10 s each: not probed (no credit pays that).
 *   - A device without builds: probed.
 *   - A device that reads weights in place, on weights whose file pages a
 *     repacking device gave back: not probed (it would time the disk);
 *     the same weights on a repacking device: probed.
 * The control cases (probed) prove that the refusals are not vacuous.
 */
#include "het/profile.h"
#include "het/sched.h"
#include "sched/device_impl.h"
#include "testutil.h"

#include <math.h>
#include <string.h>
#include <unistd.h>

static bool fake_supports(het_device *d, const struct het_tensor *n) { return true; }
/* a split takes about a millisecond, so each graph earns probing credit */
static enum het_status fake_run(het_device *d, struct het_tensor *const *nodes, int n, het_error *err)
{
    usleep(1000);
    return HET_OK;
}
static const struct het_device_i fake_iface = { .supports_op = fake_supports, .run_split = fake_run };

static float wdata[256 * 96], xdata[256 * 4];

/* y = W x, W (256, 96) F32 weights, x (256, 4) */
static het_graph *matmul_graph(bool dropped)
{
    het_graph *g = het_graph_init(8);
    const int64_t wne[2] = { 256, 96 }, xne[2] = { 256, 4 };
    struct het_tensor *w = het_new_tensor(g, HET_TYPE_F32, 2, wne), *x = het_new_tensor(g, HET_TYPE_F32, 2, xne);
    w->flags |= HET_TENSOR_FLAG_WEIGHT | (dropped ? HET_TENSOR_FLAG_DROPPABLE | HET_TENSOR_FLAG_DROPPED : 0);
    w->data = (uint8_t *)wdata;
    x->flags |= HET_TENSOR_FLAG_INPUT;
    x->data = (uint8_t *)xdata;
    struct het_tensor *y = het_mul_mat(g, w, x);
    y->flags |= HET_TENSOR_FLAG_OUTPUT;
    return g;
}

static het_profile *profile(const char *name, double scale)
{
    het_profile *p = het_profile_new(name, "test", HET_DEVICE_CPU, false);
    const struct het_cost_fit fit = { .t0_us = 2 * scale, .gbps = 10 / scale, .gflops = 100 / scale, .m_half = 4 };
    het_profile_set_fit(p, HET_OPCLASS_MATMUL, HET_TYPE_F32, &fit, NULL);
    het_profile_set_label(p, true, "test");
    return p;
}

/* observations the scheduler's copy of device d's profile holds */
static int n_obs(het_sched *s, int d)
{
    const het_profile *p = het_sched_profile(s, d);
    int n = 0;
    for (int i = 0; p && i < het_profile_n_history(p); i++) {
        struct het_history_info hi;
        if (het_profile_history_at(p, i, &hi)) n += hi.n_obs;
    }
    return n;
}

struct scenario {
    const char *what;
    bool        builds, repacks, dropped;
    uint64_t    n_builds;
    double      build_us;
    bool        probed;
};

static void run_case(const struct scenario *sc)
{
    het_device *dev[2] = { het_device_new(&fake_iface, HET_DEVICE_CPU, "cpu", NULL),
                           het_device_new(&fake_iface, HET_DEVICE_VULKAN, "gpu", NULL) };
    for (int i = 0; i < 2; i++) dev[i]->caps.host_timed = true;
    dev[0]->caps.repacks_weights = true;
    dev[1]->caps.builds_kernels = sc->builds;
    dev[1]->caps.repacks_weights = sc->repacks;
    dev[1]->stats.n_builds = sc->n_builds;
    dev[1]->stats.build_us = sc->build_us;
    /* "gpu" predicted 3000x slower (a probe of the fake cpu, 1 ms a split,
     * corrects the cpu to about that and no further): the plan rejects it,
     * probes still time it */
    het_profile *prof[2] = { profile("cpu", 1), profile("gpu", 3000) };
    const het_profile *profs[2] = { prof[0], prof[1] };
    struct het_sched_params sp = { .devices = dev, .n_devices = 2, .profiles = profs, .policy = &het_policy_fastest,
                                   .online = true };
    het_error err = { 0 };
    het_sched *s = het_sched_init(&sp, &err);
    CHECK(s != NULL, "sched: %s", err.msg);
    het_graph *g = matmul_graph(sc->dropped);
    if (s && het_sched_alloc_graph(s, g, &err) == HET_OK) {
        for (int run = 0; run < 8; run++)
            CHECK(het_sched_compute(s, g, &err) == HET_OK, "%s: compute: %s", sc->what, err.msg);
        const struct het_plan *p = het_sched_last_plan(s);
        CHECK(p && p->nodes[0].device == 0, "%s: the plan runs the matmul on cpu", sc->what);
        struct het_sched_stats st;
        het_sched_get_stats(s, &st);
        const int on_gpu = n_obs(s, 1);
        /* a probe every run of which was disturbed by other work teaches
         * nothing (online.c); then only the count of probes says it ran */
        if (sc->probed)
            CHECK(on_gpu > 0 || st.n_probes_disturbed > 0, "%s: gpu probed (%d observations, %llu probes)",
                  sc->what, on_gpu, (unsigned long long)st.n_probes);
        else
            CHECK(on_gpu == 0 && n_obs(s, 0) + (int)st.n_probes_disturbed > 0,
                  "%s: gpu not probed, cpu probed (%d on gpu, %d on cpu)", sc->what, on_gpu, n_obs(s, 0));
    } else {
        CHECK(false, "%s: alloc: %s", sc->what, err.msg);
    }
    het_graph_free(g);
    het_sched_free(s);
    for (int i = 0; i < 2; i++) {
        het_profile_free(prof[i]);
        het_device_free(dev[i]);
    }
}

int main(void)
{
    const struct scenario cases[] = {
        { "builds kernels, none built yet", true, false, false, 0, 0, false },
        { "builds kernels, 1 us a build", true, false, false, 4, 4, true },
        { "builds kernels, 10 s a build", true, false, false, 1, 1e7, false },
        { "builds no kernels", false, false, false, 0, 0, true },
        { "reads in place weights whose pages were dropped", false, false, true, 0, 0, false },
        { "repacks weights whose pages were dropped", false, true, true, 0, 0, true },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_case(&cases[i]);
    return het_test_finish();
}
