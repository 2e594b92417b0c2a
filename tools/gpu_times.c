/*
 * gpu_times.c — hetrun's --gpu-times: per-node GPU time of the Vulkan
 * devices of a session (timestamp queries, het_vulkan_profiling_*), summed
 * per phase (bench: "pp512", "tg128"; run: "prefill", "decode") and printed
 * on stderr as totals per op class and the costliest nodes, the latter with
 * the layer number or node id folded away ("ffn_down.7" counts as
 * "ffn_down.*"), so one line covers a weight's product in every layer.
 *
 * (Issue 3 calls this "--profile"; that name belongs to the planner's
 * profile files, see hr_profile.c.) Warm-up runs are drained and dropped.
 * Without a Vulkan device, or in a build without the backend, the flag says
 * so once and does nothing else.
 */
#include "tools/gpu_times.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#if defined(HET_HAVE_VULKAN) && __has_include("het/vulkan.h")
#include "het/vulkan.h"
#define HAVE_VK 1
#else
#define HAVE_VK 0
#endif

#define TOP_NODES 12
#define READ_BATCH 4096

void hr_gpu_times_begin(struct hr_gpu_times *g, struct hr_session *s, const struct hr_opts *o)
{
    memset(g, 0, sizeof *g);
    g->s = s;
    if (!o->gpu_times) return;
#if HAVE_VK
    for (int i = 0; i < s->n_devices; i++) {
        struct het_vulkan_device_info info;
        if (!het_vulkan_device_get_info(s->devices[i], &info)) continue;
        het_error err = { 0 };
        if (het_vulkan_profiling_enable(s->devices[i], true, &err) != HET_OK) {
            fprintf(stderr, "hetrun %s: --gpu-times: %s: %s\n", o->cmd, info.name, err.msg);
            continue;
        }
        g->on = true;
    }
#endif
    if (!g->on) fprintf(stderr, "hetrun %s: --gpu-times: no Vulkan device with timestamps in this run\n", o->cmd);
}

/* "ffn_down.7" -> "ffn_down.*", "rms_norm#412" -> "rms_norm#*": a trailing
 * layer number or node id becomes * */
static void fold_layer(const char *name, char *out, size_t cap)
{
    snprintf(out, cap, "%s", name);
    size_t n = strlen(out), i = n;
    while (i > 0 && isdigit((unsigned char)out[i - 1])) i--;
    if (i < n && i > 0 && (out[i - 1] == '.' || out[i - 1] == '#') && i + 1 < cap) {
        out[i] = '*';
        out[i + 1] = 0;
    }
}

static struct hr_gpu_row *row_find(struct hr_gpu_row **rows, int *n, int *cap, const char *key, int op)
{
    for (int i = 0; i < *n; i++)
        if ((*rows)[i].op == op && !strcmp((*rows)[i].key, key)) return &(*rows)[i];
    if (*n == *cap) {
        int c = *cap ? 2 * *cap : 64;
        void *p = realloc(*rows, (size_t)c * sizeof **rows);
        if (!p) return NULL;
        *rows = p;
        *cap = c;
    }
    struct hr_gpu_row *r = &(*rows)[(*n)++];
    memset(r, 0, sizeof *r);
    snprintf(r->key, sizeof r->key, "%s", key);
    r->op = op;
    return r;
}

static struct hr_gpu_phase *phase_get(struct hr_gpu_times *g, const char *label)
{
    for (int i = 0; i < g->n_phases; i++)
        if (!strcmp(g->phases[i].label, label)) return &g->phases[i];
    if (g->n_phases == HR_GPU_MAX_PHASES) return NULL;
    struct hr_gpu_phase *ph = &g->phases[g->n_phases++];
    memset(ph, 0, sizeof *ph);
    snprintf(ph->label, sizeof ph->label, "%s", label);
    return ph;
}

void hr_gpu_times_take(struct hr_gpu_times *g, const char *label)
{
    if (!g->on) return;
#if HAVE_VK
    struct het_vulkan_op_time *rec = malloc(READ_BATCH * sizeof *rec);
    if (!rec) return;
    struct hr_gpu_phase *ph = label ? phase_get(g, label) : NULL;
    for (int i = 0; i < g->s->n_devices; i++) {
        int n;
        while ((n = het_vulkan_profiling_read(g->s->devices[i], rec, READ_BATCH)) > 0) {
            for (int j = 0; ph && j < n; j++) {
                char key[HET_MAX_NAME];
                fold_layer(rec[j].name, key, sizeof key);
                struct hr_gpu_row *c = row_find(&ph->ops, &ph->n_ops, &ph->cap_ops, het_op_name(rec[j].op), -1);
                struct hr_gpu_row *r = row_find(&ph->nodes, &ph->n_nodes, &ph->cap_nodes, key, (int)rec[j].op);
                if (c) { c->us += rec[j].gpu_us; c->calls++; }
                if (r) { r->us += rec[j].gpu_us; r->calls++; }
                ph->total_us += rec[j].gpu_us;
            }
            if (n < READ_BATCH) break;
        }
    }
    free(rec);
#else
    (void)label;
#endif
}

static int by_time(const void *a, const void *b)
{
    double x = ((const struct hr_gpu_row *)a)->us, y = ((const struct hr_gpu_row *)b)->us;
    return (x < y) - (x > y);
}

static void print_phase(struct hr_gpu_phase *ph, FILE *f)
{
    fprintf(f, "gpu times, %s: %.1f ms in %d node kinds\n", ph->label, ph->total_us / 1000.0, ph->n_nodes);
    qsort(ph->ops, (size_t)ph->n_ops, sizeof *ph->ops, by_time);
    qsort(ph->nodes, (size_t)ph->n_nodes, sizeof *ph->nodes, by_time);
    fprintf(f, "  %-14s %10s %6s %8s %10s\n", "op", "ms", "%", "calls", "us/call");
    for (int i = 0; i < ph->n_ops; i++) {
        const struct hr_gpu_row *r = &ph->ops[i];
        fprintf(f, "  %-14s %10.1f %6.1f %8llu %10.1f\n", r->key, r->us / 1000.0,
                ph->total_us > 0 ? 100.0 * r->us / ph->total_us : 0.0, (unsigned long long)r->calls,
                r->us / (double)r->calls);
    }
    fprintf(f, "  top nodes (layers folded):\n");
    for (int i = 0; i < ph->n_nodes && i < TOP_NODES; i++) {
        const struct hr_gpu_row *r = &ph->nodes[i];
        fprintf(f, "  %-14s %10.1f %6.1f %8llu %10.1f  %s\n", r->key, r->us / 1000.0,
                ph->total_us > 0 ? 100.0 * r->us / ph->total_us : 0.0, (unsigned long long)r->calls,
                r->us / (double)r->calls, het_op_name((enum het_op)r->op));
    }
}

void hr_gpu_times_end(struct hr_gpu_times *g)
{
    if (g->on) hr_gpu_times_take(g, NULL); /* drop what no phase claimed */
    for (int i = 0; i < g->n_phases; i++) {
        if (g->phases[i].n_ops) print_phase(&g->phases[i], stderr);
        free(g->phases[i].ops);
        free(g->phases[i].nodes);
    }
    memset(g, 0, sizeof *g);
}
