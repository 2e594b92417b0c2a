/*
 * test_vulkan_ops.c — every Vulkan kernel against a plain scalar reference.
 *
 * Tensors are built by hand in a host arena registered with the device
 * (nothing here depends on the graph builders or the CPU backend). Inputs
 * are random, sizes odd, and most operands are non-contiguous views
 * (permuted, transposed, padded rows, views whose data pointer is NULL so
 * the device must follow view_src). Quantised weights are random blocks
 * whose scales are set to sane fp16 values; the reference dequantises them
 * with its own GGUF decoders.
 *
 * Each op suite runs on four device configurations:
 *   A  defaults (host-pointer import, subgroup reductions when reported; on
 *      a CPU-type device such as lavapipe the row-per-invocation matmul and
 *      attention kernels)
 *   B  mirrored memory (explicit copies) + shared-memory reductions + 64 KiB
 *      descriptor ranges (forces MUL_MAT/GET_ROWS windows) + no GEMM kernel
 *      (M > 8 as GEMV column windows, the small-device path) + no row kernels
 *   C  import in 256 KiB overlapping chunks + 64 KiB descriptor ranges
 *   D  defaults without the row kernels (the GPU kernels, with subgroups)
 * plus, on A, a real-size matrix larger than maxStorageBufferRange.
 *
 * Tolerances (per element: |got - ref| <= atol + rtol*|ref|, or NMSE):
 *   add/mul/div/scale/swiglu/silu/sigmoid/cont/cpy to F32 : atol 1e-6, rtol 1e-5
 *   cpy/cont to F16                           : rtol 1e-3 (one F16 ulp)
 *   rms_norm                                  : atol 1e-5, rtol 1e-4
 *   softmax (a fully masked row gives zeros)  : atol 1e-6, rtol 1e-4
 *   rope (|x| < ~5, pos < 2048)               : atol 2e-3 (float theta)
 *   get_rows (all types)                      : atol 1e-6, rtol 1e-6
 *   mul_mat (all weight types, GEMV and GEMM) : NMSE <= 1e-9 vs the
 *                                               dequantised weights in double
 *   attn (F16 and F32 K/V)                    : NMSE <= 1e-9
 *   mul_mat_id (all weight types, strided ids, inputs and outputs): NMSE <= 1e-9
 *   mul_mat_id prefill sizes, GEMV and grouped GEMM (T 1..130, uneven
 *     routing, out-of-range ids -> NaN): NMSE <= 1e-9 over the other outputs
 *   top_k (ties, -0/+0, NaN, -inf; strided in and out)           : exact indices
 *   sum_rows (float vs the reference's double)  : atol 1e-6 * n, rtol 1e-5
 *   moe_sum                                     : atol 1e-5, rtol 1e-5
 *   a MoE layer in one split (top_k .. moe_sum) : NMSE <= 1e-9
 * The routing tests also check that their strided case reads differently
 * from the same bytes taken as dense: a kernel ignoring a stride fails them.
 * Exit 77 only when no Vulkan device exists at all.
 */
#include "testutil.h"

#include "het/vulkan.h"
#include "devices/vulkan/vk_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ------------------------------------------------------------------------ */
/* fp16 (own conversions: the reference must not share code with het)      */

static float h2f(uint16_t h)
{
    uint32_t s = (uint32_t)(h >> 15), e = (h >> 10) & 31u, m = h & 1023u;
    float v;
    if (e == 0) v = ldexpf((float)m, -24);
    else if (e == 31) v = m ? NAN : INFINITY;
    else v = ldexpf((float)(m | 1024u), (int)e - 25);
    return s ? -v : v;
}

static uint16_t f2h(float f)
{
    /* round to nearest even through the exact double value */
    uint16_t sign = signbit(f) ? 0x8000 : 0;
    double a = fabs((double)f);
    if (a >= 65520.0) return sign | 0x7C00;
    if (a < ldexp(1.0, -14)) { /* subnormal: units of 2^-24 */
        double q = a * 16777216.0;
        return sign | (uint16_t)nearbyint(q);
    }
    int e;
    double fr = frexp(a, &e); /* a = fr * 2^e, fr in [0.5,1) */
    double mant = nearbyint(fr * 2048.0); /* 11 bits */
    if (mant >= 2048.0) { mant /= 2; e++; }
    return sign | (uint16_t)(((e + 14) << 10) | ((uint32_t)mant - 1024u));
}

/* ------------------------------------------------------------------------ */
/* GGUF block decoders (reference)                                          */

static size_t type_row_bytes(enum het_type t, int64_t n)
{
    switch (t) {
    case HET_TYPE_F32:  return (size_t)n * 4;
    case HET_TYPE_F16:  return (size_t)n * 2;
    case HET_TYPE_I32:  return (size_t)n * 4;
    case HET_TYPE_Q4_0: return (size_t)n / 32 * 18;
    case HET_TYPE_Q8_0: return (size_t)n / 32 * 34;
    case HET_TYPE_Q4_K: return (size_t)n / 256 * 144;
    case HET_TYPE_Q6_K: return (size_t)n / 256 * 210;
    default:            return 0;
    }
}

static size_t type_elem_bytes(enum het_type t) { return t == HET_TYPE_F16 ? 2 : 4; }
static bool is_quant(enum het_type t) { return t != HET_TYPE_F32 && t != HET_TYPE_F16 && t != HET_TYPE_I32; }
static int64_t blck_of(enum het_type t)
{
    return t == HET_TYPE_Q4_K || t == HET_TYPE_Q6_K ? 256 : is_quant(t) ? 32 : 1;
}
static uint16_t rd16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }

static void k4_scale_min(int j, const uint8_t *q, int *sc, int *m)
{
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
        *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

static void ref_dequant(enum het_type t, const uint8_t *x, float *y, int64_t n)
{
    if (t == HET_TYPE_Q4_0) {
        for (int64_t b = 0; b < n / 32; b++, x += 18, y += 32) {
            float d = h2f(rd16(x));
            for (int j = 0; j < 16; j++) {
                y[j] = (float)((x[2 + j] & 0xF) - 8) * d;
                y[j + 16] = (float)((x[2 + j] >> 4) - 8) * d;
            }
        }
    } else if (t == HET_TYPE_Q8_0) {
        for (int64_t b = 0; b < n / 32; b++, x += 34, y += 32) {
            float d = h2f(rd16(x));
            for (int j = 0; j < 32; j++) y[j] = (float)(int8_t)x[2 + j] * d;
        }
    } else if (t == HET_TYPE_Q4_K) {
        for (int64_t b = 0; b < n / 256; b++, x += 144) {
            float d = h2f(rd16(x)), dmin = h2f(rd16(x + 2));
            const uint8_t *sc = x + 4, *q = x + 16;
            for (int j = 0, is = 0; j < 256; j += 64, is += 2, q += 32) {
                int s1, m1, s2, m2;
                k4_scale_min(is, sc, &s1, &m1);
                k4_scale_min(is + 1, sc, &s2, &m2);
                for (int l = 0; l < 32; l++) *y++ = d * (float)s1 * (float)(q[l] & 0xF) - dmin * (float)m1;
                for (int l = 0; l < 32; l++) *y++ = d * (float)s2 * (float)(q[l] >> 4) - dmin * (float)m2;
            }
        }
    } else if (t == HET_TYPE_Q6_K) {
        for (int64_t b = 0; b < n / 256; b++, x += 210) {
            float d = h2f(rd16(x + 208));
            const uint8_t *ql = x, *qh = x + 128;
            const int8_t *sc = (const int8_t *)(x + 192);
            for (int h = 0; h < 2; h++, y += 128, ql += 64, qh += 32, sc += 8) {
                for (int l = 0; l < 32; l++) {
                    int is = l / 16;
                    int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
                    int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
                    int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
                    int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
                    y[l] = d * (float)sc[is] * (float)q1;
                    y[l + 32] = d * (float)sc[is + 2] * (float)q2;
                    y[l + 64] = d * (float)sc[is + 4] * (float)q3;
                    y[l + 96] = d * (float)sc[is + 6] * (float)q4;
                }
            }
        }
    }
}

/* Random blocks with every fp16 scale set to a small finite value. */
static void rand_blocks(enum het_type t, uint8_t *x, int64_t n)
{
    size_t bytes = type_row_bytes(t, n);
    for (size_t i = 0; i < bytes; i++) x[i] = (uint8_t)(het_test_rand_u64() >> 56);
    size_t bs = t == HET_TYPE_Q4_0 ? 18 : t == HET_TYPE_Q8_0 ? 34 : t == HET_TYPE_Q4_K ? 144 : 210;
    for (size_t b = 0; b < bytes; b += bs) {
        uint16_t d = f2h(het_test_rand_uniform(0.002f, 0.02f) * (het_test_rand_u64() & 1 ? 1.f : -1.f));
        uint16_t m = f2h(het_test_rand_uniform(0.001f, 0.01f));
        size_t at = t == HET_TYPE_Q6_K ? 208 : 0;
        x[b + at] = (uint8_t)d;
        x[b + at + 1] = (uint8_t)(d >> 8);
        if (t == HET_TYPE_Q4_K) {
            x[b + 2] = (uint8_t)m;
            x[b + 3] = (uint8_t)(m >> 8);
        }
    }
}

/* ------------------------------------------------------------------------ */
/* hand-built tensors in a registered arena                                 */

#define MAX_T 96

struct env {
    het_device       *dev;
    const char       *cfg;
    uint64_t          max_bind; /* the configuration's cap on one descriptor (0: device limit) */
    uint8_t          *arena;
    size_t            cap, used;
    struct het_tensor t[MAX_T];
    int               n;
};

static void env_reset(struct env *e)
{
    e->used = 0;
    e->n = 0;
}

static uint8_t *arena_alloc(struct env *e, size_t bytes)
{
    size_t at = (e->used + 255) & ~(size_t)255;
    if (at + bytes > e->cap || e->n >= MAX_T) {
        fprintf(stderr, "test arena exhausted (%zu + %zu)\n", at, bytes);
        exit(1);
    }
    e->used = at + bytes;
    return e->arena + at;
}

static struct het_tensor *t_slot(struct env *e)
{
    struct het_tensor *t = &e->t[e->n++];
    memset(t, 0, sizeof *t);
    t->id = -1;
    return t;
}

/* Dense tensor, rows padded by pad bytes (nb1 = row + pad). */
static struct het_tensor *t_new_pad(struct env *e, enum het_type type, int64_t ne0, int64_t ne1, int64_t ne2,
                                    int64_t ne3, size_t pad)
{
    struct het_tensor *t = t_slot(e);
    t->type = type;
    int64_t ne[4] = { ne0, ne1, ne2, ne3 };
    memcpy(t->ne, ne, sizeof ne);
    t->nb[0] = is_quant(type) ? type_row_bytes(type, blck_of(type)) : type_elem_bytes(type);
    t->nb[1] = type_row_bytes(type, ne0) + pad;
    t->nb[2] = t->nb[1] * (size_t)ne1;
    t->nb[3] = t->nb[2] * (size_t)ne2;
    t->data = arena_alloc(e, t->nb[3] * (size_t)ne3);
    snprintf(t->name, sizeof t->name, "t%d", e->n - 1);
    return t;
}

static struct het_tensor *t_new(struct env *e, enum het_type type, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3)
{
    return t_new_pad(e, type, ne0, ne1, ne2, ne3, 0);
}

/* A view; with null_data the device has to follow view_src. */
static struct het_tensor *t_view(struct env *e, struct het_tensor *src, const int64_t ne[4], const size_t nb[4],
                                 size_t offs, bool null_data)
{
    struct het_tensor *t = t_slot(e);
    t->type = src->type;
    memcpy(t->ne, ne, sizeof t->ne);
    memcpy(t->nb, nb, sizeof t->nb);
    t->op = HET_OP_VIEW;
    t->view_src = src;
    t->view_offs = offs;
    t->data = null_data ? NULL : (uint8_t *)src->data + offs;
    snprintf(t->name, sizeof t->name, "view%d", e->n - 1);
    return t;
}

/* permute: axis i of src becomes axis ax[i]. */
static struct het_tensor *t_permute(struct env *e, struct het_tensor *src, int a0, int a1, int a2, int a3)
{
    int ax[4] = { a0, a1, a2, a3 };
    int64_t ne[4];
    size_t nb[4];
    for (int i = 0; i < 4; i++) {
        ne[ax[i]] = src->ne[i];
        nb[ax[i]] = src->nb[i];
    }
    return t_view(e, src, ne, nb, 0, true);
}

/* Backing tensor allocated in the permuted order so that the permuted view
 * has logical shape ne: physical dims are ne[perm[0..3]]. */
static struct het_tensor *t_new_permuted(struct env *e, enum het_type type, const int64_t ne[4], const int perm[4])
{
    /* physical axis j holds logical axis perm[j]; view maps physical j -> logical perm[j] */
    struct het_tensor *phys = t_new(e, type, ne[perm[0]], ne[perm[1]], ne[perm[2]], ne[perm[3]]);
    return t_permute(e, phys, perm[0], perm[1], perm[2], perm[3]);
}

static struct het_tensor *t_node(struct env *e, enum het_op op, enum het_type type, int64_t ne0, int64_t ne1,
                                 int64_t ne2, int64_t ne3, struct het_tensor *s0, struct het_tensor *s1,
                                 struct het_tensor *s2)
{
    struct het_tensor *t = t_new(e, type, ne0, ne1, ne2, ne3);
    t->op = op;
    t->src[0] = s0;
    t->src[1] = s1;
    t->src[2] = s2;
    snprintf(t->name, sizeof t->name, "node%d", e->n - 1);
    return t;
}

static uint8_t *t_addr(const struct het_tensor *t)
{
    if (t->data) return t->data;
    return t_addr(t->view_src) + t->view_offs;
}

static uint8_t *t_ptr(const struct het_tensor *t, int64_t i0, int64_t i1, int64_t i2, int64_t i3)
{
    return t_addr(t) + i0 * t->nb[0] + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3];
}

static float t_get(const struct het_tensor *t, int64_t i0, int64_t i1, int64_t i2, int64_t i3)
{
    const uint8_t *p = t_ptr(t, i0, i1, i2, i3);
    if (t->type == HET_TYPE_F16) return h2f(rd16(p));
    if (t->type == HET_TYPE_I32) { int32_t v; memcpy(&v, p, 4); return (float)v; }
    float v;
    memcpy(&v, p, 4);
    return v;
}

static void t_set(struct het_tensor *t, int64_t i0, int64_t i1, int64_t i2, int64_t i3, float v)
{
    uint8_t *p = t_ptr(t, i0, i1, i2, i3);
    if (t->type == HET_TYPE_F16) {
        uint16_t h = f2h(v);
        memcpy(p, &h, 2);
    } else if (t->type == HET_TYPE_I32) {
        int32_t i = (int32_t)v;
        memcpy(p, &i, 4);
    } else {
        memcpy(p, &v, 4);
    }
}

static int64_t t_nel(const struct het_tensor *t) { return t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3]; }

#define FOR_EACH(t, i0, i1, i2, i3)                                   \
    for (int64_t i3 = 0; i3 < (t)->ne[3]; i3++)                       \
        for (int64_t i2 = 0; i2 < (t)->ne[2]; i2++)                   \
            for (int64_t i1 = 0; i1 < (t)->ne[1]; i1++)               \
                for (int64_t i0 = 0; i0 < (t)->ne[0]; i0++)

static void t_fill(struct het_tensor *t, float scale)
{
    FOR_EACH(t, i0, i1, i2, i3) t_set(t, i0, i1, i2, i3, scale * het_test_rand_normal());
}

/* Output values in logical row-major order (caller frees). */
static float *t_values(const struct het_tensor *t)
{
    float *v = malloc((size_t)t_nel(t) * sizeof *v);
    size_t k = 0;
    FOR_EACH(t, i0, i1, i2, i3) v[k++] = t_get(t, i0, i1, i2, i3);
    return v;
}

/* ------------------------------------------------------------------------ */
/* running and comparing                                                    */

static bool run_nodes(struct env *e, struct het_tensor **nodes, int n, const char *what)
{
    for (int i = 0; i < n; i++) {
        bool ok = het_device_supports_op(e->dev, nodes[i]);
        CHECK(ok, "[%s] %s: node %d (op %d) reported unsupported", e->cfg, what, i, (int)nodes[i]->op);
        if (!ok) return false;
    }
    het_error err = { 0 };
    enum het_status st = het_device_run_split(e->dev, nodes, n, &err);
    if (st == HET_OK) st = het_device_sync(e->dev, &err);
    CHECK(st == HET_OK, "[%s] %s: %s", e->cfg, what, err.msg);
    return st == HET_OK;
}

static bool run1(struct env *e, struct het_tensor *node, const char *what) { return run_nodes(e, &node, 1, what); }

static void check_close(struct env *e, const char *what, const struct het_tensor *out, const float *ref, double atol,
                        double rtol)
{
    float *got = t_values(out);
    int64_t n = t_nel(out), bad = 0, first = -1;
    double worst = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - ref[i]);
        double lim = atol + rtol * fabs(ref[i]);
        if (!(d <= lim)) {
            if (first < 0) first = i;
            bad++;
        }
        if (d > worst || d != d) worst = d;
    }
    CHECK(bad == 0, "[%s] %s: %lld of %lld elements off (first #%lld got %g want %g), max |diff| %g", e->cfg, what,
          (long long)bad, (long long)n, (long long)first, first >= 0 ? got[first] : 0.0,
          first >= 0 ? ref[first] : 0.0, worst);
    free(got);
}

static void check_nmse(struct env *e, const char *what, const struct het_tensor *out, const float *ref, double tol)
{
    float *got = t_values(out);
    double nmse = het_test_nmse(got, ref, (size_t)t_nel(out));
    CHECK(nmse <= tol, "[%s] %s: nmse %g > %g (got[0] %g ref[0] %g)", e->cfg, what, nmse, tol, got[0], ref[0]);
    free(got);
}

/* ------------------------------------------------------------------------ */
/* element-wise                                                             */

static float ref_silu(float x) { return (float)(x / (1.0 + exp(-(double)x))); }

static void test_binary(struct env *e, enum het_op op, enum het_type tb, bool in_place)
{
    env_reset(e);
    const int64_t ne[4] = { 37, 5, 3, 2 };
    const int perm[4] = { 2, 0, 3, 1 };
    struct het_tensor *a = t_new_permuted(e, HET_TYPE_F32, ne, perm); /* non-contiguous */
    struct het_tensor *b = op == HET_OP_SWIGLU ? t_new_pad(e, tb, 37, 5, 3, 2, 12)
                                               : t_new_pad(e, tb, 37, 1, 3, 1, 8); /* broadcast over 1, 3 */
    t_fill(a, 1.0f);
    t_fill(b, 1.0f);
    if (op == HET_OP_DIV) /* divisors away from zero: 1 <= |b| */
        FOR_EACH(b, i0, i1, i2, i3) {
            float y = t_get(b, i0, i1, i2, i3);
            t_set(b, i0, i1, i2, i3, y < 0 ? y - 1.0f : y + 1.0f);
        }
    struct het_tensor *d;
    if (in_place) {
        d = t_view(e, a, a->ne, a->nb, 0, true);
        d->op = op;
        d->src[0] = a;
        d->src[1] = b;
    } else {
        d = t_node(e, op, HET_TYPE_F32, 37, 5, 3, 2, a, b, NULL);
    }
    float *ref = malloc((size_t)t_nel(a) * sizeof *ref);
    size_t k = 0;
    FOR_EACH(a, i0, i1, i2, i3) {
        float x = t_get(a, i0, i1, i2, i3);
        float y = t_get(b, i0 % b->ne[0], i1 % b->ne[1], i2 % b->ne[2], i3 % b->ne[3]);
        ref[k++] = op == HET_OP_ADD ? x + y : op == HET_OP_MUL ? x * y : op == HET_OP_DIV ? x / y : ref_silu(x) * y;
    }
    char what[96];
    snprintf(what, sizeof what, "%s src1 %s%s",
             op == HET_OP_ADD ? "add" : op == HET_OP_MUL ? "mul" : op == HET_OP_DIV ? "div" : "swiglu",
             tb == HET_TYPE_F16 ? "f16" : "f32", in_place ? " in-place" : "");
    if (run1(e, d, what)) check_close(e, what, d, ref, 1e-6, 1e-5);
    free(ref);
}

static void test_unary(struct env *e, enum het_op op, enum het_type tout)
{
    env_reset(e);
    struct het_tensor *base = t_new_pad(e, HET_TYPE_F32, 29, 41, 3, 1, 20);
    struct het_tensor *a = t_permute(e, base, 1, 0, 2, 3); /* transposed: (41, 29, 3) */
    t_fill(base, 2.0f);
    struct het_tensor *d = t_node(e, op, tout, 41, 29, 3, 1, a, NULL, NULL);
    float s = 0.37f;
    if (op == HET_OP_SCALE) het_set_op_param_f32(d, 0, s);
    float *ref = malloc((size_t)t_nel(a) * sizeof *ref);
    size_t k = 0;
    FOR_EACH(a, i0, i1, i2, i3) {
        float x = t_get(a, i0, i1, i2, i3);
        ref[k++] = op == HET_OP_SCALE ? x * s : op == HET_OP_SIGMOID ? (float)(1.0 / (1.0 + exp(-(double)x))) : ref_silu(x);
    }
    const char *what = op == HET_OP_SCALE ? (tout == HET_TYPE_F16 ? "scale to f16" : "scale")
                       : op == HET_OP_SIGMOID ? "sigmoid" : "silu";
    if (run1(e, d, what)) check_close(e, what, d, ref, tout == HET_TYPE_F16 ? 1e-4 : 1e-6, tout == HET_TYPE_F16 ? 1e-3 : 1e-5);
    free(ref);
}

/* ------------------------------------------------------------------------ */
/* rms_norm, softmax, rope                                                  */

static void test_rms_norm(struct env *e, int64_t ne0, bool in_place)
{
    env_reset(e);
    struct het_tensor *a = t_new_pad(e, HET_TYPE_F32, ne0, 7, 2, 1, 36);
    t_fill(a, 3.0f);
    struct het_tensor *d = in_place ? t_view(e, a, a->ne, a->nb, 0, false)
                                    : t_node(e, HET_OP_RMS_NORM, HET_TYPE_F32, ne0, 7, 2, 1, a, NULL, NULL);
    d->op = HET_OP_RMS_NORM;
    d->src[0] = a;
    const float eps = 1e-5f;
    het_set_op_param_f32(d, 0, eps);
    float *ref = malloc((size_t)t_nel(a) * sizeof *ref);
    for (int64_t r = 0; r < 14; r++) {
        int64_t i1 = r % 7, i2 = r / 7;
        double ss = 0;
        for (int64_t i = 0; i < ne0; i++) ss += (double)t_get(a, i, i1, i2, 0) * t_get(a, i, i1, i2, 0);
        double sc = 1.0 / sqrt(ss / (double)ne0 + eps);
        for (int64_t i = 0; i < ne0; i++) ref[r * ne0 + i] = (float)(t_get(a, i, i1, i2, 0) * sc);
    }
    char what[64];
    snprintf(what, sizeof what, "rms_norm ne0=%lld%s", (long long)ne0, in_place ? " in-place" : "");
    if (run1(e, d, what)) check_close(e, what, d, ref, 1e-5, 1e-4);
    free(ref);
}

/* mask_rows 0: no mask; else the mask has that many rows (row i1 % rows). */
static void test_softmax(struct env *e, int64_t mask_rows, int causal_past)
{
    const bool with_mask = mask_rows > 0;
    env_reset(e);
    const int64_t ne0 = 67, ne1 = 9, ne2 = 3;
    struct het_tensor *base = t_new_pad(e, HET_TYPE_F32, ne0, ne2, ne1, 1, 44); /* (67, 3, 9) */
    struct het_tensor *a = t_permute(e, base, 0, 2, 1, 3);                     /* (67, 9, 3) */
    t_fill(base, 2.0f);
    struct het_tensor *m = NULL;
    if (with_mask) {
        m = t_new_pad(e, HET_TYPE_F32, ne0 + 3, mask_rows, 1, 1, 0);
        t_fill(m, 1.0f);
        for (int64_t j = 0; j < ne0; j += 5) t_set(m, j, 2, 0, 0, -INFINITY);
        for (int64_t j = 0; j < ne0; j++) t_set(m, j, 1, 0, 0, -INFINITY); /* a fully masked row */
    }
    struct het_tensor *d = t_node(e, HET_OP_SOFTMAX, HET_TYPE_F32, ne0, ne1, ne2, 1, a, m, NULL);
    const float scale = 0.7f;
    het_set_op_param_f32(d, 0, scale);
    d->op_params[1] = causal_past;
    float *ref = malloc((size_t)t_nel(a) * sizeof *ref);
    double *v = malloc((size_t)ne0 * sizeof *v);
    for (int64_t i2 = 0; i2 < ne2; i2++) {
        for (int64_t i1 = 0; i1 < ne1; i1++) {
            double mx = -INFINITY, sum = 0;
            for (int64_t j = 0; j < ne0; j++) {
                bool masked = causal_past >= 0 && j > i1 + causal_past;
                v[j] = masked ? -INFINITY : (double)t_get(a, j, i1, i2, 0) * scale + (m ? t_get(m, j, i1 % mask_rows, 0, 0) : 0.0);
                if (v[j] > mx) mx = v[j];
            }
            for (int64_t j = 0; j < ne0; j++) sum += v[j] == -INFINITY ? 0 : exp(v[j] - mx);
            for (int64_t j = 0; j < ne0; j++)
                ref[(i2 * ne1 + i1) * ne0 + j] = v[j] == -INFINITY || mx == -INFINITY ? 0.0f : (float)(exp(v[j] - mx) / sum);
        }
    }
    char what[64];
    snprintf(what, sizeof what, "softmax mask_rows=%lld causal_past=%d", (long long)mask_rows, causal_past);
    if (run1(e, d, what)) check_close(e, what, d, ref, 1e-6, 1e-4);
    free(v);
    free(ref);
}

static void test_rope(struct env *e, int mode, int n_dims, float base, float fscale)
{
    env_reset(e);
    const int64_t hd = 64, nh = 5, nt = 7;
    struct het_tensor *phys = t_new_pad(e, HET_TYPE_F32, hd, nt, nh, 1, 16); /* (hd, tok, head) */
    struct het_tensor *a = t_permute(e, phys, 0, 2, 1, 3);                  /* (hd, head, tok) */
    t_fill(phys, 1.0f);
    struct het_tensor *pos = t_new(e, HET_TYPE_I32, nt, 1, 1, 1);
    for (int64_t t = 0; t < nt; t++) t_set(pos, t, 0, 0, 0, (float)(het_test_rand_u64() % 2048));
    struct het_tensor *d = t_node(e, HET_OP_ROPE, HET_TYPE_F32, hd, nh, nt, 1, a, pos, NULL);
    d->op_params[0] = n_dims;
    d->op_params[1] = mode;
    het_set_op_param_f32(d, 2, base);
    het_set_op_param_f32(d, 3, fscale);
    float *ref = malloc((size_t)t_nel(a) * sizeof *ref);
    for (int64_t t = 0; t < nt; t++) {
        double p = t_get(pos, t, 0, 0, 0);
        for (int64_t h = 0; h < nh; h++) {
            float *r = ref + (t * nh + h) * hd;
            for (int64_t i = 0; i < hd; i++) r[i] = t_get(a, i, h, t, 0);
            for (int i = 0; i < n_dims / 2; i++) {
                double th = p * fscale * pow(base, -2.0 * i / n_dims);
                int64_t e0 = mode == HET_ROPE_NEOX ? i : 2 * i, e1 = mode == HET_ROPE_NEOX ? i + n_dims / 2 : 2 * i + 1;
                double x0 = t_get(a, e0, h, t, 0), x1 = t_get(a, e1, h, t, 0);
                r[e0] = (float)(x0 * cos(th) - x1 * sin(th));
                r[e1] = (float)(x0 * sin(th) + x1 * cos(th));
            }
        }
    }
    char what[64];
    snprintf(what, sizeof what, "rope mode=%d n_dims=%d", mode, n_dims);
    if (run1(e, d, what)) check_close(e, what, d, ref, 2e-3, 0);
    free(ref);
}

/* ------------------------------------------------------------------------ */
/* cpy, cont                                                                */

static void test_cpy(struct env *e, enum het_type src_t, enum het_type dst_t)
{
    env_reset(e);
    /* source: transposed (21, 13, 2); destination: a strided view into a
     * bigger "cache" (26 x 17 rows x 3), logical shape (13, 21, 2) */
    struct het_tensor *sb = t_new_pad(e, src_t, 13, 21, 2, 1, 4);
    struct het_tensor *src = t_permute(e, sb, 1, 0, 2, 3);
    t_fill(sb, 1.5f);
    struct het_tensor *cache = t_new(e, dst_t, 26, 23, 3, 1);
    memset(t_addr(cache), 0x7F, cache->nb[3]); /* sentinel */
    int64_t dne[4] = { 13, 21, 2, 1 };
    size_t dnb[4] = { cache->nb[0], cache->nb[1], cache->nb[2], cache->nb[3] };
    size_t offs = 3 * cache->nb[0] + 1 * cache->nb[1];
    struct het_tensor *dv = t_view(e, cache, dne, dnb, offs, true);
    struct het_tensor *node = t_view(e, cache, dne, dnb, offs, false);
    node->op = HET_OP_CPY;
    node->src[0] = src;
    node->src[1] = dv;
    float *ref = malloc((size_t)t_nel(src) * sizeof *ref);
    size_t k = 0;
    FOR_EACH(src, i0, i1, i2, i3) ref[k++] = t_get(src, i0, i1, i2, i3);
    char what[64];
    snprintf(what, sizeof what, "cpy %s->%s", src_t == HET_TYPE_F16 ? "f16" : "f32", dst_t == HET_TYPE_F16 ? "f16" : "f32");
    if (run1(e, node, what)) {
        bool h = dst_t == HET_TYPE_F16;
        check_close(e, what, dv, ref, h ? 1e-6 : 1e-7, h ? 1e-3 : 1e-6);
        /* bytes outside the view are untouched */
        uint8_t sentinel = 0x7F;
        const uint8_t *c = t_addr(cache);
        CHECK(c[0] == sentinel && c[cache->nb[1] - 1] == sentinel && c[cache->nb[3] - 1] == sentinel,
              "[%s] %s wrote outside the destination view", e->cfg, what);
        size_t gap = offs + 13 * cache->nb[0]; /* first byte after row 0 of the view */
        CHECK(c[gap] == sentinel, "[%s] %s wrote into a row gap", e->cfg, what);
    }
    free(ref);
}

static void test_cont(struct env *e, enum het_type t)
{
    env_reset(e);
    const int64_t ne[4] = { 11, 6, 5, 3 };
    const int perm[4] = { 3, 1, 0, 2 };
    struct het_tensor *a = t_new_permuted(e, t, ne, perm);
    t_fill(a->view_src, 1.0f);
    struct het_tensor *d = t_node(e, HET_OP_CONT, t, 11, 6, 5, 3, a, NULL, NULL);
    float *ref = malloc((size_t)t_nel(a) * sizeof *ref);
    size_t k = 0;
    FOR_EACH(a, i0, i1, i2, i3) ref[k++] = t_get(a, i0, i1, i2, i3);
    const char *what = t == HET_TYPE_F16 ? "cont f16" : "cont f32";
    if (run1(e, d, what)) check_close(e, what, d, ref, 0, 0); /* exact copy */
    free(ref);
}

/* ------------------------------------------------------------------------ */
/* weights: fill and dequantise rows of src0 (K, N, B2, B3) of any type     */

static void fill_weights(struct het_tensor *w)
{
    if (!is_quant(w->type)) {
        t_fill(w, 1.0f);
        return;
    }
    for (int64_t i3 = 0; i3 < w->ne[3]; i3++)
        for (int64_t i2 = 0; i2 < w->ne[2]; i2++)
            for (int64_t n = 0; n < w->ne[1]; n++) rand_blocks(w->type, t_ptr(w, 0, n, i2, i3), w->ne[0]);
}

static void weight_row(const struct het_tensor *w, int64_t n, int64_t i2, int64_t i3, float *out)
{
    if (is_quant(w->type)) ref_dequant(w->type, t_ptr(w, 0, n, i2, i3), out, w->ne[0]);
    else for (int64_t k = 0; k < w->ne[0]; k++) out[k] = t_get(w, k, n, i2, i3);
}

static const char *tname(enum het_type t)
{
    switch (t) {
    case HET_TYPE_F32:  return "f32";
    case HET_TYPE_F16:  return "f16";
    case HET_TYPE_Q4_0: return "q4_0";
    case HET_TYPE_Q8_0: return "q8_0";
    case HET_TYPE_Q4_K: return "q4_k";
    case HET_TYPE_Q6_K: return "q6_k";
    default:            return "?";
    }
}

/* batched: ids (M, 2) against a table with 2 planes, or with one plane
 * broadcast when bcast */
static void test_get_rows(struct env *e, enum het_type t, int64_t V, bool batched, bool bcast)
{
    env_reset(e);
    const int64_t K = 512, B = batched ? 2 : 1, M = 13, BW = bcast ? 1 : B;
    struct het_tensor *w = t_new_pad(e, t, K, V, BW, 1, is_quant(t) ? 0 : 8);
    fill_weights(w);
    struct het_tensor *ids = t_new_pad(e, HET_TYPE_I32, M, B, 1, 1, 12);
    for (int64_t b = 0; b < B; b++)
        for (int64_t i = 0; i < M; i++)
            t_set(ids, i, b, 0, 0, (float)(i == 3 ? V - 1 : i == 5 ? 0 : (int64_t)(het_test_rand_u64() % (uint64_t)V)));
    struct het_tensor *d = t_node(e, HET_OP_GET_ROWS, HET_TYPE_F32, K, M, B, 1, w, ids, NULL);
    float *ref = malloc((size_t)(K * M * B) * sizeof *ref);
    for (int64_t b = 0; b < B; b++)
        for (int64_t i = 0; i < M; i++) weight_row(w, (int64_t)t_get(ids, i, b, 0, 0), b % BW, 0, ref + (b * M + i) * K);
    char what[64];
    snprintf(what, sizeof what, "get_rows %s V=%lld%s%s", tname(t), (long long)V, batched ? " batched" : "",
             bcast ? " broadcast" : "");
    if (run1(e, d, what)) check_close(e, what, d, ref, 1e-6, 1e-6);
    free(ref);
}

/* ------------------------------------------------------------------------ */
/* mul_mat                                                                  */

struct mm_case {
    enum het_type type;
    int64_t       K, N, M, B2w, B3w, B2, B3;
    bool          x_transposed; /* src1 is a transposed view */
    bool          w_padded;     /* src0 rows padded          */
};

static void ref_mul_mat(const struct het_tensor *w, const struct het_tensor *x, float *ref)
{
    int64_t K = w->ne[0], N = w->ne[1], M = x->ne[1], B2 = x->ne[2], B3 = x->ne[3];
    int64_t r2 = B2 / w->ne[2], r3 = B3 / w->ne[3];
    float *row = malloc((size_t)K * sizeof *row);
    for (int64_t i3 = 0; i3 < B3; i3++)
        for (int64_t i2 = 0; i2 < B2; i2++)
            for (int64_t n = 0; n < N; n++) {
                weight_row(w, n, i2 / r2, i3 / r3, row);
                for (int64_t m = 0; m < M; m++) {
                    double s = 0;
                    for (int64_t k = 0; k < K; k++) s += (double)row[k] * t_get(x, k, m, i2, i3);
                    ref[((i3 * B2 + i2) * M + m) * N + n] = (float)s;
                }
            }
    free(row);
}

static void test_mul_mat(struct env *e, const struct mm_case *c)
{
    env_reset(e);
    /* padding keeps element alignment; 6 and 14 put rows at every even offset mod 8 */
    size_t wpad = c->w_padded ? (c->type == HET_TYPE_F32 ? 12 : c->type == HET_TYPE_F16 ? 6 : 14) : 0;
    struct het_tensor *w = t_new_pad(e, c->type, c->K, c->N, c->B2w, c->B3w, wpad);
    fill_weights(w);
    struct het_tensor *x;
    if (c->x_transposed) {
        struct het_tensor *xb = t_new_pad(e, HET_TYPE_F32, c->M, c->K, c->B2, c->B3, 4);
        x = t_permute(e, xb, 1, 0, 2, 3);
        t_fill(xb, 1.0f);
    } else {
        x = t_new_pad(e, HET_TYPE_F32, c->K, c->M, c->B2, c->B3, 8);
        t_fill(x, 1.0f);
    }
    struct het_tensor *d = t_node(e, HET_OP_MUL_MAT, HET_TYPE_F32, c->N, c->M, c->B2, c->B3, w, x, NULL);
    float *ref = malloc((size_t)t_nel(d) * sizeof *ref);
    ref_mul_mat(w, x, ref);
    char what[128];
    snprintf(what, sizeof what, "mul_mat %s K=%lld N=%lld M=%lld B=%lldx%lld/%lldx%lld%s%s", tname(c->type),
             (long long)c->K, (long long)c->N, (long long)c->M, (long long)c->B2, (long long)c->B3,
             (long long)c->B2w, (long long)c->B3w, c->x_transposed ? " xT" : "", c->w_padded ? " wpad" : "");
    if (run1(e, d, what)) check_nmse(e, what, d, ref, 1e-9);
    free(ref);
}

static void test_mul_mat_all(struct env *e)
{
    static const enum het_type types[] = { HET_TYPE_F32, HET_TYPE_F16, HET_TYPE_Q4_0,
                                           HET_TYPE_Q8_0, HET_TYPE_Q4_K, HET_TYPE_Q6_K };
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        enum het_type t = types[i];
        bool q = is_quant(t);
        int64_t K = 512;
        test_mul_mat(e, &(struct mm_case){ t, K, 67, 1, 1, 1, 1, 1, false, false });     /* GEMV */
        test_mul_mat(e, &(struct mm_case){ t, K, 67, 5, 1, 1, 1, 1, true, !q });         /* GEMV, 5 cols */
        test_mul_mat(e, &(struct mm_case){ t, K, 67, 37, 1, 1, 1, 1, false, !q });       /* GEMM */
        test_mul_mat(e, &(struct mm_case){ t, K, 29, 11, 2, 1, 6, 2, true, false });     /* GQA bcast */
        test_mul_mat(e, &(struct mm_case){ t, K, 45, 1, 1, 1, 1, 1, false, true });      /* padded rows */
        test_mul_mat(e, &(struct mm_case){ t, K, 45, 6, 1, 1, 1, 1, false, true });
    }
    /* plain types: K not a multiple of 8 or 32 */
    test_mul_mat(e, &(struct mm_case){ HET_TYPE_F32, 333, 45, 1, 1, 1, 1, 1, true, true });
    test_mul_mat(e, &(struct mm_case){ HET_TYPE_F16, 333, 45, 19, 1, 1, 1, 1, true, true });
    /* transposed F16 weights (nb0 != element size) */
    env_reset(e);
    struct het_tensor *wb = t_new(e, HET_TYPE_F16, 40, 100, 1, 1);
    struct het_tensor *w = t_permute(e, wb, 1, 0, 2, 3); /* (100, 40): K=100 */
    t_fill(wb, 1.0f);
    struct het_tensor *x = t_new(e, HET_TYPE_F32, 100, 9, 1, 1);
    t_fill(x, 1.0f);
    struct het_tensor *d = t_node(e, HET_OP_MUL_MAT, HET_TYPE_F32, 40, 9, 1, 1, w, x, NULL);
    float *ref = malloc((size_t)t_nel(d) * sizeof *ref);
    ref_mul_mat(w, x, ref);
    if (run1(e, d, "mul_mat f16 transposed weights")) check_nmse(e, "mul_mat f16 transposed weights", d, ref, 1e-9);
    free(ref);
}

/* ------------------------------------------------------------------------ */
/* mul_mat_id (mixture of experts)                                          */

/* E experts (K, N) of type t; x (K, n_b, T) with padded columns, or a
 * transposed view; ids (k, T) padded rows, or a transposed view of (T, k);
 * dst (N, k, T) with padded rows when dst_pad. */
static void test_mul_mat_id(struct env *e, enum het_type t, int64_t n_b, bool ids_t, bool x_t, bool dst_pad)
{
    env_reset(e);
    const int64_t K = 512, N = 37, E = 5, k = 3, T = 4;
    struct het_tensor *w = t_new_pad(e, t, K, N, E, 1, is_quant(t) ? 0 : 8);
    fill_weights(w);
    struct het_tensor *x;
    if (x_t) {
        struct het_tensor *xb = t_new_pad(e, HET_TYPE_F32, n_b, K, T, 1, 4);
        x = t_permute(e, xb, 1, 0, 2, 3);
        t_fill(xb, 1.0f);
    } else {
        x = t_new_pad(e, HET_TYPE_F32, K, n_b, T, 1, 8);
        t_fill(x, 1.0f);
    }
    struct het_tensor *ids;
    if (ids_t) {
        struct het_tensor *ib = t_new_pad(e, HET_TYPE_I32, T, k, 1, 1, 4);
        ids = t_permute(e, ib, 1, 0, 2, 3);
    } else {
        ids = t_new_pad(e, HET_TYPE_I32, k, T, 1, 1, 12);
    }
    for (int64_t tok = 0; tok < T; tok++) /* distinct experts per token, as top-k gives */
        for (int64_t s = 0; s < k; s++) t_set(ids, s, tok, 0, 0, (float)((tok * 2 + s * (tok % 2 ? 1 : 3) + s) % E));
    struct het_tensor *d = t_new_pad(e, HET_TYPE_F32, N, k, T, 1, dst_pad ? 20 : 0);
    d->op = HET_OP_MUL_MAT_ID;
    d->src[0] = w;
    d->src[1] = x;
    d->src[2] = ids;
    if (e->max_bind && het_vk_tensor_span(w) > e->max_bind) {
        /* the experts must fit one descriptor: refused, and so placed elsewhere */
        CHECK(!het_device_supports_op(e->dev, d), "[%s] mul_mat_id %s: accepted experts wider than a descriptor",
              e->cfg, tname(t));
        return;
    }
    float *ref = malloc((size_t)(N * k * T) * sizeof *ref), *row = malloc((size_t)K * sizeof *row);
    for (int64_t tok = 0; tok < T; tok++)
        for (int64_t s = 0; s < k; s++) {
            int64_t ex = (int64_t)t_get(ids, s, tok, 0, 0);
            for (int64_t n = 0; n < N; n++) {
                weight_row(w, n, ex, 0, row);
                double acc = 0;
                for (int64_t i = 0; i < K; i++) acc += (double)row[i] * t_get(x, i, s % n_b, tok, 0);
                ref[(tok * k + s) * N + n] = (float)acc;
            }
        }
    char what[128];
    snprintf(what, sizeof what, "mul_mat_id %s n_b=%lld%s%s%s", tname(t), (long long)n_b, ids_t ? " idsT" : "",
             x_t ? " xT" : "", dst_pad ? " dpad" : "");
    if (run1(e, d, what)) check_nmse(e, what, d, ref, 1e-9);
    free(row);
    free(ref);
}

/* the weight types every mul_mat_id test runs */
static const enum het_type mmid_types[] = { HET_TYPE_F32, HET_TYPE_F16, HET_TYPE_Q4_0,
                                            HET_TYPE_Q8_0, HET_TYPE_Q4_K, HET_TYPE_Q6_K };

static void test_mul_mat_id_all(struct env *e)
{
    const enum het_type *types = mmid_types;
    for (size_t i = 0; i < sizeof mmid_types / sizeof mmid_types[0]; i++) {
        test_mul_mat_id(e, types[i], 1, false, false, false); /* gate/up: one column per token */
        test_mul_mat_id(e, types[i], 3, true, false, true);   /* down: one column per slot */
    }
    test_mul_mat_id(e, HET_TYPE_Q4_0, 3, false, true, false);
    test_mul_mat_id(e, HET_TYPE_F16, 1, true, true, true);
}

/* Prefill-sized mul_mat_id (the grouped GEMM once k*T passes the GEMV's
 * limit, GEMV below): N odd and over one 64-row tile, uneven routing (every
 * token sends one slot, a different slot per token, to expert 0, so at T=130
 * it fills three 64-pair tiles; the others draw distinct experts from
 * 1..E-2; expert E-1 is never hit) and every operand a non-contiguous view:
 * ids a transposed view of (T, k), x (K, n_b, T) a transposed view or with
 * padded columns and a hidden column per token, dst a permuted view of
 * (k, N, T) or (N, T, k) storage. With bad_ids two
 * ids lie outside [0, E) and their outputs must be NaN. */
struct mmid_case {
    enum het_type type;
    int64_t       K, T, n_b;
    bool          x_t, bad_ids;
};

static void test_mul_mat_id_prefill(struct env *e, const struct mmid_case *c)
{
    env_reset(e);
    const int64_t K = c->K, N = 77, E = 9, k = 4, T = c->T, n_b = c->n_b;
    struct het_tensor *w = t_new_pad(e, c->type, K, N, E, 1, is_quant(c->type) ? 0 : 8);
    fill_weights(w);
    struct het_tensor *x;
    if (c->x_t) {
        struct het_tensor *xb = t_new_pad(e, HET_TYPE_F32, n_b, K, T, 1, 4);
        x = t_permute(e, xb, 1, 0, 2, 3);
        t_fill(xb, 1.0f);
    } else {
        /* a column more per token than the view shows, 16-byte aligned
         * (the row kernels take it): nb2 != n_b * nb1 */
        struct het_tensor *xb = t_new_pad(e, HET_TYPE_F32, K, n_b + 1, T, 1, 16);
        x = t_view(e, xb, (const int64_t[4]){ K, n_b, T, 1 }, xb->nb, 0, true);
        t_fill(xb, 1.0f);
    }
    struct het_tensor *ib = t_new_pad(e, HET_TYPE_I32, T, k, 1, 1, 4);
    struct het_tensor *ids = t_permute(e, ib, 1, 0, 2, 3);
    for (int64_t t = 0; t < T; t++) {
        bool used[16] = { false };
        for (int64_t s = 0; s < k; s++) {
            int64_t ex = 0;
            if (s != t % k)
                do ex = 1 + (int64_t)(het_test_rand_u64() % (uint64_t)(E - 2)); while (used[ex]);
            used[ex] = true;
            t_set(ids, s, t, 0, 0, (float)ex);
        }
    }
    if (c->bad_ids) {
        t_set(ids, 1, T / 3, 0, 0, -1.0f);
        t_set(ids, k - 1, T - 1, 0, 0, (float)E);
    }
    /* dst (N, k, T) over (k, N, T) storage (nb0 = 4k, nb1 = 4) for even T,
     * over (N, T, k) storage (nb1 > nb2) for odd T */
    struct het_tensor *dp = T % 2 ? t_new(e, HET_TYPE_F32, N, T, k, 1) : t_new(e, HET_TYPE_F32, k, N, T, 1);
    memset(dp->data, 0, dp->nb[3]);
    struct het_tensor *d = T % 2 ? t_permute(e, dp, 0, 2, 1, 3) : t_permute(e, dp, 1, 0, 2, 3);
    d->op = HET_OP_MUL_MAT_ID;
    d->src[0] = w;
    d->src[1] = x;
    d->src[2] = ids;
    if (e->max_bind && het_vk_tensor_span(w) > e->max_bind) { /* B, C: refused, as in test_mul_mat_id */
        CHECK(!het_device_supports_op(e->dev, d), "[%s] mul_mat_id %s: accepted experts wider than a descriptor",
              e->cfg, tname(c->type));
        return;
    }
    float *wd = malloc((size_t)(K * N * E) * sizeof *wd), *ref = malloc((size_t)(N * k * T) * sizeof *ref);
    for (int64_t ex = 0; ex < E; ex++)
        for (int64_t n = 0; n < N; n++) weight_row(w, n, ex, 0, wd + (ex * N + n) * K);
    for (int64_t t = 0; t < T; t++)
        for (int64_t s = 0; s < k; s++) {
            int64_t ex = (int64_t)t_get(ids, s, t, 0, 0);
            for (int64_t n = 0; n < N; n++) {
                double acc = 0;
                if (ex < 0 || ex >= E) acc = NAN;
                else for (int64_t i = 0; i < K; i++) acc += (double)wd[(ex * N + n) * K + i] * t_get(x, i, s % n_b, t, 0);
                ref[(t * k + s) * N + n] = (float)acc;
            }
        }
    char what[128];
    snprintf(what, sizeof what, "mul_mat_id %s K=%lld T=%lld n_b=%lld%s%s", tname(c->type), (long long)K,
             (long long)T, (long long)n_b, c->x_t ? " xT" : " xpad", c->bad_ids ? " bad ids" : "");
    if (run1(e, d, what)) {
        float *got = t_values(d);
        int64_t n = N * k * T, nan_off = 0;
        double num = 0, den = 0;
        for (int64_t i = 0; i < n; i++) {
            if (isnan(ref[i]) || isnan(got[i])) {
                nan_off += isnan(ref[i]) != isnan(got[i]);
                continue;
            }
            num += ((double)got[i] - ref[i]) * ((double)got[i] - ref[i]);
            den += (double)ref[i] * ref[i];
        }
        CHECK(nan_off == 0 && num <= 1e-9 * den, "[%s] %s: nmse %g, %lld NaN mismatches", e->cfg, what,
              den > 0 ? num / den : num, (long long)nan_off);
        free(got);
    }
    free(wd);
    free(ref);
}

static void test_mul_mat_id_prefill_all(struct env *e)
{
    const enum het_type *types = mmid_types;
    for (size_t i = 0; i < sizeof mmid_types / sizeof mmid_types[0]; i++) {
        enum het_type t = types[i];
        /* plain types: K not a multiple of the 32-wide step, then one the row kernels take */
        test_mul_mat_id_prefill(e, &(struct mmid_case){ t, is_quant(t) ? 512 : 333, 130, 1, i % 2 == 0, false });
        test_mul_mat_id_prefill(e, &(struct mmid_case){ t, is_quant(t) ? 512 : 384, 64, 4, i % 2 == 1, false });
    }
    static const int64_t Ts[] = { 1, 2, 7 };
    for (size_t i = 0; i < sizeof Ts / sizeof Ts[0]; i++) {
        test_mul_mat_id_prefill(e, &(struct mmid_case){ HET_TYPE_Q4_K, 512, Ts[i], 1, true, false });
        test_mul_mat_id_prefill(e, &(struct mmid_case){ HET_TYPE_F16, 384, Ts[i], 4, false, false });
    }
    test_mul_mat_id_prefill(e, &(struct mmid_case){ HET_TYPE_Q8_0, 512, 2, 4, false, true }); /* GEMV */
    test_mul_mat_id_prefill(e, &(struct mmid_case){ HET_TYPE_Q8_0, 512, 70, 4, true, true });  /* grouped */
    test_mul_mat_id_prefill(e, &(struct mmid_case){ HET_TYPE_Q4_0, 512, 70, 4, false, true }); /* grouped (rows) */
}

/* ------------------------------------------------------------------------ */
/* expert routing: top_k, sum_rows, moe_sum, and a whole MoE layer          */

/* (va, ia) ranks before (vb, ib) in TOP_K's order: larger first, equal values
 * by index, NaN after every number (NaNs by index) */
static bool ref_ranks_before(float va, int64_t ia, float vb, int64_t ib)
{
    if (isnan(va) || isnan(vb)) return isnan(vb) && (!isnan(va) || ia < ib);
    return va > vb || (va == vb && ia < ib);
}

/* the first k of row (i1, i2, i3) of a in that order, by selection */
static void ref_top_k(const struct het_tensor *a, int64_t i1, int64_t i2, int64_t i3, int64_t k, int32_t *out)
{
    const int64_t n = a->ne[0];
    for (int64_t j = 0; j < k; j++) {
        int64_t best = -1;
        for (int64_t i = 0; i < n; i++) {
            bool taken = false;
            for (int64_t q = 0; q < j && !taken; q++) taken = out[q] == i;
            if (!taken && (best < 0 || ref_ranks_before(t_get(a, i, i1, i2, i3), i, t_get(a, best, i1, i2, i3), best)))
                best = i;
        }
        out[j] = (int32_t)best;
    }
}

/* A tensor of t's shape with dense strides over t's first byte: what a
 * kernel that ignored t's strides would read. */
static struct het_tensor *t_as_dense(struct env *e, struct het_tensor *t)
{
    size_t es = type_elem_bytes(t->type), nb[4] = { es, es * (size_t)t->ne[0], 0, 0 };
    nb[2] = nb[1] * (size_t)t->ne[1];
    nb[3] = nb[2] * (size_t)t->ne[2];
    struct het_tensor *d = t_view(e, t, t->ne, nb, 0, false);
    d->data = t_addr(t);
    return d;
}

/* layout: 0 padded rows in and out; 1 the row along a transposed axis and
 * the indices written transposed; 2 ties, -0/+0, NaN and -inf in the rows */
static void test_top_k(struct env *e, int64_t n, int64_t k, int layout)
{
    env_reset(e);
    const int64_t R1 = 5, R2 = 3;
    struct het_tensor *a, *d;
    if (layout == 1) {
        const int64_t ne[4] = { n, R1, R2, 1 };
        a = t_new_permuted(e, HET_TYPE_F32, ne, (const int[4]){ 1, 0, 2, 3 }); /* n strided, rows contiguous */
        struct het_tensor *db = t_new_pad(e, HET_TYPE_I32, R1, k, R2, 1, 4);
        d = t_permute(e, db, 1, 0, 2, 3);
        d->op = HET_OP_TOP_K;
        d->src[0] = a;
        d->type = HET_TYPE_I32;
    } else {
        a = t_new_pad(e, HET_TYPE_F32, n, R1, R2, 1, 20);
        d = t_new_pad(e, HET_TYPE_I32, k, R1, R2, 1, 8);
        d->op = HET_OP_TOP_K;
        d->src[0] = a;
    }
    t_fill(a, 1.0f);
    if (layout == 2)
        FOR_EACH(a, i0, i1, i2, i3) {
            int64_t c = (i0 * 7 + i1 * 3 + i2) % 9;
            float v = c < 3 ? 0.5f : c == 3 ? (i0 % 2 ? -0.0f : 0.0f) : c == 4 ? NAN : c == 5 ? -INFINITY
                    : t_get(a, i0, i1, i2, i3);
            t_set(a, i0, i1, i2, i3, v);
        }
    int32_t *ref = malloc((size_t)(k * R1 * R2) * sizeof *ref), *naive = malloc((size_t)(k * R1 * R2) * sizeof *naive);
    struct het_tensor *alias = t_as_dense(e, a);
    for (int64_t i2 = 0; i2 < R2; i2++)
        for (int64_t i1 = 0; i1 < R1; i1++) {
            ref_top_k(a, i1, i2, 0, k, ref + (i2 * R1 + i1) * k);
            ref_top_k(alias, i1, i2, 0, k, naive + (i2 * R1 + i1) * k);
        }
    char what[96];
    snprintf(what, sizeof what, "top_k n=%lld k=%lld %s", (long long)n, (long long)k,
             layout == 0 ? "padded" : layout == 1 ? "transposed" : "ties/NaN");
    /* the case tells strides apart: the input read as dense ranks differently */
    if (layout == 1)
        CHECK(memcmp(ref, naive, (size_t)(k * R1 * R2) * sizeof *ref) != 0, "[%s] %s: strides not exercised", e->cfg,
              what);
    if (run1(e, d, what)) {
        int64_t bad = 0, first = -1;
        for (int64_t i2 = 0; i2 < R2; i2++)
            for (int64_t i1 = 0; i1 < R1; i1++)
                for (int64_t j = 0; j < k; j++) {
                    int32_t got;
                    memcpy(&got, t_ptr(d, j, i1, i2, 0), sizeof got);
                    if (got != ref[(i2 * R1 + i1) * k + j] && bad++ == 0) first = (i2 * R1 + i1) * k + j;
                }
        CHECK(bad == 0, "[%s] %s: %lld of %lld indices differ (first #%lld want %d)", e->cfg, what, (long long)bad,
              (long long)(k * R1 * R2), (long long)first, first >= 0 ? ref[first] : 0);
    }
    free(naive);
    free(ref);
}

/* n elements per row (more than a workgroup when large), the input
 * transposed or padded, the sums written into padded rows */
static void test_sum_rows(struct env *e, int64_t n, bool transposed)
{
    env_reset(e);
    const int64_t R1 = 7, R2 = 2;
    struct het_tensor *a;
    if (transposed) {
        const int64_t ne[4] = { n, R1, R2, 1 };
        a = t_new_permuted(e, HET_TYPE_F32, ne, (const int[4]){ 1, 0, 2, 3 });
    } else {
        a = t_new_pad(e, HET_TYPE_F32, n, R1, R2, 1, 36);
    }
    t_fill(a, 1.0f);
    struct het_tensor *d = t_new_pad(e, HET_TYPE_F32, 1, R1, R2, 1, 12); /* rows 16 bytes apart */
    d->op = HET_OP_SUM_ROWS;
    d->src[0] = a;
    float *ref = malloc((size_t)(R1 * R2) * sizeof *ref), *naive = malloc((size_t)(R1 * R2) * sizeof *naive);
    struct het_tensor *alias = t_as_dense(e, a);
    for (int64_t i2 = 0; i2 < R2; i2++)
        for (int64_t i1 = 0; i1 < R1; i1++) {
            double s = 0, sn = 0;
            for (int64_t i = 0; i < n; i++) {
                s += t_get(a, i, i1, i2, 0);
                sn += t_get(alias, i, i1, i2, 0);
            }
            ref[i2 * R1 + i1] = (float)s;
            naive[i2 * R1 + i1] = (float)sn;
        }
    char what[64];
    snprintf(what, sizeof what, "sum_rows n=%lld%s", (long long)n, transposed ? " transposed" : " padded");
    CHECK(!(het_test_max_abs_diff(ref, naive, (size_t)(R1 * R2)) <= 1e-3), "[%s] %s: strides not exercised", e->cfg, what);
    /* float sums in another order than the reference's double: a few ulps of
     * the sum of |x| (about n * 0.8 for unit normals) */
    if (run1(e, d, what)) check_close(e, what, d, ref, 1e-6 * (double)n, 1e-5);
    free(naive);
    free(ref);
}

/* x (N, k, T) as a permuted view, w (k, T) transposed, dst with padded rows */
static void test_moe_sum(struct env *e, int64_t N, int64_t k, int64_t T)
{
    env_reset(e);
    const int64_t xne[4] = { N, k, T, 1 };
    struct het_tensor *x = t_new_permuted(e, HET_TYPE_F32, xne, (const int[4]){ 1, 0, 2, 3 }); /* slots innermost */
    struct het_tensor *wb = t_new_pad(e, HET_TYPE_F32, T, k, 1, 1, 8);
    struct het_tensor *w = t_permute(e, wb, 1, 0, 2, 3);
    t_fill(x, 1.0f);
    t_fill(wb, 1.0f);
    struct het_tensor *d = t_new_pad(e, HET_TYPE_F32, N, T, 1, 1, 24);
    d->op = HET_OP_MOE_SUM;
    d->src[0] = x;
    d->src[1] = w;
    float *ref = malloc((size_t)(N * T) * sizeof *ref), *naive = malloc((size_t)(N * T) * sizeof *naive);
    struct het_tensor *xa = t_as_dense(e, x), *wa = t_as_dense(e, w);
    for (int64_t t = 0; t < T; t++)
        for (int64_t i = 0; i < N; i++) {
            double s = 0, sn = 0;
            for (int64_t q = 0; q < k; q++) {
                s += (double)t_get(w, q, t, 0, 0) * t_get(x, i, q, t, 0);
                sn += (double)t_get(wa, q, t, 0, 0) * t_get(xa, i, q, t, 0);
            }
            ref[t * N + i] = (float)s;
            naive[t * N + i] = (float)sn;
        }
    char what[64];
    snprintf(what, sizeof what, "moe_sum N=%lld k=%lld T=%lld", (long long)N, (long long)k, (long long)T);
    CHECK(!(het_test_max_abs_diff(ref, naive, (size_t)(N * T)) <= 1e-3), "[%s] %s: strides not exercised", e->cfg, what);
    if (run1(e, d, what)) check_close(e, what, d, ref, 1e-5, 1e-5);
    free(naive);
    free(ref);
}

/* A qwen3moe FFN's routing and experts as one split, as arch_moe.c builds
 * it: probs (E, T) -> top_k -> get_rows of the chosen probabilities ->
 * sum_rows -> div (renormalised weights); experts' mul_mat_id reading the
 * ids top_k just wrote; moe_sum. Nothing returns to the host in between. */
static void test_moe_layer(struct env *e)
{
    env_reset(e);
    const int64_t E = 11, k = 3, T = 6, K = 96, N = 37;
    struct het_tensor *probs = t_new_pad(e, HET_TYPE_F32, E, T, 1, 1, 4);
    FOR_EACH(probs, i0, i1, i2, i3) t_set(probs, i0, i1, i2, i3, het_test_rand_uniform(0.01f, 1.0f));
    struct het_tensor *sel = t_node(e, HET_OP_TOP_K, HET_TYPE_I32, k, T, 1, 1, probs, NULL, NULL);
    struct het_tensor *p3 = t_view(e, probs, (const int64_t[4]){ 1, E, T, 1 },
                                   (const size_t[4]){ 4, 4, probs->nb[1], probs->nb[1] * (size_t)T }, 0, true);
    struct het_tensor *wk = t_node(e, HET_OP_GET_ROWS, HET_TYPE_F32, 1, k, T, 1, p3, sel, NULL);
    struct het_tensor *w2 = t_view(e, wk, (const int64_t[4]){ k, T, 1, 1 },
                                   (const size_t[4]){ 4, wk->nb[2], wk->nb[2] * (size_t)T, wk->nb[2] * (size_t)T },
                                   0, true);
    struct het_tensor *sum = t_node(e, HET_OP_SUM_ROWS, HET_TYPE_F32, 1, T, 1, 1, w2, NULL, NULL);
    struct het_tensor *wn = t_node(e, HET_OP_DIV, HET_TYPE_F32, k, T, 1, 1, w2, sum, NULL);
    struct het_tensor *ex = t_new(e, HET_TYPE_Q8_0, K, N, E, 1); /* 41 KB: one 64 KiB range (B, C) */
    fill_weights(ex);
    struct het_tensor *x = t_new_pad(e, HET_TYPE_F32, K, 1, T, 1, 12);
    t_fill(x, 1.0f);
    struct het_tensor *y = t_node(e, HET_OP_MUL_MAT_ID, HET_TYPE_F32, N, k, T, 1, ex, x, sel);
    struct het_tensor *out = t_node(e, HET_OP_MOE_SUM, HET_TYPE_F32, N, T, 1, 1, y, wn, NULL);
    /* reference */
    float *ref = malloc((size_t)(N * T) * sizeof *ref), *row = malloc((size_t)K * sizeof *row);
    for (int64_t t = 0; t < T; t++) {
        int32_t ids[8];
        ref_top_k(probs, t, 0, 0, k, ids);
        double norm = 0;
        for (int64_t s = 0; s < k; s++) norm += t_get(probs, ids[s], t, 0, 0);
        for (int64_t i = 0; i < N; i++) {
            double acc = 0;
            for (int64_t s = 0; s < k; s++) {
                weight_row(ex, i, ids[s], 0, row);
                double dot = 0;
                for (int64_t c = 0; c < K; c++) dot += (double)row[c] * t_get(x, c, 0, t, 0);
                acc += t_get(probs, ids[s], t, 0, 0) / norm * dot;
            }
            ref[t * N + i] = (float)acc;
        }
    }
    struct het_tensor *nodes[] = { sel, p3, wk, w2, sum, wn, y, out };
    if (run_nodes(e, nodes, (int)(sizeof nodes / sizeof nodes[0]), "moe layer")) check_nmse(e, "moe layer", out, ref, 1e-9);
    free(row);
    free(ref);
}

static void test_moe_route_all(struct env *e)
{
    test_top_k(e, 37, 5, 0);
    test_top_k(e, 129, 8, 1);  /* more elements than a workgroup, 30B-A3B's k */
    test_top_k(e, 45, 45, 2);  /* k = n: the whole order, ties and NaN included */
    test_top_k(e, 9, 1, 2);
    test_sum_rows(e, 3, false);
    test_sum_rows(e, 999, true);
    test_moe_sum(e, 37, 3, 5);
    test_moe_sum(e, 130, 8, 2);
    test_moe_layer(e);
}

/* ------------------------------------------------------------------------ */
/* attention                                                                */

struct attn_case {
    enum het_type kvt;
    int64_t       hd, nh, nkvh, nt;
    int32_t       n_past;
    int64_t       nb, kvb; /* batch (dim 3) of q and of K/V (1 or nb) */
};

static void test_attn(struct env *e, const struct attn_case *c)
{
    env_reset(e);
    const enum het_type kvt = c->kvt;
    const int64_t hd = c->hd, nh = c->nh, nkvh = c->nkvh, nt = c->nt, nb = c->nb;
    const int32_t n_past = c->n_past;
    const int64_t n_ctx = n_past + nt + 9, n_kv = n_past + nt;
    /* cache laid out (hd, n_kv_head, n_ctx, kvb); the op sees the first n_kv */
    struct het_tensor *kc = t_new(e, kvt, hd, nkvh, n_ctx, c->kvb), *vc = t_new_pad(e, kvt, hd, nkvh, n_ctx, c->kvb, 8);
    t_fill(kc, 1.0f);
    t_fill(vc, 1.0f);
    int64_t kne[4] = { hd, nkvh, n_kv, c->kvb };
    struct het_tensor *k = t_view(e, kc, kne, kc->nb, 0, true);
    struct het_tensor *v = t_view(e, vc, kne, vc->nb, 0, true);
    struct het_tensor *qb = t_new_pad(e, HET_TYPE_F32, hd, nt, nh, nb, 12); /* (hd, tok, head, b) */
    struct het_tensor *q = t_permute(e, qb, 0, 2, 1, 3);                   /* (hd, head, tok, b) */
    t_fill(qb, 1.0f);
    struct het_tensor *d = t_node(e, HET_OP_ATTN, HET_TYPE_F32, hd, nh, nt, nb, q, k, v);
    const float scale = 1.0f / sqrtf((float)hd);
    het_set_op_param_f32(d, 0, scale);
    d->op_params[1] = n_past;
    float *ref = malloc((size_t)t_nel(d) * sizeof *ref);
    double *s = malloc((size_t)n_kv * sizeof *s);
    for (int64_t b = 0; b < nb; b++)
    for (int64_t t = 0; t < nt; t++)
        for (int64_t h = 0; h < nh; h++) {
            int64_t g = h / (nh / nkvh), vis = t + n_past + 1 < n_kv ? t + n_past + 1 : n_kv, kb = b % c->kvb;
            double mx = -INFINITY, sum = 0;
            for (int64_t j = 0; j < vis; j++) {
                double dot = 0;
                for (int64_t i = 0; i < hd; i++) dot += (double)t_get(q, i, h, t, b) * t_get(k, i, g, j, kb);
                s[j] = dot * scale;
                if (s[j] > mx) mx = s[j];
            }
            for (int64_t j = 0; j < vis; j++) sum += (s[j] = exp(s[j] - mx));
            for (int64_t i = 0; i < hd; i++) {
                double o = 0;
                for (int64_t j = 0; j < vis; j++) o += s[j] * t_get(v, i, g, j, kb);
                ref[((b * nt + t) * nh + h) * hd + i] = (float)(o / sum);
            }
        }
    char what[96];
    snprintf(what, sizeof what, "attn %s hd=%lld heads=%lld/%lld tok=%lld past=%d batch=%lld/%lld", tname(kvt),
             (long long)hd, (long long)nh, (long long)nkvh, (long long)nt, n_past, (long long)nb, (long long)c->kvb);
    if (run1(e, d, what)) check_nmse(e, what, d, ref, 1e-9);
    free(s);
    free(ref);
}

/* ------------------------------------------------------------------------ */
/* a chain in one split (barriers), errors, profiling                       */

static void test_chain(struct env *e, bool profile)
{
    env_reset(e);
    const int64_t K = 96, N = 70, M = 3;
    struct het_tensor *x = t_new(e, HET_TYPE_F32, K, M, 1, 1);
    struct het_tensor *g = t_new(e, HET_TYPE_F32, K, 1, 1, 1);
    struct het_tensor *w = t_new(e, HET_TYPE_F16, K, N, 1, 1);
    struct het_tensor *bias = t_new(e, HET_TYPE_F32, N, 1, 1, 1);
    t_fill(x, 1.0f);
    t_fill(g, 1.0f);
    t_fill(w, 0.2f);
    t_fill(bias, 1.0f);
    struct het_tensor *n1 = t_node(e, HET_OP_RMS_NORM, HET_TYPE_F32, K, M, 1, 1, x, NULL, NULL);
    het_set_op_param_f32(n1, 0, 1e-6f);
    struct het_tensor *n2 = t_node(e, HET_OP_MUL, HET_TYPE_F32, K, M, 1, 1, n1, g, NULL);
    struct het_tensor *n3 = t_node(e, HET_OP_MUL_MAT, HET_TYPE_F32, N, M, 1, 1, w, n2, NULL);
    struct het_tensor *n4 = t_node(e, HET_OP_ADD, HET_TYPE_F32, N, M, 1, 1, n3, bias, NULL);
    struct het_tensor *n5 = t_node(e, HET_OP_SILU, HET_TYPE_F32, N, M, 1, 1, n4, NULL, NULL);
    struct het_tensor *nodes[] = { n1, n2, n3, n4, n5 };
    float *ref = malloc((size_t)(N * M) * sizeof *ref);
    for (int64_t m = 0; m < M; m++) {
        double ss = 0;
        for (int64_t k = 0; k < K; k++) ss += (double)t_get(x, k, m, 0, 0) * t_get(x, k, m, 0, 0);
        double sc = 1.0 / sqrt(ss / K + 1e-6f);
        for (int64_t n = 0; n < N; n++) {
            double s = 0;
            for (int64_t k = 0; k < K; k++)
                s += (double)t_get(w, k, n, 0, 0) * (float)((float)(t_get(x, k, m, 0, 0) * sc) * t_get(g, k, 0, 0, 0));
            ref[m * N + n] = ref_silu((float)(s + t_get(bias, n, 0, 0, 0)));
        }
    }
    het_error err = { 0 };
    if (profile) CHECK(het_vulkan_profiling_enable(e->dev, true, &err) == HET_OK, "profiling: %s", err.msg);
    if (run_nodes(e, nodes, 5, "chain rms_norm>mul>mul_mat>add>silu"))
        check_close(e, "chain", n5, ref, 1e-5, 1e-4);
    if (profile) {
        struct het_vulkan_op_time rec[16];
        int n = het_vulkan_profiling_read(e->dev, rec, 16);
        CHECK(n == 5, "profiling: %d records for 5 nodes", n);
        bool sane = true;
        for (int i = 0; i < n; i++) sane = sane && rec[i].gpu_us >= 0 && rec[i].gpu_us < 60e6 && rec[i].op == nodes[i]->op;
        CHECK(sane, "profiling: records out of order or implausible");
        CHECK(het_vulkan_profiling_read(e->dev, rec, 16) == 0, "profiling: records not consumed");
        het_vulkan_profiling_enable(e->dev, false, NULL);
    }
    free(ref);
}

static void test_errors(struct env *e)
{
    env_reset(e);
    /* memory the device was never given */
    float *stray = aligned_alloc(4096, 4096);
    struct het_tensor *a = t_new(e, HET_TYPE_F32, 16, 1, 1, 1);
    struct het_tensor *b = t_slot(e);
    *b = *a;
    b->data = stray;
    struct het_tensor *d = t_node(e, HET_OP_ADD, HET_TYPE_F32, 16, 1, 1, 1, a, b, NULL);
    het_error err = { 0 };
    enum het_status st = het_device_run_split(e->dev, &d, 1, &err);
    if (st == HET_OK) st = het_device_sync(e->dev, &err);
    CHECK(st == HET_ERR_INVALID && strstr(err.msg, "registered"), "[%s] unregistered memory: status %d '%s'", e->cfg,
          (int)st, err.msg);
    free(stray);
    /* unsupported nodes are refused by supports_op and by run_split */
    struct het_tensor *w = t_new(e, HET_TYPE_Q8_0, 64, 4, 1, 1);
    w->type = HET_TYPE_Q5_0;
    struct het_tensor *x = t_new(e, HET_TYPE_F32, 64, 1, 1, 1);
    struct het_tensor *mm = t_node(e, HET_OP_MUL_MAT, HET_TYPE_F32, 4, 1, 1, 1, w, x, NULL);
    CHECK(!het_device_supports_op(e->dev, mm), "[%s] q5_0 mul_mat claimed supported", e->cfg);
    err.msg[0] = 0;
    st = het_device_run_split(e->dev, &mm, 1, &err);
    CHECK(st == HET_ERR_UNSUPPORTED && err.msg[0], "[%s] unsupported node: status %d", e->cfg, (int)st);
    struct het_tensor *r = t_node(e, HET_OP_ROPE, HET_TYPE_F32, 64, 1, 1, 1, x, x, NULL);
    r->op_params[0] = 64;
    r->op_params[1] = 1; /* no such mode */
    CHECK(!het_device_supports_op(e->dev, r), "[%s] rope mode 1 claimed supported", e->cfg);
    /* the device still works afterwards */
    struct het_tensor *s = t_node(e, HET_OP_SCALE, HET_TYPE_F32, 64, 1, 1, 1, x, NULL, NULL);
    het_set_op_param_f32(s, 0, 2.0f);
    t_fill(x, 1.0f);
    if (run1(e, s, "scale after errors")) CHECK(t_get(s, 5, 0, 0, 0) == 2.0f * t_get(x, 5, 0, 0, 0), "scale after errors");
}

/* VkResult mapping, and a device marked lost (as after VK_ERROR_DEVICE_LOST):
 * it refuses every node and split with HET_ERR_DEVICE_LOST and still frees. */
static void test_lost(struct env *e)
{
    het_error err = { 0 };
    CHECK(het_vk_status(VK_ERROR_OUT_OF_DEVICE_MEMORY) == HET_ERR_NOMEM, "OOM maps to HET_ERR_NOMEM");
    CHECK(het_vk_status(VK_ERROR_OUT_OF_HOST_MEMORY) == HET_ERR_NOMEM, "host OOM maps to HET_ERR_NOMEM");
    CHECK(het_vk_status(VK_ERROR_INCOMPATIBLE_DRIVER) == HET_ERR_NO_DEVICE, "no driver maps to HET_ERR_NO_DEVICE");
    struct het_vk_ctx *ctx = het_vk_ctx_of(e->dev);
    enum het_status st = het_vk_fail(ctx, VK_ERROR_DEVICE_LOST, &err, "vkQueueSubmit");
    CHECK(st == HET_ERR_DEVICE_LOST && ctx->lost && strstr(err.msg, "VK_ERROR_DEVICE_LOST") && !strchr(err.msg, '\n'),
          "device lost: status %d lost %d '%s'", (int)st, ctx->lost, err.msg);
    env_reset(e);
    struct het_tensor *x = t_new(e, HET_TYPE_F32, 8, 1, 1, 1);
    struct het_tensor *d = t_node(e, HET_OP_SILU, HET_TYPE_F32, 8, 1, 1, 1, x, NULL, NULL);
    CHECK(!het_device_supports_op(e->dev, d), "lost device still claims ops");
    st = het_device_run_split(e->dev, &d, 1, &err);
    CHECK(st == HET_ERR_DEVICE_LOST, "lost device run_split: status %d", (int)st);
    CHECK(het_device_sync(e->dev, &err) == HET_ERR_DEVICE_LOST, "lost device sync");
}

/* Weights in their own WEIGHTS region (filled before registration: mirrored
 * devices upload such regions once). */
static void test_weight_region(struct env *e)
{
    env_reset(e);
    const int64_t K = 256, N = 33, M = 2;
    size_t bytes = type_row_bytes(HET_TYPE_Q4_K, K) * N;
    size_t cap = (bytes + 4095) & ~(size_t)4095;
    uint8_t *buf = aligned_alloc(4096, cap);
    struct het_tensor *w = t_slot(e);
    w->type = HET_TYPE_Q4_K;
    w->ne[0] = K; w->ne[1] = N; w->ne[2] = w->ne[3] = 1;
    w->nb[0] = 144; w->nb[1] = type_row_bytes(HET_TYPE_Q4_K, K); w->nb[2] = w->nb[3] = w->nb[1] * N;
    w->data = buf;
    w->flags = HET_TENSOR_FLAG_WEIGHT;
    fill_weights(w);
    het_error err = { 0 };
    enum het_status st = het_device_register_memory(e->dev, buf, cap, HET_MEMORY_WEIGHTS, &err);
    CHECK(st == HET_OK, "[%s] register weights: %s", e->cfg, err.msg);
    struct het_tensor *x = t_new(e, HET_TYPE_F32, K, M, 1, 1);
    t_fill(x, 1.0f);
    struct het_tensor *d = t_node(e, HET_OP_MUL_MAT, HET_TYPE_F32, N, M, 1, 1, w, x, NULL);
    float *ref = malloc((size_t)(N * M) * sizeof *ref);
    ref_mul_mat(w, x, ref);
    if (st == HET_OK && run1(e, d, "mul_mat from weight region")) check_nmse(e, "weight region", d, ref, 1e-9);
    het_device_unregister_memory(e->dev, buf);
    free(ref);
    free(buf);
}

/* A Q8_0 matrix larger than maxStorageBufferRange (binding windows at the
 * real limit); rows near each window boundary and a random sample checked. */
static void test_big_matrix(het_device *dev)
{
    struct het_vulkan_device_info info;
    het_vulkan_device_get_info(dev, &info);
    const int64_t K = 1024;
    size_t row = type_row_bytes(HET_TYPE_Q8_0, K);
    uint64_t limit = info.max_storage_buffer_range;
    if (limit > (1ull << 30)) {
        printf("big matrix: maxStorageBufferRange %llu too large to exceed here, skipped\n", (unsigned long long)limit);
        return;
    }
    int64_t N = (int64_t)(limit / row) + 7000;
    size_t wbytes = row * (size_t)N, cap = (wbytes + (1u << 16) + 4095) & ~(size_t)4095;
    uint8_t *buf = aligned_alloc(4096, cap);
    if (!buf) { CHECK(false, "big matrix: no host memory"); return; }
    rand_blocks(HET_TYPE_Q8_0, buf, K * N);
    float *x = (float *)(buf + wbytes + 256 - wbytes % 256);
    for (int64_t k = 0; k < K; k++) x[k] = het_test_rand_normal();
    het_error err = { 0 };
    enum het_status st = het_device_register_memory(dev, buf, cap, HET_MEMORY_SCRATCH, &err);
    CHECK(st == HET_OK, "big matrix: register %zu bytes: %s", cap, err.msg);
    /* out needs N floats: not in the arena; use a separate region */
    size_t ocap = ((size_t)N * 4 + 4095) & ~(size_t)4095;
    float *o = aligned_alloc(4096, ocap);
    if (st == HET_OK) st = het_device_register_memory(dev, o, ocap, HET_MEMORY_SCRATCH, &err);
    struct het_tensor w = { .type = HET_TYPE_Q8_0, .ne = { K, N, 1, 1 }, .nb = { 34, row, row * N, row * N },
                            .data = buf, .name = "big_w" };
    struct het_tensor xt = { .type = HET_TYPE_F32, .ne = { K, 1, 1, 1 }, .nb = { 4, 4 * K, 4 * K, 4 * K },
                             .data = x, .name = "big_x" };
    struct het_tensor d = { .type = HET_TYPE_F32, .ne = { N, 1, 1, 1 }, .nb = { 4, 4 * N, 4 * N, 4 * N },
                            .op = HET_OP_MUL_MAT, .src = { &w, &xt }, .data = o, .name = "big_out" };
    CHECK(het_device_supports_op(dev, &d), "big matrix (%lld x %lld q8_0, %zu bytes) unsupported", (long long)K,
          (long long)N, wbytes);
    struct het_tensor *node = &d;
    bool prof = info.timestamps && het_vulkan_profiling_enable(dev, true, NULL) == HET_OK;
    if (st == HET_OK) st = het_device_run_split(dev, &node, 1, &err);
    if (st == HET_OK) st = het_device_sync(dev, &err);
    CHECK(st == HET_OK, "big matrix: %s", err.msg);
    struct het_vulkan_op_time rec = { 0 };
    if (prof) {
        CHECK(het_vulkan_profiling_read(dev, &rec, 1) == 1, "big matrix: no profiling record");
        het_vulkan_profiling_enable(dev, false, NULL);
    }
    if (st == HET_OK) {
        float wrow[1024];
        int64_t per_window = (int64_t)(limit / row);
        double max_rel = 0;
        for (int s = 0; s < 600; s++) {
            int64_t n = s < 8 ? (s / 2 + 1) * per_window - 4 + s % 2 * 5 : (int64_t)(het_test_rand_u64() % (uint64_t)N);
            if (n < 0 || n >= N) continue;
            ref_dequant(HET_TYPE_Q8_0, buf + (size_t)n * row, wrow, K);
            double ref = 0, mag = 0;
            for (int64_t k = 0; k < K; k++) {
                ref += (double)wrow[k] * x[k];
                mag += fabs((double)wrow[k] * x[k]);
            }
            double rel = fabs(o[n] - ref) / (mag + 1e-30);
            if (rel > max_rel) max_rel = rel;
        }
        CHECK(max_rel < 1e-5, "big matrix: max relative error %g", max_rel);
        printf("big matrix: %lld x %lld q8_0 (%zu MB > range %llu MB): max rel err %.2e, GPU %.1f ms\n",
               (long long)K, (long long)N, wbytes >> 20, (unsigned long long)(limit >> 20), max_rel,
               rec.gpu_us / 1000.0);
    }
    het_device_unregister_memory(dev, o);
    het_device_unregister_memory(dev, buf);
    free(o);
    free(buf);
}

/* ------------------------------------------------------------------------ */

static void run_suite(struct env *e, bool full)
{
    test_binary(e, HET_OP_ADD, HET_TYPE_F32, false);
    test_binary(e, HET_OP_ADD, HET_TYPE_F16, true);
    test_binary(e, HET_OP_MUL, HET_TYPE_F32, false);
    test_binary(e, HET_OP_MUL, HET_TYPE_F32, true);
    test_binary(e, HET_OP_SWIGLU, HET_TYPE_F32, false);
    test_unary(e, HET_OP_SCALE, HET_TYPE_F32);
    test_unary(e, HET_OP_SCALE, HET_TYPE_F16);
    test_unary(e, HET_OP_SILU, HET_TYPE_F32);
    test_unary(e, HET_OP_SIGMOID, HET_TYPE_F32);
    test_binary(e, HET_OP_DIV, HET_TYPE_F32, false);
    test_binary(e, HET_OP_DIV, HET_TYPE_F16, true);
    test_rms_norm(e, 999, false);
    test_rms_norm(e, 5, true);
    test_softmax(e, 10, 3);
    test_softmax(e, 0, -1);
    test_softmax(e, 4, -1); /* fewer mask rows than rows: modulo, row 1 fully masked */
    test_rope(e, HET_ROPE_NORMAL, 64, 10000.0f, 1.0f);
    test_rope(e, HET_ROPE_NEOX, 32, 1000000.0f, 0.5f);
    test_rope(e, HET_ROPE_NEOX, 0, 10000.0f, 1.0f); /* nothing rotates */
    test_cpy(e, HET_TYPE_F32, HET_TYPE_F16);
    test_cpy(e, HET_TYPE_F16, HET_TYPE_F32);
    test_cpy(e, HET_TYPE_F32, HET_TYPE_F32);
    test_cont(e, HET_TYPE_F32);
    test_cont(e, HET_TYPE_F16);
    static const enum het_type wtypes[] = { HET_TYPE_F32, HET_TYPE_F16, HET_TYPE_Q4_0,
                                            HET_TYPE_Q8_0, HET_TYPE_Q4_K, HET_TYPE_Q6_K };
    for (size_t i = 0; i < sizeof wtypes / sizeof wtypes[0]; i++) test_get_rows(e, wtypes[i], 37, false, false);
    test_get_rows(e, HET_TYPE_F16, 300, false, false); /* windows when ranges are small */
    test_get_rows(e, HET_TYPE_Q6_K, 11, true, false);
    test_get_rows(e, HET_TYPE_Q4_0, 11, true, true);
    test_mul_mat_all(e);
    test_mul_mat_id_all(e);
    test_mul_mat_id_prefill_all(e);
    test_moe_route_all(e);
    if (full) {
        /* wide enough for several row and column windows at 64 KiB ranges */
        test_mul_mat(e, &(struct mm_case){ HET_TYPE_F16, 512, 300, 70, 1, 1, 1, 1, false, false });
        test_mul_mat(e, &(struct mm_case){ HET_TYPE_Q6_K, 512, 300, 1, 1, 1, 1, 1, false, false });
    }
    test_attn(e, &(struct attn_case){ HET_TYPE_F16, 64, 8, 2, 5, 18, 1, 1 });
    test_attn(e, &(struct attn_case){ HET_TYPE_F32, 64, 4, 4, 3, 0, 1, 1 });
    test_attn(e, &(struct attn_case){ HET_TYPE_F16, 128, 4, 1, 1, 150, 1, 1 }); /* decode, several key tiles */
    test_attn(e, &(struct attn_case){ HET_TYPE_F32, 80, 6, 3, 9, 40, 1, 1 });   /* cache < 64 KiB (B, C) */
    test_attn(e, &(struct attn_case){ HET_TYPE_F16, 32, 4, 2, 3, 6, 2, 2 });    /* batched K/V */
    test_attn(e, &(struct attn_case){ HET_TYPE_F16, 32, 4, 2, 3, 6, 3, 1 });    /* K/V shared by the batch */
    test_attn(e, &(struct attn_case){ HET_TYPE_F16, 64, 4, 2, 19, 7, 1, 1 });   /* several token blocks */
    test_attn(e, &(struct attn_case){ HET_TYPE_F32, 128, 2, 1, 11, 0, 1, 1 });
    test_chain(e, full);
    test_weight_region(e);
    test_errors(e);
}

static void run_config(const char *name, const struct het_vk_options *opt, bool full)
{
    het_error err = { 0 };
    het_device *dev = het_vk_device_init_opts(-1, opt, &err);
    CHECK(dev != NULL, "[%s] init: %s", name, err.msg);
    if (!dev) return;
    printf("[%s] %s: %s\n", name, het_device_name(dev), het_device_description(dev));
    struct env e = { .dev = dev, .cfg = name, .cap = 8u << 20, .max_bind = opt ? opt->max_bind : 0 };
    e.arena = aligned_alloc(4096, e.cap);
    memset(e.arena, 0, e.cap);
    enum het_status st = het_device_register_memory(dev, e.arena, e.cap, HET_MEMORY_SCRATCH, &err);
    CHECK(st == HET_OK, "[%s] register arena: %s", name, err.msg);
    clock_t t0 = clock();
    if (st == HET_OK) run_suite(&e, full);
    if (st == HET_OK && !opt) test_big_matrix(dev);
    struct het_device_stats stats;
    het_device_get_stats(dev, &stats);
    printf("[%s] %llu splits, %llu nodes, %llu bytes copied, %.1f s cpu\n", name,
           (unsigned long long)stats.n_splits, (unsigned long long)stats.n_nodes,
           (unsigned long long)stats.copied_bytes, (double)(clock() - t0) / CLOCKS_PER_SEC);
    if (!opt) test_lost(&e); /* last: the device is unusable afterwards */
    if (opt && opt->no_import) CHECK(stats.copied_bytes > 0, "[%s] mirrored device copied nothing", name);
    /* a discrete device uploads registered weights once (0 copies only where it reads them in place) */
    if (!opt && het_vulkan_device_imports_weights(dev))
        CHECK(stats.copied_bytes == 0, "[%s] importing device copied %llu bytes", name,
              (unsigned long long)stats.copied_bytes);
    het_device_unregister_memory(dev, e.arena);
    het_device_free(dev);
    free(e.arena);
}

static void test_listing(void)
{
    struct het_vulkan_device_info infos[8];
    int n = 0;
    het_error err = { 0 };
    enum het_status st = het_vulkan_device_list(infos, 8, &n, &err);
    CHECK(st == HET_OK && n >= 1, "device list: %s", err.msg);
    for (int i = 0; i < n && i < 8; i++) {
        const struct het_vulkan_device_info *d = &infos[i];
        printf("vulkan%d: %s type=%d driver=%s (%s) subgroup=%u%s heaps=%d 16bit=%d host_import=%d dma_buf=%d "
               "timestamps=%d range=%llu usable=%d\n", i, d->name, (int)d->type, d->driver_name, d->driver_info,
               d->subgroup_size, d->subgroup_arithmetic ? "+arith" : "", d->n_heaps, d->storage_16bit,
               d->external_memory_host, d->dma_buf, d->timestamps, (unsigned long long)d->max_storage_buffer_range,
               d->usable);
        CHECK(d->n_heaps > 0 && d->heaps[0].size > 0, "vulkan%d: no memory heaps", i);
    }
    CHECK(het_vulkan_device_count(NULL) == n, "device count disagrees with the list");
    het_device *bad = het_vulkan_device_init(n + 3, &err);
    CHECK(bad == NULL && err.status == HET_ERR_NO_DEVICE, "init of a missing index: status %d", (int)err.status);
    het_device_free(bad);
}

#if defined(__SANITIZE_ADDRESS__)
/* Mesa's ICD leaks 128 bytes of a static initialiser (libz3, via LLVM) each
 * time the loader unloads it at vkDestroyInstance; the frames are gone by
 * the time LeakSanitizer reports, so no suppression can name them. One
 * instance held for the whole run keeps the ICD loaded and that memory
 * reachable, so the leak check stays on for everything het allocates. */
static VkInstance keep_icd_loaded;
#endif

/* Texel view sizes never have bits 8..15 all zero where the buffer has room
 * (llvmpipe compiles a kernel again per value of "level zero only"), stay
 * inside the buffer and the texel limit, and cover the range. */
static void test_texel_range(void)
{
    struct { VkDeviceSize range, room; uint64_t max; VkDeviceSize want; } c[] = {
        { 16384, 4096, 1u << 27, 16384 },        /* bits 8..15 = 64: kept       */
        { 65536, 4096, 1u << 27, 65536 + 256 },  /* bits 8..15 = 0: extended    */
        { 65528, 4096, 1u << 27, 65536 + 256 },  /* rounded to a texel first    */
        { 65536, 255, 1u << 27, 65536 },         /* no room in the buffer: kept */
        { 65536, 256, 1u << 27, 65536 + 256 },   /* exactly enough room         */
        { 65536, 4096, 4096, 65536 },            /* the texel limit: kept       */
        { 4096, 4096, 1u << 27, 4096 },          /* bits 8..15 = 16: kept       */
        { 200, 0, 1u << 27, 208 },               /* under 256 bytes: kept       */
        { 1u << 20, 1u << 12, 1u << 27, (1u << 20) + 256 },
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        VkDeviceSize got = het_vk_texel_range(c[i].range, c[i].room, c[i].max);
        CHECK(got == c[i].want, "texel range %llu room %llu max %llu: %llu, want %llu", (unsigned long long)c[i].range,
              (unsigned long long)c[i].room, (unsigned long long)c[i].max, (unsigned long long)got,
              (unsigned long long)c[i].want);
    }
}

int main(void)
{
#if defined(__SANITIZE_ADDRESS__)
    het_vk_instance_create(&keep_icd_loaded, NULL);
#endif
    if (het_vulkan_device_count(NULL) == 0) het_test_skip("no Vulkan device (install mesa-vulkan-drivers for lavapipe)");
    het_test_seed(0x5eed1234);
    test_texel_range();
    test_listing();
    run_config("A", NULL, true);
    run_config("B", &(struct het_vk_options){ .no_import = true, .no_subgroup = true, .no_gemm = true,
                                              .no_rows = true, .max_bind = 64u << 10 }, true);
    run_config("C", &(struct het_vk_options){ .max_bind = 64u << 10, .max_alloc = 256u << 10 }, true);
    run_config("D", &(struct het_vk_options){ .no_rows = true }, false);
    return het_test_finish();
}
