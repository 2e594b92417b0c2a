/*
 * bench_util.h — what the CPU benchmarks that time against the memory share
 * (bench_stream.c, bench_attn.c, bench_matmul.c): a monotonic clock, the
 * median of a series, anonymous memory on transparent huge pages as the
 * CPU device keeps its weight panels, and each OpenMP thread's compute
 * parameters as the CPU device hands them to kernels.
 */
#ifndef HET_BENCH_UTIL_H
#define HET_BENCH_UTIL_H

#include <omp.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "devices/cpu/cpu_ops.h"
#include "devices/cpu/cpu_stream.h"

static inline double bench_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static inline int bench_cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The median of v[0..n), n >= 1 (v is sorted in place). */
static inline double bench_median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Anonymous memory, 2 MiB aligned, on transparent huge pages when the kernel
 * gives them (as the weight panels), every byte written with `fill`. */
struct bench_mem {
    void    *map;
    size_t   len;
    uint8_t *p;
};

static inline bool bench_alloc(struct bench_mem *m, size_t n, int fill)
{
    const size_t huge = (size_t)2 << 20;
    m->len = n + huge;
    m->map = mmap(NULL, m->len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m->map == MAP_FAILED) return false;
    m->p = (uint8_t *)(((uintptr_t)m->map + huge - 1) & ~(uintptr_t)(huge - 1));
    (void)madvise(m->p, n, MADV_HUGEPAGE);
    memset(m->p, fill, n);
    return true;
}

static inline void bench_free(struct bench_mem *m)
{
    if (m->map && m->map != MAP_FAILED) munmap(m->map, m->len);
}

/* The hint decode's runs of panels ask ahead with here: HET_CPU_STREAM's
 * (nta, t0 or t1) when it fixes one; otherwise NTA. A benchmark has no
 * race to choose by (the device races the hints on its own splits:
 * devices/cpu/cpu_stream.c), so what it measured says which it used. An
 * unknown value ends the program with the device's message. */
static inline enum het_cpu_stream bench_stream_hint(void)
{
    struct het_cpu_stream_choice c;
    het_error err = { 0 };
    if (het_cpu_stream_init(&c, getenv("HET_CPU_STREAM"), &err) != HET_OK) {
        fprintf(stderr, "%s\n", err.msg);
        exit(2);
    }
    return c.mode == HET_CPU_STREAM_FIXED ? c.hint : HET_CPU_STREAM_NTA;
}

/* Inside a parallel region: this thread's parameters, its worker w (in the
 * caller's frame) joined to sync, as the CPU device runs a node (asking
 * ahead with bench_stream_hint). */
static inline struct het_compute_params bench_thread_params(struct het_cpu_worker *w, struct het_cpu_sync *sync,
                                                            void *wdata, size_t ws, enum het_cpu_isa isa)
{
    het_cpu_worker_init(w, sync);
    return (struct het_compute_params){
        .ith = omp_get_thread_num(), .nth = omp_get_num_threads(),
        .wdata = wdata, .wsize = ws, .isa = isa, .worker = w, .stream = bench_stream_hint(),
    };
}

#endif /* HET_BENCH_UTIL_H */
