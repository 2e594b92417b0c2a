/*
 * vec.h — small vector helpers shared by the CPU kernels (internal).
 *
 * Each helper works on one contiguous run of n elements. The portable
 * versions are plain loops; those whose speed matters (exp, silu, F16
 * conversion) have AVX2 twins in devices/cpu/arch/avx2/vec_avx2.c, which is
 * the only place compiled with -mavx2. The het_vec_* wrappers pick one by
 * the kernel's ISA level, so callers stay free of #ifdefs. AVX-512 machines
 * use the AVX2 versions, these ops being memory-bound, except silu and
 * swiglu (arch/avx512/vec_avx512.c: an exp and a divide per element).
 * Include only from files built with OpenMP (all of libhet is).
 */
#ifndef HET_CPU_VEC_H
#define HET_CPU_VEC_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "devices/cpu/cpu_ops.h"
#include "het/type.h"

/* ---- AVX2 twins (arch/avx2/vec_avx2.c) ----------------------------------- */
void  het_vec_silu_f32_avx2(int64_t n, float *y, const float *x);
void  het_vec_swiglu_f32_avx2(int64_t n, float *y, const float *g, const float *u);
float het_vec_max_f32_avx2(int64_t n, const float *x);
float het_vec_exp_sum_f32_avx2(int64_t n, float *y, const float *x, float m);
void  het_vec_f16_to_f32_avx2(int64_t n, float *y, const uint16_t *x);
void  het_vec_f32_to_f16_avx2(int64_t n, uint16_t *y, const float *x);
double het_vec_sumsq_f64_avx2(int64_t n, const float *x);

/* ---- AVX-512 twins (arch/avx512/vec_avx512.c) ------------------------------ */
void  het_vec_silu_f32_avx512(int64_t n, float *y, const float *x);
void  het_vec_swiglu_f32_avx512(int64_t n, float *y, const float *g, const float *u);

static inline bool het_vec_use_avx2(enum het_cpu_isa isa) { return isa >= HET_CPU_ISA_AVX2; }
static inline bool het_vec_use_avx512(enum het_cpu_isa isa) { return isa >= HET_CPU_ISA_AVX512; }

/* ---- plain arithmetic ------------------------------------------------------
 * "omp simd" makes GCC vectorise these at -O2 (its default cost model there
 * refuses loops of unknown length); y may be an input (same index only). */

/* y = a + b */
static inline void het_vec_add_f32(int64_t n, float *y, const float *a, const float *b)
{
#pragma omp simd
    for (int64_t i = 0; i < n; i++) y[i] = a[i] + b[i];
}

/* y = a * b */
static inline void het_vec_mul_f32(int64_t n, float *y, const float *a, const float *b)
{
#pragma omp simd
    for (int64_t i = 0; i < n; i++) y[i] = a[i] * b[i];
}

/* y = x * s */
static inline void het_vec_scale_f32(int64_t n, float *y, const float *x, float s)
{
#pragma omp simd
    for (int64_t i = 0; i < n; i++) y[i] = x[i] * s;
}

/* y += x * s */
static inline void het_vec_mad_f32(int64_t n, float *y, const float *x, float s)
{
#pragma omp simd
    for (int64_t i = 0; i < n; i++) y[i] += x[i] * s;
}

/* ---- transcendental ------------------------------------------------------ */

static inline float het_silu_f32(float x) { return x / (1.0f + expf(-x)); }

/* y = silu(x) = x * sigmoid(x) */
static inline void het_vec_silu_f32(enum het_cpu_isa isa, int64_t n, float *y, const float *x)
{
    if (het_vec_use_avx512(isa)) { het_vec_silu_f32_avx512(n, y, x); return; }
    if (het_vec_use_avx2(isa)) { het_vec_silu_f32_avx2(n, y, x); return; }
    for (int64_t i = 0; i < n; i++) y[i] = het_silu_f32(x[i]);
}

/* y = silu(g) * u */
static inline void het_vec_swiglu_f32(enum het_cpu_isa isa, int64_t n, float *y, const float *g,
                                      const float *u)
{
    if (het_vec_use_avx512(isa)) { het_vec_swiglu_f32_avx512(n, y, g, u); return; }
    if (het_vec_use_avx2(isa)) { het_vec_swiglu_f32_avx2(n, y, g, u); return; }
    for (int64_t i = 0; i < n; i++) y[i] = het_silu_f32(g[i]) * u[i];
}

/* max(x) (-INFINITY for n == 0) */
static inline float het_vec_max_f32(enum het_cpu_isa isa, int64_t n, const float *x)
{
    if (het_vec_use_avx2(isa)) return het_vec_max_f32_avx2(n, x);
    float m = -INFINITY;
    for (int64_t i = 0; i < n; i++) m = x[i] > m ? x[i] : m;
    return m;
}

/* y = exp(x - m), returns sum(y). y may be x. m must be finite. */
static inline float het_vec_exp_sum_f32(enum het_cpu_isa isa, int64_t n, float *y, const float *x, float m)
{
    if (het_vec_use_avx2(isa)) return het_vec_exp_sum_f32_avx2(n, y, x, m);
    double sum = 0;
    for (int64_t i = 0; i < n; i++) { y[i] = expf(x[i] - m); sum += y[i]; }
    return (float)sum;
}

/* sum of x[i]*x[i], the float squares added in double (the AVX2 twin keeps
 * several partial sums: same terms, another order) */
static inline double het_vec_sumsq_f64(enum het_cpu_isa isa, int64_t n, const float *x)
{
    if (het_vec_use_avx2(isa)) return het_vec_sumsq_f64_avx2(n, x);
    double sum = 0;
    for (int64_t i = 0; i < n; i++) sum += (double)(x[i] * x[i]);
    return sum;
}

/* ---- type conversion of contiguous runs ---------------------------------- */

static inline void het_vec_f16_to_f32(enum het_cpu_isa isa, int64_t n, float *y, const uint16_t *x)
{
    if (het_vec_use_avx2(isa)) { het_vec_f16_to_f32_avx2(n, y, x); return; }
    for (int64_t i = 0; i < n; i++) y[i] = het_fp16_to_fp32(x[i]);
}

static inline void het_vec_f32_to_f16(enum het_cpu_isa isa, int64_t n, uint16_t *y, const float *x)
{
    if (het_vec_use_avx2(isa)) { het_vec_f32_to_f16_avx2(n, y, x); return; }
    for (int64_t i = 0; i < n; i++) y[i] = het_fp32_to_fp16(x[i]);
}

static inline void het_vec_bf16_to_f32(int64_t n, float *y, const uint16_t *x)
{
    for (int64_t i = 0; i < n; i++) y[i] = het_bf16_to_fp32(x[i]);
}

static inline void het_vec_f32_to_bf16(int64_t n, uint16_t *y, const float *x)
{
    for (int64_t i = 0; i < n; i++) y[i] = het_fp32_to_bf16(x[i]);
}

/* One element of type F32, F16 or BF16 at p, as float. */
static inline float het_vec_load_elem(enum het_type type, const void *p)
{
    uint16_t h;
    float f;
    switch (type) {
    case HET_TYPE_F16:  memcpy(&h, p, 2); return het_fp16_to_fp32(h);
    case HET_TYPE_BF16: memcpy(&h, p, 2); return het_bf16_to_fp32(h);
    default:            memcpy(&f, p, 4); return f;
    }
}

/* Store v at p as F32, F16 or BF16. */
static inline void het_vec_store_elem(enum het_type type, void *p, float v)
{
    uint16_t h;
    switch (type) {
    case HET_TYPE_F16:  h = het_fp32_to_fp16(v); memcpy(p, &h, 2); return;
    case HET_TYPE_BF16: h = het_fp32_to_bf16(v); memcpy(p, &h, 2); return;
    default:            memcpy(p, &v, 4); return;
    }
}

/* ---- row bookkeeping shared by the kernels ------------------------------- */

/* This thread's share [*r0, *r1) of n rows split into nth contiguous blocks. */
static inline void het_vec_split(int64_t n, int ith, int nth, int64_t *r0, int64_t *r1)
{
    *r0 = n * ith / nth;
    *r1 = n * (ith + 1) / nth;
}

/* Fewest elements worth a part of their own (het_cpu_n_parts): about where
 * the atomic that hands the part out and the cache lines it moves between
 * cores stop costing more than the work (stories260K pp64: 1024 was faster
 * than 2048 and 4096). */
#define HET_VEC_PART_ELEMS 1024

/* Rows of ne0 elements per part, at least. */
static inline int64_t het_vec_part_rows(int64_t ne0)
{
    return ne0 >= HET_VEC_PART_ELEMS ? 1 : HET_VEC_PART_ELEMS / (ne0 > 0 ? ne0 : 1);
}

/* Address of row (i1, i2, i3) of t. */
static inline char *het_vec_row(const struct het_tensor *t, int64_t i1, int64_t i2, int64_t i3)
{
    return (char *)t->data + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3];
}

/* Ask for n rows of row_bytes, stride bytes apart from the one at p, into
 * the core's caches (a cache line at a time); once: rows read once, asked
 * for non-temporally (NTA on x86), so they do not push other data out. */
static inline void het_vec_prefetch_rows(const char *p, int64_t n, size_t stride, size_t row_bytes, bool once)
{
    for (int64_t j = 0; j < n; j++)
        for (size_t o = 0; o < row_bytes; o += 64) {
            if (once) __builtin_prefetch(p + (size_t)j * stride + o, 0, 0);
            else __builtin_prefetch(p + (size_t)j * stride + o);
        }
}

/* Do the storage extents of a and b (het_nbytes bytes from each data
 * pointer) share a byte? Conservative for views and strides. */
static inline bool het_vec_overlap(const struct het_tensor *a, const struct het_tensor *b)
{
    const uint8_t *x = a->data, *y = b->data;
    return x < y + het_nbytes(b) && y < x + het_nbytes(a);
}

/* Split flat row index r of t into (i1, i2, i3). */
static inline void het_vec_row_index(const struct het_tensor *t, int64_t r, int64_t *i1, int64_t *i2, int64_t *i3)
{
    *i1 = r % t->ne[1];
    *i2 = (r / t->ne[1]) % t->ne[2];
    *i3 = r / (t->ne[1] * t->ne[2]);
}

/* The rows of t (every index but dim 0's) that this thread takes, in parts
 * of at least het_vec_part_rows(t->ne[0]) rows handed out by the step's
 * counter:
 *     struct het_cpu_rows it = het_cpu_rows_begin(p, t);
 *     while (het_cpu_rows_next(&it)) ... row (it.i1, it.i2, it.i3) ...
 * The loop is one step (het_cpu_part_first/next): run it to its end. */
struct het_cpu_rows {
    const struct het_compute_params *p;
    const struct het_tensor         *t;
    int64_t n, np;        /* rows, parts                       */
    int64_t k;            /* the part being walked, -1 before  */
    int64_t r, r1;        /* next row of the part, its end     */
    int64_t i1, i2, i3;   /* the row het_cpu_rows_next gave    */
};

static inline struct het_cpu_rows het_cpu_rows_begin(const struct het_compute_params *p, const struct het_tensor *t)
{
    const int64_t n = het_nrows(t);
    const int64_t np = het_cpu_n_parts(p, n, het_vec_part_rows(t->ne[0]));
    return (struct het_cpu_rows){ .p = p, .t = t, .n = n, .np = np, .k = -1 };
}

static inline bool het_cpu_rows_next(struct het_cpu_rows *it)
{
    while (it->r >= it->r1) {
        if (it->k >= it->np) return false; /* the step is over: ask no more */
        it->k = it->k < 0 ? het_cpu_part_first(it->p, it->np) : het_cpu_part_next(it->p, it->np, it->k);
        if (it->k >= it->np) return false;
        het_vec_split(it->n, (int)it->k, (int)it->np, &it->r, &it->r1);
    }
    het_vec_row_index(it->t, it->r++, &it->i1, &it->i2, &it->i3);
    return true;
}

#endif /* HET_CPU_VEC_H */
