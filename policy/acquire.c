/*
 * acquire.c — a profile for every device of a set (het/profile.h:
 * het_profiles_acquire): from --profile files, the NPU's cost model, the
 * cache, or a quick first-use calibration that is stored for next time,
 * plus the hand-offs between the devices. What a session does before it
 * plans; notices go to the caller's log callback, never to a stream.
 */
#include "het/npu.h"
#include "het/profile.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define MAX_FILES 16

static void notice(const struct het_profiles_params *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void notice(const struct het_profiles_params *p, const char *fmt, ...)
{
    if (!p->log) return;
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    p->log(p->user, line);
}

static enum het_status load_files(const char *list, het_profile **out, int max, int *n_out, het_error *err)
{
    *n_out = 0;
    if (!list || !strcmp(list, "default")) return HET_OK;
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", list);
    int n = 0;
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok && n < max; tok = strtok_r(NULL, ",", &save)) {
        int got = 0;
        enum het_status st = het_profile_what_if_desc(tok) ? het_profile_what_if(tok, out + n, max - n, &got, err)
                                                           : het_profile_load_all(tok, out + n, max - n, &got, err);
        if (st != HET_OK) {
            for (int i = 0; i < n; i++) het_profile_free(out[i]);
            return st;
        }
        n += got;
    }
    *n_out = n;
    return HET_OK;
}

static void clock_time(int64_t t, char *buf, size_t size)
{
    time_t tt = (time_t)t;
    struct tm tm;
    strftime(buf, size, "%Y-%m-%d %H:%M", localtime_r(&tt, &tm));
}

/* A quick calibration of what p->needs asks, extending base (a cached
 * profile that lacks part of it) when given. One that stayed noisy is used
 * for this run, not cached, and the refusal is recorded: later runs back
 * off (refusal.c). One that is stored clears the record. */
static het_profile *calibrate_now(het_device *dev, const struct het_profiles_params *p, const het_profile *base,
                                  het_error *err)
{
    notice(p, "%s %s: a quick calibration%s (`hetrun calibrate` for a full one)",
           base ? "the profile lacks parts of this model for" : "no profile yet for", het_device_name(dev),
           p->needs ? " of what this model needs" : "");
    struct het_calibrate_params cp = { .quick = true, .progress = p->progress, .progress_user = p->user,
                                       .needs = p->needs, .base = base, .test_disturbed = p->test_disturbed };
    het_profile *prof = het_calibrate_device(dev, &cp, err);
    if (prof && het_profile_noisy(prof) && p->accept_noisy) het_profile_set_noisy(prof, NULL);
    if (!prof) return NULL;
    het_error serr = { 0 };
    if (het_profile_noisy(prof)) {
        struct het_calibrate_refusal r;
        if (het_calibrate_refusal_record(dev, het_calibrate_needs_key(p->needs), het_profile_noisy(prof),
                                         (int64_t)time(NULL), &r, &serr) != HET_OK) {
            notice(p, "profile of %s not cached: %s; using it for this run only (%s)", het_device_name(dev),
                   het_profile_noisy(prof), serr.msg);
            return prof;
        }
        char when[32];
        clock_time(r.retry_s, when, sizeof when);
        notice(p, "profile of %s not cached: %s; using it for this run only. Refused %d time%s in a row: no "
               "calibration of %s before %s (`hetrun calibrate` measures now)", het_device_name(dev),
               het_profile_noisy(prof), r.count, r.count == 1 ? "" : "s", het_device_name(dev), when);
    } else if (het_profile_cache_store(prof, &serr) != HET_OK) {
        notice(p, "%s; using it for this run only", serr.msg);
    } else if (het_calibrate_refusal_clear(dev, &serr) != HET_OK) {
        notice(p, "%s", serr.msg);
    }
    return prof;
}

/* While a refused calibration of these needs backs off: the profile used
 * without one (the cached one lacking parts, else the unmeasured default),
 * its label saying so; NULL (nothing to back off from) otherwise. */
static het_profile *backing_off(het_device *dev, const struct het_profiles_params *p, het_profile *cached)
{
    struct het_calibrate_refusal r;
    bool found = false;
    het_error lerr = { 0 };
    if (het_calibrate_refusal_load(dev, &r, &found, &lerr) != HET_OK) {
        notice(p, "%s: ignored (the next calibration replaces it)", lerr.msg);
        return NULL;
    }
    int64_t now = (int64_t)time(NULL);
    if (!found || r.needs_key != het_calibrate_needs_key(p->needs) || now >= r.retry_s) return NULL;
    het_profile *prof = cached ? cached : het_profile_default(dev);
    if (!prof) return NULL;
    char when[32], label[512];
    clock_time(r.retry_s, when, sizeof when);
    if (!cached) { /* (a cached profile keeps its label: it may be stored again with what it learns) */
        snprintf(label, sizeof label, "unmeasured: calibration refused %d time%s in a row (busy machine), next try "
                 "after %s; %s", r.count, r.count == 1 ? "" : "s", when, het_profile_label(prof));
        het_profile_set_label(prof, false, label);
    }
    notice(p, "%s: calibration refused %d time%s in a row (%s); using %s until %s (`hetrun calibrate` measures now)",
           het_device_name(dev), r.count, r.count == 1 ? "" : "s", r.why,
           cached ? "the cached profile, which lacks parts of this model," : "its unmeasured default profile", when);
    return prof;
}

/* the profile for one device, *fresh set when it was just measured */
static het_profile *profile_for(het_device *dev, const struct het_profiles_params *p, het_profile **files,
                                int n_files, bool *fresh, het_error *err)
{
    *fresh = false;
    for (int i = 0; i < n_files; i++)
        if (files[i] && !strcmp(het_profile_device_name(files[i]), het_device_name(dev))) {
            het_profile *prof = files[i];
            files[i] = NULL; /* taken */
            het_profile_set_caps(prof, het_device_get_caps(dev)); /* a present device's caps are its own */
            return prof;
        }
    if (!het_device_get_caps(dev)->host_timed) { /* an emulation: its own cost model, never its wall time */
        het_profile *prof = het_profile_default(dev);
        if (!prof) het_error_set(err, HET_ERR_NOMEM, "profile %s: out of memory", het_device_name(dev));
        return prof;
    }
    het_error cerr = { 0 };
    struct het_calibrate_needs needs; /* what this device can be measured on */
    struct het_profiles_params pd = *p;
    if (p->needs) {
        needs = *p->needs;
        het_calibrate_needs_for(dev, &needs);
        pd.needs = &needs;
    }
    p = &pd;
    het_profile *cached = p->recalibrate ? NULL : het_profile_cache_load(dev, &cerr);
    if (cached && (!p->needs || het_profile_covers(cached, p->needs))) return cached;
    if ((p->files && !strcmp(p->files, "default")) || p->no_calibration) /* asked not to measure */
        return cached ? cached : het_profile_default(dev); /* labelled unmeasured */
    het_profile *waiting = p->recalibrate ? NULL : backing_off(dev, p, cached);
    if (waiting) return waiting;
    het_profile *prof = calibrate_now(dev, p, cached, &cerr);
    if (!prof) {
        notice(p, "%s; using its %s profile", cerr.msg, cached ? "cached" : "unmeasured default");
        return cached ? cached : het_profile_default(dev);
    }
    het_profile_free(cached);
    *fresh = true;
    return prof;
}

static void measure_handoffs(het_device *const *devs, int n, het_profile **out, const bool *fresh,
                             const struct het_profiles_params *p)
{
    for (int a = 0; a < n; a++) {
        bool changed = false;
        for (int b = 0; b < n; b++) {
            if (a == b || !het_device_get_caps(devs[a])->host_timed || !het_device_get_caps(devs[b])->host_timed)
                continue;
            if (!het_profile_is_measured(out[a]) || !het_profile_is_measured(out[b])) continue;
            if (!fresh[a] && !fresh[b] && het_profile_get_handoff(out[a], het_device_name(devs[b]), NULL)) continue;
            het_error err = { 0 };
            struct het_calibrate_params cp = { .quick = true };
            notice(p, "measuring the hand-off %s -> %s", het_device_name(devs[a]), het_device_name(devs[b]));
            if (het_calibrate_handoff(devs[a], devs[b], out[a], &cp, &err) != HET_OK) notice(p, "%s", err.msg);
            else changed = true;
        }
        het_error err = { 0 };
        if (changed && !het_profile_noisy(out[a]) && het_profile_cache_store(out[a], &err) != HET_OK)
            notice(p, "%s", err.msg);
    }
}

enum het_status het_profiles_acquire(het_device *const *devs, int n, const struct het_profiles_params *p,
                                     het_profile **out, het_error *err)
{
    if (n < 0 || n > MAX_FILES) return het_error_set(err, HET_ERR_INVALID, "profiles: %d devices (at most %d)", n,
                                                     MAX_FILES);
    het_profile *files[MAX_FILES] = { NULL };
    int n_files = 0;
    enum het_status st = load_files(p->files, files, MAX_FILES, &n_files, err);
    if (st != HET_OK) return st;
    bool fresh[MAX_FILES] = { false };
    for (int i = 0; i < n; i++) out[i] = NULL;
    for (int i = 0; i < n && st == HET_OK; i++) {
        het_error e = { 0 };
        out[i] = profile_for(devs[i], p, files, n_files, &fresh[i], &e);
        if (!out[i]) st = het_error_set(err, e.status ? e.status : HET_ERR_INVALID, "profile for %s: %s",
                                        het_device_name(devs[i]), e.msg);
    }
    for (int i = 0; i < n_files; i++) het_profile_free(files[i]);
    if (st != HET_OK) {
        for (int i = 0; i < n; i++) {
            het_profile_free(out[i]);
            out[i] = NULL;
        }
        return st;
    }
    if (!p->files) measure_handoffs(devs, n, out, fresh, p);
    return HET_OK;
}

enum het_status het_profiles_extra(const struct het_profiles_params *p, het_device *const *devs, int n,
                                   het_profile **out, int max, int *n_out, het_error *err)
{
    het_profile *files[MAX_FILES] = { NULL };
    int n_files = 0, k = 0;
    *n_out = 0;
    enum het_status st = load_files(p->files, files, MAX_FILES, &n_files, err);
    if (st != HET_OK) return st;
    for (int i = 0; i < n_files; i++) {
        bool present = false;
        for (int d = 0; d < n; d++) present |= !strcmp(het_profile_device_name(files[i]), het_device_name(devs[d]));
        if (!present && k < max) out[k++] = files[i];
        else het_profile_free(files[i]);
    }
    *n_out = k;
    return HET_OK;
}
