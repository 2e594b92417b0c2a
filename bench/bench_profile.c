/*
 * bench_profile.c — measured-vs-model curves of device profiles as PNGs.
 *
 *   bench_profile OUTDIR PROFILE.json [PROFILE.json ...]
 *
 * For every device profile (a cached one from `hetrun calibrate`, or a
 * set file) it writes into OUTDIR:
 *   <device>-matmul.png  per weight type, µs against M for each measured
 *                        N x K (points: samples, lines: the fitted model);
 *   <device>-fit.png     every sample's predicted against measured µs
 *                        (log-log, with the y = x diagonal), per op class;
 * plus the .dat/.gp files gnuplot drew them from. Needs gnuplot (Debian:
 * apt-get install gnuplot-nox); without it the data and scripts are still
 * written and the command to draw them is printed.
 */
#include "het/profile.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* samples of one matmul type grouped by shape (2*N*K = flops / M) */
static int shape_groups(const struct het_profile_sample *s, int n, double *nk, int max)
{
    int g = 0;
    for (int i = 0; i < n; i++) {
        double v = s[i].flops / fmax(s[i].m, 1);
        bool seen = false;
        for (int k = 0; k < g; k++) seen |= fabs(nk[k] / v - 1) < 1e-3;
        if (!seen && g < max) nk[g++] = v;
    }
    return g;
}

/* one panel per weight type; one data block per shape: measured points, then the model line */
static int write_matmul(FILE *dat, FILE *gp, const het_profile *p, const char *png)
{
    int blocks = 0, n_types = 0;
    for (int i = 0; i < het_profile_n_models(p); i++) {
        enum het_op_class cls;
        het_profile_model_at(p, i, &cls, NULL, NULL, NULL);
        n_types += cls == HET_OPCLASS_MATMUL;
    }
    int rows = (n_types + 2) / 3;
    fprintf(gp, "set terminal pngcairo noenhanced size 1500,%d\nset output '%s'\nset logscale xy 2\n"
                "set key top left\nset xlabel 'M (activation rows)'\nset ylabel 'us per node'\n"
                "set multiplot layout %d,3 title '%s matmul: points measured, lines fitted'\n",
            rows > 0 ? 420 * rows : 420, png, rows > 0 ? rows : 1, het_profile_device_name(p));
    for (int i = 0; i < het_profile_n_models(p); i++) {
        enum het_op_class cls;
        enum het_type t;
        struct het_cost_fit fit;
        int n = 0;
        het_profile_model_at(p, i, &cls, &t, &fit, &n);
        const struct het_profile_sample *s = het_profile_samples(p, cls, t, &n);
        if (cls != HET_OPCLASS_MATMUL || !s || !het_profile_get_fit(p, cls, t, &fit)) continue;
        double nk[16];
        int ng = shape_groups(s, n, nk, 16);
        fprintf(gp, "set title '%s (rms error %.0f%%)'\nplot ", het_type_name(t), 100 * fit.error);
        for (int g = 0; g < ng; g++) {
            /* bytes = a + b * M within a shape (weights + activations): least squares */
            double sm = 0, sb = 0, smm = 0, smb = 0, cnt = 0;
            for (int k = 0; k < n; k++)
                if (fabs(s[k].flops / fmax(s[k].m, 1) / nk[g] - 1) < 1e-3) {
                    fprintf(dat, "%g %g\n", s[k].m, s[k].us);
                    sm += s[k].m; sb += s[k].bytes; smm += s[k].m * s[k].m; smb += s[k].m * s[k].bytes; cnt++;
                }
            double den = cnt * smm - sm * sm, b = den > 0 ? (cnt * smb - sm * sb) / den : 0, a = (sb - b * sm) / cnt;
            fprintf(dat, "\n\n");
            for (double m = 1; m <= 1024; m *= 1.25) {
                struct het_op_cost c = { .cls = cls, .wtype = t, .m = m, .flops = nk[g] * m, .bytes = fmax(a + b * m, 0) };
                fprintf(dat, "%g %g\n", m, het_cost_fit_eval(&fit, &c));
            }
            fprintf(dat, "\n\n");
            fprintf(gp, "%s'%s.dat' index %d with points pt 7 lc %d title '%.1f MFLOP per row', '' index %d "
                        "with lines lc %d notitle", g ? ", " : "", png, 2 * blocks, g + 1, nk[g] / 1e6,
                    2 * blocks + 1, g + 1);
            blocks++;
        }
        fprintf(gp, "\n");
    }
    fprintf(gp, "unset multiplot\n");
    return blocks;
}

static int write_fit(FILE *dat, FILE *gp, const het_profile *p, const char *png)
{
    int blocks = 0;
    fprintf(gp, "set terminal pngcairo noenhanced size 1200,900\nset output '%s'\nset logscale xy 10\nset key outside right\n"
                "set xlabel 'measured us'\nset ylabel 'predicted us'\nset title '%s: predicted against measured'\n"
                "plot x title 'y = x' lw 2", png, het_profile_device_name(p));
    for (int i = 0; i < het_profile_n_models(p); i++) {
        enum het_op_class cls;
        enum het_type t;
        struct het_cost_fit fit;
        int n = 0;
        het_profile_model_at(p, i, &cls, &t, &fit, &n);
        const struct het_profile_sample *s = het_profile_samples(p, cls, t, &n);
        if (!s || !het_profile_get_fit(p, cls, t, &fit)) continue;
        for (int k = 0; k < n; k++) {
            struct het_op_cost c = { .cls = cls, .wtype = t, .m = s[k].m, .flops = s[k].flops, .bytes = s[k].bytes };
            fprintf(dat, "%g %g\n", s[k].us, het_cost_fit_eval(&fit, &c));
        }
        fprintf(dat, "\n\n");
        fprintf(gp, ", '%s.dat' index %d with points pt 7 title '%s %s (rms %.0f%%)'", png, blocks,
                het_op_class_name(cls), het_type_name(t), 100 * fit.error);
        blocks++;
    }
    fprintf(gp, "\n");
    return blocks;
}

static int plot(const char *dir, const het_profile *p, const char *what, bool have_gnuplot)
{
    char png[1024], path[1100];
    snprintf(png, sizeof png, "%s/%s-%s.png", dir, het_profile_device_name(p), what);
    snprintf(path, sizeof path, "%s.dat", png);
    FILE *dat = fopen(path, "w");
    snprintf(path, sizeof path, "%s.gp", png);
    FILE *gp = fopen(path, "w");
    if (!dat || !gp) {
        fprintf(stderr, "bench_profile: cannot write into %s\n", dir);
        if (dat) fclose(dat);
        if (gp) fclose(gp);
        return 1;
    }
    int blocks = !strcmp(what, "matmul") ? write_matmul(dat, gp, p, png) : write_fit(dat, gp, p, png);
    fclose(dat);
    fclose(gp);
    if (!blocks) return 0;
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "gnuplot '%s'", path);
    if (!have_gnuplot) {
        printf("gnuplot not found (apt-get install gnuplot-nox); draw later with: %s\n", cmd);
        return 0;
    }
    if (system(cmd) != 0) {
        fprintf(stderr, "bench_profile: %s failed\n", cmd);
        return 1;
    }
    printf("wrote %s\n", png);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s OUTDIR PROFILE.json [PROFILE.json ...]\n", argv[0]);
        return 2;
    }
    bool have_gnuplot = system("command -v gnuplot >/dev/null 2>&1") == 0;
    int rc = 0;
    for (int a = 2; a < argc; a++) {
        het_profile *ps[16];
        int n = 0;
        het_error err = { 0 };
        if (het_profile_load_all(argv[a], ps, 16, &n, &err) != HET_OK) {
            fprintf(stderr, "bench_profile: %s\n", err.msg);
            rc = 1;
            continue;
        }
        for (int i = 0; i < n; i++) {
            rc |= plot(argv[1], ps[i], "matmul", have_gnuplot);
            rc |= plot(argv[1], ps[i], "fit", have_gnuplot);
            het_profile_free(ps[i]);
        }
    }
    return rc;
}
