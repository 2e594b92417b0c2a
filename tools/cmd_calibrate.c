/*
 * cmd_calibrate.c — `hetrun calibrate`: measure each device into a profile
 * (microbenchmarks through the device vtable, fits per op class and weight
 * type), store it in the profile cache, measure the hand-offs between the
 * devices, and print the models, the crossovers and (--ops) the achieved
 * rates beside the roofline. A cached profile of the same device and het
 * version is reused unless --recalibrate; with -m it is extended by what
 * that model needs and lacks, and only that is measured. A calibration
 * whose samples stayed noisy (a busy machine) is not cached, unless
 * --accept-noisy. The emulated NPU is never timed: its profile comes from
 * the NPU cost model.
 */
#include "tools/hetrun.h"
#include "tools/hr_profile.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>


#define CAL_FLAGS "-m -t --device --devices --json -v --quick --recalibrate --types --ops --accept-noisy"

static bool parse_types(const char *list, uint32_t *mask)
{
    char buf[256];
    snprintf(buf, sizeof buf, "%s", list);
    *mask = 0;
    char *save = NULL;
    for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (!strcmp(t, "all")) {
            for (int k = 0; k < HET_TYPE_COUNT; k++)
                if (het_type_get_traits((enum het_type)k)->can_compute) *mask |= 1u << k;
            continue;
        }
        enum het_type ty = het_type_from_name(t);
        if (ty == HET_TYPE_COUNT) {
            fprintf(stderr, "hetrun calibrate: --types: unknown type '%s'\n", t);
            return false;
        }
        *mask |= 1u << ty;
    }
    return true;
}

/* the device list: --device/--devices, else every usable device (auto); an
 * NPU named without a mode is the emulation (its cost model needs no hardware) */
static int open_devices(const struct hr_opts *o, het_device **devs, int max)
{
    const char *list = o->device ? o->device : o->devices ? o->devices : "auto";
    het_error err = { 0 };
    int n = 0;
    if (hr_open_devices(o, list, "emulate", devs, max, &n, NULL, NULL, &err) != HET_OK) {
        hr_error(o, "%s", err.msg);
        return -1;
    }
    return n;
}

static void fmt_time(int64_t t, char *buf, size_t size)
{
    time_t tt = (time_t)t;
    struct tm tm;
    strftime(buf, size, "%Y-%m-%d %H:%M", localtime_r(&tt, &tm));
}

/* -v: where the time went */
static void print_stages(het_device *dev, const struct het_calibrate_report *rep)
{
    fprintf(stderr, "%s: %-28s %8s %8s %8s %6s %6s %6s %8s\n", het_device_name(dev), "stage", "s", "set-up",
            "warm-up", "points", "runs", "builds", "build s");
    for (int i = 0; i < rep->n_stages; i++) {
        const struct het_calibrate_stage *s = &rep->stages[i];
        fprintf(stderr, "%s: %-28s %8.2f %8.2f %8.2f %6d %6d %6d %8.2f\n", het_device_name(dev), s->name, s->seconds,
                s->setup_seconds, s->warmup_seconds, s->points, s->runs, s->builds, s->build_seconds);
    }
}

static het_profile *calibrate_one(het_device *dev, const struct hr_plan_opts *po, uint32_t types, bool verbose,
                                  bool *fresh)
{
    het_error err = { 0 };
    *fresh = false;
    if (!het_device_get_caps(dev)->host_timed) /* an emulation: its own cost model, never its wall time */
        return het_profile_default(dev);
    het_profile *cached = po->recalibrate ? NULL : het_profile_cache_load(dev, &err);
    struct het_calibrate_needs needs; /* without expert shapes the device cannot run */
    if (po->needs) {
        needs = *po->needs;
        het_calibrate_needs_for(dev, &needs);
    }
    if (cached && (!po->needs || het_profile_covers(cached, &needs))) {
        fprintf(stderr, "%s: profile up to date (--recalibrate to measure again)\n", het_device_name(dev));
        return cached;
    }
    struct het_calibrate_refusal prev;
    bool refused = false;
    if (het_calibrate_refusal_load(dev, &prev, &refused, &err) != HET_OK) {
        fprintf(stderr, "hetrun calibrate: %s: ignored\n", err.msg);
        err = (het_error){ 0 };
    } else if (refused) {
        char when[32];
        fmt_time(prev.retry_s, when, sizeof when);
        fprintf(stderr, "%s: the last calibration was refused (%d in a row; first-use calibrations wait until %s); "
                "measuring now, as asked\n", het_device_name(dev), prev.count, when);
    }
    char prefix[64];
    snprintf(prefix, sizeof prefix, "calibrating %s", het_device_name(dev));
    struct hr_progress pr;
    hr_progress_init(&pr, prefix);
    struct het_calibrate_report rep;
    struct het_calibrate_params cp = { .quick = po->quick, .types_mask = types, .progress = hr_progress,
                                       .progress_user = &pr, .needs = po->needs ? &needs : NULL, .base = cached,
                                       .report = &rep, .test_disturbed = hr_test_disturbed() };
    double t0 = hr_now_ms();
    het_profile *p = het_calibrate_device(dev, &cp, &err);
    het_profile_free(cached);
    if (!p) {
        fprintf(stderr, "hetrun calibrate: %s\n", err.msg);
        return NULL;
    }
    char busy[96] = "";
    if (rep.n_noisy > 0 && rep.busy_share >= 0)
        snprintf(busy, sizeof busy, " (other processes used %.0f%% of the CPUs meanwhile)", 100 * rep.busy_share);
    fprintf(stderr, "%s: calibrated in %.1f s: %d samples, %d measured again, %d still disturbed%s, %d outliers dropped%s\n",
            het_device_name(dev), (hr_now_ms() - t0) / 1e3, rep.n_samples, rep.n_remeasured, rep.n_noisy, busy,
            rep.n_outliers, rep.n_reused ? " (extending the cached profile)" : "");
    if (verbose) print_stages(dev, &rep);
    if (het_profile_noisy(p) && po->accept_noisy) {
        fprintf(stderr, "%s: %s; cached anyway (--accept-noisy)\n", het_device_name(dev), het_profile_noisy(p));
        het_profile_set_noisy(p, NULL);
    }
    if (het_profile_noisy(p)) {
        struct het_calibrate_refusal r;
        if (het_calibrate_refusal_record(dev, het_calibrate_needs_key(po->needs ? &needs : NULL),
                                         het_profile_noisy(p), (int64_t)time(NULL), &r, &err) != HET_OK) {
            fprintf(stderr, "hetrun calibrate: %s\n", err.msg);
        } else {
            char when[32];
            fmt_time(r.retry_s, when, sizeof when);
            fprintf(stderr, "%s: not cached: refused %d time%s in a row; `hetrun run` and other first uses will not "
                    "calibrate it again before %s (`hetrun calibrate` measures whenever asked; --accept-noisy "
                    "caches it anyway)\n", het_device_name(dev), r.count, r.count == 1 ? "" : "s", when);
        }
    } else if (het_profile_cache_store(p, &err) != HET_OK) {
        fprintf(stderr, "hetrun calibrate: %s\n", err.msg);
    } else if (het_calibrate_refusal_clear(dev, &err) != HET_OK) {
        fprintf(stderr, "hetrun calibrate: %s\n", err.msg);
    }
    *fresh = true;
    return p;
}

static void handoffs(het_device **devs, het_profile **prof, const bool *fresh, int n, bool quick, bool verbose)
{
    for (int a = 0; a < n; a++) {
        bool changed = false;
        for (int b = 0; b < n; b++) {
            if (a == b || !het_profile_is_measured(prof[a]) || !het_profile_is_measured(prof[b])) continue;
            if (!fresh[a] && !fresh[b] && het_profile_get_handoff(prof[a], het_device_name(devs[b]), NULL)) continue;
            het_error err = { 0 };
            struct het_calibrate_params cp = { .quick = quick };
            double t0 = hr_now_ms();
            if (het_calibrate_handoff(devs[a], devs[b], prof[a], &cp, &err) != HET_OK)
                fprintf(stderr, "hetrun calibrate: %s\n", err.msg);
            else changed = true;
            if (verbose)
                fprintf(stderr, "hand-off %s -> %s: measured in %.2f s\n", het_device_name(devs[a]),
                        het_device_name(devs[b]), (hr_now_ms() - t0) / 1e3);
        }
        het_error err = { 0 };
        if (changed && !het_profile_noisy(prof[a]) && het_profile_cache_store(prof[a], &err) != HET_OK)
            fprintf(stderr, "hetrun calibrate: %s\n", err.msg);
    }
}

static void print_json(het_profile **prof, int n)
{
    printf("{\"profiles\":[");
    for (int i = 0; i < n; i++) {
        het_error err = { 0 };
        char *s = het_profile_to_json(prof[i], &err);
        printf("%s%s", i ? "," : "", s ? s : "null");
        free(s);
    }
    printf("]}\n");
}

static void print_text(het_profile **prof, int n, bool ops)
{
    for (int i = 0; i < n; i++) {
        if (ops) hr_print_ops(stdout, prof[i]);
        else hr_print_profile(stdout, prof[i]);
        char path[4096];
        het_error err = { 0 };
        if (het_profile_noisy(prof[i]))
            printf("  not cached: %s\n", het_profile_noisy(prof[i]));
        else if (het_profile_is_measured(prof[i]) &&
            het_profile_cache_path(het_profile_device_name(prof[i]), het_profile_device_desc(prof[i]), path,
                                   sizeof path, &err) == HET_OK)
            printf("  stored in %s\n", path);
    }
    if (n > 1) {
        static const enum het_type types[] = { HET_TYPE_F32, HET_TYPE_F16, HET_TYPE_Q8_0, HET_TYPE_Q4_0,
                                               HET_TYPE_Q4_K, HET_TYPE_Q6_K };
        printf("crossovers (from the fitted models):\n");
        hr_print_crossovers(stdout, (const het_profile *const *)prof, n, types, 6, 1024, 1024);
    }
}

/* -m MODEL: calibrate what that model needs (else a generic set) */
static bool model_needs(int argc, char **argv, const struct hr_opts *o, struct het_calibrate_needs *needs)
{
    bool given = false;
    for (int i = 1; i < argc; i++) given |= !strcmp(argv[i], "-m");
    if (!given) return true;
    het_error err = { 0 };
    het_model *m = het_model_load(o->model, &err);
    if (!m) {
        hr_error(o, "%s", err.msg);
        return false;
    }
    het_calibrate_needs_of_model(m, needs);
    het_model_free(m);
    return true;
}

int cmd_calibrate(int argc, char **argv)
{
    struct hr_opts o;
    if (!hr_parse(&o, "calibrate", CAL_FLAGS, argc, argv)) return 2;
    struct hr_plan_opts po = o.plan;
    uint32_t types = 0;
    if (po.types && !parse_types(po.types, &types)) return 2;
    struct het_calibrate_needs needs;
    needs.n_shapes = -1;
    if (!model_needs(argc, argv, &o, &needs)) return 1;
    if (needs.n_shapes >= 0) po.needs = &needs;
    het_device *devs[8];
    het_profile *prof[8] = { NULL };
    bool fresh[8] = { false };
    int n = open_devices(&o, devs, 8), rc = 0;
    if (n <= 0) {
        if (n == 0) hr_error(&o, "no device to calibrate");
        return 1;
    }
    for (int i = 0; i < n && rc == 0; i++)
        if (!(prof[i] = calibrate_one(devs[i], &po, types, o.verbose, &fresh[i]))) rc = 1;
    if (rc == 0) handoffs(devs, prof, fresh, n, po.quick, o.verbose);
    if (rc == 0 && o.json) print_json(prof, n);
    else if (rc == 0) print_text(prof, n, po.ops);
    for (int i = 0; i < n; i++) {
        het_profile_free(prof[i]);
        het_device_free(devs[i]);
    }
    return rc;
}
