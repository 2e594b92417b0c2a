/*
 * test_gguf.c — GGUF reader and writer: fixtures, round trips, malformed
 * files and a corruption sweep.
 *
 * The fixtures check facts published in shared/models/README.md. Malformed
 * files are built byte by byte here (the writer refuses to produce them) so
 * each validation rule is exercised on its own. The sweep truncates a small
 * valid file at every length and flips bytes in every header field; each
 * variant is parsed from an exactly sized heap copy, so under ASan any read
 * past the end is caught. A failed open must say where ("offset").
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "het/gguf.h"
#include "testutil.h"

/* ---- helpers --------------------------------------------------------------- */

static char *tmp_path(const char *tag)
{
    static char buf[256];
    const char *dir = getenv("TMPDIR");
    snprintf(buf, sizeof buf, "%s/het_test_gguf_%d_%s.gguf", dir && *dir ? dir : "/tmp", (int)getpid(), tag);
    return buf;
}

static unsigned char *read_all(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *p = malloc(n > 0 ? (size_t)n : 1);
    if (p && fread(p, 1, (size_t)n, f) != (size_t)n) {
        free(p);
        p = NULL;
    }
    fclose(f);
    *size = (size_t)n;
    return p;
}

/* Open from an exactly sized heap copy of the first n bytes. */
static het_gguf *open_copy(const unsigned char *src, size_t n, unsigned char **copy, het_error *err)
{
    *copy = malloc(n ? n : 1);
    memcpy(*copy, src, n);
    return het_gguf_open_memory(*copy, n, err);
}

/* Exercise every accessor of an opened file; returns a checksum so the reads
 * cannot be optimised away. */
static uint64_t touch_all(const het_gguf *g)
{
    uint64_t sum = het_gguf_version(g) + het_gguf_alignment(g) + het_gguf_data_offset(g);
    char buf[256];
    for (int64_t i = 0; i < het_gguf_n_kv(g); i++) {
        const char *key = het_gguf_kv_key(g, i);
        het_gguf_kv_format(g, i, buf, sizeof buf);
        sum += strlen(buf) + (uint64_t)het_gguf_kv_type(g, i);
        int64_t iv;
        double dv;
        bool bv;
        if (het_gguf_get_int(g, key, &iv)) sum += (uint64_t)iv;
        if (het_gguf_get_float(g, key, &dv)) sum += (uint64_t)(dv == dv);
        if (het_gguf_get_bool(g, key, &bv)) sum += bv;
        const char *s = het_gguf_get_str(g, key);
        if (s) sum += strlen(s);
        int64_t n = het_gguf_get_arr_n(g, key);
        if (het_gguf_get_arr_type(g, key) == HET_GGUF_TYPE_STRING) {
            for (int64_t k = 0; k < n; k++) {
                size_t len;
                const char *e = het_gguf_get_arr_str(g, key, k, &len);
                sum += len + (e ? (unsigned char)e[len] : 1);  /* e[len] is the NUL */
            }
        } else if (n > 0) {
            const unsigned char *d = het_gguf_get_arr_data(g, key);
            sum += d[0];
        }
    }
    for (int64_t i = 0; i < het_gguf_n_tensors(g); i++) {
        const struct het_gguf_tensor_info *t = het_gguf_tensor(g, i);
        const unsigned char *d = t->data;
        sum += d[0] + d[t->size - 1] + (uint64_t)het_gguf_find_tensor(g, t->name);
    }
    return sum;
}

/* ---- fixtures ------------------------------------------------------------- */

static het_gguf *open_fixture(const char *rel)
{
    const char *path = het_test_shared(rel);
    if (!het_test_file_exists(path)) return NULL;
    het_error err = { 0 };
    het_gguf *g = het_gguf_open(path, &err);
    CHECK(g != NULL, "%s: %s", rel, err.msg);
    return g;
}

static void test_stories(void)
{
    het_gguf *g = open_fixture("models/stories260K.gguf");
    if (!g) return;
    int64_t v = 0;
    double f = 0;
    CHECK(het_gguf_version(g) == 3, "version %u", het_gguf_version(g));
    CHECK(het_gguf_n_tensors(g) == 48, "n_tensors %lld", (long long)het_gguf_n_tensors(g));
    CHECK(het_gguf_n_kv(g) == 19, "n_kv %lld", (long long)het_gguf_n_kv(g));
    CHECK(het_gguf_alignment(g) == 32, "alignment");
    CHECK(het_gguf_data_offset(g) == 14176, "data offset %llu", (unsigned long long)het_gguf_data_offset(g));
    CHECK(het_gguf_get_int(g, "llama.embedding_length", &v) && v == 64, "n_embd %lld", (long long)v);
    CHECK(het_gguf_get_int(g, "llama.block_count", &v) && v == 5, "n_layer");
    CHECK(het_gguf_get_int(g, "llama.feed_forward_length", &v) && v == 172, "n_ff");
    CHECK(het_gguf_get_int(g, "llama.attention.head_count", &v) && v == 8, "n_head");
    CHECK(het_gguf_get_int(g, "llama.attention.head_count_kv", &v) && v == 4, "n_head_kv");
    CHECK(het_gguf_get_float(g, "llama.attention.layer_norm_rms_epsilon", &f) && fabs(f - 1e-5) < 1e-9, "eps");
    CHECK(!het_gguf_get_float(g, "llama.rope.freq_base", &f), "freq_base must be absent");
    CHECK(het_gguf_get_int(g, "tokenizer.ggml.seperator_token_id", &v) && v == 0xFFFFFFFFll, "sep id");
    CHECK(het_gguf_get_str(g, "general.architecture") && !strcmp(het_gguf_get_str(g, "general.architecture"), "llama"), "arch");
    CHECK(het_gguf_get_str(g, "llama.block_count") == NULL, "get_str on an int key");
    CHECK(!het_gguf_get_bool(g, "llama.block_count", &(bool){ 0 }), "get_bool on an int key");
    CHECK(het_gguf_get_arr_n(g, "tokenizer.ggml.tokens") == 512, "tokens");
    CHECK(het_gguf_get_arr_type(g, "tokenizer.ggml.scores") == HET_GGUF_TYPE_FLOAT32, "scores type");
    CHECK(het_gguf_get_arr_str(g, "tokenizer.ggml.tokens", 512, NULL) == NULL, "token out of range");
    CHECK(het_gguf_get_arr_str(g, "tokenizer.ggml.tokens", -1, NULL) == NULL, "token -1");
    const int32_t *types = het_gguf_get_arr_data(g, "tokenizer.ggml.token_type");
    CHECK(types && types[0] == 2 && types[1] == 3, "token types %d %d", types ? types[0] : -1, types ? types[1] : -1);
    char buf[64];
    het_gguf_kv_format(g, het_gguf_find_key(g, "tokenizer.ggml.tokens"), buf, sizeof buf);
    CHECK(!strcmp(buf, "[512 strings]"), "format '%s'", buf);
    het_gguf_kv_format(g, het_gguf_find_key(g, "general.architecture"), buf, sizeof buf);
    CHECK(!strcmp(buf, "\"llama\""), "format '%s'", buf);
    het_gguf_kv_format(g, het_gguf_find_key(g, "general.architecture"), buf, 4);
    CHECK(!strcmp(buf, "..."), "format truncated '%s'", buf);
    het_gguf_kv_format(g, het_gguf_find_key(g, "general.architecture"), buf, 8);
    CHECK(!strcmp(buf, "\"llama\""), "format exact fit '%s'", buf);
    het_gguf_kv_format(g, het_gguf_find_key(g, "general.architecture"), buf, 7);
    CHECK(!strcmp(buf, "\"ll..."), "format one short '%s'", buf);

    int64_t i = het_gguf_find_tensor(g, "blk.0.ffn_down.weight");
    const struct het_gguf_tensor_info *t = het_gguf_tensor(g, i);
    CHECK(t && t->type == HET_TYPE_F32 && t->n_dims == 2 && t->ne[0] == 172 && t->ne[1] == 64 && t->ne[2] == 1,
          "ffn_down shape");
    CHECK(t && t->size == 172 * 64 * 4, "ffn_down size");
    size_t fsize;
    const unsigned char *base = het_gguf_file_data(g, &fsize);
    CHECK(fsize == 1185376, "file size %zu", fsize);
    CHECK(t && (const unsigned char *)t->data == base + 14176 + t->offset, "data pointer");
    CHECK(het_gguf_find_tensor(g, "nope") == -1 && het_gguf_find_key(g, "nope") == -1, "absent names");
    CHECK(het_gguf_tensor(g, 48) == NULL && het_gguf_kv_key(g, 19) == NULL, "index out of range");
    /* the last tensor ends at EOF */
    uint64_t end = 0;
    for (int64_t k = 0; k < het_gguf_n_tensors(g); k++) {
        const struct het_gguf_tensor_info *x = het_gguf_tensor(g, k);
        if (x->offset + x->size > end) end = x->offset + x->size;
    }
    CHECK(14176 + end == fsize, "data end %llu", (unsigned long long)end);
    het_gguf_close(g);
}

static void test_tiny_random_and_vocab(void)
{
    het_gguf *g = open_fixture("models/llama-2-tiny-random.gguf");
    if (g) {
        int64_t i = het_gguf_find_tensor(g, "token_embd.weight"), ft = 0;
        const struct het_gguf_tensor_info *t = het_gguf_tensor(g, i);
        CHECK(het_gguf_n_tensors(g) == 12 && het_gguf_data_offset(g) == 724416, "tiny-random layout");
        CHECK(t && t->type == HET_TYPE_F16 && t->ne[0] == 8 && t->ne[1] == 32000 && t->size == 8 * 32000 * 2,
              "token_embd");
        CHECK(het_gguf_get_int(g, "general.file_type", &ft) && ft == 1, "file_type");
        het_gguf_close(g);
    }
    g = open_fixture("models/vocab/ggml-vocab-llama-spm.gguf");
    if (g) {
        size_t fsize;
        het_gguf_file_data(g, &fsize);
        CHECK(het_gguf_n_tensors(g) == 0 && het_gguf_data_offset(g) == 723872 && fsize == 723869,
              "vocab-only data offset past EOF");
        size_t len = 0;
        const char *s = het_gguf_get_arr_str(g, "tokenizer.ggml.tokens", 1, &len);
        CHECK(s && !strcmp(s, "<s>") && len == 3, "token 1 '%s'", s ? s : "(null)");
        het_gguf_close(g);
    }
    g = open_fixture("models/synthetic/vocab-qwen3.gguf");
    if (g) {
        char buf[64];
        CHECK(het_gguf_get_arr_n(g, "tokenizer.ggml.tokens") == 151936, "qwen3 vocab");
        het_gguf_kv_format(g, het_gguf_find_key(g, "tokenizer.ggml.tokens"), buf, sizeof buf);
        CHECK(!strcmp(buf, "[151936 strings]"), "format '%s'", buf);
        het_gguf_close(g);
    }
}

static void test_all_fixtures(void)
{
    static const char *const files[] = {
        "models/stories260K.gguf", "models/llama-2-tiny-random.gguf",
        "models/synthetic/llama-tiny-f32.gguf", "models/synthetic/llama-tiny-q4_0.gguf",
        "models/synthetic/qwen3-tiny-q4_k_m.gguf", "models/synthetic/qwen3-tiny-q8_0.gguf",
        "models/synthetic/vocab-qwen3.gguf",
        "models/vocab/ggml-vocab-bert-bge.gguf", "models/vocab/ggml-vocab-deepseek-coder.gguf",
        "models/vocab/ggml-vocab-deepseek-llm.gguf", "models/vocab/ggml-vocab-falcon.gguf",
        "models/vocab/ggml-vocab-gpt-2.gguf", "models/vocab/ggml-vocab-llama-spm.gguf",
        "models/vocab/ggml-vocab-mpt.gguf", "models/vocab/ggml-vocab-phi-3.gguf",
        "models/vocab/ggml-vocab-refact.gguf", "models/vocab/ggml-vocab-starcoder.gguf",
    };
    int found = 0;
    for (size_t k = 0; k < sizeof files / sizeof files[0]; k++) {
        het_gguf *g = open_fixture(files[k]);
        if (!g) continue;
        found++;
        touch_all(g);
        het_gguf_close(g);
    }
    if (!found) printf("note: no fixtures under %s, fixture checks skipped\n", het_test_shared("models"));
    het_gguf *q = open_fixture("models/synthetic/qwen3-tiny-q4_k_m.gguf");
    if (q) {
        const struct het_gguf_tensor_info *t = het_gguf_tensor(q, het_gguf_find_tensor(q, "blk.0.attn_q_norm.weight"));
        CHECK(t && t->type == HET_TYPE_F32 && t->ne[0] == 16, "qwen3 q_norm");
        het_gguf_close(q);
    }
}

/* ---- writer round trip ------------------------------------------------------ */

static const int64_t ne_a[2] = { 64, 3 }, ne_b[3] = { 32, 2, 5 }, ne_c[1] = { 7 };

static het_gguf_writer *build_sample(unsigned char *blob_a, unsigned char *blob_b, float *blob_c)
{
    het_gguf_writer *w = het_gguf_writer_init();
    static const char *const strs[] = { "alpha", "", "gamma\xe2\x82\xac" };
    static const int16_t i16[] = { -3, 4, 5 };
    static const double f64[] = { 1.5, -2.25 };
    CHECK(het_gguf_writer_set_str(w, "general.architecture", "llama") == HET_OK, "set_str");
    CHECK(het_gguf_writer_set_u32(w, "a.u32", 7) == HET_OK, "set_u32");
    CHECK(het_gguf_writer_set_u32(w, "a.u32", 4000000000u) == HET_OK, "replace");
    CHECK(het_gguf_writer_set_i32(w, "a.i32", -12) == HET_OK, "set_i32");
    CHECK(het_gguf_writer_set_u64(w, "a.u64", 0xFFFFFFFFFFFFFFFFull) == HET_OK, "set_u64");
    CHECK(het_gguf_writer_set_f32(w, "a.f32", 0.125f) == HET_OK, "set_f32");
    CHECK(het_gguf_writer_set_bool(w, "a.bool", true) == HET_OK, "set_bool");
    CHECK(het_gguf_writer_set_arr_str(w, "a.strs", strs, 3) == HET_OK, "set_arr_str");
    CHECK(het_gguf_writer_set_arr(w, "a.i16", HET_GGUF_TYPE_INT16, i16, 3) == HET_OK, "set_arr");
    CHECK(het_gguf_writer_set_arr(w, "a.f64", HET_GGUF_TYPE_FLOAT64, f64, 2) == HET_OK, "set_arr f64");
    CHECK(het_gguf_writer_set_arr(w, "a.empty", HET_GGUF_TYPE_UINT8, NULL, 0) == HET_OK, "empty arr");
    CHECK(het_gguf_writer_set_arr(w, "a.bad", HET_GGUF_TYPE_STRING, i16, 3) == HET_ERR_INVALID, "arr of str");
    for (int i = 0; i < 34 * 3 * 2; i++) blob_a[i] = (unsigned char)(het_test_rand_u64() >> 56);
    for (int i = 0; i < 32 * 10 * 2; i++) blob_b[i] = (unsigned char)i;
    for (int i = 0; i < 7; i++) blob_c[i] = (float)i - 3.5f;
    CHECK(het_gguf_writer_add_tensor(w, "a", HET_TYPE_Q8_0, 2, ne_a, blob_a) == HET_OK, "add a");
    CHECK(het_gguf_writer_add_tensor(w, "b", HET_TYPE_F16, 3, ne_b, NULL) == HET_OK, "add b");
    CHECK(het_gguf_writer_set_tensor_data(w, "b", blob_b) == HET_OK, "set b");
    CHECK(het_gguf_writer_add_tensor(w, "c", HET_TYPE_F32, 1, ne_c, blob_c) == HET_OK, "add c");
    CHECK(het_gguf_writer_add_tensor(w, "c", HET_TYPE_F32, 1, ne_c, blob_c) == HET_ERR_INVALID, "duplicate");
    CHECK(het_gguf_writer_add_tensor(w, "d", HET_TYPE_Q4_0, 1, ne_c, NULL) == HET_ERR_INVALID, "ne0 not a multiple of 32");
    CHECK(het_gguf_writer_add_tensor(w, "e", HET_TYPE_F32, 5, ne_b, NULL) == HET_ERR_INVALID, "n_dims 5");
    CHECK(het_gguf_writer_add_tensor(w, "f", (enum het_type)4, 1, ne_c, NULL) == HET_ERR_INVALID, "type 4");
    return w;
}

static void check_sample(const het_gguf *g, const unsigned char *blob_a, const unsigned char *blob_b,
                         const float *blob_c)
{
    int64_t v = 0;
    double f = 0;
    bool b = false;
    size_t len = 0;
    CHECK(het_gguf_n_kv(g) == 10 && het_gguf_n_tensors(g) == 3, "counts %lld %lld",
          (long long)het_gguf_n_kv(g), (long long)het_gguf_n_tensors(g));
    CHECK(het_gguf_get_int(g, "a.u32", &v) && v == 4000000000ll, "u32 replaced");
    CHECK(het_gguf_kv_type(g, het_gguf_find_key(g, "a.u32")) == HET_GGUF_TYPE_UINT32, "u32 type");
    CHECK(het_gguf_get_int(g, "a.i32", &v) && v == -12, "i32");
    CHECK(!het_gguf_get_int(g, "a.u64", &v), "u64 beyond int64 must not convert");
    CHECK(het_gguf_get_float(g, "a.f32", &f) && f == 0.125, "f32");
    CHECK(het_gguf_get_float(g, "a.i32", &f) && f == -12.0, "int as float");
    CHECK(het_gguf_get_bool(g, "a.bool", &b) && b, "bool");
    CHECK(het_gguf_get_arr_n(g, "a.strs") == 3, "strs n");
    const char *s = het_gguf_get_arr_str(g, "a.strs", 2, &len);
    CHECK(s && len == 8 && !strcmp(s, "gamma\xe2\x82\xac"), "strs[2]");
    s = het_gguf_get_arr_str(g, "a.strs", 1, &len);
    CHECK(s && len == 0 && s[0] == 0, "strs[1] empty");
    const int16_t *i16 = het_gguf_get_arr_data(g, "a.i16");
    CHECK(i16 && ((uintptr_t)i16 % 2) == 0 && i16[0] == -3 && i16[2] == 5, "i16");
    const double *f64 = het_gguf_get_arr_data(g, "a.f64");
    CHECK(f64 && ((uintptr_t)f64 % 8) == 0 && f64[1] == -2.25, "f64");
    CHECK(het_gguf_get_arr_n(g, "a.empty") == 0, "empty array");
    char buf[128];
    het_gguf_kv_format(g, het_gguf_find_key(g, "a.strs"), buf, sizeof buf);
    CHECK(!strcmp(buf, "[\"alpha\", \"\", \"gamma\xe2\x82\xac\"]"), "format '%s'", buf);
    het_gguf_kv_format(g, het_gguf_find_key(g, "a.f64"), buf, sizeof buf);
    CHECK(!strcmp(buf, "[1.5, -2.25]"), "format '%s'", buf);
    het_gguf_kv_format(g, het_gguf_find_key(g, "a.bool"), buf, sizeof buf);
    CHECK(!strcmp(buf, "true"), "format '%s'", buf);
    const struct het_gguf_tensor_info *ta = het_gguf_tensor(g, het_gguf_find_tensor(g, "a"));
    const struct het_gguf_tensor_info *tb = het_gguf_tensor(g, het_gguf_find_tensor(g, "b"));
    const struct het_gguf_tensor_info *tc = het_gguf_tensor(g, het_gguf_find_tensor(g, "c"));
    CHECK(ta && ta->type == HET_TYPE_Q8_0 && ta->size == 34 * 2 * 3 && !memcmp(ta->data, blob_a, ta->size), "a");
    CHECK(tb && tb->n_dims == 3 && tb->ne[2] == 5 && tb->ne[3] == 1 && !memcmp(tb->data, blob_b, tb->size), "b");
    CHECK(tc && tc->size == 28 && !memcmp(tc->data, blob_c, 28), "c");
    for (int64_t i = 0; i < het_gguf_n_tensors(g); i++) {
        const struct het_gguf_tensor_info *t = het_gguf_tensor(g, i);
        CHECK(t->offset % het_gguf_alignment(g) == 0, "tensor %lld aligned", (long long)i);
    }
}

static het_gguf_writer *copy_all(const het_gguf *g)
{
    het_gguf_writer *w = het_gguf_writer_init();
    for (int64_t i = 0; i < het_gguf_n_kv(g); i++)
        CHECK(het_gguf_writer_copy_kv(w, g, i) == HET_OK, "copy_kv %lld", (long long)i);
    for (int64_t i = 0; i < het_gguf_n_tensors(g); i++) {
        const struct het_gguf_tensor_info *t = het_gguf_tensor(g, i);
        CHECK(het_gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data) == HET_OK, "add");
    }
    return w;
}

static bool files_equal(const char *a, const char *b)
{
    size_t na, nb;
    unsigned char *pa = read_all(a, &na), *pb = read_all(b, &nb);
    bool eq = pa && pb && na == nb && memcmp(pa, pb, na) == 0;
    free(pa);
    free(pb);
    return eq;
}

static void test_round_trip(void)
{
    unsigned char blob_a[34 * 6], blob_b[32 * 10 * 2];
    float blob_c[7];
    het_error err = { 0 };
    het_gguf_writer *w = build_sample(blob_a, blob_b, blob_c);
    char path1[256], path2[256];
    snprintf(path1, sizeof path1, "%s", tmp_path("rt1"));
    snprintf(path2, sizeof path2, "%s", tmp_path("rt2"));
    CHECK(het_gguf_writer_write(w, path1, &err) == HET_OK, "write: %s", err.msg);
    het_gguf_writer_free(w);
    het_gguf *g = het_gguf_open(path1, &err);
    CHECK(g != NULL, "reopen: %s", err.msg);
    if (!g) return;
    check_sample(g, blob_a, blob_b, blob_c);
    /* copying every key and tensor reproduces the file byte for byte */
    w = copy_all(g);
    CHECK(het_gguf_writer_write(w, path2, &err) == HET_OK, "write copy: %s", err.msg);
    CHECK(files_equal(path1, path2), "copy is not byte-identical");
    het_gguf_writer_free(w);
    het_gguf_close(g);
    remove(path1);
    remove(path2);
}

/* A real tokenizer (string arrays with 32000 entries) survives copy_kv. */
static void test_copy_vocab(void)
{
    const char *src = het_test_shared("models/vocab/ggml-vocab-llama-spm.gguf");
    if (!het_test_file_exists(src)) return;
    het_error err = { 0 };
    het_gguf *g = het_gguf_open(src, &err);
    CHECK(g != NULL, "%s", err.msg);
    if (!g) return;
    het_gguf_writer *w = copy_all(g);
    const char *path = tmp_path("vocab");
    CHECK(het_gguf_writer_write(w, path, &err) == HET_OK, "%s", err.msg);
    het_gguf_writer_free(w);
    het_gguf *h = het_gguf_open(path, &err);
    CHECK(h != NULL, "%s", err.msg);
    for (int64_t i = 0; h && i < het_gguf_n_kv(g); i++) {
        const char *key = het_gguf_kv_key(g, i);
        char a[256], b[256];
        het_gguf_kv_format(g, i, a, sizeof a);
        het_gguf_kv_format(h, het_gguf_find_key(h, key), b, sizeof b);
        CHECK(!strcmp(a, b), "%s: '%s' vs '%s'", key, a, b);
    }
    int64_t n = het_gguf_get_arr_n(g, "tokenizer.ggml.tokens"), bad = 0;
    for (int64_t i = 0; h && i < n; i++) {
        size_t la = 0, lb = 0;
        const char *a = het_gguf_get_arr_str(g, "tokenizer.ggml.tokens", i, &la);
        const char *b = het_gguf_get_arr_str(h, "tokenizer.ggml.tokens", i, &lb);
        bad += !a || !b || la != lb || memcmp(a, b, la) != 0;
    }
    CHECK(n == 32000 && bad == 0, "tokens copied: %lld bad of %lld", (long long)bad, (long long)n);
    const float *sa = het_gguf_get_arr_data(g, "tokenizer.ggml.scores");
    const float *sb = h ? het_gguf_get_arr_data(h, "tokenizer.ggml.scores") : NULL;
    CHECK(sa && sb && !memcmp(sa, sb, 32000 * sizeof(float)), "scores copied");
    het_gguf_close(h);
    het_gguf_close(g);
    remove(path);
}

static void test_writer_errors(void)
{
    het_error err = { 0 };
    het_gguf_writer *w = het_gguf_writer_init();
    const int64_t ne[2] = { 32, 2 };
    static const float x[64];
    CHECK(het_gguf_writer_add_tensor(w, "t", HET_TYPE_F32, 2, ne, NULL) == HET_OK, "add");
    const char *path = tmp_path("nodata");
    CHECK(het_gguf_writer_write(w, path, &err) == HET_ERR_INVALID, "write without data");
    CHECK(!het_test_file_exists(path), "partial file removed");
    CHECK(het_gguf_writer_set_tensor_data(w, "u", x) == HET_ERR_INVALID, "set unknown tensor");
    CHECK(het_gguf_writer_set_tensor_data(w, "t", x) == HET_OK, "set data");
    CHECK(het_gguf_writer_set_u32(w, "general.alignment", 48) == HET_OK, "set alignment");
    CHECK(het_gguf_writer_write(w, path, &err) == HET_ERR_INVALID, "alignment 48 rejected");
    CHECK(het_gguf_writer_set_u32(w, "general.alignment", 256) == HET_OK, "set alignment");
    CHECK(het_gguf_writer_add_tensor(w, "t2", HET_TYPE_F32, 1, ne, x) == HET_OK, "add t2");
    CHECK(het_gguf_writer_write(w, path, &err) == HET_OK, "write: %s", err.msg);
    CHECK(het_gguf_writer_write(w, "/nonexistent-dir/x.gguf", &err) == HET_ERR_IO, "unwritable path");
    het_gguf *g = het_gguf_open(path, &err);
    CHECK(g && het_gguf_alignment(g) == 256 && het_gguf_data_offset(g) % 256 == 0 &&
          het_gguf_tensor(g, 1)->offset == 256, "alignment 256 honoured");
    het_gguf_close(g);
    het_gguf_writer_free(w);
    het_gguf_writer_free(NULL);
    het_gguf_close(NULL);
    remove(path);
    CHECK(het_gguf_open("/nonexistent-dir/x.gguf", &err) == NULL && err.status == HET_ERR_IO, "open missing");
}

/* ---- hand-built malformed files ---------------------------------------------- */

struct buf {
    unsigned char p[4096];
    size_t        n;
};

static void b_put(struct buf *b, const void *p, size_t n)
{
    memcpy(b->p + b->n, p, n);
    b->n += n;
}
static void b_u32(struct buf *b, uint32_t v) { b_put(b, &v, 4); }
static void b_u64(struct buf *b, uint64_t v) { b_put(b, &v, 8); }
static void b_str(struct buf *b, const char *s)
{
    b_u64(b, strlen(s));
    b_put(b, s, strlen(s));
}
static void b_header(struct buf *b, uint32_t version, uint64_t n_tensors, uint64_t n_kv)
{
    b->n = 0;
    b_put(b, "GGUF", 4);
    b_u32(b, version);
    b_u64(b, n_tensors);
    b_u64(b, n_kv);
}
static void b_kv_u32(struct buf *b, const char *key, uint32_t v)
{
    b_str(b, key);
    b_u32(b, HET_GGUF_TYPE_UINT32);
    b_u32(b, v);
}
/* tensor info with up to 4 dims */
static void b_tensor(struct buf *b, const char *name, int n_dims, const uint64_t *ne, uint32_t type, uint64_t off)
{
    b_str(b, name);
    b_u32(b, (uint32_t)n_dims);
    for (int d = 0; d < n_dims; d++) b_u64(b, ne[d]);
    b_u32(b, type);
    b_u64(b, off);
}
static void b_pad(struct buf *b, size_t align, size_t data_bytes)
{
    while (b->n % align) b->p[b->n++] = 0;
    memset(b->p + b->n, 0x5a, data_bytes);
    b->n += data_bytes;
}

/* Expect failure with a message containing `want`; or success when want is NULL. */
static void expect(const struct buf *b, const char *want, const char *label)
{
    het_error err = { 0 };
    unsigned char *copy;
    het_gguf *g = open_copy(b->p, b->n, &copy, &err);
    if (!want) {
        CHECK(g != NULL, "%s: should open: %s", label, err.msg);
    } else {
        CHECK(g == NULL, "%s: should fail", label);
        CHECK(g || (strstr(err.msg, want) && strstr(err.msg, "offset") && !strncmp(err.msg, "gguf: <memory>: ", 16)),
              "%s: message '%s' lacks '%s'", label, err.msg, want);
    }
    het_gguf_close(g);
    free(copy);
}

static void test_malformed_header(void)
{
    struct buf b;
    b_header(&b, 1, 0, 0);
    expect(&b, "v1", "version 1");
    b_header(&b, 4, 0, 0);
    expect(&b, "version 4", "version 4");
    b_header(&b, 0x03000000, 0, 0);
    expect(&b, "big-endian", "big-endian");
    b_header(&b, 2, 0, 0);
    expect(&b, NULL, "v2 empty");
    b_header(&b, 3, 0, 0);
    memcpy(b.p, "GGUG", 4);
    expect(&b, "not a GGUF file", "magic");
    b_header(&b, 3, 0, 1ull << 60);
    expect(&b, "cannot fit", "absurd n_kv");
    b_header(&b, 3, 1ull << 60, 0);
    expect(&b, "cannot fit", "absurd n_tensors");
    b_header(&b, 3, 0, 2);
    b_kv_u32(&b, "x", 1);
    b_kv_u32(&b, "x", 2);
    expect(&b, "duplicate key", "duplicate key");
    b_header(&b, 3, 0, 1);
    b_str(&b, "x");
    b_u32(&b, 13);
    b_u32(&b, 0);
    expect(&b, "unknown value type 13", "bad value type");
    b_header(&b, 3, 0, 1);
    b_str(&b, "x");
    b_u32(&b, HET_GGUF_TYPE_ARRAY);
    b_u32(&b, HET_GGUF_TYPE_ARRAY);
    b_u64(&b, 0);
    expect(&b, "nested", "nested array");
    b_header(&b, 3, 0, 1);
    b_str(&b, "x");
    b_u32(&b, HET_GGUF_TYPE_ARRAY);
    b_u32(&b, HET_GGUF_TYPE_UINT32);
    b_u64(&b, 1ull << 61);
    expect(&b, "exceeds", "huge array");
    b_header(&b, 3, 0, 1);
    b_u64(&b, 1ull << 62);
    b_u64(&b, 0);
    expect(&b, "exceeds", "huge key length");
    b_header(&b, 3, 0, 1);
    b_str(&b, "general.alignment");
    b_u32(&b, HET_GGUF_TYPE_UINT64);
    b_u64(&b, 32);
    expect(&b, "must be u32", "u64 alignment");
    b_header(&b, 3, 0, 1);
    b_kv_u32(&b, "general.alignment", 48);
    expect(&b, "power of two", "alignment 48");
    b_header(&b, 3, 0, 1);
    b_kv_u32(&b, "general.alignment", 0);
    expect(&b, "power of two", "alignment 0");
}

static void test_malformed_tensors(void)
{
    struct buf b;
    const uint64_t ne2[2] = { 32, 2 }, ne_big[2] = { 1ull << 20, 1ull << 20 }, ne0[2] = { 0, 2 };
    const uint64_t ne172[2] = { 172, 64 };
    b_header(&b, 3, 1, 0);
    b_tensor(&b, "t", 2, ne2, HET_TYPE_F32, 0);
    b_pad(&b, 32, 256);
    expect(&b, NULL, "valid single tensor");
    b.n -= 1;
    expect(&b, "runs past the end", "tensor data truncated");
    b_header(&b, 3, 1, 0);
    b_tensor(&b, "t", 5, (const uint64_t[5]){ 1, 1, 1, 1, 1 }, HET_TYPE_F32, 0);
    expect(&b, "n_dims 5", "n_dims 5");
    b_header(&b, 3, 1, 0);
    b_tensor(&b, "t", 0, ne2, HET_TYPE_F32, 0);
    b_pad(&b, 32, 64);
    expect(&b, "n_dims 0", "n_dims 0");
    b_header(&b, 3, 1, 0);
    b_tensor(&b, "t", 2, ne0, HET_TYPE_F32, 0);
    expect(&b, "ne[0] = 0", "ne 0");
    b_header(&b, 3, 1, 0);
    b_tensor(&b, "t", 4, (const uint64_t[4]){ 1ull << 20, 1ull << 20, 1ull << 20, 1ull << 20 }, HET_TYPE_F32, 0);
    expect(&b, "overflows", "element count overflow");
    b_header(&b, 3, 1, 0);
    b_tensor(&b, "t", 2, ne_big, HET_TYPE_F32, 0);
    expect(&b, "runs past the end", "huge tensor");
    b_header(&b, 3, 1, 0);
    b_tensor(&b, "t", 2, ne2, 4, 0);
    expect(&b, "unknown tensor type 4", "type 4");
    b_header(&b, 3, 1, 0);
    b_tensor(&b, "t", 2, ne2, 1000, 0);
    expect(&b, "unknown tensor type", "type 1000");
    b_header(&b, 3, 1, 0);
    b_tensor(&b, "t", 2, ne172, HET_TYPE_Q8_0, 0);
    expect(&b, "not a multiple", "q8_0 with ne0 172");
    b_header(&b, 3, 1, 0);
    b_tensor(&b, "t", 2, ne2, HET_TYPE_F32, 16);
    b_pad(&b, 32, 512);
    expect(&b, "alignment", "misaligned offset");
    b_header(&b, 3, 2, 0);
    b_tensor(&b, "t", 2, ne2, HET_TYPE_F32, 0);
    b_tensor(&b, "u", 2, ne2, HET_TYPE_F32, 224);
    b_pad(&b, 32, 512);
    expect(&b, "overlaps", "overlap");
    b_header(&b, 3, 2, 0);
    b_tensor(&b, "t", 2, ne2, HET_TYPE_F32, 256);
    b_tensor(&b, "t", 2, ne2, HET_TYPE_F32, 0);
    b_pad(&b, 32, 512);
    expect(&b, "duplicate tensor", "duplicate tensor");
    b_header(&b, 3, 2, 0);
    b_tensor(&b, "t", 2, ne2, HET_TYPE_F32, 256);
    b_tensor(&b, "u", 2, ne2, HET_TYPE_F32, 0);
    b_pad(&b, 32, 512);
    expect(&b, NULL, "tensors out of order are fine");
    b_header(&b, 3, 1, 0);
    b_tensor(&b, "t", 2, ne2, HET_TYPE_F32, 0);
    expect(&b, "runs past the end", "no data at all");
    /* vocab-only: no tensors, file not padded: fine */
    b_header(&b, 3, 0, 1);
    b_kv_u32(&b, "x", 1);
    CHECK(b.n % 32 != 0, "setup");
    expect(&b, NULL, "vocab-only unpadded");
}

/* ---- corruption sweep ------------------------------------------------------- */

static int sweep_one(const unsigned char *src, size_t n, const char *label, size_t where)
{
    het_error err = { 0 };
    unsigned char *copy;
    het_gguf *g = open_copy(src, n, &copy, &err);
    int bad = 0;
    if (g) {
        touch_all(g);
    } else if (!strstr(err.msg, "offset") || strncmp(err.msg, "gguf: <memory>: ", 16) != 0 ||
               strchr(err.msg, '\n')) {
        fprintf(stderr, "%s at %zu: bad message '%s'\n", label, where, err.msg);
        bad = 1;
    }
    het_gguf_close(g);
    free(copy);
    return bad;
}

static void test_corruption_sweep(void)
{
    unsigned char blob_a[34 * 6], blob_b[32 * 10 * 2];
    float blob_c[7];
    het_error err = { 0 };
    het_gguf_writer *w = build_sample(blob_a, blob_b, blob_c);
    const char *path = tmp_path("sweep");
    CHECK(het_gguf_writer_write(w, path, &err) == HET_OK, "%s", err.msg);
    het_gguf_writer_free(w);
    size_t n;
    unsigned char *file = read_all(path, &n);
    remove(path);
    if (!file) return;
    het_gguf *g = het_gguf_open_memory(file, n, &err);
    uint64_t data_off = g ? het_gguf_data_offset(g) : n;
    het_gguf_close(g);

    int bad = 0, opened_truncated = 0;
    for (size_t len = 0; len < n; len++) {
        bad += sweep_one(file, len, "truncation", len);
        het_gguf *t = het_gguf_open_memory(file, len, &err);
        opened_truncated += t != NULL;
        het_gguf_close(t);
    }
    CHECK(bad == 0, "%d truncations gave bad messages", bad);
    CHECK(opened_truncated <= 32, "%d truncated files opened (only trailing padding may go)", opened_truncated);

    static const unsigned char flips[] = { 0x01, 0x02, 0x10, 0x80, 0xff };
    unsigned char *mut = malloc(n);
    int failed = 0, total = 0;
    bad = 0;
    for (size_t pos = 0; pos < data_off; pos++) {
        for (size_t k = 0; k < sizeof flips; k++) {
            memcpy(mut, file, n);
            mut[pos] ^= flips[k];
            bad += sweep_one(mut, n, "flip", pos);
            het_gguf *t = het_gguf_open_memory(mut, n, &err);
            failed += t == NULL;
            total++;
            het_gguf_close(t);
        }
    }
    CHECK(bad == 0, "%d byte flips gave bad messages", bad);
    CHECK(failed > total / 4, "only %d of %d flips were rejected", failed, total);
    printf("sweep: %zu-byte file, %zu truncations, %d header flips (%d rejected)\n", n, n, total, failed);
    free(mut);
    free(file);
}

int main(void)
{
    het_test_seed(42);
    test_stories();
    test_tiny_random_and_vocab();
    test_all_fixtures();
    test_round_trip();
    test_copy_vocab();
    test_writer_errors();
    test_malformed_header();
    test_malformed_tensors();
    test_corruption_sweep();
    return het_test_finish();
}
