/*
 * membw.c — the machine's read bandwidth, measured the way decode reads its
 * weights, so that decode speed is printed beside a bound measured here and
 * not a guess: n_threads threads (the benchmark's) each stream their share
 * of a buffer larger than the last-level cache (256 MiB, or twice the
 * largest cache sysfs reports where that is more: the Xeon VM reports one
 * 480 MiB L3, so its buffer is 960 MiB) once per repetition, with the
 * widest vector loads the CPU has (the kernels use them; on Zen 4, 16-byte
 * loads reach about 15% less than 64-byte ones),
 * four independent sums so the adds never limit the loads. The best of 5
 * repetitions, wall clock, is the bound. The buffer asks for transparent
 * huge pages, as the CPU's weight panels do (devices/cpu/panel_arena.c):
 * in this project's VM 4 KiB pages read about 30% slower, and a bound
 * measured through them would be one the panels exceed.
 *
 * The readers are threads of their own, started for each read and timed
 * from a barrier they all pass, not an OpenMP team: a team's threads spin
 * for milliseconds after each region, and beside a benchmark that reads
 * memory between decode tokens (cmd_bench.c) they took the cores from the
 * CPU device's threads at the next token and prefill (`bench -r 3`: pp8
 * 253 tok/s after such reads with spinning teams, 354 with sleeping ones).
 */
#include "tools/membw.h"

#include "het/device.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

typedef uint64_t hr_v2 __attribute__((vector_size(16)));
typedef uint64_t hr_v4 __attribute__((vector_size(32)));
typedef uint64_t hr_v8 __attribute__((vector_size(64)));

/* Sum of bytes/sizeof(V) vectors at p (bytes a multiple of 4 vectors). */
#define HR_READER(name, V, attr)                                                    \
    attr __attribute__((noinline)) static uint64_t name(const void *p, size_t bytes) \
    {                                                                               \
        const V *v = p;                                                             \
        V s0 = {0}, s1 = {0}, s2 = {0}, s3 = {0};                                   \
        for (size_t i = 0, n = bytes / sizeof(V); i < n; i += 4) {                  \
            s0 += v[i];                                                             \
            s1 += v[i + 1];                                                         \
            s2 += v[i + 2];                                                         \
            s3 += v[i + 3];                                                         \
        }                                                                           \
        s0 += s1 + s2 + s3;                                                         \
        uint64_t t = 0;                                                             \
        for (size_t k = 0; k < sizeof(V) / 8; k++) t += s0[k];                      \
        return t;                                                                   \
    }

HR_READER(hr_read16, hr_v2, )
#if defined(__x86_64__)
HR_READER(hr_read32, hr_v4, __attribute__((target("avx2"))))
HR_READER(hr_read64, hr_v8, __attribute__((target("avx512f"))))
#endif

typedef uint64_t (*hr_reader)(const void *, size_t);

static hr_reader hr_widest_reader(void)
{
#if defined(__x86_64__)
    if (__builtin_cpu_supports("avx512f")) return hr_read64;
    if (__builtin_cpu_supports("avx2")) return hr_read32;
#endif
    return hr_read16;
}

uint64_t hr_read_widest(const void *p, size_t bytes) { return hr_widest_reader()(p, bytes); }

struct hr_membw {
    void     *map;
    uint8_t  *buf;
    size_t    map_bytes, chunk;
    size_t    at; /* hr_membw_pass: where in each thread's chunk the next pass starts */
    int       n_threads;
    hr_reader read;
};

/* One read by every thread: thread t reads `each` bytes of its chunk from
 * offset `at` (or, with fill, writes them first: first touch on its node). */
struct hr_reading {
    const struct hr_membw *m;
    size_t                 at, each;
    bool                   fill;
    pthread_barrier_t      start;
    double                 t0, t1[64];
    uint64_t               sum[64];
};
struct hr_reader_arg {
    struct hr_reading *r;
    int                t;
};

static void *hr_reader_main(void *p)
{
    const struct hr_reader_arg *a = p;
    struct hr_reading *r = a->r;
    uint8_t *at = r->m->buf + (size_t)a->t * r->m->chunk + r->at;
    if (r->fill) memset(at, a->t + 1, r->each);
    pthread_barrier_wait(&r->start);
    if (a->t == 0) r->t0 = now_s();
    r->sum[a->t] = r->m->read(at, r->each);
    r->t1[a->t] = now_s();
    return NULL;
}

/* Seconds of one read of `each` bytes per thread from `at`: from the
 * barrier to the last thread's end; 0 if a thread could not start. */
static double hr_read_all(const struct hr_membw *m, size_t at, size_t each, bool fill)
{
    struct hr_reading r = { .m = m, .at = at, .each = each, .fill = fill };
    struct hr_reader_arg args[64];
    pthread_t th[64];
    const int n = m->n_threads;
    if (pthread_barrier_init(&r.start, NULL, (unsigned)n) != 0) return 0;
    int started = 1;
    for (int t = 1; t < n; t++) {
        args[t] = (struct hr_reader_arg){ &r, t };
        if (pthread_create(&th[t], NULL, hr_reader_main, &args[t]) != 0) break;
        started++;
    }
    double dt = 0;
    if (started == n) {
        args[0] = (struct hr_reader_arg){ &r, 0 };
        hr_reader_main(&args[0]);
    }
    for (int t = 1; t < started; t++) pthread_join(th[t], NULL);
    pthread_barrier_destroy(&r.start);
    if (started == n) {
        double end = r.t1[0];
        volatile uint64_t sink = 0;
        for (int t = 0; t < n; t++) {
            if (r.t1[t] > end) end = r.t1[t];
            sink += r.sum[t];
        }
        (void)sink;
        dt = end - r.t0;
    }
    return dt > 0 ? dt : 0;
}

/* The buffer's bytes: 256 MiB, or twice the largest cache of cpu0 that
 * sysfs reports (het_cpu_largest_cache_bytes), in 2 MiB pages, at most
 * 4 GiB. Twice: a victim L3 keeps part of a buffer that only just exceeds
 * it. (In a VM the reported L3 is the host's, shared with its other
 * guests: the Xeon VM read 256 MiB at 29-30 GB/s and 1-2 GiB at 28-33, so
 * this is for honesty, not speed.) */
static size_t hr_buffer_bytes(void)
{
    const size_t huge = (size_t)2 << 20, least = (size_t)256 << 20, most = (size_t)4 << 30;
    const size_t bytes = (2 * het_cpu_largest_cache_bytes() + huge - 1) / huge * huge;
    return bytes < least ? least : bytes > most ? most : bytes;
}

struct hr_membw *hr_membw_open(int n_threads)
{
    if (n_threads < 1) n_threads = 1;
    if (n_threads > 64) n_threads = 64;
    const size_t bytes = hr_buffer_bytes();
    const size_t chunk = bytes / (size_t)n_threads / 4096 * 4096; /* a multiple of 4 vectors */
    const size_t huge = (size_t)2 << 20;
    struct hr_membw *m = calloc(1, sizeof *m);
    if (!m || chunk == 0) {
        free(m);
        return NULL;
    }
    m->map = mmap(NULL, bytes + huge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m->map == MAP_FAILED) {
        free(m);
        return NULL;
    }
    m->map_bytes = bytes + huge;
    m->chunk = chunk;
    m->n_threads = n_threads;
    m->buf = (uint8_t *)(((uintptr_t)m->map + huge - 1) & ~(uintptr_t)(huge - 1));
    (void)madvise(m->buf, bytes, MADV_HUGEPAGE); /* best effort, as for the panels */
    m->read = hr_widest_reader();
    if (hr_read_all(m, 0, chunk, true) <= 0) { /* each thread writes the pages it reads */
        hr_membw_close(m);
        return NULL;
    }
    return m;
}

double hr_membw_measure(struct hr_membw *m)
{
    if (!m) return 0;
    double best = 0;
    for (int rep = 0; rep < 5; rep++) {
        const double dt = hr_read_all(m, 0, m->chunk, false);
        if (dt <= 0) break;
        const double gbs = (double)m->chunk * m->n_threads / dt / 1e9;
        if (gbs > best) best = gbs;
    }
    return best;
}

double hr_membw_pass(struct hr_membw *m, size_t bytes)
{
    if (!m) return 0;
    size_t each = bytes / (size_t)m->n_threads / 4096 * 4096;
    if (each == 0 || each > m->chunk) each = m->chunk;
    if (m->at + each > m->chunk) m->at = 0;
    const double dt = hr_read_all(m, m->at, each, false);
    m->at += each;
    return dt > 0 ? (double)each * m->n_threads / dt / 1e9 : 0;
}

void hr_membw_close(struct hr_membw *m)
{
    if (!m) return;
    munmap(m->map, m->map_bytes);
    free(m);
}

double hr_measure_read_bandwidth(int n_threads)
{
    struct hr_membw *m = hr_membw_open(n_threads);
    const double bw = hr_membw_measure(m);
    hr_membw_close(m);
    return bw;
}
