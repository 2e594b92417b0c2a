/*
 * test_graph_reuse.c — a graph moved to another n_past
 * (het_arch_llama_advance, what het_context does between decode steps) is
 * the graph a fresh build makes for that n_past: every tensor of the arena
 * alike (op, type, shape, strides, op params, flags, name, view offset,
 * sources, storage), for llama and qwen3 (q/k norms) models, one token and
 * several, forward and back; graphs it does not know are refused and left
 * as they were; given its storage again by the scheduler without a new
 * plan, the same storage as a fresh build's. Then, end to end, decoding with the reused graph gives
 * exactly the logits of a context that builds every step's graph.
 */
#include "het/model.h"
#include "het/npu.h"
#include "model/model_impl.h"
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N_CTX 96

struct cache { struct het_tensor k, v; };

static void cache_init(struct cache *c, const struct het_model_config *cfg)
{
    const int64_t ne[4] = { cfg->head_dim, N_CTX, cfg->n_head_kv, cfg->n_layer };
    het_tensor_init(&c->k, HET_TYPE_F16, 4, ne);
    het_tensor_init(&c->v, HET_TYPE_F16, 4, ne);
    c->k.data = calloc(1, het_nbytes(&c->k));
    c->v.data = calloc(1, het_nbytes(&c->v));
    c->k.flags = c->v.flags = HET_TENSOR_FLAG_STATE;
}

static het_graph *build(const het_model *m, struct cache *c, int32_t n_past, int32_t n_tok, bool all_logits)
{
    het_graph *g = het_graph_init(64 + 56 * het_model_get_config(m)->n_layer);
    struct het_arch_seq s = { 0, n_tok, n_past, &c->k, &c->v };
    struct het_tensor *tok, *pos, *rows;
    CHECK(het_arch_llama_build(m, g, &s, 1, n_tok, all_logits, &tok, &pos, &rows), "build at n_past %d", n_past);
    return g;
}

/* a's tensor t and b's tensor u alike, sources compared by arena index */
static bool same_ref(const het_graph *a, const struct het_tensor *t, const het_graph *b, const struct het_tensor *u)
{
    if (!t || !u) return t == u;
    for (int i = 0; i < het_graph_n_tensors(a); i++)
        if (het_graph_tensor(a, i) == t) return i < het_graph_n_tensors(b) && het_graph_tensor(b, i) == u;
    return t == u; /* outside the arena (weights, caches): the same object */
}

static int graph_diff(const het_graph *a, const het_graph *b)
{
    if (het_graph_n_tensors(a) != het_graph_n_tensors(b) || het_graph_n_nodes(a) != het_graph_n_nodes(b)) return -2;
    for (int i = 0; i < het_graph_n_tensors(a); i++) {
        const struct het_tensor *t = het_graph_tensor(a, i), *u = het_graph_tensor(b, i);
        bool same = t->type == u->type && t->op == u->op && t->flags == u->flags && t->view_offs == u->view_offs &&
                    t->data == u->data && !memcmp(t->ne, u->ne, sizeof t->ne) && !memcmp(t->nb, u->nb, sizeof t->nb) &&
                    !memcmp(t->op_params, u->op_params, sizeof t->op_params) && !strcmp(t->name, u->name) &&
                    same_ref(a, t->view_src, b, u->view_src);
        for (int s = 0; s < HET_MAX_SRC && same; s++) same = same_ref(a, t->src[s], b, u->src[s]);
        if (!same) return i;
    }
    return -1;
}

static void check_moves(const char *what, const het_model *m)
{
    struct cache c;
    cache_init(&c, het_model_get_config(m));
    static const int32_t moves[][2] = { { 5, 6 }, { 6, 7 }, { 0, 1 }, { 40, 12 }, { 3, 80 } };
    static const int32_t toks[] = { 1, 3 };
    for (int a = 0; a < 2; a++)
        for (size_t k = 0; k < sizeof toks / sizeof toks[0]; k++)
            for (size_t i = 0; i < sizeof moves / sizeof moves[0]; i++) {
                const int32_t from = moves[i][0], to = moves[i][1], n = toks[k];
                het_graph *moved = build(m, &c, from, n, a), *fresh = build(m, &c, to, n, a);
                struct het_arch_seq s = { 0, n, to, &c.k, &c.v };
                CHECK(het_arch_llama_advance(moved, &s, from), "%s: advance %d -> %d (%d tokens)", what, from, to, n);
                int d = graph_diff(moved, fresh);
                CHECK(d == -1, "%s: %d -> %d (%d tokens, all logits %d): tensor %d ('%s') differs from a fresh build",
                      what, from, to, n, a, d, d >= 0 ? het_graph_tensor(fresh, d)->name : "-");
                het_graph_free(moved);
                het_graph_free(fresh);
            }
    /* refused, and left as it was: past the cache's end, the wrong n_past, another cache, two sequences */
    het_graph *g = build(m, &c, 10, 1, false), *same = build(m, &c, 10, 1, false);
    struct het_arch_seq past_end = { 0, 1, N_CTX, &c.k, &c.v }, wrong_from = { 0, 1, 11, &c.k, &c.v };
    CHECK(!het_arch_llama_advance(g, &past_end, 10), "%s: n_past %d of a %d-token cache refused", what, N_CTX, N_CTX);
    CHECK(!het_arch_llama_advance(g, &wrong_from, 9), "%s: a graph not at n_past 9 refused", what);
    struct cache other;
    cache_init(&other, het_model_get_config(m));
    struct het_arch_seq other_cache = { 0, 1, 11, &other.k, &other.v };
    CHECK(!het_arch_llama_advance(g, &other_cache, 10), "%s: another sequence's cache refused", what);
    CHECK(graph_diff(g, same) == -1, "%s: a refused graph is left as it was", what);
    het_graph *two = het_graph_init(64 + 56 * 2 * het_model_get_config(m)->n_layer);
    struct het_arch_seq seqs[2] = { { 0, 1, 4, &c.k, &c.v }, { 1, 1, 4, &other.k, &other.v } };
    struct het_tensor *tok, *pos, *rows;
    CHECK(het_arch_llama_build(m, two, seqs, 2, 2, false, &tok, &pos, &rows), "%s: build of two sequences", what);
    struct het_arch_seq next = { 0, 1, 5, &c.k, &c.v };
    CHECK(!het_arch_llama_advance(two, &next, 4), "%s: a graph of two sequences refused", what);
    het_graph_free(two);
    het_graph_free(g);
    het_graph_free(same);
    free(other.k.data); free(other.v.data);
    free(c.k.data); free(c.v.data);
}

struct rig { het_device *dev[2]; het_device *cpu; het_sched *sched; het_context *ctx; };

/* The CPU alone, or (npu) beside the emulated NPU with every layer's
 * output projection pinned to it: the CPU then runs a split before and
 * after each of those, several a token. */
static void rig_open(struct rig *r, het_model *m, bool npu)
{
    het_error err = { 0 };
    memset(r, 0, sizeof *r);
    r->cpu = r->dev[0] = het_cpu_device_init(0, &err);
    if (npu && r->cpu) {
        struct het_npu_params np;
        het_npu_params_default(&np, HET_NPU_EMULATE);
        np.no_cache = true;
        r->dev[1] = het_npu_device_init_params(&np, &err);
        CHECK(r->dev[1], "npu: %s", err.msg);
        if (!r->dev[1]) return;
    }
    const struct het_plan_pin pin = { "attn_output*", 1 };
    struct het_sched_params sp = { .devices = r->dev, .n_devices = npu ? 2 : 1, .policy = &het_policy_single,
                                   .policy_device = 0, .pins = &pin, .n_pins = npu };
    r->sched = r->cpu ? het_sched_init(&sp, &err) : NULL;
    struct het_context_params cp = { .n_ctx = N_CTX, .sched = r->sched };
    r->ctx = r->sched ? het_context_init(m, &cp, &err) : NULL;
    CHECK(r->ctx, "context: %s", err.msg);
}

static void rig_close(struct rig *r)
{
    het_context_free(r->ctx);
    het_sched_free(r->sched);
    het_device_free(r->dev[1]);
    het_device_free(r->cpu);
}

/* The scheduler gives a moved graph its storage again without planning it
 * (het_sched_realloc_graph): every tensor, storage included, as a fresh
 * build of that step given storage by het_sched_alloc_graph; a graph that
 * was not the last one given storage gets it planned anew. */
static void check_realloc(const char *what, het_model *m)
{
    struct rig r;
    rig_open(&r, m, false);
    if (!r.ctx) return;
    struct cache c;
    cache_init(&c, het_model_get_config(m));
    het_error err = { 0 };
    het_graph *moved = build(m, &c, 5, 1, false), *fresh = build(m, &c, 6, 1, false);
    CHECK(het_sched_alloc_graph(r.sched, moved, &err) == HET_OK, "%s: alloc: %s", what, err.msg);
    struct het_arch_seq s = { 0, 1, 6, &c.k, &c.v };
    CHECK(het_arch_llama_advance(moved, &s, 5), "%s: advance", what);
    CHECK(het_graph_tensor(moved, het_graph_n_tensors(moved) - 1)->data == NULL, "%s: advance left storage", what);
    CHECK(het_sched_realloc_graph(r.sched, moved, &err) == HET_OK, "%s: realloc: %s", what, err.msg);
    CHECK(het_sched_alloc_graph(r.sched, fresh, &err) == HET_OK, "%s: alloc: %s", what, err.msg);
    int d = graph_diff(moved, fresh);
    CHECK(d == -1, "%s: given storage again, tensor %d ('%s') differs from a fresh build's", what, d,
          d >= 0 ? het_graph_tensor(fresh, d)->name : "-");
    /* moved is not the last graph given storage now: planned anew */
    s.n_past = 7;
    CHECK(het_arch_llama_advance(moved, &s, 6), "%s: advance", what);
    het_graph *fresh7 = build(m, &c, 7, 1, false);
    CHECK(het_sched_realloc_graph(r.sched, moved, &err) == HET_OK, "%s: realloc: %s", what, err.msg);
    CHECK(het_sched_alloc_graph(r.sched, fresh7, &err) == HET_OK, "%s: alloc: %s", what, err.msg);
    d = graph_diff(moved, fresh7);
    CHECK(d == -1, "%s: another graph given storage last: tensor %d ('%s') differs", what, d,
          d >= 0 ? het_graph_tensor(fresh7, d)->name : "-");
    het_graph_free(moved);
    het_graph_free(fresh);
    het_graph_free(fresh7);
    free(c.k.data); free(c.v.data);
    rig_close(&r);
}

/* Decode in one context (its graph reused step after step) and in another
 * whose graph is rebuilt every step (a one-token eval of all logits in
 * between changes the batch shape twice): the logits are bit for bit the
 * same, steps after a reset and a seq_keep included. npu: beside the
 * emulated NPU (rig_open), the CPU running several splits a token; returns
 * whether the NPU ran any. */
static bool check_decode(const char *what, het_model *m, bool npu)
{
    const int V = het_model_get_config(m)->n_vocab;
    struct rig a, b;
    rig_open(&a, m, npu);
    rig_open(&b, m, npu);
    if (!a.ctx || !b.ctx) {
        rig_close(&a);
        rig_close(&b);
        return false;
    }
    het_error err = { 0 };
    const int32_t prompt[] = { 1, 403, 407, 261, 378 };
    CHECK(het_context_eval(a.ctx, prompt, 5, false, &err) == HET_OK, "%s: %s", what, err.msg);
    CHECK(het_context_eval(b.ctx, prompt, 5, false, &err) == HET_OK, "%s: %s", what, err.msg);
    int bad = 0;
    for (int i = 0; i < 24; i++) {
        if (i == 12) het_context_seq_keep(a.ctx, 0, 7), het_context_seq_keep(b.ctx, 0, 7);
        if (i == 18) het_context_reset(a.ctx), het_context_reset(b.ctx);
        const int32_t t = (int32_t)(7 + 13 * i) % V;
        CHECK(het_context_eval(a.ctx, &t, 1, false, &err) == HET_OK, "%s: %s", what, err.msg);
        /* b: rebuilt every step (all_logits flips the batch shape each time) */
        CHECK(het_context_eval(b.ctx, &t, 1, i % 2, &err) == HET_OK, "%s: %s", what, err.msg);
        int32_t na, nb;
        const float *la = het_context_logits(a.ctx, &na), *lb = het_context_logits(b.ctx, &nb);
        if (na != 1 || nb != 1 || memcmp(la, lb, sizeof(float) * (size_t)V)) bad++;
    }
    CHECK(bad == 0, "%s: %d of 24 decode steps differ between a reused and a rebuilt graph", what, bad);
    /* the CPU device ran the moved graph on what it had decided the step
     * before (het_device.layout), each of its splits on its own, the rebuilt
     * one never: 24 steps, the first after the prompt's graph and the two
     * after the seq_keep and the reset on new storage; a step's every split
     * kept or none */
    struct het_device_stats sa, sb, na = { 0 };
    het_device_get_stats(a.cpu, &sa);
    het_device_get_stats(b.cpu, &sb);
    if (npu) het_device_get_stats(a.dev[1], &na);
    /* where the emulated NPU runs the projections (it refuses shapes off its
     * tiles: stories260K's), the CPU runs a split a layer and one more */
    const unsigned long long per = na.n_splits ? (unsigned long long)het_model_get_config(m)->n_layer + 1 : 1;
    CHECK(!na.n_splits || na.n_splits >= 24 * (per - 1), "%s: %llu NPU splits in 24 steps of %llu layers", what,
          (unsigned long long)na.n_splits, per - 1);
    CHECK(sa.n_splits_kept >= 20 * per && sa.n_splits_kept < sa.n_splits,
          "%s%s: %llu of %llu splits of a moved graph ran on kept decisions (%llu a step)", what,
          npu ? " beside the NPU" : "", (unsigned long long)sa.n_splits_kept, (unsigned long long)sa.n_splits, per);
    CHECK(sb.n_splits_kept == 0, "%s: %llu splits of graphs rebuilt every step ran on kept decisions", what,
          (unsigned long long)sb.n_splits_kept);
    rig_close(&a);
    rig_close(&b);
    return na.n_splits > 0;
}

int main(void)
{
    int ran = 0;
    for (int i = 0; i < 2; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s",
                 i == 0 ? het_test_source("models/stories260K.gguf")
                        : het_test_shared("models/synthetic/qwen3-tiny-q8_0.gguf"));
        het_error err = { 0 };
        het_model *m = het_test_file_exists(path) ? het_model_load(path, &err) : NULL;
        if (!m) continue;
        check_moves(path, m);
        check_realloc(path, m);
        check_decode(path, m, false);
        const bool split = check_decode(path, m, true);
        CHECK(split || i == 0, "%s: the emulated NPU ran none of the pinned projections", path);
        het_model_free(m);
        ran++;
    }
    if (!ran) het_test_skip("no fixture model found");
    return het_test_finish();
}
