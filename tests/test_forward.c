/*
 * test_forward.c — end-to-end logits of het's graph on the CPU device versus
 * the scalar reference forward pass (ref_forward.c), for every fixture model:
 *  - F32/F16-weight models with an F32 KV cache: every position's logits agree
 *    within 1e-4 relative (max |diff| / max |ref| per row);
 *  - quantised models: top-1 agrees with the reference run on the same
 *    weights dequantised to F32 on >= 99% of positions;
 *  - the default F16 cache and token-by-token decode agree with batch prefill.
 */
#include "het/model.h"
#include "ref_forward.h"
#include "testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define N_TOK 40

static double row_rel_err(const float *a, const float *b, int n)
{
    double md = 0, mb = 0;
    for (int i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        if (d > md || d != d) md = d;
        if (fabs(b[i]) > mb) mb = fabs(b[i]);
    }
    return mb > 0 ? md / mb : md;
}

static int argmax(const float *x, int n)
{
    int b = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    return b;
}

struct run { het_device *cpu; het_sched *sched; het_context *ctx; };

static bool run_open(struct run *r, het_model *m, bool kv_f32)
{
    het_error err = { 0 };
    r->cpu = het_cpu_device_init(0, &err);
    struct het_sched_params sp = { .devices = &r->cpu, .n_devices = 1 };
    r->sched = r->cpu ? het_sched_init(&sp, &err) : NULL;
    size_t size;
    const void *base = het_gguf_file_data(het_model_gguf(m), &size);
    if (r->sched) het_sched_register_memory(r->sched, (void *)base, size, 0, &err);
    struct het_context_params cp = { .n_ctx = 128, .sched = r->sched, .kv_f32 = kv_f32 };
    r->ctx = r->sched ? het_context_init(m, &cp, &err) : NULL;
    CHECK(r->ctx != NULL, "context: %s", err.msg);
    return r->ctx != NULL;
}

static void run_close(struct run *r)
{
    het_context_free(r->ctx);
    het_sched_free(r->sched);
    het_device_free(r->cpu);
}

static void check_model(const char *rel, bool exact)
{
    const char *path = het_test_shared(rel);
    if (!het_test_file_exists(path)) {
        printf("  %s: missing, skipped\n", rel);
        return;
    }
    het_error err = { 0 };
    het_model *m = het_model_load(path, &err);
    CHECK(m != NULL, "load %s: %s", rel, err.msg);
    if (!m) return;
    const int V = het_model_get_config(m)->n_vocab;
    int32_t toks[N_TOK];
    uint64_t s = 12345;
    for (int i = 0; i < N_TOK; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        toks[i] = (int32_t)((s >> 33) % (uint64_t)V);
    }
    toks[0] = 1;
    float *ref = malloc(sizeof(float) * N_TOK * V);
    struct ref_model *rm = ref_model_init(m);
    ref_forward(rm, toks, N_TOK, ref);
    ref_model_free(rm);

    /* batch prefill, F32 cache */
    struct run r;
    if (run_open(&r, m, true)) {
        CHECK(het_context_eval(r.ctx, toks, N_TOK, true, &err) == HET_OK, "eval %s: %s", rel, err.msg);
        int32_t n_out;
        const float *lg = het_context_logits(r.ctx, &n_out);
        CHECK(n_out == N_TOK, "all logits kept");
        double worst = 0;
        int agree = 0;
        for (int t = 0; t < N_TOK && n_out == N_TOK; t++) {
            double e = row_rel_err(lg + (size_t)t * V, ref + (size_t)t * V, V);
            if (e > worst || e != e) worst = e;
            agree += argmax(lg + (size_t)t * V, V) == argmax(ref + (size_t)t * V, V);
        }
        printf("  %-40s prefill: max rel err %.2e, top-1 %d/%d\n", rel, worst, agree, N_TOK);
        if (exact) CHECK(worst <= 1e-4, "%s: logits rel err %.3e > 1e-4", rel, worst);
        CHECK(agree * 100 >= 99 * N_TOK - 0 || agree == N_TOK, "%s: top-1 agreement %d/%d < 99%%", rel, agree, N_TOK);
        run_close(&r);
    }
    /* decode token by token with the default F16 cache: same argmax path */
    if (run_open(&r, m, false)) {
        int agree = 0;
        double worst = 0;
        int half = N_TOK / 2;
        CHECK(het_context_eval(r.ctx, toks, half, true, &err) == HET_OK, "eval: %s", err.msg);
        for (int t = 0; t < N_TOK; t++) {
            if (t >= half) CHECK(het_context_eval(r.ctx, &toks[t], 1, false, &err) == HET_OK, "decode: %s", err.msg);
            const float *lg = het_context_logits(r.ctx, NULL) + (t < half ? (size_t)t * V : 0);
            double e = row_rel_err(lg, ref + (size_t)t * V, V);
            if (e > worst || e != e) worst = e;
            agree += argmax(lg, V) == argmax(ref + (size_t)t * V, V);
        }
        printf("  %-40s f16 cache, decode: max rel err %.2e, top-1 %d/%d\n", rel, worst, agree, N_TOK);
        CHECK(agree * 100 >= 99 * N_TOK || agree == N_TOK, "%s: decode top-1 %d/%d", rel, agree, N_TOK);
        CHECK(worst < 5e-2, "%s: f16-cache logits rel err %.3e", rel, worst);
        run_close(&r);
    }
    free(ref);
    het_model_free(m);
}

int main(void)
{
    if (!het_test_file_exists(het_test_shared("models")))
        het_test_skip("fixtures not found under %s", het_test_shared("models"));
    check_model("models/stories260K.gguf", true);
    check_model("models/llama-2-tiny-random.gguf", true);
    check_model("models/synthetic/llama-tiny-f32.gguf", true);
    check_model("models/synthetic/llama-tiny-q4_0.gguf", false);
    check_model("models/synthetic/qwen3-tiny-q8_0.gguf", false);
    check_model("models/synthetic/qwen3-tiny-q4_k_m.gguf", false);
    return het_test_finish();
}
