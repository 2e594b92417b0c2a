/*
 * mkmodel.c — random-weight GGUF models in the llama / qwen2 / qwen3 /
 * qwen2moe / qwen3moe layouts.
 *
 * The model is described as a plan (one entry per tensor: name, GGUF shape,
 * storage type, initialiser), the keys go into a het_gguf_writer, and the
 * tensors are produced one by one while the file is written (see
 * gguf_writer_stream.h), so a Qwen3-0.6B-sized model never sits in memory.
 *
 * Randomness is counter-based: row r of tensor "name" draws from
 * splitmix64(seed, hash(name), r, k), so every row is independent of the
 * others, of the thread count (rows are generated in parallel with OpenMP)
 * and of the storage type. Quantisation is het_quantize_row, which matches
 * llama.cpp's reference quantisers.
 */
#include "het/mkmodel.h"

#include <inttypes.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "het/gguf.h"
#include "model/gguf_writer_stream.h"

#define MK_MAX_NAME 64

/* ---- presets ------------------------------------------------------------------ */

static const struct het_mkmodel_preset presets[] = {
    { "tiny", "qwen3", 2, 64, 4, 2, 16, 192, 4096, 1e6f, 1e-6f, true, "models/synthetic/vocab-qwen3.gguf",
      "Qwen3 layout, 2 layers, n_embd 64 (as synthetic/qwen3-tiny-*.gguf)", 0, 0, 0, 0 },
    { "llama-tiny", "llama", 2, 64, 4, 2, 16, 192, 4096, 1e4f, 1e-5f, false,
      "models/vocab/ggml-vocab-llama-spm.gguf", "Llama layout, 2 layers, n_embd 64 (as synthetic/llama-tiny-*.gguf)", 0, 0, 0, 0 },
    { "qwen3-0.6b", "qwen3", 28, 1024, 16, 8, 128, 3072, 40960, 1e6f, 1e-6f, true,
      "models/synthetic/vocab-qwen3.gguf", "Qwen3-0.6B shape (~0.6B parameters)", 0, 0, 0, 0 },
    { "qwen3-1.7b", "qwen3", 28, 2048, 16, 8, 128, 6144, 40960, 1e6f, 1e-6f, true,
      "models/synthetic/vocab-qwen3.gguf", "Qwen3-1.7B shape (~1.7B parameters)", 0, 0, 0, 0 },
    { "qwen2.5-0.5b", "qwen2", 24, 896, 14, 2, 64, 4864, 32768, 1e6f, 1e-6f, true,
      "models/synthetic/vocab-qwen3.gguf", "Qwen2.5-0.5B shape (q/k/v biases)", 0, 0, 0, 0 },
    { "tinyllama-1.1b", "llama", 22, 2048, 32, 4, 64, 5632, 2048, 1e4f, 1e-5f, false,
      "models/vocab/ggml-vocab-llama-spm.gguf", "TinyLlama-1.1B shape, Llama-2 SPM vocabulary", 0, 0, 0, 0 },
    { "qwen3moe-tiny", "qwen3moe", 2, 64, 4, 2, 16, 192, 4096, 1e6f, 1e-6f, true,
      "models/synthetic/vocab-qwen3.gguf", "Qwen3-MoE layout, 2 layers, n_embd 64, 8 experts of 64, top-2",
      8, 2, 64, 0 },
    { "qwen2moe-tiny", "qwen2moe", 2, 64, 4, 2, 16, 192, 4096, 1e6f, 1e-6f, true,
      "models/synthetic/vocab-qwen3.gguf", "Qwen2-MoE layout, 2 layers, n_embd 64, 8 experts of 64, top-2, "
      "shared expert of 128", 8, 2, 64, 128 },
    { "qwen3-30b-a3b", "qwen3moe", 48, 2048, 32, 4, 128, 6144, 40960, 1e6f, 1e-6f, false,
      "models/synthetic/vocab-qwen3.gguf", "Qwen3-30B-A3B shape (128 experts of 768, top-8; ~30B parameters)",
      128, 8, 768, 0 },
};

int het_mkmodel_n_presets(void) { return (int)(sizeof presets / sizeof presets[0]); }

const struct het_mkmodel_preset *het_mkmodel_preset(int i)
{
    return i >= 0 && i < het_mkmodel_n_presets() ? &presets[i] : NULL;
}

const struct het_mkmodel_preset *het_mkmodel_preset_find(const char *name)
{
    for (int i = 0; name && i < het_mkmodel_n_presets(); i++)
        if (strcmp(presets[i].name, name) == 0) return &presets[i];
    return NULL;
}

void het_mkmodel_params_init(struct het_mkmodel_params *p)
{
    memset(p, 0, sizeof *p);
    p->arch      = "llama";
    p->type      = HET_TYPE_F32;
    p->embd_type = HET_TYPE_COUNT;
    p->seed      = 42;
    p->rope_base = 10000.0f;
    p->rms_eps   = 1e-5f;
}

bool het_mkmodel_params_preset(struct het_mkmodel_params *p, const char *name)
{
    const struct het_mkmodel_preset *s = het_mkmodel_preset_find(name);
    if (!s) return false;
    p->arch      = s->arch;
    p->n_layer   = s->n_layer;
    p->n_embd    = s->n_embd;
    p->n_head    = s->n_head;
    p->n_head_kv = s->n_head_kv;
    p->head_dim  = s->head_dim;
    p->n_ff      = s->n_ff;
    p->n_ctx     = s->n_ctx;
    p->rope_base = s->rope_base;
    p->rms_eps   = s->rms_eps;
    p->tied      = s->tied;
    p->n_expert      = s->n_expert;
    p->n_expert_used = s->n_expert_used;
    p->n_ff_exp      = s->n_ff_exp;
    p->n_ff_shexp    = s->n_ff_shexp;
    return true;
}

/* ---- the plan ------------------------------------------------------------------- */

enum init_kind { INIT_GAUSS, INIT_ONES };

struct spec {
    char           name[MK_MAX_NAME];
    enum het_type  type;
    int            n_dims;
    int64_t        ne[3];      /* ne[2]: experts of a 3-D expert tensor, else 1 */
    enum init_kind init;
};

struct plan {
    const struct het_mkmodel_params *p;
    int           head_dim;
    int64_t       n_vocab;
    struct spec  *t;
    int64_t       n, cap;
    int           n_threads;
    int           n_fallback;
    char          notes[1024];
    int64_t       n_params;
};

static bool weight_type_ok(enum het_type t)
{
    switch (t) {
    case HET_TYPE_F32: case HET_TYPE_F16: case HET_TYPE_BF16:
    case HET_TYPE_Q4_0: case HET_TYPE_Q4_1: case HET_TYPE_Q5_0: case HET_TYPE_Q5_1: case HET_TYPE_Q8_0:
    case HET_TYPE_Q4_K: case HET_TYPE_Q5_K: case HET_TYPE_Q6_K:
        return true;
    default:
        return false;
    }
}

/* A type that can store rows of ne0: t itself, else what llama.cpp falls
 * back to for k-quants (a 32-block type of similar size), else f16. */
static enum het_type fit_type(enum het_type t, int64_t ne0)
{
    if (ne0 % het_type_get_traits(t)->blck_size == 0) return t;
    enum het_type f = HET_TYPE_F16;
    if (t == HET_TYPE_Q4_K) f = HET_TYPE_Q5_0;
    else if (t == HET_TYPE_Q5_K) f = HET_TYPE_Q5_1;
    else if (t == HET_TYPE_Q6_K) f = HET_TYPE_Q8_0;
    return ne0 % het_type_get_traits(f)->blck_size == 0 ? f : HET_TYPE_F16;
}

/* "blk.12.ffn_down.weight" -> "blk.*.ffn_down.weight" (for the notes) */
static void generic_name(const char *name, char *out, size_t cap)
{
    const char *dot;
    if (strncmp(name, "blk.", 4) == 0 && (dot = strchr(name + 4, '.')) != NULL)
        snprintf(out, cap, "blk.*%s", dot);
    else
        snprintf(out, cap, "%s", name);
}

static void note_fallback(struct plan *pl, const char *name, enum het_type want, enum het_type got, int64_t ne0)
{
    char g[MK_MAX_NAME + 8], line[160];
    pl->n_fallback++;
    generic_name(name, g, sizeof g);
    snprintf(line, sizeof line, "%s: %s -> %s (ne0 %" PRId64 " not a multiple of %" PRId64 ")", g,
             het_type_name(want), het_type_name(got), ne0, het_type_get_traits(want)->blck_size);
    if (strstr(pl->notes, line)) return;
    size_t len = strlen(pl->notes);
    snprintf(pl->notes + len, sizeof pl->notes - len, "%s%s", len ? "; " : "", line);
}

static bool add(struct plan *pl, const char *name, enum het_type type, int n_dims, int64_t ne0, int64_t ne1,
                enum init_kind init)
{
    if (pl->n == pl->cap) {
        int64_t cap = pl->cap ? pl->cap * 2 : 64;
        struct spec *t = realloc(pl->t, (size_t)cap * sizeof *t);
        if (!t) return false;
        pl->t = t;
        pl->cap = cap;
    }
    struct spec *s = &pl->t[pl->n++];
    snprintf(s->name, sizeof s->name, "%s", name);
    s->type = fit_type(type, ne0);
    if (s->type != type) note_fallback(pl, name, type, s->type, ne0);
    s->n_dims = n_dims;
    s->ne[0] = ne0;
    s->ne[1] = n_dims > 1 ? ne1 : 1;
    s->ne[2] = 1;
    s->init = init;
    pl->n_params += ne0 * s->ne[1];
    return true;
}

/* a 3-D expert tensor (ne0, ne1, n_expert): n_expert matrices one after the other */
static bool add_experts(struct plan *pl, int il, const char *what, enum het_type type, int64_t ne0, int64_t ne1)
{
    char name[MK_MAX_NAME];
    snprintf(name, sizeof name, "blk.%d.%s", il, what);
    if (!add(pl, name, type, 3, ne0, ne1, INIT_GAUSS)) return false;
    struct spec *s = &pl->t[pl->n - 1];
    s->ne[2] = pl->p->n_expert;
    pl->n_params += ne0 * ne1 * (s->ne[2] - 1);
    return true;
}

static bool is_moe(const char *arch) { return !strcmp(arch, "qwen2moe") || !strcmp(arch, "qwen3moe"); }

static bool add_blk(struct plan *pl, int il, const char *what, enum het_type type, int n_dims, int64_t ne0,
                    int64_t ne1, enum init_kind init)
{
    char name[MK_MAX_NAME];
    snprintf(name, sizeof name, "blk.%d.%s", il, what);
    return add(pl, name, type, n_dims, ne0, ne1, init);
}

/* Output/embedding types as llama.cpp's quantiser picks them. */
static void embd_types(const struct het_mkmodel_params *p, enum het_type *embd, enum het_type *out)
{
    if (p->embd_type != HET_TYPE_COUNT) {
        *embd = *out = p->embd_type;
        return;
    }
    enum het_type t = p->type;
    bool keep = t == HET_TYPE_F32 || t == HET_TYPE_F16 || t == HET_TYPE_BF16 || t == HET_TYPE_Q8_0;
    *out  = keep ? t : HET_TYPE_Q6_K;
    *embd = keep || !p->tied ? t : HET_TYPE_Q6_K;
}

static bool add_layer(struct plan *pl, int il)
{
    const struct het_mkmodel_params *p = pl->p;
    const int64_t E = p->n_embd, q = (int64_t)p->n_head * pl->head_dim, kv = (int64_t)p->n_head_kv * pl->head_dim;
    const enum het_type w = p->type, f32 = HET_TYPE_F32;
    bool qwen2 = !strcmp(p->arch, "qwen2") || !strcmp(p->arch, "qwen2moe");
    bool qwen3 = !strcmp(p->arch, "qwen3") || !strcmp(p->arch, "qwen3moe");
    bool ok = add_blk(pl, il, "attn_norm.weight", f32, 1, E, 1, INIT_ONES) &&
              add_blk(pl, il, "attn_q.weight", w, 2, E, q, INIT_GAUSS) &&
              add_blk(pl, il, "attn_k.weight", w, 2, E, kv, INIT_GAUSS) &&
              add_blk(pl, il, "attn_v.weight", w, 2, E, kv, INIT_GAUSS) &&
              add_blk(pl, il, "attn_output.weight", w, 2, q, E, INIT_GAUSS);
    if (ok && qwen2)
        ok = add_blk(pl, il, "attn_q.bias", f32, 1, q, 1, INIT_GAUSS) &&
             add_blk(pl, il, "attn_k.bias", f32, 1, kv, 1, INIT_GAUSS) &&
             add_blk(pl, il, "attn_v.bias", f32, 1, kv, 1, INIT_GAUSS);
    if (ok && qwen3)
        ok = add_blk(pl, il, "attn_q_norm.weight", f32, 1, pl->head_dim, 1, INIT_ONES) &&
             add_blk(pl, il, "attn_k_norm.weight", f32, 1, pl->head_dim, 1, INIT_ONES);
    ok = ok && add_blk(pl, il, "ffn_norm.weight", f32, 1, E, 1, INIT_ONES);
    if (ok && is_moe(p->arch)) {
        /* the router stays f32 as llama.cpp's converter writes it */
        ok = add_blk(pl, il, "ffn_gate_inp.weight", f32, 2, E, p->n_expert, INIT_GAUSS) &&
             add_experts(pl, il, "ffn_gate_exps.weight", w, E, p->n_ff_exp) &&
             add_experts(pl, il, "ffn_up_exps.weight", w, E, p->n_ff_exp) &&
             add_experts(pl, il, "ffn_down_exps.weight", w, p->n_ff_exp, E);
        if (ok && p->n_ff_shexp > 0)
            ok = add_blk(pl, il, "ffn_gate_inp_shexp.weight", f32, 1, E, 1, INIT_GAUSS) &&
                 add_blk(pl, il, "ffn_gate_shexp.weight", w, 2, E, p->n_ff_shexp, INIT_GAUSS) &&
                 add_blk(pl, il, "ffn_up_shexp.weight", w, 2, E, p->n_ff_shexp, INIT_GAUSS) &&
                 add_blk(pl, il, "ffn_down_shexp.weight", w, 2, p->n_ff_shexp, E, INIT_GAUSS);
        return ok;
    }
    return ok && add_blk(pl, il, "ffn_gate.weight", w, 2, E, p->n_ff, INIT_GAUSS) &&
           add_blk(pl, il, "ffn_up.weight", w, 2, E, p->n_ff, INIT_GAUSS) &&
           add_blk(pl, il, "ffn_down.weight", w, 2, p->n_ff, E, INIT_GAUSS);
}

static bool build_plan(struct plan *pl)
{
    const struct het_mkmodel_params *p = pl->p;
    enum het_type embd, out;
    embd_types(p, &embd, &out);
    if (!add(pl, "token_embd.weight", embd, 2, p->n_embd, pl->n_vocab, INIT_GAUSS)) return false;
    for (int il = 0; il < p->n_layer; il++)
        if (!add_layer(pl, il)) return false;
    if (!add(pl, "output_norm.weight", HET_TYPE_F32, 1, p->n_embd, 1, INIT_ONES)) return false;
    return p->tied || add(pl, "output.weight", out, 2, p->n_embd, pl->n_vocab, INIT_GAUSS);
}

/* ---- random rows ----------------------------------------------------------------- */

static uint64_t splitmix64(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

static uint64_t name_hash(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    return h;
}

/* Gaussian row: Box-Muller over counter-based 24-bit uniforms (float math:
 * twice as fast as double, tails cut at 5.8 sigma, which is plenty here). */
static void gauss_row(float *x, int64_t n, uint64_t row_seed, float std)
{
    for (int64_t k = 0; k < n; k += 2) {
        uint64_t bits = splitmix64(row_seed + (uint64_t)k);
        float u1 = (float)((bits >> 40) + 1) * (1.0f / 16777216.0f);          /* (0, 1] */
        float u2 = (float)((bits >> 8) & 0xffffff) * (1.0f / 16777216.0f);    /* [0, 1) */
        float r = std * sqrtf(-2.0f * logf(u1)), a = 6.28318531f * u2;
        x[k] = r * cosf(a);
        if (k + 1 < n) x[k + 1] = r * sinf(a);
    }
}

struct fill_ctx {
    struct plan *pl;
    int64_t      done;
};

static int fill_rows(const struct spec *s, unsigned char *dst, uint64_t seed, int n_threads)
{
    const int64_t ne0 = s->ne[0], rows = s->ne[1] * s->ne[2];
    const size_t row_bytes = het_type_row_size(s->type, ne0);
    const uint64_t tseed = splitmix64(seed ^ name_hash(s->name));
    const float std = (float)(1.0 / sqrt((double)ne0));
    int failed = 0;
    /* threads only pay off for big tensors (and spinning hurts on a busy machine) */
    bool par = n_threads > 1 && rows >= 64 && rows * ne0 >= (1 << 14);
#pragma omp parallel num_threads(n_threads) if (par)
    {
        float *x = malloc((size_t)ne0 * sizeof *x);
        if (!x) {
#pragma omp atomic write
            failed = 1;
        }
#pragma omp for schedule(dynamic, 8)
        for (int64_t r = 0; r < rows; r++) {
            if (!x) continue;
            if (s->init == INIT_ONES)
                for (int64_t k = 0; k < ne0; k++) x[k] = 1.0f;
            else
                gauss_row(x, ne0, splitmix64(tseed + (uint64_t)r * 0xD1B54A32D192ED03ull), std);
            if (het_quantize_row(s->type, x, dst + (size_t)r * row_bytes, ne0) != HET_OK) {
#pragma omp atomic write
                failed = 1;
            }
        }
        free(x);
    }
    return failed;
}

static enum het_status fill_tensor(void *user, int64_t i, const char *name, void *dst, size_t size, het_error *err)
{
    struct fill_ctx *c = user;
    const struct spec *s = &c->pl->t[i];
    if (fill_rows(s, dst, c->pl->p->seed, c->pl->n_threads))
        return het_error_set(err, HET_ERR_NOMEM, "mkmodel: %s: cannot generate tensor '%s' (%s, %zu bytes)",
                             c->pl->p->path, name, het_type_name(s->type), size);
    c->done++;
    if (c->pl->p->progress) c->pl->p->progress(c->pl->p->progress_user, c->done, c->pl->n, name);
    return HET_OK;
}

/* ---- keys -------------------------------------------------------------------------- */

static uint32_t file_type_of(enum het_type t)
{
    switch (t) {   /* llama_ftype values */
    case HET_TYPE_F32:  return 0;
    case HET_TYPE_F16:  return 1;
    case HET_TYPE_Q4_0: return 2;
    case HET_TYPE_Q4_1: return 3;
    case HET_TYPE_Q8_0: return 7;
    case HET_TYPE_Q5_0: return 8;
    case HET_TYPE_Q5_1: return 9;
    case HET_TYPE_Q4_K: return 14;  /* Q4_K_S: no per-tensor bumps here */
    case HET_TYPE_Q5_K: return 16;  /* Q5_K_S */
    case HET_TYPE_Q6_K: return 18;
    case HET_TYPE_BF16: return 32;
    default:            return 0;
    }
}

static enum het_status set_general(het_gguf_writer *w, const struct het_mkmodel_params *p)
{
    char name[128], desc[256];
    if (p->name) snprintf(name, sizeof name, "%s", p->name);
    else snprintf(name, sizeof name, "het-mkmodel-%s-L%d-E%d-seed%" PRIu64, p->arch, p->n_layer, p->n_embd, p->seed);
    snprintf(desc, sizeof desc, "random weights (seed %" PRIu64 ", std 1/sqrt(fan_in)) written by het mkmodel",
             p->seed);
    enum het_status st = het_gguf_writer_set_str(w, "general.architecture", p->arch);
    if (st == HET_OK) st = het_gguf_writer_set_str(w, "general.type", "model");
    if (st == HET_OK) st = het_gguf_writer_set_str(w, "general.name", name);
    if (st == HET_OK) st = het_gguf_writer_set_str(w, "general.description", desc);
    if (st == HET_OK) st = het_gguf_writer_set_u32(w, "general.file_type", file_type_of(p->type));
    if (st == HET_OK) st = het_gguf_writer_set_u32(w, "general.quantization_version", 2);
    return st;
}

static enum het_status set_keys(het_gguf_writer *w, const struct plan *pl)
{
    const struct het_mkmodel_params *p = pl->p;
    const struct { const char *key; uint32_t v; } u32s[] = {
        { "vocab_size", (uint32_t)pl->n_vocab },
        { "context_length", (uint32_t)p->n_ctx },
        { "embedding_length", (uint32_t)p->n_embd },
        { "block_count", (uint32_t)p->n_layer },
        { "feed_forward_length", (uint32_t)p->n_ff },
        { "attention.head_count", (uint32_t)p->n_head },
        { "attention.head_count_kv", (uint32_t)p->n_head_kv },
        { "attention.key_length", (uint32_t)pl->head_dim },
        { "attention.value_length", (uint32_t)pl->head_dim },
        { "rope.dimension_count", (uint32_t)pl->head_dim },
    };
    const struct { const char *key; float v; } f32s[] = {
        { "rope.freq_base", p->rope_base },
        { "attention.layer_norm_rms_epsilon", p->rms_eps },
    };
    const struct { const char *key; int v; } moe[] = {
        { "expert_count", p->n_expert },
        { "expert_used_count", p->n_expert_used },
        { "expert_feed_forward_length", p->n_ff_exp },
        { "expert_shared_feed_forward_length", p->n_ff_shexp },
    };
    char key[128];
    enum het_status st = set_general(w, p);
    for (size_t i = 0; st == HET_OK && is_moe(p->arch) && i < sizeof moe / sizeof moe[0]; i++) {
        if (moe[i].v <= 0) continue;
        snprintf(key, sizeof key, "%s.%s", p->arch, moe[i].key);
        st = het_gguf_writer_set_u32(w, key, (uint32_t)moe[i].v);
    }
    for (size_t i = 0; st == HET_OK && i < sizeof u32s / sizeof u32s[0]; i++) {
        snprintf(key, sizeof key, "%s.%s", p->arch, u32s[i].key);
        st = het_gguf_writer_set_u32(w, key, u32s[i].v);
    }
    for (size_t i = 0; st == HET_OK && i < sizeof f32s / sizeof f32s[0]; i++) {
        snprintf(key, sizeof key, "%s.%s", p->arch, f32s[i].key);
        st = het_gguf_writer_set_f32(w, key, f32s[i].v);
    }
    return st;
}

/* Copy tokenizer.* from the vocab file; n_vocab is its token count. */
static enum het_status copy_vocab(het_gguf_writer *w, struct plan *pl, het_error *err)
{
    const char *path = pl->p->vocab_path;
    het_gguf *v = het_gguf_open(path, err);
    if (!v) return err ? err->status : HET_ERR_FORMAT;
    enum het_status st = HET_OK;
    pl->n_vocab = het_gguf_get_arr_n(v, "tokenizer.ggml.tokens");
    if (pl->n_vocab <= 0 || het_gguf_get_arr_type(v, "tokenizer.ggml.tokens") != HET_GGUF_TYPE_STRING)
        st = het_error_set(err, HET_ERR_FORMAT, "mkmodel: %s: no tokenizer.ggml.tokens string array", path);
    for (int64_t i = 0; st == HET_OK && i < het_gguf_n_kv(v); i++)
        if (strncmp(het_gguf_kv_key(v, i), "tokenizer.", 10) == 0) {
            st = het_gguf_writer_copy_kv(w, v, i);
            if (st != HET_OK) het_error_set(err, st, "mkmodel: %s: cannot copy %s", path, het_gguf_kv_key(v, i));
        }
    het_gguf_close(v);
    return st;
}

/* ---- validation and driver --------------------------------------------------------- */

static enum het_status check_params(const struct het_mkmodel_params *p, int *head_dim, het_error *err)
{
    if (!p || !p->path) return het_error_set(err, HET_ERR_INVALID, "mkmodel: no output path");
    if (!p->arch || (strcmp(p->arch, "llama") && strcmp(p->arch, "qwen2") && strcmp(p->arch, "qwen3") &&
                     !is_moe(p->arch)))
        return het_error_set(err, HET_ERR_INVALID, "mkmodel: arch '%s' is not llama, qwen2, qwen3, qwen2moe or qwen3moe",
                             p->arch ? p->arch : "(null)");
    if (is_moe(p->arch) && (p->n_expert < 1 || p->n_expert > 1024 || p->n_expert_used < 1 ||
                            p->n_expert_used > p->n_expert || p->n_ff_exp < 1 || p->n_ff_shexp < 0 ||
                            (!strcmp(p->arch, "qwen2moe") && p->n_ff_shexp < 1)))
        return het_error_set(err, HET_ERR_INVALID, "mkmodel: %s needs 1 <= n_expert_used <= n_expert <= 1024 and "
                             "n_ff_exp >= 1 (qwen2moe: n_ff_shexp >= 1): got %d, %d, %d, %d", p->arch,
                             p->n_expert_used, p->n_expert, p->n_ff_exp, p->n_ff_shexp);
    if (!is_moe(p->arch) && (p->n_expert || p->n_expert_used || p->n_ff_exp || p->n_ff_shexp))
        return het_error_set(err, HET_ERR_INVALID, "mkmodel: expert settings given for the dense arch '%s'", p->arch);
    if (p->n_layer < 1 || p->n_layer > 1000 || p->n_embd < 1 || p->n_head < 1 || p->n_head_kv < 1 ||
        p->n_ff < 1 || p->n_ctx < 1 || p->head_dim < 0)
        return het_error_set(err, HET_ERR_INVALID,
                             "mkmodel: bad shape: n_layer %d n_embd %d n_head %d n_head_kv %d head_dim %d n_ff %d n_ctx %d",
                             p->n_layer, p->n_embd, p->n_head, p->n_head_kv, p->head_dim, p->n_ff, p->n_ctx);
    if (p->n_head % p->n_head_kv != 0)
        return het_error_set(err, HET_ERR_INVALID, "mkmodel: n_head %d is not a multiple of n_head_kv %d",
                             p->n_head, p->n_head_kv);
    *head_dim = p->head_dim ? p->head_dim : p->n_embd / p->n_head;
    if (*head_dim < 1 || (!p->head_dim && p->n_embd % p->n_head))
        return het_error_set(err, HET_ERR_INVALID, "mkmodel: head_dim not given and n_embd %d / n_head %d is not whole",
                             p->n_embd, p->n_head);
    if (!weight_type_ok(p->type) || (p->embd_type != HET_TYPE_COUNT && !weight_type_ok(p->embd_type)))
        return het_error_set(err, HET_ERR_UNSUPPORTED, "mkmodel: weight type %s is not supported "
                             "(f32 f16 bf16 q4_0 q4_1 q5_0 q5_1 q8_0 q4_k q5_k q6_k)",
                             het_type_name(weight_type_ok(p->type) ? p->embd_type : p->type));
    if (!(p->rope_base > 0) || !(p->rms_eps > 0))
        return het_error_set(err, HET_ERR_INVALID, "mkmodel: rope_base and rms_eps must be > 0");
    if (!p->vocab_path && (p->n_vocab < 1 || p->n_vocab > INT32_MAX))
        return het_error_set(err, HET_ERR_INVALID, "mkmodel: need vocab_path or n_vocab in 1..2^31-1");
    return HET_OK;
}

static void fill_report(struct het_mkmodel_report *r, const struct plan *pl)
{
    struct stat st;
    memset(r, 0, sizeof *r);
    r->n_tensors  = pl->n;
    r->n_params   = pl->n_params;
    r->n_vocab    = pl->n_vocab;
    r->n_fallback = pl->n_fallback;
    r->file_bytes = stat(pl->p->path, &st) == 0 ? (uint64_t)st.st_size : 0;
    snprintf(r->notes, sizeof r->notes, "%s", pl->notes);
}

static enum het_status write_model(het_gguf_writer *w, struct plan *pl, het_error *err)
{
    const struct het_mkmodel_params *p = pl->p;
    enum het_status st = p->vocab_path ? copy_vocab(w, pl, err) : HET_OK;
    if (st != HET_OK) return st;
    if (!p->vocab_path) pl->n_vocab = p->n_vocab;
    if (!build_plan(pl)) return het_error_set(err, HET_ERR_NOMEM, "mkmodel: out of memory");
    if ((st = set_keys(w, pl)) != HET_OK) return het_error_set(err, st, "mkmodel: cannot set keys");
    for (int64_t i = 0; i < pl->n; i++) {
        const struct spec *s = &pl->t[i];
        st = het_gguf_writer_add_tensor(w, s->name, s->type, s->n_dims, s->ne, NULL);
        if (st != HET_OK)
            return het_error_set(err, st, "mkmodel: cannot add tensor '%s' [%" PRId64 ", %" PRId64 "] %s", s->name,
                                 s->ne[0], s->ne[1], het_type_name(s->type));
    }
    struct fill_ctx ctx = { .pl = pl };
    return het_gguf_writer_write_stream(w, p->path, fill_tensor, &ctx, err);
}

enum het_status het_mkmodel_write_report(const struct het_mkmodel_params *p, struct het_mkmodel_report *report,
                                         het_error *err)
{
    struct plan pl = { .p = p };
    enum het_status st = check_params(p, &pl.head_dim, err);
    if (st != HET_OK) return st;
    pl.n_threads = p->n_threads > 0 ? p->n_threads : omp_get_max_threads();
    het_gguf_writer *w = het_gguf_writer_init();
    if (!w) return het_error_set(err, HET_ERR_NOMEM, "mkmodel: out of memory");
    st = write_model(w, &pl, err);
    if (st == HET_OK && report) fill_report(report, &pl);
    het_gguf_writer_free(w);
    free(pl.t);
    return st;
}

enum het_status het_mkmodel_write(const struct het_mkmodel_params *p, het_error *err)
{
    return het_mkmodel_write_report(p, NULL, err);
}
