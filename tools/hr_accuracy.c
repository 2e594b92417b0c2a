/*
 * hr_accuracy.c — `hetrun plan --accuracy`, `--accuracy-budget` and
 * `--sensitivity` (see hr_accuracy.h). The reference is a separate session
 * with the CPU alone, so nothing the plan's devices prepared is shared
 * with it. A group's sensitivity is measured by running the text with only
 * that group of nodes pinned to the lossy device (everything else on an
 * exact device) and recording the mean KL against the reference; the table
 * is stored beside the device profiles and reused by later plans.
 */
#include "tools/hr_accuracy.h"

#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The library's message without its own "sensitivity" prefix: the flag
 * names the subject already. */
static const char *sens_msg(const char *msg)
{
    if (!strncmp(msg, "sensitivity: ", 13)) return msg + 13;
    if (!strncmp(msg, "sensitivity ", 12)) return msg + 12;
    return msg;
}

/* stories260K's reference continuation of "Once upon a time" (shared/reference/stories260K-1) */
static const char default_text[] =
    "Once upon a time, there was a little girl named Lily. She loved to play outside in the park. One day, she saw "
    "a big, red ball. She wanted to play with it, but it was too high.\nLily's mom said\n";

bool hr_accuracy_open(struct hr_accuracy *a, const struct hr_opts *o, const struct hr_plan_opts *po, het_model *m,
                      int32_t chunk)
{
    memset(a, 0, sizeof *a);
    a->o = o;
    a->model = m;
    a->chunk = chunk;
    a->budget = po->accuracy_budget ? po->budget_kl : NAN; /* parsed by hr_parse */
    struct hr_opts to = *o;
    if (!to.prompt && !to.prompt_file) to.prompt = default_text;
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
    free(a->ref_batch);
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
    struct hr_opts ro = *a->o;
    ro.device = "cpu";
    ro.devices = NULL;
    ro.policy = NULL;
    ro.strict = false;
    memset(&ro.plan, 0, sizeof ro.plan);
    struct hr_session s;
    bool ok = hr_session_open(&s, &ro, false);
    if (ok) {
        het_model *keep = a->model;
        a->model = s.model;
        ok = logits_on(a, s.sched, chunk, out);
        a->model = keep;
    }
    hr_session_close(&s);
    return ok;
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

void hr_node_class(const char *name, char *buf, size_t size)
{
    size_t n = strlen(name), k = n;
    while (k > 0 && isdigit((unsigned char)name[k - 1])) k--;
    if (k < n && k > 1 && name[k - 1] == '.') snprintf(buf, size, "%.*s*", (int)k, name);
    else snprintf(buf, size, "%s", name);
}

/* the classes of nodes the lossy device runs, in graph order, with counts */
static int node_classes(const het_graph *g, const struct hr_acc_devices *d, char (*cls)[64], int *count, int max)
{
    int n = 0;
    for (int i = 0; i < het_graph_n_nodes(g); i++) {
        const struct het_tensor *t = het_graph_node(g, i);
        if (!t->name[0] || !het_sched_device_supports(d->sched, d->lossy, t)) continue;
        char c[64];
        hr_node_class(t->name, c, sizeof c);
        int k = 0;
        while (k < n && strcmp(cls[k], c)) k++;
        if (k == n) {
            if (n == max) continue;
            snprintf(cls[n], sizeof cls[n], "%s", c);
            count[n++] = 0;
        }
        count[k]++;
    }
    return n;
}

/* The cache key of a sensitivity table: the model file (path, size, mtime)
 * and the lossy device's description, which names its numerics (e.g. the
 * NPU's activation format and group), so a table measured with other
 * numerics is not reused. */
static void model_id(const char *path, const struct hr_acc_devices *d, char *buf, size_t size)
{
    struct stat st;
    const char *desc = d && d->lossy >= 0 ? het_device_description(d->devices[d->lossy]) : "";
    if (path && stat(path, &st) == 0)
        snprintf(buf, size, "%s:%lld:%lld|%s", path, (long long)st.st_size, (long long)st.st_mtime, desc);
    else
        snprintf(buf, size, "%s|%s", path ? path : "", desc);
}

static const char *base_name(const char *path)
{
    const char *s = path ? strrchr(path, '/') : NULL;
    return s ? s + 1 : path ? path : "";
}

/* one group alone on the lossy device: its mean KL and top-1 */
static bool measure_group(struct hr_accuracy *a, const struct hr_acc_devices *d, const char *pattern,
                          struct het_accuracy *res)
{
    struct het_plan_pin pin = { .device = d->lossy };
    snprintf(pin.pattern, sizeof pin.pattern, "%s", pattern);
    struct het_sched_params sp = {
        .devices = d->devices, .n_devices = d->n, .policy = HET_POLICY_SINGLE, .single = d->exact,
        .profiles = d->profiles, .pins = &pin, .n_pins = 1,
    };
    het_error err = { 0 };
    het_sched *s = het_sched_init(&sp, &err);
    if (!s) {
        hr_error(a->o, "--sensitivity: %s", sens_msg(err.msg));
        return false;
    }
    bool ok = logits_on(a, s, 0, a->test);
    if (ok) het_accuracy_compare(a->ref_batch, a->test, a->n, a->n_vocab, res, NULL, NULL);
    het_sched_free(s);
    return ok;
}

static bool measure_table(struct hr_accuracy *a, const het_graph *g, const struct hr_acc_devices *d)
{
    if (d->lossy < 0 || d->exact < 0) {
        hr_error(a->o, "--sensitivity measure: needs a lossy device (npu) and an exact one (cpu) in --devices");
        return false;
    }
    if (!a->ref_batch) {
        a->ref_batch = malloc((size_t)a->n * (size_t)a->n_vocab * sizeof *a->ref_batch);
        if (!a->ref_batch || !reference(a, 0, a->ref_batch)) return false;
    }
    char cls[HET_SENSITIVITY_MAX][64];
    int count[HET_SENSITIVITY_MAX];
    int n = node_classes(g, d, cls, count, HET_SENSITIVITY_MAX);
    memset(&a->sens, 0, sizeof a->sens);
    snprintf(a->sens.model, sizeof a->sens.model, "%s", base_name(a->o->model));
    snprintf(a->sens.device, sizeof a->sens.device, "%s", het_device_name(d->devices[d->lossy]));
    a->sens.measured = true;
    a->sens.n_positions = a->n;
    const bool tty = isatty(2);
    const double t0 = hr_now_ms();
    for (int k = 0; k < n; k++) {
        if (tty) fprintf(stderr, "\rhet: sensitivity: %s alone on %s (%d/%d)      ", cls[k], a->sens.device, k + 1, n);
        struct het_accuracy r;
        if (!measure_group(a, d, cls[k], &r)) return false;
        het_error err = { 0 };
        if (het_sensitivity_add(&a->sens, cls[k], r.kl_mean, r.top1, count[k], &err) != HET_OK) {
            hr_error(a->o, "--sensitivity: %s", sens_msg(err.msg));
            return false;
        }
    }
    if (tty) fprintf(stderr, "\r%60s\r", "");
    snprintf(a->sens.label, sizeof a->sens.label, "measured: each group alone on %s, %d positions, vs %s alone",
             a->sens.device, a->n, "cpu");
    char id[4200], path[4096];
    model_id(a->o->model, d, id, sizeof id);
    het_error err = { 0 };
    snprintf(a->sens_source, sizeof a->sens_source, "measured now");
    if (het_sensitivity_cache_store(&a->sens, id, &err) != HET_OK)
        fprintf(stderr, "het: %s\n", err.msg);
    else if (het_sensitivity_cache_path(id, a->sens.device, path, sizeof path, &err) == HET_OK)
        snprintf(a->sens_source, sizeof a->sens_source, "measured now, stored in %s", path);
    fprintf(stderr, "het: sensitivity: %d node groups measured on %s in %.1f s (%d positions, each group alone vs "
            "the CPU alone); %s\n", n, a->sens.device, (hr_now_ms() - t0) / 1e3, a->n, a->sens_source);
    return true;
}

/* one group per class, HET_PLAN_DEFAULT_NODE_KL per node */
static void estimate_table(struct hr_accuracy *a, const het_graph *g, const struct hr_acc_devices *d)
{
    memset(&a->sens, 0, sizeof a->sens);
    snprintf(a->sens.model, sizeof a->sens.model, "%s", base_name(a->o->model));
    if (d->lossy >= 0) snprintf(a->sens.device, sizeof a->sens.device, "%s", het_device_name(d->devices[d->lossy]));
    snprintf(a->sens.label, sizeof a->sens.label, "estimated: %.0e per matmul (`--sensitivity measure` measures it)",
             HET_PLAN_DEFAULT_NODE_KL);
    snprintf(a->sens_source, sizeof a->sens_source, "estimated");
    if (d->lossy < 0 || !g) return;
    char cls[HET_SENSITIVITY_MAX][64];
    int count[HET_SENSITIVITY_MAX];
    int n = node_classes(g, d, cls, count, HET_SENSITIVITY_MAX);
    for (int k = 0; k < n; k++) het_sensitivity_add(&a->sens, cls[k], count[k] * HET_PLAN_DEFAULT_NODE_KL, NAN, count[k], NULL);
}

bool hr_accuracy_sensitivity(struct hr_accuracy *a, const struct hr_plan_opts *po, const het_graph *g,
                             const struct hr_acc_devices *d)
{
    het_error err = { 0 };
    const char *src = po->sensitivity;
    if (src && strcmp(src, "measure") && strcmp(src, "estimate")) {
        if (het_sensitivity_load(src, &a->sens, &err) != HET_OK) {
            hr_error(a->o, "--sensitivity: %s", sens_msg(err.msg));
            return false;
        }
        snprintf(a->sens_source, sizeof a->sens_source, "%s", src);
        return true;
    }
    if (src && !strcmp(src, "measure")) return measure_table(a, g, d);
    if (src && !strcmp(src, "estimate")) {
        estimate_table(a, g, d);
        return true;
    }
    char id[4200], path[4096];
    model_id(a->o->model, d, id, sizeof id);
    const char *dev = d->lossy >= 0 ? het_device_name(d->devices[d->lossy]) : "npu";
    if (het_sensitivity_cache_path(id, dev, path, sizeof path, &err) == HET_OK &&
        het_sensitivity_load(path, &a->sens, &err) == HET_OK) {
        snprintf(a->sens_source, sizeof a->sens_source, "cached %s", path);
        return true;
    }
    /* a budget is spent with a measured table; a prediction alone takes the estimate */
    if (!isnan(a->budget) && d->lossy >= 0 && d->exact >= 0) return measure_table(a, g, d);
    estimate_table(a, g, d);
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
