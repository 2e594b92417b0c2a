/*
 * test_mkmodel.c — the random-model writer, checked through the GGUF reader.
 *
 * Small models of each architecture are written and read back: tensor
 * names, GGUF shapes, storage types (including the embedding/output mix and
 * the block-size fallbacks), keys, weight statistics, determinism across
 * thread counts, agreement between precisions for one seed, tokenizer key
 * copying and parameter errors.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "het/gguf.h"
#include "het/mkmodel.h"
#include "testutil.h"

static const char *tmp_path(const char *tag)
{
    static char buf[4][256];
    static int k;
    const char *dir = getenv("TMPDIR");
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/het_test_mkmodel_%d_%s.gguf", dir && *dir ? dir : "/tmp", (int)getpid(), tag);
    return buf[k];
}

static void tiny(struct het_mkmodel_params *p, const char *arch, const char *tag)
{
    het_mkmodel_params_init(p);
    CHECK(het_mkmodel_params_preset(p, "tiny"), "preset tiny");
    p->arch    = arch;
    p->path    = tmp_path(tag);
    p->n_vocab = 300;
    p->tied    = strcmp(arch, "llama") != 0;
}

static het_gguf *write_and_open(const struct het_mkmodel_params *p, struct het_mkmodel_report *r)
{
    het_error err = { 0 };
    enum het_status st = het_mkmodel_write_report(p, r, &err);
    CHECK(st == HET_OK, "write %s: %s", p->path, err.msg);
    if (st != HET_OK) return NULL;
    het_gguf *g = het_gguf_open(p->path, &err);
    CHECK(g != NULL, "open %s: %s", p->path, err.msg);
    return g;
}

static const struct het_gguf_tensor_info *tensor(const het_gguf *g, const char *name)
{
    return het_gguf_tensor(g, het_gguf_find_tensor(g, name));
}

static bool has_shape(const het_gguf *g, const char *name, enum het_type type, int64_t ne0, int64_t ne1)
{
    const struct het_gguf_tensor_info *t = tensor(g, name);
    bool ok = t && t->type == type && t->ne[0] == ne0 && t->ne[1] == ne1 && t->n_dims == (ne1 > 1 ? 2 : 1);
    if (!ok)
        fprintf(stderr, "  %s: want %s [%lld, %lld], have %s [%lld, %lld]\n", name, het_type_name(type),
                (long long)ne0, (long long)ne1, t ? het_type_name(t->type) : "-", t ? (long long)t->ne[0] : 0,
                t ? (long long)t->ne[1] : 0);
    return ok;
}

static int64_t key_int(const het_gguf *g, const char *key)
{
    int64_t v = -1;
    het_gguf_get_int(g, key, &v);
    return v;
}

/* mean and standard deviation of an f32 tensor */
static void stats(const struct het_gguf_tensor_info *t, double *mean, double *sd)
{
    const float *x = t->data;
    int64_t n = t->ne[0] * t->ne[1];
    double s = 0, s2 = 0;
    for (int64_t i = 0; i < n; i++) {
        s += x[i];
        s2 += (double)x[i] * x[i];
    }
    *mean = s / (double)n;
    *sd = sqrt(s2 / (double)n - *mean * *mean);
}

static void test_qwen3_f32(void)
{
    struct het_mkmodel_params p;
    struct het_mkmodel_report r;
    tiny(&p, "qwen3", "qwen3");
    het_gguf *g = write_and_open(&p, &r);
    if (!g) return;
    CHECK(r.n_tensors == 24 && het_gguf_n_tensors(g) == 24, "tensors %lld", (long long)r.n_tensors);
    CHECK(r.n_vocab == 300 && r.n_fallback == 0, "report vocab %lld fallback %d", (long long)r.n_vocab, r.n_fallback);
    CHECK(has_shape(g, "token_embd.weight", HET_TYPE_F32, 64, 300), "token_embd");
    CHECK(has_shape(g, "blk.1.attn_q.weight", HET_TYPE_F32, 64, 64), "attn_q");
    CHECK(has_shape(g, "blk.1.attn_k.weight", HET_TYPE_F32, 64, 32), "attn_k");
    CHECK(has_shape(g, "blk.1.attn_v.weight", HET_TYPE_F32, 64, 32), "attn_v");
    CHECK(has_shape(g, "blk.1.attn_output.weight", HET_TYPE_F32, 64, 64), "attn_output");
    CHECK(has_shape(g, "blk.1.attn_q_norm.weight", HET_TYPE_F32, 16, 1), "q_norm");
    CHECK(has_shape(g, "blk.1.attn_k_norm.weight", HET_TYPE_F32, 16, 1), "k_norm");
    CHECK(has_shape(g, "blk.0.ffn_gate.weight", HET_TYPE_F32, 64, 192), "ffn_gate");
    CHECK(has_shape(g, "blk.0.ffn_up.weight", HET_TYPE_F32, 64, 192), "ffn_up");
    CHECK(has_shape(g, "blk.0.ffn_down.weight", HET_TYPE_F32, 192, 64), "ffn_down");
    CHECK(has_shape(g, "output_norm.weight", HET_TYPE_F32, 64, 1), "output_norm");
    CHECK(tensor(g, "output.weight") == NULL && tensor(g, "blk.0.attn_q.bias") == NULL, "tied, no biases");
    const char *arch = het_gguf_get_str(g, "general.architecture");
    CHECK(arch && !strcmp(arch, "qwen3"), "arch");
    CHECK(key_int(g, "qwen3.block_count") == 2 && key_int(g, "qwen3.embedding_length") == 64 &&
          key_int(g, "qwen3.feed_forward_length") == 192 && key_int(g, "qwen3.attention.head_count") == 4 &&
          key_int(g, "qwen3.attention.head_count_kv") == 2 && key_int(g, "qwen3.attention.key_length") == 16 &&
          key_int(g, "qwen3.attention.value_length") == 16 && key_int(g, "qwen3.rope.dimension_count") == 16 &&
          key_int(g, "qwen3.context_length") == 4096 && key_int(g, "general.file_type") == 0, "hparams");
    double base = 0, eps = 0;
    CHECK(het_gguf_get_float(g, "qwen3.rope.freq_base", &base) && base == 1e6, "rope base %g", base);
    CHECK(het_gguf_get_float(g, "qwen3.attention.layer_norm_rms_epsilon", &eps) && fabs(eps - 1e-6) < 1e-12, "eps");
    const struct het_gguf_tensor_info *n = tensor(g, "blk.0.attn_q_norm.weight");
    CHECK(n && ((const float *)n->data)[0] == 1.0f && ((const float *)n->data)[15] == 1.0f, "norms are 1");
    double mean, sd;
    stats(tensor(g, "token_embd.weight"), &mean, &sd);  /* 19200 values */
    CHECK(fabs(mean) < 0.005 && fabs(sd - 0.125) < 0.005, "token_embd mean %g sd %g (want 0, 1/8)", mean, sd);
    stats(tensor(g, "blk.0.ffn_down.weight"), &mean, &sd);
    CHECK(fabs(sd - 1.0 / sqrt(192.0)) < 0.004, "ffn_down sd %g", sd);
    het_gguf_close(g);
    remove(p.path);
}

static void test_qwen2_and_llama(void)
{
    struct het_mkmodel_params p;
    tiny(&p, "qwen2", "qwen2");
    het_gguf *g = write_and_open(&p, NULL);
    if (g) {
        CHECK(has_shape(g, "blk.0.attn_q.bias", HET_TYPE_F32, 64, 1) && has_shape(g, "blk.0.attn_k.bias", HET_TYPE_F32, 32, 1) &&
              has_shape(g, "blk.1.attn_v.bias", HET_TYPE_F32, 32, 1), "qwen2 biases");
        CHECK(tensor(g, "blk.0.attn_q_norm.weight") == NULL && het_gguf_n_tensors(g) == 2 + 2 * 12, "qwen2 tensors");
        CHECK(key_int(g, "qwen2.block_count") == 2, "qwen2 keys");
        het_gguf_close(g);
    }
    remove(p.path);
    tiny(&p, "llama", "llama");
    p.head_dim = 0;  /* derived: 64 / 4 */
    g = write_and_open(&p, NULL);
    if (g) {
        CHECK(has_shape(g, "output.weight", HET_TYPE_F32, 64, 300), "untied output");
        CHECK(tensor(g, "blk.0.attn_q.bias") == NULL && tensor(g, "blk.0.attn_k_norm.weight") == NULL, "llama extras");
        CHECK(het_gguf_n_tensors(g) == 3 + 2 * 9 && key_int(g, "llama.attention.key_length") == 16, "llama tensors");
        het_gguf_close(g);
    }
    remove(p.path);
}

static bool files_equal(const char *a, const char *b)
{
    FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
    bool eq = fa && fb;
    while (eq) {
        int ca = fgetc(fa), cb = fgetc(fb);
        if (ca != cb) eq = false;
        if (ca == EOF) break;
    }
    if (fa) fclose(fa);
    if (fb) fclose(fb);
    return eq;
}

static void test_determinism(void)
{
    struct het_mkmodel_params p;
    het_error err = { 0 };
    tiny(&p, "qwen3", "det1");
    p.type = HET_TYPE_Q4_0;
    p.n_threads = 1;
    CHECK(het_mkmodel_write(&p, &err) == HET_OK, "%s", err.msg);
    char a[256];
    snprintf(a, sizeof a, "%s", p.path);
    p.path = tmp_path("det2");
    p.n_threads = 2;
    CHECK(het_mkmodel_write(&p, &err) == HET_OK, "%s", err.msg);
    CHECK(files_equal(a, p.path), "1 and 2 threads differ");
    p.seed = 43;
    CHECK(het_mkmodel_write(&p, &err) == HET_OK, "%s", err.msg);
    CHECK(!files_equal(a, p.path), "seed 43 equals seed 42");
    remove(a);
    remove(p.path);
}

/* A quantised file holds the same model as the f32 file of the same seed. */
static void test_precisions_agree(enum het_type type, double max_nmse)
{
    struct het_mkmodel_params p;
    tiny(&p, "llama", "ref");
    p.n_embd = 256;
    p.n_ff   = 512;
    het_gguf *ref = write_and_open(&p, NULL);
    char ref_path[256];
    snprintf(ref_path, sizeof ref_path, "%s", p.path);
    p.path = tmp_path("q");
    p.type = type;
    het_gguf *q = write_and_open(&p, NULL);
    if (ref && q) {
        const char *names[] = { "blk.0.attn_q.weight", "blk.1.ffn_down.weight", "token_embd.weight" };
        for (int k = 0; k < 3; k++) {
            const struct het_gguf_tensor_info *a = tensor(ref, names[k]), *b = tensor(q, names[k]);
            int64_t n = a->ne[0] * a->ne[1];
            float *y = malloc((size_t)n * sizeof *y);
            enum het_status st = HET_OK;
            for (int64_t r = 0; r < a->ne[1] && st == HET_OK; r++)
                st = het_dequantize_row(b->type, (const char *)b->data + r * het_type_row_size(b->type, b->ne[0]),
                                        y + r * a->ne[0], a->ne[0]);
            double e = het_test_nmse(y, a->data, (size_t)n);
            CHECK(st == HET_OK && b->type == type && e < max_nmse && e > 0,
                  "%s %s: nmse %g (max %g) status %d", het_type_name(type), names[k], e, max_nmse, st);
            free(y);
        }
    }
    het_gguf_close(ref);
    het_gguf_close(q);
    remove(ref_path);
    remove(p.path);
}

static void test_type_mix(void)
{
    struct het_mkmodel_params p;
    struct het_mkmodel_report r;
    tiny(&p, "llama", "mix");
    p.n_embd = 256;
    p.head_dim = 64;
    p.n_ff = 160;          /* ffn_down rows: 160 = 5 * 32, not a multiple of 256 */
    p.type = HET_TYPE_Q4_K;
    het_gguf *g = write_and_open(&p, &r);
    if (g) {
        CHECK(has_shape(g, "blk.0.ffn_gate.weight", HET_TYPE_Q4_K, 256, 160), "ffn_gate q4_k");
        CHECK(has_shape(g, "blk.1.ffn_down.weight", HET_TYPE_Q5_0, 160, 256), "ffn_down falls back to q5_0");
        CHECK(has_shape(g, "token_embd.weight", HET_TYPE_Q4_K, 256, 300), "untied token_embd keeps q4_k");
        CHECK(has_shape(g, "output.weight", HET_TYPE_Q6_K, 256, 300), "output q6_k");
        CHECK(r.n_fallback == 2 && strstr(r.notes, "blk.*.ffn_down.weight: q4_K -> q5_0"), "notes '%s' (%d)",
              r.notes, r.n_fallback);
        CHECK(key_int(g, "general.file_type") == 14, "file_type");
        het_gguf_close(g);
    }
    p.n_ff = 100;          /* not even a multiple of 32 */
    p.type = HET_TYPE_Q4_0;
    p.tied = true;
    g = write_and_open(&p, &r);
    if (g) {
        CHECK(has_shape(g, "blk.0.ffn_down.weight", HET_TYPE_F16, 100, 256), "ffn_down falls back to f16");
        CHECK(has_shape(g, "token_embd.weight", HET_TYPE_Q6_K, 256, 300), "tied token_embd q6_k");
        het_gguf_close(g);
    }
    p.embd_type = HET_TYPE_Q8_0;
    g = write_and_open(&p, &r);
    if (g) {
        CHECK(has_shape(g, "token_embd.weight", HET_TYPE_Q8_0, 256, 300), "explicit embd type");
        het_gguf_close(g);
    }
    remove(p.path);
}

static void test_vocab_copy(void)
{
    const char *vocab = het_test_shared("models/vocab/ggml-vocab-llama-spm.gguf");
    if (!het_test_file_exists(vocab)) {
        printf("note: %s missing, vocab copy not tested\n", vocab);
        return;
    }
    char vpath[4096];
    snprintf(vpath, sizeof vpath, "%s", vocab);
    struct het_mkmodel_params p;
    struct het_mkmodel_report r;
    het_mkmodel_params_init(&p);
    CHECK(het_mkmodel_params_preset(&p, "llama-tiny"), "preset llama-tiny");
    p.path = tmp_path("vocab");
    p.vocab_path = vpath;
    p.n_vocab = 5;  /* ignored: the vocab file decides */
    het_gguf *g = write_and_open(&p, &r);
    het_error err = { 0 };
    het_gguf *v = het_gguf_open(vpath, &err);
    if (g && v) {
        CHECK(r.n_vocab == 32000 && has_shape(g, "token_embd.weight", HET_TYPE_F32, 64, 32000), "n_vocab from vocab");
        CHECK(het_gguf_get_arr_n(g, "tokenizer.ggml.tokens") == 32000, "tokens copied");
        size_t la, lb;
        const char *a = het_gguf_get_arr_str(g, "tokenizer.ggml.tokens", 31999, &la);
        const char *b = het_gguf_get_arr_str(v, "tokenizer.ggml.tokens", 31999, &lb);
        CHECK(a && b && la == lb && !memcmp(a, b, la), "last token");
        const char *m = het_gguf_get_str(g, "tokenizer.ggml.model");
        CHECK(m && !strcmp(m, "llama"), "tokenizer model");
        CHECK(key_int(g, "tokenizer.ggml.bos_token_id") == 1, "bos");
        CHECK(het_gguf_find_key(g, "llama.embedding_length") >= 0 && key_int(g, "llama.embedding_length") == 64,
              "model keys win over the vocab file's");
    }
    het_gguf_close(v);
    het_gguf_close(g);
    remove(p.path);
}

static void progress(void *user, int64_t done, int64_t total, const char *name)
{
    int64_t *calls = user;
    if (done == calls[0] + 1 && total == 24 && name) calls[0]++;
}

static void test_errors_and_presets(void)
{
    struct het_mkmodel_params p;
    het_error err = { 0 };
    tiny(&p, "gpt2", "err");
    CHECK(het_mkmodel_write(&p, &err) == HET_ERR_INVALID && strstr(err.msg, "gpt2"), "bad arch: %s", err.msg);
    tiny(&p, "qwen3", "err");
    p.type = HET_TYPE_Q2_K;
    CHECK(het_mkmodel_write(&p, &err) == HET_ERR_UNSUPPORTED, "q2_k: %s", err.msg);
    tiny(&p, "qwen3", "err");
    p.n_head = 5;
    CHECK(het_mkmodel_write(&p, &err) == HET_ERR_INVALID, "n_head 5 / kv 2: %s", err.msg);
    tiny(&p, "qwen3", "err");
    p.n_vocab = 0;
    CHECK(het_mkmodel_write(&p, &err) == HET_ERR_INVALID, "no vocab: %s", err.msg);
    tiny(&p, "qwen3", "err");
    p.vocab_path = "/nonexistent/vocab.gguf";
    CHECK(het_mkmodel_write(&p, &err) == HET_ERR_IO, "missing vocab: %s", err.msg);
    CHECK(!het_test_file_exists(p.path), "no file left behind");
    tiny(&p, "qwen3", "progress");
    int64_t calls = 0;
    p.progress = progress;
    p.progress_user = &calls;
    CHECK(het_mkmodel_write(&p, &err) == HET_OK && calls == 24, "progress calls %lld", (long long)calls);
    remove(p.path);

    CHECK(het_mkmodel_preset_find("tiny") && het_mkmodel_preset_find("qwen3-0.6b") && !het_mkmodel_preset_find("x"),
          "preset lookup");
    CHECK(het_mkmodel_n_presets() >= 2 && het_mkmodel_preset(het_mkmodel_n_presets()) == NULL, "preset list");
    het_mkmodel_params_init(&p);
    CHECK(het_mkmodel_params_preset(&p, "qwen3-0.6b") && p.n_layer == 28 && p.n_embd == 1024 && p.n_head == 16 &&
          p.n_head_kv == 8 && p.head_dim == 128 && p.n_ff == 3072 && p.tied && !strcmp(p.arch, "qwen3"),
          "qwen3-0.6b preset");
    CHECK(!het_mkmodel_params_preset(&p, "nope") && p.n_layer == 28, "unknown preset leaves p alone");
}

int main(void)
{
    test_qwen3_f32();
    test_qwen2_and_llama();
    test_determinism();
    test_precisions_agree(HET_TYPE_Q8_0, 1e-4);
    test_precisions_agree(HET_TYPE_Q4_K, 1.5e-2);
    test_precisions_agree(HET_TYPE_F16, 1e-6);
    test_type_mix();
    test_vocab_copy();
    test_errors_and_presets();
    return het_test_finish();
}
