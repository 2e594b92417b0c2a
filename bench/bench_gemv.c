/*
 * bench_gemv.c — how fast can one thread's decode matmul go, beside how
 * fast the same thread reads the same bytes, with the weights in L2, in
 * L3 and in memory?
 *
 * A decode token streams every weight once (M = 1), so the matmul is
 * memory bound only while its kernel's own work per byte stays well under
 * the memory's time per byte. Where one thread reads ~40 GB/s (two core
 * complexes, each thread its own link) a kernel that can only do ~75 GB/s
 * with its panels in L2 leaves the core busy more than half the memory's
 * time, and the two no longer overlap fully. This prints, per type, for a
 * K = 1024 matrix of N rows packed as the CPU device packs it (load-time
 * panels): the kernel's rate, the rate of a plain read of the same packed
 * bytes by the same thread (the loop `hetrun bench` measures its bound
 * with), and their ratio, best of several rounds each, the two interleaved.
 * The sizes: ~0.3-0.5 MB (in L2), ~5-9 MB (in L3) and ~150-280 MB (memory).
 *
 *   bench_gemv [-T types] [-r rounds]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench_util.h"
#include "bench/mm_node.h"
#include "devices/cpu/cpu_ops.h"
#include "devices/cpu/quant_dot.h"
#include "het/graph.h"
#include "het/type.h"
#include "tools/membw.h"

#define BG_K        1024
#define BG_ROUNDS_MAX 64
#define BG_PASS_BYTES ((double)256e6) /* bytes streamed per timed pass (at least one pass over the matrix) */

static const int64_t bg_rows[] = { 512, 8192, 262144 };
static const char *const bg_tier[] = { "L2", "L3", "memory" };

/* N rows of K random weights of type (16 distinct rows repeated: the
 * values do not change the kernel's work). */
static uint8_t *bg_weights(enum het_type type, int64_t N)
{
    const size_t rs = het_type_row_size(type, BG_K);
    uint8_t *buf = malloc(rs * (size_t)N);
    float row[BG_K];
    if (!buf) return NULL;
    uint64_t r = 0x9e3779b97f4a7c15ull;
    for (int64_t i = 0; i < N; i++) {
        if (i >= 16) {
            memcpy(buf + (size_t)i * rs, buf + (size_t)(i % 16) * rs, rs);
            continue;
        }
        for (int k = 0; k < BG_K; k++) {
            r ^= r << 13; r ^= r >> 7; r ^= r << 17;
            row[k] = (float)(r >> 40) / (float)(1u << 24) - 0.5f;
        }
        if (het_quantize_row(type, row, buf + (size_t)i * rs, BG_K) != HET_OK) {
            free(buf);
            return NULL;
        }
    }
    return buf;
}

static int bg_run(enum het_type type, enum het_cpu_isa isa, int rounds)
{
    float *b = malloc(sizeof(float) * BG_K);
    if (!b) return 1;
    for (int k = 0; k < BG_K; k++) b[k] = (float)(k % 7) - 3.0f;
    int rc = 0;
    for (size_t t = 0; t < sizeof bg_rows / sizeof bg_rows[0] && rc == 0; t++) {
        const int64_t N = bg_rows[t];
        uint8_t *rows = bg_weights(type, N);
        float *out = aligned_alloc(64, sizeof(float) * (size_t)N);
        struct het_tensor a, bt, d;
        struct bench_mem pk = { 0 };
        void *ws = NULL;
        rc = !rows || !out;
        if (rc == 0) {
            bench_mm_node(&a, &bt, &d, type, BG_K, N, 1, rows, b, out);
            const size_t size = het_cpu_mul_mat_repack_size(&a, isa);
            rc = !size || !bench_alloc(&pk, size, 0) || het_cpu_mul_mat_repack(&a, isa, pk.p, size) != HET_OK;
            if (rc == 0) {
                a.extra = pk.p;
                const size_t wsize = het_cpu_work_size(&d, 1, false, 0);
                ws = aligned_alloc(64, (wsize + 64) & ~(size_t)63);
                rc = !ws;
                const struct het_compute_params p = { .ith = 0, .nth = 1, .wdata = ws, .wsize = wsize, .isa = isa,
                                                      .stream = bench_stream_hint() };
                const size_t read_bytes = size & ~(size_t)255;
                const int passes = BG_PASS_BYTES / (double)size < 1 ? 1 : (int)(BG_PASS_BYTES / (double)size);
                double best_k = 1e30, best_r = 1e30;
                uint64_t sink = 0;
                for (int r = 0; r < rounds && rc == 0; r++) {
                    double t0 = bench_now_s();
                    for (int i = 0; i < passes && rc == 0; i++) rc = het_cpu_mul_mat(&p, &d) != HET_OK;
                    const double tk = bench_now_s() - t0;
                    t0 = bench_now_s();
                    for (int i = 0; i < passes; i++) sink += hr_read_widest(pk.p, read_bytes);
                    const double tr = bench_now_s() - t0;
                    if (tk < best_k) best_k = tk;
                    if (tr < best_r) best_r = tr;
                }
                if (rc == 0)
                    printf("%-5s %-6s %7.0f KB  kernel %6.1f GB/s  read %6.1f GB/s  kernel/read %.2f%s\n",
                           het_type_name(type), bg_tier[t], (double)size / 1024.0,
                           (double)size * passes / best_k / 1e9, (double)read_bytes * passes / best_r / 1e9,
                           ((double)size / best_k) / ((double)read_bytes / best_r), sink == 1 ? " " : "");
                else
                    fprintf(stderr, "bench_gemv: %s matmul failed\n", het_type_name(type));
            } else {
                fprintf(stderr, "bench_gemv: %s has no packed form at this level\n", het_type_name(type));
            }
        }
        bench_free(&pk);
        free(ws);
        free(out);
        free(rows);
    }
    free(b);
    return rc;
}

int main(int argc, char **argv)
{
    const char *types = "q4_0,q8_0,q4_K,q6_K";
    int rounds = 5;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-T") && i + 1 < argc) types = argv[++i];
        else if (!strcmp(argv[i], "-r") && i + 1 < argc) rounds = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: %s [-T types] [-r rounds 1-%d]\n", argv[0], BG_ROUNDS_MAX);
            return 2;
        }
    }
    if (rounds < 1 || rounds > BG_ROUNDS_MAX) {
        fprintf(stderr, "bench_gemv: -r must be 1-%d\n", BG_ROUNDS_MAX);
        return 2;
    }
    struct het_cpu_features f;
    het_cpu_features_detect(&f);
    const enum het_cpu_isa isa = het_cpu_isa_select(&f);
    printf("one thread, isa %s, K %d, M 1, prefetch hint %s (HET_CPU_STREAM), best of %d rounds (kernel and read "
           "interleaved)\n",
           het_cpu_isa_name(isa), BG_K, het_cpu_stream_name(bench_stream_hint()), rounds);
    char list[256];
    snprintf(list, sizeof list, "%s", types);
    int rc = 0;
    for (char *save = NULL, *tok = strtok_r(list, ",", &save); tok && rc == 0; tok = strtok_r(NULL, ",", &save)) {
        const enum het_type type = het_type_from_name(tok);
        if (type == HET_TYPE_COUNT) {
            fprintf(stderr, "bench_gemv: -T: unknown type '%s'\n", tok);
            return 2;
        }
        rc = bg_run(type, isa, rounds);
    }
    return rc;
}
