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

/* ---------------------------------------------------------------------------
 * flags                                                                     */


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
                /* a's point of view: the activations are on a; b costs the hand-off there and back */
                fprintf(f, "  %s matmul %lldx%lld, data on %s: ", het_type_name(types[t]), (long long)rows,
                        (long long)cols, na);
                if (isnan(m)) fprintf(f, "%s at every M (moving to %s and back never pays)\n", na, nb);
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
