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
                                                                 int nc, float *acc, bool add)
{
    const __m512 dw = _mm512_load_ps((const void *)(w + HET_AMX_KQ_W + 64 * h));
    const float *da = (const float *)(const void *)(x + 4096), *sq = (const float *)(const void *)(x + 4160);
    __m512 mn[HET_Q8R_GROUP_K];
    if (Q4K)
#pragma GCC unroll 8
        for (int g = 0; g < HET_Q8R_GROUP_K; g++)
            mn[g] = _mm512_load_ps((const void *)(w + HET_AMX_KQ_W + 128 + 128 * g + 64 * h));
#pragma GCC unroll 4
    for (int m = 0; m < nc; m++) {
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
        het_amx_kq_acc(Q4K, cs[0], w, a0, h, n0, acc[0], s > 0);
        if (TWO) het_amx_kq_acc(Q4K, cs[1], w, a1, h, n1, acc[1], s > 0);
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

/* ---- the expansion: compact panels -> wide super-blocks, one pass -------------------
 *
 * The planes come straight from the compact panels (the file's nibbles, q6_K's
 * top bits, the rows' scale bytes). A first version went through the AVX-512
 * level's expansion (32-bit scales, a block of 1280 bytes) and widened every
 * quant to 16 bits to multiply it: at the 32 columns an expert of a 128-expert
 * MoE gets in a 512-token prefill, that cost more than the tile products
 * (perf, one thread: 39% of the samples against 29%). Here each byte's product
 * comes from vpmaddubsw with the rows' scales at every other byte, and the two
 * planes are blends of the even and odd products: about 10 instructions per 64
 * quants instead of about 30. Same bytes out (hetrun logits over 301 positions
 * cmp-equal for Q4_K_M, Q6_K and a Q4_K MoE file); bench_matmul -t 2 -p 1 -S
 * 2048,768, three rounds in turn: M = 32 q4_K 631-667 -> 866-875 GOP/s, q6_K
 * 635-671 -> 890-894; M = 512 unchanged (q4_K 1094-1157 / 1127-1155). */

/* B rows kk of the H and L planes from 64 quants q (16 rows x 4 k, bytes
 * 0..63) and their rows' scales at the even and odd bytes (se, so: the
 * other bytes 0) less m32 (q6_K: 32 * sc per 16-bit lane, else 0):
 * w = q * sc - m32 per byte, H = (w + 128) >> 8, L = w's low byte.
 * vpmaddubsw makes each byte's product a 16-bit lane of its own (its pair's
 * other product is 0; |q * sc| <= 63 * 128), so nothing is widened. */
static inline __attribute__((always_inline)) void het_amx_kq_row(__m512i q, __m512i se, __m512i so, __m512i m32,
                                                                  uint8_t *ph, uint8_t *pl)
{
    const __mmask64 odd = 0xaaaaaaaaaaaaaaaaull;
    const __m512i r128 = _mm512_set1_epi16(128);
    const __m512i we = _mm512_sub_epi16(_mm512_maddubs_epi16(q, se), m32);
    const __m512i wo = _mm512_sub_epi16(_mm512_maddubs_epi16(q, so), m32);
    const __m512i l = _mm512_mask_blend_epi8(odd, we, _mm512_slli_epi16(wo, 8));
    const __m512i h = _mm512_mask_blend_epi8(odd, _mm512_srli_epi16(_mm512_add_epi16(we, r128), 8),
                                             _mm512_add_epi16(wo, r128));
    _mm512_store_si512((void *)ph, h);
    _mm512_store_si512((void *)pl, l);
}

/* Blocks [b0, b1) (whole super-blocks) of the compact panels p0, p1 (p1 may
 * be NULL: zeros) as the wide super-blocks above. */
static inline __attribute__((always_inline)) void het_amx_kq_expand(const bool Q4K, const struct het_panel_layout *l,
                                                                    const void *p0, const void *p1, int64_t b0,
                                                                    int64_t b1, void *dst)
{
    const size_t wsb = Q4K ? HET_AMX_KQ_SB_Q4K : HET_AMX_KQ_SB_Q6, blk = Q4K ? 256 : 384; /* a block's quants */
    const __mmask64 even = 0x5555555555555555ull, odd = ~even;
    /* byte p of a 16 rows x 4 k vector is row p / 4: in its 128-bit lane L,
     * row 4L + (p % 16) / 4 (q4_K: of 16 scale bytes in every lane), or the
     * lo (hi) scale of that row at 2 * ((p % 16) / 4) (+1) in the lane's own
     * 8 pair bytes (q6_K) */
    const __m512i idx4 = _mm512_set_epi8(15, 15, 15, 15, 14, 14, 14, 14, 13, 13, 13, 13, 12, 12, 12, 12,
                                         11, 11, 11, 11, 10, 10, 10, 10, 9, 9, 9, 9, 8, 8, 8, 8,
                                         7, 7, 7, 7, 6, 6, 6, 6, 5, 5, 5, 5, 4, 4, 4, 4,
                                         3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0);
    const __m512i idx6 = _mm512_set_epi8(6, 6, 6, 6, 4, 4, 4, 4, 2, 2, 2, 2, 0, 0, 0, 0,
                                         6, 6, 6, 6, 4, 4, 4, 4, 2, 2, 2, 2, 0, 0, 0, 0,
                                         6, 6, 6, 6, 4, 4, 4, 4, 2, 2, 2, 2, 0, 0, 0, 0,
                                         6, 6, 6, 6, 4, 4, 4, 4, 2, 2, 2, 2, 0, 0, 0, 0);
    const __m512i lanes6 = _mm512_set_epi64(3, 3, 2, 2, 1, 1, 0, 0);
    const __m512i m4 = _mm512_set1_epi8(15), c32 = _mm512_maskz_set1_epi8(even, 32);
    const uint8_t *src[2] = {p0, p1};
    for (int64_t b = b0; b < b1; b += HET_Q8R_GROUP_K) {
        uint8_t *w = (uint8_t *)dst + (size_t)((b - b0) / HET_Q8R_GROUP_K) * wsb;
        for (int h = 0; h < 2; h++) {
            for (int j8 = 0; j8 < HET_Q8R_GROUP_K; j8++) {
                const int64_t bb = b + j8, gi = bb / l->grp, j = bb % l->grp, len = het_cpanel_len(l, gi);
                const uint8_t *grp = src[h] ? het_cpanel_grp(l, src[h], gi) : NULL;
                const uint8_t *pb = grp ? grp + blk * (size_t)j : NULL;
                /* the compact panels come from memory once per matmul: ask ahead */
                if (pb) het_pf(pb, (int)(blk / 64), HET_PF_AHEAD, false, false);
                /* the rows' scales at the even and odd bytes (lo and hi halves for q6_K) */
                __m512i se[2], so[2], m32[2];
                float *fw = (float *)(void *)(w + HET_AMX_KQ_W);
                __m512 d = _mm512_setzero_ps(); /* the rows' d, stored once a super-block */
                if (Q4K) {
                    __m512 mn = _mm512_setzero_ps();
                    __m512i sc = _mm512_setzero_si512();
                    if (grp) {
                        const uint8_t *scm = grp + het_cpanel_sc_off(l, len) + 32 * j, *pd = grp + het_cpanel_d_off(l, len);
                        sc = _mm512_shuffle_epi8(_mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)scm)), idx4);
                        mn = _mm512_sub_ps(_mm512_setzero_ps(),
                                           _mm512_mul_ps(_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(pd + 32))),
                                                         _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(
                                                             _mm_loadu_si128((const __m128i *)(scm + 16))))));
                        d = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)pd));
                    }
                    se[0] = se[1] = _mm512_maskz_mov_epi8(even, sc);
                    so[0] = so[1] = _mm512_maskz_mov_epi8(odd, sc);
                    m32[0] = m32[1] = _mm512_setzero_si512();
                    _mm512_store_ps(fw + 32 + 32 * j8 + 16 * h, mn);
                } else {
                    __m512i sp = _mm512_setzero_si512();
                    if (grp) {
                        sp = _mm512_permutexvar_epi64(lanes6, _mm512_castsi256_si512(_mm256_loadu_si256(
                                                                  (const __m256i *)(grp + het_cpanel_sc_off(l, len) + 32 * j))));
                        d = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(grp + het_cpanel_d_off(l, len) + 32 * (j / 8))));
                    }
                    for (int x = 0; x < 2; x++) { /* x: the lo (k 0..15) and hi (k 16..31) half scales */
                        const __m512i sc = _mm512_shuffle_epi8(sp, _mm512_add_epi8(idx6, _mm512_set1_epi8((char)x)));
                        se[x] = _mm512_maskz_mov_epi8(even, sc);
                        so[x] = _mm512_maskz_mov_epi8(odd, sc);
                        m32[x] = _mm512_maddubs_epi16(c32, se[x]);
                    }
                }
                if (j8 == 0) _mm512_store_ps(fw + 16 * h, d);
                /* B rows kk of step j8 / 2: groups 0..7 of the block at kk = 8 * (j8 % 2) + g */
                uint8_t *ph = w + (size_t)(((j8 / 2) * 2 + h) * 2) * 1024 + 64 * 8 * (j8 % 2), *pl = ph + 1024;
                __m512i qh[2] = {_mm512_setzero_si512(), _mm512_setzero_si512()};
                if (pb && !Q4K) {
                    qh[0] = _mm512_load_si512((const void *)(pb + 256));
                    qh[1] = _mm512_load_si512((const void *)(pb + 320));
                }
#pragma GCC unroll 4
                for (int g = 0; g < 4; g++) {
                    const __m512i v = pb ? _mm512_load_si512((const void *)(pb + 64 * g)) : _mm512_setzero_si512();
                    __m512i lo = _mm512_and_si512(v, m4), hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
                    if (!Q4K) {
                        lo = _mm512_or_si512(lo, het_q6_hi(qh[0], g));
                        hi = _mm512_or_si512(hi, het_q6_hi(qh[1], g));
                    }
                    het_amx_kq_row(lo, se[0], so[0], m32[0], ph + 64 * g, pl + 64 * g);
                    het_amx_kq_row(hi, se[1], so[1], m32[1], ph + 64 * (g + 4), pl + 64 * (g + 4));
                }
            }
        }
    }
}

static void het_xexpand_q4kc_amx(const struct het_panel_layout *l, const void *p0, const void *p1, int64_t b0,
                                 int64_t b1, void *dst)
{
    het_amx_kq_expand(true, l, p0, p1, b0, b1, dst);
}

static void het_xexpand_q6c_amx(const struct het_panel_layout *l, const void *p0, const void *p1, int64_t b0,
                                int64_t b1, void *dst)
{
    het_amx_kq_expand(false, l, p0, p1, b0, b1, dst);
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
