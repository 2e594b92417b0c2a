/*
 * hr_profile.c — hetrun's glue for profiles (see hr_profile.h): the flags
 * onto the library's profile acquisition (het_profiles_acquire: NPU cost
 * model, --profile, cache, or a first-use quick calibration), a progress
 * bar, policies, and the profile/crossover printouts shared by plan,
 * calibrate and bench.
 */
#include "tools/hr_profile.h"
#include "tools/hetrun.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "het/session.h"

/* ---------------------------------------------------------------------------
 * flags                                                                     */


bool hr_test_disturbed(void)
{
    const char *env = getenv("HET_TEST_DISTURBED");
    return env && !strcmp(env, "1");
}

void hr_progress_init(struct hr_progress *p, const char *prefix)
{
    p->prefix = prefix;
    p->last_ms = hr_now_ms();
    p->tty = isatty(2);
}

#define HR_PROGRESS_EVERY_MS 5000 /* plain lines when stderr is not a terminal */

void hr_progress(void *user, double fraction, const char *what)
{
    struct hr_progress *p = user;
    if (!p->tty) {
        double now = hr_now_ms();
        if (fraction < 1 && now - p->last_ms < HR_PROGRESS_EVERY_MS) return;
        p->last_ms = now;
        fprintf(stderr, "%s: %3.0f%% %s\n", p->prefix, 100 * fraction, fraction >= 1 ? "done" : what ? what : "");
        return;
    }
    int width = 30, fill = (int)(fraction * width + 0.5);
    char bar[64];
    for (int i = 0; i < width; i++) bar[i] = i < fill ? '#' : '.';
    bar[width] = 0;
    fprintf(stderr, "\r%s [%s] %3.0f%% %-40.40s", p->prefix, bar, 100 * fraction, what ? what : "");
    if (fraction >= 1) fputc('\n', stderr);
    fflush(stderr);
}

/* ---------------------------------------------------------------------------
 * profiles                                                                  */

static void log_line(void *user, const char *line)
{
    (void)user;
    fprintf(stderr, "het: %s\n", line);
}

/* pr: the progress state (also the log's user, which ignores it) */
static struct het_profiles_params profiles_params(const struct hr_plan_opts *po, struct hr_progress *pr)
{
    const char *env = getenv("HET_CALIBRATE");
    hr_progress_init(pr, "calibrating");
    return (struct het_profiles_params){
        .files = po->profile, .recalibrate = po->recalibrate, .no_calibration = env && !strcmp(env, "0"),
        .log = log_line, .progress = hr_progress, .user = pr, .needs = po->needs, .accept_noisy = po->accept_noisy,
        .test_disturbed = hr_test_disturbed(),
    };
}

bool hr_profiles_for(het_device *const *devs, int n, const struct hr_plan_opts *po, het_profile **out)
{
    struct hr_progress pr;
    struct het_profiles_params p = profiles_params(po, &pr);
    het_error err = { 0 };
    if (het_profiles_acquire(devs, n, &p, out, &err) != HET_OK) {
        fprintf(stderr, "hetrun: --profile: %s\n", err.msg);
        return false;
    }
    return true;
}

int hr_profiles_extra(const struct hr_plan_opts *po, het_device *const *devs, int n, het_profile **out, int max)
{
    struct hr_progress pr;
    struct het_profiles_params p = profiles_params(po, &pr);
    het_error err = { 0 };
    int k = 0;
    if (het_profiles_extra(&p, devs, n, out, max, &k, &err) != HET_OK) return 0; /* reported by hr_profiles_for */
    return k;
}

const char *hr_profile_what_if(const char *list)
{
    if (!list) return NULL;
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", list);
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
        for (int i = 0; het_profile_what_if_name(i); i++)
            if (!strcmp(tok, het_profile_what_if_name(i))) return het_profile_what_if_name(i);
    return NULL;
}

bool hr_policy_parse(const char *spec, het_device *const *devs, int n, struct het_sched_params *sp)
{
    het_error err = { 0 };
    if (het_policy_parse(spec, devs, n, sp, &err) != HET_OK) {
        fprintf(stderr, "hetrun: --%s\n", err.msg);
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
