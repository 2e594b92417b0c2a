/*
 * sample.c — choosing the next token from logits (het/model.h): logit bias,
 * repetition penalties over a window of recent tokens, the json_object
 * constraint, then greedy (temp 0) or temperature + top-k + top-p + min-p
 * with a seeded generator, so a run is reproducible for a given seed; and
 * the log-probabilities reported beside a sampled token.
 *
 * Sampling walks the candidates most likely first, but sorts only what it
 * must: top-k keeps its k in one pass with a heap, and up to
 * SAMPLE_SORT_MAX candidates are sorted and walked as they always were;
 * more (no top-k: the server's default) are never sorted: top-p's cut and
 * the draw add the weights up per bucket of the scaled logit, keep the
 * bucket where the running sum passes their mark, and narrow it so until
 * few are left to sort (cand_narrow); without top-k the first buckets are
 * made by token id and only the chosen bucket's tokens become candidates
 * (vocab_prefix); min-p's cut is a count. Sorting all
 * of a 151,936-token vocabulary for every token took ~20 ms, as long as
 * decoding the token (Qwen3-0.6B, two Zen 4 cores: 25 tok/s sampled
 * against 59 greedy). The order is the full sort's (scaled logit, then
 * token id), and the weights are e^(w - largest) (sample_exp.h), so a seed
 * draws the tokens a full sort would, except where a sum over more than
 * SAMPLE_SORT_MAX candidates, added in another order, rounds across a cut
 * or the drawn number.
 */
#include "het/model.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/json_prefix.h"
#include "model/json_vocab.h"
#include "model/sample_exp.h"

#define DEFAULT_PENALTY_LAST_N 64
#define MAX_PENALTY_LAST_N     65536  /* "all" (-1) is this many: more than any context here */
#define SAMPLE_SORT_MAX        4096   /* candidates (after top-k) sampled by sorting them all */

struct cand { float w; int32_t id; };

struct het_sampler {
    struct het_sampler_params p;
    int32_t  n_vocab;
    uint64_t rng;          /* xorshift64* state */
    struct cand *cand;     /* n_vocab candidates, reused per call */
    float   *work;         /* n_vocab adjusted logits (bias, penalties, constraint) */
    float   *weight;       /* n_vocab candidates' weights, by token id */
    float   *scaled;       /* n_vocab logits / temp */
    uint8_t *bucket;       /* n_vocab: each scaled logit's bucket (vocab_prefix) */
    struct het_logit_bias *bias;
    /* penalties: a ring of the last `window` tokens and each token's count in it */
    int32_t *ring, window, ring_len, ring_head;
    int32_t *count;
    /* json_object: the vocabulary's texts, and the recogniser's state */
    struct het_json_vocab *json_vocab;
    struct het_json_prefix json;
};

/* The largest value first, as eight running maxima (one compare chain
 * through the best index and its logit took ~12 cycles a logit: 0.56 ms for
 * 151,936 of them, every token), then the first index holding it. */
int32_t het_argmax(const float *logits, int32_t n)
{
    float m[8] = { -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY };
    int32_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++) m[k] = logits[i + k] > m[k] ? logits[i + k] : m[k];
    float top = -INFINITY;
    for (; i < n; i++) top = logits[i] > top ? logits[i] : top;
    for (int k = 0; k < 8; k++) top = m[k] > top ? m[k] : top;
    for (i = 0; i < n; i++)
        if (logits[i] == top) return i;
    return 0; /* nothing but NaN */
}

static bool penalties_on(const struct het_sampler_params *p)
{
    return (p->repeat_penalty > 0 && p->repeat_penalty != 1.0f) || p->presence_penalty != 0 ||
           p->frequency_penalty != 0;
}

het_sampler *het_sampler_init(const struct het_sampler_params *p, int32_t n_vocab)
{
    if (p->json_object && !p->tok) return NULL;
    het_sampler *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->p = *p;
    s->n_vocab = n_vocab;
    s->rng = p->seed ? p->seed : 0x853c49e6748fea9bull;
    s->cand = malloc((size_t)n_vocab * sizeof *s->cand);
    s->work = malloc((size_t)n_vocab * sizeof *s->work);
    s->weight = malloc((size_t)n_vocab * sizeof *s->weight);
    s->scaled = malloc((size_t)n_vocab * sizeof *s->scaled);
    s->bucket = malloc((size_t)n_vocab);
    bool ok = s->cand && s->work && s->weight && s->scaled && s->bucket;
    if (ok && p->n_logit_bias > 0) {
        s->bias = malloc((size_t)p->n_logit_bias * sizeof *s->bias);
        if ((ok = s->bias != NULL)) memcpy(s->bias, p->logit_bias, (size_t)p->n_logit_bias * sizeof *s->bias);
    }
    s->p.logit_bias = s->bias;
    if (ok && penalties_on(p)) {
        s->window = p->penalty_last_n == 0 ? DEFAULT_PENALTY_LAST_N : p->penalty_last_n;
        if (s->window < 0 || s->window > MAX_PENALTY_LAST_N) s->window = MAX_PENALTY_LAST_N;
        s->count = calloc((size_t)n_vocab, sizeof *s->count);
        s->ring = malloc((size_t)s->window * sizeof *s->ring);
        ok = s->count && s->ring;
    }
    if (ok && p->json_object) {
        ok = (s->json_vocab = het_json_vocab_new(p->tok, n_vocab)) != NULL;
        het_json_prefix_init(&s->json);
    }
    if (!ok) {
        het_sampler_free(s);
        return NULL;
    }
    return s;
}

void het_sampler_free(het_sampler *s)
{
    if (!s) return;
    free(s->cand);
    free(s->work);
    free(s->weight);
    free(s->scaled);
    free(s->bucket);
    free(s->bias);
    free(s->ring);
    free(s->count);
    het_json_vocab_free(s->json_vocab);
    free(s);
}

void het_sampler_accept(het_sampler *s, int32_t token, bool generated)
{
    if (token < 0 || token >= s->n_vocab) return;
    if (s->count) {
        if (s->ring_len == s->window) { /* full: the oldest token leaves the window */
            s->count[s->ring[s->ring_head]]--;
            s->ring[s->ring_head] = token;
            s->ring_head = (s->ring_head + 1) % s->window;
        } else {
            s->ring[(s->ring_head + s->ring_len++) % s->window] = token;
        }
        s->count[token]++;
    }
    if (generated && s->json_vocab) {
        struct het_json_prefix next = s->json;
        uint32_t len;
        const char *text = het_json_vocab_piece(s->json_vocab, token, &len);
        if (het_json_prefix_feed(&next, text, len)) s->json = next;
    }
}

bool het_sampler_json_done(const het_sampler *s)
{
    return s->json_vocab && het_json_prefix_done(&s->json);
}

/* bias, penalties and the JSON constraint into s->work; false: none apply
 * (sample from the logits as they are) */
static bool adjust(het_sampler *s, const float *logits)
{
    if (!s->p.n_logit_bias && !s->count && !s->json_vocab) return false;
    float *w = s->work;
    memcpy(w, logits, (size_t)s->n_vocab * sizeof *w);
    for (int32_t i = 0; i < s->p.n_logit_bias; i++)
        if (s->bias[i].token >= 0 && s->bias[i].token < s->n_vocab) w[s->bias[i].token] += s->bias[i].bias;
    if (s->count) {
        float rp = s->p.repeat_penalty > 0 ? s->p.repeat_penalty : 1.0f;
        for (int32_t k = 0; k < s->ring_len; k++) {
            int32_t t = s->ring[(s->ring_head + k) % s->window];
            if (s->count[t] <= 0) continue;
            /* once per distinct token: mark it done by negating its count */
            int32_t c = s->count[t];
            w[t] = w[t] > 0 ? w[t] / rp : w[t] * rp;
            w[t] -= (float)c * s->p.frequency_penalty + s->p.presence_penalty;
            s->count[t] = -c;
        }
        for (int32_t k = 0; k < s->ring_len; k++) {
            int32_t t = s->ring[(s->ring_head + k) % s->window];
            if (s->count[t] < 0) s->count[t] = -s->count[t];
        }
    }
    if (s->json_vocab) het_json_vocab_mask(s->json_vocab, &s->json, w);
    return true;
}

static double next_uniform(het_sampler *s)
{
    s->rng ^= s->rng >> 12;
    s->rng ^= s->rng << 25;
    s->rng ^= s->rng >> 27;
    return ((s->rng * 0x2545F4914F6CDD1Dull) >> 11) * (1.0 / 9007199254740992.0);
}

/* The order candidates are looked at in: the larger weight first, and of
 * equal weights the lower token id (the order a stable sort gave). */
static inline bool cand_before(const struct cand *a, const struct cand *b)
{
    return a->w > b->w || (a->w == b->w && a->id < b->id);
}

static int cand_cmp(const void *a, const void *b)
{
    const struct cand *x = a, *y = b;
    return cand_before(x, y) ? -1 : cand_before(y, x) ? 1 : 0;
}

static inline void cand_swap(struct cand *c, int32_t i, int32_t j)
{
    const struct cand t = c[i];
    c[i] = c[j];
    c[j] = t;
}

/* The index of the last of c[0, n) in the order (the first, with first). */
static int32_t cand_end(const struct cand *c, int32_t n, bool first)
{
    int32_t at = 0;
    for (int32_t i = 1; i < n; i++)
        if (first ? cand_before(&c[i], &c[at]) : cand_before(&c[at], &c[i])) at = i;
    return at;
}

/* Restore the heap property below slot i of h[0, n): every slot comes
 * before its children in the order, so h[0] is the last of the kept. */
static void cand_sift_down(struct cand *h, int32_t n, int32_t i)
{
    for (;;) {
        int32_t last = i;
        const int32_t l = 2 * i + 1, r = l + 1;
        if (l < n && cand_before(&h[last], &h[l])) last = l;
        if (r < n && cand_before(&h[last], &h[r])) last = r;
        if (last == i) return;
        cand_swap(h, i, last);
        i = last;
    }
}

/* The first k of the finite scaled logits w[0, n) in the order, into
 * c[0, k) in any order; returns how many there were (fewer than k when
 * fewer are finite). One pass with a heap of the k kept, its root the last
 * of them: a logit not above the root's is passed over at once (an equal
 * one comes later in the order, its id being larger), and one above it
 * takes the root's place (about k ln(n/k) times in all). */
static int32_t cand_top_k(struct cand *c, const float *w, int32_t n, int32_t k)
{
    int32_t kept = 0, i = 0;
    for (; i < n && kept < k; i++) {
        if (!(w[i] > -INFINITY)) continue; /* -inf or NaN: never */
        c[kept] = (struct cand){ w[i], i };
        for (int32_t at = kept++; at > 0 && cand_before(&c[(at - 1) / 2], &c[at]); at = (at - 1) / 2)
            cand_swap(c, at, (at - 1) / 2);
    }
    for (; i < n; i++) {
        if (!(w[i] > c[0].w)) continue;
        c[0] = (struct cand){ w[i], i };
        cand_sift_down(c, kept, 0);
    }
    return kept;
}

/* a candidate's weight relative to the most likely one's, top its scaled
 * logit (sample_exp.h: the same bits as the vector loop in
 * het_sampler_sample) */
static inline float cand_weight(float w, float top) { return het_sample_exp(w - top); }

/* Few candidates: all sorted, and each cut and the draw walk them in order. */
static int32_t sample_sorted(het_sampler *s, struct cand *c, int32_t n)
{
    qsort(c, (size_t)n, sizeof *c, cand_cmp);
    const float top = c[0].w;
    double sum = 0;
    for (int32_t i = 0; i < n; i++) sum += (c[i].w = cand_weight(c[i].w, top));
    if (s->p.top_p > 0.0f && s->p.top_p < 1.0f) {
        double acc = 0;
        for (int32_t i = 0; i < n; i++)
            if ((acc += c[i].w / sum) >= s->p.top_p) { n = i + 1; break; }
    }
    if (s->p.min_p > 0.0f) /* c[0] is the most likely, with weight 1 */
        for (int32_t i = 1; i < n; i++)
            if (c[i].w < s->p.min_p) { n = i; break; }
    sum = 0;
    for (int32_t i = 0; i < n; i++) sum += c[i].w;
    const double r = next_uniform(s) * sum;
    double acc = 0;
    for (int32_t i = 0; i < n; i++)
        if (r < (acc += c[i].w)) return c[i].id;
    return c[n - 1].id;
}

#define PREFIX_BUCKETS 256
#define PREFIX_SPAN    32.0f /* scaled logits this far below a range's largest share its last bucket */
#define PREFIX_SMALL   64    /* a range this small is sorted and walked */

/* The bucket of scaled logit w, `scale` buckets a unit below top: buckets
 * keep the order (a larger logit never falls in a later bucket). */
static inline int cand_bucket(float w, float top, float scale)
{
    const float d = (top - w) * scale;
    return d < (float)(PREFIX_BUCKETS - 1) ? (int)d : PREFIX_BUCKETS - 1;
}

/* The bucket of mass[][] (four histograms, by bucket) where the running
 * sum, starting at *before, reaches `target` (passes it, if strict); the
 * buckets before it add their weights to *before. PREFIX_BUCKETS when the
 * target is past them all. */
static int mass_bucket(double mass[4][PREFIX_BUCKETS], double *before, double target, bool strict)
{
    int b = 0;
    for (; b < PREFIX_BUCKETS; b++) {
        const double m = (mass[0][b] + mass[1][b]) + (mass[2][b] + mass[3][b]);
        if (strict ? *before + m > target : *before + m >= target) break;
        *before += m;
    }
    return b;
}

/* The length m of the shortest prefix of the order whose weights (e[id])
 * add up to at least `target` (more than it, if `strict`), counted in
 * c[lo, hi) after `base`, the weights of what comes before c[lo, hi): c[m - 1]
 * is then the m-th in the order and, with `whole`, c[0, m) holds the prefix
 * (c[0, lo) is in it already; without `whole`, only c[m - 1] is meant).
 * -1 when even all of c[lo, hi) does not reach the target. The candidates
 * still in play are counted into buckets of their scaled logit over their
 * own range (four histograms, so runs in one bucket do not wait on each
 * other), the bucket where the sum passes the target stays in play, and so
 * on until few are left, which are sorted and walked: no pass branches at
 * random, and a flat distribution (random weights, a high temperature)
 * narrows as fast as a peaked one. */
static int32_t cand_narrow(struct cand *c, int32_t lo, int32_t hi, const float *e, double base, double target,
                           bool strict, bool whole)
{
    for (int level = 0; hi - lo > PREFIX_SMALL && level < 8; level++) {
        float top = c[lo].w, low = c[lo].w;
        for (int32_t i = lo + 1; i < hi; i++) {
            top = c[i].w > top ? c[i].w : top;
            low = c[i].w < low ? c[i].w : low;
        }
        if (!(top > low)) break; /* one logit: the order is the ids' */
        const float span = top - low < PREFIX_SPAN ? top - low : PREFIX_SPAN;
        const float scale = (float)(PREFIX_BUCKETS - 1) / span;
        double mass[4][PREFIX_BUCKETS] = { { 0 } };
        for (int32_t i = lo; i < hi; i++) mass[i & 3][cand_bucket(c[i].w, top, scale)] += e[c[i].id];
        double before = base;
        const int b = mass_bucket(mass, &before, target, strict);
        if (b == PREFIX_BUCKETS) {
            if (level == 0) return -1; /* the target is past every weight */
            break;                     /* rounding: walk what is in play */
        }
        int32_t at = lo;
        if (whole)
            for (int32_t i = lo; i < hi; i++)
                if (cand_bucket(c[i].w, top, scale) < b) cand_swap(c, i, at++);
        int32_t end = at;
        for (int32_t i = at; i < hi; i++)
            if (cand_bucket(c[i].w, top, scale) == b) cand_swap(c, i, end++);
        lo = at;
        hi = end;
        base = before;
    }
    qsort(c + lo, (size_t)(hi - lo), sizeof *c, cand_cmp);
    for (int32_t i = lo; i < hi; i++) {
        base += e[c[i].id];
        if (strict ? base > target : base >= target) return i + 1;
    }
    return hi; /* rounding: the buckets' sums passed, the members one by one not quite */
}

/* cand_narrow over all of c[0, n): n when the target is past every weight. */
static int32_t cand_prefix(struct cand *c, int32_t n, const float *e, double target, bool strict, bool whole)
{
    const int32_t m = cand_narrow(c, 0, n, e, 0.0, target, strict, whole);
    return m < 0 ? n : m;
}

/* the weights e[id] of c[0, n) added up, in four running sums */
static double cand_sum(const struct cand *c, int32_t n, const float *e)
{
    double t[4] = { 0, 0, 0, 0 };
    int32_t i = 0;
    for (; i + 4 <= n; i += 4)
        for (int k = 0; k < 4; k++) t[k] += e[c[i + k].id];
    for (; i < n; i++) t[0] += e[c[i].id];
    return (t[0] + t[1]) + (t[2] + t[3]);
}

/* Many candidates (no top-k, or a large one): the same cuts and draw
 * without sorting them all; e (by token id) holds the weights, made for
 * the whole vocabulary in one vector loop. */
static int32_t sample_unsorted(het_sampler *s, struct cand *c, int32_t n, const float *e, bool top_p_done)
{
    double sum = cand_sum(c, n, e);
    if (!top_p_done && s->p.top_p > 0.0f && s->p.top_p < 1.0f)
        n = cand_prefix(c, n, e, (double)s->p.top_p * sum, false, true);
    if (s->p.min_p > 0.0f) { /* the weights of at least min_p are a prefix of the order (the first's is 1) */
        int32_t keep = 0;
        for (int32_t i = 0; i < n; i++)
            if (e[c[i].id] >= s->p.min_p) cand_swap(c, i, keep++);
        if (keep == 0) cand_swap(c, 0, cand_end(c, n, true)); /* min_p above 1: the most likely alone */
        n = keep > 0 ? keep : 1;
    }
    sum = cand_sum(c, n, e);
    const int32_t m = cand_prefix(c, n, e, next_uniform(s) * sum, true, false);
    /* m == n: the draw fell in the last one, or past every weight (rounding): the last in order */
    return m < n ? c[m - 1].id : c[cand_end(c, n, false)].id;
}

/* Every finite token of the vocabulary in c[0, n); returns n. */
static int32_t cand_gather(struct cand *c, const float *w, int32_t n_vocab)
{
    int32_t n = 0;
    for (int32_t i = 0; i < n_vocab; i++)
        if (w[i] > -INFINITY) c[n++] = (struct cand){ w[i], i }; /* NaN: never */
    return n;
}

/* cand_prefix over the whole vocabulary (no top-k) without gathering it
 * first: the first level's buckets are made by token id from the scaled
 * logits w (one vector loop, into s->bucket) and only the members of the
 * bucket the target falls in (with `whole`, and those before it) become
 * candidates, in s->cand, to narrow further. Gathering all 151,936 first
 * and bucketing them as candidates took most of a draw's ~0.86 ms. top is
 * the largest scaled logit, low at most the smallest finite one (it sets
 * the buckets' scale: anything below it shares the last bucket), e[] the
 * weights by id (0 for -inf and NaN). -1 when the target is past every
 * weight. */
static int32_t vocab_prefix(het_sampler *s, const float *w, const float *e, float top, float low, double target,
                            bool strict, bool whole)
{
    const int32_t V = s->n_vocab;
    struct cand *c = s->cand;
    if (!(top > low)) return cand_narrow(c, 0, cand_gather(c, w, V), e, 0.0, target, strict, whole);
    const float span = top - low < PREFIX_SPAN ? top - low : PREFIX_SPAN;
    const float scale = (float)(PREFIX_BUCKETS - 1) / span;
    uint8_t *bk = s->bucket;
#pragma omp simd
    for (int32_t i = 0; i < V; i++) bk[i] = (uint8_t)cand_bucket(w[i], top, scale); /* -inf, NaN: the last */
    double mass[4][PREFIX_BUCKETS] = { { 0 } };
    for (int32_t i = 0; i < V; i++) mass[i & 3][bk[i]] += e[i];
    double before = 0;
    const int b = mass_bucket(mass, &before, target, strict);
    if (b == PREFIX_BUCKETS) return -1;
    int32_t at = 0;
    if (whole) /* (every token before the last bucket is finite) */
        for (int32_t i = 0; i < V; i++)
            if (bk[i] < b) c[at++] = (struct cand){ w[i], i };
    int32_t end = at, i = 0;
    /* bucket b's members, 8 buckets at a time: a word with no byte equal to
     * b (no zero byte after the xor) is passed over whole */
    const uint64_t ones = 0x0101010101010101ull, highs = 0x8080808080808080ull, pat = ones * (uint64_t)b;
    for (; i + 8 <= V; i += 8) {
        uint64_t x;
        memcpy(&x, bk + i, sizeof x);
        x ^= pat;
        if (!((x - ones) & ~x & highs)) continue;
        for (int32_t j = i; j < i + 8; j++)
            if (bk[j] == b && w[j] > -INFINITY) c[end++] = (struct cand){ w[j], j };
    }
    for (; i < V; i++)
        if (bk[i] == b && w[i] > -INFINITY) c[end++] = (struct cand){ w[i], i };
    if (end == at) return -1; /* rounding: a bucket of -inf and NaN only (weight 0) met the target */
    const int32_t m = cand_narrow(c, at, end, e, before, target, strict, whole);
    return m < 0 ? end : m; /* rounding: the bucket's sum passed, its members not quite */
}

/* The library is built for any x86-64 (SSE2); this loop, ~40% of a draw
 * over 151,936 tokens, is also made for AVX2 and picked at load (ifunc).
 * Not with FMA: the weights must be the bits het_sample_exp gives
 * anywhere (a contracted multiply-add rounds once, not twice). */
#if defined(__x86_64__) && defined(__has_attribute)
#if __has_attribute(target_clones)
#define HET_SAMPLE_CLONES __attribute__((target_clones("avx2", "default")))
#endif
#endif
#ifndef HET_SAMPLE_CLONES
#define HET_SAMPLE_CLONES
#endif

/* e[i] = the weight of scaled logit w[i] against the largest, top (0 for
 * -inf and NaN, by their bits: a float select kept the loop scalar);
 * returns their sum. */
HET_SAMPLE_CLONES static double vocab_weights(const float *w, float top, float *e, int32_t n)
{
    double sum = 0;
#pragma omp simd reduction(+ : sum)
    for (int32_t i = 0; i < n; i++) {
        const float x = het_sample_exp(w[i] - top);
        uint32_t u, v;
        memcpy(&u, &w[i], sizeof u);
        memcpy(&v, &x, sizeof v);
        v &= (u & 0x7fffffffu) <= 0x7f800000u && u != 0xff800000u ? 0xffffffffu : 0u;
        float y;
        memcpy(&y, &v, sizeof y);
        e[i] = y;
        sum += (double)y;
    }
    return sum;
}

/* No top-k and more than SAMPLE_SORT_MAX finite logits (the server's
 * default): the weights for the whole vocabulary in one vector loop, then
 * top-p's cut and the draw by vocab_prefix; the candidates are gathered
 * whole only for min-p or when the draw falls past every weight
 * (rounding). */
static int32_t sample_vocab(het_sampler *s, const float *w, float top)
{
    const int32_t V = s->n_vocab;
    float *e = s->weight;
    const double sum = vocab_weights(w, top, e, V);
    /* the smallest scaled logit, as eight running minima (as het_argmax;
     * an omp simd min kept its sum in memory). Only the buckets' scale
     * depends on it: -inf makes the span the largest, PREFIX_SPAN. */
    float m[8] = { top, top, top, top, top, top, top, top }, low = top;
    int32_t i = 0;
    for (; i + 8 <= V; i += 8)
        for (int k = 0; k < 8; k++) m[k] = w[i + k] < m[k] ? w[i + k] : m[k];
    for (; i < V; i++) low = w[i] < low ? w[i] : low;
    for (int k = 0; k < 8; k++) low = m[k] < low ? m[k] : low;
    struct cand *c = s->cand;
    int32_t n = -1; /* c[0, n): what top-p kept; -1: every finite token, not gathered */
    if (s->p.top_p > 0.0f && s->p.top_p < 1.0f) n = vocab_prefix(s, w, e, top, low, (double)s->p.top_p * sum, false, true);
    if (n < 0 && !(s->p.min_p > 0.0f)) {
        const int32_t m = vocab_prefix(s, w, e, top, low, next_uniform(s) * sum, true, false);
        if (m > 0) return c[m - 1].id;
        n = cand_gather(c, w, V); /* past every weight (rounding): the last in order */
        return c[cand_end(c, n, false)].id;
    }
    if (n < 0) n = cand_gather(c, w, V);
    return sample_unsorted(s, c, n, e, true);
}

int32_t het_sampler_sample(het_sampler *s, const float *logits)
{
    if (adjust(s, logits)) logits = s->work;
    int32_t best = het_argmax(logits, s->n_vocab);
    if (logits[best] == -INFINITY) /* the constraint left nothing: end the text */
        return het_tokenizer_eos(s->p.tok) >= 0 ? het_tokenizer_eos(s->p.tok) : best;
    if (s->p.temp <= 0.0f) return best;
    struct cand *c = s->cand;
    float *w = s->scaled;
    const float temp = s->p.temp;
#pragma omp simd
    for (int32_t i = 0; i < s->n_vocab; i++) w[i] = logits[i] / temp;
    const float top = w[best]; /* the largest scaled logit: argmax's, over a positive temperature */
    int32_t n = 0;
    if (s->p.top_k > 0 && s->p.top_k < s->n_vocab) {
        n = cand_top_k(c, w, s->n_vocab, s->p.top_k);
    } else {
#pragma omp simd reduction(+ : n)
        for (int32_t i = 0; i < s->n_vocab; i++) n += w[i] > -INFINITY;
        if (n > SAMPLE_SORT_MAX) return sample_vocab(s, w, top);
        n = cand_gather(c, w, s->n_vocab);
    }
    if (n == 0) return best;
    if (n <= SAMPLE_SORT_MAX) return sample_sorted(s, c, n);
    (void)vocab_weights(w, top, s->weight, s->n_vocab); /* the kept top-k's sum is cand_sum's */
    return sample_unsorted(s, c, n, s->weight, false);
}

float het_logprobs(const float *logits, int32_t n_vocab, int32_t token, int k, struct het_token_logprob *top)
{
    const float maxl = logits[het_argmax(logits, n_vocab)];
    double sum = 0; /* e^(l - max) in float (sample_exp.h): the double exp per token took ~1 ms */
#pragma omp simd reduction(+ : sum)
    for (int32_t i = 0; i < n_vocab; i++) sum += (double)het_sample_exp(logits[i] - maxl);
    float lse = maxl + (float)log(sum);
    if (k > n_vocab) k = n_vocab;
    int n = 0; /* top[0..n) sorted, most likely first */
    for (int32_t i = 0; i < n_vocab && k > 0; i++) {
        if (n == k && logits[i] <= top[n - 1].logprob) continue;
        int at = n < k ? n++ : n - 1;
        while (at > 0 && top[at - 1].logprob < logits[i]) {
            top[at] = top[at - 1];
            at--;
        }
        top[at] = (struct het_token_logprob){ i, logits[i] };
    }
    for (int i = 0; i < n; i++) top[i].logprob -= lse;
    return token >= 0 && token < n_vocab ? logits[token] - lse : -INFINITY;
}
