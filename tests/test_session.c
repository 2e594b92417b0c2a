/*
 * test_session.c — het_session (het/session.h) as a library user meets it:
 * a session opens with only a model path and generates the same greedy
 * tokens as a context built by hand; every failing step comes back as one
 * error naming it (model file, device, policy, pins, a context beyond
 * memory); the pool estimate grows with the parallel sequences by exactly
 * their KV caches; a context cut back to a prefix continues as if only
 * that prefix had been evaluated.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "het/chat.h"
#include "het/session.h"
#include "testutil.h"

static int32_t greedy_after(het_context *ctx, const int32_t *ids, int32_t n, int32_t n_vocab)
{
    het_error err = { 0 };
    if (het_context_eval(ctx, ids, n, false, &err) != HET_OK) return -1;
    return het_argmax(het_context_logits(ctx, NULL), n_vocab);
}

static void test_open_and_generate(const char *path)
{
    het_error err = { 0 };
    struct het_session_params p = { .model_path = path, .devices = "cpu", .n_threads = 1, .open_context = true };
    het_session *s = het_session_open(&p, &err);
    CHECK(s != NULL, "open: %s", err.msg);
    if (!s) return;
    CHECK(het_session_n_devices(s) == 1 && het_device_kind(het_session_device(s, 0)) == HET_DEVICE_CPU,
          "the CPU alone");
    CHECK(het_session_profile(s, 0) == NULL, "one device needs no profile");
    CHECK(het_session_budget(s) == NULL, "no budget asked for");
    CHECK(het_session_pool(s) != NULL && het_model_pool(het_session_model(s)) == NULL,
          "the session has a pool and the weights stay in the file mapping");
    het_model *m = het_session_model(s);
    het_context *ctx = het_session_context(s);
    const int32_t n_vocab = het_model_get_config(m)->n_vocab;
    int32_t *ids = NULL, n = 0;
    CHECK(het_prompt_tokenize(het_model_tokenizer(m), "Once upon a time", 16, &ids, &n, &err) == HET_OK, "%s",
          err.msg);
    /* the same tokens from a context made by hand on the session's scheduler */
    struct het_context_params cp = { .sched = het_session_sched(s), .n_ctx = 64 };
    het_context *own = het_context_init(m, &cp, &err);
    CHECK(own != NULL, "%s", err.msg);
    int32_t a = greedy_after(ctx, ids, n, n_vocab), b = own ? greedy_after(own, ids, n, n_vocab) : -2;
    CHECK(a >= 0 && a == b, "session context %d vs own context %d", a, b);

    /* keep all but the last token, evaluate it again: the same logits */
    if (own && n > 2) {
        float *before = malloc((size_t)n_vocab * sizeof *before);
        memcpy(before, het_context_logits(own, NULL), (size_t)n_vocab * sizeof *before);
        het_context_seq_keep(own, 0, n - 1);
        CHECK(het_context_n_past(own) == n - 1, "kept %d of %d", het_context_n_past(own), n);
        CHECK(het_context_eval(own, ids + n - 1, 1, false, &err) == HET_OK, "%s", err.msg);
        CHECK(het_test_max_abs_diff(het_context_logits(own, NULL), before, (size_t)n_vocab) < 1e-4,
              "logits after keep + re-eval differ by %g",
              het_test_max_abs_diff(het_context_logits(own, NULL), before, (size_t)n_vocab));
        free(before);
    }
    het_context_free(own);
    free(ids);
    het_session_close(s);
    /* asked for, the weights are copied into the session's pool */
    p.weights_in_pool = true;
    s = het_session_open(&p, &err);
    CHECK(s != NULL, "open with weights_in_pool: %s", err.msg);
    if (s) {
        CHECK(het_session_pool(s) != NULL && het_model_pool(het_session_model(s)) == het_session_pool(s),
              "weights_in_pool: the weights are in the session's pool");
        het_session_close(s);
    }
}

static void expect_error(const struct het_session_params *p, enum het_status st, const char *needle)
{
    het_error err = { 0 };
    het_session *s = het_session_open(p, &err);
    CHECK(!s && err.status == st && strstr(err.msg, needle), "want %s '%s', got %s '%s'", het_status_name(st),
          needle, het_status_name(err.status), err.msg);
    het_session_close(s);
}

static void test_errors(const char *path)
{
    expect_error(&(struct het_session_params){ .model_path = "/nonexistent/m.gguf" }, HET_ERR_IO, "m.gguf");
    expect_error(&(struct het_session_params){ .model_path = NULL }, HET_ERR_INVALID, "no model path");
    expect_error(&(struct het_session_params){ .model_path = path, .devices = "tpu" }, HET_ERR_INVALID,
                 "device 'tpu'");
    expect_error(&(struct het_session_params){ .model_path = path, .devices = "cpu", .policy = "random" }, HET_ERR_INVALID,
                 "policy 'random'");
    expect_error(&(struct het_session_params){ .model_path = path, .devices = "cpu", .policy = "single:vulkan" }, HET_ERR_INVALID,
                 "no such device");
    expect_error(&(struct het_session_params){ .model_path = path, .devices = "cpu", .pins = "attn*" }, HET_ERR_INVALID, "attn*");
    expect_error(&(struct het_session_params){ .model_path = path, .devices = "cpu", .n_ctx = 1 << 30,
                                               .n_parallel = 64 },
                 HET_ERR_NOMEM, "lower the context length or the parallel sequences");
    expect_error(&(struct het_session_params){ .model_path = path, .devices = "cpu", .pool_backings = "floppy" }, HET_ERR_INVALID,
                 "floppy");
}

static void test_estimate(const char *path)
{
    het_error err = { 0 };
    het_model *m = het_model_load(path, &err);
    CHECK(m != NULL, "%s", err.msg);
    if (!m) return;
    const struct het_model_config *c = het_model_get_config(m);
    struct het_pool_estimate one, four;
    het_model_pool_estimate(m, &(struct het_pool_estimate_params){ .n_ctx = 4096 }, &one);
    het_model_pool_estimate(m, &(struct het_pool_estimate_params){ .n_ctx = 4096, .n_seq = 4 }, &four);
    const size_t kv1 = 2 * 4096 * (size_t)c->n_layer * (size_t)c->n_head_kv * (size_t)c->head_dim * 2; /* F16 K+V */
    CHECK(one.kv >= kv1 && one.kv < kv1 + 65536, "one KV cache %zu, F16 K+V are %zu bytes", one.kv, kv1);
    CHECK(four.kv == 4 * one.kv, "four sequences: %zu, want 4 x %zu", four.kv, one.kv);
    CHECK(four.total + (2u << 20) > one.total + 3 * one.kv && four.total > one.total, "the reservation grows with the sequences (%zu vs %zu)", four.total,
          one.total);
    CHECK(one.n_seq == 1 && four.n_seq == 4 && one.n_ctx == 4096, "sized for %d x %d", four.n_seq, one.n_ctx);
    CHECK(one.weights >= het_model_weight_bytes(m) && one.needed <= one.total, "parts consistent");
    het_model_free(m);
}

int main(void)
{
    const char *path = het_test_source("models/stories260K.gguf");
    if (!het_test_file_exists(path)) het_test_skip("%s missing", path);
    CHECK(!strcmp(het_version(), HET_VERSION), "het_version() %s vs HET_VERSION %s", het_version(), HET_VERSION);
    test_open_and_generate(path);
    test_errors(path);
    test_estimate(path);
    return het_test_finish();
}
