/*
 * session.c — turning hetrun's placement flags into a device set and a
 * scheduler, and loading the model and context every running command needs.
 * Order: model (mapped), devices, memory pool (sized from the model; the
 * weights move into it), scheduler (imports the pool into every device),
 * per-device weight preparation, the accuracy budget (hr_budget.c),
 * context (KV cache in the pool).
 */
#include "tools/hetrun.h"

#include <stdlib.h>
#include <string.h>

#include "het/npu.h"

#include <sys/stat.h>

#if defined(HET_HAVE_VULKAN) && __has_include("het/vulkan.h")
#include "het/vulkan.h"
#define HR_VULKAN 1
#endif

/* The NPU: the spec's ":MODE", else --npu, else $HET_NPU, else npu_default.
 * The repack cache is keyed by the model file's path, size and mtime. */
static het_device *open_npu(const struct hr_opts *o, const char *spec_mode, enum het_npu_mode npu_default,
                            het_error *err)
{
    enum het_npu_mode mode = HET_NPU_OFF;
    if (spec_mode) {
        if (het_npu_parse_mode(spec_mode, &mode, err) != HET_OK) return NULL;
    } else if (o->npu) {
        if (het_npu_parse_mode(o->npu, &mode, err) != HET_OK) return NULL;
    } else if (het_npu_mode_from_env(&mode, err) != HET_OK) {
        return NULL;
    }
    if (mode == HET_NPU_OFF) mode = npu_default;
    struct het_npu_params p;
    het_npu_params_default(&p, mode);
    char key[4200]; /* copied by the device */
    struct stat st;
    if (o->model && stat(o->model, &st) == 0) {
        snprintf(key, sizeof key, "%s:%lld:%lld", o->model, (long long)st.st_size, (long long)st.st_mtime);
        p.model_key = key;
    }
    p.n_threads = o->threads;
    return het_npu_device_init_params(&p, err);
}

het_device *hr_open_device(const struct hr_opts *o, const char *spec, enum het_npu_mode npu_default,
                           het_error *err)
{
    if (!strcmp(spec, "cpu")) {
        het_device *d = het_cpu_device_init(o->threads, err);
        if (d && o->f32_act && het_cpu_device_set_f32_activations(d, true, err) != HET_OK) {
            het_device_free(d);
            return NULL;
        }
        return d;
    }
    if (!strncmp(spec, "npu", 3) && (!spec[3] || spec[3] == ':'))
        return open_npu(o, spec[3] ? spec + 4 : NULL, npu_default, err);
    if (!strncmp(spec, "vulkan", 6)) {
#ifdef HR_VULKAN
        int index = -1;
        if (spec[6] == ':') {
            char *end;
            long v = strtol(spec + 7, &end, 10);
            if (*end || end == spec + 7 || v < 0) {
                het_error_set(err, HET_ERR_INVALID, "bad device '%s' (expected vulkan or vulkan:N)", spec);
                return NULL;
            }
            index = (int)v;
        } else if (spec[6]) {
            het_error_set(err, HET_ERR_INVALID, "unknown device '%s'", spec);
            return NULL;
        }
        return het_vulkan_device_init(index, err);
#else
        het_error_set(err, HET_ERR_NO_DEVICE, "this build has no Vulkan backend (install libvulkan-dev glslc, rebuild)");
        return NULL;
#endif
    }
    het_error_set(err, HET_ERR_INVALID, "unknown device '%s' (devices: cpu, vulkan, vulkan:N, npu, npu:MODE)", spec);
    return NULL;
}

/* Fallbacks are counted by the scheduler; each distinct message is shown once. */
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

static bool open_devices(struct hr_session *s, const struct hr_opts *o)
{
    char list[256];
    het_error err = { 0 };
    snprintf(list, sizeof list, "%s", o->device ? o->device : o->devices ? o->devices : "cpu");
    for (char *save = NULL, *tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (s->n_devices == (int)(sizeof s->devices / sizeof s->devices[0])) {
            hr_error(o, "--devices: too many devices");
            return false;
        }
        het_device *d = hr_open_device(o, tok, HET_NPU_HARDWARE, &err);
        if (!d) {
            hr_error(o, "device '%s': %s", tok, err.msg);
            return false;
        }
        s->devices[s->n_devices++] = d;
    }
    return true;
}

static bool make_sched(struct hr_session *s, const struct hr_opts *o)
{
    het_error err = { 0 };
    struct het_sched_params sp = {
        .devices = s->devices, .n_devices = s->n_devices, .strict = o->strict, .overlap = o->plan.overlap,
        .log = log_line, .log_user = s, .pool = s->pool,
    };
    if (!hr_policy_parse(o->policy, s->devices, s->n_devices, &sp)) return false;
    /* a single device needs no cost model; a set is planned from measured profiles */
    if (s->n_devices > 1) {
        if (!hr_profiles_for(s->devices, s->n_devices, &o->plan, !o->verbose, s->profiles)) return false;
        sp.profiles = (const het_profile *const *)s->profiles;
    }
    if (o->plan.pin) {
        const char *names[4];
        for (int i = 0; i < s->n_devices; i++) names[i] = het_device_name(s->devices[i]);
        if (het_plan_pins_parse(o->plan.pin, names, s->n_devices, s->pins, HET_SCHED_MAX_PINS, &sp.n_pins, &err) !=
            HET_OK) {
            hr_error(o, "--pin: %s", err.msg);
            return false;
        }
        sp.pins = s->pins;
    }
    s->sched = het_sched_init(&sp, &err);
    if (!s->sched) {
        hr_error(o, "%s", err.msg);
        return false;
    }
    return true;
}

bool hr_session_open(struct hr_session *s, const struct hr_opts *o, bool need_ctx)
{
    memset(s, 0, sizeof *s);
    het_error err = { 0 };
    s->model = het_model_load(o->model, &err);
    if (!s->model) {
        hr_error(o, "%s", err.msg);
        return false;
    }
    if (!open_devices(s, o) || !hr_pool_open(s, o) || !make_sched(s, o)) return false;
    if (!het_model_pool(s->model)) {
        /* no pool: the weights are used in place from the mapped file */
        size_t size = 0;
        const void *base = het_gguf_file_data(het_model_gguf(s->model), &size);
        if (het_sched_register_memory(s->sched, (void *)base, size, 0 /* weights */, &err) != HET_OK) {
            hr_error(o, "%s", err.msg);
            return false;
        }
    }
    if (het_model_prepare(s->model, s->sched, &err) != HET_OK) {
        hr_error(o, "%s", err.msg);
        return false;
    }
    if (!hr_budget_open(s, o)) return false;
    for (int i = 0; i < s->n_devices; i++) het_device_get_stats(s->devices[i], &s->stats_base[i]);
    if (!need_ctx) return true;
    struct het_context_params cp = { .n_ctx = o->n_ctx, .sched = s->sched, .pool = s->pool };
    s->ctx = het_context_init(s->model, &cp, &err);
    if (!s->ctx) {
        hr_error(o, "%s", err.msg);
        return false;
    }
    return true;
}

void hr_session_close(struct hr_session *s)
{
    het_context_free(s->ctx);
    het_sched_free(s->sched);
    for (int i = 0; i < s->n_devices; i++) {
        het_profile_free(s->profiles[i]);
        het_device_free(s->devices[i]);
    }
    het_model_free(s->model);
    hr_budget_free(s->budget);
    het_pool_free(s->pool);   /* last: devices and the model kept slices in it */
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

/* device i's counters since the session was set up */
static void device_stats(const struct hr_session *s, int i, struct het_device_stats *ds)
{
    het_device_get_stats(s->devices[i], ds);
    const struct het_device_stats *b = &s->stats_base[i];
    ds->n_splits -= b->n_splits;
    ds->n_nodes -= b->n_nodes;
    ds->copied_bytes -= b->copied_bytes;
    ds->busy_us -= b->busy_us;
}

void hr_print_stats(const struct hr_session *s, const struct hr_opts *o)
{
    if (!o->stats) return;
    struct het_sched_stats ss;
    het_sched_get_stats(s->sched, &ss);
    uint64_t copied = 0;
    for (int i = 0; i < s->n_devices; i++) {
        struct het_device_stats ds;
        device_stats(s, i, &ds);
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
            device_stats(s, i, &ds);
            fprintf(stderr,
                    "%s{\"name\":\"%s\",\"splits\":%llu,\"nodes\":%llu,\"busy_us\":%.0f,\"copied_bytes\":%llu,"
                    "\"pool_import\":\"%s\"}",
                    i ? "," : "", het_device_name(s->devices[i]), (unsigned long long)ds.n_splits,
                    (unsigned long long)ds.n_nodes, ds.busy_us, (unsigned long long)ds.copied_bytes,
                    het_device_pool_import(s->devices[i]));
        }
        fprintf(stderr, "]}\n");
        return;
    }
    hr_pool_print_stats(s, stderr);
    fprintf(stderr, "memory: weights %.2f MiB (%s), KV cache %.2f MiB\n", het_model_weight_bytes(s->model) / 1048576.0,
            het_model_pool(s->model) ? "pool slice" : "mapped file", kv / 1048576.0);
    fprintf(stderr, "scratch: peak %.3f MiB with lifetime reuse vs %.3f MiB naive sum (reserved %.3f MiB)\n",
            ss.scratch_peak_bytes / 1048576.0, ss.scratch_naive_bytes / 1048576.0, ss.scratch_reserved / 1048576.0);
    fprintf(stderr, "copied between devices: %llu bytes; hand-offs: %llu; fallbacks: %llu\n",
            (unsigned long long)copied, (unsigned long long)ss.n_handoffs, (unsigned long long)ss.n_fallbacks);
    hr_budget_print_stats(s, o, stderr, false);
    for (int i = 0; i < s->n_devices; i++) {
        struct het_device_stats ds;
        device_stats(s, i, &ds);
        const char *imp = het_device_pool_import(s->devices[i]);
        fprintf(stderr, "device %s%s: %llu splits, %llu nodes, busy %.1f ms%s%s — %s\n", het_device_name(s->devices[i]),
                het_device_is_emulated(s->devices[i]) ? " (emulated)" : "", (unsigned long long)ds.n_splits,
                (unsigned long long)ds.n_nodes, ds.busy_us / 1000.0, *imp ? "; pool: " : "", imp,
                het_device_description(s->devices[i]));
    }
}
