/*
 * membw.c — a quick measurement of the machine's read bandwidth, so that
 * decode speed is printed beside a bound measured here and not a guess.
 */
#include "tools/membw.h"

#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

double hr_measure_read_bandwidth(int n_threads)
{
    const size_t n = (size_t)256 << 20 >> 3; /* 256 MiB of uint64 */
    uint64_t *buf = aligned_alloc(4096, n * sizeof *buf);
    if (!buf) return 0;
#pragma omp parallel for num_threads(n_threads) schedule(static)
    for (size_t i = 0; i < n; i++) buf[i] = i;
    double best = 0;
    volatile uint64_t sink = 0;
    for (int rep = 0; rep < 5; rep++) {
        double t0 = now_s();
        uint64_t total = 0;
#pragma omp parallel for num_threads(n_threads) schedule(static) reduction(+ : total)
        for (size_t i = 0; i < n; i += 8) {
            total += buf[i] + buf[i + 1] + buf[i + 2] + buf[i + 3] + buf[i + 4] + buf[i + 5] + buf[i + 6] + buf[i + 7];
        }
        double dt = now_s() - t0;
        sink += total;
        double gbs = n * sizeof *buf / dt / 1e9;
        if (gbs > best) best = gbs;
    }
    (void)sink;
    free(buf);
    return best;
}
