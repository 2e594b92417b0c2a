/*
 * clock.h — the monotonic clock every timing inside libhet reads (internal).
 */
#ifndef HET_SCHED_CLOCK_H
#define HET_SCHED_CLOCK_H

#include <time.h>

/* Microseconds on CLOCK_MONOTONIC (arbitrary origin; differences only). */
static inline double het_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

#endif /* HET_SCHED_CLOCK_H */
