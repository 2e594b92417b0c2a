/*
 * hr_budget.c — `--accuracy-budget KL` for every command that runs a model
 * (run, logits, bench, serve; plan has its own flow in cmd_plan.c): the
 * session's scheduler plans every graph with the budget (het_sched_params
 * .accuracy), so lossy devices (the NPU) run only the node groups whose
 * predicted KL fits.
 *
 * The sensitivity table the budget is spent with is taken once per session
 * (hr_accuracy_sensitivity: --sensitivity FILE, the cached measurement
 * beside the device profiles, else measured now and cached, which prints
 * one line saying how long it took). Enumerating the node groups needs a
 * graph: a dry run of the measuring text (on a scheduler of its own), which
 * the session's scheduler then plans with the budget to say whether
 * explicit placements (pins, single:DEV) alone exceed it. A set without a lossy device, or
 * without an exact one to keep nodes on, accepts the flag and says once
 * that it has no effect.
 */
#include "tools/hetrun.h"
#include "tools/hr_accuracy.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct hr_budget {
    struct het_sensitivity   sens;      /* the table the scheduler plans with */
    struct het_plan_accuracy pa;
    char   source[4200];                /* where the table came from          */
    char   lossy[32];                   /* the lossy device's name ("" none)  */
    bool   active;                      /* given to the scheduler             */
    const char *why_not;                /* when not active: the reason        */
};

void hr_budget_free(struct hr_budget *b) { free(b); }

/* the devices the table is measured on: the first lossy (NPU profile) and the first exact one */
static struct hr_acc_devices budget_devices(const struct hr_session *s)
{
    struct hr_acc_devices d = { s->devices, (const het_profile *const *)s->profiles, s->n_devices, -1, -1, s->sched };
    for (int i = 0; i < s->n_devices; i++) {
        bool lossy = het_profile_device_kind(het_sched_profile(s->sched, i)) == HET_DEVICE_NPU;
        if (lossy && d.lossy < 0) d.lossy = i;
        if (!lossy && d.exact < 0) d.exact = i;
    }
    return d;
}

static void notice(const struct hr_opts *o, const char *fmt, const char *arg)
{
    fprintf(stderr, "hetrun %s: --accuracy-budget %s: ", o->cmd, o->plan.accuracy_budget);
    fprintf(stderr, fmt, arg);
    fputc('\n', stderr);
}

/* Dry-run the text (on a scheduler of its own, so the session's counters
 * start clean), take the table for its graph, hand the budget to the
 * session's scheduler and plan the graph with it. */
static bool take_table(struct hr_session *s, const struct hr_opts *o, struct hr_accuracy *a,
                       const struct hr_acc_devices *d)
{
    het_error err = { 0 };
    struct het_sched_params sp = { .devices = s->devices, .n_devices = s->n_devices, .profiles = d->profiles };
    het_sched *dry = het_sched_init(&sp, &err);
    struct het_context_params cp = { .n_ctx = a->n + 8, .sched = dry };
    het_context *ctx = dry ? het_context_init(s->model, &cp, &err) : NULL;
    bool ok = ctx != NULL;
    if (dry) het_sched_set_dry_run(dry, true);
    ok = ok && het_context_eval(ctx, a->tokens, a->n, false, &err) == HET_OK;
    if (!ok) hr_error(o, "--accuracy-budget: %s", err.msg);
    const het_graph *g = ok ? het_sched_last_graph(dry) : NULL;
    ok = ok && hr_accuracy_sensitivity(a, &o->plan, g, d);
    struct hr_budget *b = s->budget;
    if (ok) {
        b->sens = a->sens;
        snprintf(b->source, sizeof b->source, "%s", a->sens_source);
        b->pa = (struct het_plan_accuracy){ .budget_kl = o->plan.budget_kl, .sens = &b->sens };
        het_sched_set_accuracy(s->sched, &b->pa);
        b->active = true;
        const struct het_plan *plan = NULL;
        ok = het_sched_plan(s->sched, g, &plan, &err) == HET_OK;
        if (!ok) hr_error(o, "--accuracy-budget: %s", err.msg);
        else if (plan->pred_kl > plan->budget_kl * (1 + 1e-9))
            fprintf(stderr, "hetrun %s: --accuracy-budget %s: pins or --policy single:DEV alone put a predicted KL of "
                    "%.2e on %s; explicit placements are kept\n", o->cmd, o->plan.accuracy_budget, plan->pred_kl,
                    b->lossy);
        else if (o->verbose)
            fprintf(stderr, "hetrun %s: --accuracy-budget %s: %d of %d nodes of a %d-token prefill kept off %s, "
                    "predicted KL %.2e (sensitivity: %s)\n", o->cmd, o->plan.accuracy_budget, plan->n_kept,
                    plan->n_nodes, a->n, b->lossy, plan->pred_kl, b->source);
    }
    het_context_free(ctx);
    het_sched_free(dry);
    return ok;
}

bool hr_budget_open(struct hr_session *s, const struct hr_opts *o)
{
    if (!o->plan.accuracy_budget) return true;
    s->budget = calloc(1, sizeof *s->budget);
    if (!s->budget) {
        hr_error(o, "--accuracy-budget: out of memory");
        return false;
    }
    struct hr_budget *b = s->budget;
    struct hr_acc_devices d = budget_devices(s);
    if (d.lossy >= 0) snprintf(b->lossy, sizeof b->lossy, "%s", het_device_name(s->devices[d.lossy]));
    struct het_sched_params pol = { 0 };
    if (!hr_policy_parse(o->policy, s->devices, s->n_devices, &pol)) return false;
    if (d.lossy < 0) b->why_not = "no lossy device (npu) in the device set";
    else if (d.exact < 0) b->why_not = "no exact device in the set to keep nodes on";
    else if (pol.policy == HET_POLICY_ALTERNATE) b->why_not = "the alternate policy ignores it";
    if (b->why_not) {
        notice(o, "%s; it has no effect", b->why_not);
        return true;
    }
    /* the text: the built-in one (not the prompt: bench's -p is a count, and a
     * table measured here is cached for every later run of the model) */
    struct hr_opts to = *o;
    to.prompt = to.prompt_file = NULL;
    to.no_bos = false;
    struct hr_accuracy a;
    bool ok = hr_accuracy_open(&a, &to, &to.plan, s->model, 0) && take_table(s, &to, &a, &d);
    hr_accuracy_close(&a);
    return ok;
}

void hr_budget_print_stats(const struct hr_session *s, const struct hr_opts *o, FILE *f, bool json)
{
    const struct hr_budget *b = s->budget;
    if (!b) return;
    struct het_sched_stats ss;
    het_sched_get_stats(s->sched, &ss);
    if (json) {
        fprintf(f, "\"accuracy_budget\":{\"budget_kl\":%g,\"active\":%s,\"lossy\":\"%s\",\"kept_last\":%d,"
                "\"kept_total\":%llu,\"predicted_kl_last\":",
                o->plan.budget_kl, b->active ? "true" : "false", b->lossy, b->active ? ss.last_n_kept : 0,
                (unsigned long long)(b->active ? ss.n_accuracy_kept : 0));
        if (b->active && isfinite(ss.last_pred_kl)) fprintf(f, "%.6g", ss.last_pred_kl);
        else fprintf(f, "null");
        fprintf(f, ",\"sensitivity_measured\":%s},", b->active && b->sens.measured ? "true" : "false");
        return;
    }
    if (!b->active) {
        fprintf(f, "accuracy budget %.2e: no effect (%s)\n", o->plan.budget_kl, b->why_not);
        return;
    }
    fprintf(f, "accuracy budget %.2e: %d node%s of the last graph kept off %s (predicted KL %.2e), %llu over all "
            "graphs run; sensitivity: %s (%s)\n", o->plan.budget_kl, ss.last_n_kept, ss.last_n_kept == 1 ? "" : "s",
            b->lossy, ss.last_pred_kl, (unsigned long long)ss.n_accuracy_kept, b->sens.label, b->source);
}
