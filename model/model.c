/*
 * model.c — loading a GGUF model: hyperparameters, weight tensors (pointing
 * into the mapped file, never copied) and the tokenizer.
 *
 * Every weight the architecture needs is checked for presence, type and
 * exact shape here, so graph building and kernels can trust them; a bad
 * file is one error line naming the tensor or key.
 */
#include "model/gguf_internal.h"
#include "model/model_impl.h"
#include "sched/device_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const arch_names[HET_ARCH_COUNT] = {
    [HET_ARCH_LLAMA] = "llama",
    [HET_ARCH_QWEN2] = "qwen2",
    [HET_ARCH_QWEN3] = "qwen3",
    [HET_ARCH_QWEN2MOE] = "qwen2moe",
    [HET_ARCH_QWEN3MOE] = "qwen3moe",
};

const char *het_arch_name(enum het_arch arch)
{
    return (unsigned)arch < HET_ARCH_COUNT ? arch_names[arch] : "?";
}

/* ---------------------------------------------------------------------------
 * hyperparameters                                                           */

static bool get_arch_int(const het_gguf *g, const char *arch, const char *key, int64_t *out)
{
    char full[128];
    snprintf(full, sizeof full, "%s.%s", arch, key);
    return het_gguf_get_int(g, full, out);
}

static bool get_arch_float(const het_gguf *g, const char *arch, const char *key, double *out)
{
    char full[128];
    snprintf(full, sizeof full, "%s.%s", arch, key);
    return het_gguf_get_float(g, full, out);
}

static enum het_status need_int(const het_gguf *g, const char *arch, const char *key, int32_t *out,
                                int64_t max, het_error *err)
{
    int64_t v;
    if (!get_arch_int(g, arch, key, &v))
        return het_error_set(err, HET_ERR_FORMAT, "model: missing or non-integer key %s.%s", arch, key);
    if (v <= 0 || v > max)
        return het_error_set(err, HET_ERR_FORMAT, "model: %s.%s = %lld out of range (1..%lld)", arch, key,
                             (long long)v, (long long)max);
    *out = (int32_t)v;
    return HET_OK;
}

/* Expert counts and widths, with llama.cpp's fallbacks (llama-model.cpp,
 * models/qwen{2,3}moe.cpp): both counts required in 1..1024 with k <= E;
 * expert width n_ff / k when absent; the shared expert's width n_ff. */
static enum het_status load_moe_config(struct het_model_config *c, const het_gguf *g, const char *arch,
                                       het_error *err)
{
    enum het_status st;
    if ((st = need_int(g, arch, "expert_count", &c->n_expert, 1024, err)) ||
        (st = need_int(g, arch, "expert_used_count", &c->n_expert_used, 1024, err)))
        return st;
    if (c->n_expert_used > c->n_expert)
        return het_error_set(err, HET_ERR_FORMAT, "model: %s.expert_used_count = %d exceeds expert_count = %d", arch,
                             c->n_expert_used, c->n_expert);
    int64_t v;
    if (get_arch_int(g, arch, "expert_feed_forward_length", &v)) {
        if ((st = need_int(g, arch, "expert_feed_forward_length", &c->n_ff_exp, 1 << 22, err))) return st;
    } else {
        c->n_ff_exp = c->n_ff / c->n_expert_used;
    }
    if (c->n_ff_exp <= 0)
        return het_error_set(err, HET_ERR_FORMAT, "model: %s: no expert_feed_forward_length and feed_forward_length "
                             "%d / %d experts used is 0", arch, c->n_ff, c->n_expert_used);
    if (c->arch == HET_ARCH_QWEN2MOE) {
        if (get_arch_int(g, arch, "expert_shared_feed_forward_length", &v)) {
            if ((st = need_int(g, arch, "expert_shared_feed_forward_length", &c->n_ff_shexp, 1 << 22, err)))
                return st;
        } else {
            c->n_ff_shexp = c->n_ff;
        }
        if (c->n_ff_shexp <= 0)
            return het_error_set(err, HET_ERR_FORMAT, "model: %s: no expert_shared_feed_forward_length and no "
                                 "feed_forward_length for the shared expert", arch);
    }
    c->expert_norm = c->arch == HET_ARCH_QWEN3MOE;
    return HET_OK;
}

static enum het_status load_config(struct het_model_config *c, const het_gguf *g, het_error *err)
{
    const char *arch = het_gguf_get_str(g, "general.architecture");
    if (!arch) return het_error_set(err, HET_ERR_FORMAT, "model: missing general.architecture");
    snprintf(c->arch_name, sizeof c->arch_name, "%s", arch);
    c->arch = HET_ARCH_COUNT;
    for (int a = 0; a < HET_ARCH_COUNT; a++)
        if (!strcmp(arch, arch_names[a])) c->arch = (enum het_arch)a;
    if (c->arch == HET_ARCH_COUNT)
        return het_error_set(err, HET_ERR_UNSUPPORTED,
                             "model: unsupported architecture '%s' (supported: llama, qwen2, qwen3, qwen2moe, qwen3moe)",
                             arch);

    enum het_status st;
    int64_t v;
    const bool moe = het_arch_is_moe(c->arch);
    /* a MoE file may leave the dense width out when it gives the expert width */
    const bool ff_optional = moe && !get_arch_int(g, arch, "feed_forward_length", &v) &&
                             get_arch_int(g, arch, "expert_feed_forward_length", &v);
    if ((st = need_int(g, arch, "embedding_length", &c->n_embd, 1 << 20, err)) ||
        (st = need_int(g, arch, "block_count", &c->n_layer, 4096, err)) ||
        (!ff_optional && (st = need_int(g, arch, "feed_forward_length", &c->n_ff, 1 << 22, err))) ||
        (st = need_int(g, arch, "attention.head_count", &c->n_head, 1 << 16, err)))
        return st;
    if (moe && (st = load_moe_config(c, g, arch, err)) != HET_OK) return st;
    c->n_head_kv = get_arch_int(g, arch, "attention.head_count_kv", &v) ? (int32_t)v : c->n_head;
    if (c->n_head_kv <= 0 || c->n_head % c->n_head_kv)
        return het_error_set(err, HET_ERR_FORMAT, "model: %s.attention.head_count_kv = %d does not divide %d heads",
                             arch, c->n_head_kv, c->n_head);
    c->head_dim = get_arch_int(g, arch, "attention.key_length", &v) ? (int32_t)v : c->n_embd / c->n_head;
    if (c->head_dim <= 0 || c->head_dim > 1024)
        return het_error_set(err, HET_ERR_FORMAT, "model: head dimension %d out of range", c->head_dim);
    c->n_ctx_train = get_arch_int(g, arch, "context_length", &v) && v > 0 && v < (1 << 24) ? (int32_t)v : 4096;
    c->n_rot = get_arch_int(g, arch, "rope.dimension_count", &v) ? (int32_t)v : c->head_dim;
    if (c->n_rot <= 0 || c->n_rot > c->head_dim || c->n_rot % 2)
        return het_error_set(err, HET_ERR_FORMAT, "model: %s.rope.dimension_count = %d invalid for head_dim %d",
                             arch, c->n_rot, c->head_dim);
    double f;
    c->rms_eps = get_arch_float(g, arch, "attention.layer_norm_rms_epsilon", &f) ? (float)f : 1e-5f;
    c->rope_base = get_arch_float(g, arch, "rope.freq_base", &f) ? (float)f : 10000.0f;
    c->rope_scale = 1.0f;
    const char *scaling = NULL;
    {
        char key[128];
        snprintf(key, sizeof key, "%s.rope.scaling.type", arch);
        scaling = het_gguf_get_str(g, key);
    }
    if (scaling && !strcmp(scaling, "linear") && get_arch_float(g, arch, "rope.scaling.factor", &f) && f > 0)
        c->rope_scale = (float)(1.0 / f);
    else if (get_arch_float(g, arch, "rope.scale_linear", &f) && f > 0)
        c->rope_scale = (float)(1.0 / f);
    c->rope_mode = c->arch == HET_ARCH_LLAMA ? HET_ROPE_NORMAL : HET_ROPE_NEOX;
    return HET_OK;
}

/* ---------------------------------------------------------------------------
 * weights                                                                   */

static struct het_tensor *find_weight(struct het_model *m, const char *name)
{
    for (int i = 0; i < m->n_weights; i++)
        if (!strcmp(m->weights[i].name, name)) return &m->weights[i];
    return NULL;
}

/* Look up name and check its shape (ne1 = 0 for 1-D). required=false allows absence. */
static enum het_status bind(struct het_model *m, struct het_tensor **out, const char *name, int64_t ne0,
                            int64_t ne1, bool required, het_error *err)
{
    struct het_tensor *t = find_weight(m, name);
    *out = t;
    if (!t) {
        if (!required) return HET_OK;
        return het_error_set(err, HET_ERR_FORMAT, "model: missing tensor '%s'", name);
    }
    int64_t want1 = ne1 ? ne1 : 1;
    if (t->ne[0] != ne0 || t->ne[1] != want1 || t->ne[2] != 1 || t->ne[3] != 1)
        return het_error_set(err, HET_ERR_FORMAT,
                             "model: tensor '%s' has shape [%lld, %lld, %lld, %lld], expected [%lld, %lld]", name,
                             (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2], (long long)t->ne[3],
                             (long long)ne0, (long long)want1);
    if (!het_type_get_traits(t->type)->can_compute)
        return het_error_set(err, HET_ERR_UNSUPPORTED, "model: tensor '%s' has unsupported type %s", name,
                             het_type_name(t->type));
    if (ne1 == 0 && t->type != HET_TYPE_F32)
        return het_error_set(err, HET_ERR_UNSUPPORTED, "model: 1-D tensor '%s' must be f32, not %s", name,
                             het_type_name(t->type));
    return HET_OK;
}

/* A 3-D expert tensor (ne0, ne1, n_expert), each expert one contiguous block. */
static enum het_status bind_experts(struct het_model *m, struct het_tensor **out, const char *name, int64_t ne0,
                                    int64_t ne1, het_error *err)
{
    struct het_tensor *t = find_weight(m, name);
    *out = t;
    if (!t) return het_error_set(err, HET_ERR_FORMAT, "model: missing tensor '%s'", name);
    if (t->ne[0] != ne0 || t->ne[1] != ne1 || t->ne[2] != m->cfg.n_expert || t->ne[3] != 1)
        return het_error_set(err, HET_ERR_FORMAT,
                             "model: tensor '%s' has shape [%lld, %lld, %lld, %lld], expected [%lld, %lld, %d]", name,
                             (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2], (long long)t->ne[3],
                             (long long)ne0, (long long)ne1, m->cfg.n_expert);
    if (!het_type_get_traits(t->type)->can_compute)
        return het_error_set(err, HET_ERR_UNSUPPORTED, "model: tensor '%s' has unsupported type %s", name,
                             het_type_name(t->type));
    return HET_OK;
}

static enum het_status bind_layer(struct het_model *m, int il, het_error *err)
{
    const struct het_model_config *c = &m->cfg;
    struct het_layer *L = &m->layers[il];
    const int64_t q_dim = (int64_t)c->n_head * c->head_dim, kv_dim = (int64_t)c->n_head_kv * c->head_dim;
    const bool qwen2 = het_arch_has_qkv_bias(c->arch), qwen3 = het_arch_has_qk_norm(c->arch);
    const bool moe = het_arch_is_moe(c->arch), shexp = c->n_ff_shexp > 0;
    char n[96];
    enum het_status st;
#define BIND(field, suffix, ne0, ne1, req)                                   \
    snprintf(n, sizeof n, "blk.%d.%s", il, suffix);                        \
    if ((st = bind(m, &L->field, n, ne0, ne1, req, err)) != HET_OK) return st;
    BIND(attn_norm, "attn_norm.weight", c->n_embd, 0, true);
    BIND(wq, "attn_q.weight", c->n_embd, q_dim, true);
    BIND(wk, "attn_k.weight", c->n_embd, kv_dim, true);
    BIND(wv, "attn_v.weight", c->n_embd, kv_dim, true);
    BIND(wo, "attn_output.weight", q_dim, c->n_embd, true);
    BIND(bq, "attn_q.bias", q_dim, 0, qwen2);
    BIND(bk, "attn_k.bias", kv_dim, 0, qwen2);
    BIND(bv, "attn_v.bias", kv_dim, 0, qwen2);
    BIND(q_norm, "attn_q_norm.weight", c->head_dim, 0, qwen3);
    BIND(k_norm, "attn_k_norm.weight", c->head_dim, 0, qwen3);
    BIND(ffn_norm, "ffn_norm.weight", c->n_embd, 0, true);
    if (!moe) {
        BIND(w_gate, "ffn_gate.weight", c->n_embd, c->n_ff, true);
        BIND(w_up, "ffn_up.weight", c->n_embd, c->n_ff, true);
        BIND(w_down, "ffn_down.weight", c->n_ff, c->n_embd, true);
        return HET_OK;
    }
    BIND(ffn_gate_inp, "ffn_gate_inp.weight", c->n_embd, c->n_expert, true);
    if (shexp) {
        BIND(ffn_gate_inp_shexp, "ffn_gate_inp_shexp.weight", c->n_embd, 0, true);
        BIND(ffn_gate_shexp, "ffn_gate_shexp.weight", c->n_embd, c->n_ff_shexp, true);
        BIND(ffn_up_shexp, "ffn_up_shexp.weight", c->n_embd, c->n_ff_shexp, true);
        BIND(ffn_down_shexp, "ffn_down_shexp.weight", c->n_ff_shexp, c->n_embd, true);
    }
#undef BIND
#define BIND3(field, suffix, ne0, ne1)                                       \
    snprintf(n, sizeof n, "blk.%d.%s", il, suffix);                        \
    if ((st = bind_experts(m, &L->field, n, ne0, ne1, err)) != HET_OK) return st;
    BIND3(ffn_gate_exps, "ffn_gate_exps.weight", c->n_embd, c->n_ff_exp);
    BIND3(ffn_up_exps, "ffn_up_exps.weight", c->n_embd, c->n_ff_exp);
    BIND3(ffn_down_exps, "ffn_down_exps.weight", c->n_ff_exp, c->n_embd);
#undef BIND3
    return HET_OK;
}

static enum het_status load_weights(struct het_model *m, het_error *err)
{
    const het_gguf *g = m->gguf;
    int64_t nt = het_gguf_n_tensors(g);
    m->weights = calloc((size_t)(nt > 0 ? nt : 1), sizeof *m->weights);
    if (!m->weights) return het_error_set(err, HET_ERR_NOMEM, "model: out of memory");
    m->n_weights = (int)nt;
    for (int64_t i = 0; i < nt; i++) {
        const struct het_gguf_tensor_info *ti = het_gguf_tensor(g, i);
        struct het_tensor *t = &m->weights[i];
        het_tensor_init(t, ti->type, 4, ti->ne);
        t->data = (void *)ti->data;
        t->flags = HET_TENSOR_FLAG_WEIGHT;
        snprintf(t->name, sizeof t->name, "%s", ti->name);
        m->weight_bytes += ti->size;
        if (!t->data)
            return het_error_set(err, HET_ERR_FORMAT, "model: tensor '%s' has no data (vocab-only file?)", ti->name);
    }
    const struct het_tensor *emb = find_weight(m, "token_embd.weight");
    if (emb) {
        if (emb->ne[1] < m->cfg.n_vocab)
            return het_error_set(err, HET_ERR_FORMAT, "model: token_embd.weight has %lld rows, tokenizer has %d tokens",
                                 (long long)emb->ne[1], m->cfg.n_vocab);
        m->cfg.n_vocab = (int32_t)emb->ne[1];
    }
    const struct het_model_config *c = &m->cfg;
    enum het_status st;
    if ((st = bind(m, &m->tok_embd, "token_embd.weight", c->n_embd, c->n_vocab, true, err)) ||
        (st = bind(m, &m->output_norm, "output_norm.weight", c->n_embd, 0, true, err)) ||
        (st = bind(m, &m->output, "output.weight", c->n_embd, c->n_vocab, false, err)))
        return st;
    if (!m->output) {
        m->output = m->tok_embd;
        m->cfg.tied_output = true;
    }
    m->layers = calloc((size_t)c->n_layer, sizeof *m->layers);
    if (!m->layers) return het_error_set(err, HET_ERR_NOMEM, "model: out of memory");
    for (int il = 0; il < c->n_layer; il++)
        if ((st = bind_layer(m, il, err)) != HET_OK) return st;
    return HET_OK;
}

het_model *het_model_load(const char *path, het_error *err)
{
    struct het_model *m = calloc(1, sizeof *m);
    if (!m) {
        het_error_set(err, HET_ERR_NOMEM, "model: out of memory");
        return NULL;
    }
    m->gguf = het_gguf_open(path, err);
    if (!m->gguf) goto fail;
    if (load_config(&m->cfg, m->gguf, err) != HET_OK) goto fail;
    m->tok = het_tokenizer_from_gguf(m->gguf, err);
    if (!m->tok) goto fail;
    m->cfg.n_vocab = het_tokenizer_n_vocab(m->tok);
    if (load_weights(m, err) != HET_OK) goto fail;
    return m;
fail:
    if (err) het_error_prefix(err, "%s", path);
    het_model_free(m);
    return NULL;
}

het_model *het_model_load_into(const char *path, het_pool *pool, het_error *err)
{
    het_model *m = het_model_load(path, err);
    if (m && pool && het_model_place_in_pool(m, pool, err) != HET_OK) {
        if (err) het_error_prefix(err, "%s", path);
        het_model_free(m);
        return NULL;
    }
    return m;
}

/* [lo, hi): the bytes of the mapping the weights occupy, lo rounded down to
 * a page so that every tensor keeps its address modulo 4096. */
static void weight_span(const struct het_model *m, const uint8_t **lo, const uint8_t **hi)
{
    *lo = *hi = NULL;
    for (int i = 0; i < m->n_weights; i++) {
        const uint8_t *a = m->weights[i].data, *b = a + het_nbytes(&m->weights[i]);
        if (!*lo || a < *lo) *lo = a;
        if (!*hi || b > *hi) *hi = b;
    }
    if (*lo) *lo = (const uint8_t *)((uintptr_t)*lo & ~(uintptr_t)4095);
}

enum het_status het_model_place_in_pool(het_model *m, het_pool *pool, het_error *err)
{
    if (!pool) return het_error_set(err, HET_ERR_INVALID, "model: no memory pool given");
    if (m->pool) return het_error_set(err, HET_ERR_INVALID, "model: the weights are already in a memory pool");
    for (int i = 0; i < m->n_weights; i++)
        if (m->weights[i].extra)
            return het_error_set(err, HET_ERR_INVALID, "model: '%s' was already prepared by a device; place the "
                                 "weights in the pool before het_model_prepare", m->weights[i].name);
    const uint8_t *lo, *hi;
    weight_span(m, &lo, &hi);
    if (!lo || hi == lo) return HET_OK;
    const size_t size = (size_t)(hi - lo);
    struct het_slice sl;
    enum het_status st = het_pool_alloc(pool, size, 0, &sl, err);
    if (st != HET_OK) {
        if (err) het_error_prefix(err, "model: weights (%zu bytes)", size);
        return st;
    }
    uint8_t *dst = het_pool_ptr(pool, sl.offset);
    st = het_pool_sync_begin(pool, sl, HET_POOL_SYNC_WRITE, err);   /* written once, by the CPU */
    if (st == HET_OK) {
        memcpy(dst, lo, size);
        st = het_pool_sync_end(pool, sl, HET_POOL_SYNC_WRITE, err);
    }
    if (st != HET_OK) {
        het_pool_release(pool, sl, NULL);
        return st;
    }
    for (int i = 0; i < m->n_weights; i++)
        m->weights[i].data = dst + ((const uint8_t *)m->weights[i].data - lo);
    m->pool = pool;
    m->slice = sl;
    return HET_OK;
}

het_pool *het_model_pool(const het_model *m) { return m->pool; }

void het_model_free(het_model *m)
{
    if (!m) return;
    if (m->pool) het_pool_release(m->pool, m->slice, NULL);
    het_tokenizer_free(m->tok);
    het_gguf_close(m->gguf);
    free(m->weights);
    free(m->layers);
    free(m);
}

const struct het_model_config *het_model_get_config(const het_model *m) { return &m->cfg; }
const het_tokenizer *het_model_tokenizer(const het_model *m) { return m->tok; }
const het_gguf *het_model_gguf(const het_model *m) { return m->gguf; }
size_t het_model_weight_bytes(const het_model *m) { return m->weight_bytes; }
int het_model_n_weights(const het_model *m) { return m->n_weights; }
struct het_tensor *het_model_weight(const het_model *m, int i) { return &m->weights[i]; }

/* May a device that repacks a weight drop its pages from the file mapping?
 * Only when the weights are used from our own read-only mapping (never a
 * pool slice or a caller's buffer, whose pages DONTNEED would discard).
 * A device that reads weights in place (Vulkan imports the mapping) may be
 * in the set too: dropping a page only unmaps it, and a read faults it back
 * from the file, so only what that device actually runs becomes resident
 * again. Keeping every page for it made the CPU keep the experts of a
 * mixture unpacked (resident once, read 2.4x slower), and with cpu+vulkan
 * (the default) a 30B-A3B decode ran at 0.63x the CPU's alone although the
 * plan ran the experts on the CPU. */
static bool weights_droppable(const struct het_model *m, het_sched *s)
{
    (void)s;
    return !m->pool && het_gguf_internal_is_mapped(m->gguf);
}

/* Where a layer's weight comes in a decode: q, k, v, the output
 * projection, the router and experts, the FFN (others after, as they
 * came). */
static int weight_use_rank(const char *name)
{
    static const char *const order[] = {
        ".attn_q.", ".attn_k.", ".attn_v.", ".attn_output.", ".ffn_gate_inp.", ".ffn_gate_exps.", ".ffn_up_exps.",
        ".ffn_down_exps.", ".ffn_gate_shexp.", ".ffn_up_shexp.", ".ffn_down_shexp.", ".ffn_gate.", ".ffn_up.",
        ".ffn_down.",
    };
    for (int i = 0; i < (int)(sizeof order / sizeof order[0]); i++)
        if (strstr(name, order[i])) return i;
    return (int)(sizeof order / sizeof order[0]);
}

static int weight_layer(const char *name)
{
    int l = -1;
    return sscanf(name, "blk.%d.", &l) == 1 ? l : -1;
}

/* Each layer's weights in the order a decode reads them (a stable sort of
 * each run of one layer's tensors): the CPU device lays its panels out in
 * the order it is given them, so that each thread's share of a token's
 * weights is one range (devices/cpu/cpu_device.c). */
static void weights_in_use_order(struct het_tensor **w, int n)
{
    for (int i = 0; i < n;) {
        const int l = weight_layer(w[i]->name);
        int e = i + 1;
        while (e < n && l >= 0 && weight_layer(w[e]->name) == l) e++;
        for (int x = i + 1; x < e; x++) /* insertion sort: a layer has a dozen tensors */
            for (int y = x; y > i && weight_use_rank(w[y - 1]->name) > weight_use_rank(w[y]->name); y--) {
                struct het_tensor *t = w[y];
                w[y] = w[y - 1];
                w[y - 1] = t;
            }
        i = e;
    }
}

enum het_status het_model_prepare(het_model *m, het_sched *s, het_error *err)
{
    struct het_tensor *ptrs[m->n_weights > 0 ? m->n_weights : 1];
    const bool droppable = weights_droppable(m, s);
    for (int i = 0; i < m->n_weights; i++) {
        ptrs[i] = &m->weights[i];
        if (droppable) m->weights[i].flags |= HET_TENSOR_FLAG_DROPPABLE;
        else m->weights[i].flags &= ~(uint32_t)HET_TENSOR_FLAG_DROPPABLE;
    }
    weights_in_use_order(ptrs, m->n_weights);
    for (int d = 0; d < het_sched_n_devices(s); d++) {
        het_device *dev = het_sched_device(s, d);
        enum het_status st = het_device_prepare_weights(dev, ptrs, m->n_weights, err);
        if (st != HET_OK) return st;
    }
    return HET_OK;
}
