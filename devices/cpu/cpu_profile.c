/*
 * cpu_profile.c — the CPU device's opt-in per-node profile (see
 * cpu_profile.h): rows keyed by what a node does, found through a small
 * open-addressing hash of the key, and a table sorted by time at the end.
 */
#include "devices/cpu/cpu_profile.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define HET_PROF_SLOTS 512
#define HET_PROF_KEY   160

struct het_prof_row {
    char     key[HET_PROF_KEY];
    uint64_t calls;
    double   us;
    double   flops;   /* matmul: 2*K*N*M*batch                     */
    double   bytes;   /* matmul: weight bytes read per call, summed */
};

struct het_cpu_profile {
    char                path[256];
    clockid_t           clock;
    int                 n_rows;
    uint64_t            n_splits;
    double              split_us;
    struct het_prof_row rows[HET_PROF_SLOTS];
};

struct het_cpu_profile *het_cpu_profile_new(void)
{
    const char *env = getenv("HET_CPU_PROFILE");
    if (!env || !*env || !strcmp(env, "0")) return NULL;
    struct het_cpu_profile *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    snprintf(p->path, sizeof p->path, "%s", env);
    const char *clk = getenv("HET_CPU_PROFILE_CLOCK");
    p->clock = clk && !strcmp(clk, "thread") ? CLOCK_THREAD_CPUTIME_ID : CLOCK_MONOTONIC;
    return p;
}

double het_cpu_profile_now_us(const struct het_cpu_profile *p)
{
    struct timespec ts;
    clock_gettime(p->clock, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

/* "blk.12.ffn_up.weight" -> "ffn_up.weight" */
static const char *het_prof_strip_layer(const char *name)
{
    if (strncmp(name, "blk.", 4) != 0) return name;
    const char *s = strchr(name + 4, '.');
    return s ? s + 1 : name;
}

static void het_prof_key(struct het_tensor *const *nodes, int n, char *key, size_t size)
{
    if (n == 2 && nodes[0]->op == HET_OP_SWIGLU && nodes[1]->op == HET_OP_MUL_MAT) { /* one step: swiglu made as b */
        char mm[HET_PROF_KEY - 16];
        het_prof_key(nodes + 1, 1, mm, sizeof mm);
        snprintf(key, size, "swiglu+%s", mm);
        return;
    }
    const struct het_tensor *node = nodes[0];
    const struct het_tensor *a = node->src[0], *b = node->src[1];
    if (node->op == HET_OP_MUL_MAT && a && b) {
        char names[HET_PROF_KEY] = "";
        for (int i = 0; i < n; i++) {
            const size_t len = strlen(names);
            snprintf(names + len, sizeof names - len, "%s%s", i ? "+" : "", het_prof_strip_layer(nodes[i]->src[0]->name));
        }
        snprintf(key, size, "mul_mat %s %s %s", het_type_name(a->type), names, b->ne[1] < 4 ? "M<4" : "M>=4");
    } else if (n > 1) { /* a run of small nodes, or a norm chain (norm_chain.c): one step */
        char ops[HET_PROF_KEY] = "";
        for (int i = 0; i < n; i++) {
            const size_t len = strlen(ops);
            snprintf(ops + len, sizeof ops - len, "%s%s", i ? "+" : "", het_op_name(nodes[i]->op));
        }
        snprintf(key, size, "step: %s", ops);
    } else {
        snprintf(key, size, "%s %s", het_op_name(node->op), a ? het_type_name(a->type) : "-");
    }
}

static struct het_prof_row *het_prof_row(struct het_cpu_profile *p, const char *key)
{
    uint32_t h = 2166136261u;
    for (const char *s = key; *s; s++) h = (h ^ (uint8_t)*s) * 16777619u;
    for (uint32_t i = 0; i < HET_PROF_SLOTS; i++) {
        struct het_prof_row *r = &p->rows[(h + i) % HET_PROF_SLOTS];
        if (!r->key[0]) {
            if (p->n_rows >= HET_PROF_SLOTS - 1) return NULL;
            snprintf(r->key, sizeof r->key, "%s", key);
            p->n_rows++;
            return r;
        }
        if (!strcmp(r->key, key)) return r;
    }
    return NULL;
}

void het_cpu_profile_add(struct het_cpu_profile *p, struct het_tensor *const *nodes, int n, double us)
{
    char key[HET_PROF_KEY];
    het_prof_key(nodes, n, key, sizeof key);
    struct het_prof_row *r = het_prof_row(p, key);
    if (!r) return;
    r->calls++;
    r->us += us;
    for (int i = 0; i < n; i++) {
        const struct het_tensor *a = nodes[i]->src[0], *b = nodes[i]->src[1];
        if (nodes[i]->op == HET_OP_MUL_MAT && a && b) {
            r->flops += 2.0 * (double)a->ne[0] * (double)a->ne[1] * (double)(b->ne[1] * b->ne[2] * b->ne[3]);
            r->bytes += (double)het_nbytes(a);
        }
    }
}

void het_cpu_profile_add_split(struct het_cpu_profile *p, double us)
{
    p->n_splits++;
    p->split_us += us;
}

static int het_prof_cmp(const void *x, const void *y)
{
    const struct het_prof_row *a = x, *b = y;
    return (a->us < b->us) - (a->us > b->us);
}

static void het_prof_write(struct het_cpu_profile *p, FILE *f)
{
    qsort(p->rows, HET_PROF_SLOTS, sizeof p->rows[0], het_prof_cmp);
    double total = p->split_us;
    for (int i = 0; i < HET_PROF_SLOTS; i++) total += p->rows[i].us;
    fprintf(f, "het cpu profile: %.1f ms in %llu splits (entry/exit %.1f ms)\n", total / 1e3,
            (unsigned long long)p->n_splits, p->split_us / 1e3);
    fprintf(f, "%-44s %9s %10s %6s %9s %8s %8s\n", "node", "calls", "ms", "%", "us/call", "GOP/s", "GB/s");
    for (int i = 0; i < HET_PROF_SLOTS && p->rows[i].key[0]; i++) {
        const struct het_prof_row *r = &p->rows[i];
        fprintf(f, "%-44s %9llu %10.2f %6.2f %9.2f", r->key, (unsigned long long)r->calls, r->us / 1e3,
                total > 0 ? 100.0 * r->us / total : 0.0, r->us / (double)r->calls);
        if (r->flops > 0) fprintf(f, " %8.1f %8.1f", r->flops / r->us / 1e3, r->bytes / r->us / 1e3);
        fputc('\n', f);
    }
}

void het_cpu_profile_free(struct het_cpu_profile *p)
{
    if (!p) return;
    const bool to_stderr = !strcmp(p->path, "1") || !strcmp(p->path, "-") || !strcmp(p->path, "stderr");
    FILE *f = to_stderr ? stderr : fopen(p->path, "w");
    if (f) {
        het_prof_write(p, f);
        if (!to_stderr) fclose(f);
    }
    free(p);
}
