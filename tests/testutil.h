/*
 * testutil.h — the small harness every het test uses.
 *
 * Tests are plain programs: they exit 0 on success, 1 on failure and 77 when
 * a fixture or device is missing (ctest reports that as skipped, and the
 * message says why). CHECK keeps going after a failure so one run shows
 * every broken case; the summary line is "N passed, N failed".
 */
#ifndef HET_TESTUTIL_H
#define HET_TESTUTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct het_test_state { int passed, failed; };
extern struct het_test_state het_test;

#define CHECK(cond, ...) do {                                                   \
        if (cond) { het_test.passed++; }                                        \
        else { het_test.failed++;                                               \
               fprintf(stderr, "%s:%d: CHECK(%s) failed: ", __FILE__, __LINE__, #cond); \
               fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); }             \
    } while (0)

/* Print "N passed, N failed" and return the process exit code. */
int het_test_finish(void);
/* Print the reason and exit 77 (skipped). */
void het_test_skip(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));

/* Path of a fixture under shared/ (HET_SHARED_DIR, default ../shared next to
 * the source tree). Returns a static buffer; NULL-safe use only per call. */
const char *het_test_shared(const char *rel);
/* Same for a path inside the source tree (HET_SOURCE_DIR). */
const char *het_test_source(const char *rel);
bool het_test_file_exists(const char *path);

/* Deterministic random numbers (xorshift64*), seeded per test. */
void     het_test_seed(uint64_t seed);
uint64_t het_test_rand_u64(void);
float    het_test_rand_uniform(float lo, float hi);
float    het_test_rand_normal(void);
void     het_test_fill_normal(float *x, size_t n, float scale);

/* Milliseconds on CLOCK_MONOTONIC, for printing (tests never assert timings). */
double het_test_now_ms(void);

/* normalized mean squared error: sum (a-b)^2 / sum b^2 (b the reference) */
double het_test_nmse(const float *a, const float *b, size_t n);
double het_test_max_abs_diff(const float *a, const float *b, size_t n);

/* A 28-layer Qwen3-0.6B-shaped graph of n_tok tokens (Q4_0 weights flagged
 * WEIGHT, F16 KV cache as state), its matmuls named as the model's
 * (attn_q.L ... ffn_down.L, logits), for planner tests; never run. */
struct het_graph *het_test_qwen3_graph(int n_tok);

#endif /* HET_TESTUTIL_H */
