/*
 * panel_amx.c — the AMX level's kernel table (het_mm_kernels_amx): the
 * avx512vnni kernels everywhere but prefill's wide panels (q4_0, q8_0, q4_K,
 * q6_K), whose integer sums run on the tile unit (AMX-INT8, tdpbssd).
 *
 * A wide block (32 rows x 32 k, quant_dot.h) is q[8][32][4]: for each group
 * of 4 k, 32 rows of 4 bytes. Half of it (16 rows) read with a stride of 128
 * bytes is the B operand of tdpbssd as it stands: K/4 = 8 rows of 16 x 4
 * bytes. The A operand is 16 activation rows x 32 bytes of one block, which
 * come packed (het_xpack_amx, quant_dot.h): per block, 16 rows' quants side
 * by side (one A tile, 512 contiguous bytes), then their d and quant sums,
 * so a tile load reads 8 lines and the scales need no gather. One tdpbssd
 * gives the 16 x 16 block sums that the AVX-512 kernel builds with 128
 * vpdpbusd; the tile goes through memory to zmm registers, where each of its
 * 16 rows is converted, scaled and added up. Standalone loops of such a
 * step on the Xeon VM (bench/README.md, session 41; TSC cycles per block and
 * half): tile loads and product alone 23-29, the product alone 16, the
 * scaling alone 24-31, all of it 44-74. The two streams hardly overlap, and
 * a product of K = 32 costs about what one of K = 64 does (the peak loop's,
 * 13):
 *  - q4_0 and q8_0: acc[m] += cvt(C[m]) * (dw * da[m]) a block, three
 *    instructions per 16 sums, the avx512vnni kernel's own operations in its
 *    order (so both give the same bits). Q4_0's nibbles are expanded as
 *    q - 8 (signed: no activation-sum offset) and q8_0's keep their sign.
 *  - q4_K and q6_K: the super-block's integer sub-scales go into the
 *    expanded weights, so the tile sums a whole super-block (256 k) exactly
 *    and the vector work comes once per super-block instead of once per
 *    block or half block. A weight w = sc * q (q6_K: sc * (q - 32)) needs up
 *    to 13 bits; it is stored as two byte planes, w = 256 * H + L with L its
 *    low byte read as signed and H = (w + 128) >> 8 (q4_K 0..4, q6_K
 *    -16..16), and per 64 k two products, C_H += A * H and C_L += A * L.
 *    At the super-block's end, (C_H << 8) + C_L is the integer dot of the
 *    activation quants with sc * q (|sum| < 2^31: 256 * 127 * 4096); it is
 *    scaled by the rows' d and the activation's d, and q4_K's mins come in
 *    as -dmin * m times the activation's block sums, eight products a row
 *    of 16. The tiles are A0, A1 (two groups of 16 activation rows), B_H,
 *    B_L (16 weight rows) and the four C_{group, plane}: every tile load
 *    feeds two products. A block-by-block form (one product and one
 *    scaling per block, q6_K per half block) ran 599-610 tok/s (q4_K) and
 *    451-462 (q6_K) in bench_matmul -t 1 -M 512 -p 1; figures of this form
 *    in bench/README.md (session 41).
 *    The activations for these come packed per super-block (het_xpack_kq):
 *    per 64 k, 16 rows x 64 bytes (one A tile), then the rows' d and their
 *    8 block sums.
 *
 * Every call loads the tile configuration and releases the tiles at its
 * end, so no tile state outlives a call and a thread needs no setup; a call
 * takes up to 64 activation rows (xcols), 16 at a time.
 *
 * The OS must grant the tile data state first (het_cpu_amx_request, Linux
 * arch_prctl); het_cpu_isa_select offers this level only then.
 */
#include <immintrin.h>
#include <stddef.h>
#include <string.h>

#include "devices/cpu/arch/amx/amx_tilecfg.h"
#include "devices/cpu/arch/avx512/panel_compact_avx512.h"
#include "devices/cpu/quant_dot.h"

#define HET_AMX_ROWS   HET_XPACK_ROWS /* activation rows of one A tile, sums of one C tile */
#define HET_AMX_XCOLS  64             /* activation rows a call: 4 packed groups          */
_Static_assert(HET_XPACK_BLK == 16 * 32 + 2 * 16 * 4, "a packed block: A tile, the rows' d, their sums");

/* tmm0..3: C (16 activation x 16 weight rows of i32); tmm4, 5: A (16
 * activation rows x 32 int8); tmm6, 7: B (8 groups of 4 k x 16 weight rows).
 * A constant (amx_tilecfg.h says why). */
static const struct het_amx_tilecfg het_amx_cfg __attribute__((aligned(64))) = {
    .palette = 1,
    .colsb = {64, 64, 64, 64, 32, 32, 64, 64},
    .rows = {16, 16, 16, 16, 16, 16, 8, 8},
};

/* ---- q4_0, q8_0: a product and a scaling per block ------------------------------ */

/* Tile C = block j's sums: packed activations (A) times half h of the wide
 * block (B). */
#define HET_AMX_DOT(C, TA, TB, j)                                                                            \
    do {                                                                                                     \
        _tile_loadd(TA, ap + (size_t)(j) * HET_XPACK_BLK, 32);                                               \
        _tile_loadd(TB, het_x_block((void *)(uintptr_t)xp, j, HET_PANEL_Q40) + 64 * h, 128);                 \
        _tile_zero(C);                                                                                       \
        _tile_dpbssd(C, TA, TB);                                                                             \
    } while (0)

/* Block j's sums, stored from their tile into cs earlier, into acc. */
static inline __attribute__((always_inline)) void het_amx_scale(const int32_t *cs, int64_t j, const uint8_t *xp,
                                                                const uint8_t *ap, int h, __m512 *acc)
{
    const uint8_t *x = het_x_block((void *)(uintptr_t)xp, j, HET_PANEL_Q40) + 64 * h;
    const float *da = (const float *)(const void *)(ap + (size_t)j * HET_XPACK_BLK + 512);
    const __m512 dw = _mm512_load_ps((const void *)(x + 1024));
#pragma GCC unroll 16
    for (int m = 0; m < HET_AMX_ROWS; m++) {
        const __m512i t = _mm512_load_si512((const void *)(cs + 16 * m));
        acc[m] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(t), _mm512_mul_ps(dw, _mm512_set1_ps(da[m])), acc[m]);
    }
}

/* Blocks [0, n) of a wide panel against 16 packed activation rows (nc of
 * them real), the 16 weight rows of half h: out[c*ldo + 16h + r] (+)= the
 * dot products. A load right behind a tile store waits for it, so the work
 * is skewed over four C tiles: while block b's product runs, block b-1's
 * sums are stored and block b-2's scaled (a standalone loop of these steps
 * on the Xeon VM: 20.6 ns a block and half, against 23.9-27.3 ns with two
 * tiles in turn). */
static void het_amx_half(int64_t n, const uint8_t *xp, const uint8_t *ap, int nc, int h, float *out, size_t ldo,
                         bool accumulate)
{
    int32_t cs[4][HET_AMX_ROWS * 16] __attribute__((aligned(64)));
    __m512 acc[HET_AMX_ROWS];
#pragma GCC unroll 16
    for (int m = 0; m < HET_AMX_ROWS; m++) acc[m] = _mm512_setzero_ps();
    /* block b in tile b % 4; A and B tiles alternate */
    int64_t b = 0;
    for (; b + 4 <= n; b += 4) {
        HET_AMX_DOT(0, 4, 6, b);
        if (b) {
            _tile_stored(3, cs[3], 64);
            het_amx_scale(cs[2], b - 2, xp, ap, h, acc);
        }
        HET_AMX_DOT(1, 5, 7, b + 1);
        _tile_stored(0, cs[0], 64);
        if (b) het_amx_scale(cs[3], b - 1, xp, ap, h, acc);
        HET_AMX_DOT(2, 4, 6, b + 2);
        _tile_stored(1, cs[1], 64);
        het_amx_scale(cs[0], b, xp, ap, h, acc);
        HET_AMX_DOT(3, 5, 7, b + 3);
        _tile_stored(2, cs[2], 64);
        het_amx_scale(cs[1], b + 1, xp, ap, h, acc);
    }
    if (b) { /* blocks b - 2 and b - 1 are still to finish */
        _tile_stored(3, cs[3], 64);
        het_amx_scale(cs[2], b - 2, xp, ap, h, acc);
        het_amx_scale(cs[3], b - 1, xp, ap, h, acc);
    }
    for (; b < n; b++) {
        HET_AMX_DOT(0, 4, 6, b);
        _tile_stored(0, cs[0], 64);
        het_amx_scale(cs[0], b, xp, ap, h, acc);
    }
#pragma GCC unroll 16
    for (int m = 0; m < HET_AMX_ROWS; m++) {
        if (m >= nc) break;
        float *o = out + ldo * (size_t)m + 16 * h;
        _mm512_storeu_ps(o, accumulate ? _mm512_add_ps(acc[m], _mm512_loadu_ps(o)) : acc[m]);
    }
}

/* het_xpanel_fn of q4_0 and q8_0: nc (1..64) packed rows from a[0], groups
 * of 16 one after another. */
static void het_xpanel_amx(int R, int64_t nb, const void *xp, const uint8_t *const *a, int nc, float *out,
                           size_t ldo, bool accumulate)
{
    (void)R;
    _tile_loadconfig(&het_amx_cfg);
    for (int g = 0; g < nc; g += HET_AMX_ROWS) {
        const uint8_t *ap = a[0] + (size_t)(g / HET_AMX_ROWS) * (size_t)nb * HET_XPACK_BLK;
        const int n = nc - g < HET_AMX_ROWS ? nc - g : HET_AMX_ROWS;
        for (int h = 0; h < 2; h++) het_amx_half(nb, xp, ap, n, h, out + ldo * (size_t)g, ldo, accumulate);
    }
    _tile_release();
}

/* het_xpack_fn of q4_0 and q8_0: the rows' quants, d and quant sums, block by block. */
static void het_xpack_amx(const uint8_t *const *a, int nc, int64_t nb, size_t bs, void *dst)
{
    uint8_t *d = dst;
    for (int64_t b = 0; b < nb; b++, d += HET_XPACK_BLK) {
        float *da = (float *)(void *)(d + 512), *sq = (float *)(void *)(d + 576);
        for (int m = 0; m < HET_AMX_ROWS; m++) {
            __m256i q = _mm256_setzero_si256();
            float dm = 0.0f, sm = 0.0f;
            if (m < nc) {
                const uint8_t *blk = a[m] + (size_t)b * bs;
                const struct het_q8r_meta *mt = (const struct het_q8r_meta *)(const void *)(blk + bs - 32);
                q = _mm256_loadu_si256((const __m256i *)(const void *)blk);
                dm = mt->d;
                sm = (float)mt->sum32;
            }
            _mm256_store_si256((__m256i *)(void *)(d + 32 * m), q);
            da[m] = dm;
            sq[m] = sm;
        }
    }
}

/* ---- q4_K, q6_K: a super-block's integer sums on the tiles ------------------------
 *
 * A wide super-block (32 weight rows, HET_AMX_KQ_SB_Q6 or _Q4K bytes): for
 * each 64 k (step s), half h (16 rows) and plane (H, L), one B tile of
 * 16 x 64 bytes at ((s * 2 + h) * 2 + plane) * 1024, the rows' d[32] at
 * 16384, and for q4_K, -dmin * m[8 blocks][32] at 16512. A packed
 * super-block of 16 activation rows (HET_AMX_KQ_XSB bytes, 8 packed blocks'
 * room): per step s, one A tile of 16 rows x 64 bytes at 1024 * s, the rows'
 * d[16] at 4096, their block sums sq[8 blocks][16] at 4160. */
#define HET_AMX_KQ_STEPS 4
#define HET_AMX_KQ_W     16384
#define HET_AMX_KQ_SB_Q6 (HET_AMX_KQ_W + 128)
#define HET_AMX_KQ_SB_Q4K (HET_AMX_KQ_W + 128 + 1024)
#define HET_AMX_KQ_XSB   (HET_Q8R_GROUP_K * HET_XPACK_BLK)
_Static_assert(HET_Q8R_GROUP_K * 32 == HET_AMX_KQ_STEPS * 64, "a super-block is four steps of 64 k");
_Static_assert(4096 + 64 + 512 <= HET_AMX_KQ_XSB, "a packed super-block fits its 8 blocks' room");
_Static_assert(HET_AMX_KQ_SB_Q6 % 64 == 0 && HET_AMX_KQ_SB_Q4K % 64 == 0 && HET_AMX_KQ_SB_Q6 % HET_Q8R_GROUP_K == 0 &&
                   HET_AMX_KQ_SB_Q4K % HET_Q8R_GROUP_K == 0,
               "wide super-blocks of 64-byte lines, with a whole block's share");

/* Every tile 16 rows of 64 bytes: tmm0..3 C (group 0 H, group 0 L, group 1
 * H, group 1 L), tmm4, 5 A (groups 0, 1), tmm6, 7 B (H, L). */
static const struct het_amx_tilecfg het_amx_cfg_kq __attribute__((aligned(64))) = {
    .palette = 1,
    .colsb = {64, 64, 64, 64, 64, 64, 64, 64},
    .rows = {16, 16, 16, 16, 16, 16, 16, 16},
};

/* The 16 x 16 sums of one group's C_H, C_L (cs: 256 + 256 int32) into
 * acc (16 rows of 16 floats): acc[m][r] (+)= da[m] * (d[r] * ((C_H << 8) +
 * C_L) + q4_K's sum over blocks g of mn[g][r] * sq[g][m]). */
static inline __attribute__((always_inline)) void het_amx_kq_acc(const bool Q4K, const int32_t *cs,
                                                                 const uint8_t *w, const uint8_t *x, int h,
                                                                 float *acc, bool add)
{
    const __m512 dw = _mm512_load_ps((const void *)(w + HET_AMX_KQ_W + 64 * h));
    const float *da = (const float *)(const void *)(x + 4096), *sq = (const float *)(const void *)(x + 4160);
    __m512 mn[HET_Q8R_GROUP_K];
    if (Q4K)
#pragma GCC unroll 8
        for (int g = 0; g < HET_Q8R_GROUP_K; g++)
            mn[g] = _mm512_load_ps((const void *)(w + HET_AMX_KQ_W + 128 + 128 * g + 64 * h));
#pragma GCC unroll 4
    for (int m = 0; m < HET_AMX_ROWS; m++) {
        const __m512i ch = _mm512_load_si512((const void *)(cs + 16 * m));
        const __m512i cl = _mm512_load_si512((const void *)(cs + 256 + 16 * m));
        const __m512 v = _mm512_cvtepi32_ps(_mm512_add_epi32(_mm512_slli_epi32(ch, 8), cl));
        __m512 r;
        if (Q4K) {
            __m512 u = _mm512_mul_ps(v, dw);
#pragma GCC unroll 8
            for (int g = 0; g < HET_Q8R_GROUP_K; g++) u = _mm512_fmadd_ps(mn[g], _mm512_set1_ps(sq[16 * g + m]), u);
            r = _mm512_mul_ps(u, _mm512_set1_ps(da[m]));
        } else {
            r = _mm512_mul_ps(v, _mm512_mul_ps(dw, _mm512_set1_ps(da[m])));
        }
        _mm512_store_ps(acc + 16 * m, add ? _mm512_add_ps(r, _mm512_load_ps(acc + 16 * m)) : r);
    }
}

/* out[m*ldo + 16h ..] (+)= acc's row m, m < nc. */
static void het_amx_kq_put(const float *acc, int nc, int h, float *out, size_t ldo, bool accumulate)
{
    for (int m = 0; m < nc; m++) {
        float *o = out + ldo * (size_t)m + 16 * h;
        const __m512 r = _mm512_load_ps(acc + 16 * m);
        _mm512_storeu_ps(o, accumulate ? _mm512_add_ps(r, _mm512_loadu_ps(o)) : r);
    }
}

/* Super-blocks [0, nsb) of a wide K-quant panel, weight half h, against
 * one or TWO groups of 16 packed activation rows (x0, x1; n0 and n1 of
 * them real). Each super-block: zero the C tiles, four steps of A and B
 * loads and products, store, scale into acc; out at the end. */
static inline __attribute__((always_inline)) void het_amx_kq_half(const bool Q4K, const bool TWO, int64_t nsb,
                                                                  const uint8_t *xp, const uint8_t *x0,
                                                                  const uint8_t *x1, int n0, int n1, int h,
                                                                  float *out, size_t ldo, bool accumulate)
{
    const size_t wsb = Q4K ? HET_AMX_KQ_SB_Q4K : HET_AMX_KQ_SB_Q6;
    int32_t cs[2][512] __attribute__((aligned(64)));
    float acc[2][HET_AMX_ROWS * 16] __attribute__((aligned(64)));
    for (int64_t s = 0; s < nsb; s++) {
        const uint8_t *w = xp + (size_t)s * wsb, *a0 = x0 + (size_t)s * HET_AMX_KQ_XSB,
                      *a1 = x1 + (size_t)s * HET_AMX_KQ_XSB;
        _tile_zero(0);
        _tile_zero(1);
        if (TWO) {
            _tile_zero(2);
            _tile_zero(3);
        }
#pragma GCC unroll 4
        for (int k = 0; k < HET_AMX_KQ_STEPS; k++) {
            const uint8_t *b = w + (size_t)((k * 2 + h) * 2) * 1024;
            _tile_loadd(4, a0 + 1024 * k, 64);
            _tile_loadd(6, b, 64);
            _tile_dpbssd(0, 4, 6);
            _tile_loadd(7, b + 1024, 64);
            _tile_dpbssd(1, 4, 7);
            if (TWO) {
                _tile_loadd(5, a1 + 1024 * k, 64);
                _tile_dpbssd(2, 5, 6);
                _tile_dpbssd(3, 5, 7);
            }
        }
        _tile_stored(0, cs[0], 64);
        _tile_stored(1, cs[0] + 256, 64);
        if (TWO) {
            _tile_stored(2, cs[1], 64);
            _tile_stored(3, cs[1] + 256, 64);
        }
        het_amx_kq_acc(Q4K, cs[0], w, a0, h, acc[0], s > 0);
        if (TWO) het_amx_kq_acc(Q4K, cs[1], w, a1, h, acc[1], s > 0);
    }
    /* out once at the end: its rows lie N floats apart, often in one cache set */
    het_amx_kq_put(acc[0], n0, h, out, ldo, accumulate);
    if (TWO) het_amx_kq_put(acc[1], n1, h, out + ldo * HET_AMX_ROWS, ldo, accumulate);
}

/* het_xpanel_fn of q4_K and q6_K (nb a multiple of 8: whole super-blocks):
 * groups of 16 packed rows from a[0], two at a time. */
static inline __attribute__((always_inline)) void het_amx_kq(const bool Q4K, int64_t nb, const void *xp,
                                                             const uint8_t *const *a, int nc, float *out,
                                                             size_t ldo, bool accumulate)
{
    const int64_t nsb = nb / HET_Q8R_GROUP_K;
    const size_t gbytes = (size_t)nb * HET_XPACK_BLK;
    _tile_loadconfig(&het_amx_cfg_kq);
    for (int g = 0; g < nc; g += 2 * HET_AMX_ROWS) {
        const uint8_t *x0 = a[0] + (size_t)(g / HET_AMX_ROWS) * gbytes;
        const int n0 = nc - g < HET_AMX_ROWS ? nc - g : HET_AMX_ROWS, rest = nc - g - n0;
        const int n1 = rest < HET_AMX_ROWS ? rest : HET_AMX_ROWS;
        float *o = out + ldo * (size_t)g;
        for (int h = 0; h < 2; h++) {
            if (n1 > 0) het_amx_kq_half(Q4K, true, nsb, xp, x0, x0 + gbytes, n0, n1, h, o, ldo, accumulate);
            else het_amx_kq_half(Q4K, false, nsb, xp, x0, x0, n0, 0, h, o, ldo, accumulate);
        }
    }
    _tile_release();
}

static void het_xpanel_q4kc_amx(int R, int64_t nb, const void *xp, const uint8_t *const *a, int nc, float *out,
                                size_t ldo, bool accumulate)
{
    (void)R;
    het_amx_kq(true, nb, xp, a, nc, out, ldo, accumulate);
}

static void het_xpanel_q6c_amx(int R, int64_t nb, const void *xp, const uint8_t *const *a, int nc, float *out,
                               size_t ldo, bool accumulate)
{
    (void)R;
    het_amx_kq(false, nb, xp, a, nc, out, ldo, accumulate);
}

/* het_xpack_fn of q4_K and q6_K: per super-block, the rows' quants as four
 * A tiles of 64 k, their d (one per super-block) and block sums; rows past
 * nc are zeros. */
static void het_xpack_kq(const uint8_t *const *a, int nc, int64_t nb, size_t bs, void *dst)
{
    for (int64_t s = 0; s < nb / HET_Q8R_GROUP_K; s++) {
        uint8_t *d = (uint8_t *)dst + (size_t)s * HET_AMX_KQ_XSB;
        float *da = (float *)(void *)(d + 4096), *sq = (float *)(void *)(d + 4160);
        for (int m = 0; m < HET_AMX_ROWS; m++) {
            const uint8_t *row = m < nc ? a[m] + (size_t)s * HET_Q8R_GROUP_K * bs : NULL;
            for (int b = 0; b < HET_Q8R_GROUP_K; b++) {
                __m256i q = _mm256_setzero_si256();
                float sm = 0.0f;
                if (row) {
                    const uint8_t *blk = row + (size_t)b * bs;
                    q = _mm256_loadu_si256((const __m256i *)(const void *)blk);
                    sm = (float)((const struct het_q8r_meta *)(const void *)(blk + bs - 32))->sum32;
                }
                _mm256_store_si256((__m256i *)(void *)(d + 1024 * (b / 2) + 64 * m + 32 * (b % 2)), q);
                sq[16 * b + m] = sm;
            }
            da[m] = row ? ((const struct het_q8r_meta *)(const void *)(row + bs - 32))->d : 0.0f;
        }
    }
}

/* One super-block of the AVX-512 expansion (t: HET_X_KQ_SB bytes; q4_K
 * quants 0..15 with int32 sc[32] and float -dmin*m[32] a block, q6_K 0..63
 * with int32 sc_half[2][32]) as the wide super-block above. */
static void het_amx_kq_planes(const bool Q4K, const uint8_t *t, uint8_t *dst)
{
    /* 32 int16 lanes are 8 columns of 4 k: lane i takes column i / 4 */
    const __m512i lo8 = _mm512_set_epi16(7, 7, 7, 7, 6, 6, 6, 6, 5, 5, 5, 5, 4, 4, 4, 4, 3, 3, 3, 3, 2, 2, 2, 2, 1,
                                          1, 1, 1, 0, 0, 0, 0);
    const __m512i hi8 = _mm512_add_epi16(lo8, _mm512_set1_epi16(8));
    const __m512i off = _mm512_set1_epi16(Q4K ? 0 : 32), r128 = _mm512_set1_epi16(128);
    for (int s = 0; s < HET_AMX_KQ_STEPS; s++)
        for (int h = 0; h < 2; h++) {
            uint8_t *ph = dst + (size_t)((s * 2 + h) * 2) * 1024, *pl = ph + 1024;
            for (int kk = 0; kk < 16; kk++) {
                const uint8_t *blk = t + (size_t)(2 * s + kk / 8) * HET_X_KQ_BLK;
                const int g = kk % 8;
                /* the 16 rows' int32 scales of this group's (half) block, as int16 */
                const int32_t *sc = (const int32_t *)(const void *)(blk + 1024 + (Q4K ? 0 : 128 * (g / 4))) + 16 * h;
                const __m512i s16 = _mm512_castsi256_si512(_mm512_cvtepi32_epi16(_mm512_loadu_si512((const void *)sc)));
                const __m512i q = _mm512_loadu_si512((const void *)(blk + 128 * g + 64 * h));
                __m256i hl[2], hh[2];
                for (int c = 0; c < 2; c++) {
                    const __m512i qw = _mm512_sub_epi16(
                        _mm512_cvtepu8_epi16(c ? _mm512_extracti64x4_epi64(q, 1) : _mm512_castsi512_si256(q)), off);
                    const __m512i w = _mm512_mullo_epi16(qw, _mm512_permutexvar_epi16(c ? hi8 : lo8, s16));
                    hl[c] = _mm512_cvtepi16_epi8(w);
                    hh[c] = _mm512_cvtepi16_epi8(_mm512_srai_epi16(_mm512_add_epi16(w, r128), 8));
                }
                _mm512_store_si512((void *)(ph + 64 * kk), _mm512_inserti64x4(_mm512_castsi256_si512(hh[0]), hh[1], 1));
                _mm512_store_si512((void *)(pl + 64 * kk), _mm512_inserti64x4(_mm512_castsi256_si512(hl[0]), hl[1], 1));
            }
        }
    memcpy(dst + HET_AMX_KQ_W, t + HET_Q8R_GROUP_K * HET_X_KQ_BLK, 128); /* the rows' d */
    if (Q4K)
        for (int b = 0; b < HET_Q8R_GROUP_K; b++)
            memcpy(dst + HET_AMX_KQ_W + 128 + 128 * b, t + (size_t)b * HET_X_KQ_BLK + 1152, 128);
}

/* Blocks [b0, b1) (whole super-blocks) expanded by the AVX-512 walker
 * (expand), a super-block at a time, then made the wide super-blocks above. */
static inline __attribute__((always_inline)) void het_amx_kq_expand(const bool Q4K, het_xexpand_fn expand,
                                                                    const struct het_panel_layout *l,
                                                                    const void *p0, const void *p1, int64_t b0,
                                                                    int64_t b1, void *dst)
{
    const size_t wsb = Q4K ? HET_AMX_KQ_SB_Q4K : HET_AMX_KQ_SB_Q6;
    uint8_t t[HET_X_KQ_SB] __attribute__((aligned(64)));
    for (int64_t b = b0; b < b1; b += HET_Q8R_GROUP_K) {
        expand(l, p0, p1, b, b + HET_Q8R_GROUP_K, t);
        het_amx_kq_planes(Q4K, t, (uint8_t *)dst + (size_t)((b - b0) / HET_Q8R_GROUP_K) * wsb);
    }
}

static void het_xexpand_q4kc_amx(const struct het_panel_layout *l, const void *p0, const void *p1, int64_t b0,
                                 int64_t b1, void *dst)
{
    het_amx_kq_expand(true, het_xexpand_q4kc_avx512vnni, l, p0, p1, b0, b1, dst);
}

static void het_xexpand_q6c_amx(const struct het_panel_layout *l, const void *p0, const void *p1, int64_t b0,
                                int64_t b1, void *dst)
{
    het_amx_kq_expand(false, het_xexpand_q6c_avx512vnni, l, p0, p1, b0, b1, dst);
}

const struct het_mm_kernels het_mm_kernels_amx = {
    /* quantize, gemv, fdot, dequant: the levels below */
    .panel = {
        [HET_PANEL_Q40] = het_panel_q40_avx512vnni, [HET_PANEL_Q80] = het_panel_q80_avx512vnni,
        [HET_PANEL_Q6C] = het_panel_q6c_avx512vnni, [HET_PANEL_Q4KC] = het_panel_q4kc_avx512vnni,
    },
    .panels = {
        [HET_PANEL_Q40] = het_panels_q40_avx512vnni, [HET_PANEL_Q80] = het_panels_q80_avx512vnni,
        [HET_PANEL_Q6C] = het_panels_q6c_avx512vnni, [HET_PANEL_Q4KC] = het_panels_q4kc_avx512vnni,
    },
    .panel_rows = 16,
    .xexpand = {
        /* q8_0 quants kept signed: the walker's instance without VNNI's +128 */
        [HET_PANEL_Q40] = het_xexpand_q40s_avx512, [HET_PANEL_Q80] = het_xexpand_q80_avx512,
        [HET_PANEL_Q6C] = het_xexpand_q6c_amx, [HET_PANEL_Q4KC] = het_xexpand_q4kc_amx,
    },
    .xpanel = {
        [HET_PANEL_Q40] = het_xpanel_amx, [HET_PANEL_Q80] = het_xpanel_amx,
        [HET_PANEL_Q6C] = het_xpanel_q6c_amx, [HET_PANEL_Q4KC] = het_xpanel_q4kc_amx,
    },
    .xpack = {
        [HET_PANEL_Q40] = het_xpack_amx, [HET_PANEL_Q80] = het_xpack_amx,
        [HET_PANEL_Q6C] = het_xpack_kq, [HET_PANEL_Q4KC] = het_xpack_kq,
    },
    /* the K-quants' wide super-blocks, a block's share */
    .xblk_bytes = {
        [HET_PANEL_Q6C] = HET_AMX_KQ_SB_Q6 / HET_Q8R_GROUP_K, [HET_PANEL_Q4KC] = HET_AMX_KQ_SB_Q4K / HET_Q8R_GROUP_K,
    },
    .xcols = HET_AMX_XCOLS,
};
