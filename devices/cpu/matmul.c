/*
 * matmul.c — HET_OP_MUL_MAT on the CPU: dst (N,M,B2,B3) = a (K,N,A2,A3) x
 * b (K,M,B2,B3), out[m][n] = sum_k a[n][k] * b[m][k], a broadcast over
 * dims 2,3 (GQA). This file plans and splits the work; the arithmetic lives
 * in the kernel tables of quant_dot.h (scalar) and arch/<isa>/.
 *
 * Quantised a: phase 1 quantises every row of b to a q8r row in wdata (the
 * threads share the rows: a step of its own; for a single row, decode,
 * every thread quantises it itself in its first part of phase 2 and no
 * step is spent on it). Phase 2 then either
 *   - streams a's rows once through the GEMV kernel (small M: decode), the
 *     threads splitting the N rows; or
 *   - packs R-row panels of a into thread-private scratch and runs the panel
 *     kernel on 4 activation rows at a time, the threads splitting the
 *     panels (or M when there are too few panels). Panels stay packed while
 *     all of M streams past them in L2-sized chunks. When the device packed
 *     a at load time (a->extra, het_cpu_mul_mat_repack) the panels are used
 *     as they are, for every M: decode then runs at about 3x the GEMV rate.
 *     For q4_0 / q8_0 / q6_K they are compact (no more bytes than the
 *     file; q4_K 3% more), and decode hands each thread's whole run of panels to one
 *     kernel call that writes dst rows directly; or
 *   - for many rows of b (prefill), where the level has wide kernels:
 *     expands pairs of compact panels (load-time ones, or packed now) into
 *     wide byte panels in thread scratch, a group at a time, and runs the
 *     wide kernel (2R rows x xcols: 16 x 3 on AVX2, 32 x 4 on AVX-512, 32 x 64
 *     with AMX, whose kernels read the rows packed 16 at a time: xpack)
 *     with all of M streaming past each panel (K is
 *     cut into chunks only for very long rows).
 * Every loop over rows, panels or M is cut into parts that the threads take
 * from the device's shared counter (het_cpu_part_first/next): whichever
 * thread is running does the work.
 * Float a (F32/F16/BF16): b rows are used in place when contiguous (else
 * gathered to wdata first) and multiplied 2 weight rows x 4 b rows at a time.
 * The same path serves quantised a when the device keeps activations in F32
 * (het_cpu_device_set_f32_activations): each weight row is dequantised into
 * thread scratch, so the result is that of the F32 weights, with no 8-bit
 * rounding of b; 3-4x slower end to end than the integer kernels.
 */
#include <string.h>

#include "devices/cpu/cpu_ops.h"
#include "devices/cpu/quant_dot.h"
#include "devices/cpu/vec.h"

/* Per-thread budget for packed panels kept across the whole of M. */
#define HET_MM_PANEL_BUDGET     (2u << 20)
/* Activation bytes per M chunk (kept in L2 while the panels stream past). */
#define HET_MM_CHUNK_BYTES      (192u << 10)
#define HET_MM_PANEL_ROWS_MAX   16
/* Most activation rows a wide kernel takes per call (a level's xcols). */
#define HET_MM_XCOLS_MAX        64
/* Rows of b from which the wide kernels (when the level has them) run. */
#define HET_MM_WIDE_MIN_M       8
/* every wide q4_K and q6_K batch gets activations grouped as its kernel wants */
_Static_assert(HET_Q8R_GROUP_MIN_M <= HET_MM_WIDE_MIN_M, "wide K-quant batches must have grouped activations");
/* Wide panel bytes per K chunk. Measured on Zen 3: splitting K so a wide
 * panel fits L1 loses more to the extra passes over dst than it gains;
 * streaming it from L2 is fine. Only very long rows are split. */
#define HET_MM_WIDE_CHUNK_BYTES (128u << 10)
/* Wide panel bytes expanded at once per thread (kept in L2 over all M). A
 * level whose wide kernel reads packed activations (xpack) has the thread
 * pack each pass's rows once per such group. */
#define HET_MM_WIDE_GROUP_BYTES (256u << 10)
/* The same where the wide kernel reads packed activations (xpack, the AMX
 * level: cores with 2 MB of L2): each item group packs the rows again, so
 * larger groups pack less often. bench_matmul -t 1 -T q4_0 -M 512 -p 1 on
 * the Xeon VM, two runs: 628-641 tok/s (matmul only) with 256 KB, 730-741
 * with 1 MB; the unpacked avx512vnni kernels ran the same with either. */
#define HET_MM_WIDE_GROUP_BYTES_PACKED (1u << 20)
#define HET_MM_WIDE_GROUP_MAX   64
/* Fewest weight (or activation) bytes a part of a step should cover: the
 * atomic that hands a part out costs about what streaming ~1 KB does. */
#define HET_MM_PART_BYTES       (32u << 10)
/* Most weight bytes a part of a decode step streams. The output matrix
 * (128 MB for Qwen3-0.6B's q6_K) in a few parts per thread would make its
 * parts 16 MB: at the step's end a thread could wait for most of one
 * (~0.5 ms) while the other finishes it, or far longer when that thread
 * lost its core (issue 12 part 2). At 1 MB a part the wait is ~30 us, and
 * handing out the 128 parts costs ~128 atomics. */
#define HET_MM_PART_MAX_BYTES   (1u << 20)
/* Up to this many rows of b (decode), every thread quantises them itself
 * (about a microsecond) instead of the threads sharing a step for it: a
 * step end less per matmul, where a thread would wait for the one that
 * quantised (or for it to be scheduled again, on a busy machine). One row,
 * so that no M needs more scratch than a larger M does (callers such as
 * matmul_id.c size it for the largest M and for M = 1). */
#define HET_MM_PRIVATE_ROWS     1

static size_t het_mm_align(size_t x) { return (x + 63) & ~(size_t)63; }

static bool het_mm_is_float_type(enum het_type t)
{
    return t == HET_TYPE_F32 || t == HET_TYPE_F16 || t == HET_TYPE_BF16;
}

static size_t het_mm_elem_size(enum het_type t) { return t == HET_TYPE_F32 ? 4 : 2; }

/* Everything the phases need, derived from the node alone (plus ISA). */
struct het_mm_plan {
    const struct het_tensor *a, *b;
    struct het_tensor *dst;
    int64_t K, N, M, B2, B3, r2, r3;
    bool    quantized;
    int64_t seg_panels;       /* prepacked in segments of this many panels (0: one run) */
    size_t  seg_bytes;        /* from one segment to the next                            */
    bool    b_gather;         /* b rows not contiguous, or sw: F32 copies in wdata */
    const struct het_tensor *sw; /* b is this SWIGLU, computed here row by row  */
    const struct het_cpu_residual_norm *rn; /* b is this sum's norm times its gain,
                                         computed here row by row (residual_norm.c) */
    bool    a_gather;         /* a rows converted to F32 in scratch: float a with
                                 nb[0] != element size, or dequantised a           */
    bool    a_dequant;        /* quantised a, F32 activations: rows dequantised    */
    bool    use_panel;
    struct het_q8r_layout ql; /* quantised: activation row layout                  */
    size_t  act_row_bytes;    /* bytes of one prepared b row in wdata (0: none)    */
    size_t  act_bytes;        /* all prepared b rows                               */
    bool    act_private;      /* each thread prepares them itself, in its own copy */
    const uint8_t *const *act_rows; /* b's rows quantised by the caller (het_cpu_mul_mat_rows),
                                 row m at act_rows[m]; NULL: prepared here       */
    size_t  thread_bytes;     /* per-thread scratch                                */
    int64_t panel_group;      /* panels packed at once per thread                  */
    struct het_panel_layout pl;
    const uint8_t  *prepacked;    /* panels packed at load time (a->extra), or NULL */
    bool            use_wide;     /* wide kernels over expanded panel pairs         */
    int             xcols;        /* b rows per wide call                           */
    int64_t         x_kcb;        /* blocks per K chunk                             */
    int64_t         x_group;      /* wide items expanded at once per thread         */
    size_t          x_bytes;      /* one wide item's chunk                          */
    size_t          x_blk;        /* a block's share of a wide item                 */
    het_xexpand_fn  xexpand_fn;
    het_xpanel_fn   xpanel_fn;
    het_xpack_fn    xpack_fn;     /* wide kernel reads packed activations, or NULL */
    bool            prepack;      /* xpack_fn: b's rows packed once, by the step that
                                     quantises them (after the rows in wdata)       */
    size_t          off_pack;     /* where: batch, K chunk, group of rows, blocks   */
    het_panels_fn   panels_fn;    /* runs of panels, or NULL                        */
    het_panel_fn    panel_fn;
    het_qgemv_fn    gemv_fn;
    het_fdot_fn     fdot_fn;
    het_quantize_fn quantize_fn;
    het_dequant_fn  dequant_fn;   /* a_dequant: a SIMD dequantiser, or NULL */
};

static const struct het_mm_kernels *het_mm_level(enum het_cpu_isa isa)
{
    switch (isa) {
    case HET_CPU_ISA_AMX:    return &het_mm_kernels_amx;
    case HET_CPU_ISA_AVX512VNNI: return &het_mm_kernels_avx512vnni;
    case HET_CPU_ISA_AVX512: return &het_mm_kernels_avx512;
    case HET_CPU_ISA_AVX2:   return &het_mm_kernels_avx2;
    default:                 return &het_mm_kernels_scalar;
    }
}

/* The panel kernel for type at isa: the level decides first, then the
 * type's preferred kind. NULL when there is none, else the level's table. */
static const struct het_mm_kernels *het_mm_pick_panel(enum het_type type, enum het_cpu_isa isa, int64_t K,
                                                      het_panel_fn *fn, struct het_panel_layout *pl)
{
    enum het_panel_kind kinds[3];
    const int nk = het_panel_kinds(type, kinds);
    for (int lv = (int)isa; lv >= 0; lv--) {
        const struct het_mm_kernels *k = het_mm_level((enum het_cpu_isa)lv);
        for (int i = 0; i < nk; i++) {
            if (!k->panel[kinds[i]]) continue;
            *fn = k->panel[kinds[i]];
            het_panel_layout_init(pl, kinds[i], k->panel_rows, K);
            return k;
        }
    }
    return NULL;
}

bool het_cpu_gemv_is_simd(enum het_type type, enum het_cpu_isa isa)
{
    for (int lv = (int)isa; lv > (int)HET_CPU_ISA_SCALAR; lv--)
        if (het_mm_level((enum het_cpu_isa)lv)->gemv[type]) return true;
    return false;
}

/* Resolve each kernel from the highest level that has it. */
static void het_mm_resolve(struct het_mm_plan *p, enum het_cpu_isa isa)
{
    enum het_type t = p->a->type;
    p->gemv_fn = NULL;
    p->fdot_fn = NULL;
    p->quantize_fn = NULL;
    p->dequant_fn = NULL;
    for (int lv = (int)isa; lv >= 0; lv--) {
        const struct het_mm_kernels *k = het_mm_level((enum het_cpu_isa)lv);
        if (!p->quantize_fn) p->quantize_fn = k->quantize;
        if (!p->dequant_fn && p->a_dequant) p->dequant_fn = k->dequant[t];
        if (!p->gemv_fn) p->gemv_fn = k->gemv[t];
        if (!p->fdot_fn) p->fdot_fn = p->a_gather ? k->fdot[HET_TYPE_F32] : k->fdot[t];
    }
    p->panel_fn = NULL;
    p->panels_fn = NULL;
    p->xexpand_fn = NULL;
    p->xpanel_fn = NULL;
    p->xpack_fn = NULL;
    const struct het_mm_kernels *k = p->quantized ? het_mm_pick_panel(t, isa, p->K, &p->panel_fn, &p->pl) : NULL;
    if (!k) {
        p->panel_fn = NULL;
        return;
    }
    p->panels_fn = k->panels[p->pl.kind];
    if (k->xpanel[p->pl.kind] && k->xexpand[p->pl.kind]) {
        p->xexpand_fn = k->xexpand[p->pl.kind];
        p->xpanel_fn = k->xpanel[p->pl.kind];
        p->xpack_fn = k->xpack[p->pl.kind];
        p->xcols = k->xcols;
        p->x_blk = k->xblk_bytes[p->pl.kind] ? k->xblk_bytes[p->pl.kind]
                                             : het_xpanel_kind_blk_bytes(p->pl.kind, p->pl.R);
    }
}

/* a's load-time panels when a->extra holds ones that match a and the plan. */
static const uint8_t *het_mm_prepacked(const struct het_mm_plan *p)
{
    const struct het_cpu_packed *h = p->a->extra;
    if (!h || !p->panel_fn || h->magic != HET_CPU_PACKED_MAGIC) return NULL;
    if (h->type != p->a->type || h->kind != p->pl.kind || h->R != p->pl.R || h->K != p->K || h->N != p->N ||
        h->ne2 != p->a->ne[2] || h->ne3 != p->a->ne[3] || h->panel_stride != het_mm_align(p->pl.bytes))
        return NULL;
    return (const uint8_t *)h + HET_CPU_PACKED_HEADER;
}

/* Panels of a prepacked 2-D weight per segment, and the segments' distance. */
static int64_t het_mm_segs(const struct het_cpu_packed *h, size_t *seg_bytes)
{
    *seg_bytes = 0;
    if (h->n_seg <= 1 || h->ne2 * h->ne3 != 1) return 0;
    *seg_bytes = (size_t)h->seg_lines * 64;
    const int64_t np = (h->N + h->R - 1) / h->R;
    return (np + h->n_seg - 1) / h->n_seg;
}

/* Where panel idx lies after the header: panels stride bytes apart, in
 * segments of per panels seg_bytes apart (per 0: one run). */
static size_t het_mm_panel_offset(int64_t idx, size_t stride, int64_t per, size_t seg_bytes)
{
    if (!per) return (size_t)idx * stride;
    const int64_t t = idx / per;
    return (size_t)t * seg_bytes + (size_t)(idx - t * per) * stride;
}

/* Panel idx (ab * panels + ip) of the prepacked weights. */
static const uint8_t *het_mm_panel_at(const struct het_mm_plan *p, int64_t idx)
{
    return p->prepacked + het_mm_panel_offset(idx, het_mm_align(p->pl.bytes), p->seg_panels, p->seg_bytes);
}

static bool het_mm_shapes_ok(const struct het_tensor *dst)
{
    const struct het_tensor *a = dst->src[0], *b = dst->src[1];
    if (!a || !b || !a->data || !b->data || !dst->data) return false;
    if (b->type != HET_TYPE_F32 || dst->type != HET_TYPE_F32) return false;
    if (a->ne[0] != b->ne[0] || a->ne[0] <= 0) return false;
    if (dst->ne[0] != a->ne[1] || dst->ne[1] != b->ne[1] || dst->ne[2] != b->ne[2] || dst->ne[3] != b->ne[3])
        return false;
    if (a->ne[2] <= 0 || a->ne[3] <= 0 || b->ne[2] % a->ne[2] != 0 || b->ne[3] % a->ne[3] != 0) return false;
    if (het_mm_is_float_type(a->type)) return true;
    enum het_panel_kind kind;
    if (!het_panel_kind_of(a->type, &kind)) return false;
    const struct het_type_traits *tr = het_type_get_traits(a->type);
    /* quantised rows must be whole blocks, stored one after the other */
    return tr && a->ne[0] % tr->blck_size == 0 && a->ne[0] % HET_Q8R_BLOCK == 0 && a->nb[0] == tr->type_size;
}

/* Groups of HET_XPACK_ROWS rows that m rows fill. */
static int64_t het_mm_groups16(int64_t m) { return (m + HET_XPACK_ROWS - 1) / HET_XPACK_ROWS; }

/* Rows of b a wide pass takes at a time (their K chunk stays in L2). */
static int64_t het_mm_wide_mc(const struct het_mm_plan *p)
{
    int64_t mc = (int64_t)(HET_MM_CHUNK_BYTES / ((size_t)p->x_kcb * p->ql.bs)) / p->xcols * p->xcols;
    return mc < p->xcols ? p->xcols : mc;
}

/* Bytes of one pass's rows packed for the wide kernel (xpack). */
static size_t het_mm_wide_pack_bytes(const struct het_mm_plan *p)
{
    if (!p->xpack_fn) return 0;
    const int64_t groups = (het_mm_wide_mc(p) + HET_XPACK_ROWS - 1) / HET_XPACK_ROWS;
    return het_mm_align((size_t)groups * (size_t)p->x_kcb * HET_XPACK_BLK);
}

/* Wide path: K chunk, group size and per-thread scratch (the group's wide
 * chunks, after the group's compact panels when a is not prepacked, then
 * the packed rows of one pass when the kernel reads them packed). */
static size_t het_mm_wide_plan(struct het_mm_plan *p, int nth, size_t tb)
{
    const size_t xblk = p->x_blk;
    p->x_kcb = (int64_t)(HET_MM_WIDE_CHUNK_BYTES / xblk);
    if (p->x_kcb < 1) p->x_kcb = 1;
    if (p->x_kcb > p->pl.nb) p->x_kcb = p->pl.nb;
    /* K chunks of whole groups of blocks sharing d (the kernel's contract) */
    if (p->ql.group > 1) p->x_kcb = p->x_kcb < p->ql.group ? p->ql.group : p->x_kcb - p->x_kcb % p->ql.group;
    p->x_bytes = het_mm_align(xblk * (size_t)p->x_kcb);
    const int64_t np = (p->N + p->pl.R - 1) / p->pl.R;
    const int64_t items = p->B2 * p->B3 * ((np + 1) / 2);
    const int64_t per_thread = (items + nth - 1) / nth;
    int64_t group = (int64_t)((p->xpack_fn ? HET_MM_WIDE_GROUP_BYTES_PACKED : HET_MM_WIDE_GROUP_BYTES) / p->x_bytes);
    if (group < 1) group = 1;
    if (group > HET_MM_WIDE_GROUP_MAX) group = HET_MM_WIDE_GROUP_MAX;
    p->x_group = per_thread < group ? per_thread : group;
    size_t need = p->x_bytes * (size_t)p->x_group;
    if (!p->prepacked) need += 2 * het_mm_align(p->pl.bytes) * (size_t)p->x_group;
    /* a pass's rows packed (het_cpu_mul_mat_rows: the caller's rows, not
     * packed by het_mm_prepare) */
    need += het_mm_wide_pack_bytes(p);
    return need > tb ? need : tb;
}

/* Fill plan for node at kernel level isa with nth threads. */
static void het_mm_plan_init(struct het_mm_plan *p, struct het_tensor *dst, enum het_cpu_isa isa, int nth,
                             bool f32_act, const struct het_tensor *sw, const struct het_cpu_residual_norm *rn)
{
    memset(p, 0, sizeof(*p));
    p->sw = sw;
    p->rn = rn;
    p->dst = dst;
    p->a = dst->src[0];
    p->b = dst->src[1];
    p->K = p->a->ne[0];
    p->N = p->a->ne[1];
    p->M = p->b->ne[1];
    p->B2 = p->b->ne[2];
    p->B3 = p->b->ne[3];
    p->r2 = p->B2 / p->a->ne[2];
    p->r3 = p->B3 / p->a->ne[3];
    p->quantized = !het_mm_is_float_type(p->a->type);
    p->a_dequant = p->quantized && f32_act;
    if (p->a_dequant) p->quantized = false;
    p->b_gather = sw || rn || p->b->nb[0] != sizeof(float);
    p->a_gather = p->a_dequant || (!p->quantized && p->a->nb[0] != het_mm_elem_size(p->a->type));

    het_mm_resolve(p, isa);

    const int64_t rows = p->M * p->B2 * p->B3;
    size_t tb = 0;
    if (p->quantized) {
        het_q8r_layout_init(&p->ql, p->K, p->a->type == HET_TYPE_Q8_0);
        /* batches against q4_K and q6_K: one d per super-block of
         * activations (as llama.cpp's q8_K), applied once per 8 blocks by
         * the wide kernels */
        p->ql.group = het_q8r_group_for(p->a->type, p->K, p->M);
        p->act_row_bytes = p->ql.row_bytes;
        if (p->b_gather) tb = het_mm_align((size_t)p->K * sizeof(float));
        p->prepacked = het_mm_prepacked(p);
        p->seg_panels = p->prepacked ? het_mm_segs(p->a->extra, &p->seg_bytes) : 0;
        p->use_panel = p->prepacked || (p->panel_fn && p->M >= het_panel_min_m(p->pl.kind));
        /* the K-quants' wide kernels want rows sharing d per super-block */
        const bool kq = p->pl.kind == HET_PANEL_Q4KC || p->pl.kind == HET_PANEL_Q6C;
        p->use_wide = p->use_panel && p->xpanel_fn && p->M >= HET_MM_WIDE_MIN_M &&
                      (!kq || p->ql.group == HET_Q8R_GROUP_K);
        if (p->use_wide) {
            tb = het_mm_wide_plan(p, nth, tb);
        } else if (p->use_panel && !p->prepacked) {
            /* panels of this thread's share, at most the budget's worth */
            const int64_t items = p->B2 * p->B3 * ((p->N + p->pl.R - 1) / p->pl.R);
            int64_t per_thread = (items + nth - 1) / nth;
            int64_t budget = (int64_t)(HET_MM_PANEL_BUDGET / p->pl.bytes);
            if (budget < 1) budget = 1;
            p->panel_group = per_thread < budget ? per_thread : budget;
            size_t pb = het_mm_align(p->pl.bytes) * (size_t)p->panel_group;
            if (pb > tb) tb = pb;
        }
    } else {
        if (p->b_gather) p->act_row_bytes = het_mm_align((size_t)p->K * sizeof(float));
        if (p->a_gather) tb = 2 * het_mm_align((size_t)p->K * sizeof(float));
    }
    p->act_bytes = het_mm_align(p->act_row_bytes * (size_t)rows);
    p->act_private = p->quantized && rows <= HET_MM_PRIVATE_ROWS;
    /* b's rows packed once for the node by the step that quantises them */
    p->prepack = p->use_wide && p->xpack_fn && !p->act_private;
    if (p->prepack) {
        p->off_pack = p->act_bytes;
        p->act_bytes += het_mm_align((size_t)(p->B2 * p->B3) * (size_t)het_mm_groups16(p->M) * (size_t)p->pl.nb *
                                     HET_XPACK_BLK);
    }
    p->thread_bytes = tb;
}

static size_t het_mm_plan_wsize(const struct het_mm_plan *p, int nth)
{
    if (p->act_private) return (size_t)nth * het_mm_align(p->act_bytes + p->thread_bytes); /* het_mm_private */
    return p->act_bytes + (size_t)nth * p->thread_bytes; /* one copy of b's rows, shared */
}

bool het_cpu_mul_mat_supports(const struct het_tensor *node)
{
    return node && node->op == HET_OP_MUL_MAT && het_mm_shapes_ok(node);
}

size_t het_cpu_mul_mat_work_size(const struct het_tensor *node, int nth, bool f32_act)
{
    if (!het_cpu_mul_mat_supports(node)) return 0;
    if (nth < 1) nth = 1;
    /* The ISA is not known here, nor whether the region will really get nth
     * threads: size for the largest need of any level and thread count. */
    size_t need = 0;
    for (int lv = HET_CPU_ISA_SCALAR; lv < HET_CPU_ISA_COUNT; lv++) {
        for (int t = 1; t <= nth; t++) {
            /* with the SWIGLU it reads computed here too: sized whenever b
             * is one, whether or not the pair qualifies now (that depends on
             * flags and storage, which the device's memo of sizes does not
             * key on); so with a norm's gain (residual_norm.c), sized by a
             * descriptor that only says there is one */
            const struct het_tensor *sw = node->src[1];
            const struct het_cpu_residual_norm any_rn = { 0 };
            const bool pre = sw->op == HET_OP_SWIGLU || sw->op == HET_OP_MUL;
            for (int fused = 0; fused <= (pre ? 1 : 0); fused++) {
                struct het_mm_plan p;
                het_mm_plan_init(&p, (struct het_tensor *)node, (enum het_cpu_isa)lv, t, f32_act,
                                 fused && sw->op == HET_OP_SWIGLU ? sw : NULL,
                                 fused && sw->op == HET_OP_MUL ? &any_rn : NULL);
                size_t w = het_mm_plan_wsize(&p, t);
                if (w > need) need = w;
            }
        }
    }
    return need;
}

/* ---- helpers ------------------------------------------------------------- */

static const float *het_mm_b_row(const struct het_mm_plan *p, int64_t m, int64_t i2, int64_t i3)
{
    return (const float *)((const char *)p->b->data + m * p->b->nb[1] + i2 * p->b->nb[2] + i3 * p->b->nb[3]);
}

static void het_mm_gather_f32(const float *src, size_t nb0, int64_t K, float *dst)
{
    const char *s = (const char *)src;
    for (int64_t k = 0; k < K; k++) memcpy(&dst[k], s + (size_t)k * nb0, sizeof(float));
}

static const void *het_mm_a_row(const struct het_mm_plan *p, int64_t n, int64_t i2, int64_t i3)
{
    return (const char *)p->a->data + n * p->a->nb[1] + (i2 / p->r2) * p->a->nb[2] + (i3 / p->r3) * p->a->nb[3];
}

static void het_mm_store(const struct het_mm_plan *p, int64_t n, int64_t m, int64_t i2, int64_t i3, float v)
{
    const struct het_tensor *d = p->dst;
    char *o = (char *)d->data + n * d->nb[0] + m * d->nb[1] + i2 * d->nb[2] + i3 * d->nb[3];
    memcpy(o, &v, sizeof v);
}

/* Part k of n of [0, total). */
static void het_mm_range(int64_t total, int64_t k, int64_t n, int64_t *lo, int64_t *hi)
{
    *lo = total * k / n;
    *hi = total * (k + 1) / n;
}

/* Parts of a loop over `units`, each of which streams `bytes` of weights
 * once per 4 rows of b (the kernels take 4 at a time). In decode (M <= 4)
 * a large matrix is cut finer than a few parts per thread, into parts of
 * at most HET_MM_PART_MAX_BYTES. */
static int64_t het_mm_parts(const struct het_compute_params *cp, int64_t units, size_t bytes, int64_t M)
{
    const size_t work = (bytes ? bytes : 1) * (size_t)((M + 3) / 4);
    const int64_t n = het_cpu_n_parts(cp, units, (int64_t)(HET_MM_PART_BYTES / work) + 1);
    if (M > 4 || cp->nth <= 1) return n;
    int64_t fine = (int64_t)((double)work * (double)units / HET_MM_PART_MAX_BYTES);
    if (fine > units) fine = units;
    if (fine > HET_CPU_PARTS_MAX) fine = HET_CPU_PARTS_MAX;
    fine -= fine % cp->nth; /* runs of adjacent parts, one per thread (cpu_sync.c) */
    return fine > n ? fine : n;
}

/* Where a thread's own bytes of wdata start when it quantises b itself
 * (act_private: decode): its copy of b's rows, then its scratch, in a slot
 * of wsize / nth bytes (64-aligned) that stays where it is from node to
 * node. Placed by each node's sizes instead, thread 1's copy began
 * act_bytes in, so a node of another K put it over lines thread 0 had just
 * written, and on two CCDs those lines crossed between the L3s at every
 * step. Qwen3-0.6B decode, Zen 5, two CCDs, tg with slots / without, clean
 * builds alternating (medians of 15-16 pairs): Q4_0 1.012, Q4_K_M 1.016,
 * Q8_0 1.008. The plan asks for nth aligned slots' worth
 * (het_mm_plan_wsize), so a slot of any larger wdata holds one too. */
static uint8_t *het_mm_private(const struct het_compute_params *cp)
{
    return (uint8_t *)cp->wdata + (size_t)cp->ith * (cp->wsize / (size_t)cp->nth / 64 * 64);
}

static uint8_t *het_mm_thread_scratch(const struct het_mm_plan *p, const struct het_compute_params *cp)
{
    if (p->act_private) return het_mm_private(cp) + p->act_bytes;
    return (uint8_t *)cp->wdata + p->act_bytes + (size_t)cp->ith * p->thread_bytes;
}

/* This thread's prepared b rows (the shared copy unless act_private). */
static uint8_t *het_mm_act_base(const struct het_mm_plan *p, const struct het_compute_params *cp)
{
    return p->act_private ? het_mm_private(cp) : (uint8_t *)cp->wdata;
}

/* Quantise (or gather) rows [lo, hi) of b into this thread's act rows;
 * store: a residual norm's outputs stored as its rows are made. */
static void het_mm_prepare_rows(const struct het_mm_plan *p, const struct het_compute_params *cp, int64_t lo,
                                int64_t hi, bool store)
{
    float *tmp = (float *)het_mm_thread_scratch(p, cp);
    for (int64_t r = lo; r < hi; r++) {
        const int64_t m = r % p->M, i2 = (r / p->M) % p->B2, i3 = r / (p->M * p->B2);
        const float *x = het_mm_b_row(p, m, i2, i3);
        uint8_t *out = het_mm_act_base(p, cp) + (size_t)r * p->act_row_bytes;
        if (p->b_gather) { /* contiguous F32: gathered, or the SWIGLU's row made */
            float *row = p->quantized ? tmp : (float *)out;
            if (p->sw)      het_cpu_swiglu_row(cp->isa, p->sw, m, i2, i3, row, sizeof(float));
            else if (p->rn) het_cpu_residual_norm_row(cp->isa, p->rn, m, i2, i3, row, store);
            else            het_mm_gather_f32(x, p->b->nb[0], p->K, row);
            if (!p->quantized) continue;
            x = tmp;
        }
        p->quantize_fn(x, &p->ql, out);
    }
}

static void het_mm_wide_pack(const struct het_mm_plan *p, const struct het_compute_params *cp, uint8_t *ps,
                             int64_t bi, int64_t kb0, int64_t kb1, int64_t m0, int64_t m1);

/* Where batch bi's rows m0.. (m0 a multiple of HET_XPACK_ROWS) of the K
 * chunk from block kb0 (kb1 - kb0 blocks) lie packed (p->prepack): per
 * batch, per K chunk, per group of rows, the chunk's blocks. */
static uint8_t *het_mm_packed_at(const struct het_mm_plan *p, const struct het_compute_params *cp, int64_t bi,
                                 int64_t kb0, int64_t kb1, int64_t m0)
{
    const int64_t ng = het_mm_groups16(p->M);
    const int64_t blocks = bi * p->pl.nb * ng + kb0 * ng + (m0 / HET_XPACK_ROWS) * (kb1 - kb0);
    return het_mm_act_base(p, cp) + p->off_pack + (size_t)blocks * HET_XPACK_BLK;
}

/* Phase 1: quantise (or gather) every row of b into wdata, the threads
 * sharing the rows (not for act_private: see het_mm_own_acts); a residual
 * norm's outputs (p->rn) stored by the thread that makes the row. With
 * p->prepack the parts are groups of HET_XPACK_ROWS rows, which the thread
 * that quantised them packs for the wide kernel at once: once for the node,
 * where each thread's wide parts packed every row again for each group of
 * weight panels (on the Xeon VM 5% of a Q4_K_M pp512's samples). */
static void het_mm_prepare(const struct het_mm_plan *p, const struct het_compute_params *cp)
{
    const int64_t rows = p->M * p->B2 * p->B3;
    const int64_t min_rows = (int64_t)(HET_MM_PART_BYTES / ((size_t)p->K * sizeof(float))) + 1;
    if (p->prepack) {
        const int64_t ng = het_mm_groups16(p->M), units = p->B2 * p->B3 * ng;
        const int64_t np = het_cpu_n_parts(cp, units, het_mm_groups16(min_rows));
        for (int64_t k = het_cpu_part_first(cp, np); k < np; k = het_cpu_part_next(cp, np, k)) {
            int64_t lo, hi;
            het_mm_range(units, k, np, &lo, &hi);
            for (int64_t u = lo; u < hi; u++) {
                const int64_t bi = u / ng, m0 = (u % ng) * HET_XPACK_ROWS;
                const int64_t m1 = m0 + HET_XPACK_ROWS < p->M ? m0 + HET_XPACK_ROWS : p->M;
                het_mm_prepare_rows(p, cp, bi * p->M + m0, bi * p->M + m1, p->rn != NULL);
                for (int64_t kb0 = 0; kb0 < p->pl.nb; kb0 += p->x_kcb) {
                    const int64_t kb1 = kb0 + p->x_kcb < p->pl.nb ? kb0 + p->x_kcb : p->pl.nb;
                    het_mm_wide_pack(p, cp, het_mm_packed_at(p, cp, bi, kb0, kb1, m0), bi, kb0, kb1, m0, m1);
                }
            }
        }
        return;
    }
    const int64_t np = het_cpu_n_parts(cp, rows, min_rows);
    for (int64_t k = het_cpu_part_first(cp, np); k < np; k = het_cpu_part_next(cp, np, k)) {
        int64_t lo, hi;
        het_mm_range(rows, k, np, &lo, &hi);
        het_mm_prepare_rows(p, cp, lo, hi, p->rn != NULL);
    }
}

/* With a residual norm (p->rn): the nodes' outputs stored once, by the
 * thread that runs the step's part 0 (inside it, so before the step ends),
 * when that is not the first part it runs (it took part 0 from another
 * thread's run): its activations are made already. */
static void het_mm_rn_store(const struct het_mm_plan *p, const struct het_compute_params *cp)
{
    float *row = (float *)het_mm_thread_scratch(p, cp);
    for (int64_t r = 0; r < p->M * p->B2 * p->B3; r++)
        het_cpu_residual_norm_row(cp->isa, p->rn, r % p->M, (r / p->M) % p->B2, r / (p->M * p->B2), row, true);
}

/* act_private: at the start of the first part this thread runs (inside a
 * part, so b is still there: the step cannot have ended), it quantises all
 * of b's rows into its own copy; *ready then says it has. Part k == 0 also
 * stores a residual norm's outputs, as it makes the rows if it makes them. */
static void het_mm_own_acts(const struct het_mm_plan *p, const struct het_compute_params *cp, bool *ready, int64_t k)
{
    const bool store = p->rn && k == 0;
    if (p->act_private && !*ready) {
        het_mm_prepare_rows(p, cp, 0, p->M * p->B2 * p->B3, store);
        *ready = true;
    } else if (store) {
        het_mm_rn_store(p, cp);
    }
}

static const uint8_t *het_mm_act(const struct het_mm_plan *p, const struct het_compute_params *cp, int64_t m,
                                 int64_t i2, int64_t i3)
{
    if (p->act_rows) return p->act_rows[m]; /* one batch (het_cpu_mul_mat_rows) */
    const int64_t r = m + p->M * (i2 + p->B2 * i3);
    return het_mm_act_base(p, cp) + (size_t)r * p->act_row_bytes;
}

static int64_t het_mm_chunk_rows(size_t row_bytes)
{
    int64_t mc = row_bytes ? (int64_t)(HET_MM_CHUNK_BYTES / row_bytes) : 64;
    mc &= ~(int64_t)3;
    return mc < 4 ? 4 : mc;
}

/* ---- quantised GEMV -------------------------------------------------------- */

/* Weight rows [lo, hi) (over all batches) against all of M. */
static void het_mm_gemv_part(const struct het_mm_plan *p, const struct het_compute_params *cp, int64_t lo,
                             int64_t hi)
{
    const int64_t mc = het_mm_chunk_rows(p->act_row_bytes);
    for (int64_t m0 = 0; m0 < p->M; m0 += mc) {
        const int64_t m1 = m0 + mc < p->M ? m0 + mc : p->M;
        for (int64_t t = lo; t < hi; t++) {
            const int64_t n = t % p->N, bi = t / p->N, i2 = bi % p->B2, i3 = bi / p->B2;
            const void *w = het_mm_a_row(p, n, i2, i3);
            for (int64_t m = m0; m < m1; m += 4) {
                const int nc = m1 - m < 4 ? (int)(m1 - m) : 4;
                const uint8_t *act[4];
                float out[4];
                for (int c = 0; c < nc; c++) act[c] = het_mm_act(p, cp, m + c, i2, i3);
                p->gemv_fn(p->K, w, act, nc, out);
                for (int c = 0; c < nc; c++) het_mm_store(p, n, m + c, i2, i3, out[c]);
            }
        }
    }
}

/* Parts of the GEMV's rows. */
static int64_t het_mm_gemv_parts(const struct het_mm_plan *p, const struct het_compute_params *cp)
{
    return het_mm_parts(cp, p->B2 * p->B3 * p->N, p->a->nb[1], p->M);
}

static void het_mm_gemv(const struct het_mm_plan *p, const struct het_compute_params *cp)
{
    const int64_t rows = p->B2 * p->B3 * p->N;
    const int64_t np = het_mm_gemv_parts(p, cp);
    bool ready = false;
    for (int64_t k = het_cpu_part_first(cp, np); k < np; k = het_cpu_part_next(cp, np, k)) {
        int64_t lo, hi;
        het_mm_range(rows, k, np, &lo, &hi);
        het_mm_own_acts(p, cp, &ready, k);
        het_mm_gemv_part(p, cp, lo, hi);
    }
}

/* ---- quantised panels ------------------------------------------------------ */

static void het_mm_panel_run(const struct het_mm_plan *p, const struct het_compute_params *cp, const uint8_t *panel,
                             int64_t item, int64_t m0, int64_t m1)
{
    const int R = p->pl.R;
    const int64_t np = (p->N + R - 1) / R;
    const int64_t bi = item / np, n0 = (item % np) * R;
    const int64_t i2 = bi % p->B2, i3 = bi / p->B2;
    const int nr = p->N - n0 < R ? (int)(p->N - n0) : R;
    float out[4 * HET_MM_PANEL_ROWS_MAX];
    for (int64_t m = m0; m < m1; m += 4) {
        const int nc = m1 - m < 4 ? (int)(m1 - m) : 4;
        const uint8_t *act[4];
        for (int c = 0; c < nc; c++) act[c] = het_mm_act(p, cp, m + c, i2, i3);
        p->panel_fn(&p->pl, panel, act, nc, out);
        const struct het_tensor *d = p->dst;
        for (int c = 0; c < nc; c++) {
            char *o = (char *)d->data + n0 * d->nb[0] + (m + c) * d->nb[1] + i2 * d->nb[2] + i3 * d->nb[3];
            if (d->nb[0] == sizeof(float)) {
                memcpy(o, &out[c * R], (size_t)nr * sizeof(float));
            } else {
                for (int r = 0; r < nr; r++) memcpy(o + r * d->nb[0], &out[c * R + r], sizeof(float));
            }
        }
    }
}

/* Prepacked panels [lo, hi) against all of M (<= 4 rows: decode) with the
 * level's run kernel, straight into dst rows; false when that does not
 * apply (the caller then goes panel by panel). */
static bool het_mm_panel_runs(const struct het_mm_plan *p, const struct het_compute_params *cp, int64_t lo,
                              int64_t hi)
{
    const struct het_tensor *d = p->dst;
    if (!p->prepacked || !p->panels_fn || p->M > 4 || d->nb[0] != sizeof(float) || d->nb[1] % sizeof(float))
        return false;
    const int R = p->pl.R;
    const int64_t np = (p->N + R - 1) / R;
    const size_t pstride = het_mm_align(p->pl.bytes);
    for (int64_t it = lo; it < hi;) {
        const int64_t bi = it / np, i2 = bi % p->B2, i3 = bi / p->B2;
        /* a run: panels of one batch, all full */
        int64_t end = (bi + 1) * np < hi ? (bi + 1) * np : hi;
        if ((end - bi * np) * R > p->N) end--;
        if (p->seg_panels && end > (it / p->seg_panels + 1) * p->seg_panels) end = (it / p->seg_panels + 1) * p->seg_panels;
        const uint8_t *act[4];
        for (int c = 0; c < p->M; c++) act[c] = het_mm_act(p, cp, c, i2, i3);
        if (end > it) {
            const int64_t ab = (i3 / p->r3) * p->a->ne[2] + i2 / p->r2;
            float *out = (float *)((char *)d->data + (it % np) * R * d->nb[0] + i2 * d->nb[2] + i3 * d->nb[3]);
            p->panels_fn(&p->pl, het_mm_panel_at(p, ab * np + it % np), pstride, end - it, act,
                         (int)p->M, out, d->nb[1] / sizeof(float), cp->stream);
            it = end;
        }
        if (it < hi && (it % np + 1) * R > p->N) { /* the batch's last, partial panel */
            const int64_t ab = (i3 / p->r3) * p->a->ne[2] + i2 / p->r2;
            het_mm_panel_run(p, cp, het_mm_panel_at(p, ab * np + it % np), it, 0, p->M);
            it++;
        }
    }
    return true;
}

/* Panels [lo, hi) against b rows [mlo, mhi). */
static void het_mm_panels_part(const struct het_mm_plan *p, const struct het_compute_params *cp, int64_t lo,
                               int64_t hi, int64_t mlo, int64_t mhi, bool split_m)
{
    const int R = p->pl.R;
    const int64_t np = (p->N + R - 1) / R;
    if (!split_m && het_mm_panel_runs(p, cp, lo, hi)) return;
    uint8_t *scratch = het_mm_thread_scratch(p, cp);
    const size_t pstride = het_mm_align(p->pl.bytes);
    const int64_t mc = het_mm_chunk_rows(p->act_row_bytes);
    const int64_t group = p->prepacked ? hi - lo : p->panel_group;
    for (int64_t g0 = lo; g0 < hi; g0 += group) {
        const int64_t g1 = g0 + group < hi ? g0 + group : hi;
        for (int64_t it = g0; it < g1 && !p->prepacked; it++) {
            const int64_t bi = it / np, n0 = (it % np) * R;
            const int nr = p->N - n0 < R ? (int)(p->N - n0) : R;
            het_panel_pack(p->a->type, &p->pl, het_mm_a_row(p, n0, bi % p->B2, bi / p->B2), p->a->nb[1], nr,
                           scratch + (size_t)(it - g0) * pstride);
        }
        for (int64_t m0 = mlo; m0 < mhi; m0 += mc) {
            const int64_t m1 = m0 + mc < mhi ? m0 + mc : mhi;
            for (int64_t it = g0; it < g1; it++) {
                const uint8_t *panel = scratch + (size_t)(it - g0) * pstride;
                if (p->prepacked) {
                    /* panels of a's batch (i2/r2, i3/r3) */
                    const int64_t bi = it / np, i2 = bi % p->B2, i3 = bi / p->B2;
                    const int64_t ab = (i3 / p->r3) * p->a->ne[2] + i2 / p->r2;
                    panel = het_mm_panel_at(p, ab * np + it % np);
                }
                het_mm_panel_run(p, cp, panel, it, m0, m1);
            }
        }
    }
}

static int64_t het_mm_panel_items(const struct het_mm_plan *p)
{
    return p->B2 * p->B3 * ((p->N + p->pl.R - 1) / p->pl.R);
}

/* Parts of the panels, or of M (4 rows at a time) when there are too few
 * panels to go round (*split_m). */
static int64_t het_mm_panel_parts(const struct het_mm_plan *p, const struct het_compute_params *cp, bool *split_m)
{
    const int64_t items = het_mm_panel_items(p);
    *split_m = items < 4 * (int64_t)cp->nth;
    const size_t pbytes = het_mm_align(p->pl.bytes);
    return *split_m ? het_mm_parts(cp, (p->M + 3) / 4, pbytes * (size_t)items, 4)
                    : het_mm_parts(cp, items, pbytes, p->M);
}

static void het_mm_panels(const struct het_mm_plan *p, const struct het_compute_params *cp)
{
    const int64_t items = het_mm_panel_items(p);
    bool split_m;
    const int64_t n_parts = het_mm_panel_parts(p, cp, &split_m);
    const int64_t units = split_m ? (p->M + 3) / 4 : items;
    bool ready = false;
    for (int64_t k = het_cpu_part_first(cp, n_parts); k < n_parts; k = het_cpu_part_next(cp, n_parts, k)) {
        int64_t lo = 0, hi = items, mlo = 0, mhi = p->M;
        if (split_m) {
            het_mm_range(units, k, n_parts, &mlo, &mhi);
            mlo *= 4;
            mhi = mhi * 4 < p->M ? mhi * 4 : p->M;
        } else {
            het_mm_range(items, k, n_parts, &lo, &hi);
        }
        het_mm_own_acts(p, cp, &ready, k);
        het_mm_panels_part(p, cp, lo, hi, mlo, mhi, split_m);
    }
}

/* ---- quantised wide panels (batches) --------------------------------------------- */

/* Compact panel ip of dst batch bi: prepacked, or packed into buf now. */
static const uint8_t *het_mm_compact_panel(const struct het_mm_plan *p, int64_t bi, int64_t ip, uint8_t *buf)
{
    const int R = p->pl.R;
    const int64_t np = (p->N + R - 1) / R;
    if (ip >= np) return NULL;
    const int64_t i2 = bi % p->B2, i3 = bi / p->B2;
    if (p->prepacked) {
        const int64_t ab = (i3 / p->r3) * p->a->ne[2] + i2 / p->r2;
        return het_mm_panel_at(p, ab * np + ip);
    }
    const int64_t n0 = ip * R;
    const int nr = p->N - n0 < R ? (int)(p->N - n0) : R;
    het_panel_pack(p->a->type, &p->pl, het_mm_a_row(p, n0, i2, i3), p->a->nb[1], nr, buf);
    return buf;
}

/* dst rows n0.. (nr of them) of b row m: = or += out[0..nr) */
static void het_mm_put(const struct het_mm_plan *p, int64_t n0, int nr, int64_t m, int64_t i2, int64_t i3,
                       const float *out, bool add)
{
    const struct het_tensor *d = p->dst;
    char *o = (char *)d->data + n0 * d->nb[0] + m * d->nb[1] + i2 * d->nb[2] + i3 * d->nb[3];
    if (d->nb[0] == sizeof(float)) {
        float *f = (float *)(void *)o;
        if (add) for (int r = 0; r < nr; r++) f[r] += out[r];
        else memcpy(f, out, (size_t)nr * sizeof(float));
        return;
    }
    for (int r = 0; r < nr; r++) {
        float v = out[r];
        if (add) {
            float old;
            memcpy(&old, o + r * d->nb[0], sizeof old);
            v += old;
        }
        memcpy(o + r * d->nb[0], &v, sizeof v);
    }
}

/* Rows [m0, m1) of batch bi, K blocks [kb0, kb1), packed for the wide
 * kernel into ps: groups of HET_XPACK_ROWS rows, each nbk blocks. */
static void het_mm_wide_pack(const struct het_mm_plan *p, const struct het_compute_params *cp, uint8_t *ps,
                             int64_t bi, int64_t kb0, int64_t kb1, int64_t m0, int64_t m1)
{
    const int64_t i2 = bi % p->B2, i3 = bi / p->B2;
    const size_t koff = (size_t)kb0 * p->ql.bs, gbytes = (size_t)(kb1 - kb0) * HET_XPACK_BLK;
    for (int64_t m = m0; m < m1; m += HET_XPACK_ROWS, ps += gbytes) {
        const int nc = m1 - m < HET_XPACK_ROWS ? (int)(m1 - m) : HET_XPACK_ROWS;
        const uint8_t *act[HET_XPACK_ROWS];
        for (int c = 0; c < nc; c++) act[c] = het_mm_act(p, cp, m + c, i2, i3) + koff;
        p->xpack_fn(act, nc, kb1 - kb0, p->ql.bs, ps);
    }
}

/* One wide item (rows n0.. of batch bi, K blocks [kb0, kb1)) against b rows
 * [m0, m1); ps: those rows packed (xpack), or NULL. */
static void het_mm_wide_run(const struct het_mm_plan *p, const struct het_compute_params *cp, const uint8_t *xp,
                            int64_t bi, int64_t n0, int64_t kb0, int64_t kb1, int64_t m0, int64_t m1,
                            const uint8_t *ps)
{
    const int64_t i2 = bi % p->B2, i3 = bi / p->B2;
    const int rows = 2 * p->pl.R;
    const int nr = p->N - n0 < rows ? (int)(p->N - n0) : rows;
    const size_t koff = (size_t)kb0 * p->ql.bs, gbytes = (size_t)(kb1 - kb0) * HET_XPACK_BLK;
    const struct het_tensor *d = p->dst;
    /* full panels of a dense dst are written in place */
    const bool direct = nr == rows && d->nb[0] == sizeof(float) && d->nb[1] % sizeof(float) == 0;
    float out[HET_MM_XCOLS_MAX * 2 * HET_MM_PANEL_ROWS_MAX];
    for (int64_t m = m0; m < m1; m += p->xcols) {
        const int nc = m1 - m < p->xcols ? (int)(m1 - m) : p->xcols;
        const uint8_t *act[HET_MM_XCOLS_MAX];
        if (ps) act[0] = ps + (size_t)((m - m0) / HET_XPACK_ROWS) * gbytes;
        else for (int c = 0; c < nc; c++) act[c] = het_mm_act(p, cp, m + c, i2, i3) + koff;
        if (direct) {
            float *o = (float *)((char *)d->data + n0 * d->nb[0] + m * d->nb[1] + i2 * d->nb[2] + i3 * d->nb[3]);
            p->xpanel_fn(p->pl.R, kb1 - kb0, xp, act, nc, o, d->nb[1] / sizeof(float), kb0 > 0);
            continue;
        }
        p->xpanel_fn(p->pl.R, kb1 - kb0, xp, act, nc, out, (size_t)rows, false);
        for (int c = 0; c < nc; c++) het_mm_put(p, n0, nr, m + c, i2, i3, out + c * rows, kb0 > 0);
    }
}

/* Wide items [lo, hi) against b rows [mlo, mhi). */
static void het_mm_wide_part(const struct het_mm_plan *p, const struct het_compute_params *cp, int64_t lo,
                             int64_t hi, int64_t mlo, int64_t mhi)
{
    const int R = p->pl.R;
    const int64_t np = (p->N + R - 1) / R, nx = (np + 1) / 2;
    uint8_t *xs = het_mm_thread_scratch(p, cp);
    uint8_t *cs = xs + p->x_bytes * (size_t)p->x_group;   /* compact panels when not prepacked */
    const size_t cstride = het_mm_align(p->pl.bytes);
    uint8_t *ps = p->xpack_fn ? cs + (p->prepacked ? 0 : 2 * cstride * (size_t)p->x_group) : NULL;
    const int64_t mc = het_mm_wide_mc(p);
    for (int64_t g0 = lo; g0 < hi; g0 += p->x_group) {
        const int64_t g1 = g0 + p->x_group < hi ? g0 + p->x_group : hi;
        const uint8_t *src[2 * HET_MM_WIDE_GROUP_MAX];
        for (int64_t it = g0; it < g1; it++) {
            const int64_t bi = it / nx, ip = 2 * (it % nx);
            uint8_t *buf = cs + (size_t)(2 * (it - g0)) * cstride;
            src[2 * (it - g0)] = het_mm_compact_panel(p, bi, ip, buf);
            src[2 * (it - g0) + 1] = het_mm_compact_panel(p, bi, ip + 1, buf + cstride);
        }
        for (int64_t kb0 = 0; kb0 < p->pl.nb; kb0 += p->x_kcb) {
            const int64_t kb1 = kb0 + p->x_kcb < p->pl.nb ? kb0 + p->x_kcb : p->pl.nb;
            for (int64_t it = g0; it < g1; it++)
                p->xexpand_fn(&p->pl, src[2 * (it - g0)], src[2 * (it - g0) + 1], kb0, kb1,
                              xs + (size_t)(it - g0) * p->x_bytes);
            for (int64_t m0 = mlo; m0 < mhi; m0 += mc) {
                const int64_t m1 = m0 + mc < mhi ? m0 + mc : mhi;
                int64_t packed = -1; /* the batch whose rows ps holds */
                for (int64_t it = g0; it < g1; it++) {
                    const uint8_t *rows = ps;
                    if (p->prepack) {
                        rows = het_mm_packed_at(p, cp, it / nx, kb0, kb1, m0);
                    } else if (ps && packed != it / nx) {
                        packed = it / nx;
                        het_mm_wide_pack(p, cp, ps, packed, kb0, kb1, m0, m1);
                    }
                    het_mm_wide_run(p, cp, xs + (size_t)(it - g0) * p->x_bytes, it / nx, (it % nx) * 2 * R, kb0,
                                    kb1, m0, m1, rows);
                }
            }
        }
    }
}

static int64_t het_mm_wide_items(const struct het_mm_plan *p)
{
    return p->B2 * p->B3 * (((p->N + p->pl.R - 1) / p->pl.R + 1) / 2);
}

/* Parts of whole groups of wide items (the plan's group fits L2), or of M
 * (xcols rows at a time) when there are too few items to go round. */
static bool het_mm_wide_split_m(const struct het_mm_plan *p, const struct het_compute_params *cp)
{
    return het_mm_wide_items(p) < 4 * (int64_t)cp->nth;
}

static int64_t het_mm_wide_parts(const struct het_mm_plan *p, const struct het_compute_params *cp)
{
    const bool split_m = het_mm_wide_split_m(p, cp);
    const int64_t units = split_m ? (p->M + p->xcols - 1) / p->xcols : het_mm_wide_items(p);
    return het_cpu_n_parts(cp, units, split_m ? 1 : p->x_group);
}

/* Part k of n_parts (het_mm_wide_parts). */
static void het_mm_wide_do(const struct het_mm_plan *p, const struct het_compute_params *cp, int64_t k,
                           int64_t n_parts)
{
    const int64_t items = het_mm_wide_items(p), q = p->xcols;
    int64_t lo = 0, hi = items, mlo = 0, mhi = p->M;
    if (het_mm_wide_split_m(p, cp)) {
        het_mm_range((p->M + q - 1) / q, k, n_parts, &mlo, &mhi);
        mlo *= q;
        mhi = mhi * q < p->M ? mhi * q : p->M;
    } else {
        het_mm_range(items, k, n_parts, &lo, &hi);
    }
    het_mm_wide_part(p, cp, lo, hi, mlo, mhi);
}

static void het_mm_wide(const struct het_mm_plan *p, const struct het_compute_params *cp)
{
    const int64_t n_parts = het_mm_wide_parts(p, cp);
    for (int64_t k = het_cpu_part_first(cp, n_parts); k < n_parts; k = het_cpu_part_next(cp, n_parts, k))
        het_mm_wide_do(p, cp, k, n_parts);
}

/* ---- float weights ----------------------------------------------------------- */

static const float *het_mm_fact(const struct het_mm_plan *p, const struct het_compute_params *cp, int64_t m,
                                int64_t i2, int64_t i3)
{
    if (!p->b_gather) return het_mm_b_row(p, m, i2, i3);
    const int64_t r = m + p->M * (i2 + p->B2 * i3);
    return (const float *)((const uint8_t *)cp->wdata + (size_t)r * p->act_row_bytes);
}

/* Weight row n as the kernel reads it: in place, or converted to F32. */
static const void *het_mm_fweight(const struct het_mm_plan *p, int64_t n, int64_t i2, int64_t i3, float *buf)
{
    const void *w = het_mm_a_row(p, n, i2, i3);
    if (!p->a_gather) return w;
    if (p->a_dequant) { /* whole blocks, contiguous (het_mm_shapes_ok) */
        if (p->dequant_fn) p->dequant_fn(w, buf, p->K);
        else het_dequantize_row(p->a->type, w, buf, p->K);
        return buf;
    }
    const char *s = w;
    for (int64_t k = 0; k < p->K; k++) {
        const char *e = s + (size_t)k * p->a->nb[0];
        uint16_t h;
        switch (p->a->type) {
        case HET_TYPE_F16:  memcpy(&h, e, 2); buf[k] = het_fp16_to_fp32(h); break;
        case HET_TYPE_BF16: memcpy(&h, e, 2); buf[k] = het_bf16_to_fp32(h); break;
        default:            memcpy(&buf[k], e, 4); break;
        }
    }
    return buf;
}

/* Weight rows [lo, hi) (over all batches) against all of M. */
static void het_mm_float_part(const struct het_mm_plan *p, const struct het_compute_params *cp, float *gbuf,
                              int64_t lo, int64_t hi)
{
    const size_t row_bytes = (size_t)p->K * sizeof(float);
    const int64_t mc = het_mm_chunk_rows(row_bytes);
    for (int64_t m0 = 0; m0 < p->M; m0 += mc) {
        const int64_t m1 = m0 + mc < p->M ? m0 + mc : p->M;
        for (int64_t t = lo; t < hi;) {
            const int64_t n = t % p->N, bi = t / p->N, i2 = bi % p->B2, i3 = bi / p->B2;
            /* two rows when the next one is in the same batch and range */
            const int nr = (t + 1 < hi && n + 1 < p->N) ? 2 : 1;
            const void *w[2];
            w[0] = het_mm_fweight(p, n, i2, i3, gbuf);
            w[1] = nr == 2 ? het_mm_fweight(p, n + 1, i2, i3, gbuf + het_mm_align(row_bytes) / sizeof(float)) : w[0];
            for (int64_t m = m0; m < m1; m += 4) {
                const int nc = m1 - m < 4 ? (int)(m1 - m) : 4;
                const float *x[4];
                float out[8];
                for (int c = 0; c < nc; c++) x[c] = het_mm_fact(p, cp, m + c, i2, i3);
                p->fdot_fn(p->K, w, nr, x, nc, out);
                for (int r = 0; r < nr; r++)
                    for (int c = 0; c < nc; c++) het_mm_store(p, n + r, m + c, i2, i3, out[r * 4 + c]);
            }
            t += nr;
        }
    }
}

static void het_mm_float(const struct het_mm_plan *p, const struct het_compute_params *cp)
{
    const int64_t nbatch = p->B2 * p->B3;
    float *gbuf = (float *)het_mm_thread_scratch(p, cp);
    const int64_t rows = nbatch * p->N;
    const int64_t np = het_mm_parts(cp, rows, (size_t)p->K * het_mm_elem_size(p->a->type), p->M);
    for (int64_t k = het_cpu_part_first(cp, np); k < np; k = het_cpu_part_next(cp, np, k)) {
        int64_t lo, hi;
        het_mm_range(rows, k, np, &lo, &hi);
        het_mm_float_part(p, cp, gbuf, lo, hi);
    }
}


/* ---- entry points ----------------------------------------------------------------- */

/* Plan dst for this call; false when its scratch does not fit. */
/* Does the plan's scratch fit the caller's? */
static bool het_mm_plan_fits(const struct het_mm_plan *p, const struct het_compute_params *cp)
{
    const size_t ws = het_mm_plan_wsize(p, cp->nth);
    return ws <= cp->wsize && (!ws || cp->wdata);
}

static bool het_mm_plan_call(struct het_mm_plan *p, const struct het_compute_params *cp, struct het_tensor *dst,
                             const struct het_tensor *sw, const struct het_cpu_residual_norm *rn)
{
    het_mm_plan_init(p, dst, cp->isa, cp->nth, cp->f32_act, sw, rn);
    return het_mm_plan_fits(p, cp);
}

static void het_mm_run(const struct het_mm_plan *p, const struct het_compute_params *cp)
{
    /* a step of its own, over before the products start (decode-sized b:
     * none, each thread quantises b in its first part) */
    if (p->act_bytes && !p->act_private) het_mm_prepare(p, cp);
    if (!p->quantized) {
        het_mm_float(p, cp);
    } else if (p->use_wide) {
        het_mm_wide(p, cp);
    } else if (p->use_panel) {
        het_mm_panels(p, cp);
    } else {
        het_mm_gemv(p, cp);
    }
}

enum het_status het_cpu_mul_mat(const struct het_compute_params *cp, struct het_tensor *dst)
{
    /* Every thread takes the same decisions, so barriers match up. */
    if (!het_cpu_mul_mat_supports(dst)) return HET_ERR_UNSUPPORTED;
    struct het_mm_plan p;
    if (!het_mm_plan_call(&p, cp, dst, NULL, NULL)) return HET_ERR_INVALID;
    het_mm_run(&p, cp);
    return HET_OK;
}

bool het_cpu_mul_mat_row_format(struct het_tensor *dst, enum het_cpu_isa isa, bool f32_act,
                                struct het_q8r_layout *ql, void (**quantize)(const float *x,
                                                                            const struct het_q8r_layout *l, void *row))
{
    if (!het_cpu_mul_mat_supports(dst)) return false;
    struct het_mm_plan p;
    het_mm_plan_init(&p, dst, isa, 1, f32_act, NULL, NULL);
    if (!p.quantized || !p.quantize_fn) return false;
    *ql = p.ql;
    *quantize = p.quantize_fn;
    return true;
}

enum het_status het_cpu_mul_mat_rows(const struct het_compute_params *cp, struct het_tensor *dst,
                                     const uint8_t *const *rows)
{
    if (!het_cpu_mul_mat_supports(dst)) return HET_ERR_UNSUPPORTED;
    struct het_mm_plan p;
    het_mm_plan_init(&p, dst, cp->isa, cp->nth, cp->f32_act, NULL, NULL);
    if (!p.quantized || p.B2 * p.B3 != 1) return HET_ERR_UNSUPPORTED;
    /* nothing to prepare: no rows in wdata, none per thread */
    p.act_rows = rows;
    p.act_bytes = 0;
    p.act_private = false;
    p.prepack = false; /* each pass packs the caller's rows */
    if (!het_mm_plan_fits(&p, cp)) return HET_ERR_INVALID;
    het_mm_run(&p, cp);
    return HET_OK;
}

bool het_cpu_mul_mat_takes_swiglu(const struct het_tensor *sw, const struct het_tensor *mm)
{
    if (!sw || !mm || sw->op != HET_OP_SWIGLU || !(sw->flags & HET_TENSOR_FLAG_ONE_READER) || mm->src[1] != sw ||
        !het_cpu_mul_mat_supports(mm))
        return false;
    const struct het_tensor *g = sw->src[0], *u = sw->src[1];
    if (!g || !u || g->type != HET_TYPE_F32 || u->type != HET_TYPE_F32 || sw->type != HET_TYPE_F32) return false;
    if (!het_same_shape(g, sw) || !het_same_shape(u, sw) || !g->data || !u->data || !mm->data) return false;
    /* a thread may write its rows of mm while another still reads g and u */
    return !het_vec_overlap(mm, g) && !het_vec_overlap(mm, u);
}

/* ---- matmuls that share their activations (decode), as one step ----------------- */

/* Can this plan's parts run in a shared step: quantised, b one row that each
 * thread quantises itself, and rows or panels (not M) cut into parts. */
static bool het_mm_groupable(const struct het_mm_plan *p, const struct het_compute_params *cp)
{
    if (!p->quantized) return false;
    /* a prefill's members share b's rows, quantised (and packed) once */
    if (p->use_wide) return !p->act_private && !het_mm_wide_split_m(p, cp);
    if (!p->act_private) return false;
    bool split_m = false;
    if (p->use_panel) het_mm_panel_parts(p, cp, &split_m);
    return !split_m;
}

/* May plan q join the group g[0..n): same b, the same activation rows (so
 * one quantised copy serves all), and no member's output in the way of
 * another's inputs or output. */
static bool het_mm_joins(const struct het_mm_plan *g, int n, const struct het_mm_plan *q)
{
    if (q->b != g[0].b || q->K != g[0].K || q->ql.with_abs != g[0].ql.with_abs || q->act_bytes != g[0].act_bytes)
        return false;
    /* wide members read the rows as the first one's prepare step leaves them */
    if (q->use_wide != g[0].use_wide)
        return false;
    if (q->use_wide && (q->ql.group != g[0].ql.group || q->prepack != g[0].prepack || q->xpack_fn != g[0].xpack_fn ||
                        q->x_kcb != g[0].x_kcb))
        return false;
    if (het_vec_overlap(q->dst, q->b) || het_vec_overlap(q->dst, q->a)) return false;
    for (int i = 0; i < n; i++)
        if (het_vec_overlap(q->dst, g[i].dst) || het_vec_overlap(q->dst, g[i].a) || het_vec_overlap(g[i].dst, q->a) ||
            het_vec_overlap(g[i].dst, q->b))
            return false;
    return true;
}

/* The units a member's parts cut (panels, or weight rows) and their bytes. */
static int64_t het_mm_units(const struct het_mm_plan *p, size_t *unit_bytes)
{
    if (p->use_panel) {
        *unit_bytes = het_mm_align(p->pl.bytes);
        return het_mm_panel_items(p);
    }
    *unit_bytes = p->a->nb[1];
    return p->B2 * p->B3 * p->N;
}

/* Parts of equal bytes across the members of a group, so that the runs the
 * step's parts form (one per thread, cpu_sync.c) are equal too. Each
 * member's own count cuts it for itself: q, k and v of a layer, 8 parts
 * each, made parts of 147 KB (q) and 74 KB (k, v) in a Qwen3-0.6B decode,
 * and the two threads' runs 1.47 and 0.88 MB: the second took parts of the
 * first's run, from another stream, for the last third of every step. The
 * member with the coarsest parts sets the size, the others are cut to it
 * (at least one part each); then parts go to the member whose parts are
 * largest until the total is a multiple of the threads (or none can take
 * one more). Returns the total; parts[] gets each member's count. */
static int64_t het_mm_group_parts(const struct het_mm_plan *g, int ng, const struct het_compute_params *cp,
                                  int64_t *parts)
{
    int64_t units[HET_CPU_MM_GROUP_MAX];
    double bytes[HET_CPU_MM_GROUP_MAX], part_bytes = 0.0;
    for (int i = 0; i < ng; i++) {
        size_t ub;
        units[i] = het_mm_units(&g[i], &ub);
        bytes[i] = (double)ub * (double)units[i];
        if (bytes[i] / (double)parts[i] > part_bytes) part_bytes = bytes[i] / (double)parts[i];
    }
    int64_t total = 0;
    for (int i = 0; i < ng; i++) {
        int64_t n = (int64_t)(bytes[i] / part_bytes + 0.5);
        parts[i] = n < 1 ? 1 : n > units[i] ? units[i] : n;
        total += parts[i];
    }
    while (cp->nth > 1 && total % cp->nth != 0 && total < HET_CPU_PARTS_MAX) {
        int best = -1;
        for (int i = 0; i < ng; i++)
            if (parts[i] < units[i] && (best < 0 || bytes[i] / (double)parts[i] > bytes[best] / (double)parts[best]))
                best = i;
        if (best < 0) break;
        parts[best]++;
        total++;
    }
    return total;
}

/* Cut every member into a multiple of the threads' parts, when each is in
 * segments (quant_dot.h) and has the panels for it, so that the step's runs
 * (one per thread, cpu_sync.c) are slice r of every member: thread r's run
 * is then one range of memory, the members' segments r side by side.
 * Returns whether it did; parts and *total updated. */
static bool het_mm_group_slices(const struct het_mm_plan *g, int ng, const struct het_compute_params *cp,
                                int64_t *parts, int64_t *total)
{
    if (cp->nth < 2) return false;
    int64_t want[HET_CPU_MM_GROUP_MAX], sum = 0;
    for (int i = 0; i < ng; i++) {
        size_t ub;
        const int64_t units = het_mm_units(&g[i], &ub);
        want[i] = (parts[i] + cp->nth - 1) / cp->nth * cp->nth;
        if (!g[i].seg_panels || want[i] > units) return false;
        sum += want[i];
    }
    if (sum > HET_CPU_PARTS_MAX) return false;
    for (int i = 0; i < ng; i++) parts[i] = want[i];
    *total = sum;
    return true;
}

/* ---- a step planned once and run from its plan ------------------------------------ */

/* What het_cpu_mm_step_group or _swiglu found: the members' plans and
 * parts, and the residual norm they read (the plans point at this copy,
 * so a step is run where it was planned). */
struct het_cpu_mm_step {
    struct het_mm_plan           g[HET_CPU_MM_GROUP_MAX];
    int64_t                      parts[HET_CPU_MM_GROUP_MAX];
    int64_t                      total;  /* the shared step's parts (ng > 1)              */
    int                          ng;     /* members; 0: nothing to run                    */
    int                          used;   /* nodes the step covers (a residual norm's 3 too) */
    bool                         slices; /* run r is slice r of every member              */
    size_t                       ws;     /* scratch the members need                      */
    struct het_cpu_residual_norm rn;
};
_Static_assert(sizeof(struct het_cpu_mm_step) <= HET_CPU_MM_STEP_BYTES, "HET_CPU_MM_STEP_BYTES too small");
_Static_assert(_Alignof(struct het_cpu_mm_step) <= 64, "a step's storage is 64-aligned");

static void het_mm_step_done(struct het_cpu_mm_step *s, const struct het_compute_params *cp, int ng, int lead)
{
    s->ng = ng;
    s->used = lead + ng;
    s->ws = 0;
    for (int i = 0; i < ng; i++) {
        const size_t ws = het_mm_plan_wsize(&s->g[i], cp->nth);
        if (ws > s->ws) s->ws = ws;
    }
}

int het_cpu_mm_step_group(const struct het_compute_params *cp, struct het_tensor *const *nodes, int n,
                          const struct het_cpu_residual_norm *rn, struct het_cpu_mm_step *s, enum het_status *st)
{
    *st = HET_OK;
    s->ng = s->used = 0;
    if (n < 1) return 0;
    if (!het_cpu_mul_mat_supports(nodes[0])) {
        *st = HET_ERR_UNSUPPORTED;
        return 1;
    }
    const struct het_cpu_residual_norm *r = NULL;
    if (rn) {
        s->rn = *rn;
        r = &s->rn;
    }
    struct het_mm_plan *g = s->g;
    if (!het_mm_plan_call(&g[0], cp, nodes[0], NULL, r)) {
        *st = HET_ERR_INVALID;
        return 1;
    }
    /* decode: each thread makes the rows itself (and the step's part 0
     * stores the outputs); a prefill's wide members: the step that
     * prepares b's rows stores each row's outputs as it makes them */
    if (r && !(g[0].quantized && (g[0].act_private || g[0].use_wide))) return 0;
    int ng = 1;
    if (het_mm_groupable(&g[0], cp)) {
        while (ng < n && ng < HET_CPU_MM_GROUP_MAX && het_cpu_mul_mat_supports(nodes[ng])) {
            if (r && !het_cpu_residual_norm_apart(r, nodes[ng])) break;
            if (!het_mm_plan_call(&g[ng], cp, nodes[ng], NULL, r) || !het_mm_groupable(&g[ng], cp) ||
                !het_mm_joins(g, ng, &g[ng]))
                break;
            ng++;
        }
    }
    /* rn's output unwritten: every matmul that reads it must be in the step */
    if (r && r->y_readers && ng < r->y_readers) return 0;
    /* one step: the members' parts one after the other (as many members as
     * the step's part count allows); each thread quantises b (the same for
     * all) once, in the first part it runs */
    int64_t *parts = s->parts, total = 0;
    for (int i = 0; i < ng; i++) {
        bool split_m;
        parts[i] = g[i].use_wide    ? het_mm_wide_parts(&g[i], cp)
                   : g[i].use_panel ? het_mm_panel_parts(&g[i], cp, &split_m)
                                    : het_mm_gemv_parts(&g[i], cp);
        if (i > 0 && total + parts[i] > HET_CPU_PARTS_MAX) ng = i;
        else total += parts[i];
    }
    if (ng > 1 && g[0].use_wide) {
        /* each member's parts as it cuts them alone; every member's
         * threads at the same scratch offsets (the largest member's) */
        size_t tb = 0;
        for (int i = 0; i < ng; i++) tb = g[i].thread_bytes > tb ? g[i].thread_bytes : tb;
        for (int i = 0; i < ng; i++) g[i].thread_bytes = tb;
    } else if (ng > 1) {
        total = het_mm_group_parts(g, ng, cp, parts);
    }
    s->slices = ng > 1 && !g[0].use_wide && het_mm_group_slices(g, ng, cp, parts, &total);
    s->total = total;
    het_mm_step_done(s, cp, ng, r ? 3 : 0);
    return ng;
}

int het_cpu_mm_step_swiglu(const struct het_compute_params *cp, struct het_tensor *mm, struct het_cpu_mm_step *s,
                           enum het_status *st)
{
    s->ng = s->used = 0;
    *st = HET_ERR_INVALID;
    if (!het_cpu_mul_mat_takes_swiglu(mm->src[1], mm)) return 2;
    if (!het_mm_plan_call(&s->g[0], cp, mm, mm->src[1], NULL)) return 2;
    *st = HET_OK;
    het_mm_step_done(s, cp, 1, 1);
    return 2;
}

int het_cpu_mm_step_run(const struct het_compute_params *cp, const struct het_cpu_mm_step *s, enum het_status *st)
{
    *st = HET_OK;
    if (s->ng < 1 || s->ws > cp->wsize || (s->ws && !cp->wdata)) {
        *st = HET_ERR_INVALID;
        return s->used > 0 ? s->used : 1;
    }
    const struct het_mm_plan *g = s->g;
    if (s->ng == 1) {
        het_mm_run(&g[0], cp);
        return s->used;
    }
    const int64_t *parts = s->parts, total = s->total;
    if (g[0].use_wide) {
        /* b's rows prepared once (a step), then every member's parts as one step */
        het_mm_prepare(&g[0], cp);
        for (int64_t k = het_cpu_part_first(cp, total); k < total; k = het_cpu_part_next(cp, total, k)) {
            int i = 0;
            int64_t local = k;
            while (local >= parts[i]) local -= parts[i++];
            het_mm_wide_do(&g[i], cp, local, parts[i]);
        }
        return s->used;
    }
    bool ready = false;
    for (int64_t k = het_cpu_part_first(cp, total); k < total; k = het_cpu_part_next(cp, total, k)) {
        int i = 0;
        int64_t local = k;
        if (s->slices) { /* run r: slice r of every member, one after the other */
            const int64_t len = total / cp->nth, r = k / len;
            int64_t j = k % len;
            while (j >= parts[i] / cp->nth) j -= parts[i++] / cp->nth;
            local = r * (parts[i] / cp->nth) + j;
        } else {
            while (local >= parts[i]) local -= parts[i++];
        }
        const struct het_mm_plan *p = &g[i];
        het_mm_own_acts(&g[0], cp, &ready, k);
        int64_t lo, hi;
        if (p->use_panel) {
            het_mm_range(het_mm_panel_items(p), local, parts[i], &lo, &hi);
            het_mm_panels_part(p, cp, lo, hi, 0, p->M, false);
        } else {
            het_mm_range(p->B2 * p->B3 * p->N, local, parts[i], &lo, &hi);
            het_mm_gemv_part(p, cp, lo, hi);
        }
    }
    return s->used;
}

int het_cpu_mm_step_nodes(const struct het_cpu_mm_step *s) { return s->used; }

int het_cpu_mul_mat_group(const struct het_compute_params *cp, struct het_tensor *const *nodes, int n,
                          const struct het_cpu_residual_norm *rn, enum het_status *st)
{
    _Alignas(64) unsigned char buf[HET_CPU_MM_STEP_BYTES];
    struct het_cpu_mm_step *s = (struct het_cpu_mm_step *)(void *)buf;
    const int ng = het_cpu_mm_step_group(cp, nodes, n, rn, s, st);
    if (ng > 0 && *st == HET_OK) het_cpu_mm_step_run(cp, s, st);
    return ng;
}

enum het_status het_cpu_mul_mat_swiglu(const struct het_compute_params *cp, struct het_tensor *mm)
{
    _Alignas(64) unsigned char buf[HET_CPU_MM_STEP_BYTES];
    struct het_cpu_mm_step *s = (struct het_cpu_mm_step *)(void *)buf;
    enum het_status st;
    het_cpu_mm_step_swiglu(cp, mm, s, &st);
    if (st == HET_OK) het_cpu_mm_step_run(cp, s, &st);
    return st;
}

/* ---- load-time repacking ------------------------------------------------------ */

static bool het_mm_repack_layout(const struct het_tensor *a, enum het_cpu_isa isa, het_panel_fn *fn,
                                 struct het_panel_layout *pl)
{
    if (!a || het_mm_is_float_type(a->type) || a->ne[0] <= 0 || a->ne[0] % HET_Q8R_BLOCK != 0) return false;
    const struct het_type_traits *tr = het_type_get_traits(a->type);
    if (!tr || a->ne[0] % tr->blck_size != 0 || a->nb[0] != tr->type_size) return false;
    return het_mm_pick_panel(a->type, isa, a->ne[0], fn, pl) != NULL;
}

size_t het_cpu_mul_mat_repack_size(const struct het_tensor *a, enum het_cpu_isa isa)
{
    het_panel_fn fn;
    struct het_panel_layout pl;
    if (!het_mm_repack_layout(a, isa, &fn, &pl)) return 0;
    const int64_t np = (a->ne[1] + pl.R - 1) / pl.R;
    return HET_CPU_PACKED_HEADER + het_mm_align(pl.bytes) * (size_t)(np * a->ne[2] * a->ne[3]);
}

int64_t het_cpu_mul_mat_repack_items(const struct het_tensor *a, enum het_cpu_isa isa)
{
    het_panel_fn fn;
    struct het_panel_layout pl;
    if (!het_mm_repack_layout(a, isa, &fn, &pl)) return 0;
    return (a->ne[1] + pl.R - 1) / pl.R * a->ne[2] * a->ne[3];
}

/* Panels [lo, hi) of a into the buffer whose header is h (at dst). */
static void het_mm_repack_panels(const struct het_tensor *a, const struct het_panel_layout *pl,
                                 const struct het_cpu_packed *h, uint8_t *dst, int64_t lo, int64_t hi)
{
    const int64_t np = (a->ne[1] + pl->R - 1) / pl->R;
    size_t seg_bytes;
    const int64_t per = het_mm_segs(h, &seg_bytes);
    for (int64_t i = lo; i < hi; i++) {
        const int64_t ip = i % np, i2 = i / np % h->ne2, i3 = i / np / h->ne2;
        const int64_t n0 = ip * pl->R;
        const int nr = h->N - n0 < pl->R ? (int)(h->N - n0) : pl->R;
        const uint8_t *rows = (const uint8_t *)a->data + n0 * a->nb[1] + i2 * a->nb[2] + i3 * a->nb[3];
        het_panel_pack(a->type, pl, rows, a->nb[1], nr,
                       dst + HET_CPU_PACKED_HEADER + het_mm_panel_offset(i, h->panel_stride, per, seg_bytes));
    }
}

/* het_cpu_mul_mat_repack_range (n_seg 1) and _seg. */
static enum het_status het_mm_repack(const struct het_tensor *a, enum het_cpu_isa isa, void *dst, size_t size,
                                     int n_seg, size_t seg_bytes, int64_t lo, int64_t hi)
{
    het_panel_fn fn;
    struct het_panel_layout pl;
    if (!a || !a->data || !dst || !het_mm_repack_layout(a, isa, &fn, &pl)) return HET_ERR_UNSUPPORTED;
    if ((uintptr_t)dst & 63) return HET_ERR_INVALID;
    if (n_seg > 1 && (a->ne[2] * a->ne[3] != 1 || seg_bytes % 64 || seg_bytes / 64 > INT32_MAX ||
                      seg_bytes < het_cpu_mul_mat_seg_bytes(a, isa, n_seg)))
        return HET_ERR_INVALID;
    if (n_seg <= 1 && size < het_cpu_mul_mat_repack_size(a, isa)) return HET_ERR_INVALID;
    const int64_t np = (a->ne[1] + pl.R - 1) / pl.R;
    if (lo < 0 || hi > np * a->ne[2] * a->ne[3] || lo > hi) return HET_ERR_INVALID;
    const struct het_cpu_packed h = {
        .magic = HET_CPU_PACKED_MAGIC, .type = a->type, .kind = pl.kind, .R = pl.R,
        .K = a->ne[0], .N = a->ne[1], .ne2 = a->ne[2], .ne3 = a->ne[3], .panel_stride = het_mm_align(pl.bytes),
        .n_seg = n_seg > 1 ? n_seg : 0, .seg_lines = n_seg > 1 ? (int32_t)(seg_bytes / 64) : 0,
    };
    if (lo == 0) {
        memset(dst, 0, HET_CPU_PACKED_HEADER);
        memcpy(dst, &h, sizeof h);
    }
    het_mm_repack_panels(a, &pl, &h, dst, lo, hi);
    return HET_OK;
}

enum het_status het_cpu_mul_mat_repack_range(const struct het_tensor *a, enum het_cpu_isa isa, void *dst, size_t size,
                                             int64_t lo, int64_t hi)
{
    return het_mm_repack(a, isa, dst, size, 1, 0, lo, hi);
}

size_t het_cpu_mul_mat_seg_bytes(const struct het_tensor *a, enum het_cpu_isa isa, int n_seg)
{
    het_panel_fn fn;
    struct het_panel_layout pl;
    if (!a || n_seg < 1 || a->ne[2] * a->ne[3] != 1 || !het_mm_repack_layout(a, isa, &fn, &pl)) return 0;
    const int64_t np = (a->ne[1] + pl.R - 1) / pl.R;
    return het_mm_align(pl.bytes) * (size_t)((np + n_seg - 1) / n_seg);
}

enum het_status het_cpu_mul_mat_repack_seg(const struct het_tensor *a, enum het_cpu_isa isa, void *dst, int n_seg,
                                           size_t seg_bytes, int64_t lo, int64_t hi)
{
    return het_mm_repack(a, isa, dst, 0, n_seg, seg_bytes, lo, hi);
}

enum het_status het_cpu_mul_mat_repack(const struct het_tensor *a, enum het_cpu_isa isa, void *dst, size_t size)
{
    return het_cpu_mul_mat_repack_range(a, isa, dst, size, 0, het_cpu_mul_mat_repack_items(a, isa));
}

size_t het_cpu_mul_mat_ahead(const struct het_tensor *t, int nth, const uint8_t **base, size_t *stride)
{
    const struct het_tensor *a = t->src[0], *b = t->src[1];
    if (t->op != HET_OP_MUL_MAT || !a || !b || b->ne[1] * b->ne[2] * b->ne[3] > 4) return 0;
    if (nth < 1) nth = 1;
    size_t total;
    const struct het_cpu_packed *h = a->extra;
    if (h && h->magic == HET_CPU_PACKED_MAGIC) {
        *base = (const uint8_t *)h + HET_CPU_PACKED_HEADER;
        size_t seg_bytes;
        const int64_t per = het_mm_segs(h, &seg_bytes);
        if (per) { /* segment r: thread r's */
            *stride = seg_bytes;
            return h->panel_stride * (size_t)per;
        }
        total = h->panel_stride * (size_t)((h->N + h->R - 1) / h->R) * (size_t)(h->ne2 * h->ne3);
    } else {
        if (!a->data) return 0;
        *base = a->data;
        total = het_nbytes(a);
    }
    /* one run: thread r's parts begin about r / nth of the way in (cpu_sync.c) */
    *stride = total / (size_t)nth & ~(size_t)63;
    return nth > 1 ? *stride : total;
}
