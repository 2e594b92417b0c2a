/*
 * tokenizer_wpm.c — WordPiece ("bert" vocabularies), as llama.cpp runs it.
 *
 * Pre-processing follows BERT's BasicTokenizer the way llama.cpp does it:
 * every code point is replaced by the first code point of its canonical
 * decomposition (which drops accents), whitespace separates words, control
 * characters, NUL and U+FFFD vanish, punctuation, ASCII symbols and CJK
 * ideographs become one-character words, and the rest is lowercased. One
 * PCRE2 pass classifies the normalised text into runs of those classes.
 *
 * Each word, prefixed with "▁", is then cut greedily into the longest
 * vocabulary entries (the GGUF stores word starts as "▁x" and "##x"
 * continuations as plain "x"); a word with an uncovered position becomes a
 * single [UNK].
 */
#include <stdlib.h>
#include <string.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "model/tokenizer_impl.h"

#define WS "\\t-\\r \\x{85}\\x{a0}\\x{1680}\\x{2000}-\\x{200a}\\x{2028}\\x{2029}\\x{202f}\\x{205f}\\x{3000}"
#define DROP "\\x{0}\\x{fffd}\\p{Cc}\\p{Cf}\\p{Co}\\p{Cs}"
#define SINGLE                                                                                       \
    "\\p{P}\\$\\+<=>\\^`\\|~\\x{4e00}-\\x{9fff}\\x{3400}-\\x{4dbf}\\x{20000}-\\x{2a6df}\\x{2a700}-\\x{2b73f}" \
    "\\x{2b740}-\\x{2b81f}\\x{2b920}-\\x{2ceaf}\\x{f900}-\\x{faff}\\x{2f800}-\\x{2fa1f}"

/* groups: 1 whitespace, 2 dropped, 3 one-character word, 4 word characters */
static const char class_re[] =
    "([" WS "]+)|((?:(?![" WS "])[" DROP "])+)|([" SINGLE "])|([^" WS DROP SINGLE "]+)";

struct het_tok_wpm {
    pcre2_code *classes;
};

enum het_status het_tok_wpm_init(het_tokenizer *t, het_error *err)
{
    t->wpm = calloc(1, sizeof *t->wpm);
    if (!t->wpm) return het_error_set(err, HET_ERR_NOMEM, "tokenizer: out of memory");
    int code;
    PCRE2_SIZE at;
    t->wpm->classes = pcre2_compile((PCRE2_SPTR)class_re, PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP, &code, &at, NULL);
    if (!t->wpm->classes) {
        PCRE2_UCHAR msg[128];
        pcre2_get_error_message(code, msg, sizeof msg);
        return het_error_set(err, HET_ERR_INVALID, "tokenizer: WordPiece class regex, offset %zu: %s", (size_t)at,
                             (const char *)msg);
    }
    pcre2_jit_compile(t->wpm->classes, PCRE2_JIT_COMPLETE);
    return HET_OK;
}

void het_tok_wpm_free(struct het_tok_wpm *w)
{
    if (!w) return;
    pcre2_code_free(w->classes);
    free(w);
}

struct wpm_session {
    const het_tokenizer *t;
    char                *word;   /* "▁" + the lowercased word */
    size_t               len, cap;
    struct het_tok_ids  *out;
};

static enum het_status word_append(struct wpm_session *s, const char *p, size_t n)
{
    if (s->len + n > s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 256;
        while (cap < s->len + n) cap *= 2;
        char *w = realloc(s->word, cap);
        if (!w) return HET_ERR_NOMEM;
        s->word = w;
        s->cap = cap;
    }
    memcpy(s->word + s->len, p, n);
    s->len += n;
    return HET_OK;
}

/* Greedy longest-match of the pending word, then start a new one. */
static enum het_status word_finish(struct wpm_session *s)
{
    const size_t prefix = 3;   /* "▁" */
    if (s->len <= prefix) return HET_OK;
    size_t first = s->out->n, n = s->len, max = (size_t)s->t->max_token_len;
    for (size_t i = 0; i < n;) {
        size_t j = i + max + 1 < n ? i + max + 1 : n;
        int32_t id = -1;
        while (j > i && (id = het_tok_lookup(s->t, s->word + i, j - i)) < 0) j--;
        if (id < 0) {
            s->out->n = first;   /* an uncovered position discards the whole word */
            break;
        }
        if (het_tok_ids_push(s->out, id) != HET_OK) return HET_ERR_NOMEM;
        i = j;
    }
    s->len = prefix;
    if (s->out->n == first && s->t->unk >= 0 && het_tok_ids_push(s->out, s->t->unk) != HET_OK) return HET_ERR_NOMEM;
    return HET_OK;
}

/* Lowercase the UTF-8 run s[0..n) onto the pending word. */
static enum het_status append_lower(struct wpm_session *s, const char *p, size_t n)
{
    uint32_t cpts[4];
    for (size_t i = 0; i < n;) {
        size_t m = het_utf8_len((unsigned char)p[i]);
        het_utf8_decode(p + i, m, cpts);
        char buf[4];
        size_t k = het_utf8_encode(het_unicode_tolower(cpts[0]), buf);
        if (word_append(s, buf, k) != HET_OK) return HET_ERR_NOMEM;
        i += m;
    }
    return HET_OK;
}

/* Normalised text: first code point of each NFD form, surrogates as U+FFFD. */
static char *normalise(const char *text, size_t len, size_t *out_len)
{
    uint32_t *cpts = malloc((len ? len : 1) * sizeof *cpts);
    char *buf = malloc(len * 4 + 1);
    if (!cpts || !buf) {
        free(cpts);
        free(buf);
        return NULL;
    }
    size_t n = het_utf8_decode(text, len, cpts), k = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t c = het_unicode_nfd_first(cpts[i]);
        k += het_utf8_encode(c >= 0xD800 && c <= 0xDFFF ? 0xFFFD : c, buf + k);
    }
    free(cpts);
    *out_len = k;
    return buf;
}

static enum het_status classify_runs(struct wpm_session *s, const char *norm, size_t n, pcre2_match_data *md)
{
    enum het_status st = HET_OK;
    for (size_t pos = 0; pos < n && st == HET_OK;) {
        int rc = pcre2_match(s->t->wpm->classes, (PCRE2_SPTR)norm, n, pos, PCRE2_NO_UTF_CHECK | PCRE2_ANCHORED, md, NULL);
        if (rc == PCRE2_ERROR_JIT_STACKLIMIT)
            rc = pcre2_match(s->t->wpm->classes, (PCRE2_SPTR)norm, n, pos,
                             PCRE2_NO_UTF_CHECK | PCRE2_ANCHORED | PCRE2_NO_JIT, md, NULL);
        if (rc < 2) return HET_ERR_INVALID;   /* the classes cover every code point */
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        int group = rc - 1;   /* the last group that took part is the one that matched */
        size_t a = ov[2 * group], b = ov[2 * group + 1];
        if (group == 1) st = word_finish(s);
        else if (group == 3) {
            st = word_finish(s);
            if (st == HET_OK) st = append_lower(s, norm + a, b - a);
            if (st == HET_OK) st = word_finish(s);
        } else if (group == 4) st = append_lower(s, norm + a, b - a);
        pos = ov[1];
    }
    return st == HET_OK ? word_finish(s) : st;
}

enum het_status het_tok_wpm_encode(const het_tokenizer *t, const char *text, size_t len, struct het_tok_ids *out,
                                   het_error *err)
{
    struct wpm_session s = { .t = t, .out = out };
    size_t n = 0;
    char *norm = normalise(text, len, &n);
    pcre2_match_data *md = pcre2_match_data_create(5, NULL);
    enum het_status st = norm && md ? word_append(&s, "\xe2\x96\x81", 3) : HET_ERR_NOMEM;
    if (st == HET_OK) st = classify_runs(&s, norm, n, md);
    pcre2_match_data_free(md);
    free(norm);
    free(s.word);
    if (st == HET_ERR_INVALID) return het_error_set(err, st, "tokenize: WordPiece could not classify the input");
    if (st != HET_OK) return het_error_set(err, st, "tokenize: out of memory in the WordPiece encoder");
    return HET_OK;
}
