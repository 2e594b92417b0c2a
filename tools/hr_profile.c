/*
 * hr_profile.c — hetrun's glue for profiles (see hr_profile.h): extra
 * flags, devices by name, a profile per device (NPU cost model, --profile,
 * cache, or a first-use quick calibration with a progress bar), policies,
 * and the profile/crossover printouts shared by plan, calibrate and bench.
 */
#include "tools/hr_profile.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "het/npu.h"
#if defined(HET_HAVE_VULKAN) && __has_include("het/vulkan.h")
#include "het/vulkan.h"
#define HR_VULKAN 1
#endif

/* ---------------------------------------------------------------------------
 * flags                                                                     */

struct pflag { const char *name; int kind; size_t off; const char *help; }; /* kind: 0 str, 1 int, 2 bool */
#define P(field) offsetof(struct hr_plan_opts, field)
static const struct pflag pflags[] = {
    { "--phase",       0, P(phase),       "prefill | decode (default decode)" },
    { "--batch",       1, P(batch),       "prefill tokens (default 128)" },
    { "--past",        1, P(past),        "decode: tokens already in the cache (default 128)" },
    { "--measure",     2, P(measure),     "run the plan and add measured us per node and in total" },
    { "--profile",     0, P(profile),     "profile file(s), comma-separated; devices not present are simulated;"
                                          " 'default': unmeasured defaults, no calibration (also HET_CALIBRATE=0)" },
    { "--pin",         0, P(pin),         "PATTERN=DEVICE[,...]: glob on node or op name" },
    { "--overlap",     2, P(overlap),     "overlap independent splits on different devices" },
    { "--quick",       2, P(quick),       "quick calibration (seconds)" },
    { "--recalibrate", 2, P(recalibrate), "measure again even if a profile is cached" },
    { "--ops",         2, P(ops),         "per op class: achieved GB/s and GFLOP/s beside the roofline" },
    { "--plot",        0, P(plot),        "write measured-vs-model PNG curves into this folder (gnuplot)" },
    { "--types",       0, P(types),       "matmul weight types to calibrate, e.g. q4_0,q8_0,f16" },
    { "--accuracy",    2, P(accuracy),    "evaluate a text (-p/-f, default a built-in one) on the CPU alone and with"
                                          " the plan: per-position top-1 agreement, KL(p_cpu || p_plan)" },
    { "--accuracy-budget", 0, P(accuracy_budget), "KL: keep lossy devices (the NPU: int8 activations) to node groups"
                                          " whose predicted mean KL per position stays under KL" },
    { "--sensitivity", 0, P(sensitivity), "FILE | measure: KL per node group for the budget (default: the cached"
                                          " measurement, else an estimate); measure runs each group on the NPU" },
};
#undef P

static bool listed(const char *allowed, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = strstr(allowed, name); p; p = strstr(p + 1, name))
        if ((p == allowed || p[-1] == ' ') && (p[n] == ' ' || !p[n])) return true;
    return false;
}

void hr_plan_flags_help(const char *allowed)
{
    for (size_t i = 0; i < sizeof pflags / sizeof pflags[0]; i++)
        if (listed(allowed, pflags[i].name)) printf("  %-22s %s\n", pflags[i].name, pflags[i].help);
}

static bool set_pflag(const char *cmd, const struct pflag *f, const char *v, struct hr_plan_opts *po)
{
    void *dst = (char *)po + f->off;
    if (f->kind == 0) {
        *(const char **)dst = v;
        return true;
    }
    char *end;
    long x = strtol(v, &end, 10);
    if (*end || end == v || x < 1 || x > 1 << 20) {
        fprintf(stderr, "hetrun %s: %s: '%s' is not a count in [1, %d]\n", cmd, f->name, v, 1 << 20);
        return false;
    }
    *(int *)dst = (int)x;
    return true;
}

bool hr_take_plan_flags(const char *cmd, const char *allowed, int *argc, char **argv, struct hr_plan_opts *po)
{
    memset(po, 0, sizeof *po);
    po->batch = 128;
    po->past = 128;
    int out = 1;
    for (int i = 1; i < *argc; i++) {
        const char *a = argv[i], *eq = strchr(a, '=');
        size_t len = eq ? (size_t)(eq - a) : strlen(a);
        const struct pflag *f = NULL;
        for (size_t k = 0; k < sizeof pflags / sizeof pflags[0]; k++)
            if (strlen(pflags[k].name) == len && !strncmp(pflags[k].name, a, len) && listed(allowed, pflags[k].name))
                f = &pflags[k];
        if (!f) {
            argv[out++] = argv[i];
            continue;
        }
        if (f->kind == 2) {
            *(bool *)((char *)po + f->off) = true;
            continue;
        }
        const char *v = eq ? eq + 1 : i + 1 < *argc ? argv[++i] : NULL;
        if (!v) {
            fprintf(stderr, "hetrun %s: %s needs a value\n", cmd, f->name);
            return false;
        }
        if (!set_pflag(cmd, f, v, po)) return false;
    }
    *argc = out;
    argv[out] = NULL;
    if (po->phase && strcmp(po->phase, "prefill") && strcmp(po->phase, "decode")) {
        fprintf(stderr, "hetrun %s: --phase: '%s' (expected prefill or decode)\n", cmd, po->phase);
        return false;
    }
    return true;
}

/* ---------------------------------------------------------------------------
 * devices                                                                   */

het_device *hr_open_device(const char *spec, int threads, het_error *err)
{
    if (!strcmp(spec, "cpu")) return het_cpu_device_init(threads, err);
    if (!strncmp(spec, "npu", 3) && (!spec[3] || spec[3] == ':')) {
        enum het_npu_mode mode = HET_NPU_EMULATE;
        if (spec[3] && het_npu_parse_mode(spec + 4, &mode, err) != HET_OK) return NULL;
        return het_npu_device_init(mode, err);
    }
    if (!strncmp(spec, "vulkan", 6)) {
#ifdef HR_VULKAN
        int index = -1;
        if (spec[6] == ':') index = atoi(spec + 7);
        else if (spec[6]) index = -2;
        if (index >= -1) return het_vulkan_device_init(index, err);
#else
        het_error_set(err, HET_ERR_NO_DEVICE, "this build has no Vulkan backend");
        return NULL;
#endif
    }
    het_error_set(err, HET_ERR_INVALID, "unknown device '%s' (cpu, vulkan, vulkan:N, npu, npu:hw)", spec);
    return NULL;
}

void hr_progress(void *user, double fraction, const char *what)
{
    const char *prefix = user ? user : "";
    int width = 30, fill = (int)(fraction * width + 0.5);
    char bar[64];
    for (int i = 0; i < width; i++) bar[i] = i < fill ? '#' : '.';
    bar[width] = 0;
    fprintf(stderr, "\r%s [%s] %3.0f%% %-40.40s", prefix, bar, 100 * fraction, what ? what : "");
    if (fraction >= 1) fputc('\n', stderr);
    fflush(stderr);
}

/* ---------------------------------------------------------------------------
 * profiles                                                                  */

static int load_profile_files(const char *list, het_profile **out, int max)
{
    if (!list || !strcmp(list, "default")) return 0;
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", list);
    int n = 0;
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok && n < max; tok = strtok_r(NULL, ",", &save)) {
        het_error err = { 0 };
        int got = 0;
        if (het_profile_load_all(tok, out + n, max - n, &got, &err) != HET_OK) {
            fprintf(stderr, "hetrun: --profile: %s\n", err.msg);
            for (int i = 0; i < n; i++) het_profile_free(out[i]);
            return -1;
        }
        n += got;
    }
    return n;
}

static het_profile *calibrate_now(het_device *dev, bool quick, bool quiet, het_error *err)
{
    char prefix[64];
    snprintf(prefix, sizeof prefix, "calibrating %s", het_device_name(dev));
    if (!quiet)
        fprintf(stderr, "het: no profile for %s yet: %s calibration (`hetrun calibrate` for a full one)\n",
                het_device_name(dev), quick ? "a quick" : "a full");
    struct het_calibrate_params cp = { .quick = quick, .progress = hr_progress, .progress_user = prefix };
    het_profile *p = het_calibrate_device(dev, &cp, err);
    if (p && het_profile_cache_store(p, err) != HET_OK)
        fprintf(stderr, "het: cannot store the profile: %s\n", err->msg);
    return p;
}

/* the profile for one device, *fresh set when it was just measured */
static het_profile *profile_for(het_device *dev, const struct hr_plan_opts *po, het_profile **files, int n_files,
                                bool quiet, bool *fresh)
{
    het_error err = { 0 };
    *fresh = false;
    for (int i = 0; i < n_files; i++)
        if (files[i] && !strcmp(het_profile_device_name(files[i]), het_device_name(dev))) {
            het_profile *p = files[i];
            files[i] = NULL; /* taken */
            return p;
        }
    if (het_npu_is_npu(dev))
        return het_profile_from_npu(het_npu_get_profile(dev), het_device_name(dev), het_device_description(dev),
                                    &err);
    if (!po->recalibrate) {
        het_profile *p = het_profile_cache_load(dev, &err);
        if (p) return p;
    }
    const char *env = getenv("HET_CALIBRATE");
    if ((po->profile && !strcmp(po->profile, "default")) || (env && !strcmp(env, "0")))
        return het_profile_default(dev, HET_DEVICE_CPU, false); /* asked not to measure: labelled unmeasured */
    *fresh = true;
    het_profile *p = calibrate_now(dev, true, quiet, &err);
    if (!p) {
        fprintf(stderr, "het: %s; using its unmeasured default profile\n", err.msg);
        *fresh = false;
        return het_profile_default(dev, HET_DEVICE_CPU, false);
    }
    return p;
}

static void measure_handoffs(het_device *const *devs, int n, het_profile **out, const bool *fresh, bool quiet)
{
    for (int a = 0; a < n; a++) {
        bool changed = false;
        for (int b = 0; b < n; b++) {
            if (a == b || het_npu_is_npu(devs[a]) || het_npu_is_npu(devs[b])) continue;
            if (!het_profile_is_measured(out[a]) || !het_profile_is_measured(out[b])) continue;
            if (!fresh[a] && !fresh[b] && het_profile_get_handoff(out[a], het_device_name(devs[b]), NULL)) continue;
            het_error err = { 0 };
            struct het_calibrate_params cp = { .quick = true };
            if (!quiet)
                fprintf(stderr, "het: measuring the hand-off %s -> %s\n", het_device_name(devs[a]),
                        het_device_name(devs[b]));
            if (het_calibrate_handoff(devs[a], devs[b], out[a], &cp, &err) != HET_OK)
                fprintf(stderr, "het: %s\n", err.msg);
            else changed = true;
        }
        het_error err = { 0 };
        if (changed && het_profile_cache_store(out[a], &err) != HET_OK) fprintf(stderr, "het: %s\n", err.msg);
    }
}

bool hr_profiles_for(het_device *const *devs, int n, const struct hr_plan_opts *po, bool quiet, het_profile **out)
{
    het_profile *files[16] = { NULL };
    int n_files = load_profile_files(po->profile, files, 16);
    if (n_files < 0) return false;
    bool fresh[16] = { false };
    for (int i = 0; i < n; i++) out[i] = profile_for(devs[i], po, files, n_files, quiet, &fresh[i]);
    for (int i = 0; i < n_files; i++) het_profile_free(files[i]);
    for (int i = 0; i < n; i++)
        if (!out[i]) {
            fprintf(stderr, "het: no profile for %s\n", het_device_name(devs[i]));
            for (int k = 0; k < n; k++) {
                het_profile_free(out[k]);
                out[k] = NULL;
            }
            return false;
        }
    if (!po->profile) measure_handoffs(devs, n, out, fresh, quiet);
    return true;
}

int hr_profiles_extra(const struct hr_plan_opts *po, het_device *const *devs, int n, het_profile **out, int max)
{
    het_profile *files[16] = { NULL };
    int n_files = load_profile_files(po->profile, files, 16), k = 0;
    for (int i = 0; i < n_files; i++) {
        bool present = false;
        for (int d = 0; d < n; d++) present |= !strcmp(het_profile_device_name(files[i]), het_device_name(devs[d]));
        if (!present && k < max) out[k++] = files[i];
        else het_profile_free(files[i]);
    }
    return k;
}

bool hr_policy_parse(const char *spec, het_device *const *devs, int n, struct het_sched_params *sp)
{
    if (!spec || !strcmp(spec, "fastest")) sp->policy = HET_POLICY_FASTEST;
    else if (!strcmp(spec, "first")) sp->policy = HET_POLICY_FIRST;
    else if (!strcmp(spec, "alternate")) sp->policy = HET_POLICY_ALTERNATE;
    else if (!strncmp(spec, "single:", 7)) {
        sp->policy = HET_POLICY_SINGLE;
        sp->single = -1;
        for (int i = 0; i < n && sp->single < 0; i++)
            if (!strncmp(het_device_name(devs[i]), spec + 7, strlen(spec + 7))) sp->single = i;
        if (sp->single < 0) {
            fprintf(stderr, "hetrun: --policy %s: no such device in the set\n", spec);
            return false;
        }
    } else {
        fprintf(stderr, "hetrun: --policy: unknown policy '%s' (fastest, first, single:DEV, alternate)\n", spec);
        return false;
    }
    return true;
}

/* ---------------------------------------------------------------------------
 * printing                                                                  */

void hr_print_profile(FILE *f, const het_profile *p)
{
    struct het_profile_device_costs dc;
    het_profile_get_device_costs(p, &dc);
    fprintf(f, "%s: %s\n  %s\n  split %.1f us, roofline %.1f GB/s, %.1f GFLOP/s%s\n", het_profile_device_name(p),
            het_profile_device_desc(p), het_profile_label(p), dc.split_us, dc.peak_gbps, dc.peak_gflops,
            dc.kernel_switch_us > 0 ? ", kernel switch" : "");
    fprintf(f, "  %-8s %-5s %9s %9s %10s %7s %7s %4s\n", "op", "type", "t0 us", "GB/s", "GFLOP/s", "m_half", "error",
            "n");
    for (int i = 0; i < het_profile_n_models(p); i++) {
        enum het_op_class cls;
        enum het_type t;
        struct het_cost_fit fit;
        int ns = 0;
        het_profile_model_at(p, i, &cls, &t, &fit, &ns);
        fprintf(f, "  %-8s %-5s %9.2f %9.1f %10.1f %7.1f %6.1f%% %4d\n", het_op_class_name(cls), het_type_name(t),
                fit.t0_us, fit.gbps, fit.gflops, fit.m_half, 100 * fit.error, ns);
    }
    for (int i = 0; i < het_profile_n_handoffs(p); i++) {
        const struct het_handoff *h = het_profile_handoff_at(p, i);
        if (h->gbps > 0)
            fprintf(f, "  hand-off -> %s: %.1f us + bytes / %.1f GB/s\n", h->to, h->fixed_us, h->gbps);
        else
            fprintf(f, "  hand-off -> %s: %.1f us (no copy)\n", h->to, h->fixed_us);
    }
}

static double handoff_fixed(const het_profile *a, const het_profile *b)
{
    struct het_handoff h;
    return het_profile_get_handoff(a, het_profile_device_name(b), &h) ? h.fixed_us : HET_PLAN_DEFAULT_HANDOFF_US;
}

void hr_print_crossovers(FILE *f, const het_profile *const *p, int n, const enum het_type *types, int n_types,
                         int64_t rows, int64_t cols)
{
    for (int t = 0; t < n_types; t++)
        for (int a = 0; a < n; a++)
            for (int b = 0; b < n; b++) {
                if (a == b) continue;
                const char *na = het_profile_device_name(p[a]), *nb = het_profile_device_name(p[b]);
                double there_back = handoff_fixed(p[a], p[b]) + handoff_fixed(p[b], p[a]), flops = 0;
                double m = het_plan_crossover(p[a], p[b], types[t], rows, cols, there_back, &flops);
                double m0 = het_plan_crossover(p[a], p[b], types[t], rows, cols, 0, NULL);
                if (isnan(m0) && isnan(het_plan_crossover(p[b], p[a], types[t], rows, cols, 0, NULL))) continue;
                if (m == 0) continue; /* reported from the other side as "never" */
                fprintf(f, "  %s matmul %lldx%lld: ", het_type_name(types[t]), (long long)rows, (long long)cols);
                if (isnan(m)) fprintf(f, "%s faster than %s at every M (with hand-offs)\n", na, nb);
                else
                    fprintf(f, "%s below %.1f MFLOP (M=%g), %s above (hand-offs %.0f us included)%s\n", na,
                            flops / 1e6, m, nb, there_back,
                            het_profile_is_measured(p[a]) && het_profile_is_measured(p[b]) ? "" : " [unmeasured]");
            }
}

void hr_print_ops(FILE *f, const het_profile *p)
{
    struct het_profile_device_costs dc;
    het_profile_get_device_costs(p, &dc);
    fprintf(f, "%s (%s)\n  roofline: %.1f GB/s, %.1f GFLOP/s\n", het_profile_device_name(p), het_profile_label(p),
            dc.peak_gbps, dc.peak_gflops);
    fprintf(f, "  %-8s %-5s %12s %8s %14s %8s\n", "op", "type", "best GB/s", "of peak", "best GFLOP/s", "of peak");
    for (int i = 0; i < het_profile_n_models(p); i++) {
        enum het_op_class cls;
        enum het_type t;
        int ns = 0;
        het_profile_model_at(p, i, &cls, &t, NULL, &ns);
        const struct het_profile_sample *s = het_profile_samples(p, cls, t, &ns);
        double bw = 0, fl = 0;
        for (int k = 0; k < ns; k++)
            if (s[k].us > 0) {
                bw = fmax(bw, s[k].bytes / s[k].us * 1e-3);
                fl = fmax(fl, s[k].flops / s[k].us * 1e-3);
            }
        if (!ns) continue;
        fprintf(f, "  %-8s %-5s %12.1f %7.0f%% %14.1f %7.0f%%\n", het_op_class_name(cls), het_type_name(t), bw,
                dc.peak_gbps > 0 ? 100 * bw / dc.peak_gbps : 0, fl, dc.peak_gflops > 0 ? 100 * fl / dc.peak_gflops : 0);
    }
}
