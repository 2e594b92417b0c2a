/*
 * hr_route.c — --long-model routing for `hetrun run`: the same rule the
 * server applies (het_route_choose), so a prompt goes to the same model
 * whether it is run once or served. A given --long-threshold is used as is;
 * otherwise both routes are calibrated first (het_route_calibrate).
 */
#include "tools/hetrun.h"

#include <stdlib.h>
#include <string.h>

#include "het/serve.h"

void hr_long_opts(const struct hr_opts *o, struct hr_opts *lo)
{
    *lo = *o;
    lo->model = o->long_model;
    if (o->long_devices) {
        lo->device = NULL;
        lo->devices = o->long_devices;
    }
    lo->n_ctx = o->long_ctx;
    if (o->long_parallel) lo->parallel = o->long_parallel;
}

/* calibrate both routes (the long one in a session of its own, closed after) */
static bool derive_threshold(struct hr_session *s, const struct hr_opts *lo, const struct hr_opts *o,
                             struct het_route_rule *rule)
{
    struct hr_session ls;
    if (!hr_session_open(&ls, lo, true)) {
        hr_session_close(&ls);
        return false;
    }
    struct het_route_cost cost[2];
    het_error err = { 0 };
    het_model *const models[2] = { s->model, ls.model };
    het_context *const ctxs[2] = { s->ctx, ls.ctx };
    bool ok = het_route_calibrate(models, ctxs, 2, cost, &err) == HET_OK;
    rule->n_ctx_long = het_context_n_ctx(ls.ctx);
    hr_session_close(&ls);
    if (!ok) {
        hr_error(o, "%s", err.msg);
        return false;
    }
    rule->threshold = het_route_derive_threshold(&cost[0], &cost[1], o->n_predict, rule->n_ctx_default);
    rule->derived = true;
    return true;
}

bool hr_route_session(struct hr_session *s, const struct hr_opts *o, int32_t **ids, int32_t *n_ids)
{
    struct hr_opts lo;
    hr_long_opts(o, &lo);
    struct het_route_rule rule = {
        .has_long = true, .threshold = o->long_threshold, .n_ctx_default = het_context_n_ctx(s->ctx),
    };
    if (rule.threshold <= 0 && !derive_threshold(s, &lo, o, &rule)) return false;
    char reason[200];
    enum het_route_id r = het_route_choose(&rule, *n_ids, o->n_predict, reason, sizeof reason);
    fprintf(stderr, "route: %s (%s) — %s\n", het_route_name(r), r == HET_ROUTE_LONG ? lo.model : o->model, reason);
    if (r == HET_ROUTE_DEFAULT) return true;
    /* the session is reopened in place: the scheduler keeps its address */
    hr_session_close(s);
    free(*ids);
    *ids = NULL;
    return hr_session_open(s, &lo, true) && hr_tokenize_prompt(s, &lo, ids, n_ids);
}
