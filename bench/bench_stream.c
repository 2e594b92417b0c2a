/*
 * bench_stream.c — do the decode kernels stream weights as fast as the
 * machine reads memory? Side by side in one process, on the same threads.
 *
 * The memory of a shared VM changes speed within seconds (here between
 * about 40 and 70 GB/s, and now and then a read stalls for tens of
 * milliseconds), so a kernel's rate measured in one run and the read
 * bandwidth measured in another compare nothing. Here every round runs a
 * decode matmul (M = 1, packed weights, parts handed out from the shared
 * counter as the CPU device does) over weights far larger than the
 * last-level cache, then a plain read of a 256 MiB buffer (the loop of
 * tools/membw.c, which `hetrun bench` measures with) by the same
 * threads, each timed from the first thread's start to the last one's end;
 * the ratio of the two rates is taken per round, and the median and range
 * of the ratios are printed with the median rates. A round in which a
 * thread left the barrier more than 100 us after another is left out and
 * counted: here a thread whose core had gone idle sometimes came back
 * milliseconds late, and the other thread then streamed alone.
 *
 *   bench_stream [-t threads] [-T q4_0,q8_0,q4_K,q6_K] [-N rows] [-K cols] [-c copies] [-r rounds]
 *
 * -N/-K: the weight matrix (default 151936 x 1024, Qwen3-0.6B's output
 * matrix); -c copies: that many copies, run one after the other each round
 * (3072 x 1024 with -c 100: a run of layer-sized matmuls, ~170 MB of q4_0).
 */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "devices/cpu/cpu_ops.h"
#include "devices/cpu/quant_dot.h"
#include "bench/bench_util.h"
#include "bench/mm_node.h"
#include "het/graph.h"
#include "tools/membw.h"

#define ROUNDS_MAX 256
#define BS_LATE_S  100e-6 /* a round whose threads left the barrier further apart is not counted */

static int run_type(enum het_type type, int64_t N, int64_t K, int copies, int rounds, int nth,
                    enum het_cpu_isa isa)
{
    const size_t rs = het_type_row_size(type, K);
    uint8_t *a_buf = malloc(rs * (size_t)N);
    float *row = malloc(sizeof(float) * (size_t)K);
    float *b_buf = malloc(sizeof(float) * (size_t)K), *d_buf = malloc(sizeof(float) * (size_t)N);
    if (!a_buf || !row || !b_buf || !d_buf) return 1;
    uint64_t r = 0x9e3779b97f4a7c15ull;
    for (int i = 0; i < 16 && i < N; i++) { /* 16 random rows, repeated: same bytes to stream */
        for (int64_t k = 0; k < K; k++) {
            r ^= r << 13; r ^= r >> 7; r ^= r << 17;
            row[k] = (float)(r >> 40) / (float)(1u << 24) - 0.5f;
        }
        if (het_quantize_row(type, row, a_buf + (size_t)i * rs, K) != HET_OK) return 1;
    }
    for (int64_t i = 16; i < N; i++) memcpy(a_buf + (size_t)i * rs, a_buf + (size_t)(i % 16) * rs, rs);
    for (int64_t k = 0; k < K; k++) b_buf[k] = (float)(k % 7) - 3.0f;
    struct het_tensor a, b, d;
    bench_mm_node(&a, &b, &d, type, K, N, 1, a_buf, b_buf, d_buf);
    const size_t psize = het_cpu_mul_mat_repack_size(&a, isa);
    if (!psize) {
        fprintf(stderr, "bench_stream: %s has no packed form at this level\n", het_type_name(type));
        return 1;
    }
    struct bench_mem *panels = calloc((size_t)copies, sizeof *panels), rmem;
    if (!panels) return 1;
    for (int c = 0; c < copies; c++)
        if (!bench_alloc(&panels[c], psize, 1) || het_cpu_mul_mat_repack(&a, isa, panels[c].p, psize) != HET_OK) return 1;
    const size_t rbytes = (size_t)256 << 20;
    if (!bench_alloc(&rmem, rbytes, 1)) return 1;
    const uint8_t *rbuf = rmem.p;
    const size_t ws = het_cpu_mul_mat_work_size(&d, nth, false);
    void *wdata = ws ? aligned_alloc(64, (ws + 63) & ~(size_t)63) : NULL;
    if (ws && !wdata) return 1;
    double g[ROUNDS_MAX], rd[ROUNDS_MAX], ratio[ROUNDS_MAX];
    double start[64], stop[64];
    bool late[2 * ROUNDS_MAX + 2] = { false };
    volatile unsigned long long sink = 0;
    struct het_cpu_sync sync;
    het_cpu_sync_init(&sync);
    int got = 0;
#pragma omp parallel num_threads(nth) reduction(+ : got)
    {
        struct het_cpu_worker w;
        const struct het_compute_params p = bench_thread_params(&w, &sync, wdata, ws, isa);
        got = p.nth == nth;
        const size_t share = rbytes / (size_t)p.nth / 256 * 256;
        /* step -2, -1 warm up; even steps: the matmuls, odd: the read */
        for (int step = -2; step < 2 * rounds; step++) {
#pragma omp barrier
            start[p.ith] = bench_now_s();
            if (step % 2 == 0) {
                for (int c = 0; c < copies; c++) {
#pragma omp single
                    a.extra = panels[c].p;
                    (void)het_cpu_mul_mat(&p, &d);
                }
            } else {
                sink += hr_read_widest(rbuf + (size_t)p.ith * share, share);
            }
            stop[p.ith] = bench_now_s();
#pragma omp barrier
#pragma omp single
            if (step >= 0) {
                double t0 = start[0], t1 = stop[0], t0max = start[0];
                for (int t = 1; t < p.nth; t++) {
                    if (start[t] < t0) t0 = start[t];
                    if (start[t] > t0max) t0max = start[t];
                    if (stop[t] > t1) t1 = stop[t];
                }
                /* a thread that left the barrier late (its core was elsewhere: in a VM
                 * a halted vCPU can take milliseconds to come back) is not the memory */
                late[step] = t0max - t0 > BS_LATE_S;
                if (step % 2 == 0) g[step / 2] = (double)psize * copies / (t1 - t0) / 1e9;
                else rd[step / 2] = (double)share * p.nth / (t1 - t0) / 1e9;
            }
        }
    }
    if (got != nth) {
        fprintf(stderr, "bench_stream: got fewer than %d threads\n", nth);
        return 1;
    }
    int n = 0; /* rounds in which both steps started together */
    for (int i = 0; i < rounds; i++) {
        if (late[2 * i] || late[2 * i + 1]) continue;
        g[n] = g[i];
        rd[n] = rd[i];
        ratio[n] = g[i] / rd[i];
        n++;
    }
    if (n == 0) {
        printf("%-5s no round in which the threads started within %.0f us of each other\n", het_type_name(type),
               BS_LATE_S * 1e6);
    } else {
        const double mg = bench_median(g, n), mr = bench_median(rd, n), mq = bench_median(ratio, n);
        printf("%-5s %6lld x %-5lld x%-3d %7.1f MB   matmul %5.1f GB/s   read %5.1f GB/s   matmul/read %.2f (%.2f-%.2f)"
               "   %d of %d rounds\n",
               het_type_name(type), (long long)N, (long long)K, copies, (double)psize * copies / 1e6, mg, mr, mq,
               ratio[0], ratio[n - 1], n, rounds);
    }
    for (int c = 0; c < copies; c++) bench_free(&panels[c]);
    bench_free(&rmem);
    free(panels);
    free(a_buf);
    free(row);
    free(b_buf);
    free(d_buf);
    free(wdata);
    return 0;
}

int main(int argc, char **argv)
{
    int nth = 2, copies = 1, rounds = 20;
    int64_t N = 151936, K = 1024;
    const char *types_arg = "q4_0,q8_0,q4_K,q6_K";
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "-t")) nth = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "-T")) types_arg = argv[i + 1];
        else if (!strcmp(argv[i], "-N")) N = atoll(argv[i + 1]);
        else if (!strcmp(argv[i], "-K")) K = atoll(argv[i + 1]);
        else if (!strcmp(argv[i], "-c")) copies = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "-r")) rounds = atoi(argv[i + 1]);
        else {
            fprintf(stderr, "usage: %s [-t threads] [-T types] [-N rows] [-K cols] [-c copies] [-r rounds]\n", argv[0]);
            return 2;
        }
    }
    if (nth < 1 || copies < 1 || rounds < 1 || rounds > ROUNDS_MAX || N < 16 || K < 256 || K % 256) {
        fprintf(stderr, "bench_stream: threads >= 1, copies >= 1, 1 <= rounds <= %d, N >= 16, K a multiple of 256\n",
                ROUNDS_MAX);
        return 2;
    }
    struct het_cpu_features f;
    het_cpu_features_detect(&f);
    const enum het_cpu_isa isa = het_cpu_isa_select(&f);
    if (!f.avx2) {
        fprintf(stderr, "bench_stream: needs AVX2\n");
        return 2;
    }
    printf("threads %d, isa %s, prefetch hint %s (HET_CPU_STREAM), %d rounds (matmul then read, one process); "
           "medians, ratio min-max\n",
           nth, het_cpu_isa_name(isa), het_cpu_stream_name(bench_stream_hint()), rounds);
    char buf[256];
    snprintf(buf, sizeof buf, "%s", types_arg);
    for (char *tp = strtok(buf, ","); tp; tp = strtok(NULL, ",")) {
        const enum het_type type = het_type_from_name(tp);
        if (type == HET_TYPE_COUNT) {
            fprintf(stderr, "bench_stream: unknown type %s\n", tp);
            return 2;
        }
        if (run_type(type, N, K, copies, rounds, nth, isa)) return 1;
    }
    return 0;
}
