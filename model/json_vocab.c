/*
 * json_vocab.c — which tokens may continue a JSON object (json_vocab.h).
 *
 * The plain way feeds every token's text to a copy of the recogniser, for
 * every sampled token: with Qwen3's 151,936 tokens that took 5.5 ms inside
 * a string and 1.5-1.9 ms elsewhere (one Zen 4 core), beside ~15 ms for
 * the forward pass of a 0.6B model. Two facts, each exact, cut it to 0.4
 * and 0.6-0.7 ms:
 *   - a text can only be accepted if its first byte is: outside strings
 *     (after a value, before a key, ...) most first bytes are not, so the
 *     state is tried with each of the 256 bytes once, and only the tokens
 *     whose first byte passed (kept grouped by first byte) are fed whole;
 *   - inside a string, between characters, a text without a quote that the
 *     string can hold whole (printable characters, complete UTF-8
 *     sequences, complete escapes) is accepted whatever else the state
 *     holds, and leaves it between characters again: found once per
 *     vocabulary, such tokens (most words) are accepted without feeding.
 * What is left is fed as before, so the mask is the plain way's exactly.
 */
#include "model/json_vocab.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct het_json_vocab {
    int32_t   n_vocab;
    char     *pieces;      /* every token's text, concatenated                 */
    uint32_t *off;         /* n_vocab + 1: token t is pieces[off[t], off[t+1]) */
    uint8_t  *in_string;   /* n_vocab: accepted whole between a string's characters */
    int32_t  *by_first;    /* n_vocab tokens with text, grouped by first byte  */
    uint32_t  first[257];  /* group c is by_first[first[c], first[c+1])        */
    struct het_json_prefix str; /* a recogniser between a string's characters  */
};

/* Is j between two characters of a string (the state in which in_string
 * tokens are accepted, that of v->str)? */
static bool between_string_chars(const struct het_json_vocab *v, const struct het_json_prefix *j)
{
    return j->st == v->str.st && j->cont == 0;
}

static bool load(struct het_json_vocab *v, const het_tokenizer *tok)
{
    const int32_t n = v->n_vocab;
    size_t cap = (size_t)n * 8 + 64, len = 0;
    v->pieces = malloc(cap);
    v->off = malloc(((size_t)n + 1) * sizeof *v->off);
    v->in_string = calloc((size_t)n, 1);
    v->by_first = malloc((size_t)n * sizeof *v->by_first);
    if (!v->pieces || !v->off || !v->in_string || !v->by_first) return false;
    for (int32_t i = 0; i < n; i++) {
        v->off[i] = (uint32_t)len;
        char buf[256];
        int k = het_tokenizer_is_eog(tok, i) ? 0 : het_token_to_piece(tok, i, buf, sizeof buf, false);
        if (k <= 0) continue; /* no text (control tokens) or too long: never allowed */
        if (len + (size_t)k > cap) {
            cap = 2 * cap + (size_t)k;
            char *p = realloc(v->pieces, cap);
            if (!p) return false;
            v->pieces = p;
        }
        memcpy(v->pieces + len, buf, (size_t)k);
        len += (size_t)k;
    }
    v->off[n] = (uint32_t)len;
    /* group the tokens with text by first byte (a counting sort) */
    uint32_t count[256] = { 0 };
    for (int32_t i = 0; i < n; i++)
        if (v->off[i + 1] > v->off[i]) count[(unsigned char)v->pieces[v->off[i]]]++;
    v->first[0] = 0;
    for (int c = 0; c < 256; c++) v->first[c + 1] = v->first[c] + count[c];
    uint32_t at[256];
    memcpy(at, v->first, sizeof at);
    het_json_prefix_init(&v->str);
    (void)het_json_prefix_feed(&v->str, "{\"", 2);
    for (int32_t i = 0; i < n; i++) {
        const uint32_t a = v->off[i], b = v->off[i + 1];
        if (a == b) continue;
        v->by_first[at[(unsigned char)v->pieces[a]]++] = i;
        struct het_json_prefix j = v->str;
        v->in_string[i] = !memchr(v->pieces + a, '"', b - a) && het_json_prefix_feed(&j, v->pieces + a, b - a) &&
                          between_string_chars(v, &j);
    }
    return true;
}

struct het_json_vocab *het_json_vocab_new(const het_tokenizer *tok, int32_t n_vocab)
{
    struct het_json_vocab *v = calloc(1, sizeof *v);
    if (!v) return NULL;
    v->n_vocab = n_vocab;
    if (!load(v, tok)) {
        het_json_vocab_free(v);
        return NULL;
    }
    return v;
}

void het_json_vocab_free(struct het_json_vocab *v)
{
    if (!v) return;
    free(v->pieces);
    free(v->off);
    free(v->in_string);
    free(v->by_first);
    free(v);
}

const char *het_json_vocab_piece(const struct het_json_vocab *v, int32_t token, uint32_t *len)
{
    *len = v->off[token + 1] - v->off[token];
    return v->pieces + v->off[token];
}

/* does token t's whole text continue state j? */
static bool accepts(const struct het_json_vocab *v, const struct het_json_prefix *j, int32_t t)
{
    struct het_json_prefix next = *j;
    return het_json_prefix_feed(&next, v->pieces + v->off[t], v->off[t + 1] - v->off[t]);
}

void het_json_vocab_mask(const struct het_json_vocab *v, const struct het_json_prefix *j, float *w)
{
    const bool in_string = between_string_chars(v, j);
    /* the tokens without text first; those with text are visited by group below */
    for (int32_t t = 0; t < v->n_vocab; t++)
        if (v->off[t + 1] == v->off[t]) w[t] = -INFINITY;
    for (int c = 0; c < 256; c++) {
        const int32_t *group = v->by_first + v->first[c], n = (int32_t)(v->first[c + 1] - v->first[c]);
        struct het_json_prefix one = *j;
        const unsigned char byte = (unsigned char)c;
        if (!het_json_prefix_feed(&one, (const char *)&byte, 1)) { /* no text starting so can follow */
            for (int32_t i = 0; i < n; i++) w[group[i]] = -INFINITY;
            continue;
        }
        for (int32_t i = 0; i < n; i++) {
            const int32_t t = group[i];
            if (w[t] == -INFINITY || (in_string && v->in_string[t])) continue;
            if (!accepts(v, j, t)) w[t] = -INFINITY;
        }
    }
}
