/*
 * sample.c — choosing the next token from logits: greedy (temp 0) or
 * temperature + top-k + top-p with a seeded generator, so a run is
 * reproducible for a given seed.
 */
#include "het/model.h"

#include <math.h>
#include <stdlib.h>

struct het_sampler {
    struct het_sampler_params p;
    int32_t  n_vocab;
    uint64_t rng;        /* xorshift64* state */
    struct cand *cand;   /* n_vocab candidates, reused per call */
};

struct cand { float w; int32_t id; };

int32_t het_argmax(const float *logits, int32_t n)
{
    int32_t best = 0;
    for (int32_t i = 1; i < n; i++)
        if (logits[i] > logits[best]) best = i;
    return best;
}

het_sampler *het_sampler_init(const struct het_sampler_params *p, int32_t n_vocab)
{
    het_sampler *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->p = *p;
    s->n_vocab = n_vocab;
    s->rng = p->seed ? p->seed : 0x853c49e6748fea9bull;
    s->cand = malloc((size_t)n_vocab * sizeof *s->cand);
    if (!s->cand) {
        het_sampler_free(s);
        return NULL;
    }
    return s;
}

void het_sampler_free(het_sampler *s)
{
    if (!s) return;
    free(s->cand);
    free(s);
}

static double next_uniform(het_sampler *s)
{
    s->rng ^= s->rng >> 12;
    s->rng ^= s->rng << 25;
    s->rng ^= s->rng >> 27;
    return ((s->rng * 0x2545F4914F6CDD1Dull) >> 11) * (1.0 / 9007199254740992.0);
}

/* order candidates by descending weight */
static int cand_cmp(const void *a, const void *b)
{
    float x = ((const struct cand *)a)->w, y = ((const struct cand *)b)->w;
    return (x < y) - (x > y);
}

int32_t het_sampler_sample(het_sampler *s, const float *logits)
{
    if (s->p.temp <= 0.0f) return het_argmax(logits, s->n_vocab);
    int32_t n = s->n_vocab;
    struct cand *c = s->cand;
    for (int32_t i = 0; i < n; i++) c[i] = (struct cand){ logits[i] / s->p.temp, i };
    qsort(c, (size_t)n, sizeof *c, cand_cmp);
    if (s->p.top_k > 0 && s->p.top_k < n) n = s->p.top_k;
    double maxw = c[0].w, sum = 0;
    for (int32_t i = 0; i < n; i++) sum += (c[i].w = (float)exp(c[i].w - maxw));
    if (s->p.top_p > 0.0f && s->p.top_p < 1.0f) {
        double acc = 0;
        for (int32_t i = 0; i < n; i++) {
            acc += c[i].w / sum;
            if (acc >= s->p.top_p) { n = i + 1; break; }
        }
        sum = 0;
        for (int32_t i = 0; i < n; i++) sum += c[i].w;
    }
    double r = next_uniform(s) * sum, acc = 0;
    int32_t pick = c[n - 1].id;
    for (int32_t i = 0; i < n; i++) {
        acc += c[i].w;
        if (r < acc) { pick = c[i].id; break; }
    }
    return pick;
}
