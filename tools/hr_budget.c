/*
 * hr_budget.c — what --stats says about `--accuracy-budget KL`, which the
 * library's session applies (het/session.h: the sensitivity table is taken
 * once and every graph is planned with the budget).
 */
#include "tools/hetrun.h"

#include <math.h>

void hr_budget_print_stats(const struct hr_session *s, const struct hr_opts *o, FILE *f, bool json)
{
    const struct het_session_budget *b = het_session_budget(s->hs);
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
