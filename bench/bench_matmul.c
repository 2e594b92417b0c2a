/*
 * bench_matmul.c — throughput of het_cpu_mul_mat on Qwen3-0.6B shapes.
 *
 * Runs each (type, shape, M) the way the CPU device does (one OpenMP
 * region, every thread calling the kernel with its ith/nth, a barrier
 * between calls) and prints GOP/s (2*N*K*M / time) and the weight-read rate
 * GB/s next to this machine's measured limits: read bandwidth, and the peak
 * rates of the int8 (vpmaddubsw) and FMA instructions. Rates use CPU time
 * (see cpu_s); wall time is printed too. The per-layer shapes add up to a
 * matmul-only estimate of prompt (pp) and generation (tg) tokens/s.
 *
 *   bench_matmul [-t threads] [-T q4_0,q8_0,...] [-M 1,512] [-s seconds] [-i isa] [-p 1] [-w MiB] [-S K,N]
 * -p 1 packs the weights once first (the CPU device's load-time repack).
 * -w N keeps copies of the weights adding up to at least N MiB and takes
 * the next copy each call, so that the weights come from memory as in a
 * decode (which reads every layer once per token), not from the caches
 * where one matrix of these shapes fits: -w 0 (the default) measures the
 * kernel's own rate, -w 256 the rate decode can have.
 * -S K,N runs that one shape instead of the layer's (a Qwen3-30B-A3B
 * expert: -S 2048,768 and -S 768,2048, with -M the tokens an expert gets).
 */
#include <immintrin.h>
#include <omp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "devices/cpu/cpu_ops.h"
#include "devices/cpu/quant_dot.h"
#include "bench/bench_util.h"
#include "bench/mm_node.h"
#include "het/graph.h"

/* Busy CPU seconds of the whole process. On a shared machine wall time
 * includes time the threads were descheduled; CPU time / threads (with
 * OMP_WAIT_POLICY=passive so waiting threads sleep) estimates the wall time
 * on an idle machine. Both are printed. */
static double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static float rnd_normal(void)
{
    /* sum of uniforms: plenty for benchmark data */
    float s = 0;
    for (int i = 0; i < 4; i++) {
        rng_state ^= rng_state << 13; rng_state ^= rng_state >> 7; rng_state ^= rng_state << 17;
        s += (float)(rng_state >> 40) / (float)(1ull << 24) - 0.5f;
    }
    return s * 1.7f;
}

/* ---- machine limits ------------------------------------------------------ */

/* The AVX2 loops live in their own functions: OpenMP's outlined region
 * bodies do not inherit a target attribute. */
__attribute__((target("avx2"))) static long long read_sum(const uint8_t *buf, size_t lo, size_t hi)
{
    __m256i a0 = _mm256_setzero_si256(), a1 = a0;
    for (size_t i = lo; i < hi; i += 64) {
        a0 = _mm256_add_epi64(a0, _mm256_load_si256((const __m256i *)(buf + i)));
        a1 = _mm256_add_epi64(a1, _mm256_load_si256((const __m256i *)(buf + i + 32)));
    }
    return _mm256_extract_epi64(_mm256_add_epi64(a0, a1), 0);
}

/* independent vpmaddubsw + vpaddw chains, 64 ops (32 MACs) per pair */
__attribute__((target("avx2"))) static long long int8_loop(long iters, int seed)
{
    __m256i w = _mm256_set1_epi8(3), x = _mm256_set1_epi8((char)seed);
    __m256i acc[8];
    for (int j = 0; j < 8; j++) acc[j] = _mm256_setzero_si256();
    for (long i = 0; i < iters; i++) {
#pragma GCC unroll 8
        for (int j = 0; j < 8; j++) acc[j] = _mm256_add_epi16(acc[j], _mm256_maddubs_epi16(w, x));
        __asm__ volatile("" : "+x"(w), "+x"(x));
    }
    for (int j = 1; j < 8; j++) acc[0] = _mm256_add_epi16(acc[0], acc[j]);
    return _mm256_extract_epi16(acc[0], 0);
}

__attribute__((target("avx2,fma"))) static double fma_loop(long iters)
{
    __m256 a = _mm256_set1_ps(1.0f), b = _mm256_set1_ps(0.999f);
    __m256 acc[8];
    for (int j = 0; j < 8; j++) acc[j] = _mm256_set1_ps((float)j);
    for (long i = 0; i < iters; i++) {
#pragma GCC unroll 8
        for (int j = 0; j < 8; j++) acc[j] = _mm256_fmadd_ps(acc[j], b, a);
        __asm__ volatile("" : "+x"(a), "+x"(b));
    }
    for (int j = 1; j < 8; j++) acc[0] = _mm256_add_ps(acc[0], acc[j]);
    return _mm256_cvtss_f32(acc[0]);
}

static double read_bw_gbs(int nth)
{
    const size_t n = (size_t)512 << 20; /* 512 MiB: well past the caches */
    uint8_t *buf = aligned_alloc(64, n);
    memset(buf, 1, n);
    double best = 0;
    for (int rep = 0; rep < 3; rep++) {
        double t0 = cpu_s();
        long long sink = 0;
#pragma omp parallel num_threads(nth) reduction(+ : sink)
        {
            const int ith = omp_get_thread_num(), nt = omp_get_num_threads();
            sink += read_sum(buf, n / nt * ith, n / nt * (ith + 1));
        }
        double t = (cpu_s() - t0) / nth;
        if (sink == 42) fprintf(stderr, "!");
        if (n / t / 1e9 > best) best = n / t / 1e9;
    }
    free(buf);
    return best;
}

static double peak_int8_gops(int nth)
{
    const long iters = 20000000;
    double t0 = cpu_s();
    long long sink = 0;
#pragma omp parallel num_threads(nth) reduction(+ : sink)
    sink += int8_loop(iters, omp_get_thread_num());
    double t = (cpu_s() - t0) / nth;
    if (sink == 42) fprintf(stderr, "!");
    return (double)nth * iters * 8 * 64 / t / 1e9;
}

static double peak_fma_gflops(int nth)
{
    const long iters = 20000000;
    double t0 = cpu_s();
    double sink = 0;
#pragma omp parallel num_threads(nth) reduction(+ : sink)
    sink += fma_loop(iters);
    double t = (cpu_s() - t0) / nth;
    if (sink == 42) fprintf(stderr, "!");
    return (double)nth * iters * 8 * 16 / t / 1e9;
}

/* ---- one benchmark case ----------------------------------------------------- */

struct bench_res { double sec, wall, gops, gbs; };

static int run_case(enum het_type type, int64_t K, int64_t N, int64_t M, int nth, enum het_cpu_isa isa,
                    double min_sec, bool prepack, size_t wset, struct bench_res *res)
{
    const size_t rs = het_type_row_size(type, K), a_bytes = (rs * (size_t)N + 63) & ~(size_t)63;
    uint8_t *a_buf = aligned_alloc(64, a_bytes);
    float *row = malloc(sizeof(float) * (size_t)K);
    /* 16 distinct random rows, repeated: same bandwidth, much faster set-up */
    for (int r = 0; r < 16 && r < N; r++) {
        for (int64_t k = 0; k < K; k++) row[k] = rnd_normal();
        if (het_quantize_row(type, row, a_buf + (size_t)r * rs, K) != HET_OK) return -1;
    }
    for (int64_t r = 16; r < N; r++) memcpy(a_buf + (size_t)r * rs, a_buf + (size_t)(r % 16) * rs, rs);
    float *b_buf = aligned_alloc(64, sizeof(float) * (size_t)(K * M));
    for (int64_t i = 0; i < K * M; i++) b_buf[i] = rnd_normal();
    float *d_buf = aligned_alloc(64, sizeof(float) * (size_t)(N * M));

    struct het_tensor a, b, d;
    bench_mm_node(&a, &b, &d, type, K, N, M, a_buf, b_buf, d_buf);
    uint8_t *packed = NULL;
    const size_t psize = prepack ? het_cpu_mul_mat_repack_size(&a, isa) : 0;
    const size_t pbytes = (psize + 63) & ~(size_t)63, wbytes = psize ? pbytes : a_bytes;
    const size_t ncopy = wset > wbytes ? (wset + wbytes - 1) / wbytes : 1;
    uint8_t *copies = NULL; /* ncopy - 1 more copies of the weights a call reads */
    if (psize) {
        packed = aligned_alloc(64, pbytes);
        if (het_cpu_mul_mat_repack(&a, isa, packed, psize) == HET_OK) a.extra = packed;
    }
    if (ncopy > 1) {
        copies = aligned_alloc(64, (ncopy - 1) * wbytes);
        for (size_t i = 0; i + 1 < ncopy; i++) memcpy(copies + i * wbytes, psize ? packed : a_buf, wbytes);
    }
    const size_t ws = het_cpu_mul_mat_work_size(&d, nth, false);
    void *wdata = ws ? aligned_alloc(64, (ws + 63) & ~(size_t)63) : NULL;

    /* As the device runs a graph: one parallel region, parts from a shared
     * counter. Thread 0 decides when to stop; the flag is read after a barrier. */
    int reps = 0, failed = 0, stop = 0;
    double t0 = bench_now_s(), c0 = cpu_s(), t = 0;
    struct het_cpu_sync sync;
    het_cpu_sync_init(&sync);
#pragma omp parallel num_threads(nth)
    {
        struct het_cpu_worker w;
        struct het_compute_params p = bench_thread_params(&w, &sync, wdata, ws, isa);
        for (;;) {
            if (het_cpu_mul_mat(&p, &d) != HET_OK) {
#pragma omp atomic write
                failed = 1;
            }
#pragma omp barrier
#pragma omp single
            {
                reps++;
                t = bench_now_s() - t0;
                stop = t >= min_sec || failed;
                const size_t ci = (size_t)reps % ncopy; /* copy 0 is the original */
                uint8_t *w = ci ? copies + (ci - 1) * wbytes : psize ? packed : a_buf;
                if (psize && a.extra) a.extra = w;
                else a.data = w;
            }
            if (stop) break;
        }
    }
    res->wall = t / reps;
    res->sec = (cpu_s() - c0) / nth / reps;
    res->gops = 2.0 * (double)N * (double)K * (double)M / res->sec / 1e9;
    res->gbs = (double)rs * (double)N / res->sec / 1e9;
    free(wdata); free(a_buf); free(b_buf); free(d_buf); free(row); free(packed); free(copies);
    return failed ? -1 : 0;
}

/* Qwen3-0.6B: 28 layers of q, k, v, o, gate, up, down, plus the output. */
struct shape { const char *name; int64_t K, N; int per_layer; };
static const struct shape shapes[] = {
    {"k/v   1024->1024", 1024, 1024, 2},
    {"q     1024->2048", 1024, 2048, 1},
    {"gate/up 1024->3072", 1024, 3072, 2},
    {"o     2048->1024", 2048, 1024, 1},
    {"down  3072->1024", 3072, 1024, 1},
};
#define N_LAYERS 28

int main(int argc, char **argv)
{
    int nth = 2;
    bool prepack = false;
    double min_sec = 0.3;
    size_t wset = 0;
    const char *types_arg = "q4_0,q8_0,q4_K,q6_K,f16";
    const char *ms_arg = "1,512";
    struct shape own = { "own", 0, 0, 1 };
    struct het_cpu_features f;
    het_cpu_features_detect(&f);
    enum het_cpu_isa isa = het_cpu_isa_select(&f);
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "-t")) nth = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "-T")) types_arg = argv[i + 1];
        else if (!strcmp(argv[i], "-M")) ms_arg = argv[i + 1];
        else if (!strcmp(argv[i], "-s")) min_sec = atof(argv[i + 1]);
        else if (!strcmp(argv[i], "-p")) prepack = atoi(argv[i + 1]) != 0;
        else if (!strcmp(argv[i], "-w")) wset = (size_t)atoll(argv[i + 1]) << 20;
        else if (!strcmp(argv[i], "-S")) {
            long long k = 0, n = 0;
            if (sscanf(argv[i + 1], "%lld,%lld", &k, &n) != 2 || k <= 0 || n <= 0) {
                fprintf(stderr, "-S: want K,N (two positive sizes), got '%s'\n", argv[i + 1]);
                return 2;
            }
            own.K = k;
            own.N = n;
        }
        else if (!strcmp(argv[i], "-i")) {
            for (int lv = HET_CPU_ISA_SCALAR; lv < (int)isa; lv++)
                if (!strcmp(argv[i + 1], het_cpu_isa_name((enum het_cpu_isa)lv))) isa = (enum het_cpu_isa)lv;
        } else {
            fprintf(stderr, "usage: %s [-t threads] [-T types] [-M m,...] [-s seconds] [-i isa] [-p 0|1] [-w MiB] [-S K,N]\n",
                    argv[0]);
            return 2;
        }
    }
    printf("threads %d, isa %s, weights %s, %s\n", nth, het_cpu_isa_name(isa),
           prepack ? "packed at load time" : "packed per call (M >= 4) / row GEMV",
           wset ? "copies rotated (from memory)" : "one copy (in cache where it fits)");
    if (f.avx2) {
        printf("machine: read bandwidth %.1f GB/s, int8 maddubs peak %.0f GOP/s, fp32 FMA peak %.0f GFLOP/s\n",
               read_bw_gbs(nth), peak_int8_gops(nth), peak_fma_gflops(nth));
    }
    printf("targets: decode ~57 GB/s read; Q4_0 prefill ~430 GOP/s (llama.cpp: pp512 360 tok/s, tg 56 tok/s)\n\n");

    char types_buf[256];
    snprintf(types_buf, sizeof types_buf, "%s", types_arg);
    for (char *tp = strtok(types_buf, ","); tp; tp = strtok(NULL, ",")) {
        const enum het_type type = het_type_from_name(tp);
        if (type == HET_TYPE_COUNT) { fprintf(stderr, "unknown type %s\n", tp); continue; }
        char ms_buf[128];
        snprintf(ms_buf, sizeof ms_buf, "%s", ms_arg);
        for (char *mp = ms_buf, *save = NULL, *ms = strtok_r(mp, ",", &save); ms; ms = strtok_r(NULL, ",", &save)) {
            const int64_t M = atoll(ms);
            double layer_sec = 0;
            const struct shape *sh = own.K ? &own : shapes;
            const size_t n_sh = own.K ? 1 : sizeof(shapes) / sizeof(shapes[0]);
            for (size_t s = 0; s < n_sh; s++) {
                struct bench_res r;
                if (run_case(type, sh[s].K, sh[s].N, M, nth, isa, min_sec, prepack, wset, &r) != 0) {
                    printf("%-5s M=%-4lld %-20s FAILED\n", tp, (long long)M, sh[s].name);
                    continue;
                }
                layer_sec += r.sec * sh[s].per_layer;
                printf("%-5s M=%-4lld %-20s %9.3f ms (wall %8.3f) %8.1f GOP/s %7.1f GB/s\n", tp, (long long)M,
                       sh[s].name, r.sec * 1e3, r.wall * 1e3, r.gops, r.gbs);
            }
            if (own.K) continue;
            printf("%-5s M=%-4lld layers x%d: %.2f ms -> %.1f tok/s (matmul only, no output layer)\n\n", tp,
                   (long long)M, N_LAYERS, layer_sec * N_LAYERS * 1e3, (double)M / (layer_sec * N_LAYERS));
        }
    }
    if (own.K) return 0;
    /* the output projection at decode: the largest single weight read */
    struct bench_res r;
    if (run_case(HET_TYPE_Q6_K, 1024, 151936, 1, nth, isa, min_sec, prepack, wset, &r) == 0)
        printf("q6_K  M=1    output 1024->151936  %9.3f ms (wall %8.3f) %8.1f GOP/s %7.1f GB/s\n", r.sec * 1e3,
               r.wall * 1e3, r.gops, r.gbs);
    return 0;
}
