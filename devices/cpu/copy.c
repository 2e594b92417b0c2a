/*
 * copy.c — CPU kernels for CPY and CONT (copy with type conversion).
 *
 * Both walk source and destination in row-major logical order (ne0 fastest)
 * and may convert between F32, F16 and BF16:
 *  - CPY: src0 is copied into dst's storage, dst being a view of src1 (a
 *    slice of the KV cache, say). Shapes may differ as long as the element
 *    counts agree; elements pair up by their flat logical index, as in
 *    ggml_cpy.
 *  - CONT: dst is a dense copy of the strided src0, same shape.
 * The walk goes in runs that are contiguous in both tensors (bounded by the
 * end of a source row and of a destination row); a run whose elements are
 * adjacent in memory on both sides is converted in bulk, anything else
 * element by element. Threads split the flat element range.
 */
#include "devices/cpu/cpu_ops.h"
#include "devices/cpu/vec.h"

#define COPY_CHUNK 256 /* floats staged at once when converting between two half types */

/* Position of a walk over a tensor in logical order. */
struct copy_cursor {
    const struct het_tensor *t;
    int64_t                  i[HET_MAX_DIMS];
};

static void copy_cursor_init(struct copy_cursor *c, const struct het_tensor *t, int64_t flat)
{
    c->t = t;
    for (int d = 0; d < HET_MAX_DIMS; d++) {
        c->i[d] = flat % t->ne[d];
        flat /= t->ne[d];
    }
}

static char *copy_cursor_ptr(const struct copy_cursor *c)
{
    char *p = c->t->data;
    for (int d = 0; d < HET_MAX_DIMS; d++) p += c->i[d] * c->t->nb[d];
    return p;
}

/* Move k elements forward; k never crosses the end of the current row. */
static void copy_cursor_advance(struct copy_cursor *c, int64_t k)
{
    c->i[0] += k;
    for (int d = 0; d < HET_MAX_DIMS - 1 && c->i[d] == c->t->ne[d]; d++) {
        c->i[d] = 0;
        c->i[d + 1]++;
    }
}

static size_t copy_elem_size(enum het_type t) { return t == HET_TYPE_F32 ? 4 : 2; }

/* n adjacent elements, src to dst, converting through float when needed. */
static void copy_run_dense(enum het_cpu_isa isa, int64_t n, void *dst, enum het_type tdst, const void *src,
                           enum het_type tsrc)
{
    if (tdst == tsrc) { memcpy(dst, src, (size_t)n * copy_elem_size(tsrc)); return; }
    if (tsrc == HET_TYPE_F32 && tdst == HET_TYPE_F16) { het_vec_f32_to_f16(isa, n, dst, src); return; }
    if (tsrc == HET_TYPE_F32 && tdst == HET_TYPE_BF16) { het_vec_f32_to_bf16(n, dst, src); return; }
    if (tsrc == HET_TYPE_F16 && tdst == HET_TYPE_F32) { het_vec_f16_to_f32(isa, n, dst, src); return; }
    if (tsrc == HET_TYPE_BF16 && tdst == HET_TYPE_F32) { het_vec_bf16_to_f32(n, dst, src); return; }
    /* F16 <-> BF16 */
    float buf[COPY_CHUNK];
    for (int64_t i = 0; i < n; i += COPY_CHUNK) {
        int64_t k = n - i < COPY_CHUNK ? n - i : COPY_CHUNK;
        const uint16_t *s = (const uint16_t *)src + i;
        uint16_t *d = (uint16_t *)dst + i;
        if (tsrc == HET_TYPE_F16) { het_vec_f16_to_f32(isa, k, buf, s); het_vec_f32_to_bf16(k, d, buf); }
        else                      { het_vec_bf16_to_f32(k, buf, s); het_vec_f32_to_f16(isa, k, d, buf); }
    }
}

static void copy_run_strided(int64_t n, char *dst, size_t sd, enum het_type tdst, const char *src, size_t ss,
                             enum het_type tsrc)
{
    const size_t es = copy_elem_size(tsrc);
    for (int64_t i = 0; i < n; i++) {
        if (tdst == tsrc) memcpy(dst + i * sd, src + i * ss, es);
        else              het_vec_store_elem(tdst, dst + i * sd, het_vec_load_elem(tsrc, src + i * ss));
    }
}

static bool copy_type_ok(enum het_type t)
{
    return t == HET_TYPE_F32 || t == HET_TYPE_F16 || t == HET_TYPE_BF16;
}

/* Copy src into dst element by element in logical order, in parts. */
static enum het_status copy_compute(const struct het_compute_params *p, struct het_tensor *dst,
                                    const struct het_tensor *src)
{
    if (!src) return HET_ERR_INVALID;
    if (!copy_type_ok(src->type) || !copy_type_ok(dst->type)) return HET_ERR_UNSUPPORTED;
    const int64_t n = het_nelements(dst);
    if (het_nelements(src) != n) return HET_ERR_INVALID;

    const bool dense = src->nb[0] == copy_elem_size(src->type) && dst->nb[0] == copy_elem_size(dst->type);
    const int64_t np = het_cpu_n_parts(p, n, HET_VEC_PART_ELEMS);
    for (int64_t k = het_cpu_part_first(p, np); k < np; k = het_cpu_part_next(p, np, k)) {
        int64_t f0, f1;
        het_vec_split(n, (int)k, (int)np, &f0, &f1);
        struct copy_cursor cs, cd;
        copy_cursor_init(&cs, src, f0);
        copy_cursor_init(&cd, dst, f0);
        for (int64_t f = f0; f < f1;) {
            int64_t run = f1 - f;
            if (src->ne[0] - cs.i[0] < run) run = src->ne[0] - cs.i[0];
            if (dst->ne[0] - cd.i[0] < run) run = dst->ne[0] - cd.i[0];
            if (dense) copy_run_dense(p->isa, run, copy_cursor_ptr(&cd), dst->type, copy_cursor_ptr(&cs), src->type);
            else copy_run_strided(run, copy_cursor_ptr(&cd), dst->nb[0], dst->type, copy_cursor_ptr(&cs), src->nb[0],
                                  src->type);
            copy_cursor_advance(&cs, run);
            copy_cursor_advance(&cd, run);
            f += run;
        }
    }
    return HET_OK;
}

enum het_status het_cpu_cpy(const struct het_compute_params *p, struct het_tensor *dst)
{
    return copy_compute(p, dst, dst->src[0]);
}

enum het_status het_cpu_cont(const struct het_compute_params *p, struct het_tensor *dst)
{
    if (dst->src[0] && !het_same_shape(dst, dst->src[0])) return HET_ERR_INVALID;
    return copy_compute(p, dst, dst->src[0]);
}
