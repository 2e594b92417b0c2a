/*
 * attention.c — CPU kernel for ATTN, fused causal attention with GQA.
 *
 * q (hd, n_head, n_tok, B) F32; k, v (hd, n_kv_head, n_kv, B or 1) F16, BF16
 * or F32 views of the KV cache, any strides; dst (hd, n_head, n_tok, B) F32.
 * op_params: [0] float scale, [1] n_past. Query t of head h attends keys
 * j <= t + n_past (and j < n_kv) of kv head h / (n_head / n_kv_head):
 *     out = softmax(q k^T * scale) v
 *
 * Flash-attention style: the work is cut into tiles of up to ATTN_ROWS query
 * rows that share one kv head (the heads of a GQA group times a run of
 * tokens), and each tile streams its keys in blocks of ATTN_BK: S = Q K^T,
 * online softmax (running max m and sum l per row, O rescaled when m grows)
 * and O += P V. Nothing of size n_tok x n_kv is ever built. With AVX2, dense
 * F16 or F32 cache rows (head_dim % 8 == 0) are read where they are (or
 * packed together, see attn_rows); any other layout is converted block by
 * block to F32 scratch. The inner kernels come from attention.h (scalar
 * here, AVX2 in arch/avx2/, AVX-512 QK and PV in arch/avx512/ for head
 * dims that are a multiple of 16). A head-major cache (one kv head's rows
 * adjacent) is the fastest to read, for decode especially. With AVX-512, a
 * tile of ATTN_T_MIN_ROWS rows or more (prefill) keeps its queries and
 * scores transposed instead (attention.h, het_attn_t_*): each key and value
 * block is converted to F32 once for all the tile's rows, QK becomes an
 * outer product without horizontal sums, and the softmax runs across 16
 * rows at a time. Measured on Zen 4 (one thread, 512 tokens, 16/8 heads of
 * 128, F16 head-major cache, 25 interleaved runs): 0.89x the time of the
 * row-wise kernels (0.69-1.10); in a pp512 profile attention fell from
 * 19.1-19.7% of the time to 17.2-17.6%.
 *
 * The threads take tiles one at a time, largest first (causal tiles grow
 * with the token index), from the device's shared counter (cpu_sync.c);
 * tiles of one kv head come one after another, so its rows, read by the
 * tile before, are still in the core's caches.
 * When there are fewer tiles than threads (decode), the keys of each tile
 * are also split; every split leaves (O, m, l) in the work buffer and, in a
 * second step, the splits are merged row by row.
 */
#include <math.h>

#include "devices/cpu/attention.h"
#include "devices/cpu/cpu_ops.h"
#include "devices/cpu/vec.h"

#define ATTN_ROWS      48  /* query rows per tile (multiple of 3 and 6)             */
#define ATTN_BK        64  /* keys per block                                         */
#define ATTN_QK_ROWS   3   /* query rows one QK kernel pass handles (arch kernels)   */
#define ATTN_PV_ROWS   6   /* same for PV                                            */
#define ATTN_MIN_SPLIT 128 /* fewest keys worth a split of their own                 */
#define ATTN_ALIGN     64  /* byte alignment of every scratch array                  */
#define ATTN_T_MIN_ROWS 12 /* fewest rows of a tile run with transposed scores       */
/* Most bytes of a kv head's K and V a prefill thread keeps as F32: 3/4 of
 * its core's L2, at least 1 MB. Xeon VM (L2 2 MB), bench_attn -q 512 against
 * a flat 1 MB, three rounds in turn: depth 1,024 (1.5 MB as F32) 263-283
 * against 243-271 GFLOP/s, and 334-344 against 292-303 in another hour;
 * depth 1,536 with all 2 MB kept 260-274 against 250-277 (not better), so
 * not the whole L2. A 1 MB L2 (Zen 4, Zen 5: not measured there) keeps the
 * 1 MB measured here at depth 512 (316-349 against 292-314 GFLOP/s
 * converting block by block). */
#define ATTN_KV_F32_MIN (1u << 20)
static size_t attn_kv_f32_bytes(size_t l2_bytes)
{
    const size_t most = l2_bytes / 4 * 3;
    return most > ATTN_KV_F32_MIN ? most : ATTN_KV_F32_MIN;
}

/* How a node is cut into work; a pure function of the node, nth and the L2 size. */
struct attn_plan {
    int64_t hd, hdp;            /* head_dim, padded to a multiple of 8          */
    int64_t n_head, n_kv_head, n_rep, n_tok, n_kv, n_batch;
    int64_t hg, n_hsub;         /* heads per tile, tiles per GQA group          */
    int64_t tq, n_ttiles;       /* tokens per tile, tiles along the tokens      */
    int64_t n_tiles;            /* n_batch * n_ttiles * n_kv_head * n_hsub      */
    int64_t n_split, split_len; /* key splits per tile, keys per split          */
    int64_t kv_f32_rows;        /* rows of each of K and V a thread keeps as F32 (0: none) */
    size_t  thread_bytes;       /* scratch per thread                           */
    size_t  part_bytes;         /* one split's (O, m, l)                        */
};

/* Per-thread scratch, carved from the work buffer. */
struct attn_scratch {
    float   *q;   /* (ATTN_ROWS, hdp) queries times scale */
    float   *o;   /* (ATTN_ROWS, hdp) unnormalised output */
    float   *qt;  /* (hdp, ATTN_ROWS) q transposed (AVX-512 prefill tiles) */
    float   *k;   /* (ATTN_BK, hdp) key block, F32 or packed cache rows */
    float   *v;   /* (ATTN_BK, hdp) value block, same                  */
    float   *s;   /* (ATTN_ROWS, ATTN_BK) scores, then P  */
    float   *m;   /* (ATTN_ROWS) running max              */
    float   *l;   /* (ATTN_ROWS) running sum              */
    int64_t *lim; /* (ATTN_ROWS) keys each row may see    */
    int     *valid; /* (ATTN_ROWS) of those, in this block  */
    /* one kv head's K and V rows [0, kv_upto) as F32 (kv_f32_rows rows
     * each, or NULL), kept from tile to tile: kv_at says whose (b, hk) */
    float   *kf, *vf;
    int64_t  kv_at, kv_upto;
};

/* One tile: which rows, and where they live. */
struct attn_tile {
    int64_t b, hk, h0, nh, t0, nt; /* batch, kv head, first head, heads, first token, tokens */
};

struct attn_ctx {
    const struct het_tensor *q, *k, *v;
    struct het_tensor       *dst;
    struct attn_plan         pl;
    float                    scale;
    int64_t                  n_past;
    enum het_cpu_isa         isa;
    enum het_cpu_stream      stream; /* the hint decode's F16 rows are asked for ahead with */
    het_attn_softmax_fn      softmax;
    het_attn_qk_fn           qk_f32;   /* on converted scratch rows   */
    het_attn_pv_fn           pv_f32;
    het_attn_qk_fn           qk_cache; /* on cache rows in place, or NULL */
    het_attn_pv_fn           pv_cache;
    bool                     t_zmm;    /* tiles of ATTN_T_MIN_ROWS rows and more: het_attn_t_* */
};

static size_t attn_align(size_t n) { return (n + ATTN_ALIGN - 1) & ~(size_t)(ATTN_ALIGN - 1); }

static bool attn_kv_type_ok(enum het_type t)
{
    return t == HET_TYPE_F32 || t == HET_TYPE_F16 || t == HET_TYPE_BF16;
}

static enum het_status attn_check(const struct het_tensor *dst)
{
    const struct het_tensor *q = dst->src[0], *k = dst->src[1], *v = dst->src[2];
    if (!q || !k || !v) return HET_ERR_INVALID;
    if (q->type != HET_TYPE_F32 || dst->type != HET_TYPE_F32 || !attn_kv_type_ok(k->type) ||
        !attn_kv_type_ok(v->type))
        return HET_ERR_UNSUPPORTED;
    if (!het_same_shape(q, dst) || !het_same_shape(k, v) || k->ne[0] != q->ne[0]) return HET_ERR_INVALID;
    if (q->ne[1] <= 0 || k->ne[1] <= 0 || q->ne[1] % k->ne[1] != 0) return HET_ERR_INVALID;
    if (k->ne[3] != 1 && k->ne[3] != q->ne[3]) return HET_ERR_INVALID;
    return HET_OK;
}

static void attn_plan_init(struct attn_plan *pl, const struct het_tensor *dst, int nth, size_t l2_bytes)
{
    const struct het_tensor *q = dst->src[0], *k = dst->src[1];
    pl->hd = q->ne[0];
    pl->hdp = (pl->hd + 7) & ~(int64_t)7;
    pl->n_head = q->ne[1];
    pl->n_kv_head = k->ne[1];
    pl->n_rep = pl->n_head / pl->n_kv_head;
    pl->n_tok = q->ne[2];
    pl->n_batch = q->ne[3];
    pl->n_kv = k->ne[2];
    pl->hg = pl->n_rep < ATTN_ROWS ? pl->n_rep : ATTN_ROWS;
    pl->n_hsub = (pl->n_rep + pl->hg - 1) / pl->hg;
    pl->tq = ATTN_ROWS / pl->hg;
    if (pl->tq > pl->n_tok) pl->tq = pl->n_tok > 0 ? pl->n_tok : 1;
    pl->n_ttiles = (pl->n_tok + pl->tq - 1) / pl->tq;
    pl->n_tiles = pl->n_batch * pl->n_ttiles * pl->n_kv_head * pl->n_hsub;

    pl->n_split = 1;
    if (pl->n_tiles > 0 && pl->n_tiles < nth) {
        int64_t want = (nth + pl->n_tiles - 1) / pl->n_tiles;
        int64_t most = pl->n_kv / ATTN_MIN_SPLIT;
        pl->n_split = want < most ? want : (most > 1 ? most : 1);
    }
    int64_t per = (pl->n_kv + pl->n_split - 1) / pl->n_split;
    pl->split_len = (per + ATTN_BK - 1) / ATTN_BK * ATTN_BK;

    const size_t hdp = (size_t)pl->hdp;
    /* prefill tiles of one kv head, one after another on a thread (largest
     * first), converted K and V once instead of block by block for every
     * tile: a head-major F16 cache whose kv head fits attn_kv_f32_bytes */
    const int64_t kv8 = (pl->n_kv + 7) & ~(int64_t)7;
    pl->kv_f32_rows = 0;
    if (pl->n_tok > 1 && pl->n_split == 1 && k->type == HET_TYPE_F16 && dst->src[2]->type == HET_TYPE_F16 &&
        pl->hd == pl->hdp && (size_t)kv8 * hdp * 2 * sizeof(float) <= attn_kv_f32_bytes(l2_bytes))
        pl->kv_f32_rows = kv8;
    pl->thread_bytes = 2 * attn_align((size_t)pl->kv_f32_rows * hdp * sizeof(float)) +
                       3 * attn_align(ATTN_ROWS * hdp * sizeof(float)) +
                       2 * attn_align(ATTN_BK * hdp * sizeof(float)) +
                       attn_align(ATTN_ROWS * ATTN_BK * sizeof(float)) +
                       2 * attn_align(ATTN_ROWS * sizeof(float)) + attn_align(ATTN_ROWS * sizeof(int64_t)) +
                       attn_align(ATTN_ROWS * sizeof(int));
    pl->part_bytes = pl->n_split > 1 ? attn_align(ATTN_ROWS * (hdp + 2) * sizeof(float)) : 0;
}

static size_t attn_total_bytes(const struct attn_plan *pl, int nth)
{
    return ATTN_ALIGN + (size_t)nth * pl->thread_bytes + (size_t)(pl->n_tiles * pl->n_split) * pl->part_bytes;
}

size_t het_cpu_attn_work_size(const struct het_tensor *node, int nth, size_t l2_bytes)
{
    if (attn_check(node) != HET_OK || nth < 1) return 0;
    struct attn_plan pl;
    attn_plan_init(&pl, node, nth, l2_bytes);
    return attn_total_bytes(&pl, nth);
}

/* ---- scratch and tiles ---------------------------------------------------- */

static char *attn_base(const struct het_compute_params *p)
{
    uintptr_t a = (uintptr_t)p->wdata;
    return (char *)((a + ATTN_ALIGN - 1) & ~(uintptr_t)(ATTN_ALIGN - 1));
}

static void attn_scratch_init(struct attn_scratch *sc, const struct attn_plan *pl, char *base)
{
    const size_t hdp = (size_t)pl->hdp;
    char *c = base;
    sc->q = (float *)c;   c += attn_align(ATTN_ROWS * hdp * sizeof(float));
    sc->o = (float *)c;   c += attn_align(ATTN_ROWS * hdp * sizeof(float));
    sc->qt = (float *)c;  c += attn_align(ATTN_ROWS * hdp * sizeof(float));
    sc->k = (float *)c;   c += attn_align(ATTN_BK * hdp * sizeof(float));
    sc->v = (float *)c;   c += attn_align(ATTN_BK * hdp * sizeof(float));
    sc->s = (float *)c;   c += attn_align(ATTN_ROWS * ATTN_BK * sizeof(float));
    sc->m = (float *)c;   c += attn_align(ATTN_ROWS * sizeof(float));
    sc->l = (float *)c;   c += attn_align(ATTN_ROWS * sizeof(float));
    sc->lim = (int64_t *)c; c += attn_align(ATTN_ROWS * sizeof(int64_t));
    sc->valid = (int *)c;   c += attn_align(ATTN_ROWS * sizeof(int));
    const size_t kvb = attn_align((size_t)pl->kv_f32_rows * hdp * sizeof(float));
    sc->kf = pl->kv_f32_rows ? (float *)c : NULL;
    sc->vf = pl->kv_f32_rows ? (float *)(c + kvb) : NULL;
    sc->kv_at = -1;
    sc->kv_upto = 0;
}

/* Tile number i -> rows. Order: batch, kv head, token tile, head subgroup:
 * the tiles taken one after another read the same kv head's rows. */
static void attn_tile_get(const struct attn_plan *pl, int64_t i, struct attn_tile *t)
{
    int64_t hsub = i % pl->n_hsub;  i /= pl->n_hsub;
    int64_t tt = i % pl->n_ttiles;  i /= pl->n_ttiles;
    t->hk = i % pl->n_kv_head;
    t->b = i / pl->n_kv_head;
    t->h0 = t->hk * pl->n_rep + hsub * pl->hg;
    t->nh = pl->n_rep - hsub * pl->hg < pl->hg ? pl->n_rep - hsub * pl->hg : pl->hg;
    t->t0 = tt * pl->tq;
    t->nt = pl->n_tok - t->t0 < pl->tq ? pl->n_tok - t->t0 : pl->tq;
}

/* Row r of a tile is (head h0 + r % nh, token t0 + r / nh). */
static const char *attn_q_row(const struct attn_ctx *c, const struct attn_tile *t, int64_t r)
{
    return het_vec_row(c->q, t->h0 + r % t->nh, t->t0 + r / t->nh, t->b);
}

/* Load F32/F16/BF16 row src (n elements, stride ss bytes) into dst as floats. */
static void attn_load_row(enum het_cpu_isa isa, float *dst, const char *src, int64_t n, size_t ss, enum het_type t)
{
    if (t == HET_TYPE_F32 && ss == sizeof(float)) memcpy(dst, src, (size_t)n * sizeof(float));
    else if (t == HET_TYPE_F16 && ss == sizeof(uint16_t)) het_vec_f16_to_f32(isa, n, dst, (const uint16_t *)src);
    else
        for (int64_t i = 0; i < n; i++) dst[i] = het_vec_load_elem(t, src + i * ss);
}

/* Rows [j0, j0 + nk) of kv head hk of a (k or v) into buf as F32, padded
 * with zeros to hdp columns. */
static void attn_load_block(const struct attn_ctx *c, const struct het_tensor *a, const struct attn_tile *t,
                            int64_t j0, int64_t nk, float *buf)
{
    const int64_t hd = c->pl.hd, hdp = c->pl.hdp;
    const int64_t b = t->b % a->ne[3];
    for (int64_t j = 0; j < nk; j++) {
        float *row = buf + j * hdp;
        attn_load_row(c->isa, row, het_vec_row(a, t->hk, j0 + j, b), hd, a->nb[0], a->type);
        memset(row + hd, 0, (size_t)(hdp - hd) * sizeof(float));
    }
}

/* Key or value rows [j0, j0 + nk) for the kernels. Cache rows the kernels
 * can read are used in place, except that rows far apart (a token-major
 * cache puts one head's rows n_kv_head rows apart) are packed into buf when
 * the tile reads them many times: rows a large power-of-two stride apart
 * fall into a few L1 sets and evict each other. Other layouts are converted
 * to F32 in buf. */
static const void *attn_rows(const struct attn_ctx *c, const struct het_tensor *a, const struct attn_tile *t,
                             int64_t j0, int64_t nk, bool reuse, void *buf, size_t *ld)
{
    if (c->qk_cache) {
        const char *src = het_vec_row(a, t->hk, j0, t->b % a->ne[3]);
        const size_t row = (size_t)c->pl.hd * a->nb[0];
        *ld = a->nb[2];
        if (!reuse || a->nb[2] == row) return src;
        for (int64_t j = 0; j < nk; j++) memcpy((char *)buf + j * row, src + j * a->nb[2], row);
        *ld = row;
        return buf;
    }
    attn_load_block(c, a, t, j0, nk, buf);
    *ld = (size_t)c->pl.hdp * sizeof(float);
    return buf;
}

/* Ask for rows [j0, j0 + nk) of a early when it is read in place with rows
 * far apart (the hardware prefetchers follow such strides poorly). */
static void attn_prefetch(const struct attn_ctx *c, const struct het_tensor *a, const struct attn_tile *t,
                          int64_t j0, int64_t nk)
{
    const size_t row = (size_t)c->pl.hd * a->nb[0];
    if (!c->qk_cache || a->nb[2] == row) return;
    het_vec_prefetch_rows(het_vec_row(a, t->hk, j0, t->b % a->ne[3]), nk, a->nb[2], row, false);
}

/* Queries of the tile times scale into sc->q; reset O, m, l; row limits. */
static void attn_tile_start(const struct attn_ctx *c, const struct attn_tile *t, struct attn_scratch *sc)
{
    const int64_t hd = c->pl.hd, hdp = c->pl.hdp, nr = t->nh * t->nt;
    for (int64_t r = 0; r < nr; r++) {
        float *qr = sc->q + r * hdp;
        const char *src = attn_q_row(c, t, r);
        if (c->q->nb[0] == sizeof(float) && (uintptr_t)src % sizeof(float) == 0) { /* one pass: scaled copy */
            het_vec_scale_f32(hd, qr, (const float *)(const void *)src, c->scale);
        } else {
            attn_load_row(c->isa, qr, src, hd, c->q->nb[0], HET_TYPE_F32);
            het_vec_scale_f32(hd, qr, qr, c->scale);
        }
        memset(qr + hd, 0, (size_t)(hdp - hd) * sizeof(float));
        int64_t lim = t->t0 + r / t->nh + c->n_past + 1;
        sc->lim[r] = lim < 0 ? 0 : lim > c->pl.n_kv ? c->pl.n_kv : lim;
        sc->m[r] = -INFINITY;
        sc->l[r] = 0.0f;
    }
    memset(sc->o, 0, (size_t)(nr * hdp) * sizeof(float));
}

/* attn_load_block, in one pass when the rows are adjacent F16 rows of
 * hdp elements (a head-major F16 cache). */
static void attn_load_f32(const struct attn_ctx *c, const struct het_tensor *a, const struct attn_tile *t,
                          int64_t j0, int64_t nk, float *buf)
{
    const size_t row = (size_t)c->pl.hd * sizeof(uint16_t);
    if (a->type != HET_TYPE_F16 || c->pl.hd != c->pl.hdp || a->nb[0] != sizeof(uint16_t) || a->nb[2] != row) {
        attn_load_block(c, a, t, j0, nk, buf);
        return;
    }
    het_vec_f16_to_f32(c->isa, nk * c->pl.hd, buf, (const void *)het_vec_row(a, t->hk, j0, t->b % a->ne[3]));
}

/* The end of the keys a tile of nr rows reads, at most kb: the last row
 * sees the most. */
static int64_t attn_keys_end(const struct attn_scratch *sc, int nr, int64_t kb)
{
    return sc->lim[nr - 1] < kb ? sc->lim[nr - 1] : kb;
}

/* How many keys of the block [j0, j0 + nk) each row may see, into sc->valid. */
static void attn_block_valid(struct attn_scratch *sc, int nr, int64_t j0, int nk)
{
    for (int r = 0; r < nr; r++) {
        int64_t n = sc->lim[r] - j0;
        sc->valid[r] = n < 0 ? 0 : n > nk ? nk : (int)n;
    }
}

/* Keys [0, kend) of the tile's kv head as F32 in sc->kf and sc->vf (the
 * rows up to a multiple of 8 readable: K's past the converted ones zeros),
 * converting only the rows not there yet; false: no room for them, or not a
 * head-major F16 cache (attn_load_f32 converts block by block then). */
static bool attn_kv_f32(const struct attn_ctx *c, const struct attn_tile *t, struct attn_scratch *sc, int64_t kend)
{
    const size_t row = (size_t)c->pl.hd * sizeof(uint16_t);
    if (!sc->kf || c->k->nb[0] != sizeof(uint16_t) || c->k->nb[2] != row || c->v->nb[0] != sizeof(uint16_t) ||
        c->v->nb[2] != row)
        return false;
    const int64_t bk = t->b % c->k->ne[3], bv = t->b % c->v->ne[3];
    const int64_t at = (bk * c->pl.n_kv_head + t->hk) * c->pl.n_batch + bv;
    if (sc->kv_at != at) {
        sc->kv_at = at;
        sc->kv_upto = 0;
    }
    const int64_t hd = c->pl.hd;
    if (kend > sc->kv_upto) {
        const int64_t j0 = sc->kv_upto, n = kend - j0, k8 = (kend + 7) & ~(int64_t)7;
        het_vec_f16_to_f32(c->isa, n * hd, sc->kf + j0 * hd, (const void *)het_vec_row(c->k, t->hk, j0, bk));
        het_vec_f16_to_f32(c->isa, n * hd, sc->vf + j0 * hd, (const void *)het_vec_row(c->v, t->hk, j0, bv));
        memset(sc->kf + kend * hd, 0, (size_t)((k8 - kend) * hd) * sizeof(float));
        sc->kv_upto = kend;
    }
    return true;
}

/* attn_tile_run for a tile of many rows with AVX-512: queries and scores
 * transposed (attention.h), key and value blocks converted to F32 once for
 * all the rows (attn_kv_f32: once for all the tiles of the kv head that
 * run on this thread). */
static void attn_tile_run_t(const struct attn_ctx *c, const struct attn_tile *t, struct attn_scratch *sc, int64_t ka,
                            int64_t kb)
{
    const int nr = (int)(t->nh * t->nt), hdp = (int)c->pl.hdp, nrv = (nr + 15) / 16;
    het_attn_t_transpose_avx512(nr, hdp, sc->q, sc->qt, ATTN_ROWS);
    const int64_t kend = attn_keys_end(sc, nr, kb);
    const bool kept = attn_kv_f32(c, t, sc, kend);
    for (int64_t j0 = ka; j0 < kend; j0 += ATTN_BK) {
        const int nk = (int)(kend - j0 < ATTN_BK ? kend - j0 : ATTN_BK), nk8 = (nk + 7) & ~7;
        const float *k = sc->k, *v = sc->v;
        if (kept) {
            k = sc->kf + j0 * hdp;
            v = sc->vf + j0 * hdp;
        } else {
            attn_load_f32(c, c->k, t, j0, nk, sc->k);
            memset(sc->k + (size_t)nk * hdp, 0, (size_t)(nk8 - nk) * hdp * sizeof(float));
            attn_load_f32(c, c->v, t, j0, nk, sc->v);
        }
        attn_block_valid(sc, nr, j0, nk);
        het_attn_t_qk_avx512(nrv, nk8, hdp, sc->qt, ATTN_ROWS, k, sc->s);
        het_attn_t_softmax_avx512(nr, nk, sc->s, ATTN_ROWS, sc->valid, sc->m, sc->l, sc->o, hdp);
        het_attn_t_pv_avx512(nr, nk, hdp, sc->s, ATTN_ROWS, v, sc->o);
    }
}

/* Stream keys [ka, kb) through the tile held in sc. */
static void attn_tile_run(const struct attn_ctx *c, const struct attn_tile *t, struct attn_scratch *sc, int64_t ka,
                          int64_t kb)
{
    const int nr = (int)(t->nh * t->nt), hdp = (int)c->pl.hdp;
    if (c->t_zmm && nr >= ATTN_T_MIN_ROWS) {
        attn_tile_run_t(c, t, sc, ka, kb);
        return;
    }
    const het_attn_qk_fn qk = c->qk_cache ? c->qk_cache : c->qk_f32;
    const het_attn_pv_fn pv = c->pv_cache ? c->pv_cache : c->pv_f32;
    const int64_t kend = attn_keys_end(sc, nr, kb);
    for (int64_t j0 = ka; j0 < kend; j0 += ATTN_BK) {
        const int nk = (int)(kend - j0 < ATTN_BK ? kend - j0 : ATTN_BK);
        size_t ldk, ldv;
        const void *k = attn_rows(c, c->k, t, j0, nk, nr > ATTN_QK_ROWS, sc->k, &ldk);
        const void *v = attn_rows(c, c->v, t, j0, nk, nr > ATTN_PV_ROWS, sc->v, &ldv);
        attn_block_valid(sc, nr, j0, nk);
        if (nr <= ATTN_QK_ROWS && j0 + ATTN_BK < kend) { /* decode: each row is read once, as it streams */
            const int64_t nn = kend - j0 - ATTN_BK < ATTN_BK ? kend - j0 - ATTN_BK : ATTN_BK;
            attn_prefetch(c, c->k, t, j0 + ATTN_BK, nn);
            attn_prefetch(c, c->v, t, j0 + ATTN_BK, nn);
        }
        qk(nr, nk, hdp, sc->q, k, ldk, sc->s, ATTN_BK);
        c->softmax(nr, nk, sc->s, ATTN_BK, sc->valid, sc->m, sc->l, sc->o, hdp);
        pv(nr, nk, hdp, sc->s, ATTN_BK, v, ldv, sc->o);
    }
}

/* out row = O / l (zeros for a row that saw no key). */
static void attn_store_row(const struct attn_ctx *c, const struct attn_tile *t, int64_t r, const float *o, float l)
{
    char *y = het_vec_row(c->dst, t->h0 + r % t->nh, t->t0 + r / t->nh, t->b);
    const size_t sy = c->dst->nb[0];
    const float inv = l > 0.0f ? 1.0f / l : 0.0f;
    if (sy == sizeof(float)) { het_vec_scale_f32(c->pl.hd, (float *)y, o, inv); return; }
    for (int64_t d = 0; d < c->pl.hd; d++) *(float *)(y + d * sy) = o[d] * inv;
}

/* ---- split-KV merge ------------------------------------------------------- */

/* Split s of tile i: O (ATTN_ROWS, hdp), then m, l (ATTN_ROWS each). */
static float *attn_part(const struct attn_ctx *c, char *base, int nth, int64_t i, int64_t s)
{
    char *parts = base + (size_t)nth * c->pl.thread_bytes;
    return (float *)(parts + (size_t)(i * c->pl.n_split + s) * c->pl.part_bytes);
}

static void attn_part_save(const struct attn_ctx *c, const struct attn_scratch *sc, int64_t nr, float *part)
{
    const size_t hdp = (size_t)c->pl.hdp;
    memcpy(part, sc->o, (size_t)nr * hdp * sizeof(float));
    memcpy(part + ATTN_ROWS * hdp, sc->m, (size_t)nr * sizeof(float));
    memcpy(part + ATTN_ROWS * (hdp + 1), sc->l, (size_t)nr * sizeof(float));
}

/* Merge the splits of row r of tile i into dst, using acc (hdp floats). */
static void attn_merge_row(const struct attn_ctx *c, char *base, int nth, int64_t i, int64_t r, float *acc)
{
    const int64_t hdp = c->pl.hdp, ns = c->pl.n_split;
    float mx = -INFINITY;
    for (int64_t s = 0; s < ns; s++) {
        float m = attn_part(c, base, nth, i, s)[ATTN_ROWS * hdp + r];
        mx = m > mx ? m : mx;
    }
    float l = 0.0f;
    memset(acc, 0, (size_t)hdp * sizeof(float));
    for (int64_t s = 0; s < ns && mx > -INFINITY; s++) {
        const float *part = attn_part(c, base, nth, i, s);
        float m = part[ATTN_ROWS * hdp + r];
        if (m == -INFINITY) continue;
        float w = expf(m - mx);
        l += w * part[ATTN_ROWS * (hdp + 1) + r];
        for (int64_t d = 0; d < hdp; d++) acc[d] += w * part[r * hdp + d];
    }
    struct attn_tile t;
    attn_tile_get(&c->pl, i, &t);
    attn_store_row(c, &t, r, acc, l);
}

/* ---- scalar inner kernels ------------------------------------------------- */

static void attn_qk_scalar(int nr, int nk, int hdp, const float *q, const void *k, size_t ldk, float *s, int lds)
{
    for (int j = 0; j < nk; j++) {
        const float *kr = (const float *)((const char *)k + j * ldk);
        for (int r = 0; r < nr; r++) {
            const float *qr = q + (size_t)r * hdp;
            float sum = 0.0f;
            for (int d = 0; d < hdp; d++) sum += qr[d] * kr[d];
            s[r * lds + j] = sum;
        }
    }
}

static void attn_pv_scalar(int nr, int nk, int hdp, const float *s, int lds, const void *v, size_t ldv, float *o)
{
    for (int r = 0; r < nr; r++)
        for (int j = 0; j < nk; j++) {
            const float w = s[r * lds + j];
            const float *vr = (const float *)((const char *)v + j * ldv);
            if (w != 0.0f) het_vec_mad_f32(hdp, o + (size_t)r * hdp, vr, w);
        }
}

static void attn_softmax_scalar(int nr, int nk, float *s, int lds, const int *valid, float *m, float *l, float *o,
                                int hdp)
{
    for (int r = 0; r < nr; r++) {
        float *sr = s + (size_t)r * lds;
        int n = valid[r] < nk ? valid[r] : nk;
        if (n <= 0) { memset(sr, 0, (size_t)nk * sizeof(float)); continue; }
        float mb = het_vec_max_f32(HET_CPU_ISA_SCALAR, n, sr);
        float m_new = mb > m[r] ? mb : m[r];
        float sum = het_vec_exp_sum_f32(HET_CPU_ISA_SCALAR, n, sr, sr, m_new);
        memset(sr + n, 0, (size_t)(nk - n) * sizeof(float));
        if (m_new != m[r]) {
            float alpha = m[r] == -INFINITY ? 0.0f : expf(m[r] - m_new);
            het_vec_scale_f32(hdp, o + (size_t)r * hdp, o + (size_t)r * hdp, alpha);
            l[r] *= alpha;
            m[r] = m_new;
        }
        l[r] += sum;
    }
}

/* Choose the inner kernels for this ISA and these K/V layouts: AVX-512 ones
 * for head dims that are a multiple of 16, else AVX2 ones. */
static void attn_pick_kernels(struct attn_ctx *c)
{
    const bool avx2 = het_vec_use_avx2(c->isa);
    const bool zmm = c->isa >= HET_CPU_ISA_AVX512 && c->pl.hd % 16 == 0;
    c->softmax = zmm ? het_attn_softmax_avx512 : avx2 ? het_attn_softmax_avx2 : attn_softmax_scalar;
    c->qk_f32 = zmm ? het_attn_qk_f32_avx512 : avx2 ? het_attn_qk_f32_avx2 : attn_qk_scalar;
    c->pv_f32 = zmm ? het_attn_pv_f32_avx512 : avx2 ? het_attn_pv_f32_avx2 : attn_pv_scalar;
    c->qk_cache = NULL;
    c->pv_cache = NULL;
    c->t_zmm = zmm;
    const enum het_type t = c->k->type;
    const size_t es = t == HET_TYPE_F32 ? sizeof(float) : sizeof(uint16_t);
    if (!avx2 || c->pl.hd % 8 != 0 || c->v->type != t || (t != HET_TYPE_F32 && t != HET_TYPE_F16) ||
        c->k->nb[0] != es || c->v->nb[0] != es)
        return;
    /* an F16 cache's rows asked for ahead with the weights' raced hint */
    static const het_attn_qk_fn qk512[HET_CPU_STREAM_COUNT] = {
        [HET_CPU_STREAM_NTA] = het_attn_qk_f16_avx512, [HET_CPU_STREAM_T0] = het_attn_qk_f16_t0_avx512,
        [HET_CPU_STREAM_T1] = het_attn_qk_f16_t1_avx512 };
    static const het_attn_pv_fn pv512[HET_CPU_STREAM_COUNT] = {
        [HET_CPU_STREAM_NTA] = het_attn_pv_f16_avx512, [HET_CPU_STREAM_T0] = het_attn_pv_f16_t0_avx512,
        [HET_CPU_STREAM_T1] = het_attn_pv_f16_t1_avx512 };
    static const het_attn_qk_fn qk256[HET_CPU_STREAM_COUNT] = {
        [HET_CPU_STREAM_NTA] = het_attn_qk_f16_avx2, [HET_CPU_STREAM_T0] = het_attn_qk_f16_t0_avx2,
        [HET_CPU_STREAM_T1] = het_attn_qk_f16_t1_avx2 };
    const int h = c->stream < HET_CPU_STREAM_COUNT ? (int)c->stream : HET_CPU_STREAM_NTA;
    if (zmm) {
        c->qk_cache = t == HET_TYPE_F16 ? qk512[h] : het_attn_qk_f32_avx512;
        c->pv_cache = t == HET_TYPE_F16 ? pv512[h] : het_attn_pv_f32_avx512;
        return;
    }
    c->qk_cache = t == HET_TYPE_F16 ? qk256[h] : het_attn_qk_f32_avx2;
    c->pv_cache = t == HET_TYPE_F16 ? het_attn_pv_f16_avx2 : het_attn_pv_f32_avx2; /* asks with T1 (attn_avx2.c) */
}

/* ---- entry point ------------------------------------------------------------ */

/* A decode tile (a GQA group of query rows, read in place from an F16 or
 * F32 cache) reads each K and V row once, from memory: the kernels ask for
 * the row HET_ATTN_PF_KEYS keys ahead of the one they read, so a tile's
 * first HET_ATTN_PF_KEYS rows of each are asked for here, before its queries
 * are loaded, instead of arriving one miss after another (NTA when the
 * kernels ask with NTA, else into the caches). bench_attn -t 2 (16/8 heads
 * of 128, F16 cache, Zen 5, the rounds alternating with and without): 0.79-0.80x the time at 16 keys,
 * 0.84-0.88x at 64, 0.91-0.93x at 256, 0.96-0.97x at 1024, 0.99x at 2048;
 * 16 or 32 rows did less, T1 hints less still. In a decode token, whose
 * cache rows the NTA weight stream leaves partly in L3, it is within the
 * noise: 0.998-1.000x the token time from an empty cache, 0.999-1.004x
 * from 1024 positions (Q4_0 0.6B, 8-token blocks alternating). */
static void attn_ask_first_rows(const struct attn_ctx *c, const struct attn_tile *t, int64_t ka, int64_t kb)
{
    if (!c->qk_cache || t->nh * t->nt > ATTN_QK_ROWS) return;
    const int64_t n = kb - ka < HET_ATTN_PF_KEYS ? kb - ka : HET_ATTN_PF_KEYS;
    for (int kv = 0; kv < 2; kv++) {
        const struct het_tensor *a = kv ? c->v : c->k;
        het_vec_prefetch_rows(het_vec_row(a, t->hk, ka, t->b % a->ne[3]), n, a->nb[2], (size_t)c->pl.hd * a->nb[0],
                              c->stream == HET_CPU_STREAM_NTA);
    }
}

/* Work item w (tile * n_split + split): its tile, its keys [ka, kb). */
static void attn_run_item(const struct attn_ctx *c, char *base, int nth, struct attn_scratch *sc, int64_t w)
{
    struct attn_tile t;
    int64_t i = w / c->pl.n_split, s = w % c->pl.n_split;
    attn_tile_get(&c->pl, i, &t);
    int64_t ka = s * c->pl.split_len, kb = ka + c->pl.split_len;
    if (kb > c->pl.n_kv) kb = c->pl.n_kv;
    attn_ask_first_rows(c, &t, ka, kb);
    attn_tile_start(c, &t, sc);
    attn_tile_run(c, &t, sc, ka, kb);
    const int64_t nr = t.nh * t.nt;
    if (c->pl.n_split > 1) {
        attn_part_save(c, sc, nr, attn_part(c, base, nth, i, s));
        return;
    }
    for (int64_t r = 0; r < nr; r++) attn_store_row(c, &t, r, sc->o + r * c->pl.hdp, sc->l[r]);
}

/* The items, last first (causal tiles grow with the token index, so the
 * largest go out first and the small ones even out the end). */
static void attn_run_items(const struct attn_ctx *c, const struct het_compute_params *p, char *base)
{
    struct attn_scratch sc;
    attn_scratch_init(&sc, &c->pl, base + (size_t)p->ith * c->pl.thread_bytes);
    const int64_t n_items = c->pl.n_tiles * c->pl.n_split;
    const int64_t np = n_items < HET_CPU_PARTS_MAX ? n_items : HET_CPU_PARTS_MAX;
    for (int64_t k = het_cpu_part_first(p, np); k < np; k = het_cpu_part_next(p, np, k)) {
        int64_t lo, hi;
        het_vec_split(n_items, (int)k, (int)np, &lo, &hi);
        for (int64_t x = lo; x < hi; x++) attn_run_item(c, base, p->nth, &sc, n_items - 1 - x);
    }
}

enum het_status het_cpu_attn(const struct het_compute_params *p, struct het_tensor *dst)
{
    enum het_status st = attn_check(dst);
    if (st != HET_OK) return st;
    struct attn_ctx c = {
        .q = dst->src[0], .k = dst->src[1], .v = dst->src[2], .dst = dst,
        .scale = het_get_op_param_f32(dst, 0), .n_past = dst->op_params[1], .isa = p->isa, .stream = p->stream,
    };
    attn_plan_init(&c.pl, dst, p->nth, p->l2_bytes);
    attn_pick_kernels(&c);
    if (!p->wdata || p->wsize < attn_total_bytes(&c.pl, p->nth)) return HET_ERR_INVALID;
    char *base = attn_base(p);

    attn_run_items(&c, p, base);
    if (c.pl.n_split == 1) return HET_OK;

    struct attn_scratch sc;
    attn_scratch_init(&sc, &c.pl, base + (size_t)p->ith * c.pl.thread_bytes);
    const int64_t rows = c.pl.n_tiles * ATTN_ROWS;
    const int64_t np = het_cpu_n_parts(p, rows, het_vec_part_rows(c.pl.hdp * c.pl.n_split));
    for (int64_t k = het_cpu_part_first(p, np); k < np; k = het_cpu_part_next(p, np, k)) {
        int64_t lo, hi;
        het_vec_split(rows, (int)k, (int)np, &lo, &hi);
        for (int64_t x = lo; x < hi; x++) {
            int64_t i = x / ATTN_ROWS, r = x % ATTN_ROWS;
            struct attn_tile t;
            attn_tile_get(&c.pl, i, &t);
            if (r < t.nh * t.nt) attn_merge_row(&c, base, p->nth, i, r, sc.o);
        }
    }
    return HET_OK;
}
