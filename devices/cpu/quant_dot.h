/*
 * quant_dot.h — formats and kernel interface of the CPU matrix multiplication
 * (internal to devices/cpu/).
 *
 * Quantised weights are multiplied against activations that matmul.c first
 * quantises to int8 with one float scale per 32 elements ("q8r" rows). Each
 * q8r row also carries per-block sums so that weights stored with an offset
 * (q4_0's -8, q4_1's min, the K-quants' mins) fold into one term per block.
 *
 * Three kernel shapes exist:
 *   - GEMV: one weight row, read straight from the tensor, against 1..4
 *     activation rows (weights not repacked; memory bound).
 *   - panel GEMM: R weight rows repacked ("packed panel", R = 8 for AVX2, 16
 *     for AVX-512) so that one vector holds 4 consecutive k of R rows; a
 *     broadcast of 4 activation bytes then multiplies all R rows at once and
 *     each vector lane accumulates one row. With load-time panels this is
 *     also decode's kernel; the compact kinds keep the file's byte count.
 *   - wide panel GEMM: two compact panels expanded to bytes at run time, 2R
 *     rows x 3 activation rows per call (prefill; compute bound).
 * Every kernel exists as a scalar reference here (quant_dot.c) and as SIMD
 * versions in arch/<isa>/, reached through struct het_mm_kernels.
 */
#ifndef HET_CPU_QUANT_DOT_H
#define HET_CPU_QUANT_DOT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "devices/cpu/cpu_ops.h"
#include "het/type.h"

#define HET_Q8R_BLOCK 32

/* ---- activation rows (q8r) ------------------------------------------------
 * One row of K elements (K a multiple of 32) is nb = K/32 blocks of bs bytes,
 * every field at a constant offset from the block start (one pointer per row
 * is all a kernel needs):
 *   +0        int8  qs[32]     round(x / d), |q| <= 127
 *   +32       uint8 ua[32]     |qs|, only in the 96-byte form (q8_0 weights)
 *   +bs-32    struct het_q8r_meta: d (amax/127), s = d*sum(qs), sum32 =
 *             sum(qs), x32[2] = -32 * the sum of each 16-element half
 *             (q6_K's offset as the i32 a kernel starts a half's sums
 *             from: one broadcast load), and the
 *             offsets the AVX2 kernels start their s16 pair sums from:
 *             with P[h][p] = sum of qs[j] over half h and pair slot p =
 *             (j/2)%2 (the s16 lane vpmaddubsw puts element j in),
 *             off8[p] = -8*(P[0][p] + P[1][p]) (q4_0's -8) and
 *             off32[h][p] = -32*P[h][p] (q6_K's -32, per half block)
 * The metadata fills its 32 bytes. bs is 64, or 96 with ua.
 * group > 1 (8: a K-quant's 256-element super-block) makes every run of
 * `group` blocks share one d, the amax of all their elements / 127, so that
 * a kernel may sum a super-block's scaled block sums before it applies d;
 * each block still carries d (the same value) and its own sums, so every
 * kernel reads such rows exactly as it reads others. */
#define HET_Q8R_BS     64
#define HET_Q8R_BS_ABS 96

struct het_q8r_meta {
    float   d;
    float   s;
    int32_t sum32;
    int32_t x32[2];
    int16_t off8[2];
    int16_t off32[2][2];
};

struct het_q8r_layout {
    int64_t K, nb;
    size_t  bs;          /* block stride: HET_Q8R_BS or HET_Q8R_BS_ABS */
    size_t  row_bytes;
    bool    with_abs;
    int     group;       /* blocks sharing one d: 1, or HET_Q8R_GROUP_K (nb a multiple) */
};

#define HET_Q8R_GROUP_K 8

/* Blocks sharing d in the activations of a matmul of a weights against M
 * rows of K: batches against q4_K and q6_K share one per super-block (the
 * AVX-512 wide kernels apply it once per 8 blocks); decided on type, K and
 * M alone, so that every ISA level quantises the same int8 activations. */
#define HET_Q8R_GROUP_MIN_M 8
static inline int het_q8r_group_for(enum het_type a_type, int64_t K, int64_t M)
{
    const bool kq = a_type == HET_TYPE_Q4_K || a_type == HET_TYPE_Q6_K;
    return kq && M >= HET_Q8R_GROUP_MIN_M && (K / HET_Q8R_BLOCK) % HET_Q8R_GROUP_K == 0 ? HET_Q8R_GROUP_K : 1;
}

static inline const int8_t *het_q8r_qs(const uint8_t *row, size_t bs, int64_t b)
{
    return (const int8_t *)(row + (size_t)b * bs);
}
static inline const uint8_t *het_q8r_ua(const uint8_t *row, size_t bs, int64_t b)
{
    return row + (size_t)b * bs + 32;
}
static inline const struct het_q8r_meta *het_q8r_meta(const uint8_t *row, size_t bs, int64_t b)
{
    return (const struct het_q8r_meta *)(row + (size_t)b * bs + bs - 32);
}

/* Block stride of the activations a weight type is multiplied with. */
static inline size_t het_q8r_bs_for(enum het_type t) { return t == HET_TYPE_Q8_0 ? HET_Q8R_BS_ABS : HET_Q8R_BS; }

void het_q8r_layout_init(struct het_q8r_layout *l, int64_t K, bool with_abs);
/* Quantise K contiguous floats into one q8r row (scalar reference). Rounding
 * is to nearest even so that the SIMD versions produce identical bytes. */
void het_q8r_quantize_scalar(const float *x, const struct het_q8r_layout *l, void *dst);

/* ---- packed panels -----------------------------------------------------------
 * Weights of R rows, per 32-element block b:
 *   q[8][R][4]   group g holds k = 4g..4g+3 of every row (bytes)
 *                (U4N: nib[4][R][4], the q4_0 bytes themselves: the low
 *                nibbles are group g, the high nibbles group g+4)
 *   float d[R]   per-row scale
 *   float c[R]   per-row offset term, multiplied by the activation's s[b]
 *   int16 sc[3][R][2]   only for HET_PANEL_U6: sub-scale pairs (lo,lo),
 *                       (hi,hi) and (lo,hi) of the two 16-element halves
 * Row value = d * q + c (U4, U4N, U5), d * q (S8), d * sc_half * (q - 32) (U6).
 *
 * The compact kinds take exactly the bytes of the file's blocks, so that
 * decode (which streams every weight once per token) reads no more than
 * the GGUF holds, in one forward stream (what the hardware prefetchers
 * follow best). A panel is a run of groups of grp blocks (the last group
 * may be shorter): the group's quants, blk_bytes per block, then its scales.
 * Full groups are grp_bytes long, a multiple of 32.
 *   Q40 (q4_0, grp 4): nib[4][R][4] per block as U4N; then fp16 d[4][R].
 *               Value d*(q-8).
 *   Q80 (q8_0, grp 4): q[8][R][4] per block as S8; then fp16 d[4][R].
 *   Q6C (q6_K, grp 16 = two super-blocks): per block nib[4][R][4] (low 4
 *               bits, as U4N) and qh[2][R][4] (byte k of row r in qh[h]
 *               holds the top 2 bits of groups 4h..4h+3, group 4h+i at bits
 *               2i); then int8 sc[16][R][2] (the two 16-element halves);
 *               then fp16 d[2][R] (one per super-block).
 *               Value d * sc_half * (q - 32).
 *   Q4KC (q4_K, grp 8 = one super-block): per block nib[4][R][4] as U4N;
 *               then uint8 sc[8][R] and uint8 m[8][R] interleaved per block
 *               (sc of block j at j*2R, m at j*2R + R); then fp16 d[R] and
 *               fp16 dmin[R]. Value d*sc*q - dmin*m (148 bytes per row and
 *               super-block where the file has 144). */
enum het_panel_kind {
    HET_PANEL_U4 = 0, /* q in 0..15: q4_0, q4_1, q4_K                         */
    HET_PANEL_U5,     /* q in 0..31: q5_0, q5_1, q5_K                         */
    HET_PANEL_S8,     /* q in -127..127: q8_0 (c unused)                      */
    HET_PANEL_U6,     /* q in 0..63, int16 half-block scales: q6_K            */
    HET_PANEL_U4N,    /* U4 kept as nibbles (half the bytes): q4_0, q4_1      */
    HET_PANEL_Q40,    /* compact q4_0                                         */
    HET_PANEL_Q80,    /* compact q8_0                                         */
    HET_PANEL_Q6C,    /* compact q6_K                                         */
    HET_PANEL_Q4KC,   /* compact q4_K                                         */
    HET_PANEL_COUNT,
};

struct het_panel_layout {
    enum het_panel_kind kind;
    int     R;
    int64_t nb;          /* 32-element blocks per row                          */
    size_t  off_d, off_c, off_sc, blk_bytes;  /* per-block offsets (non-compact) */
    int64_t grp;         /* compact kinds: blocks per group                     */
    size_t  grp_bytes;   /* compact kinds: bytes of a full group                */
    size_t  bytes;       /* whole panel                                         */
};

static inline bool het_panel_is_compact(enum het_panel_kind k)
{
    return k == HET_PANEL_Q40 || k == HET_PANEL_Q80 || k == HET_PANEL_Q6C || k == HET_PANEL_Q4KC;
}

/* Compact panels: blocks in group gi, and where the group's quants, half
 * scales (Q6C) or sc/m bytes (Q4KC) and fp16 d start. */
static inline int64_t het_cpanel_len(const struct het_panel_layout *l, int64_t gi)
{
    const int64_t left = l->nb - gi * l->grp;
    return left < l->grp ? left : l->grp;
}
static inline const uint8_t *het_cpanel_grp(const struct het_panel_layout *l, const void *panel, int64_t gi)
{
    return (const uint8_t *)panel + (size_t)gi * l->grp_bytes;
}
static inline size_t het_cpanel_sc_off(const struct het_panel_layout *l, int64_t len)
{
    return (size_t)len * l->blk_bytes;
}
static inline size_t het_cpanel_d_off(const struct het_panel_layout *l, int64_t len)
{
    const bool per_blk_sc = l->kind == HET_PANEL_Q6C || l->kind == HET_PANEL_Q4KC;
    return (size_t)len * (l->blk_bytes + (per_blk_sc ? 2 * (size_t)l->R : 0));
}
/* Bytes of fp16 scales after the quants of a group of len blocks: one d per
 * block (Q40, Q80), per super-block (Q6C), or d and dmin per super-block
 * (Q4KC). */
static inline size_t het_cpanel_d_bytes(const struct het_panel_layout *l, int64_t len)
{
    const size_t r = (size_t)l->R;
    if (l->kind == HET_PANEL_Q6C) return 2 * r * (size_t)((len + 7) / 8);
    if (l->kind == HET_PANEL_Q4KC) return 4 * r * (size_t)((len + 7) / 8);
    return 2 * r * (size_t)len;
}

/* The panel kind whose formula the type follows (U4 for U4N types); false
 * when the type has no panel form. */
bool het_panel_kind_of(enum het_type type, enum het_panel_kind *kind);
/* Panel kinds the type can be packed as, preferred first; returns the count. */
int het_panel_kinds(enum het_type type, enum het_panel_kind kinds[3]);
/* Smallest M for which the kind's panel kernel beats the row GEMV. */
int het_panel_min_m(enum het_panel_kind kind);
void het_panel_layout_init(struct het_panel_layout *l, enum het_panel_kind kind, int R, int64_t K);
/* Repack nrows (<= R) rows of a weight matrix; missing rows become zeros. */
void het_panel_pack(enum het_type type, const struct het_panel_layout *l, const void *rows, size_t row_stride,
                    int nrows, void *dst);
/* Scalar panel kernel: out[c*R + r] = dot(row r, activation c), c < nc. */
void het_panel_gemm_scalar(const struct het_panel_layout *l, const void *panel, const uint8_t *const *a, int nc,
                           float *out);

/* ---- wide panels (batch matmuls) ----------------------------------------------
 * For many activation rows (prefill) the SIMD levels run a wider tile from
 * panels expanded at run time: two compact panels (2R rows) become one wide
 * panel of byte quants, per block q[8][2R][4] then float d[2R] (blk_bytes
 * 64R + 8R), so the kernel needs no unpacking and each activation broadcast
 * feeds 2R rows. Q40 expands to unsigned quants 0..15 (the -8 is taken off
 * through the activation's off8), Q80 to signed ones. A kernel table entry
 * xexpand/xpanel exists only where the level has such a kernel. */
static inline size_t het_xpanel_blk_bytes(int R) { return 72 * (size_t)R; }
/* The K-quant wide forms carry two vectors per block: Q4KC expands to
 * quants 0..15, int32 sc[2R] and float -dmin*m[2R]; Q6C to quants 0..63 and
 * int32 sc_half[2][2R] (half 0, then half 1). Every 8 blocks (a
 * super-block, the first at the K chunk's start) are followed by the rows'
 * float d[2R]: 80R bytes a block and an eighth of 8R. */
static inline size_t het_xpanel_kind_blk_bytes(enum het_panel_kind kind, int R)
{
    return kind == HET_PANEL_Q4KC || kind == HET_PANEL_Q6C ? 81 * (size_t)R : het_xpanel_blk_bytes(R);
}
/* Expand block range [b0, b1) of compact panels p0 and p1 (p1 NULL: zero
 * rows) into dst (block b0 first). */
typedef void (*het_xexpand_fn)(const struct het_panel_layout *l, const void *p0, const void *p1, int64_t b0,
                               int64_t b1, void *dst);
/* Wide panel of blocks [0, nb) against nc (1..xcols) q8r rows a[c] whose
 * pointers are already at the first block: out[c*ldo + r] = dot (r < 2R),
 * or += dot when accumulate. For Q4KC and Q6C the rows come in groups of
 * HET_Q8R_GROUP_K blocks sharing d, the first group at block 0
 * (het_mm_plan_init), which the AVX-512 kernels rely on. */
typedef void (*het_xpanel_fn)(int R, int64_t nb, const void *xp, const uint8_t *const *a, int nc, float *out,
                              size_t ldo, bool accumulate);
/* A kind whose wide kernel reads its activations packed (het_mm_kernels
 * .xpack): nc (1..16) q8r rows a[c] (block stride bs, pointers at the
 * first block), blocks [0, nb), written to dst in HET_XPACK_BLK bytes a
 * block at most, in the kernel's own layout: for q4_0 and q8_0 per block
 * the rows' quants (16 x 32 bytes; rows past nc zero), their d and their
 * quants' sums (sum32) as floats (16 each; 0 past nc); the AMX K-quant
 * kernels pack a super-block at a time (arch/amx/panel_amx.c). The wide
 * kernel then gets a[0] = the first such group and nc rows in all: groups
 * of 16 rows one after another, nb * HET_XPACK_BLK bytes each (the last
 * group may hold fewer rows). */
#define HET_XPACK_ROWS 16
#define HET_XPACK_BLK  (HET_XPACK_ROWS * 32 + 2 * HET_XPACK_ROWS * 4)
typedef void (*het_xpack_fn)(const uint8_t *const *a, int nc, int64_t nb, size_t bs, void *dst);

/* ---- load-time repacking -----------------------------------------------------
 * The CPU device may pack a weight once (het_cpu_mul_mat_repack into a buffer
 * of het_cpu_mul_mat_repack_size bytes) and set tensor->extra to it; then
 * het_cpu_mul_mat skips the per-call packing and uses the panel kernels for
 * every M, decode included (about 3x the row GEMV's rate). The buffer starts
 * with this header (64 bytes reserved); panels follow, for each (i3, i2) of
 * a, the ceil(N/R) panels of R rows, panel_stride bytes apart. A buffer
 * whose header does not match the tensor and the ISA level is ignored.
 * A 2-D weight's panels may instead lie in n_seg segments of
 * ceil(panels / n_seg) panels each, segment t seg_lines * 64 * t bytes after
 * segment 0 (which follows the header): the CPU device puts segment t of
 * every weight in thread t's region of its arena, in the order a decode
 * reads them, so that each thread's share of a token's weights is one
 * range (het_cpu_mul_mat_repack_seg). */
#define HET_CPU_PACKED_MAGIC 0x4b504d48u
#define HET_CPU_PACKED_HEADER 64

struct het_cpu_packed {
    uint32_t            magic;
    enum het_type       type;
    enum het_panel_kind kind;
    int32_t             R;
    int64_t             K, N, ne2, ne3;
    size_t              panel_stride;
    int32_t             n_seg;     /* 0 or 1: one run of panels            */
    int32_t             seg_lines; /* segment t at segment 0 + 64 * seg_lines * t */
};

/* 0 when the tensor has no panel form at this level (or is not a plain
 * contiguous weight). */
size_t het_cpu_mul_mat_repack_size(const struct het_tensor *a, enum het_cpu_isa isa);
/* The weight bytes each of nth threads streams first in a decode (at most 4
 * rows of b) of matmul t, in the order it streams them (its load-time
 * panels, or its rows): thread r's run starts at *base + r * *stride (its
 * segment, or its share of the one run) and is the returned length long; 0
 * for any other node. */
size_t het_cpu_mul_mat_ahead(const struct het_tensor *t, int nth, const uint8_t **base, size_t *stride);
enum het_status het_cpu_mul_mat_repack(const struct het_tensor *a, enum het_cpu_isa isa, void *dst, size_t size);
/* The same buffer made in pieces, so that threads can share the work: items
 * are the panels in buffer order (0 when there is no panel form); the piece
 * that holds item 0 writes the header. Every item must be packed once. */
int64_t         het_cpu_mul_mat_repack_items(const struct het_tensor *a, enum het_cpu_isa isa);
enum het_status het_cpu_mul_mat_repack_range(const struct het_tensor *a, enum het_cpu_isa isa, void *dst, size_t size,
                                             int64_t lo, int64_t hi);
/* The same in n_seg segments seg_bytes apart (a multiple of 64, at least
 * het_cpu_mul_mat_seg_bytes): the header and segment 0 at dst, segment t at
 * dst + HET_CPU_PACKED_HEADER + t * seg_bytes. 2-D weights only. */
size_t          het_cpu_mul_mat_seg_bytes(const struct het_tensor *a, enum het_cpu_isa isa, int n_seg);
enum het_status het_cpu_mul_mat_repack_seg(const struct het_tensor *a, enum het_cpu_isa isa, void *dst, int n_seg,
                                           size_t seg_bytes, int64_t lo, int64_t hi);

/* ---- kernel tables ----------------------------------------------------------- */

/* One quantised weight row against nc (1..4) q8r rows a[c] (block stride
 * het_q8r_bs_for(type)): out[c]. */
typedef void (*het_qgemv_fn)(int64_t K, const void *w, const uint8_t *const *a, int nc, float *out);
/* Packed panel against nc (1..4) q8r rows: out[c*R + r]. */
typedef void (*het_panel_fn)(const struct het_panel_layout *l, const void *panel, const uint8_t *const *a, int nc,
                             float *out);
/* np consecutive panels (stride bytes apart) against nc (1..4) q8r rows:
 * out[c*ldo + p*R + r] (every panel full: R rows), asking for the lines
 * ahead as `stream` says. */
typedef void (*het_panels_fn)(const struct het_panel_layout *l, const void *panel, size_t stride, int64_t np,
                              const uint8_t *const *a, int nc, float *out, size_t ldo, enum het_cpu_stream stream);
/* nr (1..2) float-type weight rows against nc (1..4) F32 rows: out[r*4 + c]. */
typedef void (*het_fdot_fn)(int64_t K, const void *const *w, int nr, const float *const *x, int nc, float *out);
typedef void (*het_quantize_fn)(const float *x, const struct het_q8r_layout *l, void *dst);
/* n elements (whole blocks) of a quantised row to F32, bit-identical to
 * het_dequantize_row (the F32-activation matmul path). */
typedef void (*het_dequant_fn)(const void *src, float *y, int64_t n);

struct het_mm_kernels {
    het_quantize_fn quantize;
    het_qgemv_fn    gemv[HET_TYPE_COUNT];    /* quantised types               */
    het_fdot_fn     fdot[HET_TYPE_COUNT];    /* F32, F16, BF16                */
    het_dequant_fn  dequant[HET_TYPE_COUNT]; /* quantised types (NULL: below) */
    het_panel_fn    panel[HET_PANEL_COUNT];  /* NULL: no panel kernel         */
    het_panels_fn   panels[HET_PANEL_COUNT]; /* runs of panels (NULL: loop)   */
    int             panel_rows;              /* R of the panels               */
    het_xexpand_fn  xexpand[HET_PANEL_COUNT]; /* compact kinds with a wide    */
    het_xpanel_fn   xpanel[HET_PANEL_COUNT];  /* kernel (NULL: none)          */
    het_xpack_fn    xpack[HET_PANEL_COUNT];   /* NULL: reads the q8r rows     */
    size_t          xblk_bytes[HET_PANEL_COUNT]; /* a block's share of the wide
                                                  * form (0: het_xpanel_kind_blk_bytes) */
    int             xcols;                   /* activation rows per wide call */
};

/* Kernel tables per ISA level. A NULL entry means "use the level below";
 * matmul.c resolves that. */
extern const struct het_mm_kernels het_mm_kernels_scalar;
extern const struct het_mm_kernels het_mm_kernels_avx2;
extern const struct het_mm_kernels het_mm_kernels_avx512;     /* without VNNI */
extern const struct het_mm_kernels het_mm_kernels_avx512vnni; /* the same kernels with VNNI */
extern const struct het_mm_kernels het_mm_kernels_amx;        /* + tile sums for prefill   */

/* Scalar reference kernels (also the fallbacks of the SIMD tables). */
void het_gemv_scalar(enum het_type type, int64_t K, const void *w, const uint8_t *const *a, int nc, float *out);
void het_fdot_scalar(enum het_type type, int64_t K, const void *const *w, int nr, const float *const *x, int nc,
                     float *out);

#endif /* HET_CPU_QUANT_DOT_H */
