/*
 * budget.c — a session's accuracy budget (het/session.h, step 6): the
 * scheduler plans every graph so that lossy devices (the NPU) run only the
 * node groups whose predicted KL fits.
 *
 * The sensitivity table is taken once (het_sensitivity_acquire: a file, the
 * cache, else measured now against the CPU alone and cached). Enumerating
 * the node groups needs a graph: a dry run of the built-in measuring text
 * on a scheduler of its own, which the session's scheduler then plans with
 * the budget to say whether explicit placements (pins, single:DEV) alone
 * exceed it. A set without a lossy device, or without an exact one to keep
 * nodes on, accepts the budget and says why it has no effect.
 */
#include "runtime/session_impl.h"

#include "het/chat.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* the devices the table is measured on: the first lossy (caps) and the first exact one */
static void budget_devices(const het_session *s, int *lossy, int *exact)
{
    *lossy = *exact = -1;
    for (int i = 0; i < s->n_devices; i++) {
        bool is_lossy = het_device_get_caps(s->devices[i])->lossy;
        if (is_lossy && *lossy < 0) *lossy = i;
        if (!is_lossy && *exact < 0) *exact = i;
    }
}

/* The measuring text's tokens (BOS as the model says). */
static enum het_status text_tokens(const het_model *m, int32_t **ids, int32_t *n, het_error *err)
{
    const char *text = het_accuracy_default_text();
    return het_prompt_tokenize(het_model_tokenizer(m), text, strlen(text), ids, n, err);
}

/* Dry-run the text (on a scheduler of its own, so the session's counters
 * start clean), take the table for its graph, hand the budget to the
 * session's scheduler and plan the graph with it. */
static enum het_status take_table(het_session *s, const int32_t *tokens, int32_t n, int lossy, int exact,
                                  het_error *err)
{
    struct het_session_budget *b = s->budget;
    struct het_sched_params sp = { .devices = s->devices, .n_devices = s->n_devices,
                                   .profiles = (const het_profile *const *)s->profiles };
    het_sched *dry = het_sched_init(&sp, err);
    struct het_context_params cp = { .n_ctx = n + 8, .sched = dry };
    het_context *ctx = dry ? het_context_init(s->model, &cp, err) : NULL;
    enum het_status st = ctx ? HET_OK : (err ? err->status : HET_ERR_INVALID);
    if (dry) het_sched_set_dry_run(dry, true);
    if (st == HET_OK) st = het_context_eval(ctx, tokens, n, false, err);
    const het_graph *g = st == HET_OK ? het_sched_last_graph(dry) : NULL;
    struct het_sensitivity_request r = {
        .source = s->p.sensitivity, .measure_missing = true, .ref = &s->p, .tokens = tokens, .n_tokens = n,
        .devices = s->devices, .profiles = (const het_profile *const *)s->profiles, .n_devices = s->n_devices,
        .lossy = lossy, .exact = exact, .sched = s->sched, .log = s->p.log, .user = s->p.user,
    };
    if (st == HET_OK) st = het_sensitivity_acquire(s->model, g, &r, &b->sens, b->source, sizeof b->source, err);
    if (st == HET_OK) {
        s->budget_pa = (struct het_plan_accuracy){ .budget_kl = b->budget_kl, .sens = &b->sens };
        het_sched_set_accuracy(s->sched, &s->budget_pa);
        b->active = true;
        const struct het_plan *plan = NULL;
        st = het_sched_plan(s->sched, g, &plan, err);
        if (st == HET_OK && plan->pred_kl > plan->budget_kl * (1 + 1e-9))
            het_session_log(s, "accuracy budget %g: pins or the single:DEV policy alone put a predicted KL of %.2e "
                            "on %s; explicit placements are kept", b->budget_kl, plan->pred_kl, b->lossy);
    }
    het_context_free(ctx);
    het_sched_free(dry);
    return st;
}

enum het_status het_session_budget_open(het_session *s, het_error *err)
{
    struct het_session_budget *b = s->budget = calloc(1, sizeof *s->budget);
    if (!b) return het_error_set(err, HET_ERR_NOMEM, "accuracy budget: out of memory");
    b->budget_kl = s->p.accuracy_budget;
    int lossy, exact;
    budget_devices(s, &lossy, &exact);
    if (lossy >= 0) snprintf(b->lossy, sizeof b->lossy, "%s", het_device_name(s->devices[lossy]));
    struct het_sched_params pol = { 0 };
    enum het_status st = het_policy_parse(s->p.policy, s->devices, s->n_devices, &pol, err);
    if (st != HET_OK) return st;
    if (lossy < 0) b->why_not = "no lossy device (npu) in the device set";
    else if (exact < 0) b->why_not = "no exact device in the set to keep nodes on";
    else if (pol.policy && !pol.policy->honours_budget) b->why_not = "the policy ignores it";
    if (b->why_not) {
        het_session_log(s, "accuracy budget %g: %s; it has no effect", b->budget_kl, b->why_not);
        return HET_OK;
    }
    int32_t *tokens = NULL, n = 0;
    st = text_tokens(s->model, &tokens, &n, err);
    if (st == HET_OK) st = take_table(s, tokens, n, lossy, exact, err);
    free(tokens);
    if (st != HET_OK) het_error_prefix(err, "accuracy budget");
    return st;
}
