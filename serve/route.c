/*
 * route.c — which route serves a request: the default model, or the long
 * one (--long-model) for prompts of at least `threshold` tokens or that do
 * not fit the default context.
 *
 * Without a given threshold it is derived from a start-up calibration of
 * both routes (their measurements interleaved, the fastest of three tries
 * kept, so that other load on the machine does not favour either): a
 * linear model of prefill time in prompt length and of decode
 * step time in cache length, fitted from two prompt lengths, and the
 * threshold is the shortest prompt for which the long route's predicted
 * time to first token plus decode is lower by at least 10%. Calibration is done once, at
 * start-up (not from running estimates), so routing is reproducible.
 */
#include "het/serve.h"

#include "sched/clock.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

/* milliseconds on the library's monotonic clock */
static double now_ms(void) { return het_now_us() / 1e3; }

/* prefill n synthetic tokens from an empty sequence 0, then time decode steps */
static enum het_status measure(het_context *ctx, const int32_t *toks, int32_t n, int n_dec, double *prefill_ms,
                               double *step_ms, het_error *err)
{
    het_context_seq_reset(ctx, 0);
    double t0 = now_ms();
    enum het_status st = het_context_eval(ctx, toks, n, false, err);
    if (st != HET_OK) return st;
    double t1 = now_ms();
    for (int i = 0; i < n_dec && st == HET_OK; i++) st = het_context_eval(ctx, &toks[i], 1, false, err);
    double t2 = now_ms();
    het_context_seq_reset(ctx, 0);
    if (t1 - t0 < *prefill_ms) *prefill_ms = t1 - t0;
    if ((t2 - t1) / n_dec < *step_ms) *step_ms = (t2 - t1) / n_dec;
    return st;
}

static double nonneg(double x) { return x > 0 ? x : 0; }

enum het_status het_route_calibrate(het_model *const *m, het_context *const *ctx, int n_routes,
                                    struct het_route_cost *out, het_error *err)
{
    enum { N_DEC = 8, REPS = 3, MAX_ROUTES = 4 };
    if (n_routes < 1 || n_routes > MAX_ROUTES)
        return het_error_set(err, HET_ERR_INVALID, "route calibration: %d routes (1..%d)", n_routes, MAX_ROUTES);
    int32_t n2 = 256, n_vocab = 1 << 30;
    for (int r = 0; r < n_routes; r++) {
        if (het_context_n_ctx(ctx[r]) / 2 < n2) n2 = het_context_n_ctx(ctx[r]) / 2;
        if (het_model_get_config(m[r])->n_vocab < n_vocab) n_vocab = het_model_get_config(m[r])->n_vocab;
    }
    int32_t n1 = n2 / 8;
    if (n1 < 1 || n2 - n1 < 1) return het_error_set(err, HET_ERR_INVALID, "route calibration: context too small");
    int32_t *toks = malloc((size_t)n2 * sizeof *toks);
    if (!toks) return het_error_set(err, HET_ERR_NOMEM, "route calibration: out of memory");
    for (int32_t i = 0; i < n2; i++) toks[i] = (int32_t)((3 + 7919u * (uint32_t)i) % (uint32_t)n_vocab);
    /* [route][point]: the fastest try; tries alternate between routes so that
     * other work on the machine weighs on each route alike */
    double pre[MAX_ROUTES][2], step[MAX_ROUTES][2], junk0 = 1e300, junk1 = 1e300;
    enum het_status st = HET_OK;
    for (int r = 0; r < n_routes && st == HET_OK; r++) {
        pre[r][0] = pre[r][1] = step[r][0] = step[r][1] = 1e300;
        st = measure(ctx[r], toks, n1, 2, &junk0, &junk1, err); /* warm-up: plans */
    }
    for (int rep = 0; rep < REPS && st == HET_OK; rep++)
        for (int p = 0; p < 2 && st == HET_OK; p++)
            for (int r = 0; r < n_routes && st == HET_OK; r++)
                st = measure(ctx[r], toks, p ? n2 : n1, N_DEC, &pre[r][p], &step[r][p], err);
    free(toks);
    if (st != HET_OK) {
        het_error_prefix(err, "route calibration");
        return st;
    }
    for (int r = 0; r < n_routes; r++) {
        out[r].prefill_ms_tok = nonneg((pre[r][1] - pre[r][0]) / (n2 - n1));
        out[r].prefill_ms0 = nonneg(pre[r][0] - out[r].prefill_ms_tok * n1);
        out[r].decode_ms_tok = nonneg((step[r][1] - step[r][0]) / (n2 - n1));
        out[r].decode_ms0 = nonneg(step[r][0] - out[r].decode_ms_tok * n1);
    }
    return HET_OK;
}

double het_route_cost_ms(const struct het_route_cost *c, int32_t n_prompt, int32_t n_out)
{
    double n = n_prompt, m = n_out;
    return c->prefill_ms0 + c->prefill_ms_tok * n + m * c->decode_ms0 + c->decode_ms_tok * (m * n + m * (m - 1) / 2);
}

/* the long route must win by this factor, so that measurement noise between
 * two equal routes does not decide */
static const double LONG_MARGIN = 0.9;

int32_t het_route_derive_threshold(const struct het_route_cost *dflt, const struct het_route_cost *lng,
                                   int32_t n_out, int32_t max_prompt)
{
    for (int32_t n = 1; n <= max_prompt; n++)
        if (het_route_cost_ms(lng, n, n_out) < LONG_MARGIN * het_route_cost_ms(dflt, n, n_out)) return n;
    return max_prompt + 1;
}

const char *het_route_name(enum het_route_id r)
{
    return r == HET_ROUTE_LONG ? "long" : "default";
}

enum het_route_id het_route_choose(const struct het_route_rule *r, int32_t n_prompt, int32_t n_predict,
                                   char *reason, size_t cap)
{
    const char *how = r->derived ? "derived" : "given";
    if (!r->has_long) {
        snprintf(reason, cap, "single route");
        return HET_ROUTE_DEFAULT;
    }
    if (n_prompt >= r->threshold) {
        snprintf(reason, cap, "prompt of %d tokens >= threshold %d (%s)", n_prompt, r->threshold, how);
        return HET_ROUTE_LONG;
    }
    if ((int64_t)n_prompt + n_predict > r->n_ctx_default) {
        snprintf(reason, cap, "prompt of %d tokens + %d to generate exceed the default context of %d", n_prompt,
                 n_predict, r->n_ctx_default);
        return HET_ROUTE_LONG;
    }
    snprintf(reason, cap, "prompt of %d tokens < threshold %d (%s)", n_prompt, r->threshold, how);
    return HET_ROUTE_DEFAULT;
}
