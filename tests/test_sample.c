/*
 * test_sample.c — the sampler's options against what each one must do on
 * small hand-made logits: logit bias, the repetition penalties and their
 * window, presence and frequency penalties, min-p, log-probabilities
 * against a double-precision reference, temperature / top-k / top-p /
 * min-p draws against a plain full-sort sampler on random logits (with
 * ties and -inf, up to a 151,936-token vocabulary), the JSON-prefix recogniser on
 * valid and invalid texts, and json_object sampling on stories260K's
 * vocabulary giving text that is always a valid prefix and, when done, an
 * object jansson parses; and the constraint's mask (greedy picks) against
 * feeding every token's text, on stories260K's and Qwen3's vocabularies.
 */
#include "het/model.h"
#include "model/json_prefix.h"
#include "model/json_vocab.h"
#include "model/sample_exp.h"
#include "testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#ifdef HET_HAVE_JANSSON
#include <jansson.h>
#endif

#define V 8

static int32_t pick(const struct het_sampler_params *p, const float *logits, const int32_t *seen, int n_seen)
{
    het_sampler *s = het_sampler_init(p, V);
    for (int i = 0; i < n_seen; i++) het_sampler_accept(s, seen[i], i % 2 == 0);
    int32_t t = het_sampler_sample(s, logits);
    het_sampler_free(s);
    return t;
}

static void test_penalties(void)
{
    const float l[V] = { 1.0f, 0.9f, 0.5f, -1.0f, -2.0f, 0.0f, 0.2f, -0.5f };
    struct het_sampler_params g = { 0 };
    CHECK(pick(&g, l, NULL, 0) == 0, "greedy");
    struct het_logit_bias up = { 4, 3.5f }, down = { 0, -100 };
    g.logit_bias = &up;
    g.n_logit_bias = 1;
    CHECK(pick(&g, l, NULL, 0) == 4, "logit_bias +3.5 on token 4");
    g.logit_bias = &down;
    CHECK(pick(&g, l, NULL, 0) == 1, "logit_bias -100 on the best");
    /* repeat penalty: 1.0 / 1.2 < 0.9: token 0 seen loses to token 1 */
    struct het_sampler_params r = { .repeat_penalty = 1.2f };
    const int32_t seen0[] = { 0 };
    CHECK(pick(&r, l, seen0, 1) == 1, "repeat_penalty");
    r.repeat_penalty = 1.05f;
    CHECK(pick(&r, l, seen0, 1) == 0, "a mild repeat_penalty keeps it");
    /* the window: token 0 seen, then 2 and 5; a window of 2 no longer sees it */
    r.repeat_penalty = 1.2f;
    r.penalty_last_n = 2;
    const int32_t seen3[] = { 0, 2, 5 };
    CHECK(pick(&r, l, seen3, 3) == 0, "out of the window");
    r.penalty_last_n = 3;
    CHECK(pick(&r, l, seen3, 3) == 1, "in the window");
    /* presence: once per token; frequency: per occurrence */
    struct het_sampler_params pr = { .presence_penalty = 0.05f };
    const int32_t twice[] = { 0, 0 };
    CHECK(pick(&pr, l, twice, 2) == 0, "presence 0.05 once: 0.95 > 0.9");
    struct het_sampler_params fr = { .frequency_penalty = 0.06f };
    CHECK(pick(&fr, l, twice, 2) == 1, "frequency 0.06 twice: 0.88 < 0.9");
    fr.frequency_penalty = 0.04f;
    CHECK(pick(&fr, l, twice, 2) == 0, "frequency 0.04 twice: 0.92 > 0.9");
    /* a negative logit is multiplied by the repeat penalty */
    const float neg[V] = { -1.0f, -1.1f, -5, -5, -5, -5, -5, -5 };
    r = (struct het_sampler_params){ .repeat_penalty = 1.2f };
    CHECK(pick(&r, neg, seen0, 1) == 1, "negative logit: -1.2 < -1.1");
}

static void test_min_p(void)
{
    /* p1/p0 = e^-1 = 0.37, p2/p0 = e^-1.5 = 0.22 */
    const float l[V] = { 0, -1.0f, -1.5f, -30, -30, -30, -30, -30 };
    int other_without = 0, other_with = 0, other_low = 0;
    for (uint64_t seed = 1; seed <= 300; seed++) {
        struct het_sampler_params a = { .temp = 1, .seed = seed };
        other_without += pick(&a, l, NULL, 0) != 0;
        a.min_p = 0.5f;
        other_with += pick(&a, l, NULL, 0) != 0;
        a.min_p = 0.3f;
        other_low += pick(&a, l, NULL, 0) == 2;
    }
    CHECK(other_without > 30, "without min_p others are drawn (%d of 300)", other_without);
    CHECK(other_with == 0, "min_p 0.5 keeps only token 0 (%d others)", other_with);
    CHECK(other_low == 0, "min_p 0.3 drops token 2 (%d)", other_low);
    /* above 1 nothing passes but the most likely is kept, among many candidates too (not sorted there) */
    enum { BIG = 6000 };
    float *big = malloc(BIG * sizeof *big);
    het_test_seed(3);
    for (int i = 0; i < BIG; i++) big[i] = het_test_rand_uniform(-2, 2);
    struct het_sampler_params a = { .temp = 1, .min_p = 1.5f, .seed = 9 };
    het_sampler *s = het_sampler_init(&a, BIG);
    CHECK(s && het_sampler_sample(s, big) == het_argmax(big, BIG), "min_p 1.5 over %d tokens is greedy", BIG);
    het_sampler_free(s);
    free(big);
}

/* ---- the sampler's draws against a plain one that sorts every candidate ----
 * The reference: every finite candidate sorted (scaled logit descending,
 * then token id), top-k, weights e^(w - max) (sample_exp.h), top-p, min-p, and a
 * draw walked in that order, with the sampler's generator (xorshift64*,
 * repeated here so both draw the same numbers). The sampler sorts only as
 * much of the order as it walks; it must pick the same tokens. */
struct ref_cand { float w; int32_t id; };

static int ref_cmp(const void *a, const void *b)
{
    const struct ref_cand *x = a, *y = b;
    if (x->w != y->w) return x->w > y->w ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

static double ref_uniform(uint64_t *rng)
{
    *rng ^= *rng >> 12;
    *rng ^= *rng << 25;
    *rng ^= *rng >> 27;
    return ((*rng * 0x2545F4914F6CDD1Dull) >> 11) * (1.0 / 9007199254740992.0);
}

static int32_t ref_sample(const struct het_sampler_params *p, const float *logits, int32_t nv, uint64_t *rng,
                          struct ref_cand *c)
{
    int32_t n = 0;
    for (int32_t i = 0; i < nv; i++)
        if (logits[i] > -INFINITY) c[n++] = (struct ref_cand){ logits[i] / p->temp, i };
    qsort(c, (size_t)n, sizeof *c, ref_cmp);
    if (p->top_k > 0 && p->top_k < n) n = p->top_k;
    const float top = c[0].w;
    double sum = 0;
    for (int32_t i = 0; i < n; i++) sum += (c[i].w = het_sample_exp(c[i].w - top));
    if (p->top_p > 0.0f && p->top_p < 1.0f) {
        double acc = 0;
        for (int32_t i = 0; i < n; i++)
            if ((acc += c[i].w / sum) >= p->top_p) { n = i + 1; break; }
    }
    if (p->min_p > 0.0f)
        for (int32_t i = 1; i < n; i++)
            if (c[i].w < p->min_p) { n = i; break; }
    sum = 0;
    for (int32_t i = 0; i < n; i++) sum += c[i].w;
    const double r = ref_uniform(rng) * sum;
    double acc = 0;
    for (int32_t i = 0; i < n; i++)
        if (r < (acc += c[i].w)) return c[i].id;
    return c[n - 1].id;
}

/* random logits: spread 3 (a trained model's are peakier), or on a 0.5 grid
 * (many ties) with every 10th -inf and some NaN (never drawn; more than
 * 4,096 stay finite, so the unsorted paths see them) */
static void fill_logits(float *l, int32_t nv, bool ties, uint64_t seed)
{
    het_test_seed(seed);
    for (int32_t i = 0; i < nv; i++) {
        float x = 0;
        for (int k = 0; k < 4; k++) x += het_test_rand_uniform(-1.5f, 1.5f);
        l[i] = ties ? (i % 10 == 3 ? -INFINITY : i % 89 == 7 ? NAN : roundf(2 * x) / 2) : x;
    }
}

static void test_draws(void)
{
    const int32_t big = 151936;
    float *l = malloc((size_t)big * sizeof *l);
    struct ref_cand *c = malloc((size_t)big * sizeof *c);
    const int32_t top_ks[] = { 0, 1, 40, 3000, 4800 };
    const float top_ps[] = { 1.0f, 0.9f, 0.3f }, min_ps[] = { 0.0f, 0.02f }, temps[] = { 0.7f, 1.3f };
    int draws = 0, same = 0;
    for (int set = 0; set < 3; set++) {
        const int32_t nv = set == 2 ? big : 5000;
        fill_logits(l, nv, set == 1, 100 + set);
        for (int a = 0; a < 2; a++)
            for (int b = 0; b < 5; b++)
                for (int d = 0; d < 3; d++)
                    for (int e = 0; e < 2; e++) {
                        /* the full vocabulary: a few settings only (the reference's sort is slow) */
                        if (set == 2 && (a || b == 1 || b > 2 || d == 2 || e)) continue;
                        const struct het_sampler_params p = {
                            .temp = temps[a], .top_k = top_ks[b], .top_p = top_ps[d], .min_p = min_ps[e],
                            .seed = 7 + (uint64_t)(a * 30 + b * 6 + d * 2 + e),
                        };
                        het_sampler *s = het_sampler_init(&p, nv);
                        CHECK(s != NULL, "init");
                        if (!s) continue;
                        uint64_t rng = p.seed;
                        for (int k = 0; k < 4; k++, draws++) {
                            const int32_t got = het_sampler_sample(s, l), want = ref_sample(&p, l, nv, &rng, c);
                            same += got == want;
                            CHECK(got == want, "vocab %d%s, temp %g top_k %d top_p %g min_p %g, draw %d: token %d, "
                                  "the full sort's %d", nv, set == 1 ? " (ties, -inf, NaN)" : "", p.temp, p.top_k, p.top_p,
                                  p.min_p, k, got, want);
                        }
                        het_sampler_free(s);
                    }
    }
    CHECK(draws > 400 && same == draws, "%d of %d draws as the full sort's", same, draws);
    free(l);
    free(c);
}

/* het_argmax: the first index of the largest, NaN never, at every length
 * around its blocks of eight, against a plain loop */
static void test_argmax(void)
{
    float l[40];
    int wrong = 0;
    for (int n = 1; n <= 40; n++)
        for (int trial = 0; trial < 50; trial++) {
            for (int i = 0; i < n; i++) l[i] = (float)(int)het_test_rand_uniform(-4, 4); /* ties */
            if (trial % 5 == 1) l[(int)het_test_rand_uniform(0, (float)n)] = NAN;
            if (trial % 5 == 2) for (int i = 0; i < n; i++) l[i] = -INFINITY;
            int32_t want = -1;
            for (int i = 0; i < n; i++)
                if (!isnan(l[i]) && (want < 0 || l[i] > l[want])) want = i;
            wrong += het_argmax(l, n) != (want < 0 ? 0 : want);
        }
    CHECK(wrong == 0, "argmax: %d of 2000 wrong", wrong);
    const float nan3[3] = { NAN, NAN, NAN };
    CHECK(het_argmax(nan3, 3) == 0 && het_argmax(l, 0) == 0, "argmax of nothing");
}

static void test_logprobs(void)
{
    const int n = 37;
    float l[37];
    het_test_seed(5);
    for (int i = 0; i < n; i++) l[i] = (float)((i * 7919 % 37) / 5.0 - 3.0);
    double mx = -1e30, sum = 0;
    for (int i = 0; i < n; i++) mx = l[i] > mx ? l[i] : mx;
    for (int i = 0; i < n; i++) sum += exp(l[i] - mx);
    struct het_token_logprob top[5];
    float lp = het_logprobs(l, n, 11, 5, top);
    CHECK(fabs(lp - (l[11] - mx - log(sum))) < 1e-5, "token logprob %g", lp);
    for (int k = 0; k < 5; k++) {
        int rank = 0; /* tokens strictly more likely than top[k] */
        for (int i = 0; i < n; i++) rank += l[i] > l[top[k].token];
        CHECK(rank <= k && fabs(top[k].logprob - (l[top[k].token] - mx - log(sum))) < 1e-5, "top %d: token %d",
              k, top[k].token);
        CHECK(k == 0 || top[k].logprob <= top[k - 1].logprob, "sorted");
    }
    CHECK(het_logprobs(l, n, 3, 0, NULL) == lp - l[11] + l[3], "k = 0");
}

static void test_json_prefix(void)
{
    static const char *const good[] = {
        "{}", "{\"a\":1}", " {\"a\" : [1, -2.5e+3, 0, true, false, null, \"x\\n\\u00e9\"], \"b\":{}}",
        "{\"\xc3\xa9\":\"\xe2\x82\xac\"}", "{\"a\":[[],[{}]]}", "{\"n\":-0.5E2}",
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        struct het_json_prefix j;
        het_json_prefix_init(&j);
        /* byte by byte, as tokens of one byte would arrive */
        bool ok = true;
        for (size_t k = 0; ok && good[i][k]; k++) ok = het_json_prefix_feed(&j, good[i] + k, 1);
        CHECK(ok && het_json_prefix_done(&j), "valid: %s", good[i]);
    }
    static const char *const prefixes[] = { "{", "{\"a", "{\"a\":", "{\"a\":-", "{\"a\":1.", "{\"a\":tr", "{\"a\":[1,",
                                            "{\"a\":\"\\u00", "{\"a\":\"\xe2\x82" };
    for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++) {
        struct het_json_prefix j;
        het_json_prefix_init(&j);
        CHECK(het_json_prefix_feed(&j, prefixes[i], strlen(prefixes[i])) && !het_json_prefix_done(&j), "prefix: %s",
              prefixes[i]);
    }
    static const char *const bad[] = {
        "[", "1", "\"a\"", "{a", "{\"a\" 1", "{\"a\":01", "{\"a\":1.}", "{\"a\":-}", "{\"a\":tru}", "{\"a\":[1,]}",
        "{\"a\":1,}", "{}x", "{} ", "{\"a\":\"\x01\"}", "{\"a\":\"\\x\"}", "{\"a\":\"\\u12g\"}", "{\"a\":1]",
        "{\"a\":\"\xff\"}", "{\"a\":\"\xc3\x41\"}", "{\"a\":\"\xe0\x80\x80\"}", "{\"a\":\"\xed\xa0\x80\"}",
        "{\"a\":\"\xf4\x90\x80\x80\"}", "{\"a\":\"\xc0\xaf\"}", "{\"a\":1e}", "{\"a\":         1}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct het_json_prefix j;
        het_json_prefix_init(&j);
        CHECK(!het_json_prefix_feed(&j, bad[i], strlen(bad[i])), "invalid accepted: %s", bad[i]);
    }
    /* nesting beyond the limit is refused */
    struct het_json_prefix j;
    het_json_prefix_init(&j);
    char deep[HET_JSON_MAX_DEPTH * 6 + 8] = "{";
    for (int i = 1; i < HET_JSON_MAX_DEPTH; i++) strcat(deep, "\"a\":{");
    CHECK(het_json_prefix_feed(&j, deep, strlen(deep)), "depth %d", HET_JSON_MAX_DEPTH);
    CHECK(!het_json_prefix_feed(&j, "\"a\":{", 5), "depth %d refused", HET_JSON_MAX_DEPTH + 1);
}

/* json_object sampling on a real vocabulary with arbitrary logits */
static void test_json_sampling(het_model *m)
{
    const het_tokenizer *tok = het_model_tokenizer(m);
    int32_t nv = het_model_get_config(m)->n_vocab;
    float *l = malloc((size_t)nv * sizeof *l);
    int done = 0;
    for (uint64_t seed = 1; seed <= 12; seed++) {
        struct het_sampler_params p = { .temp = 1.0f, .seed = seed, .json_object = true, .tok = tok };
        het_sampler *s = het_sampler_init(&p, nv);
        CHECK(s != NULL, "init");
        if (!s) break;
        char text[4096];
        size_t len = 0;
        het_test_seed(seed);
        for (int step = 0; step < 300 && !het_sampler_json_done(s); step++) {
            /* favour closing brackets now and then so some objects finish */
            for (int32_t i = 0; i < nv; i++) l[i] = (float)((i * 2654435761u + step * 40503u + seed) % 1000) / 250.0f;
            int32_t t = het_sampler_sample(s, l);
            char piece[64];
            int n = het_token_to_piece(tok, t, piece, sizeof piece, false);
            CHECK(n > 0 && !het_tokenizer_is_eog(tok, t), "a token with text (%d)", t);
            if (n <= 0 || len + (size_t)n >= sizeof text) break;
            memcpy(text + len, piece, (size_t)n);
            len += (size_t)n;
            het_sampler_accept(s, t, true);
        }
        struct het_json_prefix j;
        het_json_prefix_init(&j);
        CHECK(het_json_prefix_feed(&j, text, len), "seed %llu: not a JSON prefix: %.*s", (unsigned long long)seed,
              (int)len, text);
        if (het_sampler_json_done(s)) {
            done++;
#ifdef HET_HAVE_JANSSON
            /* jansson refuses numbers past a double's range (1e999), which
             * JSON's grammar allows: that error alone is not a failure */
            json_error_t e;
            json_t *o = json_loadb(text, len, 0, &e);
            CHECK(json_is_object(o) || strstr(e.text, "real number overflow"), "seed %llu: jansson: %s: %.*s",
                  (unsigned long long)seed, e.text, (int)len, text);
            json_decref(o);
#endif
        }
        het_sampler_free(s);
    }
    CHECK(done > 0, "some objects completed (%d of 12)", done);
    free(l);
    struct het_sampler_params bad = { .json_object = true };
    CHECK(het_sampler_init(&bad, nv) == NULL, "json_object needs a tokenizer");
}

/* The mask itself, token by token, against feeding every token's text, in
 * states where the shortcuts of json_vocab.c apply and where they must not:
 * inside key and value strings, after half a UTF-8 character or a
 * backslash, in numbers, literals, between values. */
static void test_json_mask_states(const het_tokenizer *tok, int32_t nv, const char *name)
{
    static const char *const prefixes[] = {
        "", "{", "{\"", "{\"a", "{\"a\"", "{\"a\":", "{\"a\":\"", "{\"a\":\"x y", "{\"a\":[\"",
        "{\"a\":\"\xE4", "{\"a\":\"\xE4\xB8", "{\"a\":\"\\", "{\"a\":\"\\u12", "{\"a\":1", "{\"a\":-0.5e",
        "{\"a\":tr", "{\"a\":{}", "{\"a\":[1,", "{\"a\":[[[",
    };
    struct het_json_vocab *v = het_json_vocab_new(tok, nv);
    float *w = malloc((size_t)nv * sizeof *w);
    char piece[256];
    CHECK(v && w, "%s: init", name);
    for (size_t k = 0; v && w && k < sizeof prefixes / sizeof prefixes[0]; k++) {
        struct het_json_prefix j;
        het_json_prefix_init(&j);
        CHECK(het_json_prefix_feed(&j, prefixes[k], strlen(prefixes[k])), "prefix %s", prefixes[k]);
        for (int32_t t = 0; t < nv; t++) w[t] = t % 7 == 0 ? -INFINITY : 0.0f; /* some masked already */
        het_json_vocab_mask(v, &j, w);
        int wrong = 0, allowed = 0;
        for (int32_t t = 0; t < nv; t++) {
            const int n = het_tokenizer_is_eog(tok, t) ? 0 : het_token_to_piece(tok, t, piece, sizeof piece, false);
            struct het_json_prefix next = j;
            const bool ok = t % 7 != 0 && n > 0 && het_json_prefix_feed(&next, piece, (size_t)n);
            wrong += ok != (w[t] != -INFINITY);
            allowed += ok;
        }
        CHECK(wrong == 0, "%s after '%s': %d of %d tokens masked otherwise than feeding them (%d allowed)", name,
              prefixes[k], wrong, nv, allowed);
    }
    het_json_vocab_free(v);
    free(w);
}

/* The json_object mask, through greedy picks: at every step the sampler's
 * choice must be the highest logit among the tokens whose whole text a copy
 * of the recogniser accepts (every token fed, as the mask once was made). */
static void test_json_mask(const het_tokenizer *tok, int32_t nv, int steps, const char *name)
{
    char (*text)[256] = malloc((size_t)nv * sizeof *text);
    int *len = malloc((size_t)nv * sizeof *len);
    float *l = malloc((size_t)nv * sizeof *l);
    const struct het_sampler_params p = { .temp = 0, .json_object = true, .tok = tok };
    het_sampler *s = het_sampler_init(&p, nv);
    CHECK(s && text && len && l, "%s: init", name);
    if (!s || !text || !len || !l) goto out;
    for (int32_t t = 0; t < nv; t++)
        len[t] = het_tokenizer_is_eog(tok, t) ? 0 : het_token_to_piece(tok, t, text[t], sizeof text[t], false);
    struct het_json_prefix j, str;
    het_json_prefix_init(&j);
    het_json_prefix_init(&str);
    (void)het_json_prefix_feed(&str, "{\"", 2);
    het_test_seed(31);
    int checked = 0, in_string = 0, outside = 0;
    for (int step = 0; step < steps && !het_sampler_json_done(s); step++) {
        /* now and then texts with a quote, or with , } ] :, first, so strings and containers end */
        const char *punct = step % 8 == 3 ? "\"" : step % 8 == 7 ? ",}]:" : "";
        for (int32_t t = 0; t < nv; t++) {
            bool has = false;
            for (const char *c = punct; *c && !has; c++) has = len[t] > 0 && memchr(text[t], *c, (size_t)len[t]);
            l[t] = het_test_rand_uniform(0, 1) + (has ? 1.0f : 0.0f);
        }
        int32_t want = -1;
        for (int32_t t = 0; t < nv; t++) {
            struct het_json_prefix next = j;
            if (len[t] > 0 && het_json_prefix_feed(&next, text[t], (size_t)len[t]) && (want < 0 || l[t] > l[want]))
                want = t;
        }
        const int32_t got = het_sampler_sample(s, l);
        CHECK(want >= 0 && got == want, "%s, step %d: token %d, feeding every token gives %d", name, step, got, want);
        if (want < 0 || got != want) break;
        checked++;
        if (j.st == str.st && j.cont == 0) in_string++; /* between a string's characters */
        else outside++;
        het_sampler_accept(s, got, true);
        CHECK(het_json_prefix_feed(&j, text[got], (size_t)len[got]), "%s: accepted", name);
    }
    printf("json mask, %s: %d steps (%d in strings, %d outside)\n", name, checked, in_string, outside);
    CHECK(checked >= 20 && in_string > 0 && outside > 0, "%s: %d steps checked (%d in strings, %d outside)",
          name, checked, in_string, outside);
out:
    het_sampler_free(s);
    free(text);
    free(len);
    free(l);
}

int main(void)
{
    test_argmax();
    test_penalties();
    test_min_p();
    test_draws();
    test_logprobs();
    test_json_prefix();
    const char *path = het_test_source("models/stories260K.gguf");
    het_error err = { 0 };
    het_model *m = het_model_load(path, &err);
    CHECK(m, "cannot load %s: %s", path, err.msg);
    if (m) test_json_sampling(m);
    if (m) test_json_mask(het_model_tokenizer(m), het_model_get_config(m)->n_vocab, 200, "stories260K");
    if (m) test_json_mask_states(het_model_tokenizer(m), het_model_get_config(m)->n_vocab, "stories260K");
    het_gguf *g = het_gguf_open(het_test_shared("models/synthetic/vocab-qwen3.gguf"), &err);
    het_tokenizer *qt = g ? het_tokenizer_from_gguf(g, &err) : NULL;
    CHECK(qt, "qwen3 vocabulary: %s", err.msg);
    if (qt) test_json_mask(qt, het_tokenizer_n_vocab(qt), 60, "qwen3");
    if (qt) test_json_mask_states(qt, het_tokenizer_n_vocab(qt), "qwen3");
    het_tokenizer_free(qt);
    het_gguf_close(g);
    het_model_free(m);
    return het_test_finish();
}
