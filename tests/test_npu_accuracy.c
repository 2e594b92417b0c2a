/*
 * test_npu_accuracy.c — end-to-end accuracy of the emulated NPU: every
 * matmul the NPU contract takes pinned to it (the rest on the CPU) against
 * the CPU alone, over every position of the reference continuations
 * (shared/reference/stories260K-N.prompt + .expected, one text), for stories260K
 * quantised to q8_0 and q4_0 (its ffn_down, K = 172, stays on the CPU) and
 * the synthetic qwen3-tiny-q8_0 and llama-tiny-q4_0. Checked: the NPU ran
 * exactly the matmuls it supports; top-1 agreement and the mean KL(p_cpu ||
 * p_npu) per position stay within the bounds below; printed for each.
 *
 * A Qwen3-0.6B-shaped model (28 layers, ~360 MB) is too big for CI: set
 * HET_NPU_ACCURACY_MODELS=a.gguf,b.gguf to run others too (placement and KL
 * checked, top-1 printed).
 *
 * Bounds (with the default activation group of 32; HET_NPU_ACT_GROUP=row
 * runs the per-row contract for comparison, the 95% checks then relaxed to
 * the 90% floor). The
 * issue's figure, top-1 >= 95%, is asserted where it is measured:
 * stories260K q8_0 and q4_0 (100%) and qwen3-tiny-q8_0, the Qwen3-shaped
 * random model (100%, KL ~1e-14: per-32 activation scales are what the CPU
 * does too). llama-tiny-q4_0 measures 95.7% (94.6% and 96.7% on the two
 * texts); random weights give nearly flat next-token distributions (top two
 * logits often within 2% of the logit spread), so one flipped position
 * moves it by 0.9%: it is printed and held to >= 90% only. KL mean <= 2e-3
 * everywhere. docs/accuracy.md has the tables.
 */
#include "het/accuracy.h"
#include "het/model.h"
#include "het/npu.h"
#include "het/quantize.h"
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#define TOP1_ISSUE   0.95   /* the issue's requirement */
#define TOP1_FLOOR   0.90   /* models printed, not held to the issue's figure */
#define KL_MAX_MEAN  2e-3

static bool g_per_row;   /* HET_NPU_ACT_GROUP=row: measuring the per-row contract */

struct side {
    het_device *dev[2];
    int         n_dev;
    het_sched  *sched;
    het_model  *model;
    het_context *ctx;
};

static bool side_open(struct side *s, const char *path, bool with_npu, int n_ctx)
{
    memset(s, 0, sizeof *s);
    het_error err = { 0 };
    s->model = het_model_load(path, &err);
    CHECK(s->model != NULL, "load %s: %s", path, err.msg);
    if (!s->model) return false;
    s->dev[s->n_dev++] = het_cpu_device_init(0, &err);
    if (with_npu) {
        struct het_npu_params np;
        het_npu_params_default(&np, HET_NPU_EMULATE);
        np.no_cache = true;
        s->dev[s->n_dev++] = het_npu_device_init_params(&np, &err);
    }
    for (int i = 0; i < s->n_dev; i++) CHECK(s->dev[i] != NULL, "device: %s", err.msg);
    if (!s->dev[s->n_dev - 1] || !s->dev[0]) return false;
    /* with the NPU: every matmul pinned to it; what it cannot run falls back to the CPU */
    struct het_plan_pin pin = { "mul_mat", 1 };
    struct het_sched_params sp = { .devices = s->dev, .n_devices = s->n_dev, .policy = &het_policy_single,
                                   .policy_device = 0, .pins = &pin, .n_pins = with_npu };
    s->sched = het_sched_init(&sp, &err);
    CHECK(s->sched != NULL, "sched: %s", err.msg);
    if (!s->sched) return false;
    size_t size;
    const void *base = het_gguf_file_data(het_model_gguf(s->model), &size);
    CHECK(het_sched_register_memory(s->sched, (void *)base, size, 0, &err) == HET_OK, "register: %s", err.msg);
    CHECK(het_model_prepare(s->model, s->sched, &err) == HET_OK, "prepare: %s", err.msg);
    struct het_context_params cp = { .n_ctx = n_ctx, .sched = s->sched };
    s->ctx = het_context_init(s->model, &cp, &err);
    CHECK(s->ctx != NULL, "context: %s", err.msg);
    return s->ctx != NULL;
}

static void side_close(struct side *s)
{
    het_context_free(s->ctx);
    het_sched_free(s->sched);
    for (int i = 0; i < s->n_dev; i++) het_device_free(s->dev[i]);
    het_model_free(s->model);
}

static char *read_text(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *buf = malloc(1 << 16);
    *len = buf ? fread(buf, 1, (1 << 16) - 1, f) : 0;
    fclose(f);
    if (buf) buf[*len] = 0;
    return buf;
}

/* BOS (when the model adds one) + tokens of prompt + expected */
static int32_t *reference_tokens(const het_model *m, int which, int32_t *n)
{
    char p[64], e[64];
    snprintf(p, sizeof p, "reference/stories260K-%d.prompt", which);
    snprintf(e, sizeof e, "reference/stories260K-%d.expected", which);
    size_t lp = 0, le = 0;
    char *tp = read_text(het_test_shared(p), &lp), *te = read_text(het_test_shared(e), &le);
    int32_t *ids = NULL;
    *n = 0;
    if (tp && te) {
        char *text = malloc(lp + le + 1);
        memcpy(text, tp, lp);
        memcpy(text + lp, te, le + 1);
        const het_tokenizer *tok = het_model_tokenizer(m);
        het_error err = { 0 };
        int32_t *raw = NULL, nr = 0;
        CHECK(het_tokenize(tok, text, lp + le, false, true, &raw, &nr, &err) == HET_OK, "tokenize: %s", err.msg);
        bool bos = het_tokenizer_add_bos(tok) && het_tokenizer_bos(tok) >= 0;
        ids = malloc((size_t)(nr + 1) * sizeof *ids);
        if (bos) ids[(*n)++] = het_tokenizer_bos(tok);
        for (int32_t i = 0; i < nr; i++) ids[(*n)++] = raw[i];
        free(raw);
        free(text);
    }
    free(tp);
    free(te);
    return ids;
}

/* the NPU ran every matmul it supports in the last graph, and nothing else */
static void check_placement(const char *label, const struct side *npu)
{
    const struct het_plan *plan = het_sched_last_plan(npu->sched);
    const het_graph *g = het_sched_last_graph(npu->sched);
    int on_npu = 0, wrong = 0, k172 = 0;
    for (int i = 0; plan && g && i < plan->n_nodes; i++) {
        const struct het_tensor *t = het_graph_node(g, i);
        bool want = t->op == HET_OP_MUL_MAT && het_sched_device_supports(npu->sched, 1, t);
        on_npu += plan->nodes[i].device == 1;
        wrong += (plan->nodes[i].device == 1) != want;
        k172 += t->op == HET_OP_MUL_MAT && t->src[0]->ne[0] % 32 != 0 && plan->nodes[i].device == 0;
    }
    struct het_device_stats ds;
    het_device_get_stats(npu->dev[1], &ds);
    CHECK(plan && on_npu > 0 && wrong == 0 && ds.n_nodes > 0, "%s: %d nodes on the npu, %d misplaced, %llu run", label,
          on_npu, wrong, (unsigned long long)ds.n_nodes);
    if (strstr(label, "stories")) CHECK(k172 > 0, "%s: ffn_down (K 172) stays on the cpu", label);
}

struct total { int n, agree; double kl_sum, kl_max; };

static void run_text(const char *label, struct side *cpu, struct side *npu, int which, struct total *tot)
{
    int32_t n = 0;
    int32_t *ids = reference_tokens(cpu->model, which, &n);
    if (!ids || n < 2) {
        free(ids);
        return;
    }
    const int32_t nv = het_model_get_config(cpu->model)->n_vocab;
    float *a = malloc((size_t)n * nv * sizeof *a), *b = malloc((size_t)n * nv * sizeof *b);
    het_error err = { 0 };
    CHECK(het_accuracy_logits(cpu->ctx, nv, ids, n, 0, a, &err) == HET_OK, "%s cpu: %s", label, err.msg);
    CHECK(het_accuracy_logits(npu->ctx, nv, ids, n, 0, b, &err) == HET_OK, "%s npu: %s", label, err.msg);
    check_placement(label, npu);
    struct het_accuracy r;
    het_accuracy_compare(a, b, n, nv, &r, NULL, NULL);
    printf("  %-28s text %d: %3d positions, top-1 %3d/%3d = %5.1f%%, KL mean %.2e max %.2e\n", label, which, n,
           r.n_agree, n, 100 * r.top1, r.kl_mean, r.kl_max);
    tot->n += n;
    tot->agree += r.n_agree;
    tot->kl_sum += r.kl_mean * n;
    if (r.kl_max > tot->kl_max) tot->kl_max = r.kl_max;
    free(a);
    free(b);
    free(ids);
}

/* min_top1: TOP1_ISSUE (relaxed to TOP1_FLOOR when measuring per-row), TOP1_FLOOR, or 0 (printed only) */
static void run_model(const char *label, const char *path, double min_top1)
{
    if (!het_test_file_exists(path)) {
        printf("  %s: %s missing, skipped\n", label, path);
        return;
    }
    struct side cpu, npu;
    bool ok = side_open(&cpu, path, false, 512) && side_open(&npu, path, true, 512);
    struct total tot = { 0 };
    for (int which = 1; ok && which <= 2; which++) run_text(label, &cpu, &npu, which, &tot);
    if (ok && tot.n) {
        double top1 = (double)tot.agree / tot.n, kl = tot.kl_sum / tot.n;
        printf("  %-28s all:    %3d positions, top-1 %5.1f%%, KL mean %.2e max %.2e%s\n", label, tot.n, 100 * top1,
               kl, tot.kl_max, top1 >= TOP1_ISSUE ? "" : "  (below the issue's 95%)");
        const double want = g_per_row && min_top1 > TOP1_FLOOR ? TOP1_FLOOR : min_top1;
        CHECK(top1 >= want, "%s: top-1 agreement %.3f < %.2f", label, top1, want);
        CHECK(kl <= KL_MAX_MEAN && isfinite(tot.kl_max), "%s: KL mean %.3g", label, kl);
    }
    side_close(&npu);
    side_close(&cpu);
}

int main(void)
{
    char s[4096]; /* het_test_shared returns a static buffer */
    snprintf(s, sizeof s, "%s", het_test_shared("models/stories260K.gguf"));
    if (!het_test_file_exists(s) || !het_test_file_exists(het_test_shared("reference/stories260K-1.prompt")))
        het_test_skip("fixtures missing (shared/models/stories260K.gguf, shared/reference)");
    const char *ag = getenv("HET_NPU_ACT_GROUP");
    g_per_row = ag && (!strcasecmp(ag, "row") || !strcasecmp(ag, "k"));
    printf("emulated NPU (int8 activations, one scale per %s) vs the CPU alone, every supported matmul on the NPU:\n",
           g_per_row ? "row (HET_NPU_ACT_GROUP=row: 95% checks relaxed to 90%)" : "32 elements");
    const enum het_type qt[] = { HET_TYPE_Q8_0, HET_TYPE_Q4_0 };
    for (int i = 0; i < 2; i++) {
        char out[128], label[64];
        snprintf(out, sizeof out, "/tmp/het-npuacc-%ld-%s.gguf", (long)getpid(), het_type_name(qt[i]));
        snprintf(label, sizeof label, "stories260K-%s", het_type_name(qt[i]));
        het_error err = { 0 };
        CHECK(het_quantize_model(s, out, qt[i], NULL, &err) == HET_OK, "quantize: %s", err.msg);
        run_model(label, out, TOP1_ISSUE);
        remove(out);
    }
    char q3[4096], ll[4096];
    snprintf(q3, sizeof q3, "%s", het_test_shared("models/synthetic/qwen3-tiny-q8_0.gguf"));
    snprintf(ll, sizeof ll, "%s", het_test_shared("models/synthetic/llama-tiny-q4_0.gguf"));
    run_model("qwen3-tiny-q8_0 (random)", q3, TOP1_ISSUE);
    run_model("llama-tiny-q4_0 (random)", ll, TOP1_FLOOR);
    const char *more = getenv("HET_NPU_ACCURACY_MODELS");
    if (more && *more) {
        char list[4096];
        snprintf(list, sizeof list, "%s", more);
        for (char *save = NULL, *p = strtok_r(list, ",", &save); p; p = strtok_r(NULL, ",", &save)) {
            const char *b = strrchr(p, '/');
            run_model(b ? b + 1 : p, p, 0.0);   /* e.g. the 28-layer random 0.6B: top-1 is noise there */
        }
    }
    return het_test_finish();
}
