/*
 * npu_layout.c — repacking GGUF Q4_0 / Q4_1 / Q8_0 / Q4_K weights into the
 * NPU tile layout, and the reference dequantisation of that layout.
 *
 * Every source group of 32 weights is read as (q[32], scale, bias) such that
 * the GGUF reference dequantisation is exactly (float)(q - zp) * scale - bias
 * evaluated in f32: Q4_0 is (q - 8) * d; Q4_1 is q * d + m, i.e. bias = -m;
 * Q8_0 is q * d; Q4_K group j is (d * sc_j) * q - dmin * m_j, where both
 * products are exact in f32 (11-bit x 6-bit mantissas). scale and bias are
 * stored as bf16 pairs hi + lo; a value with at most 17 significant bits
 * always splits exactly (hi keeps 8, the remainder needs at most 8), which
 * het_npu_split_bf16 checks for every value it stores.
 */
#include "devices/npu/npu_layout.h"

#include <math.h>
#include <string.h>

#include "model/quant_impl.h"

/* ---- bf16 pairs ------------------------------------------------------------ */

static uint32_t f32_bits(float f) { uint32_t u; memcpy(&u, &f, sizeof u); return u; }

float het_npu_join_bf16(uint16_t hi, uint16_t lo)
{
    return het_bf16_to_fp32(hi) + het_bf16_to_fp32(lo);
}

bool het_npu_split_bf16(float v, uint16_t *hi, uint16_t *lo)
{
    if (!isfinite(v)) return false;
    uint16_t h = het_fp32_to_bf16(v);
    float hf = het_bf16_to_fp32(h);
    if (!isfinite(hf)) return false;                 /* rounded up past the bf16 range */
    float r = v - hf;                                /* exact: v and hf share the top bits */
    uint16_t l = het_fp32_to_bf16(r);
    if (r == 0.0f) l = (uint16_t)((f32_bits(v) >> 16) & 0x8000u); /* -0 + -0 = -0, +0 + +0 = +0 */
    if (f32_bits(het_npu_join_bf16(h, l)) != f32_bits(v)) return false;
    *hi = h;
    *lo = l;
    return true;
}

/* ---- formats and planning --------------------------------------------------- */

enum het_npu_wfmt het_npu_wfmt_for(enum het_type type)
{
    switch (type) {
    case HET_TYPE_Q4_0:
    case HET_TYPE_Q4_1:
    case HET_TYPE_Q4_K: return HET_NPU_W_Q4;
    case HET_TYPE_Q8_0: return HET_NPU_W_I8;
    default:            return 0;
    }
}

/* Largest dimension the layout accepts (keeps every size computation far from
 * overflow and the tile index in 32 bits). */
#define NPU_MAX_DIM ((int64_t)1 << 28)

enum het_status het_npu_layout_check(enum het_type type, const int64_t ne[4], het_error *err)
{
    if (!het_npu_wfmt_for(type))
        return het_error_set(err, HET_ERR_UNSUPPORTED, "npu: weight type %s has no NPU layout "
                             "(supported: q4_0, q4_1, q8_0, q4_K)", het_type_name(type));
    for (int i = 0; i < 4; i++)
        if (ne[i] < 1 || ne[i] > NPU_MAX_DIM)
            return het_error_set(err, HET_ERR_UNSUPPORTED, "npu: weight dim %d = %lld out of range", i,
                                 (long long)ne[i]);
    if (ne[0] % HET_NPU_GROUP != 0)
        return het_error_set(err, HET_ERR_UNSUPPORTED, "npu: K = %lld is not a multiple of the group size %d",
                             (long long)ne[0], HET_NPU_GROUP);
    if (ne[0] % het_type_get_traits(type)->blck_size != 0)
        return het_error_set(err, HET_ERR_UNSUPPORTED, "npu: K = %lld is not a multiple of the %s block",
                             (long long)ne[0], het_type_name(type));
    double bytes = (double)ne[0] * (double)ne[1] * (double)ne[2] * (double)ne[3];
    if (bytes > (double)((int64_t)1 << 40))
        return het_error_set(err, HET_ERR_UNSUPPORTED, "npu: weight of %.0f elements is too large", bytes);
    return HET_OK;
}

static size_t align_up(size_t v, size_t a) { return (v + a - 1) / a * a; }

enum het_status het_npu_layout_plan(struct het_npu_wdesc *d, enum het_type type, const int64_t ne[4],
                                    het_error *err)
{
    enum het_status st = het_npu_layout_check(type, ne, err);
    if (st != HET_OK) return st;
    memset(d, 0, sizeof *d);
    d->fmt = het_npu_wfmt_for(type);
    d->src_type = type;
    d->flags = (type == HET_TYPE_Q4_1 || type == HET_TYPE_Q4_K) ? HET_NPU_WF_BIAS : 0;
    d->zp_bf16 = type == HET_TYPE_Q4_0 ? het_fp32_to_bf16(8.0f) : 0;
    d->K = ne[0];
    d->N = ne[1];
    d->Npad = (ne[1] + HET_NPU_NTILE - 1) / HET_NPU_NTILE * HET_NPU_NTILE;
    d->ne2 = ne[2];
    d->ne3 = ne[3];
    d->n_groups = d->K / HET_NPU_GROUP;
    d->n_tiles = d->Npad / HET_NPU_NTILE;
    d->tile_bytes = (size_t)HET_NPU_NTILE * (d->fmt == HET_NPU_W_Q4 ? HET_NPU_GROUP / 2 : HET_NPU_GROUP);

    const size_t n_params = (size_t)d->n_tiles * (size_t)d->n_groups * HET_NPU_NTILE;
    const size_t pbytes = align_up(n_params * sizeof(uint16_t), HET_NPU_SECTION_ALIGN);
    size_t off = 0;
    d->off_qs = off;
    off += align_up((size_t)d->n_tiles * (size_t)d->n_groups * d->tile_bytes, HET_NPU_SECTION_ALIGN);
    d->off_s_hi = off; off += pbytes;
    d->off_s_lo = off; off += pbytes;
    if (d->flags & HET_NPU_WF_BIAS) {
        d->off_b_hi = off; off += pbytes;
        d->off_b_lo = off; off += pbytes;
    }
    d->plane_bytes = off;
    d->total_bytes = off * (size_t)d->ne2 * (size_t)d->ne3;
    return HET_OK;
}

/* ---- reading one source group ---------------------------------------------- */

struct src_group {
    uint8_t q4[HET_NPU_GROUP];  /* Q4 values 0..15           */
    int8_t  q8[HET_NPU_GROUP];  /* I8 values                 */
    float   scale, bias;
};

/* Group g of a source row (row points at the row's first block). */
static void read_group(enum het_type type, const uint8_t *row, int64_t g, struct src_group *s)
{
    s->bias = 0.0f;
    switch (type) {
    case HET_TYPE_Q4_0: {
        const het_block_q4_0 *b = (const het_block_q4_0 *)row + g;
        for (int j = 0; j < 16; j++) {
            s->q4[j] = b->qs[j] & 0x0F;
            s->q4[j + 16] = b->qs[j] >> 4;
        }
        s->scale = het_fp16_to_fp32(b->d);
        break;
    }
    case HET_TYPE_Q4_1: {
        const het_block_q4_1 *b = (const het_block_q4_1 *)row + g;
        for (int j = 0; j < 16; j++) {
            s->q4[j] = b->qs[j] & 0x0F;
            s->q4[j + 16] = b->qs[j] >> 4;
        }
        s->scale = het_fp16_to_fp32(b->d);
        s->bias = -het_fp16_to_fp32(b->m);       /* exact negation: q*d + m == q*d - (-m) */
        break;
    }
    case HET_TYPE_Q8_0: {
        const het_block_q8_0 *b = (const het_block_q8_0 *)row + g;
        memcpy(s->q8, b->qs, HET_NPU_GROUP);
        s->scale = het_fp16_to_fp32(b->d);
        break;
    }
    case HET_TYPE_Q4_K: {
        const het_block_q4_k *b = (const het_block_q4_k *)row + g / 8;
        const int j = (int)(g % 8);
        uint8_t sc, m;
        het_q4k_scale_min(j, b->scales, &sc, &m);
        const uint8_t *q = b->qs + 32 * (j / 2);
        for (int l = 0; l < 32; l++) s->q4[l] = (j & 1) ? (uint8_t)(q[l] >> 4) : (uint8_t)(q[l] & 0x0F);
        s->scale = het_fp16_to_fp32(b->d) * sc;     /* exact: 11 x 6 significant bits */
        s->bias = het_fp16_to_fp32(b->dmin) * m;
        break;
    }
    default:
        memset(s, 0, sizeof *s);
        break;
    }
}

/* ---- repack ------------------------------------------------------------------- */

static enum het_status repack_row(const struct het_npu_wdesc *d, const uint8_t *row, int64_t n, uint8_t *plane,
                                  int64_t pidx, het_error *err)
{
    const int64_t t = n / HET_NPU_NTILE;
    const int r = (int)(n % HET_NPU_NTILE);
    uint16_t *s_hi = (uint16_t *)(plane + d->off_s_hi), *s_lo = (uint16_t *)(plane + d->off_s_lo);
    uint16_t *b_hi = (uint16_t *)(plane + d->off_b_hi), *b_lo = (uint16_t *)(plane + d->off_b_lo);
    struct src_group s;
    for (int64_t g = 0; g < d->n_groups; g++) {
        read_group(d->src_type, row, g, &s);
        const size_t pi = het_npu_param_index(d, t, g, r);
        if (!het_npu_split_bf16(s.scale, &s_hi[pi], &s_lo[pi]))
            return het_error_set(err, HET_ERR_UNSUPPORTED, "npu: plane %lld row %lld group %lld: scale %g cannot be "
                                 "represented exactly", (long long)pidx, (long long)n, (long long)g, (double)s.scale);
        if (d->flags & HET_NPU_WF_BIAS) {
            if (!het_npu_split_bf16(s.bias, &b_hi[pi], &b_lo[pi]))
                return het_error_set(err, HET_ERR_UNSUPPORTED, "npu: plane %lld row %lld group %lld: minimum %g "
                                     "cannot be represented exactly", (long long)pidx, (long long)n, (long long)g,
                                     (double)s.bias);
        }
        uint8_t *tile = plane + d->off_qs + ((size_t)t * (size_t)d->n_groups + (size_t)g) * d->tile_bytes;
        if (d->fmt == HET_NPU_W_Q4) {
            uint8_t *dst = tile + (size_t)r * (HET_NPU_GROUP / 2);
            for (int k = 0; k < HET_NPU_GROUP; k += 2) dst[k / 2] = (uint8_t)(s.q4[k] | (s.q4[k + 1] << 4));
        } else {
            memcpy(tile + (size_t)r * HET_NPU_GROUP, s.q8, HET_NPU_GROUP);
        }
    }
    return HET_OK;
}

enum het_status het_npu_repack(const struct het_npu_wdesc *d, const void *src, const size_t nb[4], void *dst,
                               het_error *err)
{
    const struct het_type_traits *tr = het_type_get_traits(d->src_type);
    if (nb[0] != tr->type_size)
        return het_error_set(err, HET_ERR_UNSUPPORTED, "npu: weight rows are not block-contiguous (nb0 = %zu)", nb[0]);
    memset(dst, 0, d->total_bytes);   /* padding rows and section gaps are zero */
    for (int64_t i3 = 0; i3 < d->ne3; i3++) {
        for (int64_t i2 = 0; i2 < d->ne2; i2++) {
            const int64_t p = i3 * d->ne2 + i2;
            uint8_t *plane = (uint8_t *)dst + (size_t)p * d->plane_bytes;
            for (int64_t n = 0; n < d->N; n++) {
                const uint8_t *row = (const uint8_t *)src + (size_t)i3 * nb[3] + (size_t)i2 * nb[2] + (size_t)n * nb[1];
                enum het_status st = repack_row(d, row, n, plane, p, err);
                if (st != HET_OK) return st;
            }
        }
    }
    return HET_OK;
}

/* ---- slices for streaming ----------------------------------------------------- */

void het_npu_layout_slice(const struct het_npu_wdesc *d, const void *plane, int64_t t0, int64_t t1,
                          struct het_npu_wdesc *sub, void *dst)
{
    const int64_t ne[4] = { d->K, (t1 - t0) * HET_NPU_NTILE, 1, 1 };
    het_npu_layout_plan(sub, d->src_type, ne, NULL);
    const uint8_t *src = plane;
    uint8_t *out = dst;
    const size_t ng = (size_t)d->n_groups, nt = (size_t)(t1 - t0);
    memcpy(out + sub->off_qs, src + d->off_qs + (size_t)t0 * ng * d->tile_bytes, nt * ng * d->tile_bytes);
    const size_t pbytes = nt * ng * HET_NPU_NTILE * sizeof(uint16_t), poff = (size_t)t0 * ng * HET_NPU_NTILE * sizeof(uint16_t);
    memcpy(out + sub->off_s_hi, src + d->off_s_hi + poff, pbytes);
    memcpy(out + sub->off_s_lo, src + d->off_s_lo + poff, pbytes);
    if (d->flags & HET_NPU_WF_BIAS) {
        memcpy(out + sub->off_b_hi, src + d->off_b_hi + poff, pbytes);
        memcpy(out + sub->off_b_lo, src + d->off_b_lo + poff, pbytes);
    }
}

/* ---- reference dequantisation of the layout --------------------------------- */

void het_npu_dequant_row(const struct het_npu_wdesc *d, const void *data, int64_t plane, int64_t n, float *out)
{
    const uint8_t *pl = het_npu_plane(d, data, plane);
    const int64_t t = n / HET_NPU_NTILE;
    const int r = (int)(n % HET_NPU_NTILE);
    const uint16_t *s_hi = (const uint16_t *)(pl + d->off_s_hi), *s_lo = (const uint16_t *)(pl + d->off_s_lo);
    const uint16_t *b_hi = (const uint16_t *)(pl + d->off_b_hi), *b_lo = (const uint16_t *)(pl + d->off_b_lo);
    const float zp = het_bf16_to_fp32(d->zp_bf16);
    for (int64_t g = 0; g < d->n_groups; g++) {
        const size_t pi = het_npu_param_index(d, t, g, r);
        const float scale = het_npu_join_bf16(s_hi[pi], s_lo[pi]);
        const float bias = (d->flags & HET_NPU_WF_BIAS) ? het_npu_join_bf16(b_hi[pi], b_lo[pi]) : 0.0f;
        const uint8_t *tile = pl + d->off_qs + ((size_t)t * (size_t)d->n_groups + (size_t)g) * d->tile_bytes;
        float *o = out + g * HET_NPU_GROUP;
        for (int k = 0; k < HET_NPU_GROUP; k++) {
            float q;
            if (d->fmt == HET_NPU_W_Q4) {
                const uint8_t byte = tile[(size_t)r * (HET_NPU_GROUP / 2) + (size_t)(k / 2)];
                q = (float)((k & 1) ? byte >> 4 : byte & 0x0F);
            } else {
                q = (float)((const int8_t *)tile)[(size_t)r * HET_NPU_GROUP + (size_t)k];
            }
            o[k] = (q - zp) * scale - bias;
        }
    }
}
