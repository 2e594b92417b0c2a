/*
 * membw.c — the machine's read bandwidth, measured the way decode reads its
 * weights, so that decode speed is printed beside a bound measured here and
 * not a guess: n_threads threads (the benchmark's) each stream their share
 * of a 256 MiB buffer (far larger than any last-level cache) once per
 * repetition, with the widest vector loads the CPU has (the kernels use
 * them; on Zen 5, 16-byte loads reach about 15% less than 64-byte ones),
 * four independent sums so the adds never limit the loads. The best of 5
 * repetitions, wall clock, is the bound. The buffer asks for transparent
 * huge pages, as the CPU's weight panels do (devices/cpu/panel_arena.c):
 * in this project's VM 4 KiB pages read about 30% slower, and a bound
 * measured through them would be one the panels exceed.
 */
#include "tools/membw.h"

#include <omp.h>
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

struct hr_membw {
    void     *map;
    uint8_t  *buf;
    size_t    map_bytes, chunk;
    int       n_threads;
    hr_reader read;
};

struct hr_membw *hr_membw_open(int n_threads)
{
    if (n_threads < 1) n_threads = 1;
    const size_t bytes = (size_t)256 << 20;
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
    /* each thread writes the pages it will read (first touch: its node) */
#pragma omp parallel num_threads(n_threads)
    {
        const int t = omp_get_thread_num(), nt = omp_get_num_threads();
        if (nt == n_threads) memset(m->buf + (size_t)t * chunk, t + 1, chunk);
    }
    return m;
}

double hr_membw_measure(struct hr_membw *m)
{
    if (!m) return 0;
    const int n_threads = m->n_threads;
    const size_t chunk = m->chunk;
    double best = 0;
    volatile uint64_t sink = 0;
    for (int rep = 0; rep < 5; rep++) {
        uint64_t total = 0;
        int got = 0;
        const double t0 = now_s();
#pragma omp parallel num_threads(n_threads) reduction(+ : total, got)
        {
            const int t = omp_get_thread_num();
            got = omp_get_num_threads() == n_threads;
            if (got) total = m->read(m->buf + (size_t)t * chunk, chunk);
        }
        const double dt = now_s() - t0;
        sink += total;
        /* a region that did not get every thread measured less than it says */
        if (got != n_threads) break;
        const double gbs = (double)chunk * n_threads / dt / 1e9;
        if (gbs > best) best = gbs;
    }
    (void)sink;
    return best;
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
