/*
 * npu_emul.c — the NPU kernel contract executed on the CPU: activation
 * quantisation (int8 with one dynamic scale per activation group of 32
 * elements or of a whole row, or bf16) and the tiled
 * GEMM over the NPU weight layout, written to be obviously the contract of
 * npu_kernel.h rather than fast. The device splits N-tiles over threads.
 */
#include "devices/npu/npu_kernel.h"

#include <math.h>
#include <string.h>

#include "model/quant_impl.h"

static size_t align64(size_t v) { return (v + 63) & ~(size_t)63; }

size_t het_npu_act_bytes(enum het_npu_act fmt, int64_t Mpad, int64_t K, int64_t group)
{
    const size_t ng = (size_t)(K / HET_NPU_GROUP), m = (size_t)Mpad, k = (size_t)K;
    if (fmt == HET_NPU_ACT_BF16) return align64(m * k * 2) + align64(m * ng * sizeof(float));
    const size_t ns = (size_t)(K / group);
    return align64(m * ns * sizeof(float)) + align64(m * k) + align64(m * ng * sizeof(int32_t));
}

void het_npu_act_bind(struct het_npu_actbuf *a, void *buf, enum het_npu_act fmt, int64_t M, int64_t Mpad, int64_t K,
                      int64_t group)
{
    memset(a, 0, sizeof *a);
    a->fmt = fmt;
    a->M = M;
    a->Mpad = Mpad;
    a->K = K;
    a->n_groups = K / HET_NPU_GROUP;
    uint8_t *p = buf;
    const size_t m = (size_t)Mpad, k = (size_t)K;
    if (fmt == HET_NPU_ACT_BF16) {
        a->bf = (uint16_t *)p;    p += align64(m * k * 2);
        a->gsumf = (float *)p;
    } else {
        a->group = group;
        a->n_scales = K / group;
        a->scale = (float *)p;    p += align64(m * (size_t)a->n_scales * sizeof(float));
        a->q = (int8_t *)p;       p += align64(m * k);
        a->gsum = (int32_t *)p;
    }
}

float het_npu_quantize_group_i8(const float *x, int64_t n, int8_t *q)
{
    float amax = 0.0f;
    bool finite = true;
    for (int64_t k = 0; k < n; k++) {
        const float v = fabsf(x[k]);
        if (!(v <= 3.4028234663852886e38f)) finite = false;   /* inf or NaN */
        else if (v > amax) amax = v;
    }
    if (!finite) {                      /* the row's outputs become NaN, not garbage */
        memset(q, 0, (size_t)n);
        return NAN;
    }
    const float d = amax / 127.0f;
    const float id = amax > 0.0f ? 127.0f / amax : 0.0f;
    for (int64_t k = 0; k < n; k++) {
        int v = het_nearest_int(x[k] * id);
        q[k] = (int8_t)(v > 127 ? 127 : v < -127 ? -127 : v);
    }
    return d;
}

void het_npu_quantize_row_i8(const float *x, int64_t K, int64_t group, int8_t *q, float *d)
{
    for (int64_t a = 0; a < K / group; a++) d[a] = het_npu_quantize_group_i8(x + a * group, group, q + a * group);
}

void het_npu_act_set_row(struct het_npu_actbuf *a, int64_t m, const float *x)
{
    const int64_t K = a->K, ng = a->n_groups;
    if (a->fmt == HET_NPU_ACT_BF16) {
        uint16_t *bf = a->bf + m * K;
        float *gs = a->gsumf + m * ng;
        for (int64_t k = 0; k < K; k++) bf[k] = x ? het_fp32_to_bf16(x[k]) : 0;
        for (int64_t g = 0; g < ng; g++) {
            float s = 0.0f;
            for (int k = 0; k < HET_NPU_GROUP; k++) s += het_bf16_to_fp32(bf[g * HET_NPU_GROUP + k]);
            gs[g] = s;
        }
        return;
    }
    int8_t *q = a->q + m * K;
    int32_t *gs = a->gsum + m * ng;
    float *d = a->scale + m * a->n_scales;
    if (x) {
        het_npu_quantize_row_i8(x, K, a->group, q, d);
    } else {
        memset(d, 0, sizeof(float) * (size_t)a->n_scales);
        memset(q, 0, (size_t)K);
    }
    for (int64_t g = 0; g < ng; g++) {
        int32_t s = 0;
        for (int k = 0; k < HET_NPU_GROUP; k++) s += q[g * HET_NPU_GROUP + k];
        gs[g] = s;
    }
}

/* Tile (t, g) as signed values w[r][k] (before the zero point). */
static void unpack_tile(const struct het_npu_wdesc *d, const uint8_t *plane, int64_t t, int64_t g,
                        int8_t w[HET_NPU_NTILE][HET_NPU_GROUP])
{
    const uint8_t *tile = plane + d->off_qs + ((size_t)t * (size_t)d->n_groups + (size_t)g) * d->tile_bytes;
    if (d->fmt == HET_NPU_W_I8) {
        memcpy(w, tile, HET_NPU_NTILE * HET_NPU_GROUP);
        return;
    }
    for (int r = 0; r < HET_NPU_NTILE; r++) {
        const uint8_t *row = tile + r * (HET_NPU_GROUP / 2);
        for (int k = 0; k < HET_NPU_GROUP; k += 2) {
            w[r][k] = (int8_t)(row[k / 2] & 0x0F);
            w[r][k + 1] = (int8_t)(row[k / 2] >> 4);
        }
    }
}

struct tile_params {
    float s[HET_NPU_NTILE];
    float b[HET_NPU_NTILE];
};

static void load_params(const struct het_npu_wdesc *d, const uint8_t *plane, int64_t t, int64_t g,
                        struct tile_params *tp)
{
    const uint16_t *s_hi = (const uint16_t *)(plane + d->off_s_hi), *s_lo = (const uint16_t *)(plane + d->off_s_lo);
    const uint16_t *b_hi = (const uint16_t *)(plane + d->off_b_hi), *b_lo = (const uint16_t *)(plane + d->off_b_lo);
    for (int r = 0; r < HET_NPU_NTILE; r++) {
        const size_t pi = het_npu_param_index(d, t, g, r);
        tp->s[r] = het_npu_join_bf16(s_hi[pi], s_lo[pi]);
        tp->b[r] = (d->flags & HET_NPU_WF_BIAS) ? het_npu_join_bf16(b_hi[pi], b_lo[pi]) : 0.0f;
    }
}

/* acc[m][r] += group g's contribution, int8 activations. */
static void group_i8(const struct het_npu_actbuf *a, int64_t g, int zp, int8_t w[HET_NPU_NTILE][HET_NPU_GROUP],
                     const struct tile_params *tp, float (*acc)[HET_NPU_NTILE])
{
    for (int64_t m = 0; m < a->Mpad; m++) {
        const int8_t *x = a->q + m * a->K + g * HET_NPU_GROUP;
        const int32_t xs = a->gsum[m * a->n_groups + g];
        for (int r = 0; r < HET_NPU_NTILE; r++) {
            int32_t dot = 0;
            for (int k = 0; k < HET_NPU_GROUP; k++) dot += (int32_t)w[r][k] * x[k];
            const int32_t isum = dot - zp * xs;           /* sum (w - zp) * x, exact */
            const float term = tp->s[r] * (float)isum;
            const float corr = tp->b[r] * (float)xs;
            acc[m][r] += term - corr;
        }
    }
}

/* Same with bf16 activations. */
static void group_bf16(const struct het_npu_actbuf *a, int64_t g, int zp, int8_t w[HET_NPU_NTILE][HET_NPU_GROUP],
                       const struct tile_params *tp, float (*acc)[HET_NPU_NTILE])
{
    for (int64_t m = 0; m < a->Mpad; m++) {
        const uint16_t *x = a->bf + m * a->K + g * HET_NPU_GROUP;
        const float ys = a->gsumf[m * a->n_groups + g];
        for (int r = 0; r < HET_NPU_NTILE; r++) {
            float dot = 0.0f;
            for (int k = 0; k < HET_NPU_GROUP; k++) dot += (float)(w[r][k] - zp) * het_bf16_to_fp32(x[k]);
            const float term = tp->s[r] * dot;
            const float corr = tp->b[r] * ys;
            acc[m][r] += term - corr;
        }
    }
}

/* acc[m][r] = sum_a d_a * part[m][r] at the end of activation group a (the
 * first term assigned, not added to +0, so per-row equals d * S exactly). */
static void apply_scales(const struct het_npu_actbuf *a, int64_t ia, float (*part)[HET_NPU_NTILE],
                         float (*acc)[HET_NPU_NTILE])
{
    for (int64_t m = 0; m < a->Mpad; m++) {
        const float d = a->scale[m * a->n_scales + ia];
        for (int r = 0; r < HET_NPU_NTILE; r++) {
            acc[m][r] = ia == 0 ? d * part[m][r] : acc[m][r] + d * part[m][r];
            part[m][r] = 0.0f;
        }
    }
}

void het_npu_kernel_run(const struct het_npu_wdesc *d, const void *plane, const struct het_npu_actbuf *a,
                        float *out, size_t ldo, int64_t t0, int64_t t1)
{
    const uint8_t *pl = plane;
    const int zp = (int)het_bf16_to_fp32(d->zp_bf16);
    const bool bf16 = a->fmt == HET_NPU_ACT_BF16;
    const int64_t gpa = bf16 ? d->n_groups : a->group / HET_NPU_GROUP;   /* weight groups per activation group */
    float acc[HET_NPU_MAX_MCHUNK][HET_NPU_NTILE], part[HET_NPU_MAX_MCHUNK][HET_NPU_NTILE];
    int8_t w[HET_NPU_NTILE][HET_NPU_GROUP];
    struct tile_params tp;
    for (int64_t t = t0; t < t1; t++) {
        float (*sum)[HET_NPU_NTILE] = bf16 ? acc : part;   /* bf16: no scales, one plain sum */
        memset(sum, 0, sizeof(float) * HET_NPU_NTILE * (size_t)a->Mpad);
        for (int64_t g = 0; g < d->n_groups; g++) {
            unpack_tile(d, pl, t, g, w);
            load_params(d, pl, t, g, &tp);
            if (bf16) group_bf16(a, g, zp, w, &tp, sum);
            else group_i8(a, g, zp, w, &tp, sum);
            if (!bf16 && (g + 1) % gpa == 0) apply_scales(a, g / gpa, part, acc);
        }
        for (int64_t m = 0; m < a->Mpad; m++)
            memcpy(out + (size_t)m * ldo + (size_t)t * HET_NPU_NTILE, acc[m], sizeof(float) * HET_NPU_NTILE);
    }
}
