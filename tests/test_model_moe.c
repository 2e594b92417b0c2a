/*
 * test_model_moe.c — loading mixture-of-experts GGUFs (qwen3moe, qwen2moe):
 * mkmodel's tiny presets write the keys and 3-D expert tensors llama.cpp
 * reads; the loader takes expert counts and widths from them, falls back as
 * llama.cpp does when a width key is absent (expert width n_ff / k, shared
 * expert width n_ff), sets the renormalisation per architecture, and names
 * the key or tensor when a file is wrong. (test_forward.c checks the logits.)
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "het/gguf.h"
#include "het/mkmodel.h"
#include "het/model.h"
#include "testutil.h"

static char vocab[4096];

static const char *tmp(const char *tag)
{
    static char buf[4][256];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "/tmp/het_test_model_moe_%d_%s.gguf", (int)getpid(), tag);
    return buf[k];
}

static bool write_preset(const char *preset, const char *path)
{
    struct het_mkmodel_params p;
    het_mkmodel_params_init(&p);
    CHECK(het_mkmodel_params_preset(&p, preset), "preset %s", preset);
    p.path = path;
    p.vocab_path = vocab;
    p.type = HET_TYPE_Q8_0;
    het_error err = { 0 };
    enum het_status st = het_mkmodel_write(&p, &err);
    CHECK(st == HET_OK, "mkmodel %s: %s", preset, err.msg);
    return st == HET_OK;
}

/* Copy src to dst without key `drop`, with the u32 keys set[] replaced. */
static bool rewrite(const char *src, const char *dst, const char *drop, const char *set_key, uint32_t set_v)
{
    het_error err = { 0 };
    het_gguf *g = het_gguf_open(src, &err);
    CHECK(g != NULL, "open %s: %s", src, err.msg);
    if (!g) return false;
    het_gguf_writer *w = het_gguf_writer_init();
    enum het_status st = HET_OK;
    for (int64_t i = 0; st == HET_OK && i < het_gguf_n_kv(g); i++)
        if (!drop || strcmp(het_gguf_kv_key(g, i), drop)) st = het_gguf_writer_copy_kv(w, g, i);
    if (st == HET_OK && set_key) st = het_gguf_writer_set_u32(w, set_key, set_v);
    for (int64_t i = 0; st == HET_OK && i < het_gguf_n_tensors(g); i++) {
        const struct het_gguf_tensor_info *t = het_gguf_tensor(g, i);
        st = het_gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data);
    }
    if (st == HET_OK) st = het_gguf_writer_write(w, dst, &err);
    CHECK(st == HET_OK, "rewrite %s: %s", dst, err.msg);
    het_gguf_writer_free(w);
    het_gguf_close(g);
    return st == HET_OK;
}

static void check_config(const char *path, const char *what, enum het_arch arch, int n_ff_exp, int n_ff_shexp)
{
    het_error err = { 0 };
    het_model *m = het_model_load(path, &err);
    CHECK(m != NULL, "%s: load: %s", what, err.msg);
    if (!m) return;
    const struct het_model_config *c = het_model_get_config(m);
    CHECK(c->arch == arch, "%s: arch %d", what, (int)c->arch);
    CHECK(c->n_expert == 8 && c->n_expert_used == 2, "%s: experts %d, used %d", what, c->n_expert, c->n_expert_used);
    CHECK(c->n_ff_exp == n_ff_exp, "%s: n_ff_exp %d, want %d", what, c->n_ff_exp, n_ff_exp);
    CHECK(c->n_ff_shexp == n_ff_shexp, "%s: n_ff_shexp %d, want %d", what, c->n_ff_shexp, n_ff_shexp);
    CHECK(c->expert_norm == (arch == HET_ARCH_QWEN3MOE), "%s: expert_norm %d", what, c->expert_norm);
    /* the expert tensors are 3-D, one expert per ne2 slice */
    int n3 = 0;
    for (int i = 0; i < het_model_n_weights(m); i++) {
        const struct het_tensor *t = het_model_weight(m, i);
        if (strstr(t->name, "_exps.")) {
            n3++;
            CHECK(t->ne[2] == 8 && t->nb[2] == t->nb[1] * (size_t)t->ne[1], "%s: %s is not (.., .., 8) dense",
                  what, t->name);
        }
    }
    CHECK(n3 == 3 * c->n_layer, "%s: %d expert tensors", what, n3);
    het_model_free(m);
}

static void check_fails(const char *path, const char *what, const char *needle)
{
    het_error err = { 0 };
    het_model *m = het_model_load(path, &err);
    CHECK(m == NULL && strstr(err.msg, needle), "%s: want an error naming '%s', got '%s'", what, needle,
          m ? "(loaded)" : err.msg);
    het_model_free(m);
}

int main(void)
{
    snprintf(vocab, sizeof vocab, "%s", het_test_shared("models/synthetic/vocab-qwen3.gguf"));
    if (!het_test_file_exists(vocab)) het_test_skip("%s not found", vocab);

    const char *q3 = tmp("q3"), *q2 = tmp("q2"), *a = tmp("a"), *b = tmp("b");
    if (write_preset("qwen3moe-tiny", q3)) {
        check_config(q3, "qwen3moe", HET_ARCH_QWEN3MOE, 64, 0);
        /* no expert width: n_ff / k = 128 / 2 */
        if (rewrite(q3, a, "qwen3moe.expert_feed_forward_length", "qwen3moe.feed_forward_length", 128))
            check_config(a, "qwen3moe without expert width", HET_ARCH_QWEN3MOE, 64, 0);
        if (rewrite(q3, b, NULL, "qwen3moe.expert_used_count", 9))
            check_fails(b, "k > experts", "expert_used_count");
        if (rewrite(q3, b, "qwen3moe.expert_count", NULL, 0)) check_fails(b, "no expert count", "expert_count");
        /* a wrong expert width is caught at the tensor */
        if (rewrite(q3, b, NULL, "qwen3moe.expert_feed_forward_length", 32))
            check_fails(b, "wrong expert width", "ffn_gate_exps");
    }
    if (write_preset("qwen2moe-tiny", q2)) {
        check_config(q2, "qwen2moe", HET_ARCH_QWEN2MOE, 64, 128);
        /* no shared width: n_ff (= 128 here) */
        if (rewrite(q2, a, "qwen2moe.expert_shared_feed_forward_length", "qwen2moe.feed_forward_length", 128))
            check_config(a, "qwen2moe without shared width", HET_ARCH_QWEN2MOE, 64, 128);
        if (rewrite(q2, b, "qwen2moe.expert_shared_feed_forward_length", NULL, 0))
            check_fails(b, "qwen2moe shared width from n_ff 192", "ffn_gate_shexp");
    }
    remove(q3); remove(q2); remove(a); remove(b);
    return het_test_finish();
}
