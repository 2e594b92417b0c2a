/*
 * profile.c — the het_profile object: identity, device-wide costs, the
 * per-(op class, weight type) models with their samples, hand-offs, and
 * prediction. Also what a node costs independent of devices (flops, bytes,
 * rows), and the unmeasured defaults per device kind.
 *
 * JSON files and the cache folder are policy/profile_json.c; fitting is
 * policy/fit.c; measuring is policy/calibrate.c.
 */
#include "policy/profile_impl.h"

#include "sched/device_impl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const class_names[HET_OPCLASS_COUNT] = {
    [HET_OPCLASS_MATMUL] = "matmul", [HET_OPCLASS_ATTN] = "attn",         [HET_OPCLASS_NORM] = "norm",
    [HET_OPCLASS_ROPE] = "rope",     [HET_OPCLASS_SOFTMAX] = "softmax",   [HET_OPCLASS_ELTWISE] = "eltwise",
    [HET_OPCLASS_COPY] = "copy",     [HET_OPCLASS_MOE] = "moe",
};
_Static_assert(HET_OPCLASS_COUNT == 8, "class_names needs updating");

const char *het_op_class_name(enum het_op_class c)
{
    return c >= 0 && c < HET_OPCLASS_COUNT ? class_names[c] : "none";
}

enum het_op_class het_op_class_from_name(const char *name)
{
    for (int c = 0; c < HET_OPCLASS_COUNT; c++)
        if (!strcmp(class_names[c], name)) return (enum het_op_class)c;
    return HET_OPCLASS_NONE;
}

/* ---------------------------------------------------------------------------
 * what a node costs                                                         */

/* bytes of t's elements stored densely (views of a cache count what they see) */
static double dense_bytes(const struct het_tensor *t)
{
    const struct het_type_traits *tr = het_type_get_traits(t->type);
    double bs = tr && tr->blck_size > 0 ? (double)tr->type_size / (double)tr->blck_size : 4.0;
    return (double)het_nelements(t) * bs;
}

static void cost_mul_mat(const struct het_tensor *n, struct het_op_cost *c)
{
    const struct het_tensor *w = n->src[0], *x = n->src[1];
    double k = (double)w->ne[0], nn = (double)w->ne[1];
    double batch = (double)x->ne[2] * (double)x->ne[3];
    c->wtype = w->type;
    c->m = (double)x->ne[1];
    c->flops = 2.0 * k * nn * c->m * batch;
    c->bytes = dense_bytes(w) + dense_bytes(x) + dense_bytes(n);
}

/* Expected distinct experts hit when T tokens each pick k of E at random:
 * E * (1 - (1 - k/E)^T) (k for decode). */
double het_moe_expected_experts(double E, double k, double T)
{
    if (E <= 0 || k <= 0 || T <= 0) return 0;
    if (k >= E) return E;
    return E * (1.0 - pow(1.0 - k / E, T));
}

/* mul_mat_id: one GEMM per expert hit. Which experts are hit depends on
 * the data, so the cost uses the expected count (or one the caller knows):
 * the bytes of the experts read, and M = the average columns per expert
 * GEMM. */
static void cost_mul_mat_id(const struct het_tensor *n, double hit, struct het_op_cost *c)
{
    const struct het_tensor *w = n->src[0], *x = n->src[1];
    const double K = (double)w->ne[0], N = (double)w->ne[1], E = (double)w->ne[2];
    const double k = (double)n->ne[1], T = (double)n->ne[2];
    if (!(hit > 0)) hit = het_moe_expected_experts(E, k, T);
    hit = fmin(hit, fmin(E, k * T));
    c->wtype = w->type;
    c->m = hit > 0 ? k * T / hit : 1;
    c->calls = hit;
    c->flops = 2.0 * K * N * k * T;
    c->bytes = dense_bytes(w) / E * hit + dense_bytes(x) + dense_bytes(n);
}

void het_op_cost_with_experts(const struct het_tensor *n, double hit, struct het_op_cost *c)
{
    het_op_cost_of(n, c);
    if (n->op == HET_OP_MUL_MAT_ID && hit > 0) cost_mul_mat_id(n, hit, c);
}

static void cost_attn(const struct het_tensor *n, struct het_op_cost *c)
{
    const struct het_tensor *q = n->src[0], *k = n->src[1], *v = n->src[2];
    int64_t n_tok = q->ne[2], n_kv = k->ne[2], n_past = n->op_params[1];
    double keys = 0; /* keys attended, summed over queries (causal) */
    for (int64_t t = 0; t < n_tok; t++) {
        int64_t e = t + n_past + 1;
        keys += (double)(e < n_kv ? e : n_kv);
    }
    c->wtype = k->type;
    c->m = (double)n_tok;
    c->flops = 4.0 * (double)q->ne[0] * (double)q->ne[1] * keys;
    c->bytes = dense_bytes(q) + dense_bytes(k) + (v ? dense_bytes(v) : 0) + dense_bytes(n);
}

void het_op_cost_of(const struct het_tensor *n, struct het_op_cost *c)
{
    memset(c, 0, sizeof *c);
    c->cls = HET_OPCLASS_NONE;
    c->wtype = HET_TYPE_F32;
    c->m = (double)het_nrows(n);
    double ne = (double)het_nelements(n), out = dense_bytes(n);
    double in0 = n->src[0] ? dense_bytes(n->src[0]) : 0, in1 = n->src[1] ? dense_bytes(n->src[1]) : 0;
    switch (n->op) {
    case HET_OP_NONE:
    case HET_OP_VIEW:
    case HET_OP_COUNT:
        return;
    case HET_OP_MUL_MAT: c->cls = HET_OPCLASS_MATMUL; cost_mul_mat(n, c); return;
    case HET_OP_ATTN:    c->cls = HET_OPCLASS_ATTN; cost_attn(n, c); return;
    case HET_OP_MUL_MAT_ID: c->cls = HET_OPCLASS_MOE; cost_mul_mat_id(n, 0, c); return;
    case HET_OP_TOP_K:   c->cls = HET_OPCLASS_SOFTMAX; c->flops = (double)het_nelements(n->src[0]) * 4;
                         c->bytes = in0 + out; return;
    case HET_OP_SUM_ROWS: c->cls = HET_OPCLASS_NORM; c->flops = (double)het_nelements(n->src[0]);
                         c->bytes = in0 + out; return;
    case HET_OP_DIV:     c->cls = HET_OPCLASS_ELTWISE; c->flops = 4 * ne; c->bytes = in0 + in1 + out; return;
    case HET_OP_SIGMOID: c->cls = HET_OPCLASS_ELTWISE; c->flops = 10 * ne; c->bytes = in0 + out; return;
    case HET_OP_MOE_SUM: c->cls = HET_OPCLASS_ELTWISE; c->flops = 2 * (double)het_nelements(n->src[0]);
                         c->bytes = in0 + in1 + out; return;
    case HET_OP_RMS_NORM: c->cls = HET_OPCLASS_NORM; c->flops = 3 * ne; c->bytes = in0 + out; return;
    /* flops count transcendental functions as ~8 operations (sin/cos, exp) */
    case HET_OP_ROPE:    c->cls = HET_OPCLASS_ROPE; c->flops = 12 * ne; c->bytes = in0 + in1 + out; return;
    case HET_OP_SOFTMAX: c->cls = HET_OPCLASS_SOFTMAX; c->flops = 12 * ne; c->bytes = in0 + in1 + out; return;
    case HET_OP_ADD:
    case HET_OP_MUL:     c->cls = HET_OPCLASS_ELTWISE; c->flops = ne; c->bytes = in0 + in1 + out; return;
    case HET_OP_SWIGLU:  c->cls = HET_OPCLASS_ELTWISE; c->flops = 10 * ne; c->bytes = in0 + in1 + out; return;
    case HET_OP_SCALE:   c->cls = HET_OPCLASS_ELTWISE; c->flops = ne; c->bytes = in0 + out; return;
    case HET_OP_SILU:    c->cls = HET_OPCLASS_ELTWISE; c->flops = 10 * ne; c->bytes = in0 + out; return;
    case HET_OP_CPY:     c->cls = HET_OPCLASS_COPY; c->flops = ne; c->bytes = in0 + out; return;
    case HET_OP_CONT:    c->cls = HET_OPCLASS_COPY; c->flops = ne; c->bytes = in0 + out; return;
    case HET_OP_GET_ROWS:
        /* only the gathered rows are read */
        c->cls = HET_OPCLASS_COPY;
        c->flops = ne;
        c->bytes = (double)het_nrows(n) * (n->src[0] ? dense_bytes(n->src[0]) / (double)het_nrows(n->src[0]) : 0)
                 + in1 + out;
        return;
    }
}

double het_cost_fit_rate(const struct het_cost_fit *f, double m)
{
    if (m <= 0) m = 1;
    if (f->n_knots <= 0) return f->gflops * m / (m + f->m_half);
    const double *km = f->knot_m, *kf = f->knot_gflops;
    int n = f->n_knots;
    if (m <= km[0]) return kf[0] * m / km[0];
    if (m >= km[n - 1]) return kf[n - 1];
    int i = 1;
    while (km[i] < m) i++;
    double u = log(m / km[i - 1]) / log(km[i] / km[i - 1]);
    return exp(log(kf[i - 1]) + u * (log(kf[i]) - log(kf[i - 1])));
}

double het_cost_fit_eval(const struct het_cost_fit *f, const struct het_op_cost *c)
{
    double rate = het_cost_fit_rate(f, c->m) * 1e3;        /* flops per µs */
    double bw = f->gbps * 1e3;                             /* bytes per µs */
    double tc = rate > 0 ? c->flops / rate : 0, tb = bw > 0 ? c->bytes / bw : 0;
    return f->t0_us * (c->calls > 1 ? c->calls : 1) + (tc > tb ? tc : tb);
}

/* ---------------------------------------------------------------------------
 * construction                                                              */

het_profile *het_profile_new(const char *dev_name, const char *dev_desc, enum het_device_kind kind, bool emulated)
{
    het_profile *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    snprintf(p->name, sizeof p->name, "%s", dev_name ? dev_name : "");
    snprintf(p->desc, sizeof p->desc, "%s", dev_desc ? dev_desc : "");
    snprintf(p->het_version, sizeof p->het_version, "%s", HET_VERSION);
    snprintf(p->label, sizeof p->label, "empty profile");
    p->kind = kind;
    p->emulated = emulated;
    memset(p->index, -1, sizeof p->index);
    return p;
}

het_profile *het_profile_new_for_device(const het_device *dev)
{
    het_profile *p = het_profile_new(het_device_name(dev), het_device_description(dev), het_device_kind(dev),
                                     het_device_is_emulated(dev));
    if (p) het_profile_set_caps(p, het_device_get_caps(dev));
    return p;
}

void het_profile_set_caps(het_profile *p, const struct het_device_caps *caps)
{
    p->dc.async = caps->async;
    p->dc.lossy = caps->lossy;
    p->dc.shares_cpu_cores = caps->shares_cpu_cores;
}

void het_profile_free(het_profile *p)
{
    if (!p) return;
    free(p->hist);
    for (int i = 0; i < p->n_models; i++) free(p->models[i].samples);
    free(p->models);
    free(p->handoffs);
    free(p);
}

het_profile *het_profile_clone(const het_profile *src)
{
    het_profile *p = malloc(sizeof *p);
    if (!p) return NULL;
    *p = *src;
    p->models = NULL;
    p->handoffs = NULL;
    p->hist = NULL;
    p->n_hist = p->cap_hist = 0;
    memset(p->index, -1, sizeof p->index); /* rebuilt as the models are added back */
    p->n_models = p->cap_models = p->n_handoffs = p->cap_handoffs = 0;
    for (int i = 0; i < src->n_models; i++) {
        const struct het_profile_model *m = &src->models[i];
        if (m->has_fit && het_profile_set_fit(p, m->cls, m->wtype, &m->fit, NULL) != HET_OK) goto fail;
        for (int k = 0; k < m->n_samples; k++)
            if (het_profile_add_sample(p, m->cls, m->wtype, &m->samples[k], NULL) != HET_OK) goto fail;
    }
    for (int i = 0; i < src->n_handoffs; i++)
        if (het_profile_set_handoff(p, &src->handoffs[i], NULL) != HET_OK) goto fail;
    p->hist = NULL;
    p->n_hist = p->cap_hist = 0;
    if (src->n_hist) {
        p->hist = malloc((size_t)src->n_hist * sizeof *p->hist);
        if (!p->hist) goto fail;
        memcpy(p->hist, src->hist, (size_t)src->n_hist * sizeof *p->hist);
        p->n_hist = p->cap_hist = src->n_hist;
    }
    return p;
fail:
    het_profile_free(p);
    return NULL;
}

const char *het_profile_device_name(const het_profile *p) { return p->name; }
const char *het_profile_device_desc(const het_profile *p) { return p->desc; }
enum het_device_kind het_profile_device_kind(const het_profile *p) { return p->kind; }
const char *het_profile_het_version(const het_profile *p) { return p->het_version; }
bool het_profile_is_measured(const het_profile *p) { return p->measured; }
const char *het_profile_label(const het_profile *p) { return p->label; }

void het_profile_set_label(het_profile *p, bool measured, const char *label)
{
    p->measured = measured;
    snprintf(p->label, sizeof p->label, "%s", label ? label : "");
}

void het_profile_set_device_name(het_profile *p, const char *name)
{
    snprintf(p->name, sizeof p->name, "%s", name);
}

bool het_profile_matches(const het_profile *p, const het_device *dev)
{
    return !strcmp(p->name, het_device_name(dev)) && !strcmp(p->desc, het_device_description(dev)) &&
           !strcmp(p->het_version, HET_VERSION) && p->measured;
}

const char *het_profile_noisy(const het_profile *p) { return p->noisy[0] ? p->noisy : NULL; }
void het_profile_set_noisy(het_profile *p, const char *why) { snprintf(p->noisy, sizeof p->noisy, "%s", why ? why : ""); }

void het_profile_get_device_costs(const het_profile *p, struct het_profile_device_costs *out) { *out = p->dc; }
void het_profile_set_device_costs(het_profile *p, const struct het_profile_device_costs *c) { p->dc = *c; }

/* ---------------------------------------------------------------------------
 * models                                                                    */

static bool valid_key(enum het_op_class cls, enum het_type wtype)
{
    return cls >= 0 && cls < HET_OPCLASS_COUNT && (int)wtype >= 0 && wtype < HET_TYPE_COUNT;
}

struct het_profile_model *het_profile_model_get(const het_profile *p, enum het_op_class cls, enum het_type wtype)
{
    if (!valid_key(cls, wtype)) return NULL;
    int i = p->index[cls][wtype];
    return i >= 0 ? &p->models[i] : NULL;
}

static struct het_profile_model *model_get_or_add(het_profile *p, enum het_op_class cls, enum het_type wtype,
                                                  het_error *err)
{
    if (!valid_key(cls, wtype)) {
        het_error_set(err, HET_ERR_INVALID, "profile %s: no op class %d / type %d", p->name, (int)cls, (int)wtype);
        return NULL;
    }
    struct het_profile_model *m = het_profile_model_get(p, cls, wtype);
    if (m) return m;
    if (p->n_models == p->cap_models) {
        int cap = p->cap_models ? 2 * p->cap_models : 16;
        struct het_profile_model *nm = realloc(p->models, (size_t)cap * sizeof *nm);
        if (!nm) {
            het_error_set(err, HET_ERR_NOMEM, "profile %s: out of memory", p->name);
            return NULL;
        }
        p->models = nm;
        p->cap_models = cap;
    }
    m = &p->models[p->n_models];
    memset(m, 0, sizeof *m);
    m->cls = cls;
    m->wtype = wtype;
    p->index[cls][wtype] = (int16_t)p->n_models++;
    return m;
}

bool het_profile_get_fit(const het_profile *p, enum het_op_class cls, enum het_type wtype, struct het_cost_fit *out)
{
    const struct het_profile_model *m = het_profile_model_get(p, cls, wtype);
    if (!m || !m->has_fit) return false;
    if (out) *out = m->fit;
    return true;
}

enum het_status het_profile_set_fit(het_profile *p, enum het_op_class cls, enum het_type wtype,
                                    const struct het_cost_fit *fit, het_error *err)
{
    struct het_profile_model *m = model_get_or_add(p, cls, wtype, err);
    if (!m) return err ? err->status : HET_ERR_NOMEM;
    m->fit = *fit;
    m->has_fit = true;
    return HET_OK;
}

enum het_status het_profile_add_sample(het_profile *p, enum het_op_class cls, enum het_type wtype,
                                       const struct het_profile_sample *s, het_error *err)
{
    struct het_profile_model *m = model_get_or_add(p, cls, wtype, err);
    if (!m) return err ? err->status : HET_ERR_NOMEM;
    if (m->n_samples == m->cap_samples) {
        int cap = m->cap_samples ? 2 * m->cap_samples : 16;
        struct het_profile_sample *ns = realloc(m->samples, (size_t)cap * sizeof *ns);
        if (!ns) return het_error_set(err, HET_ERR_NOMEM, "profile %s: out of memory", p->name);
        m->samples = ns;
        m->cap_samples = cap;
    }
    m->samples[m->n_samples++] = *s;
    return HET_OK;
}

bool het_profile_drop_sample(het_profile *p, enum het_op_class cls, enum het_type wtype, int i)
{
    struct het_profile_model *m = het_profile_model_get(p, cls, wtype);
    if (!m || i < 0 || i >= m->n_samples) return false;
    memmove(&m->samples[i], &m->samples[i + 1], (size_t)(m->n_samples - i - 1) * sizeof m->samples[0]);
    m->n_samples--;
    return true;
}

const struct het_profile_sample *het_profile_samples(const het_profile *p, enum het_op_class cls,
                                                     enum het_type wtype, int *n)
{
    const struct het_profile_model *m = het_profile_model_get(p, cls, wtype);
    *n = m ? m->n_samples : 0;
    return m && m->n_samples ? m->samples : NULL;
}

int het_profile_n_models(const het_profile *p) { return p->n_models; }

bool het_profile_model_at(const het_profile *p, int i, enum het_op_class *cls, enum het_type *wtype,
                          struct het_cost_fit *fit, int *n_samples)
{
    if (i < 0 || i >= p->n_models) return false;
    const struct het_profile_model *m = &p->models[i];
    if (cls) *cls = m->cls;
    if (wtype) *wtype = m->wtype;
    if (fit) {
        if (m->has_fit) *fit = m->fit;
        else *fit = (struct het_cost_fit){ .t0_us = NAN, .gbps = NAN, .gflops = NAN, .m_half = NAN, .error = NAN };
    }
    if (n_samples) *n_samples = m->n_samples;
    return true;
}

/* ---------------------------------------------------------------------------
 * prediction                                                                */

/* The model that predicts (cls, wtype): its own, or for moe without one
 * (profiles calibrated before the class existed) the matmul model, whose
 * features mean the same per expert GEMM. */
static const struct het_profile_model *model_for(const het_profile *p, enum het_op_class cls, enum het_type wtype)
{
    const struct het_profile_model *m = het_profile_model_get(p, cls, wtype);
    if ((!m || !m->has_fit) && cls == HET_OPCLASS_MOE) m = het_profile_model_get(p, HET_OPCLASS_MATMUL, wtype);
    return m;
}

/* Predictions are the fit's (or the roofline's) times the factor learned
 * online for the node's bucket (history.c; 1 until observations say otherwise). */
double het_profile_predict_cost(const het_profile *p, const struct het_op_cost *c)
{
    if (c->cls == HET_OPCLASS_NONE) return 0;
    const struct het_profile_model *m = model_for(p, c->cls, c->wtype);
    if (!m || !m->has_fit) return NAN;
    return het_cost_fit_eval(&m->fit, c) * het_profile_history_factor(p, c);
}

double het_profile_predict(const het_profile *p, const struct het_tensor *node)
{
    struct het_op_cost c;
    het_op_cost_of(node, &c);
    return het_profile_predict_cost(p, &c);
}

bool het_profile_has_model(const het_profile *p, const struct het_tensor *node)
{
    struct het_op_cost c;
    het_op_cost_of(node, &c);
    if (c.cls == HET_OPCLASS_NONE) return true;
    const struct het_profile_model *m = model_for(p, c.cls, c.wtype);
    return m && m->has_fit;
}

double het_profile_predict_roofline(const het_profile *p, const struct het_op_cost *c)
{
    double v = het_profile_predict_roofline_base(p, c);
    return isnan(v) || v == 0 ? v : v * het_profile_history_factor(p, c);
}

double het_profile_predict_roofline_base(const het_profile *p, const struct het_op_cost *c)
{
    if (c->cls == HET_OPCLASS_NONE) return 0;
    if (!(p->dc.peak_gbps > 0) || !(p->dc.peak_gflops > 0)) return NAN;
    /* the smallest t0 any fit of this profile has, else a default of 2 µs */
    double t0 = NAN;
    for (int i = 0; i < p->n_models; i++)
        if (p->models[i].has_fit && !(p->models[i].fit.t0_us >= t0)) t0 = p->models[i].fit.t0_us;
    struct het_cost_fit f = { .t0_us = isnan(t0) ? 2.0 : t0, .gbps = p->dc.peak_gbps,
                              .gflops = p->dc.peak_gflops, .m_half = 8 };
    return het_cost_fit_eval(&f, c);
}

/* ---------------------------------------------------------------------------
 * hand-offs                                                                 */

enum het_status het_profile_set_handoff(het_profile *p, const struct het_handoff *h, het_error *err)
{
    for (int i = 0; i < p->n_handoffs; i++)
        if (!strcmp(p->handoffs[i].to, h->to)) {
            p->handoffs[i] = *h;
            return HET_OK;
        }
    if (p->n_handoffs == p->cap_handoffs) {
        int cap = p->cap_handoffs ? 2 * p->cap_handoffs : 4;
        struct het_handoff *nh = realloc(p->handoffs, (size_t)cap * sizeof *nh);
        if (!nh) return het_error_set(err, HET_ERR_NOMEM, "profile %s: out of memory", p->name);
        p->handoffs = nh;
        p->cap_handoffs = cap;
    }
    p->handoffs[p->n_handoffs++] = *h;
    return HET_OK;
}

bool het_profile_get_handoff(const het_profile *p, const char *to, struct het_handoff *out)
{
    for (int i = 0; i < p->n_handoffs; i++)
        if (!strcmp(p->handoffs[i].to, to)) {
            if (out) *out = p->handoffs[i];
            return true;
        }
    return false;
}

int het_profile_n_handoffs(const het_profile *p) { return p->n_handoffs; }
const struct het_handoff *het_profile_handoff_at(const het_profile *p, int i)
{
    return i >= 0 && i < p->n_handoffs ? &p->handoffs[i] : NULL;
}

/* ---------------------------------------------------------------------------
 * unmeasured defaults                                                       */

het_profile *het_profile_default(const het_device *dev)
{
    het_error err = { 0 };
    het_profile *p = het_device_default_profile(dev, &err);
    if (p || err.msg[0]) return p; /* the device's own model, or its failure */
    return het_profile_from_roofline(het_device_name(dev), het_device_description(dev), het_device_kind(dev),
                                     het_device_get_caps(dev), het_device_get_roofline(dev));
}

/* Rough on purpose: only calibration makes a plan trustworthy, and every
 * output says when these are used. */
het_profile *het_profile_from_roofline(const char *dev_name, const char *dev_desc, enum het_device_kind kind,
                                       const struct het_device_caps *caps, const struct het_roofline *d)
{
    het_profile *p = het_profile_new(dev_name, dev_desc, kind, caps && !caps->host_timed);
    if (!p) return NULL;
    p->dc = (struct het_profile_device_costs){ .split_us = d->split_us, .kernel_switch_us = d->switch_us,
                                               .peak_gbps = d->gbps, .peak_gflops = d->gflops };
    if (caps) het_profile_set_caps(p, caps);
    /* one fit per class at the device peaks; matmul half-rate at M = 8 */
    for (int c = 0; c < HET_OPCLASS_COUNT; c++) {
        struct het_cost_fit f = { .t0_us = d->t0_us, .gbps = d->gbps, .gflops = d->gflops, .m_half = 8,
                                  .error = NAN };
        enum het_type types[] = { HET_TYPE_F32, HET_TYPE_F16, HET_TYPE_BF16, HET_TYPE_Q8_0, HET_TYPE_Q4_0,
                                  HET_TYPE_Q4_1, HET_TYPE_Q5_0, HET_TYPE_Q5_1, HET_TYPE_Q2_K, HET_TYPE_Q3_K,
                                  HET_TYPE_Q4_K, HET_TYPE_Q5_K, HET_TYPE_Q6_K };
        if (kind == HET_DEVICE_NPU && c == HET_OPCLASS_MOE) f.t0_us = 150;
        const bool per_type = c == HET_OPCLASS_MATMUL || c == HET_OPCLASS_MOE;
        int nt = per_type ? (int)(sizeof types / sizeof types[0]) : c == HET_OPCLASS_ATTN ? 2 : 1;
        for (int t = 0; t < nt; t++)
            if (het_profile_set_fit(p, (enum het_op_class)c, types[t], &f, NULL) != HET_OK) {
                het_profile_free(p);
                return NULL;
            }
    }
    char label[256];
    snprintf(label, sizeof label, "unmeasured default (%s)", d->source ? d->source : "no source given");
    het_profile_set_label(p, false, label);
    return p;
}
