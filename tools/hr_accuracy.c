/*
 * hr_accuracy.c — `hetrun plan --accuracy`, `--accuracy-budget` and
 * `--sensitivity` (see hr_accuracy.h): the flags and the printing. The
 * measuring is the library's (het/session.h): the reference is the CPU
 * alone in a session of its own (het_reference_logits), and the
 * sensitivity table comes from het_sensitivity_acquire.
 */
#include "tools/hr_accuracy.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void log_line(void *user, const char *line)
{
    (void)user;
    fprintf(stderr, "het: %s\n", line);
}

bool hr_accuracy_open(struct hr_accuracy *a, const struct hr_opts *o, const struct hr_plan_opts *po, het_model *m,
                      int32_t chunk)
{
    memset(a, 0, sizeof *a);
    a->o = o;
    a->model = m;
    a->chunk = chunk;
    a->budget = po->accuracy_budget ? po->budget_kl : NAN; /* parsed by hr_parse */
    struct hr_opts to = *o;
    if (!to.prompt && !to.prompt_file) to.prompt = het_accuracy_default_text();
    struct hr_session tmp = { .model = m };
    if (!hr_tokenize_prompt(&tmp, &to, &a->tokens, &a->n)) return false;
    if (a->n < 1) {
        hr_error(o, "--accuracy: the text has no tokens");
        return false;
    }
    a->n_vocab = het_model_get_config(m)->n_vocab;
    size_t cells = (size_t)a->n * (size_t)a->n_vocab;
    a->ref = malloc(cells * sizeof *a->ref);
    a->test = malloc(cells * sizeof *a->test);
    a->kl = malloc((size_t)a->n * sizeof *a->kl);
    a->top = malloc((size_t)a->n * 2 * sizeof *a->top);
    if (!a->ref || !a->test || !a->kl || !a->top) {
        hr_error(o, "--accuracy: out of memory for %d x %d logits", a->n, a->n_vocab);
        return false;
    }
    a->pa = (struct het_plan_accuracy){ .budget_kl = a->budget, .sens = &a->sens };
    return true;
}

void hr_accuracy_close(struct hr_accuracy *a)
{
    free(a->tokens);
    free(a->ref);
    free(a->test);
    free(a->kl);
    free(a->top);
    memset(a, 0, sizeof *a);
}

/* ---------------------------------------------------------------------------
 * running the text                                                          */

static bool logits_on(struct hr_accuracy *a, het_sched *s, int32_t chunk, float *out)
{
    het_error err = { 0 };
    struct het_context_params cp = { .n_ctx = a->n + 8, .sched = s };
    het_context *ctx = het_context_init(a->model, &cp, &err);
    bool ok = ctx && het_accuracy_logits(ctx, a->n_vocab, a->tokens, a->n, chunk, out, &err) == HET_OK;
    if (!ok) hr_error(a->o, "--accuracy: %s", err.msg);
    het_context_free(ctx);
    return ok;
}

/* the CPU alone, in its own session (own model mapping, own device) */
static bool reference(struct hr_accuracy *a, int32_t chunk, float *out)
{
    struct het_session_params p;
    if (!hr_session_params(a->o, &p)) return false;
    het_error err = { 0 };
    if (het_reference_logits(&p, a->tokens, a->n, chunk, out, &err) != HET_OK) {
        hr_error(a->o, "--accuracy: %s", err.msg);
        return false;
    }
    return true;
}

static bool ensure_ref(struct hr_accuracy *a)
{
    if (!a->have_ref) a->have_ref = reference(a, a->chunk, a->ref);
    return a->have_ref;
}

bool hr_accuracy_eval(struct hr_accuracy *a, het_sched *sched)
{
    if (!ensure_ref(a)) return false;
    het_sched_set_dry_run(sched, false);
    if (!logits_on(a, sched, a->chunk, a->test)) return false;
    het_accuracy_compare(a->ref, a->test, a->n, a->n_vocab, &a->res, a->kl, a->top);
    a->evaluated = true;
    return true;
}

/* ---------------------------------------------------------------------------
 * sensitivity                                                               */

bool hr_accuracy_sensitivity(struct hr_accuracy *a, const struct hr_plan_opts *po, const het_graph *g,
                             const struct hr_acc_devices *d)
{
    struct het_session_params p;
    if (!hr_session_params(a->o, &p)) return false;
    bool measuring = po->sensitivity && !strcmp(po->sensitivity, "measure");
    if (measuring && (d->lossy < 0 || d->exact < 0)) {
        hr_error(a->o, "--sensitivity measure: needs a lossy device (npu) and an exact one (cpu) in --devices");
        return false;
    }
    struct het_sensitivity_request r = {
        .source = po->sensitivity, .measure_missing = !isnan(a->budget), .ref = &p, .tokens = a->tokens,
        .n_tokens = a->n, .devices = d->devices, .profiles = d->profiles,
        .n_devices = d->n, .lossy = d->lossy, .exact = d->exact, .sched = d->sched, .log = log_line,
    };
    het_error err = { 0 };
    if (het_sensitivity_acquire(a->model, g, &r, &a->sens, a->sens_source, sizeof a->sens_source, &err) != HET_OK) {
        hr_error(a->o, "--sensitivity: %s", err.msg);
        return false;
    }
    return true;
}

/* ---------------------------------------------------------------------------
 * printing                                                                  */

static void piece(const struct hr_accuracy *a, int32_t id, char *buf, int cap)
{
    char raw[64];
    int n = het_token_to_piece(het_model_tokenizer(a->model), id, raw, (int)sizeof raw - 1, true);
    if (n < 0 || n > (int)sizeof raw - 1) n = n < 0 ? 0 : (int)sizeof raw - 1;
    raw[n] = 0;
    int o = 0;
    for (int i = 0; raw[i];) { /* whole UTF-8 characters; control characters escaped */
        unsigned char c = (unsigned char)raw[i];
        int len = c < 0x80 ? 1 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2;
        if (len > (int)strlen(raw + i)) len = (int)strlen(raw + i);
        const char *put = c == '\n' ? "\\n" : c < 0x20 ? "?" : NULL;
        int w = put ? (int)strlen(put) : len;
        if (o + w > cap - 1) break;
        memcpy(buf + o, put ? put : raw + i, (size_t)w);
        o += w;
        i += len;
    }
    buf[o] = 0;
}

static void print_prediction(const struct hr_accuracy *a, const struct het_plan *plan)
{
    if (isnan(plan->pred_kl)) return;
    printf("  predicted KL of this placement %.2e per position (sensitivity: %s; %s)\n", plan->pred_kl,
           a->sens.label[0] ? a->sens.label : "-", a->sens_source);
    if (!isnan(plan->budget_kl))
        printf("  accuracy budget %.2e: %d node%s kept off the lossy devices%s\n", plan->budget_kl, plan->n_kept,
               plan->n_kept == 1 ? "" : "s",
               plan->pred_kl > plan->budget_kl * (1 + 1e-9) ? " (pins/single:DEV alone exceed it)" : "");
}

void hr_accuracy_print(const struct hr_accuracy *a, const struct het_plan *plan)
{
    printf("accuracy:\n");
    print_prediction(a, plan);
    if (!a->evaluated) return;
    if (a->chunk == 1) printf("  %d positions (one token per eval: decode graphs) vs the CPU alone:\n", a->n);
    else printf("  %d positions (prefill graphs of %d tokens) vs the CPU alone:\n", a->n, a->chunk < a->n ? a->chunk : a->n);
    printf("  %5s %-14s %-14s %-14s %5s %10s\n", "pos", "token", "cpu top-1", "plan top-1", "agree", "KL");
    for (int p = 0; p < a->n; p++) {
        char t[16], r[16], s[16];
        piece(a, a->tokens[p], t, sizeof t);
        piece(a, a->top[2 * p], r, sizeof r);
        piece(a, a->top[2 * p + 1], s, sizeof s);
        printf("  %5d %-14s %-14s %-14s %5s %10.3e\n", p, t, r, s, a->top[2 * p] == a->top[2 * p + 1] ? "yes" : "NO",
               a->kl[p]);
    }
    printf("  top-1 agreement %d/%d = %.1f%%; KL(p_cpu || p_plan) mean %.3e, max %.3e (position %d)\n",
           a->res.n_agree, a->res.n_positions, 100 * a->res.top1, a->res.kl_mean, a->res.kl_max, a->res.kl_max_pos);
}

void hr_accuracy_json(const struct hr_accuracy *a, const struct het_plan *plan)
{
    printf(",\"accuracy\":{\"predicted_kl\":");
    hr_json_num(plan->pred_kl, "%.6g");
    printf(",\"budget_kl\":");
    hr_json_num(plan->budget_kl, "%.6g");
    printf(",\"kept\":%d,\"sensitivity\":{\"measured\":%s,\"label\":", plan->n_kept,
           a->sens.measured ? "true" : "false");
    hr_json_str(a->sens.label);
    printf(",\"source\":");
    hr_json_str(a->sens_source);
    printf(",\"groups\":[");
    for (int k = 0; k < a->sens.n_groups; k++) {
        printf("%s{\"pattern\":", k ? "," : "");
        hr_json_str(a->sens.groups[k].pattern);
        printf(",\"kl\":");
        hr_json_num(a->sens.groups[k].kl, "%.6g");
        printf(",\"top1\":");
        hr_json_num(a->sens.groups[k].top1, "%.6g");
        printf(",\"nodes\":%d}", a->sens.groups[k].n_nodes);
    }
    printf("]}");
    if (a->evaluated) {
        printf(",\"positions\":%d,\"mode\":\"%s\",\"chunk\":%d,\"top1\":", a->n, a->chunk == 1 ? "decode" : "prefill",
               a->chunk < a->n ? a->chunk : a->n);
        hr_json_num(a->res.top1, "%.6g");
        printf(",\"n_agree\":%d,\"kl_mean\":", a->res.n_agree);
        hr_json_num(a->res.kl_mean, "%.6g");
        printf(",\"kl_max\":");
        hr_json_num(a->res.kl_max, "%.6g");
        printf(",\"kl_max_pos\":%d,\"per_position\":[", a->res.kl_max_pos);
        for (int p = 0; p < a->n; p++) {
            printf("%s{\"token\":%d,\"cpu\":%d,\"plan\":%d,\"kl\":", p ? "," : "", a->tokens[p], a->top[2 * p],
                   a->top[2 * p + 1]);
            hr_json_num(a->kl[p], "%.6g");
            printf("}");
        }
        printf("]");
    }
    printf("}");
}
