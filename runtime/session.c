/*
 * session.c — opening a model ready to run (het/session.h): the model, its
 * devices, the memory pool, the profiles, the scheduler, the prepared
 * weights, the accuracy budget (budget.c) and a context, in that order,
 * each failure returned with the step's name.
 */
#include "runtime/session_impl.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "het/npu.h"


#define GIB (1024.0 * 1024.0 * 1024.0)

const char *het_version(void) { return HET_VERSION; }

void het_session_log(const het_session *s, const char *fmt, ...)
{
    if (!s->p.log) return;
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    s->p.log(s->p.user, line);
}

/* ---------------------------------------------------------------------------
 * devices                                                                   */

/* The registry's parameters from the session's (key: the caller's buffer
 * for the NPU's repack cache key, the model file's path, size and mtime). */
static struct het_device_spec_params spec_params(const struct het_session_params *p, const char *npu_default,
                                                 char *key, size_t key_size)
{
    struct het_device_spec_params sp = { .n_threads = p->n_threads, .f32_activations = p->f32_activations,
                                         .npu_mode = p->npu_mode && *p->npu_mode ? p->npu_mode : NULL,
                                         .npu_default = npu_default ? npu_default : "hardware" };
    struct stat st;
    if (p->model_path && stat(p->model_path, &st) == 0) {
        snprintf(key, key_size, "%s:%lld:%lld", p->model_path, (long long)st.st_size, (long long)st.st_mtime);
        sp.model_key = key;
    }
    return sp;
}

het_device *het_session_device_init(const struct het_session_params *p, const char *spec, const char *npu_default,
                                    het_error *err)
{
    char key[4200]; /* copied by the device */
    struct het_device_spec_params sp = spec_params(p, npu_default, key, sizeof key);
    return het_device_init_by_spec(spec, &sp, err);
}

enum het_status het_session_devices_open(const struct het_session_params *p, const char *list, const char *npu_default,
                                         het_device **out, int max, int *n, struct het_device_candidate *cands,
                                         int *n_cands, het_error *err)
{
    char key[4200];
    struct het_device_spec_params sp = spec_params(p, npu_default, key, sizeof key);
    return het_devices_open(list, &sp, out, max, n, cands, n_cands, err);
}

static enum het_status open_devices(het_session *s, het_error *err)
{
    const char *list = s->p.devices && *s->p.devices ? s->p.devices : "auto";
    return het_session_devices_open(&s->p, list, "hardware", s->devices, HET_SESSION_MAX_DEVICES, &s->n_devices,
                                    NULL, NULL, err);
}

/* ---------------------------------------------------------------------------
 * memory                                                                    */

/* MemAvailable in bytes (0: unknown) */
static double mem_available(void)
{
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f) return 0;
    char line[256];
    double kib = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %lf kB", &kib) == 1) break;
    fclose(f);
    return kib * 1024.0;
}

/* The model's needs against the memory there is: one line naming the parts
 * and what lowers them. */
static enum het_status check_fits(const het_session *s, const struct het_pool_estimate *e, het_error *err)
{
    const double avail = mem_available();
    if (avail <= 0 || (double)e->needed <= avail) return HET_OK;
    return het_error_set(err, HET_ERR_NOMEM,
                         "%s needs %.2f GiB (weights %.2f, KV cache %.2f for %d sequence%s of %d tokens, activations "
                         "%.2f) but %.2f GiB of memory are available: lower the context length or the parallel "
                         "sequences",
                         s->p.model_path, e->needed / GIB, e->weights / GIB, e->kv / GIB, e->n_seq,
                         e->n_seq == 1 ? "" : "s", e->n_ctx, e->scratch / GIB, avail / GIB);
}

static enum het_status open_pool(het_session *s, het_error *err)
{
    const char *order = s->p.pool_backings;
    if (order && (!strcmp(order, "off") || !strcmp(order, "none") || !strcmp(order, "0"))) return HET_OK;
    struct het_pool_params pp = { .name = "het-pool" };
    if (order && *order && strcmp(order, "auto") && het_pool_parse_order(order, &pp, err) != HET_OK) return err ? err->status : HET_ERR_INVALID;
    int n_repacking = 0;
    for (int i = 0; i < s->n_devices; i++) {
        n_repacking += het_device_get_caps(s->devices[i])->repacks_weights;
        /* backing 1: a buffer the NPU owns, when the NPU runs on hardware (false for any other device) */
        if (!pp.npu.export_dmabuf) het_npu_pool_provider(s->devices[i], &pp.npu);
    }
    struct het_pool_estimate_params ep = {
        .n_ctx = s->p.n_ctx, .n_seq = s->p.n_parallel, .n_ctx_min = s->p.n_ctx_min, .n_repacking = n_repacking,
        .all_logits = s->p.all_logits, .weights_mapped = !s->p.weights_in_pool,
    };
    struct het_pool_estimate e;
    het_model_pool_estimate(s->model, &ep, &e);
    if (check_fits(s, &e, err) != HET_OK) return HET_ERR_NOMEM;
    pp.size = s->p.pool_bytes ? s->p.pool_bytes : e.total;
    s->pool = het_pool_init(&pp, err);
    if (!s->pool) return err ? err->status : HET_ERR_NOMEM;
    /* the weights stay in the file's mapping unless asked (memory/README.md) */
    return s->p.weights_in_pool ? het_model_place_in_pool(s->model, s->pool, err) : HET_OK;
}

/* ---------------------------------------------------------------------------
 * scheduler                                                                 */

enum het_status het_policy_parse(const char *spec, het_device *const *devs, int n, struct het_sched_params *sp,
                                 het_error *err)
{
    const char *names[HET_SESSION_MAX_DEVICES];
    if (n > HET_SESSION_MAX_DEVICES) n = HET_SESSION_MAX_DEVICES;
    for (int i = 0; i < n; i++) names[i] = het_device_name(devs[i]);
    enum het_status st = het_policy_from_name(spec, names, n, &sp->policy, &sp->policy_device, err);
    if (st != HET_OK && err) het_error_prefix(err, "policy");
    return st;
}

static enum het_status make_sched(het_session *s, het_error *err)
{
    struct het_sched_params sp = {
        .devices = s->devices, .n_devices = s->n_devices, .strict = s->p.strict, .overlap = s->p.overlap,
        .log = s->p.log, .log_info = s->p.log_info, .log_user = s->p.user, .pool = s->pool,
    };
    enum het_status st = het_policy_parse(s->p.policy, s->devices, s->n_devices, &sp, err);
    if (st != HET_OK) return st;
    /* a single device needs no cost model; a set is planned from measured profiles */
    if (s->n_devices > 1) {
        struct het_calibrate_needs needs; /* a first-use calibration measures what this model needs */
        het_calibrate_needs_of_model(s->model, &needs);
        struct het_profiles_params pp = {
            .files = s->p.profiles, .recalibrate = s->p.recalibrate, .no_calibration = s->p.no_calibration,
            .test_disturbed = s->p.test_disturbed, .log = s->p.log, .progress = s->p.progress, .user = s->p.user, .needs = &needs,
        };
        st = het_profiles_acquire(s->devices, s->n_devices, &pp, s->profiles, err);
        if (st != HET_OK) return st;
        sp.profiles = (const het_profile *const *)s->profiles;
        /* measured profiles are corrected while running (sched/online.c);
         * unmeasured defaults were asked for (no_calibration, "default") */
        bool measured = true;
        for (int i = 0; i < s->n_devices; i++)
            measured &= !het_device_get_caps(s->devices[i])->host_timed || het_profile_is_measured(s->profiles[i]);
        sp.online = (!sp.policy || sp.policy == &het_policy_fastest) && measured;
        s->save_learned = sp.online && !s->p.profiles; /* profiles from files are the caller's */
    }
    if (s->p.pins) {
        const char *names[HET_SESSION_MAX_DEVICES];
        for (int i = 0; i < s->n_devices; i++) names[i] = het_device_name(s->devices[i]);
        st = het_plan_pins_parse(s->p.pins, names, s->n_devices, s->pins, HET_SCHED_MAX_PINS, &sp.n_pins, err);
        if (st != HET_OK) return st;
        sp.pins = s->pins;
    }
    s->sched = het_sched_init(&sp, err);
    return s->sched ? HET_OK : (err ? err->status : HET_ERR_INVALID);
}

/* ---------------------------------------------------------------------------
 * open / close                                                              */

het_session *het_session_open_core(const struct het_session_params *p, het_error *err)
{
    if (!p || !p->model_path) {
        het_error_set(err, HET_ERR_INVALID, "session: no model path");
        return NULL;
    }
    het_session *s = calloc(1, sizeof *s);
    if (!s) {
        het_error_set(err, HET_ERR_NOMEM, "session: out of memory");
        return NULL;
    }
    s->p = *p;
    bool ok = (s->model = het_model_load(p->model_path, err)) != NULL;
    ok = ok && open_devices(s, err) == HET_OK && open_pool(s, err) == HET_OK && make_sched(s, err) == HET_OK;
    if (ok && !het_model_pool(s->model)) {
        /* the weights are used in place from the mapped file */
        size_t size = 0;
        const void *base = het_gguf_file_data(het_model_gguf(s->model), &size);
        ok = het_sched_register_memory(s->sched, (void *)base, size, 0 /* weights */, err) == HET_OK;
    }
    ok = ok && het_model_prepare(s->model, s->sched, err) == HET_OK;
    if (!ok) {
        het_session_close(s);
        return NULL;
    }
    return s;
}

het_session *het_session_open(const struct het_session_params *p, het_error *err)
{
    het_session *s = het_session_open_core(p, err);
    if (!s) return NULL;
    if (p->has_accuracy_budget && het_session_budget_open(s, err) != HET_OK) {
        het_session_close(s);
        return NULL;
    }
    for (int i = 0; i < s->n_devices; i++) het_device_get_stats(s->devices[i], &s->stats_base[i]);
    if (p->open_context) {
        struct het_context_params cp = { .n_ctx = p->n_ctx, .n_seq = p->n_parallel, .sched = s->sched, .pool = s->pool };
        s->ctx = het_context_init(s->model, &cp, err);
        if (!s->ctx) {
            het_session_close(s);
            return NULL;
        }
    }
    return s;
}

/* What the scheduler learned about measured devices goes back into the
 * profile cache, so the next session starts from it. */
static void save_learned(const het_session *s)
{
    for (int i = 0; s->save_learned && s->sched && i < s->n_devices; i++) {
        const het_profile *p = het_sched_profile(s->sched, i);
        if (!s->profiles[i] || !het_profile_matches(p, s->devices[i]) || het_profile_noisy(p) ||
            het_profile_n_observations(p) == het_profile_n_observations(s->profiles[i]))
            continue;
        het_error err = { 0 };
        if (het_profile_cache_store(p, &err) != HET_OK && s->p.log) s->p.log(s->p.user, err.msg);
    }
}

void het_session_close(het_session *s)
{
    if (!s) return;
    save_learned(s);
    het_context_free(s->ctx);
    het_sched_free(s->sched);
    for (int i = 0; i < s->n_devices; i++) {
        het_profile_free(s->profiles[i]);
        het_device_free(s->devices[i]);
    }
    het_model_free(s->model);
    free(s->budget);
    het_pool_free(s->pool); /* last: devices and the model kept slices in it */
    free(s);
}

het_model   *het_session_model(const het_session *s) { return s->model; }
het_sched   *het_session_sched(const het_session *s) { return s->sched; }
het_pool    *het_session_pool(const het_session *s) { return s->pool; }
het_context *het_session_context(const het_session *s) { return s->ctx; }
int          het_session_n_devices(const het_session *s) { return s->n_devices; }

het_device *het_session_device(const het_session *s, int i)
{
    return i >= 0 && i < s->n_devices ? s->devices[i] : NULL;
}

const het_profile *het_session_profile(const het_session *s, int i)
{
    return i >= 0 && i < s->n_devices ? s->profiles[i] : NULL;
}

const struct het_session_budget *het_session_budget(const het_session *s) { return s->budget; }

void het_session_device_stats(const het_session *s, int i, struct het_device_stats *ds)
{
    het_device_get_stats(s->devices[i], ds);
    const struct het_device_stats *b = &s->stats_base[i];
    ds->n_splits -= b->n_splits;
    ds->n_nodes -= b->n_nodes;
    ds->copied_bytes -= b->copied_bytes;
    ds->busy_us -= b->busy_us;
    ds->n_splits_kept -= b->n_splits_kept;
    ds->n_steps_kept -= b->n_steps_kept;
}
