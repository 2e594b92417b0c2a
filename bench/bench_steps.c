/*
 * bench_steps.c — what do the ends of a decode layer's matmul steps cost
 * against memory? Eight schedules of the same bytes, one process, the same
 * rounds.
 *
 * A decode token streams each layer's weights once, in steps that end when
 * all their parts are done: q/k/v as one step, o, gate/up as one step,
 * down (the CPU device's matmul groups). Every step end stops both
 * threads' streams and starts new ones. Each round here streams Qwen3-0.6B's
 * 28 layers of these matrices (random weights of one type, packed as the
 * CPU device packs them, every layer at its own addresses) eight ways:
 *   steps          as the device runs them: het_cpu_mul_mat_group for q/k/v
 *                  and gate/up, het_cpu_mul_mat for o and down, parts taken
 *                  from the shared counter (cpu_sync.c), each step over when
 *                  its parts are done, the weights laid out as the device
 *                  lays them out (each matrix in one segment a thread, the
 *                  segments of every layer's matrices in thread t's region
 *                  in the order a decode reads them); nothing else of the
 *                  layer (norms, attention) runs;
 *   steps, static  the same calls, layout and parts without the device's
 *                  work sharing: thread t takes run t's parts in order and
 *                  each step ends at an OpenMP barrier (the split the tests
 *                  run, cpu_sync.c): against steps, what handing out parts
 *                  and the device's step ends cost; against one range,
 *                  ends, what the device's layout and calls cost;
 *   halves, ends   each thread its own half of every matrix (packed apart,
 *                  the two halves side by side as in one matrix), an OpenMP
 *                  barrier where the device's steps end;
 *   halves         the same without the barriers: no thread ever waits for
 *                  the other, but every matrix still starts a new stream;
 *   one range, ends  the same halves laid out one range per thread (thread
 *                  0's halves of every layer in the order it reads them,
 *                  then thread 1's), the barriers at the step ends: what a
 *                  layout of the weights in the order the threads stream
 *                  them would give the device;
 *   one range, 3 ends  that layout with no barrier after q/k/v: what the
 *                  layer would stream if its q/k/v step ran on into the
 *                  attention (a layer's per-head nodes cut by heads, tried
 *                  in sessions 25 and 30: bench/README.md);
 *   one range, 2 ends  barriers after o and down only: the stream of a
 *                  layer split by heads and FFN columns (o and down cut
 *                  along K, each thread a partial sum: Megatron style);
 *   one range      that layout without the barriers: one stream per thread;
 * and then a plain read of 256 MiB by the same threads (the loop `hetrun
 * bench` measures its decode bound with). Printed per schedule: the median
 * time per layer, its rate, and the median (min-max) of the rounds' ratios
 * to the read of the same round; for the halves' schedules also each
 * thread's time a layer in the kernels and outside them (at the barriers),
 * threads 0 / 1, from the TSC: what a step end costs split into the wait
 * and the slower stream after it. A decode's `tg / bound` cannot go above
 * steps/read while it runs the steps this way; the schedules after it
 * take away, one at a time, what a step end and a new stream cost. A round
 * in which a thread started a schedule more than 100 us after the other
 * (its vCPU was elsewhere) is left out, and counted, as in bench_stream.
 *
 *   bench_steps [-t 2] [-T types] [-r rounds] [-l layers]
 */
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <x86intrin.h>

#include "devices/cpu/cpu_ops.h"
#include "devices/cpu/quant_dot.h"
#include "bench/bench_util.h"
#include "bench/mm_node.h"
#include "het/graph.h"
#include "tools/membw.h"

#define BS_ROUNDS_MAX 64
#define BS_LAYERS_MAX 64
#define BS_MATS       7 /* q k v | o | gate up | down */
#define BS_THREADS    2 /* the other schedules halve each matrix */
#define BS_SCHEDULES  8
#define BS_LATE_S     100e-6 /* a round whose threads left a barrier further apart is not counted */

/* Qwen3-0.6B: hidden 1024, 16 query heads and 8 kv heads of 128, FFN 3072 */
static const int64_t bs_shape[BS_MATS][2] = { /* K, N */
    { 1024, 2048 }, { 1024, 1024 }, { 1024, 1024 }, { 2048, 1024 }, { 1024, 3072 }, { 1024, 3072 }, { 3072, 1024 },
};
/* the activation row each matrix reads: x (hidden), attention out, swiglu out */
static const int bs_input[BS_MATS] = { 0, 0, 0, 1, 0, 0, 2 };

struct bs_mat {
    struct het_tensor a, d; /* weights (packed in a.extra) and the node */
};

struct bs_model {
    struct bs_mat  full[BS_LAYERS_MAX][BS_MATS];
    struct bs_mat  half[BS_LAYERS_MAX][BS_MATS][BS_THREADS]; /* side by side per matrix */
    struct bs_mat  line[BS_LAYERS_MAX][BS_MATS][BS_THREADS]; /* one range per thread     */
    struct het_tensor b[3];
    float         *b_data[3];
    float         *out[BS_MATS][1 + BS_THREADS]; /* each node its own: a group's members may not overlap */
    uint8_t       *rows[BS_MATS]; /* the quantised rows (metadata and packing source) */
    struct bench_mem full_mem, half_mem, line_mem;
    size_t         full_bytes, half_bytes;
};

static size_t bs_align(size_t n) { return (n + 63) & ~(size_t)63; }

/* 16 random rows of K, repeated to N rows. */
static uint8_t *bs_rows(enum het_type type, int64_t K, int64_t N, uint64_t *r)
{
    const size_t rs = het_type_row_size(type, K);
    uint8_t *buf = malloc(rs * (size_t)N);
    float *row = malloc(sizeof(float) * (size_t)K);
    if (!buf || !row) {
        free(buf);
        free(row);
        return NULL;
    }
    for (int64_t i = 0; i < N; i++) {
        if (i >= 16) {
            memcpy(buf + (size_t)i * rs, buf + (size_t)(i % 16) * rs, rs);
            continue;
        }
        for (int64_t k = 0; k < K; k++) {
            *r ^= *r << 13; *r ^= *r >> 7; *r ^= *r << 17;
            row[k] = (float)(*r >> 40) / (float)(1u << 24) - 0.5f;
        }
        if (het_quantize_row(type, row, buf + (size_t)i * rs, K) != HET_OK) {
            free(buf);
            free(row);
            return NULL;
        }
    }
    free(row);
    return buf;
}

/* m's weights: rows [r0, r0 + n) of matrix i, packed at *at (advanced). */
static int bs_pack(struct bs_model *md, struct bs_mat *m, enum het_type type, enum het_cpu_isa isa, int i, int64_t r0,
                   int64_t n, float *out, uint8_t **at)
{
    const int64_t K = bs_shape[i][0];
    bench_mm_node(&m->a, &md->b[bs_input[i]], &m->d, type, K, n, 1, md->rows[i] + (size_t)r0 * het_type_row_size(type, K),
                  md->b_data[bs_input[i]], out);
    const size_t size = het_cpu_mul_mat_repack_size(&m->a, isa);
    if (!size || het_cpu_mul_mat_repack(&m->a, isa, *at, size) != HET_OK) return 1;
    m->a.extra = *at;
    *at += bs_align(size);
    return 0;
}

/* m's weights: all of matrix i in BS_THREADS segments, segment 0 after the
 * header at *at (advanced), segment t `region` bytes on (as the CPU device
 * packs them, cpu_device.c). */
static int bs_pack_seg(struct bs_model *md, struct bs_mat *m, enum het_type type, enum het_cpu_isa isa, int i,
                       size_t region, uint8_t **at)
{
    const int64_t K = bs_shape[i][0], N = bs_shape[i][1];
    bench_mm_node(&m->a, &md->b[bs_input[i]], &m->d, type, K, N, 1, md->rows[i], md->b_data[bs_input[i]],
                  md->out[i][0]);
    const size_t sb = het_cpu_mul_mat_seg_bytes(&m->a, isa, BS_THREADS);
    const int64_t items = het_cpu_mul_mat_repack_items(&m->a, isa);
    if (!sb || het_cpu_mul_mat_repack_seg(&m->a, isa, *at, BS_THREADS, region, 0, items) != HET_OK) return 1;
    m->a.extra = *at;
    *at += bs_align(HET_CPU_PACKED_HEADER + sb);
    return 0;
}

static int bs_build(struct bs_model *md, enum het_type type, enum het_cpu_isa isa, int layers)
{
    uint64_t r = 0x9e3779b97f4a7c15ull;
    const int64_t Ks[3] = { 1024, 2048, 3072 };
    for (int x = 0; x < 3; x++) {
        const int64_t ne[2] = { Ks[x], 1 };
        md->b_data[x] = malloc(sizeof(float) * (size_t)Ks[x]);
        if (!md->b_data[x]) return 1;
        for (int64_t k = 0; k < Ks[x]; k++) md->b_data[x][k] = (float)(k % 7) - 3.0f;
        het_tensor_init(&md->b[x], HET_TYPE_F32, 2, ne);
        md->b[x].data = md->b_data[x];
    }
    for (int i = 0; i < BS_MATS; i++)
        for (int o = 0; o < 1 + BS_THREADS; o++) {
            md->out[i][o] = aligned_alloc(64, bs_align(sizeof(float) * (size_t)bs_shape[i][1]));
            if (!md->out[i][o]) return 1;
        }
    md->full_bytes = md->half_bytes = 0;
    size_t region = 0; /* one thread's segments of every layer */
    for (int i = 0; i < BS_MATS; i++) {
        md->rows[i] = bs_rows(type, bs_shape[i][0], bs_shape[i][1], &r);
        if (!md->rows[i]) return 1;
        struct bs_mat probe;
        bench_mm_node(&probe.a, &md->b[bs_input[i]], &probe.d, type, bs_shape[i][0], bs_shape[i][1], 1, md->rows[i],
                      md->b_data[bs_input[i]], md->out[i][0]);
        const size_t size = het_cpu_mul_mat_repack_size(&probe.a, isa);
        if (!size) {
            fprintf(stderr, "bench_steps: %s has no packed form at this level\n", het_type_name(type));
            return 1;
        }
        md->full_bytes += bs_align(size) * (size_t)layers;
        const size_t sb = het_cpu_mul_mat_seg_bytes(&probe.a, isa, BS_THREADS);
        if (!sb) {
            fprintf(stderr, "bench_steps: %s has no segmented form at this level\n", het_type_name(type));
            return 1;
        }
        region += bs_align(HET_CPU_PACKED_HEADER + sb) * (size_t)layers;
        probe.a.ne[1] = bs_shape[i][1] / BS_THREADS;
        md->half_bytes += bs_align(het_cpu_mul_mat_repack_size(&probe.a, isa)) * BS_THREADS * (size_t)layers;
    }
    if (!bench_alloc(&md->full_mem, region * BS_THREADS, 0) || !bench_alloc(&md->half_mem, md->half_bytes, 0) ||
        !bench_alloc(&md->line_mem, md->half_bytes, 0))
        return 1;
    uint8_t *fa = md->full_mem.p, *ha = md->half_mem.p, *la = md->line_mem.p;
    for (int l = 0; l < layers; l++)
        for (int i = 0; i < BS_MATS; i++) {
            const int64_t n = bs_shape[i][1] / BS_THREADS;
            if (bs_pack_seg(md, &md->full[l][i], type, isa, i, region, &fa)) return 1;
            for (int t = 0; t < BS_THREADS; t++)
                if (bs_pack(md, &md->half[l][i][t], type, isa, i, t * n, n, md->out[i][1 + t], &ha)) return 1;
        }
    for (int t = 0; t < BS_THREADS; t++)
        for (int l = 0; l < layers; l++)
            for (int i = 0; i < BS_MATS; i++) {
                const int64_t n = bs_shape[i][1] / BS_THREADS;
                if (bs_pack(md, &md->line[l][i][t], type, isa, i, t * n, n, md->out[i][1 + t], &la)) return 1;
            }
    return 0;
}

static void bs_release(struct bs_model *md)
{
    bench_free(&md->full_mem);
    bench_free(&md->half_mem);
    bench_free(&md->line_mem);
    for (int i = 0; i < BS_MATS; i++) free(md->rows[i]);
    for (int x = 0; x < 3; x++) free(md->b_data[x]);
    for (int i = 0; i < BS_MATS; i++)
        for (int o = 0; o < 1 + BS_THREADS; o++) free(md->out[i][o]);
}

/* One token's layers as the CPU device runs their matmul steps. */
static enum het_status bs_steps(const struct het_compute_params *p, struct bs_model *md, int layers)
{
    enum het_status st = HET_OK;
    for (int l = 0; l < layers && st == HET_OK; l++) {
        struct het_tensor *qkv[3] = { &md->full[l][0].d, &md->full[l][1].d, &md->full[l][2].d };
        struct het_tensor *gu[2] = { &md->full[l][4].d, &md->full[l][5].d };
        if (het_cpu_mul_mat_group(p, qkv, 3, NULL, &st) != 3 && st == HET_OK) st = HET_ERR_UNSUPPORTED;
        if (st == HET_OK) st = het_cpu_mul_mat(p, &md->full[l][3].d);
        if (st == HET_OK && het_cpu_mul_mat_group(p, gu, 2, NULL, &st) != 2 && st == HET_OK) st = HET_ERR_UNSUPPORTED;
        if (st == HET_OK) st = het_cpu_mul_mat(p, &md->full[l][6].d);
    }
    return st;
}

/* Where a layer's steps end: a barrier after matrix i when bit i is set. */
#define BS_ENDS_DEVICE ((1u << 2) | (1u << 3) | (1u << 5) | (1u << 6)) /* v, o, up, down */
#define BS_ENDS_3      ((1u << 3) | (1u << 5) | (1u << 6))              /* o, up, down    */
#define BS_ENDS_2      ((1u << 3) | (1u << 6))                          /* o, down        */

/* One token's layers, this thread's half of every matrix, alone, a barrier
 * after the matrices in `ends`. Called by every thread of the parallel
 * region. kern and wait: the TSC cycles this thread spent in the kernels
 * and outside them (the barriers, mostly). */
static enum het_status bs_halves(const struct het_compute_params *alone, struct bs_mat (*m)[BS_MATS][BS_THREADS],
                                 int layers, int ith, unsigned ends, double *kern, double *wait)
{
    enum het_status st = HET_OK;
    uint64_t in = 0, out = 0, t = __rdtsc();
    for (int l = 0; l < layers; l++)
        for (int i = 0; i < BS_MATS; i++) {
            if (st == HET_OK) st = het_cpu_mul_mat(alone, &m[l][i][ith].d);
            const uint64_t k = __rdtsc();
            in += k - t;
            if (ends & (1u << i)) {
#pragma omp barrier
            }
            t = __rdtsc();
            out += t - k;
        }
    *kern = (double)in;
    *wait = (double)out;
    return st;
}

/* The j-th schedule (BS_SCHEDULES: the read) of round r: a shuffle of
 * them all, the same in every thread. Whatever ran right after the read of
 * 256 MiB ran ~5% slower than the same schedule elsewhere (Zen 5, two
 * threads, either placement), so no schedule may keep its place, nor the
 * one before it. */
static int bs_order(int r, int j)
{
    int order[BS_SCHEDULES + 1];
    for (int i = 0; i <= BS_SCHEDULES; i++) order[i] = i;
    uint64_t x = 0x9e3779b97f4a7c15ull * (uint64_t)(r + 1);
    for (int i = BS_SCHEDULES; i > 0; i--) {
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        const int o = (int)(x % (uint64_t)(i + 1)), v = order[i];
        order[i] = order[o];
        order[o] = v;
    }
    return order[j];
}

static int run_type(enum het_type type, int rounds, int layers, enum het_cpu_isa isa)
{
    struct bs_model *md = calloc(1, sizeof *md);
    if (!md || bs_build(md, type, isa, layers)) {
        fprintf(stderr, "bench_steps: could not set up %s\n", het_type_name(type));
        if (md) bs_release(md);
        free(md);
        return 1;
    }
    size_t ws = 0, ws1 = 0;
    for (int i = 0; i < BS_MATS; i++) {
        const size_t w = het_cpu_mul_mat_work_size(&md->full[0][i].d, BS_THREADS, false);
        const size_t w1 = het_cpu_mul_mat_work_size(&md->half[0][i][0].d, 1, false);
        ws = w > ws ? w : ws;
        ws1 = w1 > ws1 ? w1 : ws1;
    }
    const size_t rbytes = (size_t)256 << 20;
    struct bench_mem rmem = { 0 };
    void *wdata = aligned_alloc(64, bs_align(ws ? ws : 64));
    void *wdata1[BS_THREADS] = { aligned_alloc(64, bs_align(ws1 ? ws1 : 64)), aligned_alloc(64, bs_align(ws1 ? ws1 : 64)) };
    int rc = !wdata || !wdata1[0] || !wdata1[1] || !bench_alloc(&rmem, rbytes, 1);
    if (rc) {
        fprintf(stderr, "bench_steps: out of memory\n");
        goto out;
    }
    const uint8_t *rbuf = rmem.p;
    double t[BS_SCHEDULES + 1][BS_ROUNDS_MAX], start[BS_THREADS], stop[BS_THREADS];
    /* the halves' schedules: each thread's TSC cycles in kernels [0] and outside them [1] */
    double split[BS_SCHEDULES][2][BS_THREADS][BS_ROUNDS_MAX];
    const double w0 = bench_now_s();
    const uint64_t c0 = __rdtsc();
    bool late[BS_ROUNDS_MAX] = { false };
    enum het_status fail[BS_THREADS] = { HET_OK, HET_OK };
    volatile unsigned long long sink = 0;
    struct het_cpu_sync sync;
    het_cpu_sync_init(&sync);
    int got = 0;
#pragma omp parallel num_threads(BS_THREADS) reduction(+ : got)
    {
        struct het_cpu_worker w;
        const struct het_compute_params p = bench_thread_params(&w, &sync, wdata, ws, isa);
        /* the halves ask ahead with the hint the steps use: left at its zero
         * (NTA) they streamed at half the steps' rate on the Xeon VM */
        const struct het_compute_params alone = { .ith = 0, .nth = 1, .wdata = wdata1[p.ith], .wsize = ws1, .isa = isa,
                                                  .stream = p.stream };
        struct het_compute_params fixed = p; /* no worker: the static split */
        fixed.worker = NULL;
        got = p.nth == BS_THREADS;
        const size_t share = rbytes / BS_THREADS / 256 * 256;
        /* the first round warms up; then the schedules and the read in an
         * order shuffled every round (bs_order) */
        const int nw = BS_SCHEDULES + 1;
        for (int k = -nw; k < nw * rounds; k++) {
            const int what = k < 0 ? k + nw : bs_order(k / nw, k % nw);
#pragma omp barrier
            start[p.ith] = bench_now_s();
            enum het_status s = HET_OK;
            double kern = 0.0, wait = 0.0;
            switch (what) {
            case 0:  s = bs_steps(&p, md, layers); break;
            case 1:  s = bs_steps(&fixed, md, layers); break;
            case 2:  s = bs_halves(&alone, md->half, layers, p.ith, BS_ENDS_DEVICE, &kern, &wait); break;
            case 3:  s = bs_halves(&alone, md->half, layers, p.ith, 0, &kern, &wait); break;
            case 4:  s = bs_halves(&alone, md->line, layers, p.ith, BS_ENDS_DEVICE, &kern, &wait); break;
            case 5:  s = bs_halves(&alone, md->line, layers, p.ith, BS_ENDS_3, &kern, &wait); break;
            case 6:  s = bs_halves(&alone, md->line, layers, p.ith, BS_ENDS_2, &kern, &wait); break;
            case 7:  s = bs_halves(&alone, md->line, layers, p.ith, 0, &kern, &wait); break;
            default: sink += hr_read_widest(rbuf + (size_t)p.ith * share, share); break;
            }
            stop[p.ith] = bench_now_s();
            if (s != HET_OK) fail[p.ith] = s;
            if (k >= 0 && what < BS_SCHEDULES) {
                split[what][0][p.ith][k / nw] = kern;
                split[what][1][p.ith][k / nw] = wait;
            }
#pragma omp barrier
#pragma omp single
            if (k >= 0) {
                const double t0 = start[0] < start[1] ? start[0] : start[1], t1 = stop[0] > stop[1] ? stop[0] : stop[1];
                t[what][k / nw] = t1 - t0;
                /* a thread that left the barrier late (its vCPU was elsewhere) is not the memory */
                if (start[0] - start[1] > BS_LATE_S || start[1] - start[0] > BS_LATE_S) late[k / nw] = true;
            }
        }
    }
    const double tsc_us = (double)(__rdtsc() - c0) / ((bench_now_s() - w0) * 1e6); /* cycles a microsecond */
    if (got != BS_THREADS) {
        fprintf(stderr, "bench_steps: got fewer than %d threads\n", BS_THREADS);
        rc = 1;
    }
    for (int i = 0; i < BS_THREADS && !rc; i++)
        if (fail[i] != HET_OK) {
            fprintf(stderr, "bench_steps: a matmul failed: %s\n", het_status_name(fail[i]));
            rc = 1;
        }
    if (!rc) {
        /* the bytes both schedules stream: every matrix once (the halves' panels add up to the same) */
        const double bytes = (double)md->full_bytes, rd_bytes = (double)(rbytes / BS_THREADS / 256 * 256) * BS_THREADS;
        double ratio[BS_SCHEDULES][BS_ROUNDS_MAX], rate[BS_SCHEDULES + 1][BS_ROUNDS_MAX];
        int n = 0; /* rounds in which every schedule's threads started together */
        for (int i = 0; i < rounds; i++) {
            if (late[i]) continue;
            rate[BS_SCHEDULES][n] = rd_bytes / t[BS_SCHEDULES][i] / 1e9;
            for (int s = 0; s < BS_SCHEDULES; s++) {
                t[s][n] = t[s][i];
                for (int x = 0; x < 2; x++)
                    for (int th = 0; th < BS_THREADS; th++) split[s][x][th][n] = split[s][x][th][i];
                rate[s][n] = bytes / t[s][i] / 1e9;
                ratio[s][n] = rate[s][n] / rate[BS_SCHEDULES][n];
            }
            n++;
        }
        printf("%-6s %d layers of %.2f MB, %d of %d rounds\n", het_type_name(type), layers, bytes / layers / 1e6, n,
               rounds);
        if (n == 0) printf("  no round in which the threads started within %.0f us of each other\n", BS_LATE_S * 1e6);
        const char *names[BS_SCHEDULES] = { "steps",           "steps, static",     "halves, ends",
                                            "halves",          "one range, ends",   "one range, 3 ends",
                                            "one range, 2 ends", "one range" };
        for (int s = 0; s < BS_SCHEDULES && n > 0; s++) {
            const double us = bench_median(t[s], n) / layers * 1e6, r = bench_median(rate[s], n);
            const double q = bench_median(ratio[s], n);
            printf("  %-18s %7.1f us/layer  %5.1f GB/s   of the read %.2f (%.2f-%.2f)", names[s], us, r, q,
                   ratio[s][0], ratio[s][n - 1]);
            if (s > 1) { /* the halves: each thread's kernels and waits, medians over the counted rounds */
                double v[2][BS_THREADS];
                for (int x = 0; x < 2; x++)
                    for (int th = 0; th < BS_THREADS; th++) v[x][th] = bench_median(split[s][x][th], n) / tsc_us / layers;
                printf("   kernels %.1f / %.1f us, waits %.1f / %.1f", v[0][0], v[0][1], v[1][0], v[1][1]);
            }
            printf("\n");
        }
        if (n > 0) {
            const double rr = bench_median(rate[BS_SCHEDULES], n);
            printf("  %-18s %7.1f us/layer  %5.1f GB/s   (the layer's bytes at the read's rate: the bound)\n", "read",
                   bytes / layers / (rr * 1e9) * 1e6, rr);
        }
    }
out:
    bs_release(md);
    free(md);
    bench_free(&rmem);
    free(wdata);
    free(wdata1[0]);
    free(wdata1[1]);
    return rc;
}

int main(int argc, char **argv)
{
    int rounds = 15, layers = 28;
    const char *types_arg = "q4_0";
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "-T")) types_arg = argv[i + 1];
        else if (!strcmp(argv[i], "-r")) rounds = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "-l")) layers = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "-t")) {
            if (atoi(argv[i + 1]) != BS_THREADS) {
                fprintf(stderr, "bench_steps: -t: only %d threads (the other schedules halve each matrix)\n",
                        BS_THREADS);
                return 2;
            }
        } else {
            fprintf(stderr, "usage: %s [-t 2] [-T types] [-r rounds] [-l layers]\n", argv[0]);
            return 2;
        }
    }
    if (rounds < 1 || rounds > BS_ROUNDS_MAX || layers < 1 || layers > BS_LAYERS_MAX) {
        fprintf(stderr, "bench_steps: 1 <= rounds <= %d, 1 <= layers <= %d\n", BS_ROUNDS_MAX, BS_LAYERS_MAX);
        return 2;
    }
    struct het_cpu_features f;
    het_cpu_features_detect(&f);
    const enum het_cpu_isa isa = het_cpu_isa_select(&f);
    if (!f.avx2) {
        fprintf(stderr, "bench_steps: needs AVX2\n");
        return 2;
    }
    printf("threads %d, isa %s, %d rounds (the eight schedules and the read in turn, one process); medians, ratio "
           "min-max\n",
           BS_THREADS, het_cpu_isa_name(isa), rounds);
    char buf[256];
    snprintf(buf, sizeof buf, "%s", types_arg);
    for (char *tp = strtok(buf, ","); tp; tp = strtok(NULL, ",")) {
        const enum het_type type = het_type_from_name(tp);
        if (type == HET_TYPE_COUNT) {
            fprintf(stderr, "bench_steps: unknown type %s\n", tp);
            return 2;
        }
        if (run_type(type, rounds, layers, isa)) return 1;
    }
    return 0;
}
