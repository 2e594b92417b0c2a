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
 * 16 rows is converted, scaled and added up. With the tile unit busy the
 * vector instructions run slower, and they, not the products, set the pace:
 *  - q4_0 and q8_0: acc[m] += cvt(C[m]) * (dw * da[m]) a block, three
 *    instructions per 16 sums, the avx512vnni kernel's own operations in its
 *    order (so both give the same bits). Q4_0's nibbles are expanded as
 *    q - 8 (signed: no activation-sum offset) and q8_0's keep their sign.
 *  - q4_K: the activations share d per super-block of 8 blocks, and the
 *    expansion turns the rows' integer block scales into floats times the
 *    rows' d, so a super-block's sums in units of the activation's d are
 *    u[m] = sum of cvt(C[m]) * scd + (-dmin*mins) * sum32[m], two
 *    instructions per 16 sums a block, and out[m] += u[m] * da[m] once per
 *    super-block.
 *  - q6_K: its half blocks of 16 k have scales of their own, so the walker's
 *    step is a half block (a product of K = 16, tiles configured for it),
 *    with q - 32 quants and the half blocks' scales as floats times the
 *    rows' d; one instruction pair per 16 sums a step, out once per
 *    super-block. Done a block at a time (both halves' products, then both
 *    scalings) it ran no faster than avx512vnni's kernel (bench_matmul -t 1
 *    -T q6_K -M 512 -p 1: 406-424 tok/s matmul-only against 408-428); as
 *    steps of the four-tile walker 451-462 against 390-394.
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
/* q6_K's half blocks: A 16 rows x 16 int8, B 4 groups of 4 k */
static const struct het_amx_tilecfg het_amx_cfg_half __attribute__((aligned(64))) = {
    .palette = 1,
    .colsb = {64, 64, 64, 64, 16, 16, 64, 64},
    .rows = {16, 16, 16, 16, 16, 16, 4, 4},
};

/* What a walker step is: a block of q4_0 / q8_0 (its own d), of q4_K (a
 * super-block's d), or half a block of q6_K (a super-block's d). */
enum het_amx_kind { HET_AMX_Q8, HET_AMX_Q4K, HET_AMX_Q6K };

/* Wide block i of a chunk (het_x_block: q4_K's and q6_K's super-blocks end with the rows' d). */
static inline const uint8_t *het_amx_block(const void *xp, int64_t i, const enum het_amx_kind kind)
{
    return het_x_block((void *)(uintptr_t)xp, i, kind == HET_AMX_Q8 ? HET_PANEL_Q40 : HET_PANEL_Q4KC);
}

/* Subtract k from the quants (the first 1024 bytes) of wide blocks [0, nblk). */
static void het_amx_quants_less(void *dst, int64_t nblk, enum het_panel_kind kind, char k)
{
    const __m512i kv = _mm512_set1_epi8(k);
    for (int64_t i = 0; i < nblk; i++) {
        uint8_t *x = het_x_block(dst, i, kind);
        for (int j = 0; j < 1024; j += 64)
            _mm512_store_si512((void *)(x + j), _mm512_sub_epi8(_mm512_load_si512((const void *)(x + j)), kv));
    }
}

/* Tile C = step j's sums: packed activations (A) times half h of the wide
 * block (B); q6_K's step j is half block j % 2 of block j / 2. */
#define HET_AMX_DOT(C, TA, TB, j)                                                                            \
    do {                                                                                                     \
        const int64_t b_ = kind == HET_AMX_Q6K ? (j) / 2 : (j);                                              \
        const size_t s_ = kind == HET_AMX_Q6K ? (size_t)((j) & 1) : 0;                                      \
        _tile_loadd(TA, ap + (size_t)b_ * HET_XPACK_BLK + 16 * s_, 32);                                     \
        _tile_loadd(TB, het_amx_block(xp, b_, kind) + 512 * s_ + 64 * h, 128);                              \
        _tile_zero(C);                                                                                       \
        _tile_dpbssd(C, TA, TB);                                                                             \
    } while (0)

/* Step j's sums, stored from their tile into cs earlier, into acc (q4_0,
 * q8_0) or u (q4_K, q6_K; at a super-block's last step u goes out). */
#define HET_AMX_SCALE(cs, j) het_amx_scale(kind, cs, j, n, xp, ap, h, acc, u, nc, out, ldo, accumulate)

static inline __attribute__((always_inline)) void het_amx_scale(const enum het_amx_kind kind, const int32_t *cs,
                                                                int64_t j, int64_t n, const uint8_t *xp,
                                                                const uint8_t *ap, int h, __m512 *acc, __m512 *u,
                                                                int nc, float *out, size_t ldo, bool accumulate)
{
    const int64_t b = kind == HET_AMX_Q6K ? j / 2 : j;
    const uint8_t *x = het_amx_block(xp, b, kind) + 64 * h;
    const uint8_t *pa = ap + (size_t)b * HET_XPACK_BLK;
    const float *da = (const float *)(const void *)(pa + 512), *sq = (const float *)(const void *)(pa + 576);
    if (kind == HET_AMX_Q8) {
        const __m512 dw = _mm512_load_ps((const void *)(x + 1024));
#pragma GCC unroll 16
        for (int m = 0; m < HET_AMX_ROWS; m++) {
            const __m512i t = _mm512_load_si512((const void *)(cs + 16 * m));
            acc[m] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(t), _mm512_mul_ps(dw, _mm512_set1_ps(da[m])), acc[m]);
        }
        return;
    }
    if (kind == HET_AMX_Q4K) {
        const __m512 scd = _mm512_load_ps((const void *)(x + 1024)), mn = _mm512_load_ps((const void *)(x + 1152));
#pragma GCC unroll 16
        for (int m = 0; m < HET_AMX_ROWS; m++) {
            u[m] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_load_si512((const void *)(cs + 16 * m))), scd, u[m]);
            u[m] = _mm512_fmadd_ps(mn, _mm512_set1_ps(sq[m]), u[m]);
        }
    } else { /* q6_K: half block j % 2's scales times the rows' d */
        const __m512 scd = _mm512_load_ps((const void *)(x + 1024 + 128 * (j & 1)));
#pragma GCC unroll 16
        for (int m = 0; m < HET_AMX_ROWS; m++)
            u[m] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_load_si512((const void *)(cs + 16 * m))), scd, u[m]);
    }
    /* out at a super-block's last step */
    if (j != n - 1 && (b % HET_Q8R_GROUP_K != HET_Q8R_GROUP_K - 1 || (kind == HET_AMX_Q6K && !(j & 1)))) return;
    const bool add = accumulate || b >= HET_Q8R_GROUP_K; /* the chunk's first super-block writes */
#pragma GCC unroll 16
    for (int m = 0; m < HET_AMX_ROWS; m++) {
        if (m < nc) { /* da is the super-block's, the same in each of its blocks */
            float *o = out + ldo * (size_t)m + 16 * h;
            const __m512 v = _mm512_mul_ps(u[m], _mm512_set1_ps(da[m]));
            _mm512_storeu_ps(o, add ? _mm512_add_ps(v, _mm512_loadu_ps(o)) : v);
        }
        u[m] = _mm512_setzero_ps();
    }
}

/* Blocks [0, n) of a wide panel against 16 packed activation rows (nc of
 * them real), the 16 weight rows of half h: out[c*ldo + 16h + r] (+)= the
 * dot products, over n steps (blocks; q6_K: half blocks). A load right
 * behind a tile store waits for it, so the work is skewed over four C
 * tiles: while step b's product runs, step b-1's sums are stored and step
 * b-2's scaled (a standalone loop of these steps
 * on the Xeon VM: 20.6 ns a block and half, against 23.9-27.3 ns with two
 * tiles in turn). */
static inline __attribute__((always_inline)) void het_amx_half(const enum het_amx_kind kind, int64_t n, const uint8_t *xp,
                                                               const uint8_t *ap, int nc, int h, float *out,
                                                               size_t ldo, bool accumulate)
{
    int32_t cs[4][HET_AMX_ROWS * 16] __attribute__((aligned(64)));
    __m512 acc[HET_AMX_ROWS], u[HET_AMX_ROWS];
#pragma GCC unroll 16
    for (int m = 0; m < HET_AMX_ROWS; m++) acc[m] = u[m] = _mm512_setzero_ps();
    /* step b in tile b % 4; A and B tiles alternate */
    int64_t b = 0;
    for (; b + 4 <= n; b += 4) {
        HET_AMX_DOT(0, 4, 6, b);
        if (b) {
            _tile_stored(3, cs[3], 64);
            HET_AMX_SCALE(cs[2], b - 2);
        }
        HET_AMX_DOT(1, 5, 7, b + 1);
        _tile_stored(0, cs[0], 64);
        if (b) HET_AMX_SCALE(cs[3], b - 1);
        HET_AMX_DOT(2, 4, 6, b + 2);
        _tile_stored(1, cs[1], 64);
        HET_AMX_SCALE(cs[0], b);
        HET_AMX_DOT(3, 5, 7, b + 3);
        _tile_stored(2, cs[2], 64);
        HET_AMX_SCALE(cs[1], b + 1);
    }
    if (b) { /* blocks b - 2 and b - 1 are still to finish */
        _tile_stored(3, cs[3], 64);
        HET_AMX_SCALE(cs[2], b - 2);
        HET_AMX_SCALE(cs[3], b - 1);
    }
    for (; b < n; b++) {
        HET_AMX_DOT(0, 4, 6, b);
        _tile_stored(0, cs[0], 64);
        HET_AMX_SCALE(cs[0], b);
    }
    if (kind != HET_AMX_Q8) return; /* u went out super-block by super-block */
#pragma GCC unroll 16
    for (int m = 0; m < HET_AMX_ROWS; m++) {
        if (m >= nc) break;
        float *o = out + ldo * (size_t)m + 16 * h;
        _mm512_storeu_ps(o, accumulate ? _mm512_add_ps(acc[m], _mm512_loadu_ps(o)) : acc[m]);
    }
}

/* nc (1..64) packed rows from a[0], groups of 16 one after another. */
static inline __attribute__((always_inline)) void het_amx_wide(const enum het_amx_kind kind, int64_t nb,
                                                               const void *xp, const uint8_t *const *a, int nc,
                                                               float *out, size_t ldo, bool accumulate)
{
    _tile_loadconfig(kind == HET_AMX_Q6K ? &het_amx_cfg_half : &het_amx_cfg);
    const int64_t steps = kind == HET_AMX_Q6K ? 2 * nb : nb;
    for (int g = 0; g < nc; g += HET_AMX_ROWS) {
        const uint8_t *ap = a[0] + (size_t)(g / HET_AMX_ROWS) * (size_t)nb * HET_XPACK_BLK;
        const int n = nc - g < HET_AMX_ROWS ? nc - g : HET_AMX_ROWS;
        for (int h = 0; h < 2; h++) het_amx_half(kind, steps, xp, ap, n, h, out + ldo * (size_t)g, ldo, accumulate);
    }
    _tile_release();
}

static void het_xpanel_amx(int R, int64_t nb, const void *xp, const uint8_t *const *a, int nc, float *out,
                           size_t ldo, bool accumulate)
{
    (void)R;
    het_amx_wide(HET_AMX_Q8, nb, xp, a, nc, out, ldo, accumulate);
}

static void het_xpanel_q4kc_amx(int R, int64_t nb, const void *xp, const uint8_t *const *a, int nc, float *out,
                                size_t ldo, bool accumulate)
{
    (void)R;
    het_amx_wide(HET_AMX_Q4K, nb, xp, a, nc, out, ldo, accumulate);
}

static void het_xpanel_q6c_amx(int R, int64_t nb, const void *xp, const uint8_t *const *a, int nc, float *out,
                               size_t ldo, bool accumulate)
{
    (void)R;
    het_amx_wide(HET_AMX_Q6K, nb, xp, a, nc, out, ldo, accumulate);
}

/* het_xpack_fn: the rows' quants, d and quant sums, block by block. */
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

/* Q40 expanded by the AVX-512 walker (nibbles 0..15), then made q - 8. */
static void het_xexpand_q40_amx(const struct het_panel_layout *l, const void *p0, const void *p1, int64_t b0,
                                int64_t b1, void *dst)
{
    het_xexpand_q40_avx512(l, p0, p1, b0, b1, dst);
    het_amx_quants_less(dst, b1 - b0, HET_PANEL_Q40, 8);
}

/* The first nv int32 scale vectors of each K-quant wide block (+1024 +
 * 128 v, two halves of 16 rows) made floats times the rows' d. */
static void het_amx_kq_scales(void *dst, int64_t nblk, int nv)
{
    for (int64_t i = 0; i < nblk; i++) {
        float *f = (float *)(void *)(het_x_block(dst, i, HET_PANEL_Q4KC) + 1024);
        const float *d = (const float *)(const void *)het_x_sb_d(dst, i);
        for (int v = 0; v < nv; v++)
            for (int hh = 0; hh < 2; hh++) {
                float *fv = f + 32 * v + 16 * hh;
                _mm512_store_ps(fv, _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_load_si512((const void *)fv)),
                                                  _mm512_load_ps(d + 16 * hh)));
            }
    }
}

/* Q4KC expanded by the AVX-512 walker, its row scales then made floats times the rows' d. */
static void het_xexpand_q4kc_amx(const struct het_panel_layout *l, const void *p0, const void *p1, int64_t b0,
                                 int64_t b1, void *dst)
{
    het_xexpand_q4kc_avx512vnni(l, p0, p1, b0, b1, dst);
    het_amx_kq_scales(dst, b1 - b0, 1);
}

/* Q6C expanded by the AVX-512 walker (0..63), made q - 32, its half-block
 * row scales made floats times the rows' d. */
static void het_xexpand_q6c_amx(const struct het_panel_layout *l, const void *p0, const void *p1, int64_t b0,
                                int64_t b1, void *dst)
{
    het_xexpand_q6c_avx512vnni(l, p0, p1, b0, b1, dst);
    het_amx_kq_scales(dst, b1 - b0, 2);
    het_amx_quants_less(dst, b1 - b0, HET_PANEL_Q6C, 32);
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
        [HET_PANEL_Q40] = het_xexpand_q40_amx, [HET_PANEL_Q80] = het_xexpand_q80_avx512,
        [HET_PANEL_Q6C] = het_xexpand_q6c_amx, [HET_PANEL_Q4KC] = het_xexpand_q4kc_amx,
    },
    .xpanel = {
        [HET_PANEL_Q40] = het_xpanel_amx, [HET_PANEL_Q80] = het_xpanel_amx,
        [HET_PANEL_Q6C] = het_xpanel_q6c_amx, [HET_PANEL_Q4KC] = het_xpanel_q4kc_amx,
    },
    .xpack = {
        [HET_PANEL_Q40] = het_xpack_amx, [HET_PANEL_Q80] = het_xpack_amx,
        [HET_PANEL_Q6C] = het_xpack_amx, [HET_PANEL_Q4KC] = het_xpack_amx,
    },
    .xcols = HET_AMX_XCOLS,
};
