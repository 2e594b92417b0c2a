/*
 * sensitivity.c — measuring what a lossy device does to the logits, for
 * the accuracy budget (het/session.h): the CPU-alone reference (a core
 * session of its own: no budget, so no recursion), and the sensitivity
 * table of a model on a lossy device (a file, the cache, measured now and
 * cached, or estimated). A group's sensitivity is the mean KL per position
 * with only that class of nodes on the lossy device and everything else on
 * an exact one.
 */
#include "runtime/session_impl.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

/* stories260K's reference continuation of "Once upon a time" (shared/reference/stories260K-1) */
static const char default_text[] =
    "Once upon a time, there was a little girl named Lily. She loved to play outside in the park. One day, she saw "
    "a big, red ball. She wanted to play with it, but it was too high.\nLily's mom said\n";

const char *het_accuracy_default_text(void) { return default_text; }

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* tokens on sched in a context of their own */
static enum het_status logits_on(het_model *m, het_sched *s, const int32_t *tokens, int32_t n, int32_t chunk,
                                 float *out, het_error *err)
{
    struct het_context_params cp = { .n_ctx = n + 8, .sched = s };
    het_context *ctx = het_context_init(m, &cp, err);
    if (!ctx) return err ? err->status : HET_ERR_INVALID;
    enum het_status st =
        het_accuracy_logits(ctx, het_model_get_config(m)->n_vocab, tokens, n, chunk, out, err);
    het_context_free(ctx);
    return st;
}

enum het_status het_reference_logits(const struct het_session_params *p, const int32_t *tokens, int32_t n,
                                     int32_t chunk, float *out, het_error *err)
{
    struct het_session_params rp = { .model_path = p->model_path, .devices = "cpu", .n_threads = p->n_threads,
                                     .pool_backings = p->pool_backings, .n_ctx = n + 8 };
    het_session *s = het_session_open_core(&rp, err);
    if (!s) return err ? err->status : HET_ERR_INVALID;
    enum het_status st = logits_on(s->model, s->sched, tokens, n, chunk, out, err);
    het_session_close(s);
    if (st != HET_OK) het_error_prefix(err, "reference (cpu alone)");
    return st;
}

void het_node_class(const char *name, char *buf, size_t size)
{
    size_t n = strlen(name), k = n;
    while (k > 0 && isdigit((unsigned char)name[k - 1])) k--;
    if (k < n && k > 1 && name[k - 1] == '.') snprintf(buf, size, "%.*s*", (int)k, name);
    else snprintf(buf, size, "%s", name);
}

/* the classes of nodes the lossy device runs, in graph order, with counts */
static int node_classes(const het_graph *g, const struct het_sensitivity_request *r, char (*cls)[64], int *count,
                        int max)
{
    int n = 0;
    for (int i = 0; g && i < het_graph_n_nodes(g); i++) {
        const struct het_tensor *t = het_graph_node(g, i);
        if (!t->name[0] || !het_sched_device_supports(r->sched, r->lossy, t)) continue;
        char c[64];
        het_node_class(t->name, c, sizeof c);
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

/* The cache key of a table: the model file (path, size, mtime) and the
 * lossy device's description, which names its numerics (the NPU's
 * activation format and group), so a table measured with other numerics
 * is not reused. */
static void model_id(const struct het_sensitivity_request *r, char *buf, size_t size)
{
    struct stat st;
    const char *path = r->ref && r->ref->model_path ? r->ref->model_path : "";
    const char *desc = r->lossy >= 0 ? het_device_description(r->devices[r->lossy]) : "";
    if (stat(path, &st) == 0)
        snprintf(buf, size, "%s:%lld:%lld|%s", path, (long long)st.st_size, (long long)st.st_mtime, desc);
    else
        snprintf(buf, size, "%s|%s", path, desc);
}

static const char *base_name(const char *path)
{
    const char *s = path ? strrchr(path, '/') : NULL;
    return s ? s + 1 : path ? path : "";
}

/* one group alone on the lossy device: its mean KL and top-1 */
static enum het_status measure_group(het_model *m, const struct het_sensitivity_request *r, const char *pattern,
                                     const float *ref, float *test, struct het_accuracy *res, het_error *err)
{
    struct het_plan_pin pin = { .device = r->lossy };
    snprintf(pin.pattern, sizeof pin.pattern, "%s", pattern);
    struct het_sched_params sp = {
        .devices = r->devices, .n_devices = r->n_devices, .policy = &het_policy_single, .policy_device = r->exact,
        .profiles = r->profiles, .pins = &pin, .n_pins = 1,
    };
    het_sched *s = het_sched_init(&sp, err);
    if (!s) return err ? err->status : HET_ERR_INVALID;
    enum het_status st = logits_on(m, s, r->tokens, r->n_tokens, 0, test, err);
    if (st == HET_OK)
        het_accuracy_compare(ref, test, r->n_tokens, het_model_get_config(m)->n_vocab, res, NULL, NULL);
    het_sched_free(s);
    return st;
}

static enum het_status measure_table(het_model *m, const het_graph *g, const struct het_sensitivity_request *r,
                                     struct het_sensitivity *out, char *source, size_t cap, het_error *err)
{
    if (r->lossy < 0 || r->exact < 0)
        return het_error_set(err, HET_ERR_INVALID, "measuring needs a lossy device (npu) and an exact one (cpu)");
    const size_t cells = (size_t)r->n_tokens * (size_t)het_model_get_config(m)->n_vocab;
    float *own_ref = NULL, *test = malloc(cells * sizeof *test);
    const float *ref = r->ref_logits;
    enum het_status st = test ? HET_OK : het_error_set(err, HET_ERR_NOMEM, "out of memory for the logits");
    if (st == HET_OK && !ref) {
        own_ref = malloc(cells * sizeof *own_ref);
        st = own_ref ? het_reference_logits(r->ref, r->tokens, r->n_tokens, 0, own_ref, err)
                     : het_error_set(err, HET_ERR_NOMEM, "out of memory for the logits");
        ref = own_ref;
    }
    char cls[HET_SENSITIVITY_MAX][64];
    int count[HET_SENSITIVITY_MAX];
    int n = st == HET_OK ? node_classes(g, r, cls, count, HET_SENSITIVITY_MAX) : 0;
    memset(out, 0, sizeof *out);
    snprintf(out->model, sizeof out->model, "%s", base_name(r->ref ? r->ref->model_path : NULL));
    snprintf(out->device, sizeof out->device, "%s", het_device_name(r->devices[r->lossy]));
    out->measured = true;
    out->n_positions = r->n_tokens;
    const double t0 = now_s();
    for (int k = 0; k < n && st == HET_OK; k++) {
        struct het_accuracy res;
        st = measure_group(m, r, cls[k], ref, test, &res, err);
        if (st == HET_OK) st = het_sensitivity_add(out, cls[k], res.kl_mean, res.top1, count[k], err);
    }
    free(test);
    free(own_ref);
    if (st != HET_OK) return st;
    snprintf(out->label, sizeof out->label, "measured: each group alone on %s, %d positions, vs cpu alone",
             out->device, r->n_tokens);
    char id[4200], path[4096];
    model_id(r, id, sizeof id);
    het_error serr = { 0 };
    snprintf(source, cap, "measured now");
    if (het_sensitivity_cache_store(out, id, &serr) != HET_OK) {
        if (r->log) r->log(r->user, serr.msg);
    } else if (het_sensitivity_cache_path(id, out->device, path, sizeof path, &serr) == HET_OK) {
        snprintf(source, cap, "measured now, stored in %s", path);
    }
    if (r->log) {
        char line[4600];
        snprintf(line, sizeof line, "sensitivity: %d node groups measured on %s in %.1f s (%d positions, each group "
                 "alone vs the CPU alone); %s", n, out->device, now_s() - t0, r->n_tokens, source);
        r->log(r->user, line);
    }
    return HET_OK;
}

/* one group per class, HET_PLAN_DEFAULT_NODE_KL per node */
static void estimate_table(const het_graph *g, const struct het_sensitivity_request *r, struct het_sensitivity *out,
                           char *source, size_t cap)
{
    memset(out, 0, sizeof *out);
    snprintf(out->model, sizeof out->model, "%s", base_name(r->ref ? r->ref->model_path : NULL));
    if (r->lossy >= 0) snprintf(out->device, sizeof out->device, "%s", het_device_name(r->devices[r->lossy]));
    snprintf(out->label, sizeof out->label, "estimated: %.0e per matmul (`--sensitivity measure` measures it)",
             HET_PLAN_DEFAULT_NODE_KL);
    snprintf(source, cap, "estimated");
    if (r->lossy < 0 || !g) return;
    char cls[HET_SENSITIVITY_MAX][64];
    int count[HET_SENSITIVITY_MAX];
    int n = node_classes(g, r, cls, count, HET_SENSITIVITY_MAX);
    for (int k = 0; k < n; k++) het_sensitivity_add(out, cls[k], count[k] * HET_PLAN_DEFAULT_NODE_KL, NAN, count[k], NULL);
}

enum het_status het_sensitivity_acquire(het_model *m, const het_graph *g, const struct het_sensitivity_request *r,
                                        struct het_sensitivity *out, char *source, size_t cap, het_error *err)
{
    const char *src = r->source;
    if (src && strcmp(src, "measure") && strcmp(src, "estimate")) {
        enum het_status st = het_sensitivity_load(src, out, err);
        if (st == HET_OK) snprintf(source, cap, "%s", src);
        return st;
    }
    if (src && !strcmp(src, "measure")) return measure_table(m, g, r, out, source, cap, err);
    if (src && !strcmp(src, "estimate")) {
        estimate_table(g, r, out, source, cap);
        return HET_OK;
    }
    char id[4200], path[4096];
    model_id(r, id, sizeof id);
    const char *dev = r->lossy >= 0 ? het_device_name(r->devices[r->lossy]) : "npu";
    het_error cerr = { 0 };
    if (het_sensitivity_cache_path(id, dev, path, sizeof path, &cerr) == HET_OK &&
        het_sensitivity_load(path, out, &cerr) == HET_OK) {
        snprintf(source, cap, "cached %s", path);
        return HET_OK;
    }
    /* a budget is spent with a measured table; a prediction alone takes the estimate */
    if (r->measure_missing && r->lossy >= 0 && r->exact >= 0) return measure_table(m, g, r, out, source, cap, err);
    estimate_table(g, r, out, source, cap);
    return HET_OK;
}
