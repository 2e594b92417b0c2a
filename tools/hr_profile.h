/*
 * hr_profile.h — hetrun glue for cost models and plans: the flags of the
 * plan/calibrate commands, opening devices by name, getting a profile for
 * every device (cache, --profile file, NPU cost model, or a quick first-use
 * calibration with a progress bar), and printing profiles and crossovers.
 */
#ifndef HR_PROFILE_H
#define HR_PROFILE_H

#include <stdbool.h>
#include <stdio.h>

#include "het/plan.h"
#include "het/profile.h"
#include "het/sched.h"

/* Planning and calibration options; parsed with every other flag by hr_parse (tools/options.c). */
struct hr_plan_opts {
    const char *phase;        /* --phase prefill|decode (default decode)          */
    int         batch;        /* --batch N: prefill tokens (default 128)          */
    int         past;         /* --past N: decode position (default 128)          */
    bool        measure;      /* --measure: run it, add measured µs               */
    const char *profile;      /* --profile FILE[,FILE]: profiles to use/simulate  */
    const char *pin;          /* --pin PATTERN=DEV[,...]                          */
    bool        overlap;      /* --overlap: overlap independent splits            */
    bool        quick;        /* --quick: quick calibration                       */
    bool        recalibrate;  /* --recalibrate: ignore cached profiles            */
    bool        ops;          /* --ops (bench): per op class rates                */
    const char *plot;         /* --plot DIR: measured-vs-model PNGs (gnuplot)     */
    const char *types;        /* --types q4_0,f16: matmul types to calibrate      */
    bool        accuracy;     /* --accuracy: top-1 and KL against the CPU alone   */
    const char *accuracy_budget; /* --accuracy-budget KL: cap lossy devices (NULL: none) */
    double      budget_kl;    /* its value, parsed by hr_parse (NAN: none)        */
    const char *sensitivity;  /* --sensitivity FILE|measure|estimate: KL per node group */
    bool        accept_noisy; /* --accept-noisy: cache a calibration even when it stayed noisy */
    const struct het_calibrate_needs *needs; /* (set by calibrate -m) calibrate for this model */
};



/* Progress on stderr (user: struct hr_progress *): a line updated in place
 * on a terminal, else a plain line every few seconds and at the end. */
struct hr_progress {
    const char *prefix;
    double      last_ms;     /* when the last plain line was printed */
    bool        tty;
};
/* HET_TEST_DISTURBED=1 (tests): calibrations count every repetition as
 * disturbed, as on a machine that is always busy. */
bool hr_test_disturbed(void);

void hr_progress_init(struct hr_progress *p, const char *prefix);
void hr_progress(void *user, double fraction, const char *what);

/* One profile per device into out[] (owned by the caller), as the library's
 * het_profiles_acquire gets them from --profile, --recalibrate and
 * HET_CALIBRATE=0; notices and progress on stderr. */
bool hr_profiles_for(het_device *const *devs, int n, const struct hr_plan_opts *po, het_profile **out);
/* Profiles from --profile files that match none of devs (simulation). */
int  hr_profiles_extra(const struct hr_plan_opts *po, het_device *const *devs, int n, het_profile **out, int max);
/* The what-if machine --profile names (het_profile_what_if), or NULL. */
const char *hr_profile_what_if(const char *list);

/* "fastest" | "first" | "single:DEV" | "alternate" onto params (devices named). */
bool hr_policy_parse(const char *spec, het_device *const *devs, int n, struct het_sched_params *sp);

/* Summary of a profile's models (class/type, t0, GB/s, GFLOP/s, m_half, error). */
void hr_print_profile(FILE *f, const het_profile *p);
/* "q4_0 matmul 1024x1024: cpu below 2.1 MFLOP (M=2), vulkan0 above" for each pair and type. */
void hr_print_crossovers(FILE *f, const het_profile *const *p, int n, const enum het_type *types, int n_types,
                         int64_t rows, int64_t cols);

int cmd_plan(int argc, char **argv);
int cmd_calibrate(int argc, char **argv);
/* `hetrun bench --ops`: per op class achieved GB/s and GFLOP/s beside the roofline. */
void hr_print_ops(FILE *f, const het_profile *p);

#endif /* HR_PROFILE_H */
