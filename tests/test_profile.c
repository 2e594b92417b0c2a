/*
 * test_profile.c — cost models: what a node costs (flops, bytes, rows), the
 * fit against samples drawn from a known model (with noise and a stray
 * outlier; for experts, over tokens routed and experts hit), JSON round trips of profiles and profile sets, malformed files
 * (each error must name the JSON field), and the per-device cache (a
 * profile of another het version is stale).
 */
#include "het/npu.h"
#include "het/profile.h"
#include "sched/clock.h"
#include "sched/device_impl.h"
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void test_op_cost(void)
{
    het_graph *g = het_graph_init(32);
    const int64_t wne[2] = { 1024, 3072 }, xne[2] = { 1024, 7 };
    struct het_tensor *w = het_new_tensor(g, HET_TYPE_Q4_0, 2, wne);
    struct het_tensor *x = het_new_tensor(g, HET_TYPE_F32, 2, xne);
    struct het_tensor *y = het_mul_mat(g, w, x);
    struct het_op_cost c;
    het_op_cost_of(y, &c);
    CHECK(c.cls == HET_OPCLASS_MATMUL && c.wtype == HET_TYPE_Q4_0 && c.m == 7, "matmul class/type/m");
    CHECK(c.flops == 2.0 * 1024 * 3072 * 7, "matmul flops %g", c.flops);
    double wbytes = 1024.0 * 3072 / 32 * 18;
    CHECK(c.bytes == wbytes + 1024.0 * 7 * 4 + 3072.0 * 7 * 4, "matmul bytes %g", c.bytes);
    struct het_tensor *n = het_rms_norm(g, x, 1e-5f);
    het_op_cost_of(n, &c);
    CHECK(c.cls == HET_OPCLASS_NORM && c.bytes == 2 * 1024.0 * 7 * 4, "norm bytes %g", c.bytes);
    het_op_cost_of(w, &c);
    CHECK(c.cls == HET_OPCLASS_NONE, "a leaf costs nothing");
    het_graph_free(g);
}

/* samples of t = t0 + max(flops/F(M), bytes/B) with 1% noise */
static void test_fit(void)
{
    const struct het_cost_fit truth = { .t0_us = 5, .gbps = 20, .gflops = 1000, .m_half = 4 };
    het_profile *p = het_profile_new("cpu", "test", HET_DEVICE_CPU, false);
    het_test_seed(7);
    int ms[] = { 1, 2, 4, 8, 16, 32, 64, 128, 256, 512 };
    for (int s = 0; s < 3; s++) {
        double n = 1024.0 * (1 + 2 * s), k = 1024;
        for (int i = 0; i < 10; i++) {
            struct het_op_cost c = { .cls = HET_OPCLASS_MATMUL, .wtype = HET_TYPE_Q4_0, .m = ms[i],
                                     .flops = 2 * n * k * ms[i], .bytes = n * k * 0.5625 + (n + k) * ms[i] * 4 };
            struct het_profile_sample x = { .m = c.m, .flops = c.flops, .bytes = c.bytes, .spread = 0.01,
                                            .us = het_cost_fit_eval(&truth, &c) * (1 + 0.01 * het_test_rand_normal()) };
            if (s == 1 && i == 3) x.us *= 10; /* a stray measurement */
            CHECK(het_profile_add_sample(p, HET_OPCLASS_MATMUL, HET_TYPE_Q4_0, &x, NULL) == HET_OK, "add sample");
        }
    }
    CHECK(het_profile_refit(p, NULL) == HET_OK, "refit");
    struct het_cost_fit f;
    CHECK(het_profile_get_fit(p, HET_OPCLASS_MATMUL, HET_TYPE_Q4_0, &f), "fit exists");
    printf("fit: t0 %.2f us, B %.1f GB/s, F %.1f GFLOP/s, m_half %.1f, rms error %.3f\n", f.t0_us, f.gbps, f.gflops,
           f.m_half, f.error);
    CHECK(fabs(f.gbps / truth.gbps - 1) < 0.1, "bandwidth recovered: %g", f.gbps);
    CHECK(fabs(f.gflops / truth.gflops - 1) < 0.15, "peak rate recovered: %g", f.gflops);
    CHECK(f.error < 0.05, "the outlier was dropped, error %g", f.error);
    /* predictions across the range within 5% */
    for (int m = 1; m <= 1024; m *= 4) {
        struct het_op_cost c = { .cls = HET_OPCLASS_MATMUL, .wtype = HET_TYPE_Q4_0, .m = m,
                                 .flops = 2.0 * 2048 * 1024 * m, .bytes = 2048.0 * 1024 * 0.5625 + 3072.0 * m * 4 };
        double a = het_profile_predict_cost(p, &c), b = het_cost_fit_eval(&truth, &c);
        CHECK(fabs(a / b - 1) < 0.05, "M=%d: predicted %g vs true %g", m, a, b);
    }
    struct het_op_cost other = { .cls = HET_OPCLASS_MATMUL, .wtype = HET_TYPE_Q8_0, .m = 1, .flops = 1, .bytes = 1 };
    CHECK(isnan(het_profile_predict_cost(p, &other)), "no model for q8_0: NAN");
    het_profile_free(p);
}

/* a kernel that changes code path at M = 4 (rate jumps 4x): F(M) tabulated */
static void test_fit_knots(void)
{
    het_profile *p = het_profile_new("cpu", "test", HET_DEVICE_CPU, false);
    het_test_seed(9);
    for (int s = 0; s < 3; s++)
        for (int m = 1; m <= 256; m *= 2) {
            double n = 1024.0 * (1 + s), k = 1024, rate = (m < 4 ? 15.0 : 60.0) * m / (m + 2.0);  /* GFLOP/s */
            double flops = 2 * n * k * m, bytes = n * k * 0.5625 + (n + k) * m * 4;
            double us = 3 + fmax(flops / (rate * 1e3), bytes / 40e3);
            struct het_profile_sample x = { .m = m, .flops = flops, .bytes = bytes, .spread = 0.01,
                                            .us = us * (1 + 0.005 * het_test_rand_normal()) };
            het_profile_add_sample(p, HET_OPCLASS_MATMUL, HET_TYPE_Q4_0, &x, NULL);
        }
    het_profile_refit(p, NULL);
    struct het_cost_fit f;
    CHECK(het_profile_get_fit(p, HET_OPCLASS_MATMUL, HET_TYPE_Q4_0, &f), "fit");
    printf("knotted fit: %d knots, rms error %.3f, F(2) %.1f, F(4) %.1f GFLOP/s\n", f.n_knots, f.error,
           het_cost_fit_rate(&f, 2), het_cost_fit_rate(&f, 4));
    CHECK(f.n_knots == 9 && f.error < 0.03, "tabulated F(M) follows the jump: %d knots, error %g", f.n_knots, f.error);
    CHECK(het_cost_fit_rate(&f, 4) > 2.5 * het_cost_fit_rate(&f, 2), "the jump at M=4 is kept");
    het_profile_free(p);
}

/* mixture of experts: a mul_mat_id (K=1024, N=512, E=64 experts, k=4) of
 * T tokens reading `hit` experts; the cost of one with real tensors */
static void moe_cost(int64_t T, double hit, struct het_op_cost *c)
{
    het_graph *g = het_graph_init(8);
    const int64_t wne[3] = { 1024, 512, 64 }, xne[3] = { 1024, 1, T }, ine[2] = { 4, T };
    struct het_tensor *y = het_mul_mat_id(g, het_new_tensor(g, HET_TYPE_Q4_0, 3, wne),
                                          het_new_tensor(g, HET_TYPE_F32, 3, xne), het_new_tensor(g, HET_TYPE_I32, 2, ine));
    het_op_cost_with_experts(y, hit, c);
    het_graph_free(g);
}

/* the experts' fit: samples of t = t0·hit + max(flops/F(M), bytes/B) over
 * tokens routed and experts hit (1% noise) give a fit that predicts other
 * (tokens, experts) within 10%, and at a fixed token count the cost grows
 * with the experts hit (more weights read, more calls, fewer columns each) */
static void test_fit_moe(void)
{
    const struct het_cost_fit truth = { .t0_us = 4, .gbps = 30, .gflops = 400, .m_half = 6 };
    het_profile *p = het_profile_new("cpu", "test", HET_DEVICE_CPU, false);
    het_test_seed(11);
    const int ts[] = { 1, 4, 16, 64, 256 };
    for (int i = 0; i < 5; i++) {
        double hits[3] = { 4, het_moe_expected_experts(64, 4, ts[i]), fmin(64, 4.0 * ts[i]) };
        for (int j = 0; j < 3; j++) {
            struct het_op_cost c;
            moe_cost(ts[i], hits[j], &c);
            struct het_profile_sample x = { .m = c.m, .flops = c.flops, .bytes = c.bytes, .spread = 0.01,
                                            .calls = c.calls,
                                            .us = het_cost_fit_eval(&truth, &c) * (1 + 0.01 * het_test_rand_normal()) };
            CHECK(het_profile_add_sample(p, HET_OPCLASS_MOE, HET_TYPE_Q4_0, &x, NULL) == HET_OK, "add moe sample");
        }
    }
    CHECK(het_profile_refit(p, NULL) == HET_OK, "refit");
    struct het_cost_fit f;
    CHECK(het_profile_get_fit(p, HET_OPCLASS_MOE, HET_TYPE_Q4_0, &f), "moe fit exists");
    printf("moe fit: t0 %.2f us per expert, B %.1f GB/s, F %.1f GFLOP/s, m_half %.1f, rms error %.3f\n", f.t0_us,
           f.gbps, f.gflops, f.m_half, f.error);
    const struct { int64_t T; double hit; } held[] = { { 2, 8 }, { 8, 20 }, { 32, 40 }, { 128, 64 }, { 512, 64 },
                                                       { 64, 16 } };
    for (size_t i = 0; i < sizeof held / sizeof held[0]; i++) {
        struct het_op_cost c;
        moe_cost(held[i].T, held[i].hit, &c);
        double a = het_profile_predict_cost(p, &c), b = het_cost_fit_eval(&truth, &c);
        CHECK(fabs(a / b - 1) < 0.10, "T=%lld hit=%g: predicted %g vs true %g", (long long)held[i].T, held[i].hit, a, b);
    }
    for (int64_t T = 4; T <= 256; T *= 4) {
        double prev = 0;
        for (double hit = 4; hit <= fmin(64, 4.0 * T); hit *= 2) {
            struct het_op_cost c;
            moe_cost(T, hit, &c);
            double us = het_profile_predict_cost(p, &c);
            CHECK(us > prev, "T=%lld: %g us at %g experts, not more than %g at fewer", (long long)T, us, hit, prev);
            prev = us;
        }
    }
    /* no moe model: the matmul model predicts per expert GEMM, calls included */
    het_profile *q = het_profile_new("cpu", "test", HET_DEVICE_CPU, false);
    het_profile_set_fit(q, HET_OPCLASS_MATMUL, HET_TYPE_Q4_0, &truth, NULL);
    struct het_op_cost c;
    moe_cost(16, 30, &c);
    CHECK(c.calls == 30 && fabs(c.m - 64.0 / 30) < 1e-12, "cost of 16 tokens on 30 experts: calls %g, m %g", c.calls, c.m);
    CHECK(fabs(het_profile_predict_cost(q, &c) / het_cost_fit_eval(&truth, &c) - 1) < 1e-12, "matmul model for moe");
    moe_cost(16, 0, &c);
    CHECK(fabs(c.calls - het_moe_expected_experts(64, 4, 16)) < 1e-9, "hit 0: the expected count %g", c.calls);
    moe_cost(2, 50, &c);
    CHECK(c.calls == 8, "more experts than slots routed: capped at k·T, got %g", c.calls);
    het_profile_free(q);
    het_profile_free(p);
}

static het_profile *sample_profile(const char *name)
{
    het_profile *p = het_profile_new(name, "Test device, driver 1.2.3 \"quoted\"", HET_DEVICE_VULKAN, false);
    struct het_profile_device_costs dc = { .split_us = 42.5, .kernel_switch_us = 0, .async = true,
                                           .shares_cpu_cores = true, .peak_gbps = 88.25, .peak_gflops = 3210 };
    het_profile_set_device_costs(p, &dc);
    struct het_cost_fit f = { .t0_us = 3.5, .gbps = 80, .gflops = 3000, .m_half = 12, .error = 0.04, .n_knots = 3,
                              .knot_m = { 1, 4, 64 }, .knot_gflops = { 20, 300, 2900 } };
    het_profile_set_fit(p, HET_OPCLASS_MATMUL, HET_TYPE_Q4_K, &f, NULL);
    struct het_cost_fit f2 = { .t0_us = 1.25, .gbps = 60, .gflops = 100, .m_half = 1, .error = NAN };
    het_profile_set_fit(p, HET_OPCLASS_NORM, HET_TYPE_F32, &f2, NULL);
    for (int i = 0; i < 5; i++) {
        struct het_profile_sample s = { .m = 1 << i, .flops = 1e6 * (i + 1), .bytes = 2e5, .us = 10.5 + i,
                                        .spread = i == 2 ? NAN : 0.02 };
        het_profile_add_sample(p, HET_OPCLASS_MATMUL, HET_TYPE_Q4_K, &s, NULL);
    }
    struct het_profile_sample s = { .m = 3, .flops = 0, .bytes = 4096, .us = 2, .spread = 0 };
    het_profile_add_sample(p, HET_OPCLASS_ATTN, HET_TYPE_F16, &s, NULL); /* samples, no fit yet */
    struct het_profile_sample e = { .m = 2.5, .flops = 1e7, .bytes = 3e6, .us = 40, .spread = 0.01, .calls = 12 };
    het_profile_add_sample(p, HET_OPCLASS_MOE, HET_TYPE_Q4_K, &e, NULL); /* experts hit kept */
    struct het_handoff h = { .to = "cpu", .fixed_us = 12.5, .gbps = 0 };
    het_profile_set_handoff(p, &h, NULL);
    het_profile_set_label(p, true, "measured on test day");
    return p;
}

static bool same_double(double a, double b) { return (isnan(a) && isnan(b)) || fabs(a - b) <= 1e-5 * fabs(b); }

static void check_same(const het_profile *a, const het_profile *b)
{
    CHECK(!strcmp(het_profile_device_name(a), het_profile_device_name(b)), "name");
    CHECK(!strcmp(het_profile_device_desc(a), het_profile_device_desc(b)), "description: %s",
          het_profile_device_desc(b));
    CHECK(het_profile_device_kind(a) == het_profile_device_kind(b), "kind");
    CHECK(het_profile_is_measured(b) && !strcmp(het_profile_label(a), het_profile_label(b)), "label");
    struct het_profile_device_costs x, y;
    het_profile_get_device_costs(a, &x);
    het_profile_get_device_costs(b, &y);
    CHECK(same_double(x.split_us, y.split_us) && x.async == y.async && x.lossy == y.lossy &&
          x.shares_cpu_cores == y.shares_cpu_cores && same_double(x.peak_gbps, y.peak_gbps) &&
          same_double(x.peak_gflops, y.peak_gflops), "device costs");
    CHECK(het_profile_n_models(a) == het_profile_n_models(b), "models %d vs %d", het_profile_n_models(a),
          het_profile_n_models(b));
    for (int i = 0; i < het_profile_n_models(a); i++) {
        enum het_op_class cls;
        enum het_type t;
        struct het_cost_fit fa, fb;
        int na, nb;
        het_profile_model_at(a, i, &cls, &t, &fa, &na);
        bool has_a = het_profile_get_fit(a, cls, t, &fa), has_b = het_profile_get_fit(b, cls, t, &fb);
        CHECK(has_a == has_b, "fit presence of %s/%s", het_op_class_name(cls), het_type_name(t));
        if (has_a && has_b)
            CHECK(same_double(fa.t0_us, fb.t0_us) && same_double(fa.gbps, fb.gbps) &&
                  same_double(fa.gflops, fb.gflops) && same_double(fa.m_half, fb.m_half) &&
                  same_double(fa.error, fb.error) && fa.n_knots == fb.n_knots, "fit of %s/%s",
                  het_op_class_name(cls), het_type_name(t));
        for (int k = 0; has_a && has_b && k < fa.n_knots && k < fb.n_knots; k++)
            CHECK(same_double(fa.knot_m[k], fb.knot_m[k]) && same_double(fa.knot_gflops[k], fb.knot_gflops[k]),
                  "knot %d", k);
        const struct het_profile_sample *sa = het_profile_samples(a, cls, t, &na);
        const struct het_profile_sample *sb = het_profile_samples(b, cls, t, &nb);
        CHECK(na == nb, "sample count");
        for (int k = 0; k < na && k < nb; k++)
            CHECK(same_double(sa[k].us, sb[k].us) && same_double(sa[k].m, sb[k].m) &&
                  same_double(sa[k].flops, sb[k].flops) && same_double(sa[k].spread, sb[k].spread) &&
                  same_double(sa[k].calls > 1 ? sa[k].calls : 1, sb[k].calls > 1 ? sb[k].calls : 1), "sample %d", k);
    }
    struct het_handoff h;
    CHECK(het_profile_get_handoff(b, "cpu", &h) && same_double(h.fixed_us, 12.5), "hand-off");
}

static void test_round_trip(const char *dir)
{
    het_profile *p = sample_profile("vulkan0");
    het_error err = { 0 };
    char *json = het_profile_to_json(p, &err);
    CHECK(json != NULL, "to_json: %s", err.msg);
    if (!json) return;
    het_profile *q = het_profile_from_json(json, strlen(json), "memory", &err);
    CHECK(q != NULL, "from_json: %s", err.msg);
    if (q) check_same(p, q);
    free(json);

    char path[512];
    snprintf(path, sizeof path, "%s/set.json", dir);
    het_profile *two[2] = { p, q };
    if (q) het_profile_set_device_name(q, "npu");
    CHECK(het_profile_save_all(two, q ? 2 : 1, path, &err) == HET_OK, "save set: %s", err.msg);
    het_profile *back[4] = { 0 };
    int n = 0;
    CHECK(het_profile_load_all(path, back, 4, &n, &err) == HET_OK && n == 2, "load set: %d, %s", n, err.msg);
    if (n == 2) {
        CHECK(!strcmp(het_profile_device_name(back[1]), "npu"), "set order");
        check_same(p, back[0]);
    }
    for (int i = 0; i < n; i++) het_profile_free(back[i]);
    het_profile *first = het_profile_load(path, &err);
    CHECK(first && !strcmp(het_profile_device_name(first), "vulkan0"), "load of a set takes its first: %s", err.msg);
    het_profile_free(first);
    het_profile_free(q);
    het_profile_free(p);
}

/* A malformed profile must be rejected with an error naming the field. */
static void expect_error(const char *json, const char *field)
{
    het_error err = { 0 };
    het_profile *p = het_profile_from_json(json, strlen(json), "bad.json", &err);
    CHECK(p == NULL && err.status == HET_ERR_FORMAT && strstr(err.msg, field) && strstr(err.msg, "bad.json"),
          "expected an error naming '%s', got: %s", field, p ? "(accepted)" : err.msg);
    het_profile_free(p);
}

#define HEAD "{\"format\":\"het-profile\",\"version\":1,\"het_version\":\"0.1.0\","
#define DEV  "\"device\":{\"name\":\"cpu\",\"description\":\"d\",\"kind\":\"cpu\",\"emulated\":false},"
#define MEAS "\"measured\":true,\"label\":\"x\","
#define COST "\"costs\":{\"split_us\":1,\"kernel_switch_us\":0,\"async\":false,\"peak_gbps\":1,\"peak_gflops\":1},"
#define FIT  "{\"t0_us\":1,\"gbps\":2,\"gflops\":3,\"m_half\":4,\"error\":null}"

static void test_malformed(void)
{
    const char *good = HEAD DEV MEAS COST "\"models\":[{\"op\":\"matmul\",\"type\":\"q4_0\",\"fit\":" FIT
                       ",\"samples\":[]}],\"handoffs\":[]}";
    het_error err = { 0 };
    het_profile *p = het_profile_from_json(good, strlen(good), "good.json", &err);
    CHECK(p != NULL, "the well-formed base is accepted: %s", err.msg);
    het_profile_free(p);

    expect_error("{\"format\": ", "line 1");
    expect_error("[1,2]", "(top level)");
    expect_error("{\"format\":\"other\",\"version\":1,\"het_version\":\"x\"}", "format");
    expect_error(HEAD MEAS COST "\"models\":[],\"handoffs\":[]}", "device: missing");
    expect_error(HEAD "\"device\":{\"name\":\"cpu\",\"description\":\"d\",\"kind\":\"tpu\",\"emulated\":false},"
                 MEAS COST "\"models\":[],\"handoffs\":[]}", "device.kind");
    expect_error(HEAD DEV MEAS COST "\"models\":[{\"op\":\"matmul\",\"type\":\"q4_0\",\"fit\":"
                 "{\"t0_us\":1,\"gbps\":\"fast\",\"gflops\":3,\"m_half\":4,\"error\":null},\"samples\":[]}],"
                 "\"handoffs\":[]}", "models[0].fit.gbps: expected a number");
    expect_error(HEAD DEV MEAS COST "\"models\":[{\"op\":\"matmul\",\"type\":\"q9_9\",\"fit\":null,\"samples\":[]}],"
                 "\"handoffs\":[]}", "models[0].type: unknown type");
    expect_error(HEAD DEV MEAS COST "\"models\":[{\"op\":\"gemm\",\"type\":\"f32\",\"fit\":null,\"samples\":[]}],"
                 "\"handoffs\":[]}", "models[0].op");
    expect_error(HEAD DEV MEAS COST "\"models\":[{\"op\":\"norm\",\"type\":\"f32\",\"fit\":null,\"samples\":["
                 "{\"m\":1,\"flops\":1,\"bytes\":1,\"us\":1,\"spread\":0},"
                 "{\"m\":1,\"flops\":1,\"bytes\":1,\"us\":-3,\"spread\":0}]}],\"handoffs\":[]}",
                 "models[0].samples[1].us");
    expect_error(HEAD DEV MEAS "\"costs\":{\"split_us\":1,\"kernel_switch_us\":0,\"async\":\"no\",\"peak_gbps\":1,"
                 "\"peak_gflops\":1},\"models\":[],\"handoffs\":[]}", "costs.async");
    expect_error(HEAD DEV MEAS COST "\"models\":[],\"handoffs\":[{\"to\":\"gpu\",\"fixed_us\":1}]}",
                 "handoffs[0].gbps: missing");
    expect_error(HEAD DEV MEAS COST "\"models\":{},\"handoffs\":[]}", "models: expected an array");
    expect_error(HEAD DEV MEAS COST "\"models\":[{\"op\":\"matmul\",\"type\":\"q4_0\",\"fit\":"
                 "{\"t0_us\":1,\"gbps\":2,\"gflops\":3,\"m_half\":4,\"error\":null,\"knots\":[[1,5],[1,6]]},"
                 "\"samples\":[]}],\"handoffs\":[]}", "models[0].fit.knots[1]");
}

static bool fake_supports(het_device *d, const struct het_tensor *n) { return true; }
static enum het_status fake_run(het_device *d, struct het_tensor *const *nodes, int n, het_error *err) { return HET_OK; }
static const struct het_device_i fake_iface = { .supports_op = fake_supports, .run_split = fake_run };

/* a MoE model's needs: a profile covers them only with samples of its
 * experts' shape (class moe), unless the device cannot run those experts
 * (then there is nothing to measure, and it must not be asked again) */
static bool no_experts_supports(het_device *d, const struct het_tensor *n) { return n->op != HET_OP_MUL_MAT_ID; }
static const struct het_device_i no_experts_iface = { .supports_op = no_experts_supports, .run_split = fake_run };

/* a profile with every small op class and attention fitted: what
 * het_profile_covers asks of it besides the model's matmul shapes */
static het_profile *profile_small_ops_fitted(void)
{
    het_profile *p = het_profile_new("cpu", "test", HET_DEVICE_CPU, false);
    const struct het_cost_fit f = { .t0_us = 1, .gbps = 10, .gflops = 10, .m_half = 1 };
    const enum het_op_class classes[] = { HET_OPCLASS_NORM, HET_OPCLASS_ELTWISE, HET_OPCLASS_ROPE,
                                          HET_OPCLASS_SOFTMAX, HET_OPCLASS_COPY };
    for (size_t i = 0; i < sizeof classes / sizeof classes[0]; i++) het_profile_set_fit(p, classes[i], HET_TYPE_F32, &f, NULL);
    het_profile_set_fit(p, HET_OPCLASS_ATTN, HET_TYPE_F16, &f, NULL);
    return p;
}

static void test_covers_moe(void)
{
    het_profile *p = profile_small_ops_fitted();
    struct het_calibrate_needs needs = { .n_expert = 64, .n_expert_used = 4, .n_moe_shapes = 1,
                                         .moe_shapes = { { HET_TYPE_Q4_0, 1024, 512, false } } };
    CHECK(!het_profile_covers(p, &needs), "no experts' samples: not covered");
    struct het_op_cost c;
    moe_cost(16, 30, &c); /* the same K x N = 1024 x 512 */
    struct het_profile_sample s = { .m = c.m, .flops = c.flops, .bytes = c.bytes, .us = 50, .calls = c.calls };
    het_profile_add_sample(p, HET_OPCLASS_MOE, HET_TYPE_Q8_0, &s, NULL);
    CHECK(!het_profile_covers(p, &needs), "samples of another type do not cover q4_0");
    het_profile_add_sample(p, HET_OPCLASS_MOE, HET_TYPE_Q4_0, &s, NULL);
    CHECK(het_profile_covers(p, &needs), "a sample of the experts' shape covers them");
    het_profile *q = profile_small_ops_fitted();
    het_device *yes = het_device_new(&fake_iface, HET_DEVICE_CPU, "cpu", NULL);
    het_device *no = het_device_new(&no_experts_iface, HET_DEVICE_VULKAN, "vulkan0", NULL);
    struct het_calibrate_needs a = needs, b = needs;
    het_calibrate_needs_for(yes, &a);
    het_calibrate_needs_for(no, &b);
    CHECK(a.n_moe_shapes == 1 && !het_profile_covers(q, &a), "a device that runs the experts must measure them");
    CHECK(b.n_moe_shapes == 0 && het_profile_covers(q, &b), "a device that cannot is not asked to");
    het_device_free(yes);
    het_device_free(no);
    het_profile_free(q);
    het_profile_free(p);
}

/* a large model's output matrix (2 x 4096 x 151936 = 1,244,659,712 flops a
 * row) covers its shape after the profile went to JSON and back, and so does
 * a value written with 9 significant digits (1,244,659,710: how profiles
 * were stored before, which made every run of an 8B-shaped model
 * recalibrate); another shape's does not */
static void test_covers_large_shape(void)
{
    het_profile *p = profile_small_ops_fitted();
    const struct het_calibrate_needs needs = { .n_shapes = 1, .shapes = { { HET_TYPE_Q6_K, 4096, 151936, true } } };
    struct het_profile_sample s = { .m = 1, .flops = 2.0 * 4096 * 151936, .bytes = 5.1e8, .us = 4000 };
    het_profile_add_sample(p, HET_OPCLASS_MATMUL, HET_TYPE_Q6_K, &s, NULL);
    het_error err = { 0 };
    char *json = het_profile_to_json(p, &err);
    het_profile *back = json ? het_profile_from_json(json, strlen(json), "test", &err) : NULL;
    CHECK(back && het_profile_covers(back, &needs), "covered after JSON: %s", err.msg);
    het_profile *nine = profile_small_ops_fitted();
    s.flops = 1244659710.0;
    het_profile_add_sample(nine, HET_OPCLASS_MATMUL, HET_TYPE_Q6_K, &s, NULL);
    CHECK(het_profile_covers(nine, &needs), "9 significant digits still cover the shape");
    const struct het_calibrate_needs other = { .n_shapes = 1, .shapes = { { HET_TYPE_Q6_K, 4096, 151937, true } } };
    CHECK(!het_profile_covers(nine, &other), "a shape one row larger is not covered");
    het_profile_free(nine);
    het_profile_free(back);
    het_profile_free(p);
    free(json);
}

/* A device whose matmul nodes are slow for their bytes (each spins 100 µs,
 * as a CPU-type Vulkan driver's are bound by arithmetic) and whose other
 * nodes cost nothing; it records the most matmul nodes of each M (1..512)
 * any one split held. */
struct slow_mm { int most[513]; int not_probes; };

static enum het_status slow_mm_run(het_device *d, struct het_tensor *const *nodes, int n, het_error *err)
{
    struct slow_mm *s = d->context;
    int count = 0, m = 0;
    for (int i = 0; i < n; i++) {
        s->not_probes += !(nodes[i]->flags & HET_TENSOR_FLAG_PROBE);
        if (nodes[i]->op != HET_OP_MUL_MAT) continue;
        count++;
        m = (int)nodes[i]->src[1]->ne[1];
        double t0 = het_now_us();
        while (het_now_us() - t0 < 100.0) {}
    }
    if (m >= 1 && m <= 512 && count > s->most[m]) s->most[m] = count;
    return HET_OK;
}

/* Calibration times a point's full set of copies until the previous point
 * shows its nodes bound by arithmetic, then only enough of them for ~2 ms
 * a split (a 256 x 256 Q4_0 matrix stays in the caches: 64 copies a split
 * to spread the overhead). No time is asserted: only how many nodes a split
 * held, which follows from each node taking at least 100 µs. */
static void test_calibrate_slow_nodes(void)
{
    static const struct het_device_i iface = { .supports_op = fake_supports, .run_split = slow_mm_run };
    struct slow_mm s = { { 0 }, 0 };
    het_device *dev = het_device_new(&iface, HET_DEVICE_VULKAN, "vulkan0", &s);
    dev->caps.host_timed = true;
    struct het_calibrate_needs needs = { .n_shapes = 1, .shapes = { { HET_TYPE_Q4_0, 256, 256, false } },
                                         .row_width = 256, .head_dim = 64, .n_head = 4, .n_head_kv = 2,
                                         .max_rows = 16, .no_softmax = true };
    struct het_calibrate_params cp = { .quick = true, .needs = &needs };
    het_error err = { 0 };
    het_profile *p = het_calibrate_device(dev, &cp, &err);
    CHECK(p != NULL, "calibrating the slow device: %s", err.msg);
    CHECK(s.most[1] == 64, "M = 1 (nothing measured before it): all 64 copies timed, got %d", s.most[1]);
    /* >= 90 µs a node measured (at most a tenth comes off for the split's
     * overhead), times 4 for the next M's flops: at most ceil(2000 / 360) */
    CHECK(s.most[4] >= 1 && s.most[4] <= 6, "M = 4: at most 6 of 64 timed, got %d", s.most[4]);
    CHECK(s.most[16] >= 1 && s.most[16] <= 6, "M = 16: at most 6 of 64 timed, got %d", s.most[16]);
    /* a device that tunes itself by its splits' times must see them as timing runs */
    CHECK(s.not_probes == 0, "every node calibration ran is marked HET_TENSOR_FLAG_PROBE (%d not)", s.not_probes);
    het_profile_free(p);
    het_device_free(dev);
}

static void test_cache(const char *dir)
{
    setenv("XDG_CACHE_HOME", dir, 1);
    het_device *dev = het_device_new(&fake_iface, HET_DEVICE_CPU, "cpu", NULL);
    snprintf(dev->desc, sizeof dev->desc, "fake CPU, 3 threads");
    het_error err = { 0 };
    CHECK(het_profile_cache_load(dev, &err) == NULL && strstr(err.msg, "no profile"), "empty cache: %s", err.msg);

    het_profile *p = het_profile_new_for_device(dev);
    het_profile_set_label(p, true, "measured");
    CHECK(het_profile_cache_store(p, &err) == HET_OK, "store: %s", err.msg);
    het_profile *q = het_profile_cache_load(dev, &err);
    CHECK(q != NULL && het_profile_matches(q, dev), "reload: %s", err.msg);
    het_profile_free(q);

    char path[1024];
    CHECK(het_profile_cache_path("cpu", dev->desc, path, sizeof path, &err) == HET_OK && strstr(path, dir) &&
          strstr(path, "/het/profiles/cpu-"), "cache path %s", path);

    /* the same device under another het version: stale */
    char *json = het_profile_to_json(p, &err);
    char *v = json ? strstr(json, HET_VERSION) : NULL;
    if (v) {
        v[0] = '9';
        FILE *f = fopen(path, "w");
        fputs(json, f);
        fclose(f);
        CHECK(het_profile_cache_load(dev, &err) == NULL && strstr(err.msg, "stale"), "stale: %s", err.msg);
    }
    free(json);

    /* another device description: another file, so no profile */
    snprintf(dev->desc, sizeof dev->desc, "fake CPU, 4 threads");
    CHECK(het_profile_cache_load(dev, &err) == NULL, "a changed device has no profile");
    het_profile_free(p);
    het_device_free(dev);
}

static void test_defaults(void)
{
    const struct het_roofline r = { .gbps = 38.5, .gflops = 10000, .t0_us = 150, .split_us = 7, .switch_us = 2000,
                                    .source = "seed figures" };
    const struct het_device_caps caps = { .async = false, .lossy = true, .shares_cpu_cores = true };
    het_profile *p = het_profile_from_roofline("npu", "", HET_DEVICE_NPU, &caps, &r);
    CHECK(p && !het_profile_is_measured(p) && strstr(het_profile_label(p), "unmeasured default (seed figures)"),
          "default label");
    if (!p) return;
    struct het_op_cost c = { .cls = HET_OPCLASS_MATMUL, .wtype = HET_TYPE_Q4_0, .m = 1, .flops = 2e6, .bytes = 38.5e3 };
    double t = het_profile_predict_cost(p, &c);
    CHECK(fabs(t - 151) < 1, "roofline GEMV: 150 us + 38.5 kB / 38.5 GB/s = 151 us, got %g", t);
    struct het_profile_device_costs dc;
    het_profile_get_device_costs(p, &dc);
    CHECK(!dc.async && dc.lossy && dc.shares_cpu_cores && dc.split_us == 7 && dc.kernel_switch_us == 2000,
          "caps and device costs carried over");
    het_profile_free(p);
}

/* the NPU's profile comes from its cost model, fitted, never from timing it */
static void test_npu_profile(void)
{
    struct het_npu_profile np;
    het_npu_profile_default(HET_NPU_XDNA1, &np);
    het_error err = { 0 };
    het_profile *p = het_profile_from_npu(&np, "npu", "emulated", &err);
    CHECK(p && !het_profile_is_measured(p) && strstr(het_profile_label(p), "unmeasured"), "npu profile: %s", err.msg);
    if (!p) return;
    struct het_profile_device_costs dc;
    het_profile_get_device_costs(p, &dc);
    CHECK(dc.kernel_switch_us == np.switch_us, "kernel switch carried over");
    const int64_t shapes[3][3] = { { 1024, 1024, 1 }, { 1024, 3072, 16 }, { 3072, 1024, 128 } };
    for (int i = 0; i < 3; i++) {
        int64_t k = shapes[i][0], n = shapes[i][1], m = shapes[i][2];
        struct het_op_cost c = { .cls = HET_OPCLASS_MATMUL, .wtype = HET_TYPE_Q4_0, .m = (double)m,
                                 .flops = 2.0 * k * n * m, .bytes = k * n * 18.0 / 32 + (k + n) * m * 4.0 };
        double a = het_profile_predict_cost(p, &c), b = het_npu_profile_matmul_us(&np, HET_TYPE_Q4_0, k, n, m);
        CHECK(fabs(a / b - 1) < 0.15, "npu %lldx%lld M=%lld: fitted %g vs cost model %g", (long long)n, (long long)k,
              (long long)m, a, b);
    }
    struct het_op_cost norm = { .cls = HET_OPCLASS_NORM, .wtype = HET_TYPE_F32, .m = 1, .flops = 1, .bytes = 1 };
    CHECK(isnan(het_profile_predict_cost(p, &norm)), "the NPU has no norm model (it only runs matmuls)");
    het_profile_free(p);
}

int main(void)
{
    char dir[] = "/tmp/het_test_profile_XXXXXX";
    if (!mkdtemp(dir)) het_test_skip("cannot make a temporary folder");
    test_op_cost();
    test_fit();
    test_fit_knots();
    test_fit_moe();
    test_defaults();
    test_npu_profile();
    test_covers_moe();
    test_covers_large_shape();
    test_calibrate_slow_nodes();
#ifdef HET_HAVE_JANSSON
    test_round_trip(dir);
    test_malformed();
    test_cache(dir);
#else
    (void)test_round_trip; (void)test_malformed; (void)test_cache;
    printf("built without jansson: JSON tests not run\n");
#endif
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    return het_test_finish();
}
