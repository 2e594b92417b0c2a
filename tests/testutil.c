/*
 * testutil.c — implementation of the shared test harness (see testutil.h).
 */
#include "testutil.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

struct het_test_state het_test;

int het_test_finish(void)
{
    printf("%d passed, %d failed\n", het_test.passed, het_test.failed);
    return het_test.failed ? 1 : 0;
}

void het_test_skip(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("SKIP: ");
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    exit(77);
}

static const char *join(const char *env, const char *dflt, const char *rel)
{
    static char buf[4096];
    const char *base = getenv(env);
    snprintf(buf, sizeof buf, "%s/%s", base && *base ? base : dflt, rel);
    return buf;
}

const char *het_test_shared(const char *rel) { return join("HET_SHARED_DIR", "../shared", rel); }
const char *het_test_source(const char *rel) { return join("HET_SOURCE_DIR", ".", rel); }

bool het_test_file_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

void het_test_seed(uint64_t seed) { rng_state = seed ? seed : 0x9E3779B97F4A7C15ull; }

uint64_t het_test_rand_u64(void)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545F4914F6CDD1Dull;
}

float het_test_rand_uniform(float lo, float hi)
{
    return lo + (hi - lo) * (float)((het_test_rand_u64() >> 40) / (double)(1ull << 24));
}

float het_test_rand_normal(void)
{
    double u1 = ((het_test_rand_u64() >> 11) + 1.0) / 9007199254740993.0;
    double u2 = (het_test_rand_u64() >> 11) / 9007199254740992.0;
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

void het_test_fill_normal(float *x, size_t n, float scale)
{
    for (size_t i = 0; i < n; i++) x[i] = scale * het_test_rand_normal();
}

double het_test_nmse(const float *a, const float *b, size_t n)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)a[i] - b[i];
        num += d * d;
        den += (double)b[i] * b[i];
    }
    return den > 0 ? num / den : num;
}

double het_test_max_abs_diff(const float *a, const float *b, size_t n)
{
    double m = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        if (d > m || d != d) m = d;
    }
    return m;
}

double het_test_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}
