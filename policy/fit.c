/*
 * fit.c — fitting t = t0 * calls + max(flops / F(M), bytes / B) to measured
 * samples (calls: 1, or the experts a mul_mat_id sample hit, each a kernel
 * call of its own).
 *
 * The model has four positive parameters (t0, B, F_peak, m_half), t0 at most
 * the fastest sample (per call) and B at most 1.5x the best bandwidth a
 * sample reached.
 * Times span orders of magnitude, so the fit minimises squared log-ratios
 * (relative error) with Nelder–Mead over the logarithms of the parameters,
 * restarted from its own best point until it stops improving. Samples the
 * first fit misses by far more than the rest (a stray measurement) are
 * dropped once and the fit redone. When the samples sweep M, F(M) is then
 * tabulated at each measured M (golden-section per knot, alternating with t0
 * and B) and kept if it fits better. A few dozen samples: well under a
 * millisecond.
 */
#include "policy/profile_impl.h"

#include <math.h>
#include <string.h>

#define NP          4      /* parameters                                   */
#define MAX_ITER    800    /* per Nelder–Mead run                          */
#define RESTARTS    3
#define MAX_FIT     256    /* samples used (the first ones)                */

struct fit_data {
    const struct het_profile_sample *s;
    const bool *use;
    int n;
    int np;                      /* parameters varied: 4 = all, 2 = t0 and B    */
    double t0_max_log;           /* t0 cannot exceed the fastest sample          */
    double b_max_log;            /* nor B 1.5x the best bandwidth any achieved   */
    struct het_cost_fit base;    /* the rest (knots when np == 2)               */
};

static const double lo[NP] = { -4.6, -6.9, -6.9, -6.9 };  /* ln(0.01 µs), ln(0.001 GB/s) ...  */
static const double hi[NP] = { 13.8, 11.5, 13.8, 11.5 };  /* ln(1e6 µs), ln(1e5 GB/s) ...      */

static void to_fit(const struct fit_data *d, const double *x, struct het_cost_fit *f)
{
    *f = d->base;
    f->t0_us = exp(x[0]);
    f->gbps = exp(x[1]);
    if (d->np > 2) {
        f->gflops = exp(x[2]);
        f->m_half = exp(x[3]);
    }
}

/* sum of squared log-ratios of fit f over the samples in use, each weighted
 * by the logarithm of its time: a model's time is mostly its big ops, so a
 * relative miss on a 1 ms matmul should cost more than one on a 5 us matmul
 * (about 2x here), without letting the biggest samples, or a stray slow
 * one, decide alone */
static double sq_error(const struct fit_data *d, const struct het_cost_fit *f, double only_m)
{
    double sum = 0;
    for (int i = 0; i < d->n; i++) {
        if (!d->use[i] || (only_m > 0 && d->s[i].m != only_m)) continue;
        struct het_op_cost c = { .flops = d->s[i].flops, .bytes = d->s[i].bytes, .m = d->s[i].m,
                                 .calls = d->s[i].calls };
        double r = log(het_cost_fit_eval(f, &c) / d->s[i].us);
        sum += log2(2 + d->s[i].us) * r * r;
    }
    return sum;
}

/* upper bound of parameter i (log space): the data's where it has one */
static double upper(const struct fit_data *d, int i)
{
    if (i == 0 && d->t0_max_log < hi[0]) return d->t0_max_log;
    if (i == 1 && d->b_max_log < hi[1]) return d->b_max_log;
    return hi[i];
}

static double objective(const struct fit_data *d, const double *x)
{
    double pen = 0, y[NP];
    for (int i = 0; i < d->np; i++) {
        double h = upper(d, i);
        y[i] = x[i] < lo[i] ? lo[i] : x[i] > h ? h : x[i];
        pen += (x[i] - y[i]) * (x[i] - y[i]);
    }
    struct het_cost_fit f;
    to_fit(d, y, &f);
    return sq_error(d, &f, 0) + pen;
}

/* One Nelder–Mead run over d->np parameters from x (updated in place). */
static double nelder_mead(const struct fit_data *d, double *x, double step)
{
    int np = d->np;
    double p[NP + 1][NP], v[NP + 1];
    for (int i = 0; i <= np; i++) {
        memcpy(p[i], x, sizeof p[i]);
        if (i > 0) p[i][i - 1] += step;
        v[i] = objective(d, p[i]);
    }
    for (int it = 0; it < MAX_ITER; it++) {
        /* order: best at 0, worst at np */
        for (int i = 1; i <= np; i++)
            for (int j = i; j > 0 && v[j] < v[j - 1]; j--) {
                double t = v[j]; v[j] = v[j - 1]; v[j - 1] = t;
                for (int k = 0; k < NP; k++) { t = p[j][k]; p[j][k] = p[j - 1][k]; p[j - 1][k] = t; }
            }
        if (v[np] - v[0] < 1e-12 * (1 + v[0])) break;
        double c[NP] = { 0 }, r[NP], e[NP], k[NP];
        for (int i = 0; i < np; i++)
            for (int j = 0; j < np; j++) c[j] += p[i][j] / np;
        for (int j = 0; j < np; j++) r[j] = c[j] + (c[j] - p[np][j]);
        double vr = objective(d, r);
        if (vr < v[0]) {
            for (int j = 0; j < np; j++) e[j] = c[j] + 2 * (c[j] - p[np][j]);
            double ve = objective(d, e);
            if (ve < vr) { memcpy(p[np], e, sizeof e); v[np] = ve; }
            else { memcpy(p[np], r, sizeof r); v[np] = vr; }
        } else if (vr < v[np - 1]) {
            memcpy(p[np], r, sizeof r);
            v[np] = vr;
        } else {
            for (int j = 0; j < np; j++) k[j] = c[j] + 0.5 * (p[np][j] - c[j]);
            double vk = objective(d, k);
            if (vk < v[np]) {
                memcpy(p[np], k, sizeof k);
                v[np] = vk;
            } else { /* shrink towards the best */
                for (int i = 1; i <= np; i++) {
                    for (int j = 0; j < np; j++) p[i][j] = p[0][j] + 0.5 * (p[i][j] - p[0][j]);
                    v[i] = objective(d, p[i]);
                }
            }
        }
    }
    int best = 0;
    for (int i = 1; i <= np; i++)
        if (v[i] < v[best]) best = i;
    memcpy(x, p[best], sizeof p[best]);
    return v[best];
}

static void fit_once(const struct fit_data *d, double *x)
{
    double best = nelder_mead(d, x, 1.0);
    for (int r = 0; r < RESTARTS; r++) {
        double v = nelder_mead(d, x, 0.5);
        if (v > best - 1e-9 * (1 + best)) break;
        best = v;
    }
    for (int i = 0; i < d->np; i++) {
        double h = upper(d, i);
        x[i] = x[i] < lo[i] ? lo[i] : x[i] > h ? h : x[i];
    }
}

static double rel_err(const struct het_cost_fit *f, const struct het_profile_sample *s)
{
    struct het_op_cost c = { .flops = s->flops, .bytes = s->bytes, .m = s->m, .calls = s->calls };
    return het_cost_fit_eval(f, &c) / s->us - 1.0;
}

/* ---------------------------------------------------------------------------
 * tabulated F(M)                                                            */

/* golden-section search of knot j's rate (log space) on its own samples,
 * between the best rate achieved there (a lower bound: t >= flops / F) and
 * 4x that or the smooth fit's value (above it the samples say nothing) */
static void fit_knot(const struct fit_data *d, struct het_cost_fit *f, int j, double smooth)
{
    const double g = 0.6180339887498949;
    double achieved = 0;
    for (int i = 0; i < d->n; i++)
        if (d->use[i] && d->s[i].m == f->knot_m[j]) achieved = fmax(achieved, d->s[i].flops / d->s[i].us * 1e-3);
    if (!(achieved > 0)) return;
    double keep = f->knot_gflops[j], best = sq_error(d, f, f->knot_m[j]);
    double a = log(achieved), b = log(4 * fmax(achieved, smooth));
    for (int it = 0; it < 50; it++) {
        double x1 = b - g * (b - a), x2 = a + g * (b - a);
        f->knot_gflops[j] = exp(x1);
        double v1 = sq_error(d, f, f->knot_m[j]);
        f->knot_gflops[j] = exp(x2);
        double v2 = sq_error(d, f, f->knot_m[j]);
        if (v1 < v2) b = x2;
        else a = x1;
    }
    f->knot_gflops[j] = exp(0.5 * (a + b));
    if (!(sq_error(d, f, f->knot_m[j]) < best - 1e-9 * (1 + best))) f->knot_gflops[j] = keep;
}

/* With samples at >= 3 distinct M, tabulate F(M) and refit t0 and B; keep
 * the tabulation only when it fits better. */
static void fit_knots(const struct fit_data *d, struct het_cost_fit *f)
{
    struct het_cost_fit g = *f;
    g.n_knots = 0;
    for (int i = 0; i < d->n; i++) {
        if (!d->use[i]) continue;
        int k = 0;
        while (k < g.n_knots && g.knot_m[k] < d->s[i].m) k++;
        if (k < g.n_knots && g.knot_m[k] == d->s[i].m) continue;
        if (g.n_knots == HET_FIT_MAX_KNOTS) return; /* too many distinct M: keep the smooth form */
        memmove(&g.knot_m[k + 1], &g.knot_m[k], (size_t)(g.n_knots - k) * sizeof g.knot_m[0]);
        g.knot_m[k] = d->s[i].m;
        g.n_knots++;
    }
    if (g.n_knots < 3) return;
    /* start from the data: each knot at the best rate achieved at its M,
     * B at the best bandwidth achieved anywhere, t0 small */
    double smooth[HET_FIT_MAX_KNOTS], bw = 0;
    for (int k = 0; k < g.n_knots; k++) {
        smooth[k] = het_cost_fit_rate(f, g.knot_m[k]);
        g.knot_gflops[k] = 0;
    }
    for (int i = 0; i < d->n; i++) {
        if (!d->use[i]) continue;
        bw = fmax(bw, d->s[i].bytes / d->s[i].us * 1e-3);
        for (int k = 0; k < g.n_knots; k++)
            if (g.knot_m[k] == d->s[i].m) g.knot_gflops[k] = fmax(g.knot_gflops[k], d->s[i].flops / d->s[i].us * 1.05e-3);
    }
    for (int k = 0; k < g.n_knots; k++)
        if (!(g.knot_gflops[k] > 0)) g.knot_gflops[k] = smooth[k];
    g.gbps = fmin(fmax(bw * 1.05, 1e-3), exp(d->b_max_log));
    g.t0_us = fmin(g.t0_us, exp(d->t0_max_log) * 0.5);
    for (int round = 0; round < 3; round++) {
        for (int k = 0; k < g.n_knots; k++) fit_knot(d, &g, k, smooth[k]);
        struct fit_data d2 = *d;
        d2.np = 2;
        d2.base = g;
        double x[NP] = { log(fmax(g.t0_us, 0.02)), log(g.gbps), 0, 0 };
        fit_once(&d2, x);
        to_fit(&d2, x, &g);
    }
    if (sq_error(d, &g, 0) < sq_error(d, f, 0)) {
        g.gflops = 0;
        for (int k = 0; k < g.n_knots; k++) g.gflops = fmax(g.gflops, g.knot_gflops[k]);
        *f = g;
    }
}

/* Drop gross outliers (|log ratio| far beyond the typical one) once; true if any. */
static bool drop_outliers(const struct fit_data *d, const struct het_cost_fit *f, bool *use, int n_ok)
{
    if (n_ok < 6) return false;
    double r[MAX_FIT], sorted[MAX_FIT];
    int k = 0;
    for (int i = 0; i < d->n; i++)
        if (use[i]) sorted[k++] = r[i] = fabs(log1p(rel_err(f, &d->s[i])));
    for (int i = 1; i < k; i++)
        for (int j = i; j > 0 && sorted[j] < sorted[j - 1]; j--) {
            double t = sorted[j]; sorted[j] = sorted[j - 1]; sorted[j - 1] = t;
        }
    double limit = fmax(4 * sorted[k / 2], 0.35);
    int dropped = 0;
    for (int i = 0; i < d->n; i++)
        if (use[i] && r[i] > limit && n_ok - dropped > 4) {
            use[i] = false;
            dropped++;
        }
    return dropped > 0;
}

bool het_cost_fit_samples(const struct het_profile_sample *s, int n, struct het_cost_fit *out)
{
    if (n > MAX_FIT) n = MAX_FIT;
    bool use[MAX_FIT];
    int n_ok = 0;
    double tmin = INFINITY, bw = 0, fl = 0;
    for (int i = 0; i < n; i++) {
        use[i] = s[i].us > 0 && isfinite(s[i].us) && s[i].bytes >= 0 && s[i].flops >= 0;
        if (!use[i]) continue;
        n_ok++;
        /* t0 is paid once per call (moe: per expert hit) */
        double per_call = s[i].us / (s[i].calls > 1 ? s[i].calls : 1);
        if (per_call < tmin) tmin = per_call;
        if (s[i].bytes / s[i].us > bw) bw = s[i].bytes / s[i].us;
        if (s[i].flops / s[i].us > fl) fl = s[i].flops / s[i].us;
    }
    if (n_ok < 2) return false;
    /* start: t0 half the fastest sample, rates the best achieved (per µs -> G/s) */
    double x[NP] = { log(fmax(tmin * 0.5, 0.02)), log(fmax(bw * 1e-3, 0.01)), log(fmax(fl * 1e-3, 0.01)), log(4.0) };
    /* B is only seen where samples are bandwidth-bound; where none is (or
     * the compute term explains them as well), it used to run off to
     * thousands of GB/s. No sample read faster than bw, so B stays under
     * 1.5x that: a fitted figure a reader can take as a bandwidth. */
    struct fit_data d = { .s = s, .use = use, .n = n, .np = NP, .t0_max_log = log(fmax(tmin, 0.02)),
                          .b_max_log = log(fmax(1.5 * bw * 1e-3, 0.01)) };
    fit_once(&d, x);
    struct het_cost_fit f;
    to_fit(&d, x, &f);
    fit_knots(&d, &f);
    if (drop_outliers(&d, &f, use, n_ok)) { /* and fit again without them */
        fit_once(&d, x);
        to_fit(&d, x, &f);
        fit_knots(&d, &f);
    }
    double sum = 0;
    int cnt = 0;
    for (int i = 0; i < n; i++)
        if (use[i]) {
            double e = rel_err(&f, &s[i]);
            sum += e * e;
            cnt++;
        }
    f.error = sqrt(sum / cnt);
    *out = f;
    return true;
}

enum het_status het_profile_refit(het_profile *p, het_error *err)
{
    double peak_bw = 0, peak_fl = 0;
    for (int i = 0; i < p->n_models; i++) {
        struct het_profile_model *m = &p->models[i];
        if (m->n_samples < 2) continue;
        struct het_cost_fit f;
        if (het_cost_fit_samples(m->samples, m->n_samples, &f)) {
            m->fit = f;
            m->has_fit = true;
        }
        for (int k = 0; k < m->n_samples; k++) {
            const struct het_profile_sample *s = &m->samples[k];
            if (!(s->us > 0)) continue;
            peak_bw = fmax(peak_bw, s->bytes / s->us * 1e-3);
            peak_fl = fmax(peak_fl, s->flops / s->us * 1e-3);
        }
    }
    if (peak_bw > 0) p->dc.peak_gbps = peak_bw;
    if (peak_fl > 0) p->dc.peak_gflops = peak_fl;
    (void)err;
    return HET_OK;
}
