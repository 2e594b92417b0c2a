/*
 * ref_forward.c — the scalar reference forward pass (see ref_forward.h).
 * Deliberately naive: no SIMD, no threads, double accumulators, F32 cache.
 */
#include "ref_forward.h"

#include "../model/model_impl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct ref_layer {
    float *attn_norm, *wq, *wk, *wv, *wo, *bq, *bk, *bv, *q_norm, *k_norm, *ffn_norm, *w_gate, *w_up, *w_down;
    /* mixture of experts: router, experts (n_expert consecutive matrices), shared expert */
    float *router, *gate_exps, *up_exps, *down_exps, *gate_inp_sh, *gate_sh, *up_sh, *down_sh;
};

struct ref_model {
    struct het_model_config c;
    float *tok_embd, *output_norm, *output;
    struct ref_layer *L;
};

static float *deq(const struct het_tensor *t)
{
    if (!t) return NULL;
    int64_t n = het_nelements(t), rows = het_nrows(t);
    float *out = malloc((size_t)n * sizeof *out);
    for (int64_t r = 0; r < rows; r++)
        het_dequantize_row(t->type, (const char *)t->data + r * t->nb[1], out + r * t->ne[0], t->ne[0]);
    return out;
}

struct ref_model *ref_model_init(const het_model *m)
{
    struct ref_model *r = calloc(1, sizeof *r);
    r->c = m->cfg;
    r->tok_embd = deq(m->tok_embd);
    r->output_norm = deq(m->output_norm);
    r->output = deq(m->output);
    r->L = calloc((size_t)r->c.n_layer, sizeof *r->L);
    for (int l = 0; l < r->c.n_layer; l++) {
        const struct het_layer *s = &m->layers[l];
        struct ref_layer *d = &r->L[l];
        d->attn_norm = deq(s->attn_norm); d->wq = deq(s->wq); d->wk = deq(s->wk); d->wv = deq(s->wv);
        d->wo = deq(s->wo); d->bq = deq(s->bq); d->bk = deq(s->bk); d->bv = deq(s->bv);
        d->q_norm = deq(s->q_norm); d->k_norm = deq(s->k_norm); d->ffn_norm = deq(s->ffn_norm);
        d->w_gate = deq(s->w_gate); d->w_up = deq(s->w_up); d->w_down = deq(s->w_down);
        d->router = deq(s->ffn_gate_inp); d->gate_exps = deq(s->ffn_gate_exps); d->up_exps = deq(s->ffn_up_exps);
        d->down_exps = deq(s->ffn_down_exps); d->gate_inp_sh = deq(s->ffn_gate_inp_shexp);
        d->gate_sh = deq(s->ffn_gate_shexp); d->up_sh = deq(s->ffn_up_shexp); d->down_sh = deq(s->ffn_down_shexp);
    }
    return r;
}

void ref_model_free(struct ref_model *r)
{
    if (!r) return;
    for (int l = 0; l < r->c.n_layer; l++) {
        struct ref_layer *d = &r->L[l];
        float *p[] = { d->attn_norm, d->wq, d->wk, d->wv, d->wo, d->bq, d->bk, d->bv, d->q_norm, d->k_norm,
                       d->ffn_norm, d->w_gate, d->w_up, d->w_down, d->router, d->gate_exps, d->up_exps,
                       d->down_exps, d->gate_inp_sh, d->gate_sh, d->up_sh, d->down_sh };
        for (size_t i = 0; i < sizeof p / sizeof p[0]; i++) free(p[i]);
    }
    free(r->L);
    free(r->tok_embd);
    free(r->output_norm);
    if (r->output != r->tok_embd) free(r->output);
    free(r);
}

/* y = x / rms(x) * g */
static void rmsnorm(float *y, const float *x, const float *g, int n, float eps)
{
    double ss = 0;
    for (int i = 0; i < n; i++) ss += (double)x[i] * x[i];
    float s = (float)(1.0 / sqrt(ss / n + eps));
    for (int i = 0; i < n; i++) y[i] = x[i] * s * g[i];
}

/* W (d,n) @ x (n,) -> y (d,) */
static void matmul(float *y, const float *x, const float *w, int n, int d)
{
    for (int i = 0; i < d; i++) {
        double acc = 0;
        for (int j = 0; j < n; j++) acc += (double)w[(size_t)i * n + j] * x[j];
        y[i] = (float)acc;
    }
}

static void rope(float *v, int head_dim, int n_rot, int pos, const struct het_model_config *c)
{
    for (int i = 0; i < n_rot / 2; i++) {
        double theta = pos * c->rope_scale * pow(c->rope_base, -2.0 * i / n_rot);
        double cs = cos(theta), sn = sin(theta);
        int a = c->rope_mode == HET_ROPE_NEOX ? i : 2 * i;
        int b = c->rope_mode == HET_ROPE_NEOX ? i + n_rot / 2 : 2 * i + 1;
        double x0 = v[a], x1 = v[b];
        v[a] = (float)(x0 * cs - x1 * sn);
        v[b] = (float)(x0 * sn + x1 * cs);
    }
    (void)head_dim;
}

/* y = w_down(silu(w_gate x) * w_up x), widths n_embd -> F -> n_embd */
static void swiglu_ffn(float *y, const float *x, const float *wg, const float *wu, const float *wd, int E, int F)
{
    float *g = malloc(sizeof(float) * (size_t)F), *u = malloc(sizeof(float) * (size_t)F);
    matmul(g, x, wg, E, F);
    matmul(u, x, wu, E, F);
    for (int i = 0; i < F; i++) g[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
    matmul(y, g, wd, F, E);
    free(g);
    free(u);
}

/* The MoE block as llama.cpp computes it: softmax over the router logits,
 * the k largest (ties: lower index), their probabilities (renormalised for
 * qwen3moe), the weighted sum of the experts; qwen2moe adds the shared
 * expert gated by sigmoid(w_sh . x). */
static void moe_ffn(float *y, const float *x, const struct ref_layer *L, const struct het_model_config *c)
{
    const int E = c->n_embd, NE = c->n_expert, k = c->n_expert_used, F = c->n_ff_exp;
    float *p = malloc(sizeof(float) * (size_t)NE), *ye = malloc(sizeof(float) * (size_t)E);
    bool *used = calloc((size_t)NE, 1);
    matmul(p, x, L->router, E, NE);
    double mx = -1e300, sum = 0;
    for (int e = 0; e < NE; e++) mx = p[e] > mx ? p[e] : mx;
    for (int e = 0; e < NE; e++) sum += exp((double)p[e] - mx);
    for (int e = 0; e < NE; e++) p[e] = (float)(exp((double)p[e] - mx) / sum);
    int sel[1024];
    double wsum = 0;
    for (int s = 0; s < k; s++) {
        int best = -1;
        for (int e = 0; e < NE; e++)
            if (!used[e] && (best < 0 || p[e] > p[best])) best = e;
        used[best] = true;
        sel[s] = best;
        wsum += p[best];
    }
    for (int i = 0; i < E; i++) y[i] = 0;
    for (int s = 0; s < k; s++) {
        const size_t e = (size_t)sel[s];
        swiglu_ffn(ye, x, L->gate_exps + e * F * E, L->up_exps + e * F * E, L->down_exps + e * E * F, E, F);
        const double w = c->expert_norm ? p[e] / wsum : p[e];
        for (int i = 0; i < E; i++) y[i] += (float)(w * ye[i]);
    }
    if (L->gate_inp_sh) {
        double gs = 0;
        for (int i = 0; i < E; i++) gs += (double)L->gate_inp_sh[i] * x[i];
        gs = 1.0 / (1.0 + exp(-gs));
        swiglu_ffn(ye, x, L->gate_sh, L->up_sh, L->down_sh, E, c->n_ff_shexp);
        for (int i = 0; i < E; i++) y[i] += (float)(gs * ye[i]);
    }
    free(p);
    free(ye);
    free(used);
}

int ref_forward(struct ref_model *r, const int32_t *tokens, int n, float *out)
{
    const struct het_model_config *c = &r->c;
    const int E = c->n_embd, hd = c->head_dim, H = c->n_head, KV = c->n_head_kv, F = c->n_ff;
    const int qd = H * hd, kvd = KV * hd;
    float *x = malloc(sizeof(float) * E), *h = malloc(sizeof(float) * E), *h2 = malloc(sizeof(float) * E);
    float *q = malloc(sizeof(float) * qd), *att = malloc(sizeof(float) * qd), *sc = malloc(sizeof(float) * n);
    float *g = malloc(sizeof(float) * F), *u = malloc(sizeof(float) * F);
    float *kc = malloc(sizeof(float) * (size_t)c->n_layer * n * kvd), *vc = malloc(sizeof(float) * (size_t)c->n_layer * n * kvd);
    for (int t = 0; t < n; t++) {
        memcpy(x, r->tok_embd + (size_t)tokens[t] * E, sizeof(float) * E);
        for (int l = 0; l < c->n_layer; l++) {
            const struct ref_layer *L = &r->L[l];
            float *k = kc + ((size_t)l * n + t) * kvd, *v = vc + ((size_t)l * n + t) * kvd;
            rmsnorm(h, x, L->attn_norm, E, c->rms_eps);
            matmul(q, h, L->wq, E, qd);
            matmul(k, h, L->wk, E, kvd);
            matmul(v, h, L->wv, E, kvd);
            if (L->bq) for (int i = 0; i < qd; i++) q[i] += L->bq[i];
            if (L->bk) for (int i = 0; i < kvd; i++) k[i] += L->bk[i];
            if (L->bv) for (int i = 0; i < kvd; i++) v[i] += L->bv[i];
            for (int hh = 0; hh < H; hh++) {
                if (L->q_norm) rmsnorm(q + hh * hd, q + hh * hd, L->q_norm, hd, c->rms_eps);
                rope(q + hh * hd, hd, c->n_rot, t, c);
            }
            for (int hh = 0; hh < KV; hh++) {
                if (L->k_norm) rmsnorm(k + hh * hd, k + hh * hd, L->k_norm, hd, c->rms_eps);
                rope(k + hh * hd, hd, c->n_rot, t, c);
            }
            /* causal attention, GQA */
            for (int hh = 0; hh < H; hh++) {
                int kh = hh / (H / KV);
                double mx = -1e300, sum = 0;
                for (int j = 0; j <= t; j++) {
                    const float *kj = kc + ((size_t)l * n + j) * kvd + kh * hd;
                    double s = 0;
                    for (int i = 0; i < hd; i++) s += (double)q[hh * hd + i] * kj[i];
                    sc[j] = (float)(s / sqrt((double)hd));
                    if (sc[j] > mx) mx = sc[j];
                }
                for (int j = 0; j <= t; j++) sum += exp(sc[j] - mx);
                for (int i = 0; i < hd; i++) {
                    double acc = 0;
                    for (int j = 0; j <= t; j++)
                        acc += exp(sc[j] - mx) / sum * vc[((size_t)l * n + j) * kvd + kh * hd + i];
                    att[hh * hd + i] = (float)acc;
                }
            }
            matmul(h2, att, L->wo, qd, E);
            for (int i = 0; i < E; i++) x[i] += h2[i];
            /* ffn: w_down(silu(w_gate x) * w_up x), or the experts */
            rmsnorm(h, x, L->ffn_norm, E, c->rms_eps);
            if (L->router) {
                moe_ffn(h2, h, L, c);
                for (int i = 0; i < E; i++) x[i] += h2[i];
                continue;
            }
            matmul(g, h, L->w_gate, E, F);
            matmul(u, h, L->w_up, E, F);
            for (int i = 0; i < F; i++) g[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
            matmul(h2, g, L->w_down, F, E);
            for (int i = 0; i < E; i++) x[i] += h2[i];
        }
        rmsnorm(h, x, r->output_norm, E, c->rms_eps);
        matmul(out + (size_t)t * c->n_vocab, h, r->output, E, c->n_vocab);
    }
    free(x); free(h); free(h2); free(q); free(att); free(sc); free(g); free(u); free(kc); free(vc);
    return 0;
}
