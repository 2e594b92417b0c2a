/*
 * matmul_id.c — HET_OP_MUL_MAT_ID on the CPU (the experts of a mixture of
 * experts): dst (N, k, T) with dst[:, s, t] = as[:, :, ids[s, t]] x
 * b[:, s % n_b, t] (contract in het/graph.h).
 *
 * The arithmetic is het_cpu_mul_mat's: for every expert that was hit this
 * file builds a 2-D mul_mat node over that expert's slab of `as` and runs it
 * with all threads, so every weight type, ISA level, int8 activation mode
 * and F32-activation mode of matmul.c applies unchanged, and the threads
 * split each expert's output rows (balanced however unevenly the tokens
 * are routed). Experts nobody picked are never read.
 *
 *   1. one thread groups the (slot, token) pairs by expert (a counting sort
 *      of ids, read through its strides; an id out of range fails the node
 *      on every thread), a step of one part. It also lists the experts with
 *      fewer pairs than a panel kernel takes (decode: all k of them).
 *   2. those few-pair experts (quantised weights, int8 activations) run
 *      together in two steps: the threads quantise their pairs' input
 *      columns into q8r rows, then share the rows of all of them at once
 *      (parts are row ranges over the list), each weight row read once
 *      by the GEMV kernel against the expert's 1-3 columns and the results
 *      stored through dst's strides. A decode step thus costs two steps
 *      for all k experts instead of two per expert, and the threads split
 *      the k experts' rows evenly.
 *   3. every other expert, in chunks of at most `chunk` pairs:
 *      - one pair (decode): the mul_mat node views b's column and dst's
 *        column in place (strides as they are), nothing is copied;
 *      - more (prefill): the threads gather the pairs' input columns into a
 *        dense F32 block, one GEMM runs over it into a dense output block,
 *        and the threads scatter its columns to dst through dst's strides;
 *      - MMID_ROWS_MIN_M pairs or more (most of a prefill's experts): one
 *        step before the experts quantises every column of b once for the
 *        node, in the layout mul_mat takes for such counts, and the GEMM
 *        reads its pairs' rows from there (het_cpu_mul_mat_rows): no
 *        gather, and no quantising step inside each expert. Gate and up
 *        (one column a token, shared by its k slots) quantise each token
 *        once instead of k times.
 *      Each phase is a step of parts (cpu_sync.c): the next begins when all
 *      its parts are done. The node ends with every thread meeting
 *      (het_cpu_sync_all): the steps depend on the grouping in the scratch,
 *      which the next node may reuse, so no thread may still be reading it.
 *
 * When the device packed the experts at load (het_cpu_mul_mat_id_repack:
 * one het_cpu_mul_mat_repack buffer per expert, as->extra), step 2 runs the
 * panel kernel over the chosen experts' panels and step 3 hands expert e's
 * buffer to its mul_mat node as a->extra; the file's pages are not read.
 *
 * Scratch (wdata): [status + counts + offsets + few-pair experts | pair
 * list | gathered input | output block | the inner mul_mat's own scratch |
 * q8r rows of the few-pair experts' columns | a gathered strided column per
 * thread | step 3's rows of b's columns | per thread, its expert's row list].
 */
#include <string.h>

#include "devices/cpu/cpu_ops.h"
#include "devices/cpu/quant_dot.h"
#include "devices/cpu/vec.h"

/* Weight bytes a part of the few-pair step covers at least (the atomic that
 * hands a part out costs about what streaming ~1 KB does). */
#define MMID_PART_BYTES (32u << 10)
/* Fewest pairs of an expert that takes b's columns quantised once for the
 * node (step 3): from here on the K-quants' rows share d per super-block
 * whatever the count (HET_Q8R_GROUP_MIN_M). */
#define MMID_ROWS_MIN_M HET_Q8R_GROUP_MIN_M

static size_t mmid_align(size_t x) { return (x + 63) & ~(size_t)63; }

struct mmid_plan {
    const struct het_tensor *as, *b, *ids;
    struct het_tensor *dst;
    int64_t K, N, E, k, n_b, T;
    int64_t chunk;            /* pairs per GEMM at most                          */
    size_t  off_list, off_in, off_out, off_mm, mm_bytes, total;
    /* few-pair experts (step 2): kernels, q8r layout and scratch rows */
    bool    few;              /* step 2 applies (quantised a, int8 activations)  */
    int64_t few_max;          /* experts with fewer than few_below pairs, at most */
    int64_t few_pairs_max;    /* their pairs, at most                            */
    int     few_below;
    struct het_q8r_layout ql;
    het_qgemv_fn    gemv;
    het_quantize_fn quantize;
    size_t  off_few, off_act, off_gather;
    /* step 3's experts of at least MMID_ROWS_MIN_M pairs take b's columns
     * quantised once for the node (het_cpu_mul_mat_rows) instead of each
     * gathering and quantising its own: rows_ok, their layout, the
     * quantiser, the rows (column j + n_b * t of b at off_rows) and each
     * thread's list of its expert's rows (off_rowp, chunk pointers a thread) */
    bool    rows_ok;
    struct het_q8r_layout rql;
    het_quantize_fn rquant;
    size_t  off_rows, off_rowp;
    /* load-time panels (as->extra): block e at packed + e * pstride */
    const uint8_t *packed;
    size_t         pstride;
    int64_t        np;        /* panels per expert                               */
    struct het_panel_layout pl;
    het_panel_fn   panel;
    het_panels_fn  panels;    /* the level's runs of panels (NULL: none), for full ones */
};

/* matmul.c's table per level; NULL for a level this file does not know, so
 * that a new level falls back to the known ones below it, never to scalar */
static const struct het_mm_kernels *mmid_level(enum het_cpu_isa isa)
{
    switch (isa) {
    case HET_CPU_ISA_AVX512VNNI: return &het_mm_kernels_avx512vnni;
    case HET_CPU_ISA_AVX512:     return &het_mm_kernels_avx512;
    case HET_CPU_ISA_AVX2:       return &het_mm_kernels_avx2;
    case HET_CPU_ISA_SCALAR:     return &het_mm_kernels_scalar;
    default:                     return NULL;
    }
}

/* Step 2's kernels at isa (each from the highest level that has it, as
 * matmul.c resolves them) and its bounds; few stays false where mul_mat's
 * own paths are needed (float weights, F32 activations). */
static void mmid_few_init(struct mmid_plan *p, enum het_cpu_isa isa, bool f32_act)
{
    const enum het_type t = p->as->type;
    const struct het_type_traits *tr = het_type_get_traits(t);
    enum het_panel_kind kind;
    if (f32_act || !tr || !tr->is_quantized || !het_panel_kind_of(t, &kind)) return;
    for (int lv = (int)isa; lv >= 0; lv--) {
        const struct het_mm_kernels *k = mmid_level((enum het_cpu_isa)lv);
        if (!k) continue;
        if (!p->quantize) p->quantize = k->quantize;
        if (!p->gemv) p->gemv = k->gemv[t];
    }
    if (!p->gemv || !p->quantize) return;
    p->few = true;
    p->few_below = het_panel_min_m(kind);
    het_q8r_layout_init(&p->ql, p->K, t == HET_TYPE_Q8_0);
    const int64_t pairs = p->k * p->T, b = p->few_below - 1;
    p->few_max = p->E < pairs ? p->E : pairs;
    p->few_pairs_max = b * p->E < pairs ? b * p->E : pairs;
}

/* The 2-D mul_mat node of expert e over m columns: input and output views
 * described by (b_data, b_nb1) and (d_data, d_nb1) with the given nb0s. */
struct mmid_node {
    struct het_tensor a, b, d;
};

static void mmid_node_init(struct mmid_node *n, const struct mmid_plan *p, int64_t e, int64_t m,
                           void *b_data, size_t b_nb0, size_t b_nb1, void *d_data, size_t d_nb0, size_t d_nb1)
{
    const int64_t ane[2] = { p->K, p->N }, bne[2] = { p->K, m }, dne[2] = { p->N, m };
    het_tensor_init(&n->a, p->as->type, 2, ane);
    n->a.nb[0] = p->as->nb[0];
    n->a.nb[1] = p->as->nb[1];
    n->a.nb[2] = n->a.nb[3] = p->as->nb[1] * (size_t)p->N;
    n->a.data = (char *)p->as->data + (size_t)e * p->as->nb[2];
    het_tensor_init(&n->b, HET_TYPE_F32, 2, bne);
    n->b.nb[0] = b_nb0;
    n->b.nb[1] = b_nb1;
    n->b.nb[2] = n->b.nb[3] = b_nb1 * (size_t)m;
    n->b.data = b_data;
    het_tensor_init(&n->d, HET_TYPE_F32, 2, dne);
    n->d.nb[0] = d_nb0;
    n->d.nb[1] = d_nb1;
    n->d.nb[2] = n->d.nb[3] = d_nb1 * (size_t)m;
    n->d.data = d_data;
    n->d.op = HET_OP_MUL_MAT;
    n->d.src[0] = &n->a;
    n->d.src[1] = &n->b;
}

static bool mmid_shapes_ok(const struct het_tensor *dst)
{
    const struct het_tensor *as = dst->src[0], *b = dst->src[1], *ids = dst->src[2];
    if (!as || !b || !ids || dst->type != HET_TYPE_F32 || b->type != HET_TYPE_F32 || ids->type != HET_TYPE_I32)
        return false;
    if (as->ne[0] != b->ne[0] || as->ne[0] <= 0 || as->ne[3] != 1 || b->ne[3] != 1) return false;
    if (ids->ne[1] != b->ne[2] || ids->ne[2] != 1 || ids->ne[3] != 1) return false;
    if (b->ne[1] != 1 && b->ne[1] != ids->ne[0]) return false;
    return dst->ne[0] == as->ne[1] && dst->ne[1] == ids->ne[0] && dst->ne[2] == ids->ne[1] && dst->ne[3] == 1;
}

/* Expert e's (K, N) slab of as as a 2-D tensor. */
static void mmid_expert_view(struct het_tensor *v, const struct het_tensor *as, int64_t e)
{
    const int64_t ne[2] = { as->ne[0], as->ne[1] };
    het_tensor_init(v, as->type, 2, ne);
    v->nb[0] = as->nb[0];
    v->nb[1] = as->nb[1];
    v->nb[2] = v->nb[3] = as->nb[1] * (size_t)as->ne[1];
    v->data = as->data ? (char *)as->data + (size_t)e * as->nb[2] : NULL;
}

size_t het_cpu_mul_mat_id_repack_size(const struct het_tensor *as, enum het_cpu_isa isa)
{
    if (!as || as->ne[2] < 2 || as->ne[3] != 1) return 0;
    struct het_tensor v;
    mmid_expert_view(&v, as, 0);
    return mmid_align(het_cpu_mul_mat_repack_size(&v, isa)) * (size_t)as->ne[2];
}

int64_t het_cpu_mul_mat_id_repack_items(const struct het_tensor *as, enum het_cpu_isa isa)
{
    if (!het_cpu_mul_mat_id_repack_size(as, isa)) return 0;
    struct het_tensor v;
    mmid_expert_view(&v, as, 0);
    return het_cpu_mul_mat_repack_items(&v, isa) * as->ne[2];
}

enum het_status het_cpu_mul_mat_id_repack_range(const struct het_tensor *as, enum het_cpu_isa isa, void *dst,
                                                size_t size, int64_t lo, int64_t hi)
{
    const size_t total = het_cpu_mul_mat_id_repack_size(as, isa);
    if (!total || !as->data || !dst) return HET_ERR_UNSUPPORTED;
    if (size < total) return HET_ERR_INVALID;
    const size_t stride = total / (size_t)as->ne[2];
    struct het_tensor v;
    mmid_expert_view(&v, as, 0);
    const int64_t per = het_cpu_mul_mat_repack_items(&v, isa); /* items of one expert's block */
    if (lo < 0 || hi > per * as->ne[2] || lo > hi) return HET_ERR_INVALID;
    for (int64_t e = lo / per; e < as->ne[2] && e * per < hi; e++) {
        mmid_expert_view(&v, as, e);
        const int64_t a0 = lo > e * per ? lo - e * per : 0, a1 = hi < (e + 1) * per ? hi - e * per : per;
        enum het_status st = het_cpu_mul_mat_repack_range(&v, isa, (char *)dst + (size_t)e * stride, stride, a0, a1);
        if (st != HET_OK) return st;
    }
    return HET_OK;
}

enum het_status het_cpu_mul_mat_id_repack(const struct het_tensor *as, enum het_cpu_isa isa, void *dst, size_t size)
{
    return het_cpu_mul_mat_id_repack_range(as, isa, dst, size, 0, het_cpu_mul_mat_id_repack_items(as, isa));
}

/* as->extra when it holds het_cpu_mul_mat_id_repack's blocks for as at a
 * level whose panel kernel runs here (step 2 needs it). */
static void mmid_packed_init(struct mmid_plan *p, enum het_cpu_isa isa)
{
    const struct het_cpu_packed *h = p->as->extra;
    if (!h || !p->few || h->magic != HET_CPU_PACKED_MAGIC || h->ne2 != 1 || h->ne3 != 1 || h->type != p->as->type ||
        h->K != p->K || h->N != p->N || h->R > 16 || p->E < 2 || p->as->ne[3] != 1)
        return;
    het_panel_fn fn = NULL;
    het_panels_fn run = NULL;
    for (int lv = (int)isa; lv >= 0 && !fn; lv--) {
        const struct het_mm_kernels *k = mmid_level((enum het_cpu_isa)lv);
        if (k && k->panel_rows == h->R) {
            fn = k->panel[h->kind];
            run = k->panels[h->kind];
        }
    }
    if (!fn) return;
    het_panel_layout_init(&p->pl, h->kind, h->R, p->K);
    if (mmid_align(p->pl.bytes) != h->panel_stride) return;
    p->np = (p->N + h->R - 1) / h->R;
    p->pstride = mmid_align(HET_CPU_PACKED_HEADER + h->panel_stride * (size_t)p->np);
    p->packed = (const uint8_t *)h;
    p->panel = fn;
    p->panels = run;
}

/* Expert 0's 2-D node over m columns, for its row format (any data address
 * will do: nothing is read). */
static bool mmid_row_format(const struct mmid_plan *p, int64_t m, enum het_cpu_isa isa, bool f32_act,
                            struct het_q8r_layout *ql, het_quantize_fn *fn)
{
    struct mmid_node n;
    mmid_node_init(&n, p, 0, m, (char *)p->dst, sizeof(float), sizeof(float) * (size_t)p->K, (char *)p->dst,
                   sizeof(float), sizeof(float) * (size_t)p->N);
    n.a.data = (char *)p->dst;
    return het_cpu_mul_mat_row_format(&n.d, isa, f32_act, ql, fn);
}

/* rows_ok when mul_mat takes int8 rows of one layout for every m from
 * MMID_ROWS_MIN_M to chunk (the layout depends on m only below
 * HET_Q8R_GROUP_MIN_M, quant_dot.h: checked at both ends). */
static void mmid_rows_init(struct mmid_plan *p, enum het_cpu_isa isa, bool f32_act)
{
    struct het_q8r_layout lo, hi;
    het_quantize_fn flo, fhi;
    if (p->chunk < MMID_ROWS_MIN_M || !mmid_row_format(p, MMID_ROWS_MIN_M, isa, f32_act, &lo, &flo) ||
        !mmid_row_format(p, p->chunk, isa, f32_act, &hi, &fhi))
        return;
    if (memcmp(&lo, &hi, sizeof lo) != 0 || flo != fhi) return;
    p->rows_ok = true;
    p->rql = hi;
    p->rquant = fhi;
}

static void mmid_plan_init(struct mmid_plan *p, struct het_tensor *dst, enum het_cpu_isa isa, int nth, bool f32_act)
{
    memset(p, 0, sizeof *p);
    p->dst = dst;
    p->as = dst->src[0];
    p->b = dst->src[1];
    p->ids = dst->src[2];
    p->K = p->as->ne[0];
    p->N = p->as->ne[1];
    p->E = p->as->ne[2];
    p->k = p->ids->ne[0];
    p->n_b = p->b->ne[1];
    p->T = p->ids->ne[1];
    /* routers pick distinct experts per token, so an expert sees at most T
     * pairs; repeated ids (legal) just take more chunks */
    p->chunk = p->T > 0 ? p->T : 1;

    mmid_few_init(p, isa, f32_act);
    mmid_packed_init(p, isa);

    const size_t pairs = (size_t)(p->k * p->T);
    p->off_few = sizeof(int64_t) * (size_t)(2 * p->E + 2);
    p->off_list = mmid_align(p->off_few + sizeof(int64_t) * (size_t)(p->E + 1));
    p->off_in = p->off_list + mmid_align(sizeof(int32_t) * pairs);
    p->off_out = p->off_in + mmid_align(sizeof(float) * (size_t)(p->chunk * p->K));
    p->off_mm = p->off_out + mmid_align(sizeof(float) * (size_t)(p->chunk * p->N));
    /* the inner mul_mat's scratch for the largest chunk (any data address
     * will do for sizing; a 1-column one covers the in-place decode case) */
    struct mmid_node n;
    mmid_node_init(&n, p, 0, p->chunk, (char *)dst + 0, sizeof(float), sizeof(float) * (size_t)p->K,
                   (char *)dst + 0, sizeof(float), sizeof(float) * (size_t)p->N);
    n.a.data = (char *)dst;
    size_t w1 = het_cpu_mul_mat_work_size(&n.d, nth, f32_act);
    mmid_node_init(&n, p, 0, 1, (char *)dst, p->b->nb[0], p->b->nb[1], (char *)dst, dst->nb[0], dst->nb[1]);
    n.a.data = (char *)dst;
    size_t w2 = het_cpu_mul_mat_work_size(&n.d, nth, f32_act);
    p->mm_bytes = mmid_align(w1 > w2 ? w1 : w2);
    p->off_act = p->off_mm + p->mm_bytes;
    p->off_gather = p->off_act + (p->few ? mmid_align(p->ql.row_bytes * (size_t)p->few_pairs_max) : 0);
    mmid_rows_init(p, isa, f32_act);
    /* per thread, a strided input column gathered before it is quantised
     * (step 2, and step 3's rows) */
    const bool gather = (p->few || p->rows_ok) && p->b->nb[0] != sizeof(float);
    size_t end = p->off_gather + (gather ? (size_t)nth * mmid_align(sizeof(float) * (size_t)p->K) : 0);
    if (p->rows_ok) {
        p->off_rows = end;
        p->off_rowp = p->off_rows + mmid_align(p->rql.row_bytes * (size_t)(p->n_b * p->T));
        end = p->off_rowp + (size_t)nth * mmid_align(sizeof(uint8_t *) * (size_t)p->chunk);
    }
    p->total = end;
}

bool het_cpu_mul_mat_id_supports(const struct het_tensor *node)
{
    if (!node || node->op != HET_OP_MUL_MAT_ID || !mmid_shapes_ok(node)) return false;
    if (!node->src[0]->data || !node->src[1]->data || !node->src[2]->data || !node->data) return false;
    /* the weight type and layout are mul_mat's question */
    struct mmid_plan p;
    memset(&p, 0, sizeof p);
    p.as = node->src[0];
    p.b = node->src[1];
    p.K = p.as->ne[0];
    p.N = p.as->ne[1];
    struct mmid_node n;
    mmid_node_init(&n, &p, 0, 1, node->src[1]->data, sizeof(float), sizeof(float) * (size_t)p.K, node->data,
                   sizeof(float), sizeof(float) * (size_t)p.N);
    return het_cpu_mul_mat_supports(&n.d);
}

size_t het_cpu_mul_mat_id_work_size(const struct het_tensor *node, int nth, bool f32_act)
{
    if (!node || node->op != HET_OP_MUL_MAT_ID || !mmid_shapes_ok(node)) return 0;
    if (nth < 1) nth = 1;
    /* the ISA is not known here: size for the largest need of any level */
    size_t need = 0;
    for (int lv = HET_CPU_ISA_SCALAR; lv < HET_CPU_ISA_COUNT; lv++) {
        struct mmid_plan p;
        mmid_plan_init(&p, (struct het_tensor *)node, (enum het_cpu_isa)lv, nth, f32_act);
        if (p.total > need) need = p.total;
    }
    return need;
}

static int32_t mmid_id(const struct het_tensor *ids, int64_t s, int64_t t)
{
    int32_t v;
    memcpy(&v, (const char *)ids->data + s * ids->nb[0] + t * ids->nb[1], sizeof v);
    return v;
}

/* Thread 0: counting sort of the pairs by expert. hdr[0] status, hdr[1..E]
 * counts, hdr[E+1..2E+1] offsets into the list of pair codes s + t*k, then
 * (step 2) the number of few-pair experts and their ids. */
static void mmid_group(const struct mmid_plan *p, int64_t *hdr, int32_t *list)
{
    int64_t *few = hdr + 2 * p->E + 2;
    few[0] = 0;
    int64_t *count = hdr + 1, *offs = hdr + 1 + p->E;
    memset(hdr, 0, sizeof(int64_t) * (size_t)(2 * p->E + 2));
    for (int64_t t = 0; t < p->T; t++)
        for (int64_t s = 0; s < p->k; s++) {
            int32_t e = mmid_id(p->ids, s, t);
            if (e < 0 || e >= p->E) {
                hdr[0] = 1;
                return;
            }
            count[e]++;
        }
    for (int64_t e = 0; e < p->E; e++) offs[e + 1] = offs[e] + count[e];
    for (int64_t e = 0; e < p->E; e++) count[e] = 0;
    for (int64_t t = 0; t < p->T; t++)
        for (int64_t s = 0; s < p->k; s++) {
            int32_t e = mmid_id(p->ids, s, t);
            list[offs[e] + count[e]++] = (int32_t)(s + t * p->k);
        }
    for (int64_t e = 0; p->few && e < p->E; e++)
        if (count[e] > 0 && count[e] < p->few_below) few[1 + few[0]++] = e;
}

static const char *mmid_b_col(const struct mmid_plan *p, int32_t code)
{
    const int64_t s = code % p->k, t = code / p->k;
    return (const char *)p->b->data + (s % p->n_b) * p->b->nb[1] + t * p->b->nb[2];
}

static char *mmid_d_col(const struct mmid_plan *p, int32_t code)
{
    const int64_t s = code % p->k, t = code / p->k;
    return (char *)p->dst->data + s * p->dst->nb[1] + t * p->dst->nb[2];
}

/* Listed expert's c (1-3) quantised columns, rows first.. of act, and the
 * destination columns of its pairs list[at..at+c). */
static void mmid_few_cols(const struct mmid_plan *p, int64_t at, int64_t c, int64_t first, const int32_t *list,
                          const uint8_t *act, const uint8_t **a, char **d)
{
    for (int64_t q = 0; q < c; q++) {
        a[q] = act + (size_t)(first + q) * p->ql.row_bytes;
        d[q] = mmid_d_col(p, list[at + q]);
    }
}

/* Step 2's products from load-time panels: unit u = panel u % np of listed
 * expert u / np, against that expert's 1-3 quantised columns. */
static void mmid_few_panels(const struct mmid_plan *p, const struct het_compute_params *cp, const int64_t *hdr,
                            const int32_t *list, const uint8_t *act)
{
    const int64_t *count = hdr + 1, *offs = hdr + 1 + p->E, *few = hdr + 2 * p->E + 2;
    const int64_t nf = few[0], units = nf * p->np;
    const int R = p->pl.R;
    const size_t pbytes = mmid_align(p->pl.bytes);
    const int64_t nr = het_cpu_n_parts(cp, units, (int64_t)(MMID_PART_BYTES / pbytes) + 1);
    for (int64_t k = het_cpu_part_first(cp, nr); k < nr; k = het_cpu_part_next(cp, nr, k)) {
        int64_t u0, u1;
        het_vec_split(units, (int)k, (int)nr, &u0, &u1);
        int64_t j = u0 / p->np, first = 0;
        for (int64_t q = 0; q < j; q++) first += count[few[1 + q]];
        for (int64_t u = u0; u < u1;) {
            const int64_t e = few[1 + j], c = count[e];
            const int64_t u_end = (j + 1) * p->np < u1 ? (j + 1) * p->np : u1;
            const uint8_t *a[4];
            char *d[4];
            mmid_few_cols(p, offs[e], c, first, list, act, a, d);
            const uint8_t *panels = p->packed + (size_t)e * p->pstride + HET_CPU_PACKED_HEADER;
            for (; u < u_end; u++) {
                const int64_t ip = u - j * p->np, n0 = ip * R;
                const int rows = p->N - n0 < R ? (int)(p->N - n0) : R;
                float out[4 * 16];
                /* a full panel as a run of one: the weight stream's prefetch
                 * hints (panel_compact_avx512.c), out[q * R + r] either way */
                const uint8_t *panel = panels + (size_t)ip * pbytes;
                if (p->panels && rows == R) p->panels(&p->pl, panel, pbytes, 1, a, (int)c, out, (size_t)R, cp->stream);
                else p->panel(&p->pl, panel, a, (int)c, out);
                for (int64_t q = 0; q < c; q++) {
                    if (p->dst->nb[0] == sizeof(float)) {
                        memcpy(d[q] + n0 * (int64_t)sizeof(float), &out[q * R], sizeof(float) * (size_t)rows);
                    } else {
                        for (int r = 0; r < rows; r++)
                            memcpy(d[q] + (n0 + r) * (int64_t)p->dst->nb[0], &out[q * R + r], sizeof(float));
                    }
                }
            }
            first += c;
            j++;
        }
    }
}

/* b's column at src into K contiguous floats at y, through b's element stride. */
static void mmid_col_copy(const struct mmid_plan *p, const char *src, float *y)
{
    if (p->b->nb[0] == sizeof(float)) memcpy(y, src, sizeof(float) * (size_t)p->K);
    else
        for (int64_t i = 0; i < p->K; i++) memcpy(&y[i], src + i * p->b->nb[0], sizeof(float));
}

/* b's column at src as contiguous floats: in place, or gathered into this
 * thread's buffer at off_gather (steps 2 and 3 quantise from it). */
static const float *mmid_col_f32(const struct mmid_plan *p, const struct het_compute_params *cp, const char *src)
{
    if (p->b->nb[0] == sizeof(float)) return (const float *)(const void *)src;
    float *tmp = (float *)(void *)((char *)cp->wdata + p->off_gather +
                                   (size_t)cp->ith * mmid_align(sizeof(float) * (size_t)p->K));
    mmid_col_copy(p, src, tmp);
    return tmp;
}

/* Step 2: the few-pair experts' columns quantised (pair i of the list
 * into q8r row i), then the rows of all those experts shared out. */
static void mmid_few(const struct mmid_plan *p, const struct het_compute_params *cp, const int64_t *hdr,
                     const int32_t *list, uint8_t *act)
{
    const int64_t *count = hdr + 1, *offs = hdr + 1 + p->E, *few = hdr + 2 * p->E + 2;
    const int64_t nf = few[0];
    if (nf == 0) return;
    /* pairs of the listed experts, in list order: expert j's start at first[j] */
    int64_t n_pairs = 0;
    for (int64_t j = 0; j < nf; j++) n_pairs += count[few[1 + j]];
    const int64_t nq = het_cpu_n_parts(cp, n_pairs, 1);
    for (int64_t k = het_cpu_part_first(cp, nq); k < nq; k = het_cpu_part_next(cp, nq, k)) {
        int64_t i0, i1;
        het_vec_split(n_pairs, (int)k, (int)nq, &i0, &i1);
        for (int64_t j = 0, i = 0; j < nf && i < i1; j++) {
            const int64_t e = few[1 + j];
            for (int64_t c = 0; c < count[e]; c++, i++) {
                if (i < i0 || i >= i1) continue;
                const float *x = mmid_col_f32(p, cp, mmid_b_col(p, list[offs[e] + c]));
                p->quantize(x, &p->ql, act + (size_t)i * p->ql.row_bytes);
            }
        }
    }
    if (p->packed) {
        mmid_few_panels(p, cp, hdr, list, act);
        return;
    }
    /* rows of all listed experts: unit u = row u % N of listed expert u / N */
    const int64_t units = nf * p->N;
    const int64_t nr = het_cpu_n_parts(cp, units, (int64_t)(MMID_PART_BYTES / p->as->nb[1]) + 1);
    for (int64_t k = het_cpu_part_first(cp, nr); k < nr; k = het_cpu_part_next(cp, nr, k)) {
        int64_t u0, u1;
        het_vec_split(units, (int)k, (int)nr, &u0, &u1);
        int64_t j = u0 / p->N, first = 0;
        for (int64_t q = 0; q < j; q++) first += count[few[1 + q]];
        for (int64_t u = u0; u < u1;) {
            const int64_t e = few[1 + j], c = count[e];
            const int64_t n1 = (j + 1) * p->N < u1 ? (j + 1) * p->N : u1;
            const uint8_t *a[4];
            char *d[4];
            mmid_few_cols(p, offs[e], c, first, list, act, a, d);
            const char *w = (const char *)p->as->data + e * p->as->nb[2];
            for (; u < n1; u++) {
                const int64_t n = u - j * p->N;
                float out[4];
                p->gemv(p->K, w + n * p->as->nb[1], a, (int)c, out);
                for (int64_t q = 0; q < c; q++) memcpy(d[q] + n * p->dst->nb[0], &out[q], sizeof(float));
            }
            first += c;
            j++;
        }
    }
}

/* Does step 3 take a chunk of m pairs from the node's quantised rows? */
static bool mmid_uses_rows(const struct mmid_plan *p, int64_t m)
{
    return p->rows_ok && m >= MMID_ROWS_MIN_M;
}

/* Step 3's rows: every column of b (j, t), j < n_b, quantised once into
 * row j + n_b * t at off_rows, the threads sharing the columns; only when
 * an expert takes them (every thread decides the same from the counts). */
static void mmid_rows(const struct mmid_plan *p, const struct het_compute_params *cp, const int64_t *hdr)
{
    const int64_t *count = hdr + 1;
    bool any = false;
    for (int64_t e = 0; e < p->E && !any; e++) any = mmid_uses_rows(p, count[e] < p->chunk ? count[e] : p->chunk);
    if (!any) return;
    uint8_t *rows = (uint8_t *)cp->wdata + p->off_rows;
    const int64_t cols = p->n_b * p->T;
    const int64_t np = het_cpu_n_parts(cp, cols, het_vec_part_rows(p->K));
    for (int64_t k = het_cpu_part_first(cp, np); k < np; k = het_cpu_part_next(cp, np, k)) {
        int64_t c0, c1;
        het_vec_split(cols, (int)k, (int)np, &c0, &c1);
        for (int64_t c = c0; c < c1; c++) {
            const int64_t j = c % p->n_b, t = c / p->n_b;
            const float *x = mmid_col_f32(p, cp, (const char *)p->b->data + j * p->b->nb[1] + t * p->b->nb[2]);
            p->rquant(x, &p->rql, rows + (size_t)c * p->rql.row_bytes);
        }
    }
}

enum het_status het_cpu_mul_mat_id(const struct het_compute_params *cp, struct het_tensor *dst)
{
    if (!het_cpu_mul_mat_id_supports(dst)) return HET_ERR_UNSUPPORTED;
    struct mmid_plan p;
    mmid_plan_init(&p, dst, cp->isa, cp->nth, cp->f32_act);
    if (p.total > cp->wsize || !cp->wdata) return HET_ERR_INVALID;
    char *w = cp->wdata;
    int64_t *hdr = (int64_t *)w;
    int32_t *list = (int32_t *)(w + p.off_list);
    float *in = (float *)(w + p.off_in), *out = (float *)(w + p.off_out);
    struct het_compute_params inner = *cp;
    inner.wdata = w + p.off_mm;
    inner.wsize = p.mm_bytes;

    for (int64_t k = het_cpu_part_first(cp, 1); k < 1; k = het_cpu_part_next(cp, 1, k)) mmid_group(&p, hdr, list);
    const int64_t *count = hdr + 1, *offs = hdr + 1 + p.E;

    /* the steps below depend on hdr, which the next node may overwrite: no
     * thread leaves before all are done with it (het_cpu_sync_all at the end) */
    const bool bad_ids = hdr[0] != 0;
    enum het_status st = bad_ids ? HET_ERR_INVALID : HET_OK;
    if (!bad_ids && p.few) mmid_few(&p, cp, hdr, list, (uint8_t *)w + p.off_act);
    if (!bad_ids && p.rows_ok) mmid_rows(&p, cp, hdr);
    for (int64_t e = 0; e < p.E && !bad_ids; e++) {
        if (p.few && count[e] < p.few_below) continue; /* done in step 2 */
        for (int64_t c0 = 0; c0 < count[e]; c0 += p.chunk) {
            const int64_t m = count[e] - c0 < p.chunk ? count[e] - c0 : p.chunk;
            const int32_t *codes = list + offs[e] + c0;
            struct mmid_node n;
            if (m == 1) {
                /* in place: b's column in, dst's column out */
                mmid_node_init(&n, &p, e, 1, (void *)mmid_b_col(&p, codes[0]), p.b->nb[0],
                               sizeof(float) * (size_t)p.K, mmid_d_col(&p, codes[0]), dst->nb[0],
                               sizeof(float) * (size_t)p.N);
                enum het_status s = het_cpu_mul_mat(&inner, &n.d);
                if (s != HET_OK) st = s;
                continue;
            }
            mmid_node_init(&n, &p, e, m, in, sizeof(float), sizeof(float) * (size_t)p.K, out, sizeof(float),
                           sizeof(float) * (size_t)p.N);
            if (p.packed) n.a.extra = (void *)(p.packed + (size_t)e * p.pstride); /* expert e's panels */
            enum het_status s;
            if (mmid_uses_rows(&p, m)) {
                /* the pairs' rows as the node quantised them; nothing gathered */
                const uint8_t **rp = (const uint8_t **)(void *)(w + p.off_rowp + (size_t)cp->ith *
                                                               mmid_align(sizeof(uint8_t *) * (size_t)p.chunk));
                for (int64_t r = 0; r < m; r++) {
                    const int64_t sl = codes[r] % p.k, t = codes[r] / p.k;
                    rp[r] = (const uint8_t *)w + p.off_rows + (size_t)(sl % p.n_b + p.n_b * t) * p.rql.row_bytes;
                }
                s = het_cpu_mul_mat_rows(&inner, &n.d, rp);
            } else {
                const int64_t np = het_cpu_n_parts(cp, m, het_vec_part_rows(p.K));
                for (int64_t k = het_cpu_part_first(cp, np); k < np; k = het_cpu_part_next(cp, np, k)) {
                    int64_t r0, r1;
                    het_vec_split(m, (int)k, (int)np, &r0, &r1);
                    for (int64_t r = r0; r < r1; r++) mmid_col_copy(&p, mmid_b_col(&p, codes[r]), in + r * p.K);
                }
                s = het_cpu_mul_mat(&inner, &n.d);
            }
            if (s != HET_OK) st = s;
            const int64_t nq = het_cpu_n_parts(cp, m, het_vec_part_rows(p.N));
            for (int64_t k = het_cpu_part_first(cp, nq); k < nq; k = het_cpu_part_next(cp, nq, k)) {
                int64_t r0, r1;
                het_vec_split(m, (int)k, (int)nq, &r0, &r1);
                for (int64_t r = r0; r < r1; r++) {
                    char *y = mmid_d_col(&p, codes[r]);
                    const float *x = out + r * p.N;
                    if (dst->nb[0] == sizeof(float)) memcpy(y, x, sizeof(float) * (size_t)p.N);
                    else
                        for (int64_t i = 0; i < p.N; i++) memcpy(y + i * dst->nb[0], &x[i], sizeof(float));
                }
            }
        }
    }
    het_cpu_sync_all(cp);
    return st;
}
