/*
 * quant_dot.c — scalar reference kernels of the CPU matrix multiplication:
 * activation quantisation (q8r rows), per-type dot products of quantised
 * weight rows against q8r rows, float dot products (F32/F16/BF16 weights),
 * and the packed-panel format (packing + a scalar panel kernel).
 *
 * Every quantised type is first decoded, one 32-element block at a time,
 * into a common form (struct het_qblk: integer quants plus a float scale and
 * offset, or int sub-scales for q6_K). The scalar dot products and the panel
 * packer both work from that form, so the formula each SIMD kernel must
 * reproduce is written exactly once, here:
 *     U4/U5:  sum_b d*da_b*sum(q*a) + c*s_b         (c: -8d, -16d, m, -dmin*m)
 *     S8:     sum_b d*da_b*sum(q*a)
 *     U6:     sum_b d*da_b*sum_h sc_h*(sum_h(q*a) + x32_h), x32_h = -32*sum_h(a)
 */
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "devices/cpu/quant_dot.h"
#include "model/quant_impl.h"

/* ---- q8r activation rows ------------------------------------------------ */

void het_q8r_layout_init(struct het_q8r_layout *l, int64_t K, bool with_abs)
{
    l->K = K;
    l->nb = K / HET_Q8R_BLOCK;
    l->with_abs = with_abs;
    l->bs = with_abs ? HET_Q8R_BS_ABS : HET_Q8R_BS;
    l->row_bytes = (size_t)l->nb * l->bs;
    l->group = 1;
}

void het_q8r_quantize_scalar(const float *x, const struct het_q8r_layout *l, void *dst)
{
    uint8_t *row = dst;
    float amax = 0.0f;
    for (int64_t b = 0; b < l->nb; b++) {
        const float *xb = x + b * HET_Q8R_BLOCK;
        int8_t *qs = (int8_t *)(row + (size_t)b * l->bs);
        if (b % l->group == 0) { /* the amax of the blocks sharing d, at the first of them */
            amax = 0.0f;
            for (int j = 0; j < HET_Q8R_BLOCK * l->group; j++) amax = fmaxf(amax, fabsf(xb[j]));
        }
        const float d = amax / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        int P[2][2] = {{0, 0}, {0, 0}}; /* [half][pair slot] */
        for (int j = 0; j < HET_Q8R_BLOCK; j++) {
            int q = het_nearest_int(xb[j] * id);
            q = q > 127 ? 127 : q < -127 ? -127 : q;
            qs[j] = (int8_t)q;
            P[j / 16][(j / 2) % 2] += q;
            if (l->with_abs) row[(size_t)b * l->bs + 32 + j] = (uint8_t)abs(q);
        }
        const int sum[2] = {P[0][0] + P[0][1], P[1][0] + P[1][1]};
        const int sum32 = sum[0] + sum[1];
        struct het_q8r_meta m = {
            .d = d, .s = d * (float)sum32, .sum32 = sum32,
            .x32 = {-32 * sum[0], -32 * sum[1]},
            .off8 = {(int16_t)(-8 * (P[0][0] + P[1][0])), (int16_t)(-8 * (P[0][1] + P[1][1]))},
            .off32 = {{(int16_t)(-32 * P[0][0]), (int16_t)(-32 * P[0][1])},
                      {(int16_t)(-32 * P[1][0]), (int16_t)(-32 * P[1][1])}},
        };
        memset(row + (size_t)b * l->bs + l->bs - 32, 0, 32);
        memcpy(row + (size_t)b * l->bs + l->bs - 32, &m, sizeof m);
    }
}

/* ---- common decoded block ------------------------------------------------ */

/* One 32-element block of a weight row in common form. */
struct het_qblk {
    int   q[32];   /* U4/U5/U6: unsigned quants; S8: signed                  */
    float d, c;    /* scale and offset term (U4/U5/S8); U6: super-block d     */
    int   sc[2];   /* U6: scales of the two 16-element halves                 */
};

static inline float het_h2f(uint16_t h) { return het_fp16_to_fp32(h); }

static void het_decode_nibbles(const uint8_t *qs, int *q)
{
    for (int j = 0; j < 16; j++) {
        q[j] = qs[j] & 15;
        q[j + 16] = qs[j] >> 4;
    }
}

static void het_add_high_bits(const uint8_t qh4[4], int *q)
{
    uint32_t qh;
    memcpy(&qh, qh4, 4);
    for (int j = 0; j < 32; j++) q[j] |= (int)((qh >> j) & 1) << 4;
}

static void het_decode_q4k_like(const het_block_q4_k *x4, const het_block_q5_k *x5, int j, struct het_qblk *o)
{
    const uint8_t *scales = x4 ? x4->scales : x5->scales;
    const uint8_t *qs = (x4 ? x4->qs : x5->qs) + 32 * (j / 2);
    uint8_t sc, m;
    het_q4k_scale_min(j, scales, &sc, &m);
    const float d = het_h2f(x4 ? x4->d : x5->d), dmin = het_h2f(x4 ? x4->dmin : x5->dmin);
    for (int l = 0; l < 32; l++) {
        o->q[l] = (j & 1) ? qs[l] >> 4 : qs[l] & 15;
        if (x5) o->q[l] |= ((x5->qh[l] >> j) & 1) << 4;
    }
    o->d = d * (float)sc;
    o->c = -dmin * (float)m;
}

static void het_decode_q6k(const het_block_q6_k *x, int t, struct het_qblk *o)
{
    const int hh = t / 4, tt = t % 4;
    const uint8_t *ql = x->ql + 64 * hh + (tt & 1) * 32;
    const uint8_t *qh = x->qh + 32 * hh;
    for (int l = 0; l < 32; l++) {
        int lo = tt < 2 ? (ql[l] & 15) : (ql[l] >> 4);
        o->q[l] = lo | (((qh[l] >> (2 * tt)) & 3) << 4);
    }
    o->d = het_h2f(x->d);
    o->c = 0.0f;
    o->sc[0] = x->scales[2 * t];
    o->sc[1] = x->scales[2 * t + 1];
}

/* Decode block b (32 elements) of a weight row of a quantised type. */
static void het_qblk_decode(enum het_type type, const void *row, int64_t b, struct het_qblk *o)
{
    o->sc[0] = o->sc[1] = 0;
    switch (type) {
    case HET_TYPE_Q4_0: {
        const het_block_q4_0 *x = (const het_block_q4_0 *)row + b;
        het_decode_nibbles(x->qs, o->q);
        o->d = het_h2f(x->d);
        o->c = -8.0f * o->d;
        break;
    }
    case HET_TYPE_Q4_1: {
        const het_block_q4_1 *x = (const het_block_q4_1 *)row + b;
        het_decode_nibbles(x->qs, o->q);
        o->d = het_h2f(x->d);
        o->c = het_h2f(x->m);
        break;
    }
    case HET_TYPE_Q5_0: {
        const het_block_q5_0 *x = (const het_block_q5_0 *)row + b;
        het_decode_nibbles(x->qs, o->q);
        het_add_high_bits(x->qh, o->q);
        o->d = het_h2f(x->d);
        o->c = -16.0f * o->d;
        break;
    }
    case HET_TYPE_Q5_1: {
        const het_block_q5_1 *x = (const het_block_q5_1 *)row + b;
        het_decode_nibbles(x->qs, o->q);
        het_add_high_bits(x->qh, o->q);
        o->d = het_h2f(x->d);
        o->c = het_h2f(x->m);
        break;
    }
    case HET_TYPE_Q8_0: {
        const het_block_q8_0 *x = (const het_block_q8_0 *)row + b;
        for (int j = 0; j < 32; j++) o->q[j] = x->qs[j];
        o->d = het_h2f(x->d);
        o->c = 0.0f;
        break;
    }
    case HET_TYPE_Q4_K:
        het_decode_q4k_like((const het_block_q4_k *)row + b / 8, NULL, (int)(b % 8), o);
        break;
    case HET_TYPE_Q5_K:
        het_decode_q4k_like(NULL, (const het_block_q5_k *)row + b / 8, (int)(b % 8), o);
        break;
    case HET_TYPE_Q6_K:
        het_decode_q6k((const het_block_q6_k *)row + b / 8, (int)(b % 8), o);
        break;
    default:
        memset(o, 0, sizeof(*o));
        break;
    }
}

bool het_panel_kind_of(enum het_type type, enum het_panel_kind *kind)
{
    switch (type) {
    case HET_TYPE_Q4_0: case HET_TYPE_Q4_1: case HET_TYPE_Q4_K: *kind = HET_PANEL_U4; return true;
    case HET_TYPE_Q5_0: case HET_TYPE_Q5_1: case HET_TYPE_Q5_K: *kind = HET_PANEL_U5; return true;
    case HET_TYPE_Q8_0: *kind = HET_PANEL_S8; return true;
    case HET_TYPE_Q6_K: *kind = HET_PANEL_U6; return true;
    default: return false;
    }
}

int het_panel_kinds(enum het_type type, enum het_panel_kind kinds[3])
{
    int n = 0;
    if (type == HET_TYPE_Q4_0) kinds[n++] = HET_PANEL_Q40;
    if (type == HET_TYPE_Q8_0) kinds[n++] = HET_PANEL_Q80;
    if (type == HET_TYPE_Q6_K) kinds[n++] = HET_PANEL_Q6C;
    if (type == HET_TYPE_Q4_K) kinds[n++] = HET_PANEL_Q4KC;
    if (type == HET_TYPE_Q4_0 || type == HET_TYPE_Q4_1) kinds[n++] = HET_PANEL_U4N;
    if (het_panel_kind_of(type, &kinds[n])) n++;
    return n;
}

/* Packing on the fly costs about as much as a row GEMV, so panels pay off
 * from a few activation rows on (prepacked weights use them for any M). */
int het_panel_min_m(enum het_panel_kind kind) { return 4; }

/* Dot of a decoded block with block b of a q8r row, in the common formula. */
static float het_qblk_dot(enum het_panel_kind kind, const struct het_qblk *w, const uint8_t *a, size_t bs, int64_t b)
{
    const int8_t *qa = het_q8r_qs(a, bs, b);
    const struct het_q8r_meta *m = het_q8r_meta(a, bs, b);
    if (kind == HET_PANEL_U6) {
        int s[2] = {0, 0};
        for (int j = 0; j < 32; j++) s[j / 16] += w->q[j] * qa[j];
        int isum = w->sc[0] * (s[0] + m->x32[0]) + w->sc[1] * (s[1] + m->x32[1]);
        return w->d * m->d * (float)isum;
    }
    int isum = 0;
    for (int j = 0; j < 32; j++) isum += w->q[j] * qa[j];
    return w->d * m->d * (float)isum + w->c * m->s;
}

void het_gemv_scalar(enum het_type type, int64_t K, const void *w, const uint8_t *const *a, int nc, float *out)
{
    enum het_panel_kind kind;
    if (!het_panel_kind_of(type, &kind)) {
        for (int c = 0; c < nc; c++) out[c] = 0.0f;
        return;
    }
    const size_t bs = het_q8r_bs_for(type);
    float acc[4] = {0, 0, 0, 0};
    struct het_qblk blk;
    for (int64_t b = 0; b < K / HET_Q8R_BLOCK; b++) {
        het_qblk_decode(type, w, b, &blk);
        for (int c = 0; c < nc; c++) acc[c] += het_qblk_dot(kind, &blk, a[c], bs, b);
    }
    for (int c = 0; c < nc; c++) out[c] = acc[c];
}

/* ---- float weights -------------------------------------------------------- */

static float het_felem(enum het_type type, const void *w, int64_t k)
{
    switch (type) {
    case HET_TYPE_F32:  return ((const float *)w)[k];
    case HET_TYPE_F16:  return het_fp16_to_fp32(((const uint16_t *)w)[k]);
    case HET_TYPE_BF16: return het_bf16_to_fp32(((const uint16_t *)w)[k]);
    default:            return 0.0f;
    }
}

void het_fdot_scalar(enum het_type type, int64_t K, const void *const *w, int nr, const float *const *x, int nc,
                     float *out)
{
    for (int r = 0; r < nr; r++) {
        for (int c = 0; c < nc; c++) {
            float acc = 0.0f;
            for (int64_t k = 0; k < K; k++) acc += het_felem(type, w[r], k) * x[c][k];
            out[r * 4 + c] = acc;
        }
    }
}

/* ---- packed panels --------------------------------------------------------- */

void het_panel_layout_init(struct het_panel_layout *l, enum het_panel_kind kind, int R, int64_t K)
{
    l->kind = kind;
    l->R = R;
    l->nb = K / HET_Q8R_BLOCK;
    l->grp = 1;
    l->grp_bytes = 0;
    if (het_panel_is_compact(kind)) {
        const size_t r = (size_t)R;
        l->off_d = l->off_c = l->off_sc = 0;
        l->blk_bytes = (kind == HET_PANEL_Q80 ? 32 : kind == HET_PANEL_Q6C ? 24 : 16) * r;
        l->grp = kind == HET_PANEL_Q6C ? 16 : kind == HET_PANEL_Q4KC ? 8 : 4;
        /* quants (and per-block scale bytes), then the fp16 scales */
        l->grp_bytes = het_cpanel_d_off(l, l->grp) + het_cpanel_d_bytes(l, l->grp);
        const int64_t ng = (l->nb + l->grp - 1) / l->grp, last = het_cpanel_len(l, ng - 1);
        l->bytes = (size_t)(ng - 1) * l->grp_bytes + het_cpanel_d_off(l, last) + het_cpanel_d_bytes(l, last);
        return;
    }
    l->off_d = (kind == HET_PANEL_U4N ? 16 : 32) * (size_t)R;
    l->off_c = l->off_d + 4 * (size_t)R;
    l->off_sc = l->off_c + 4 * (size_t)R;
    l->blk_bytes = l->off_sc + (kind == HET_PANEL_U6 ? 12 * (size_t)R : 0);
    l->bytes = l->blk_bytes * (size_t)l->nb;
}

/* Block b of a row as the panel stores it: words[g] holds quants 4g..4g+3
 * (little endian), plus d, c and the q6_K half scales. Word-level fast
 * paths for the common types; the generic decode for the rest. */
struct het_pblk {
    uint32_t w[8];
    float    d, c;
    int16_t  sc[2];
};

static uint32_t het_ld32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

static void het_pblk_decode(enum het_type type, const void *row, int64_t b, struct het_pblk *o)
{
    const uint32_t m4 = 0x0F0F0F0Fu;
    o->sc[0] = o->sc[1] = 0;
    switch (type) {
    case HET_TYPE_Q4_0: {
        const het_block_q4_0 *x = (const het_block_q4_0 *)row + b;
        for (int g = 0; g < 4; g++) {
            const uint32_t v = het_ld32(x->qs + 4 * g);
            o->w[g] = v & m4;
            o->w[g + 4] = (v >> 4) & m4;
        }
        o->d = het_h2f(x->d);
        o->c = -8.0f * o->d;
        return;
    }
    case HET_TYPE_Q8_0: {
        const het_block_q8_0 *x = (const het_block_q8_0 *)row + b;
        memcpy(o->w, x->qs, 32);
        o->d = het_h2f(x->d);
        o->c = 0.0f;
        return;
    }
    case HET_TYPE_Q4_K: {
        const het_block_q4_k *x = (const het_block_q4_k *)row + b / 8;
        const int j = (int)(b % 8);
        const uint8_t *qs = x->qs + 32 * (j / 2);
        for (int g = 0; g < 8; g++) o->w[g] = (het_ld32(qs + 4 * g) >> (4 * (j & 1))) & m4;
        uint8_t sc, m;
        het_q4k_scale_min(j, x->scales, &sc, &m);
        o->d = het_h2f(x->d) * (float)sc;
        o->c = -het_h2f(x->dmin) * (float)m;
        return;
    }
    case HET_TYPE_Q6_K: {
        const het_block_q6_k *x = (const het_block_q6_k *)row + b / 8;
        const int t = (int)(b % 8), hh = t / 4, tt = t % 4;
        const uint8_t *ql = x->ql + 64 * hh + (tt & 1) * 32;
        const uint8_t *qh = x->qh + 32 * hh;
        for (int g = 0; g < 8; g++) {
            const uint32_t lo = (het_ld32(ql + 4 * g) >> (4 * (tt >> 1))) & m4;
            const uint32_t hi = (het_ld32(qh + 4 * g) >> (2 * tt)) & 0x03030303u;
            o->w[g] = lo | (hi << 4);
        }
        o->d = het_h2f(x->d);
        o->c = 0.0f;
        o->sc[0] = x->scales[2 * t];
        o->sc[1] = x->scales[2 * t + 1];
        return;
    }
    default: {
        struct het_qblk q;
        het_qblk_decode(type, row, b, &q);
        uint8_t bytes[32];
        for (int j = 0; j < 32; j++) bytes[j] = (uint8_t)(int8_t)q.q[j];
        memcpy(o->w, bytes, 32);
        o->d = q.d;
        o->c = q.c;
        o->sc[0] = (int16_t)q.sc[0];
        o->sc[1] = (int16_t)q.sc[1];
        return;
    }
    }
}

/* U4N: the 16 nibble bytes of each q4_0/q4_1 block, 4 at a time. */
static void het_panel_pack_nibbles(enum het_type type, const struct het_panel_layout *l, const void *rows,
                                   size_t row_stride, int nrows, void *dst)
{
    const int R = l->R;
    const size_t ts = type == HET_TYPE_Q4_0 ? sizeof(het_block_q4_0) : sizeof(het_block_q4_1);
    const size_t qoff = type == HET_TYPE_Q4_0 ? offsetof(het_block_q4_0, qs) : offsetof(het_block_q4_1, qs);
    for (int64_t b = 0; b < l->nb; b++) {
        uint8_t *pb = (uint8_t *)dst + (size_t)b * l->blk_bytes;
        if (nrows < R) memset(pb, 0, l->blk_bytes);
        float *dv = (float *)(pb + l->off_d), *cv = (float *)(pb + l->off_c);
        for (int r = 0; r < nrows; r++) {
            const uint8_t *x = (const uint8_t *)rows + (size_t)r * row_stride + (size_t)b * ts;
            for (int g = 0; g < 4; g++) memcpy(pb + (size_t)(g * R + r) * 4, x + qoff + 4 * g, 4);
            uint16_t h[2];
            memcpy(h, x, 4);
            dv[r] = het_h2f(h[0]);
            cv[r] = type == HET_TYPE_Q4_0 ? -8.0f * dv[r] : het_h2f(h[1]);
        }
    }
}

/* Q40 / Q80: each 4-byte word of a block's quants is one of the panel's
 * words as stored (Q40's word g holds k 4g..4g+3 in its low nibbles and
 * k 16+4g.. in its high ones, as the file's bytes 4g..4g+3 do), and d is
 * the file's fp16: a transpose of words, with no decode. (Through
 * het_pblk_decode it was a third of a model's load time.) */
static void het_panel_pack_words(enum het_type type, const struct het_panel_layout *l, const void *rows,
                                 size_t row_stride, int nrows, void *dst)
{
    const size_t R = (size_t)l->R;
    const bool q8 = type == HET_TYPE_Q8_0;
    const size_t ts = q8 ? sizeof(het_block_q8_0) : sizeof(het_block_q4_0);
    const size_t qoff = q8 ? offsetof(het_block_q8_0, qs) : offsetof(het_block_q4_0, qs);
    const int nw = q8 ? 8 : 4;
    uint8_t *out = dst;
    memset(out, 0, l->bytes);
    for (int64_t gi = 0; gi * l->grp < l->nb; gi++) {
        const int64_t len = het_cpanel_len(l, gi);
        uint8_t *grp = out + (size_t)gi * l->grp_bytes, *dv = grp + het_cpanel_d_off(l, len);
        for (int64_t j = 0; j < len; j++) {
            uint8_t *pb = grp + (size_t)j * l->blk_bytes;
            const uint8_t *x = (const uint8_t *)rows + (size_t)(gi * l->grp + j) * ts;
            for (int r = 0; r < nrows; r++, x += row_stride) {
                for (int g = 0; g < nw; g++) memcpy(pb + ((size_t)g * R + (size_t)r) * 4, x + qoff + 4 * g, 4);
                memcpy(dv + ((size_t)j * R + (size_t)r) * 2, x, 2);
            }
        }
    }
}

/* The four quant words of row r of a Q6C / Q4KC block into pb (R rows a
 * word): word g joins the nibbles (those at bit ns of each byte) of q's
 * bytes 4g..4g+3 (values 4g..) and 16+4g.. (values 16+4g..), as the
 * compact kernels read them. */
static void het_pack_nibble_words(uint8_t *pb, size_t R, int r, const uint8_t *q, int ns)
{
    const uint32_t m4 = 0x0F0F0F0Fu;
    for (int g = 0; g < 4; g++) {
        const uint32_t v = ((het_ld32(q + 4 * g) >> ns) & m4) | (((het_ld32(q + 16 + 4 * g) >> ns) & m4) << 4);
        memcpy(pb + ((size_t)g * R + (size_t)r) * 4, &v, 4);
    }
}

/* Q6C / Q4KC from q6_K / q4_K rows: the low nibbles of each 32-value block
 * (and q6_K's two high bits, four values' to a byte) as the panel's words,
 * the sub-block scales (q6_K's two int8 half scales; q4_K's 6-bit sc and m
 * unpacked) and each super-block's fp16 d (and dmin) as the file has them. */
static void het_panel_pack_kquant(const struct het_panel_layout *l, const void *rows, size_t row_stride, int nrows,
                                  void *dst)
{
    const size_t R = (size_t)l->R;
    const bool q6 = l->kind == HET_PANEL_Q6C;
    const size_t ts = q6 ? sizeof(het_block_q6_k) : sizeof(het_block_q4_k);
    uint8_t *out = dst;
    memset(out, 0, l->bytes);
    for (int64_t gi = 0; gi * l->grp < l->nb; gi++) {
        const int64_t len = het_cpanel_len(l, gi);
        uint8_t *grp = out + (size_t)gi * l->grp_bytes;
        uint8_t *sc = grp + het_cpanel_sc_off(l, len), *dv = grp + het_cpanel_d_off(l, len);
        for (int64_t j = 0; j < len; j++) {
            const int64_t b = gi * l->grp + j; /* the row's 32-value block; t its place in the super-block */
            const int     t = (int)(b % 8);
            uint8_t      *pb = grp + (size_t)j * l->blk_bytes;
            const uint8_t *sb = (const uint8_t *)rows + (size_t)(b / 8) * ts;
            for (int r = 0; r < nrows; r++, sb += row_stride) {
                if (q6) {
                    const het_block_q6_k *x = (const het_block_q6_k *)(const void *)sb;
                    const int tt = t % 4, ns = 4 * (tt >> 1);
                    const uint8_t *ql = x->ql + 64 * (t / 4) + (tt & 1) * 32, *qh = x->qh + 32 * (t / 4);
                    het_pack_nibble_words(pb, R, r, ql, ns);
                    for (int h = 0; h < 2; h++) {
                        uint32_t v = 0;
                        for (int i = 0; i < 4; i++)
                            v |= ((het_ld32(qh + 4 * (4 * h + i)) >> (2 * tt)) & 0x03030303u) << (2 * i);
                        memcpy(pb + 16 * R + ((size_t)h * R + (size_t)r) * 4, &v, 4);
                    }
                    memcpy(sc + ((size_t)j * R + (size_t)r) * 2, x->scales + 2 * t, 2);
                    if (j % 8 == 0) memcpy(dv + ((size_t)(j / 8) * R + (size_t)r) * 2, &x->d, 2);
                } else {
                    const het_block_q4_k *x = (const het_block_q4_k *)(const void *)sb;
                    het_pack_nibble_words(pb, R, r, x->qs + 32 * (t / 2), 4 * (t & 1));
                    uint8_t s, m;
                    het_q4k_scale_min(t, x->scales, &s, &m);
                    sc[(size_t)j * 2 * R + (size_t)r] = s;
                    sc[(size_t)j * 2 * R + R + (size_t)r] = m;
                    if (j == 0) {
                        memcpy(dv + (size_t)r * 2, &x->d, 2);
                        memcpy(dv + (R + (size_t)r) * 2, &x->dmin, 2);
                    }
                }
            }
        }
    }
}

void het_panel_pack(enum het_type type, const struct het_panel_layout *l, const void *rows, size_t row_stride,
                    int nrows, void *dst)
{
    const int R = l->R;
    if (l->kind == HET_PANEL_U4N) {
        het_panel_pack_nibbles(type, l, rows, row_stride, nrows, dst);
        return;
    }
    /* each compact kind is made from one type (het_panel_kinds) */
    if (l->kind == HET_PANEL_Q40 || l->kind == HET_PANEL_Q80) {
        het_panel_pack_words(type, l, rows, row_stride, nrows, dst);
        return;
    }
    if (l->kind == HET_PANEL_Q6C || l->kind == HET_PANEL_Q4KC) {
        het_panel_pack_kquant(l, rows, row_stride, nrows, dst);
        return;
    }
    struct het_pblk blk;
    for (int64_t b = 0; b < l->nb; b++) {
        uint8_t *pb = (uint8_t *)dst + (size_t)b * l->blk_bytes;
        if (nrows < R) memset(pb, 0, l->blk_bytes);
        float *dv = (float *)(pb + l->off_d), *cv = (float *)(pb + l->off_c);
        int16_t *sc = (int16_t *)(pb + l->off_sc);
        for (int r = 0; r < nrows; r++) {
            het_pblk_decode(type, (const uint8_t *)rows + (size_t)r * row_stride, b, &blk);
            for (int g = 0; g < 8; g++) memcpy(pb + (size_t)(g * R + r) * 4, &blk.w[g], 4);
            dv[r] = blk.d;
            cv[r] = blk.c;
            if (l->kind == HET_PANEL_U6) {
                sc[2 * r] = blk.sc[0];             sc[2 * r + 1] = blk.sc[0];
                sc[2 * R + 2 * r] = blk.sc[1];     sc[2 * R + 2 * r + 1] = blk.sc[1];
                sc[4 * R + 2 * r] = blk.sc[0];     sc[4 * R + 2 * r + 1] = blk.sc[1];
            }
        }
    }
}

/* Row r, block b of a compact panel in common form (the formula kind is
 * U4 for Q40 with c = 0: the kernels take the -8 off in integers). */
static void het_compact_decode(const struct het_panel_layout *l, const uint8_t *panel, int r, int64_t b,
                               struct het_qblk *o)
{
    const size_t R = (size_t)l->R;
    const int64_t gi = b / l->grp, jb = b % l->grp, len = het_cpanel_len(l, gi);
    const uint8_t *grp = het_cpanel_grp(l, panel, gi);
    const uint8_t *pb = grp + (size_t)jb * l->blk_bytes;
    for (int j = 0; j < 32; j++) {
        const size_t at = (((size_t)(j / 4) % 4) * R + (size_t)r) * 4 + (size_t)(j % 4);
        if (l->kind == HET_PANEL_Q80) {
            o->q[j] = (int8_t)pb[((size_t)(j / 4) * R + (size_t)r) * 4 + (size_t)(j % 4)];
            continue;
        }
        o->q[j] = j < 16 ? pb[at] & 15 : pb[at] >> 4;
        if (l->kind == HET_PANEL_Q6C) {
            const uint8_t qh = pb[16 * R + ((size_t)(j / 16) * R + (size_t)r) * 4 + (size_t)(j % 4)];
            o->q[j] |= ((qh >> (2 * ((j % 16) / 4))) & 3) << 4;
        }
    }
    uint16_t h;
    o->sc[0] = o->sc[1] = 0;
    if (l->kind == HET_PANEL_Q4KC) {
        const uint8_t *scm = grp + het_cpanel_sc_off(l, len) + (size_t)jb * 2 * R;
        uint16_t hm;
        memcpy(&h, grp + het_cpanel_d_off(l, len) + (size_t)r * 2, 2);
        memcpy(&hm, grp + het_cpanel_d_off(l, len) + (R + (size_t)r) * 2, 2);
        o->d = het_h2f(h) * (float)scm[r];
        o->c = -het_h2f(hm) * (float)scm[R + (size_t)r];
        return;
    }
    const int64_t db = l->kind == HET_PANEL_Q6C ? jb / 8 : jb;
    memcpy(&h, grp + het_cpanel_d_off(l, len) + ((size_t)db * R + (size_t)r) * 2, 2);
    o->d = het_h2f(h);
    o->c = 0.0f;
    if (l->kind == HET_PANEL_Q6C) {
        const int8_t *sc = (const int8_t *)(grp + het_cpanel_sc_off(l, len) + ((size_t)jb * R + (size_t)r) * 2);
        o->sc[0] = sc[0];
        o->sc[1] = sc[1];
    }
}

static void het_panel_gemm_compact(const struct het_panel_layout *l, const void *panel, const uint8_t *const *a,
                                   int nc, float *out)
{
    const int R = l->R;
    const size_t bs = l->kind == HET_PANEL_Q80 ? HET_Q8R_BS_ABS : HET_Q8R_BS;
    const enum het_panel_kind fk = l->kind == HET_PANEL_Q80 ? HET_PANEL_S8 : l->kind == HET_PANEL_Q6C ? HET_PANEL_U6
                                                                                                     : HET_PANEL_U4;
    struct het_qblk blk;
    for (int c = 0; c < nc; c++)
        for (int r = 0; r < R; r++) out[c * R + r] = 0.0f;
    for (int64_t b = 0; b < l->nb; b++) {
        for (int r = 0; r < R; r++) {
            het_compact_decode(l, panel, r, b, &blk);
            for (int c = 0; c < nc; c++) {
                if (l->kind != HET_PANEL_Q40) {
                    out[c * R + r] += het_qblk_dot(fk, &blk, a[c], bs, b);
                    continue;
                }
                /* d * da * (sum(q*a) - 8*sum(a)), the sum in integers */
                const int8_t *qa = het_q8r_qs(a[c], bs, b);
                const struct het_q8r_meta *m = het_q8r_meta(a[c], bs, b);
                int isum = -8 * m->sum32;
                for (int j = 0; j < 32; j++) isum += blk.q[j] * qa[j];
                out[c * R + r] += blk.d * m->d * (float)isum;
            }
        }
    }
}

void het_panel_gemm_scalar(const struct het_panel_layout *l, const void *panel, const uint8_t *const *a, int nc,
                           float *out)
{
    const int R = l->R;
    const size_t bs = l->kind == HET_PANEL_S8 ? HET_Q8R_BS_ABS : HET_Q8R_BS;
    struct het_qblk blk;
    if (het_panel_is_compact(l->kind)) {
        het_panel_gemm_compact(l, panel, a, nc, out);
        return;
    }
    for (int c = 0; c < nc; c++)
        for (int r = 0; r < R; r++) out[c * R + r] = 0.0f;
    for (int64_t b = 0; b < l->nb; b++) {
        const uint8_t *pb = (const uint8_t *)panel + (size_t)b * l->blk_bytes;
        for (int r = 0; r < R; r++) {
            for (int j = 0; j < 32; j++) {
                if (l->kind == HET_PANEL_U4N) {
                    uint8_t v = pb[(((j / 4) % 4) * R + r) * 4 + j % 4];
                    blk.q[j] = j < 16 ? v & 15 : v >> 4;
                    continue;
                }
                uint8_t v = pb[((j / 4) * R + r) * 4 + j % 4];
                blk.q[j] = l->kind == HET_PANEL_S8 ? (int)(int8_t)v : (int)v;
            }
            memcpy(&blk.d, pb + l->off_d + 4 * (size_t)r, 4);
            memcpy(&blk.c, pb + l->off_c + 4 * (size_t)r, 4);
            if (l->kind == HET_PANEL_U6) {
                const int16_t *sc = (const int16_t *)(pb + l->off_sc);
                blk.sc[0] = sc[4 * R + 2 * r];
                blk.sc[1] = sc[4 * R + 2 * r + 1];
            }
            const enum het_panel_kind fk = l->kind == HET_PANEL_U4N ? HET_PANEL_U4 : l->kind;
            for (int c = 0; c < nc; c++) out[c * R + r] += het_qblk_dot(fk, &blk, a[c], bs, b);
        }
    }
}

/* ---- the scalar kernel table ---------------------------------------------- */

#define HET_GEMV_SCALAR(name, type)                                                               \
    static void name(int64_t K, const void *w, const uint8_t *const *a, int nc, float *out) { \
        het_gemv_scalar(type, K, w, a, nc, out);                                                  \
    }
HET_GEMV_SCALAR(het_gemv_q4_0_scalar, HET_TYPE_Q4_0)
HET_GEMV_SCALAR(het_gemv_q4_1_scalar, HET_TYPE_Q4_1)
HET_GEMV_SCALAR(het_gemv_q5_0_scalar, HET_TYPE_Q5_0)
HET_GEMV_SCALAR(het_gemv_q5_1_scalar, HET_TYPE_Q5_1)
HET_GEMV_SCALAR(het_gemv_q8_0_scalar, HET_TYPE_Q8_0)
HET_GEMV_SCALAR(het_gemv_q4_k_scalar, HET_TYPE_Q4_K)
HET_GEMV_SCALAR(het_gemv_q5_k_scalar, HET_TYPE_Q5_K)
HET_GEMV_SCALAR(het_gemv_q6_k_scalar, HET_TYPE_Q6_K)
#undef HET_GEMV_SCALAR

#define HET_FDOT_SCALAR(name, type)                                                                       \
    static void name(int64_t K, const void *const *w, int nr, const float *const *x, int nc, float *out) { \
        het_fdot_scalar(type, K, w, nr, x, nc, out);                                                      \
    }
HET_FDOT_SCALAR(het_fdot_f32_scalar, HET_TYPE_F32)
HET_FDOT_SCALAR(het_fdot_f16_scalar, HET_TYPE_F16)
HET_FDOT_SCALAR(het_fdot_bf16_scalar, HET_TYPE_BF16)
#undef HET_FDOT_SCALAR

/* The scalar level packs 16-row panels: the AVX-512 layout, so that the
 * packer's R=16 form is exercised on every machine. */
const struct het_mm_kernels het_mm_kernels_scalar = {
    .quantize = het_q8r_quantize_scalar,
    .gemv = {
        [HET_TYPE_Q4_0] = het_gemv_q4_0_scalar, [HET_TYPE_Q4_1] = het_gemv_q4_1_scalar,
        [HET_TYPE_Q5_0] = het_gemv_q5_0_scalar, [HET_TYPE_Q5_1] = het_gemv_q5_1_scalar,
        [HET_TYPE_Q8_0] = het_gemv_q8_0_scalar, [HET_TYPE_Q4_K] = het_gemv_q4_k_scalar,
        [HET_TYPE_Q5_K] = het_gemv_q5_k_scalar, [HET_TYPE_Q6_K] = het_gemv_q6_k_scalar,
    },
    .fdot = {
        [HET_TYPE_F32] = het_fdot_f32_scalar, [HET_TYPE_F16] = het_fdot_f16_scalar,
        [HET_TYPE_BF16] = het_fdot_bf16_scalar,
    },
    .panel = {
        [HET_PANEL_U4] = het_panel_gemm_scalar, [HET_PANEL_U5] = het_panel_gemm_scalar,
        [HET_PANEL_S8] = het_panel_gemm_scalar, [HET_PANEL_U6] = het_panel_gemm_scalar,
        [HET_PANEL_U4N] = het_panel_gemm_scalar, [HET_PANEL_Q40] = het_panel_gemm_scalar,
        [HET_PANEL_Q80] = het_panel_gemm_scalar, [HET_PANEL_Q6C] = het_panel_gemm_scalar,
        [HET_PANEL_Q4KC] = het_panel_gemm_scalar,
    },
    .panel_rows = 16,
};
