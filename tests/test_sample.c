/*
 * test_sample.c — the sampler's options against what each one must do on
 * small hand-made logits: logit bias, the repetition penalties and their
 * window, presence and frequency penalties, min-p, log-probabilities
 * against a double-precision reference, the JSON-prefix recogniser on
 * valid and invalid texts, and json_object sampling on stories260K's
 * vocabulary giving text that is always a valid prefix and, when done, an
 * object jansson parses.
 */
#include "het/model.h"
#include "model/json_prefix.h"
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

int main(void)
{
    test_penalties();
    test_min_p();
    test_logprobs();
    test_json_prefix();
    const char *path = het_test_source("models/stories260K.gguf");
    het_error err = { 0 };
    het_model *m = het_model_load(path, &err);
    CHECK(m, "cannot load %s: %s", path, err.msg);
    if (m) test_json_sampling(m);
    het_model_free(m);
    return het_test_finish();
}
