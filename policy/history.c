/*
 * history.c — what a device's profile learns while it is used: a history
 * model per (op class, weight type, shape bucket), as StarPU keeps per task
 * footprint, fed by the times the scheduler observes (sched/online.c).
 *
 * An entry keeps the ratios observed / fitted-prediction of its last
 * HET_HISTORY_RING observations. Its estimate is a low quantile of them (the
 * smallest of up to three, the second smallest of eight): other work on the
 * machine only ever adds time, so the slow tail is noise, and the ring lets
 * the estimate follow a device whose speed really changed. An estimate is
 * applied to predictions (het_profile_predict_cost) once it rests on
 * HET_HISTORY_MIN_OBS observations, and republished only when it moves by
 * more than HET_HISTORY_MARGIN: each republication bumps the profile's
 * generation, which is what makes the scheduler re-plan. A node whose own
 * bucket has no applied estimate borrows the nearest bucket's of the same
 * class and type. Ratios are relative to the fit, so a recalibration (a
 * new profile) starts a new history.
 */
#include "policy/profile_impl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* shape bucket of a cost: rows by powers of two, work by powers of four */
static void bucket_of(const struct het_op_cost *c, int *mb, int *sb)
{
    double m = c->m > 1 ? c->m : 1, w = fmax(c->bytes, c->flops / 8);
    *mb = (int)fmin(30, ceil(log2(m) - 1e-9));
    *sb = w > 1 ? (int)fmin(60, floor(log2(w) / 2)) : 0;
}

uint32_t het_op_cost_bucket(const struct het_op_cost *c)
{
    int mb, sb;
    bucket_of(c, &mb, &sb);
    return (uint32_t)(c->cls & 0xff) << 24 | (uint32_t)(c->wtype & 0xff) << 16 | (uint32_t)mb << 8 | (uint32_t)sb;
}

static struct het_history_entry *find(const het_profile *p, enum het_op_class cls, enum het_type wt, int mb, int sb)
{
    for (int i = 0; i < p->n_hist; i++) {
        struct het_history_entry *e = &p->hist[i];
        if (e->cls == cls && e->wtype == wt && e->m_bucket == mb && e->size_bucket == sb) return e;
    }
    return NULL;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* the low quantile of the ring (see the file comment) */
static double estimate(const struct het_history_entry *e)
{
    double v[HET_HISTORY_RING];
    int n = e->n_ring;
    if (n <= 0) return NAN;
    memcpy(v, e->ratio, (size_t)n * sizeof v[0]);
    qsort(v, (size_t)n, sizeof v[0], cmp_double);
    return v[(n - 1) / 4];
}

/* the prediction observations are compared with: the fit, else the roofline */
static double base_prediction(const het_profile *p, const struct het_op_cost *c)
{
    const struct het_profile_model *m = het_profile_model_get(p, c->cls, c->wtype);
    if (m && m->has_fit) return het_cost_fit_eval(&m->fit, c);
    return het_profile_predict_roofline_base(p, c);
}

struct het_history_entry *het_profile_history_add(het_profile *p, enum het_op_class cls, enum het_type wt, int mb,
                                                  int sb, het_error *err)
{
    struct het_history_entry *e = find(p, cls, wt, mb, sb);
    if (e) return e;
    if (p->n_hist == p->cap_hist) {
        int cap = p->cap_hist ? 2 * p->cap_hist : 16;
        struct het_history_entry *nh = realloc(p->hist, (size_t)cap * sizeof *nh);
        if (!nh) {
            het_error_set(err, HET_ERR_NOMEM, "profile %s: out of memory", p->name);
            return NULL;
        }
        p->hist = nh;
        p->cap_hist = cap;
    }
    e = &p->hist[p->n_hist++];
    memset(e, 0, sizeof *e);
    e->cls = cls;
    e->wtype = wt;
    e->m_bucket = mb;
    e->size_bucket = sb;
    e->applied = NAN;
    return e;
}

enum het_status het_profile_observe(het_profile *p, const struct het_op_cost *c, double us, het_error *err)
{
    if (c->cls < 0 || c->cls >= HET_OPCLASS_COUNT || !(us > 0) || !isfinite(us))
        return het_error_set(err, HET_ERR_INVALID, "profile %s: observation of %.3g us for class %d", p->name, us,
                             (int)c->cls);
    double base = base_prediction(p, c);
    if (!(base > 0) || !isfinite(base)) return HET_OK; /* nothing to correct */
    int mb, sb;
    bucket_of(c, &mb, &sb);
    struct het_history_entry *e = het_profile_history_add(p, c->cls, c->wtype, mb, sb, err);
    if (!e) return HET_ERR_NOMEM;
    e->ratio[e->next] = us / base;
    e->next = (e->next + 1) % HET_HISTORY_RING;
    if (e->n_ring < HET_HISTORY_RING) e->n_ring++;
    e->n_obs++;
    e->serial = ++p->n_observed;
    p->n_new_obs++;
    if (e->n_ring < HET_HISTORY_MIN_OBS) return HET_OK;
    double est = estimate(e), prev = isnan(e->applied) ? 1.0 : e->applied;
    if (isnan(e->applied) || fabs(log(est / prev)) > log1p(HET_HISTORY_MARGIN)) {
        /* a first estimate close to the fit changes no prediction that matters: kept, not republished */
        bool moves = fabs(log(est / prev)) > log1p(HET_HISTORY_MARGIN);
        e->applied = est;
        if (moves) p->generation++;
    }
    return HET_OK;
}

/* the applied entry for c: its own bucket's, else the nearest bucket's of its class and type */
static const struct het_history_entry *applied_for(const het_profile *p, const struct het_op_cost *c, bool *own)
{
    int mb, sb;
    bucket_of(c, &mb, &sb);
    const struct het_history_entry *best = NULL;
    int best_d = 1 << 30;
    for (int i = 0; i < p->n_hist; i++) {
        const struct het_history_entry *e = &p->hist[i];
        if (e->cls != c->cls || e->wtype != c->wtype || isnan(e->applied)) continue;
        int d = abs(e->m_bucket - mb) + abs(e->size_bucket - sb);
        if (d < best_d) {
            best = e;
            best_d = d;
        }
    }
    if (own) *own = best && best_d == 0;
    return best;
}

double het_profile_history_factor(const het_profile *p, const struct het_op_cost *c)
{
    if (!p->n_hist) return 1.0;
    const struct het_history_entry *e = applied_for(p, c, NULL);
    return e ? e->applied : 1.0;
}

void het_profile_history_of(const het_profile *p, const struct het_op_cost *c, struct het_history_stat *out)
{
    memset(out, 0, sizeof *out);
    out->factor = 1.0;
    out->fit_us = base_prediction(p, c);
    int mb, sb;
    bucket_of(c, &mb, &sb);
    const struct het_history_entry *own = find(p, c->cls, c->wtype, mb, sb);
    out->n_obs = own ? own->n_obs : 0;
    out->observed_us = own && own->n_ring ? estimate(own) * out->fit_us : NAN;
    bool exact = false;
    const struct het_history_entry *e = applied_for(p, c, &exact);
    if (e) {
        out->factor = e->applied;
        out->n_applied = e->n_obs;
        out->borrowed = !exact;
    }
    out->serial = own ? own->serial : 0;
}

uint64_t het_profile_generation(const het_profile *p) { return p->generation; }
uint64_t het_profile_n_observations(const het_profile *p) { return p->n_observed; }
int      het_profile_n_history(const het_profile *p) { return p->n_hist; }

bool het_profile_history_at(const het_profile *p, int i, struct het_history_info *out)
{
    if (i < 0 || i >= p->n_hist) return false;
    const struct het_history_entry *e = &p->hist[i];
    out->cls = e->cls;
    out->wtype = e->wtype;
    out->m_lo = e->m_bucket ? (1 << (e->m_bucket - 1)) + 1 : 1;
    out->m_hi = 1 << e->m_bucket;
    out->n_obs = e->n_obs;
    out->estimate = estimate(e);
    out->applied = e->applied;
    out->size_log4 = e->size_bucket;
    return true;
}
