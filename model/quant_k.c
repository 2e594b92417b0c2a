/*
 * quant_k.c — reference (scalar) K-quants: Q4_K, Q5_K, Q6_K and the Q8_K
 * activation format, all on 256-element super-blocks.
 *
 *   Q4_K/Q5_K  8 groups of 32. x = d*sc[g]*q - dmin*m[g] with q 4 (5) bits,
 *              sc/m 6-bit, packed into 12 bytes (het_q4k_scale_min), d/dmin
 *              fp16. Quants: 32 bytes per pair of groups, low nibble = first
 *              group of the pair, high nibble = second; Q5_K's 5th bit of
 *              element l of group pair p sits in qh[l] bit 2p (first group)
 *              and 2p+1 (second).
 *   Q6_K       16 groups of 16. x = d*scales[g]*(q-32), int8 scales, fp16 d,
 *              q = 4 low bits (ql) + 2 high bits (qh) in 128-element halves.
 *   Q8_K       x = d*q, fp32 d, int8 q, plus int16 sums per 16 (bsums).
 *
 * The quantisers reproduce ggml's quantize_row_*_ref without importance
 * weights: an iterative least-squares search for each group's scale (and
 * min), then 6- or 8-bit quantisation of the group scales, then a final
 * re-quantisation of the elements against the rounded scales. Every float
 * operation keeps the reference's order so the output bytes are identical.
 */
#include "model/quant_impl.h"

/* The byte-exact results depend on every multiply and add being rounded
 * separately: forbid the compiler from fusing them into FMAs (GCC does so by
 * default whenever the target has FMA). */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

#include <math.h>

#define QK_K HET_QK_K
#define GROUP_MAX_EPS 1e-15f

static inline int clampi(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

/*
 * Fit x[i] ~ scale*L[i] - the_min (L in 0..nmax, min <= 0) minimising the
 * weighted squared error: start from the min/max grid, then try nstep+1
 * alternative grid spacings (nmax + rmin + rdelta*is over the range), solving
 * the 2x2 least-squares system for scale and offset at each, keeping the
 * best. Returns the scale; *the_min receives -offset (>= 0).
 */
static float fit_scale_min(int n, int nmax, const float *x, const float *w, uint8_t *L,
                           float *the_min, float rmin, float rdelta, int nstep)
{
    uint8_t trial[32];
    float lo = x[0], hi = x[0];
    float sum_w = w[0];
    float sum_x = sum_w * x[0];
    for (int i = 1; i < n; i++) {
        if (x[i] < lo) lo = x[i];
        if (x[i] > hi) hi = x[i];
        sum_w += w[i];
        sum_x += w[i] * x[i];
    }
    if (lo > 0) lo = 0;
    if (hi == lo) {
        for (int i = 0; i < n; i++) L[i] = 0;
        *the_min = -lo;
        return 0.0f;
    }
    float iscale = nmax / (hi - lo);
    float scale = 1 / iscale;
    float best = 0;
    for (int i = 0; i < n; i++) {
        L[i] = (uint8_t)clampi(het_nearest_int(iscale * (x[i] - lo)), 0, nmax);
        float diff = scale * L[i] + lo - x[i];
        best += w[i] * (diff * diff);
    }
    for (int is = 0; is <= nstep; is++) {
        iscale = (rmin + rdelta * is + nmax) / (hi - lo);
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < n; i++) {
            int l = clampi(het_nearest_int(iscale * (x[i] - lo)), 0, nmax);
            trial[i] = (uint8_t)l;
            sum_l  += w[i] * l;
            sum_l2 += w[i] * l * l;
            sum_xl += w[i] * l * x[i];
        }
        float det = sum_w * sum_l2 - sum_l * sum_l;
        if (!(det > 0)) continue;
        float this_scale = (sum_w * sum_xl - sum_x * sum_l) / det;
        float this_min   = (sum_l2 * sum_x - sum_l * sum_xl) / det;
        if (this_min > 0) {
            this_min = 0;
            this_scale = sum_xl / sum_l2;
        }
        float err = 0;
        for (int i = 0; i < n; i++) {
            float diff = this_scale * trial[i] + this_min - x[i];
            err += w[i] * (diff * diff);
        }
        if (err < best) {
            memcpy(L, trial, (size_t)n);
            best = err;
            scale = this_scale;
            lo = this_min;
        }
    }
    *the_min = -lo;
    return scale;
}

/*
 * Symmetric fit x[i] ~ scale*(L[i]-nmax) with L-nmax in [-nmax, nmax-1],
 * weights x^2: start from the grid through the largest-magnitude element,
 * then try 18 nearby grids (nmax +- 0.1k), keeping the least-squares best.
 */
static float fit_scale_sym(int n, int nmax, const float *x, int8_t *L)
{
    float amax = 0, max = 0;
    for (int i = 0; i < n; i++) {
        if (fabsf(x[i]) > amax) {
            amax = fabsf(x[i]);
            max = x[i];
        }
    }
    if (amax < GROUP_MAX_EPS) {
        for (int i = 0; i < n; i++) L[i] = 0;
        return 0.0f;
    }
    float iscale = -nmax / max;
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; i++) {
        int l = clampi(het_nearest_int(iscale * x[i]), -nmax, nmax - 1);
        L[i] = (int8_t)(l + nmax);
        float w = x[i] * x[i];
        sumlx += w * x[i] * l;
        suml2 += w * l * l;
    }
    float scale = suml2 ? sumlx / suml2 : 0.0f;
    float best = scale * sumlx;
    for (int is = -9; is <= 9; is++) {
        if (is == 0) continue;
        iscale = -(nmax + 0.1f * is) / max;
        sumlx = suml2 = 0;
        for (int i = 0; i < n; i++) {
            int l = clampi(het_nearest_int(iscale * x[i]), -nmax, nmax - 1);
            float w = x[i] * x[i];
            sumlx += w * x[i] * l;
            suml2 += w * l * l;
        }
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            for (int i = 0; i < n; i++)
                L[i] = (int8_t)(nmax + clampi(het_nearest_int(iscale * x[i]), -nmax, nmax - 1));
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

/* ---- Q4_K / Q5_K shared parts ------------------------------------------- */

/* Store 6-bit scale sc and min m of group j into the 12-byte scales array
 * (the inverse of het_q4k_scale_min; bytes must start zeroed for j >= 4's
 * top bits, which the j < 4 stores provide). */
static void put_scale_min(int j, uint8_t *s, uint8_t sc, uint8_t m)
{
    if (j < 4) {
        s[j] = sc;
        s[j + 4] = m;
    } else {
        s[j + 4] = (uint8_t)((sc & 0x0F) | ((m & 0x0F) << 4));
        s[j - 4] |= (uint8_t)((sc >> 4) << 6);
        s[j]     |= (uint8_t)((m >> 4) << 6);
    }
}

/*
 * One Q4_K/Q5_K super-block: fit the 8 groups, quantise their scales and
 * mins to 6 bits against the largest of each, then re-quantise the elements
 * to 0..nmax using the rounded scales. Fills d, dmin, scales and L.
 */
static void quantize_kblock(const float *x, int nmax, float rmin, int nstep,
                            uint16_t *d_out, uint16_t *dmin_out, uint8_t scales_out[12],
                            uint8_t L[QK_K])
{
    float scales[QK_K / 32], mins[QK_K / 32], w[32];
    float max_scale = 0, max_min = 0;
    for (int j = 0; j < QK_K / 32; j++) {
        const float *xg = x + 32 * j;
        float sum_x2 = 0;
        for (int l = 0; l < 32; l++) sum_x2 += xg[l] * xg[l];
        float av_x = sqrtf(sum_x2 / 32);
        for (int l = 0; l < 32; l++) w[l] = av_x + fabsf(xg[l]);
        scales[j] = fit_scale_min(32, nmax, xg, w, L + 32 * j, &mins[j], rmin, 0.1f, nstep);
        if (scales[j] > max_scale) max_scale = scales[j];
        if (mins[j] > max_min) max_min = mins[j];
    }
    float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
    float inv_min   = max_min   > 0 ? 63.f / max_min   : 0.f;
    memset(scales_out, 0, 12);
    for (int j = 0; j < QK_K / 32; j++) {
        uint8_t ls = (uint8_t)het_nearest_int(inv_scale * scales[j]);
        uint8_t lm = (uint8_t)het_nearest_int(inv_min * mins[j]);
        put_scale_min(j, scales_out, ls < 63 ? ls : 63, lm < 63 ? lm : 63);
    }
    *d_out    = het_fp32_to_fp16(max_scale / 63.f);
    *dmin_out = het_fp32_to_fp16(max_min / 63.f);

    const float d_all = het_fp16_to_fp32(*d_out), m_all = het_fp16_to_fp32(*dmin_out);
    for (int j = 0; j < QK_K / 32; j++) {
        uint8_t sc, m;
        het_q4k_scale_min(j, scales_out, &sc, &m);
        const float d = d_all * sc;
        if (d == 0.0f) continue;          /* keep the fit's L for this group */
        const float dm = m_all * m;
        for (int i = 0; i < 32; i++)
            L[32 * j + i] = (uint8_t)clampi(het_nearest_int((x[32 * j + i] + dm) / d), 0, nmax);
    }
}

/* Decode group scales of a Q4_K/Q5_K block into d*sc and dmin*m. */
static void kblock_scales(uint16_t d16, uint16_t dmin16, const uint8_t *s, float dl[8], float ml[8])
{
    const float d = het_fp16_to_fp32(d16), dmin = het_fp16_to_fp32(dmin16);
    for (int j = 0; j < 8; j++) {
        uint8_t sc, m;
        het_q4k_scale_min(j, s, &sc, &m);
        dl[j] = d * sc;
        ml[j] = dmin * m;
    }
}

/* ---- Q4_K ----------------------------------------------------------------- */

void het_quantize_row_q4_k(const float *x, void *dst, int64_t n)
{
    het_block_q4_k *y = dst;
    uint8_t L[QK_K];
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
        quantize_kblock(x, 15, -1.0f, 20, &y[i].d, &y[i].dmin, y[i].scales, L);
        for (int p = 0; p < 4; p++)
            for (int l = 0; l < 32; l++)
                y[i].qs[32 * p + l] = (uint8_t)(L[64 * p + l] | (L[64 * p + 32 + l] << 4));
    }
}

void het_dequantize_row_q4_k(const void *src, float *y, int64_t n)
{
    const het_block_q4_k *x = src;
    float dl[8], ml[8];
    for (int64_t i = 0; i < n / QK_K; i++) {
        kblock_scales(x[i].d, x[i].dmin, x[i].scales, dl, ml);
        for (int p = 0; p < 4; p++, y += 64) {
            const uint8_t *q = x[i].qs + 32 * p;
            for (int l = 0; l < 32; l++) y[l]      = dl[2 * p] * (q[l] & 0x0F) - ml[2 * p];
            for (int l = 0; l < 32; l++) y[32 + l] = dl[2 * p + 1] * (q[l] >> 4) - ml[2 * p + 1];
        }
    }
}

/* ---- Q5_K ----------------------------------------------------------------- */

void het_quantize_row_q5_k(const float *x, void *dst, int64_t n)
{
    het_block_q5_k *y = dst;
    uint8_t L[QK_K];
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
        quantize_kblock(x, 31, -0.5f, 15, &y[i].d, &y[i].dmin, y[i].scales, L);
        memset(y[i].qh, 0, sizeof y[i].qh);
        for (int p = 0; p < 4; p++) {
            for (int l = 0; l < 32; l++) {
                int a = L[64 * p + l], b = L[64 * p + 32 + l];
                y[i].qs[32 * p + l] = (uint8_t)((a & 0x0F) | ((b & 0x0F) << 4));
                y[i].qh[l] |= (uint8_t)(((a >> 4) << (2 * p)) | ((b >> 4) << (2 * p + 1)));
            }
        }
    }
}

void het_dequantize_row_q5_k(const void *src, float *y, int64_t n)
{
    const het_block_q5_k *x = src;
    float dl[8], ml[8];
    for (int64_t i = 0; i < n / QK_K; i++) {
        kblock_scales(x[i].d, x[i].dmin, x[i].scales, dl, ml);
        for (int p = 0; p < 4; p++, y += 64) {
            const uint8_t *q = x[i].qs + 32 * p, *qh = x[i].qh;
            for (int l = 0; l < 32; l++) {
                int hi = (qh[l] >> (2 * p)) & 1;
                y[l] = dl[2 * p] * ((q[l] & 0x0F) + 16 * hi) - ml[2 * p];
            }
            for (int l = 0; l < 32; l++) {
                int hi = (qh[l] >> (2 * p + 1)) & 1;
                y[32 + l] = dl[2 * p + 1] * ((q[l] >> 4) + 16 * hi) - ml[2 * p + 1];
            }
        }
    }
}

/* ---- Q6_K ----------------------------------------------------------------- */

/* Element e (0..255) of a Q6_K block as its unsigned 6-bit code. In each
 * 128-element half h, element 32k+l has its low nibble in ql[64h + l + 32(k&1)]
 * (low nibble for k<2, high for k>=2) and its top 2 bits at qh[32h + l] >> 2k. */
static void q6k_pack(const uint8_t L[QK_K], het_block_q6_k *y)
{
    for (int h = 0; h < 2; h++) {
        const uint8_t *Lh = L + 128 * h;
        uint8_t *ql = y->ql + 64 * h, *qh = y->qh + 32 * h;
        for (int l = 0; l < 32; l++) {
            ql[l]      = (uint8_t)((Lh[l] & 0x0F)      | ((Lh[l + 64] & 0x0F) << 4));
            ql[l + 32] = (uint8_t)((Lh[l + 32] & 0x0F) | ((Lh[l + 96] & 0x0F) << 4));
            qh[l] = (uint8_t)((Lh[l] >> 4) | ((Lh[l + 32] >> 4) << 2) |
                              ((Lh[l + 64] >> 4) << 4) | ((Lh[l + 96] >> 4) << 6));
        }
    }
}

void het_quantize_row_q6_k(const float *x, void *dst, int64_t n)
{
    het_block_q6_k *y = dst;
    int8_t L[QK_K];
    float scales[QK_K / 16];
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
        float max_scale = 0, max_abs_scale = 0;
        for (int g = 0; g < QK_K / 16; g++) {
            scales[g] = fit_scale_sym(16, 32, x + 16 * g, L + 16 * g);
            if (fabsf(scales[g]) > max_abs_scale) {
                max_abs_scale = fabsf(scales[g]);
                max_scale = scales[g];
            }
        }
        if (max_abs_scale < GROUP_MAX_EPS) {
            memset(&y[i], 0, sizeof y[i]);
            continue;
        }
        const float iscale = -128.f / max_scale;
        y[i].d = het_fp32_to_fp16(1 / iscale);
        for (int g = 0; g < QK_K / 16; g++) {
            int s = het_nearest_int(iscale * scales[g]);
            y[i].scales[g] = (int8_t)(s < 127 ? s : 127);
        }
        const float d_all = het_fp16_to_fp32(y[i].d);
        for (int g = 0; g < QK_K / 16; g++) {
            const float d = d_all * y[i].scales[g];
            if (d == 0.0f) continue;      /* keep the fit's L for this group */
            for (int k = 0; k < 16; k++)
                L[16 * g + k] = (int8_t)(clampi(het_nearest_int(x[16 * g + k] / d), -32, 31) + 32);
        }
        q6k_pack((const uint8_t *)L, &y[i]);
    }
}

void het_dequantize_row_q6_k(const void *src, float *y, int64_t n)
{
    const het_block_q6_k *x = src;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const float d = het_fp16_to_fp32(x[i].d);
        for (int h = 0; h < 2; h++, y += 128) {
            const uint8_t *ql = x[i].ql + 64 * h, *qh = x[i].qh + 32 * h;
            const int8_t *sc = x[i].scales + 8 * h;
            for (int l = 0; l < 32; l++) {
                const int g = l / 16;
                const int q0 = ((ql[l] & 0x0F)      | (((qh[l] >> 0) & 3) << 4)) - 32;
                const int q1 = ((ql[l + 32] & 0x0F) | (((qh[l] >> 2) & 3) << 4)) - 32;
                const int q2 = ((ql[l] >> 4)        | (((qh[l] >> 4) & 3) << 4)) - 32;
                const int q3 = ((ql[l + 32] >> 4)   | (((qh[l] >> 6) & 3) << 4)) - 32;
                y[l]      = d * sc[g]     * q0;
                y[l + 32] = d * sc[g + 2] * q1;
                y[l + 64] = d * sc[g + 4] * q2;
                y[l + 96] = d * sc[g + 6] * q3;
            }
        }
    }
}

/* ---- Q8_K ----------------------------------------------------------------- */

void het_quantize_row_q8_k(const float *x, void *dst, int64_t n)
{
    het_block_q8_k *y = dst;
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
        float amax = 0, max = 0;
        for (int j = 0; j < QK_K; j++) {
            if (fabsf(x[j]) > amax) {
                amax = fabsf(x[j]);
                max = x[j];
            }
        }
        memset(&y[i], 0, sizeof y[i]);
        if (amax == 0.0f) continue;
        const float iscale = -127.f / max;
        for (int j = 0; j < QK_K; j++) {
            int v = het_nearest_int(iscale * x[j]);
            y[i].qs[j] = (int8_t)(v < 127 ? v : 127);
        }
        for (int g = 0; g < QK_K / 16; g++) {
            int sum = 0;
            for (int k = 0; k < 16; k++) sum += y[i].qs[16 * g + k];
            y[i].bsums[g] = (int16_t)sum;
        }
        y[i].d = 1 / iscale;
    }
}

void het_dequantize_row_q8_k(const void *src, float *y, int64_t n)
{
    const het_block_q8_k *x = src;
    for (int64_t i = 0; i < n / QK_K; i++, y += QK_K)
        for (int j = 0; j < QK_K; j++) y[j] = x[i].d * x[i].qs[j];
}
