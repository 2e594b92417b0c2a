/*
 * testutil.c — implementation of the shared test harness (see testutil.h).
 */
#include "testutil.h"

#include "het/graph.h"

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

/* ---------------------------------------------------------------------------
 * a Qwen3-0.6B-shaped graph (planner tests)                                 */

static struct het_tensor *named_mm(het_graph *g, int64_t k, int64_t n, struct het_tensor *x, const char *fmt,
                                   int layer)
{
    const int64_t ne[2] = { k, n };
    struct het_tensor *w = het_new_tensor(g, HET_TYPE_Q4_0, 2, ne);
    w->flags |= HET_TENSOR_FLAG_WEIGHT;
    struct het_tensor *t = het_mul_mat(g, w, x);
    het_tensor_set_name(t, fmt, layer);
    return t;
}

het_graph *het_test_qwen3_graph(int n_tok)
{
    const int E = 1024, H = 16, KV = 8, D = 128, FF = 3072, L = 28, CTX = 512;
    het_graph *g = het_graph_init(64 + 64 * L);
    const int64_t cne[4] = { D, KV, CTX, L };
    struct het_tensor *ck = het_new_tensor(g, HET_TYPE_F16, 4, cne), *cv = het_new_tensor(g, HET_TYPE_F16, 4, cne);
    ck->flags = cv->flags = HET_TENSOR_FLAG_STATE;
    struct het_tensor *tok = het_new_tensor_1d(g, HET_TYPE_I32, n_tok), *pos = het_new_tensor_1d(g, HET_TYPE_I32, n_tok);
    struct het_tensor *gain = het_new_tensor_1d(g, HET_TYPE_F32, E), *hg = het_new_tensor_1d(g, HET_TYPE_F32, D);
    const int64_t ene[2] = { E, 151936 };
    struct het_tensor *x = het_get_rows(g, het_new_tensor(g, HET_TYPE_Q4_0, 2, ene), tok);
    for (int l = 0; l < L; l++) {
        struct het_tensor *h = het_mul(g, het_rms_norm(g, x, 1e-6f), gain);
        struct het_tensor *q = het_reshape_3d(g, named_mm(g, E, H * D, h, "attn_q.%d", l), D, H, n_tok);
        struct het_tensor *k = het_reshape_3d(g, named_mm(g, E, KV * D, h, "attn_k.%d", l), D, KV, n_tok);
        struct het_tensor *v = het_reshape_3d(g, named_mm(g, E, KV * D, h, "attn_v.%d", l), D, KV, n_tok);
        q = het_rope(g, het_mul(g, het_rms_norm(g, q, 1e-6f), hg), pos, D, HET_ROPE_NEOX, 1e6f, 1);
        k = het_rope(g, het_mul(g, het_rms_norm(g, k, 1e-6f), hg), pos, D, HET_ROPE_NEOX, 1e6f, 1);
        het_cpy(g, k, het_view_3d(g, ck, D, KV, n_tok, ck->nb[1], ck->nb[2], (size_t)l * ck->nb[3]));
        het_cpy(g, v, het_view_3d(g, cv, D, KV, n_tok, cv->nb[1], cv->nb[2], (size_t)l * cv->nb[3]));
        struct het_tensor *o = het_attn(g, q, het_view_3d(g, ck, D, KV, n_tok, ck->nb[1], ck->nb[2], (size_t)l * ck->nb[3]),
                                        het_view_3d(g, cv, D, KV, n_tok, cv->nb[1], cv->nb[2], (size_t)l * cv->nb[3]),
                                        0.088f, 0);
        x = het_add(g, named_mm(g, H * D, E, het_reshape_2d(g, o, H * D, n_tok), "attn_output.%d", l), x);
        h = het_mul(g, het_rms_norm(g, x, 1e-6f), gain);
        struct het_tensor *ff = het_swiglu(g, named_mm(g, E, FF, h, "ffn_gate.%d", l), named_mm(g, E, FF, h, "ffn_up.%d", l));
        x = het_add(g, named_mm(g, FF, E, ff, "ffn_down.%d", l), x);
    }
    struct het_tensor *logits = named_mm(g, E, 151936, het_mul(g, het_rms_norm(g, x, 1e-6f), gain), "l%d", 0);
    het_tensor_set_name(logits, "logits");
    return g;
}
