/*
 * session.c — hetrun's flags onto the library's session (het/session.h:
 * model, devices, pool, profiles, scheduler, prepared weights, accuracy
 * budget, context), its log lines on stderr, the prompt, and --stats.
 */
#include "tools/hetrun.h"

#include <stdlib.h>
#include <string.h>

/* Each distinct message is shown once (fallbacks are counted by the scheduler). */
static void log_line(void *user, const char *line)
{
    struct hr_session *s = user;
    uint32_t h = 2166136261u;
    for (const char *c = line; *c; c++) h = (h ^ (uint8_t)*c) * 16777619u;
    for (int i = 0; i < s->n_seen && i < (int)(sizeof s->seen / sizeof s->seen[0]); i++)
        if (s->seen[i] == h) return;
    if (s->n_seen < (int)(sizeof s->seen / sizeof s->seen[0])) s->seen[s->n_seen++] = h;
    s->fallback_lines++;
    fprintf(stderr, "het: %s%s\n", line, s->n_seen == (int)(sizeof s->seen / sizeof s->seen[0]) ? " (further messages suppressed)" : "");
}

static void calibration_progress(void *user, double fraction, const char *what)
{
    struct hr_session *s = user;
    hr_progress(&s->cal_progress, fraction, what);
}

bool hr_session_params(const struct hr_opts *o, struct het_session_params *p)
{
    memset(p, 0, sizeof *p);
    p->model_path = o->model;
    p->devices = hr_device_list(o);
    p->n_threads = o->threads;
    p->f32_activations = o->f32_act;
    p->npu_mode = o->npu ? o->npu : getenv("HET_NPU");
    p->policy = o->policy;
    p->pins = o->plan.pin;
    p->strict = o->strict;
    p->overlap = o->plan.overlap;
    p->profiles = o->plan.profile;
    p->recalibrate = o->plan.recalibrate;
    const char *cal = getenv("HET_CALIBRATE");
    p->no_calibration = cal && !strcmp(cal, "0");
    p->test_disturbed = hr_test_disturbed();
    p->has_accuracy_budget = o->plan.accuracy_budget != NULL;
    p->accuracy_budget = o->plan.budget_kl;
    p->sensitivity = o->plan.sensitivity;
    const char *sf = o->plan.sensitivity;
    if (sf && strcmp(sf, "measure") && strcmp(sf, "estimate")) { /* a file: read now, so the flag is named */
        struct het_sensitivity check;
        het_error err = { 0 };
        if (het_sensitivity_load(sf, &check, &err) != HET_OK) {
            hr_error(o, "--sensitivity: %s", err.msg);
            return false;
        }
    }
    p->n_ctx = o->n_ctx;
    const bool serve = o->cmd && !strcmp(o->cmd, "serve");
    p->n_parallel = serve ? (o->parallel > 0 ? o->parallel : HR_SERVE_PARALLEL) : 1;
    if (o->cmd && !strcmp(o->cmd, "plan")) /* plan's own context: a batch after the past */
        p->n_ctx_min = (o->plan.batch > 0 ? o->plan.batch : 128) + (o->plan.past > 0 ? o->plan.past : 128) + 8;
    p->all_logits = o->cmd && !strcmp(o->cmd, "logits");
    return hr_pool_params(o, p);
}

const char *hr_device_list(const struct hr_opts *o)
{
    const char *env = getenv("HET_DEVICES");
    return o->device ? o->device : o->devices ? o->devices : env && *env ? env : "auto";
}

enum het_status hr_open_devices(const struct hr_opts *o, const char *list, const char *npu_default, het_device **out,
                                int max, int *n, struct het_device_candidate *cands, int *n_cands, het_error *err)
{
    struct het_session_params p;
    if (!hr_session_params(o, &p)) return het_error_set(err, HET_ERR_INVALID, "bad options");
    return het_session_devices_open(&p, list, npu_default, out, max, n, cands, n_cands, err);
}

het_device *hr_open_device(const struct hr_opts *o, const char *spec, const char *npu_default, het_error *err)
{
    struct het_session_params p;
    if (!hr_session_params(o, &p)) {
        het_error_set(err, HET_ERR_INVALID, "bad options");
        return NULL;
    }
    return het_session_device_init(&p, spec, npu_default, err);
}

bool hr_session_open(struct hr_session *s, const struct hr_opts *o, bool need_ctx)
{
    memset(s, 0, sizeof *s);
    struct het_session_params p;
    if (!hr_session_params(o, &p)) return false;
    p.open_context = need_ctx;
    p.log = log_line;
    p.log_info = o->verbose ? log_line : NULL; /* re-planning is news only to who asked (-v) */
    p.progress = calibration_progress;
    p.user = s;
    hr_progress_init(&s->cal_progress, "calibrating");
    het_error err = { 0 };
    s->hs = het_session_open(&p, &err);
    if (!s->hs) {
        if (err.status == HET_ERR_NOMEM && strstr(err.msg, "lower the context length"))
            hr_error(o, "%s (--ctx N%s)", err.msg, p.n_parallel > 1 ? ", --parallel N" : "");
        else if (err.status == HET_ERR_NOMEM && p.pool_bytes)
            hr_error(o, "%s (HET_POOL_MB sets the pool size)", err.msg);
        else if (!strncmp(err.msg, "pool: ", 6))
            hr_error(o, "%s (HET_POOL=off runs without one)", err.msg);
        else
            hr_error(o, "%s", err.msg);
        return false;
    }
    s->model = het_session_model(s->hs);
    s->sched = het_session_sched(s->hs);
    s->pool = het_session_pool(s->hs);
    s->ctx = het_session_context(s->hs);
    s->n_devices = het_session_n_devices(s->hs);
    for (int i = 0; i < s->n_devices; i++) s->devices[i] = het_session_device(s->hs, i);
    return true;
}

void hr_session_close(struct hr_session *s)
{
    het_session_close(s->hs);
    memset(s, 0, sizeof *s);
}

static char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        size_t r = fread(buf + n, 1, cap - n, f);
        n += r;
        if (n < cap) break;
        char *nb = realloc(buf, cap *= 2);
        if (!nb) { free(buf); buf = NULL; }
        else buf = nb;
    }
    fclose(f);
    if (buf) *len = n;
    return buf;
}

const char *hr_prompt_text(const struct hr_opts *o, size_t *len, char **owned)
{
    *owned = NULL;
    if (!o->prompt_file) {
        const char *text = o->prompt ? o->prompt : "";
        *len = strlen(text);
        return text;
    }
    *owned = read_file(o->prompt_file, len);
    if (!*owned) hr_error(o, "-f %s: cannot read the file", o->prompt_file);
    return *owned;
}

bool hr_tokenize_prompt(const struct hr_session *s, const struct hr_opts *o, int32_t **ids, int32_t *n)
{
    size_t len;
    char *owned;
    const char *text = hr_prompt_text(o, &len, &owned);
    if (!text) return false;
    const het_tokenizer *tok = het_model_tokenizer(s->model);
    het_error err = { 0 };
    enum het_status st = het_tokenize(tok, text, len, false, true, ids, n, &err);
    free(owned);
    if (st != HET_OK) {
        hr_error(o, "tokenize: %s", err.msg);
        return false;
    }
    if (!o->no_bos && het_tokenizer_add_bos(tok) && het_tokenizer_bos(tok) >= 0) {
        int32_t *nb = realloc(*ids, (size_t)(*n + 1) * sizeof *nb);
        if (!nb) return false;
        memmove(nb + 1, nb, (size_t)*n * sizeof *nb);
        nb[0] = het_tokenizer_bos(tok);
        *ids = nb;
        (*n)++;
    }
    return true;
}

void hr_print_stats(const struct hr_session *s, const struct hr_opts *o)
{
    if (!o->stats) return;
    struct het_sched_stats ss;
    het_sched_get_stats(s->sched, &ss);
    uint64_t copied = 0;
    for (int i = 0; i < s->n_devices; i++) {
        struct het_device_stats ds;
        het_session_device_stats(s->hs, i, &ds);
        copied += ds.copied_bytes;
    }
    if (s->pool) { /* the devices' copies, forwarded to the pool, plus any made outside a run */
        struct het_pool_stats ps;
        het_pool_get_stats(s->pool, &ps);
        if (ps.copied_bytes > copied) copied = ps.copied_bytes;
    }
    const size_t kv = s->ctx ? het_context_kv_bytes(s->ctx) : 0;
    if (!strcmp(o->stats, "json")) {
        fprintf(stderr, "{");
        hr_pool_print_json(s, stderr);
        hr_budget_print_stats(s, o, stderr, true);
        fprintf(stderr,
                "\"copied_bytes\":%llu,\"scratch_peak_bytes\":%zu,\"scratch_naive_bytes\":%zu,"
                "\"scratch_reserved_bytes\":%zu,\"kv_bytes\":%zu,\"weight_bytes\":%zu,\"weights_in\":\"%s\","
                "\"handoffs\":%llu,\"fallbacks\":%llu,\"devices\":[",
                (unsigned long long)copied, ss.scratch_peak_bytes, ss.scratch_naive_bytes, ss.scratch_reserved, kv,
                het_model_weight_bytes(s->model), het_model_pool(s->model) ? "pool" : "mapped file",
                (unsigned long long)ss.n_handoffs, (unsigned long long)ss.n_fallbacks);
        for (int i = 0; i < s->n_devices; i++) {
            struct het_device_stats ds;
            het_session_device_stats(s->hs, i, &ds);
            fprintf(stderr,
                    "%s{\"name\":\"%s\",\"splits\":%llu,\"nodes\":%llu,\"busy_us\":%.0f,\"copied_bytes\":%llu,"
                    "\"splits_kept\":%llu,\"steps_kept\":%llu,\"pool_import\":\"%s\"}",
                    i ? "," : "", het_device_name(s->devices[i]), (unsigned long long)ds.n_splits,
                    (unsigned long long)ds.n_nodes, ds.busy_us, (unsigned long long)ds.copied_bytes,
                    (unsigned long long)ds.n_splits_kept, (unsigned long long)ds.n_steps_kept,
                    het_device_pool_import(s->devices[i]));
        }
        fprintf(stderr, "]}\n");
        return;
    }
    hr_pool_print_stats(s, stderr);
    uint64_t dropped = 0; /* at load, so not relative to stats_base */
    for (int i = 0; i < s->n_devices; i++) {
        struct het_device_stats ds;
        het_device_get_stats(s->devices[i], &ds);
        dropped += ds.dropped_bytes;
    }
    fprintf(stderr, "memory: weights %.2f MiB (%s; %.2f MiB of its pages dropped after repacking), KV cache %.2f MiB\n",
            het_model_weight_bytes(s->model) / 1048576.0, het_model_pool(s->model) ? "pool slice" : "mapped file",
            dropped / 1048576.0, kv / 1048576.0);
    fprintf(stderr, "scratch: peak %.3f MiB with lifetime reuse vs %.3f MiB naive sum (reserved %.3f MiB)\n",
            ss.scratch_peak_bytes / 1048576.0, ss.scratch_naive_bytes / 1048576.0, ss.scratch_reserved / 1048576.0);
    fprintf(stderr, "copied between devices: %llu bytes; hand-offs: %llu; fallbacks: %llu\n",
            (unsigned long long)copied, (unsigned long long)ss.n_handoffs, (unsigned long long)ss.n_fallbacks);
    hr_budget_print_stats(s, o, stderr, false);
    for (int i = 0; i < s->n_devices; i++) {
        struct het_device_stats ds;
        het_session_device_stats(s->hs, i, &ds);
        const char *imp = het_device_pool_import(s->devices[i]);
        char kept[128] = "";
        if (ds.n_splits_kept)
            snprintf(kept, sizeof kept, " (%llu on decisions kept from the step before, %llu steps on plans kept)",
                     (unsigned long long)ds.n_splits_kept, (unsigned long long)ds.n_steps_kept);
        fprintf(stderr, "device %s%s: %llu splits%s, %llu nodes, busy %.1f ms%s%s — %s\n", het_device_name(s->devices[i]),
                het_device_is_emulated(s->devices[i]) ? " (emulated)" : "", (unsigned long long)ds.n_splits, kept,
                (unsigned long long)ds.n_nodes, ds.busy_us / 1000.0, *imp ? "; pool: " : "", imp,
                het_device_description(s->devices[i]));
    }
}
