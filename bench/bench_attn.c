/*
 * bench_attn.c — how fast does decode's attention read the KV cache, beside
 * how fast the same threads read memory? One process, the same rounds.
 *
 * Decode's attention reads, for every layer, the K and V rows of every
 * position so far (F16, one kv head's rows adjacent, as model/context.c
 * lays the cache out), and the rows come from memory: the token's weights
 * have streamed through the caches since the step before. Each round here
 * first reads a 256 MiB buffer with the threads (the loop of tools/membw.c
 * that `hetrun bench` measures with; its rate is the round's read
 * bandwidth, and it empties the caches), then runs one query token's
 * attention over 28 layers' caches in turn, one HET_OP_ATTN node per layer
 * (Qwen3-0.6B's 16 query heads and 8 kv heads of 128), the threads taking
 * parts from the shared counter as the CPU device does. Printed per depth:
 * the median time per layer, the cache bytes it read per second, the read
 * bandwidth, and the median of the rounds' ratios with their range.
 *
 * With -q N (N > 1) the node is a prompt's instead: N query tokens after
 * `depth` cached ones, each attending its causal keys (prefill's tiles,
 * scores transposed with AVX-512), and the figure is the arithmetic rate
 * (QK and PV, 4 flops per head element and key) beside nothing: compare it
 * with the F32 peak `hetrun bench` prints.
 *
 *   bench_attn [-t threads] [-r rounds] [-d depth,depth,...] [-q prompt tokens]
 */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench_util.h"
#include "devices/cpu/cpu_ops.h"
#include "het/graph.h"
#include "tools/membw.h"

#define BA_LAYERS    28
#define BA_HEAD_DIM  128
#define BA_HEADS     16
#define BA_KV_HEADS  8
#define BA_ROUNDS_MAX 256

static int run_depth(int depth, int nq, int rounds, int nth, enum het_cpu_isa isa, size_t l2)
{
    const int64_t n_ctx = depth + nq + 16;
    const int64_t ne[4] = { BA_HEAD_DIM, n_ctx, BA_KV_HEADS, BA_LAYERS };
    struct het_tensor kc, vc;
    het_tensor_init(&kc, HET_TYPE_F16, 4, ne);
    het_tensor_init(&vc, HET_TYPE_F16, 4, ne);
    const size_t kv_bytes = het_nbytes(&kc);
    const size_t rbytes = (size_t)256 << 20;
    struct bench_mem km, vm, rm;
    const size_t qn = (size_t)BA_HEAD_DIM * BA_HEADS * (size_t)nq;
    float *qb = malloc(sizeof(float) * qn), *db = malloc(sizeof(float) * qn);
    if (!bench_alloc(&km, kv_bytes, 0) || !bench_alloc(&vm, kv_bytes, 0) || !bench_alloc(&rm, rbytes, 1) || !qb || !db)
        return 1;
    uint16_t *kb = (uint16_t *)(void *)km.p, *vb = (uint16_t *)(void *)vm.p;
    const uint8_t *rbuf = rm.p;
    uint64_t r = 0x9e3779b97f4a7c15ull;
    for (size_t i = 0; i < kv_bytes / 2; i++) { /* F16 values in [0.5, 1) and +-[0.25, 0.5) */
        r ^= r << 13; r ^= r >> 7; r ^= r << 17;
        kb[i] = (uint16_t)(0x3800 | ((r >> 20) & 0x3ff));
        vb[i] = (uint16_t)(0x3400 | ((r >> 30) & 0x3ff) | ((r >> 50 & 1) << 15));
    }
    for (size_t i = 0; i < qn; i++) {
        r ^= r << 13; r ^= r >> 7; r ^= r << 17;
        qb[i] = (float)(r >> 40) / (float)(1u << 24) - 0.5f;
    }
    /* q and dst (hd, heads, nq tokens); k, v: one layer's view (hd, kv heads, depth + nq - 1 keys for decode's
     * one token, depth + nq for a prompt's, its own keys included) */
    const int64_t qne[3] = { BA_HEAD_DIM, BA_HEADS, nq };
    struct het_tensor q, d, k, v;
    het_tensor_init(&q, HET_TYPE_F32, 3, qne);
    het_tensor_init(&d, HET_TYPE_F32, 3, qne);
    const int64_t kne[3] = { BA_HEAD_DIM, BA_KV_HEADS, nq > 1 ? depth + nq : depth };
    het_tensor_init(&k, HET_TYPE_F16, 3, kne);
    k.nb[1] = kc.nb[2]; /* kv head */
    k.nb[2] = kc.nb[1]; /* position */
    k.nb[3] = kc.nb[3];
    v = k;
    q.data = qb;
    d.data = db;
    d.op = HET_OP_ATTN;
    d.src[0] = &q;
    d.src[1] = &k;
    d.src[2] = &v;
    het_set_op_param_f32(&d, 0, 0.0884f);
    d.op_params[1] = nq > 1 ? depth : depth - 1;
    const size_t ws = het_cpu_attn_work_size(&d, nth, l2);
    void *wdata = aligned_alloc(64, (ws + 63) & ~(size_t)63);
    if (!wdata) return 1;
    double t_attn[BA_ROUNDS_MAX], rd[BA_ROUNDS_MAX], ratio[BA_ROUNDS_MAX];
    volatile unsigned long long sink = 0;
    struct het_cpu_sync sync;
    het_cpu_sync_init(&sync);
    enum het_status st[64] = { HET_OK };
    int got = 0;
#pragma omp parallel num_threads(nth) reduction(+ : got)
    {
        struct het_cpu_worker w;
        struct het_compute_params p = bench_thread_params(&w, &sync, wdata, ws, isa);
        p.l2_bytes = l2; /* as the CPU device runs it */
        got = p.nth == nth;
        const size_t share = rbytes / (size_t)p.nth / 256 * 256;
        double t0 = 0;
        for (int round = -1; round < rounds; round++) { /* round -1: warm-up */
#pragma omp barrier
#pragma omp master
            t0 = bench_now_s();
            sink += hr_read_widest(rbuf + (size_t)p.ith * share, share);
#pragma omp barrier
#pragma omp master
            {
                if (round >= 0) rd[round] = (double)share * p.nth / (bench_now_s() - t0) / 1e9;
                t0 = bench_now_s();
            }
            for (int l = 0; l < BA_LAYERS; l++) {
#pragma omp single
                {
                    k.data = (char *)kb + (size_t)l * kc.nb[3];
                    v.data = (char *)vb + (size_t)l * vc.nb[3];
                }
                const enum het_status s = het_cpu_attn(&p, &d);
                if (s != HET_OK) st[p.ith] = s;
#pragma omp barrier
            }
#pragma omp master
            if (round >= 0) t_attn[round] = bench_now_s() - t0;
        }
    }
    if (got != nth) {
        fprintf(stderr, "bench_attn: got fewer than %d threads\n", nth);
        return 1;
    }
    for (int i = 0; i < nth; i++)
        if (st[i] != HET_OK) {
            fprintf(stderr, "bench_attn: attention failed: %s\n", het_status_name(st[i]));
            return 1;
        }
    if (nq > 1) { /* a prompt's: QK and PV, 2 flops a multiply-add, each query over its causal keys */
        const double keys = (double)nq * depth + (double)nq * (nq + 1) / 2;
        const double flops = 4.0 * keys * BA_HEADS * BA_HEAD_DIM * BA_LAYERS;
        const double mt = bench_median(t_attn, rounds); /* sorts: t_attn[0] is the fastest round */
        printf("prompt %4d at depth %5d  %9.1f us/layer  %6.1f GFLOP/s (%.1f-%.1f)\n", nq, depth,
               mt / BA_LAYERS * 1e6, flops / mt / 1e9, flops / t_attn[rounds - 1] / 1e9, flops / t_attn[0] / 1e9);
    } else { /* the bytes one token's attention reads: K and V rows of every position */
        const double bytes = 2.0 * depth * BA_KV_HEADS * BA_HEAD_DIM * sizeof(uint16_t) * BA_LAYERS;
        /* each round's own ratio first: bench_median sorts what it is given */
        for (int i = 0; i < rounds; i++) ratio[i] = bytes / t_attn[i] / 1e9 / rd[i];
        const double mt = bench_median(t_attn, rounds), mr = bench_median(rd, rounds);
        const double mq = bench_median(ratio, rounds);
        printf("depth %5d  %8.2f us/layer  cache %5.1f GB/s   read %5.1f GB/s   cache/read %.2f (%.2f-%.2f)\n", depth,
               mt / BA_LAYERS * 1e6, bytes / mt / 1e9, mr, mq, ratio[0], ratio[rounds - 1]);
    }
    bench_free(&km);
    bench_free(&vm);
    bench_free(&rm);
    free(qb);
    free(db);
    free(wdata);
    return 0;
}

int main(int argc, char **argv)
{
    int nth = 2, rounds = 10, nq = 1;
    const char *depths = "64,512,2048";
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "-t")) nth = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "-r")) rounds = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "-d")) depths = argv[i + 1];
        else if (!strcmp(argv[i], "-q")) nq = atoi(argv[i + 1]);
        else {
            fprintf(stderr, "usage: %s [-t threads] [-r rounds] [-d depth,depth,...] [-q prompt tokens]\n", argv[0]);
            return 2;
        }
    }
    if (argc % 2 == 0 || nth < 1 || nth > 64 || rounds < 1 || rounds > BA_ROUNDS_MAX || nq < 1 || nq > 8192) {
        fprintf(stderr, "usage: %s [-t threads 1-64] [-r rounds 1-%d] [-d depth,depth,...] [-q prompt tokens 1-8192]\n",
                argv[0], BA_ROUNDS_MAX);
        return 2;
    }
    struct het_cpu_features f;
    het_cpu_features_detect(&f);
    const enum het_cpu_isa isa = het_cpu_isa_select(&f);
    const size_t l2 = het_cpu_l2_bytes();
    printf("threads %d, isa %s, L2 %zu KB, rows asked for ahead with %s (HET_CPU_STREAM), %d rounds (read 256 MiB,"
           " then attention over %d layers' caches), %d/%d heads of %d, F16 cache; medians, ratio min-max\n",
           nth, het_cpu_isa_name(isa), l2 >> 10, het_cpu_stream_name(bench_stream_hint()), rounds, BA_LAYERS,
           BA_HEADS, BA_KV_HEADS, BA_HEAD_DIM);
    char buf[256];
    snprintf(buf, sizeof buf, "%s", depths);
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        const int depth = atoi(tok);
        if (depth < (nq > 1 ? 0 : 1) || depth > 1 << 20) {
            fprintf(stderr, "bench_attn: depth '%s' is not a number of positions (1 to %d)\n", tok, 1 << 20);
            return 2;
        }
        if (run_depth(depth, nq, rounds, nth, isa, l2)) return 1;
    }
    return 0;
}
