/*
 * pretokenize.c — the regex pre-tokenizers of byte-level BPE vocabularies.
 *
 * tokenizer.ggml.pre names a list of regexes. As in llama.cpp, they are
 * applied one after the other: each splits every piece the previous ones
 * produced into its matches and the text between them (which stays a piece
 * of its own), and each piece is searched on its own, so lookaheads such as
 * \s+(?!\S) and anchors see the piece's end, not the text's. Matching is
 * PCRE2 in UTF + UCP mode on a copy of the text in which malformed bytes
 * are U+FFFD. \s is spelt out as Unicode White_Space (what llama.cpp uses)
 * because PCRE2's \s also takes U+180E.
 */
#include <stdlib.h>
#include <string.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "model/tokenizer_impl.h"

/* Unicode White_Space, as the body of a character class */
#define WS "\\t-\\r \\x{85}\\x{a0}\\x{1680}\\x{2000}-\\x{200a}\\x{2028}\\x{2029}\\x{202f}\\x{205f}\\x{3000}"
#define SP "[" WS "]"        /* \s */
#define NSP "[^" WS "]"      /* \S */

#define RE_GPT2 "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^" WS "\\p{L}\\p{N}]+|" SP "+(?!" NSP ")"
#define RE_CONTRACTIONS "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
#define RE_LLAMA3_TAIL \
    "| ?[^" WS "\\p{L}\\p{N}]+[\\r\\n]*|" SP "*[\\r\\n]+|" SP "+(?!" NSP ")|" SP "+"
#define RE_LLAMA3 RE_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}" RE_LLAMA3_TAIL
#define RE_QWEN2  RE_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}" RE_LLAMA3_TAIL
#define RE_CJK    "[\\x{4e00}-\\x{9fa5}\\x{800}-\\x{4e00}\\x{ac00}-\\x{d7ff}]+"
#define RE_BLOOM  " ?[^(" WS "|.,!?\\x{2026}\\x{3002}\\x{ff0c}\\x{3001}\\x{964}\\x{6d4}\\x{60c})]+"
#define RE_TEKKEN_WORDS                                                                         \
    "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))*((?=[\\p{L}])([^A-Z]))+|"                      \
    "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))+((?=[\\p{L}])([^A-Z]))*"
#define RE_TEKKEN RE_TEKKEN_WORDS "|\\p{N}| ?[^" WS "\\p{L}\\p{N}]+[\\r\\n/]*|" SP "*[\\r\\n]+|" SP "+(?!" NSP ")|" SP "+"
#define RE_GPT4O_CASE "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?"
#define RE_GPT4O                                                                                \
    "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))*((?=[\\p{L}])([^A-Z]))+" RE_GPT4O_CASE "|"     \
    "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))+((?=[\\p{L}])([^A-Z]))*" RE_GPT4O_CASE         \
    "|\\p{N}{1,3}| ?[^" WS "\\p{L}\\p{N}]+[\\r\\n/]*|" SP "*[\\r\\n]+|" SP "+(?!" NSP ")|" SP "+"

/* the cased letters DeepSeek-LLM's tokenizer lists explicitly */
#define RE_DEEPSEEK_LETTERS                                                                              \
    "A-Za-z\\x{b5}\\x{c0}-\\x{d6}\\x{d8}-\\x{f6}\\x{f8}-\\x{1ba}\\x{1bc}-\\x{1bf}\\x{1c4}-\\x{293}"         \
    "\\x{295}-\\x{2af}\\x{370}-\\x{373}\\x{376}\\x{377}\\x{37b}-\\x{37d}\\x{37f}\\x{386}\\x{388}-\\x{38a}" \
    "\\x{38c}\\x{38e}-\\x{3a1}\\x{3a3}-\\x{3f5}\\x{3f7}-\\x{481}\\x{48a}-\\x{52f}\\x{531}-\\x{556}"        \
    "\\x{10a0}-\\x{10c5}\\x{13a0}-\\x{13f5}\\x{13f8}-\\x{13fd}\\x{1c90}-\\x{1cba}\\x{1cbd}-\\x{1cbf}"     \
    "\\x{1d00}-\\x{1d2b}\\x{1d6b}-\\x{1d77}\\x{1d79}-\\x{1d9a}\\x{1e00}-\\x{1f15}\\x{1f18}-\\x{1f1d}"     \
    "\\x{1f20}-\\x{1f45}\\x{1f48}-\\x{1f4d}\\x{1f50}-\\x{1f57}\\x{1f59}\\x{1f5b}\\x{1f5d}"               \
    "\\x{1f5f}-\\x{1f7d}\\x{1f80}-\\x{1fb4}\\x{1fb6}-\\x{1fbc}\\x{1fbe}\\x{1fc2}-\\x{1fc4}"              \
    "\\x{1fc6}-\\x{1fcc}\\x{1fd0}-\\x{1fd3}\\x{1fd6}-\\x{1fdb}\\x{1fe0}-\\x{1fec}\\x{1ff2}-\\x{1ff4}"     \
    "\\x{1ff6}-\\x{1ffc}\\x{2102}\\x{2107}\\x{210a}-\\x{2113}\\x{2115}\\x{2119}-\\x{211d}\\x{2124}"      \
    "\\x{2126}\\x{2128}\\x{212a}-\\x{212d}\\x{212f}-\\x{2134}\\x{2139}\\x{213c}-\\x{213f}"              \
    "\\x{2145}-\\x{2149}\\x{214e}\\x{2183}\\x{2184}\\x{2c00}-\\x{2c7b}\\x{2c7e}-\\x{2ce4}"              \
    "\\x{2ceb}-\\x{2cee}\\x{2cf2}\\x{2cf3}\\x{a640}-\\x{a66d}\\x{a680}-\\x{a69b}\\x{a722}-\\x{a76f}"      \
    "\\x{a771}-\\x{a787}\\x{a78b}-\\x{a78e}\\x{ab70}-\\x{abbf}\\x{fb00}-\\x{fb06}\\x{fb13}-\\x{fb17}"    \
    "\\x{ff21}-\\x{ff3a}\\x{ff41}-\\x{ff5a}\\x{10400}-\\x{1044f}\\x{104b0}-\\x{104d3}"                  \
    "\\x{104d8}-\\x{104fb}\\x{10c80}-\\x{10cb2}\\x{10cc0}-\\x{10cf2}\\x{118a0}-\\x{118df}"              \
    "\\x{1e900}-\\x{1e943}"

#define MAX_REGEXES 6

struct pre_def {
    const char *names;   /* '|'-separated tokenizer.ggml.pre values */
    bool        ignore_merges, add_bos;
    const char *re[MAX_REGEXES];
};

static const struct pre_def pre_defs[] = {
    { "default", false, false,
      { "[\\p{P}\\$\\+<=>\\^~\\|]+", RE_GPT2, "\\p{N}+", "[0-9][0-9][0-9]" } },
    { "llama3|llama-v3|llama-bpe|falcon3", true, true, { RE_LLAMA3 } },
    { "dbrx|smaug-bpe|chatglm-bpe", false, false, { RE_LLAMA3 } },
    { "deepseek-llm", false, false,
      { "[\\r\\n]", SP "?[" RE_DEEPSEEK_LETTERS "]+",
        SP "?[!-/:-~\\x{ff01}-\\x{ff0f}\\x{ff1a}-\\x{ff5e}\\x{2018}-\\x{201f}\\x{3000}-\\x{3002}]+",
        SP "+\\z", RE_CJK, "\\p{N}+" } },
    { "deepseek-coder", false, false, { "[\\r\\n]", SP "?\\p{L}+", SP "?\\p{P}+", RE_CJK, "\\p{N}" } },
    { "falcon", false, false, { "[\\p{P}\\$\\+<=>\\^~\\|`]+", RE_GPT2, "[0-9][0-9][0-9]" } },
    { "starcoder|refact|command-r|smollm|codeshell|exaone|minerva-7b", false, false, { "\\p{N}", RE_GPT2 } },
    { "gpt-2|phi-2|jina-es|jina-de|gigachat|jina-v1-en|jina-v2-es|jina-v2-de|jina-v2-code|roberta-bpe|mpt|olmo|jais",
      false, false, { RE_GPT2 } },
    { "qwen2|deepseek-r1-qwen|megrez|stablelm2", false, false, { RE_QWEN2 } },
    { "poro-chat|bloom|gpt3-finnish", false, false, { RE_BLOOM } },
    { "viking", false, false, { RE_BLOOM, "\\p{N}" } },
    { "tekken", true, true, { RE_TEKKEN } },
    { "gpt-4o", false, false, { RE_GPT4O } },
};

struct het_pretok {
    const struct pre_def *def;
    pcre2_code           *code[MAX_REGEXES];
    int                   n_code;
};

static bool name_in(const char *list, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = list; *p;) {
        const char *bar = strchr(p, '|');
        size_t len = bar ? (size_t)(bar - p) : strlen(p);
        if (len == n && memcmp(p, name, n) == 0) return true;
        if (!bar) break;
        p = bar + 1;
    }
    return false;
}

void het_pretok_free(struct het_pretok *p)
{
    if (!p) return;
    for (int i = 0; i < p->n_code; i++) pcre2_code_free(p->code[i]);
    free(p);
}

enum het_status het_pretok_create(const char *pre, struct het_pretok **out, het_error *err)
{
    const struct pre_def *def = NULL;
    const char *name = pre && *pre ? pre : "default";
    *out = NULL;
    for (size_t i = 0; i < sizeof pre_defs / sizeof pre_defs[0] && !def; i++)
        if (name_in(pre_defs[i].names, name)) def = &pre_defs[i];
    if (!def)
        return het_error_set(err, HET_ERR_UNSUPPORTED, "tokenizer: tokenizer.ggml.pre = \"%s\" not supported", name);
    struct het_pretok *p = calloc(1, sizeof *p);
    if (!p) return het_error_set(err, HET_ERR_NOMEM, "tokenizer: out of memory");
    p->def = def;
    for (int i = 0; i < MAX_REGEXES && def->re[i]; i++) {
        int code;
        PCRE2_SIZE at;
        p->code[i] = pcre2_compile((PCRE2_SPTR)def->re[i], PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP, &code, &at,
                                   NULL);
        if (!p->code[i]) {
            PCRE2_UCHAR msg[128];
            pcre2_get_error_message(code, msg, sizeof msg);
            het_pretok_free(p);
            return het_error_set(err, HET_ERR_INVALID, "tokenizer: pre-tokenizer \"%s\" regex %d, offset %zu: %s",
                                 name, i, (size_t)at, (const char *)msg);
        }
        p->n_code = i + 1;
        pcre2_jit_compile(p->code[i], PCRE2_JIT_COMPLETE);   /* optional: falls back to the interpreter */
    }
    *out = p;
    return HET_OK;
}

bool het_pretok_ignore_merges(const struct het_pretok *p) { return p->def->ignore_merges; }
bool het_pretok_add_bos(const struct het_pretok *p) { return p->def->add_bos; }

/* ---- splitting ------------------------------------------------------------- */

struct split_state {
    const char *subject;   /* sanitised UTF-8 of the whole fragment */
    size_t      len;
    uint32_t   *byte_cpt;  /* byte offset -> code point index (len + 1 entries) */
    uint32_t   *cpt_byte;  /* code point index -> byte offset (n + 1 entries) */
    pcre2_match_data *md;
};

static enum het_status push_len(size_t **v, size_t *n, size_t *cap, size_t len)
{
    if (*n == *cap) {
        size_t c = *cap ? *cap * 2 : 64;
        size_t *nv = realloc(*v, c * sizeof *nv);
        if (!nv) return HET_ERR_NOMEM;
        *v = nv;
        *cap = c;
    }
    (*v)[(*n)++] = len;
    return HET_OK;
}

static int run_match(const pcre2_code *code, struct split_state *s, size_t from, size_t to, size_t pos)
{
    PCRE2_SPTR subj = (PCRE2_SPTR)s->subject + from;
    int rc = pcre2_match(code, subj, to - from, pos, PCRE2_NO_UTF_CHECK, s->md, NULL);
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT)
        rc = pcre2_match(code, subj, to - from, pos, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, s->md, NULL);
    return rc;
}

/* Split the piece of code points [c0, c1) with one regex, appending lengths. */
static enum het_status split_piece(const pcre2_code *code, struct split_state *s, size_t c0, size_t c1,
                                   size_t **out, size_t *n_out, size_t *cap, het_error *err)
{
    size_t from = s->cpt_byte[c0], to = s->cpt_byte[c1], pos = 0, last = 0;
    while (pos <= to - from) {
        int rc = run_match(code, s, from, to, pos);
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) {
            PCRE2_UCHAR msg[128];
            pcre2_get_error_message(rc, msg, sizeof msg);
            return het_error_set(err, HET_ERR_INVALID, "tokenize: pre-tokenizer match at byte %zu: %s", from + pos,
                                 (const char *)msg);
        }
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(s->md);
        size_t ms = ov[0], me = ov[1];
        if (me == ms) {   /* empty match: never a piece; step over one character */
            if (ms >= to - from) break;
            pos = ms + het_utf8_len((unsigned char)s->subject[from + ms]);
            continue;
        }
        if (ms > last && push_len(out, n_out, cap, s->byte_cpt[from + ms] - s->byte_cpt[from + last]) != HET_OK)
            return het_error_set(err, HET_ERR_NOMEM, "tokenize: out of memory");
        if (push_len(out, n_out, cap, s->byte_cpt[from + me] - s->byte_cpt[from + ms]) != HET_OK)
            return het_error_set(err, HET_ERR_NOMEM, "tokenize: out of memory");
        last = pos = me;
    }
    if (to - from > last && push_len(out, n_out, cap, c1 - s->byte_cpt[from + last]) != HET_OK)
        return het_error_set(err, HET_ERR_NOMEM, "tokenize: out of memory");
    return HET_OK;
}

/* Sanitised UTF-8 of the code points (surrogates -> U+FFFD) and both offset maps. */
static enum het_status build_subject(struct split_state *s, const uint32_t *cpts, size_t n)
{
    char *buf = malloc(n * 4 + 1);
    s->cpt_byte = malloc((n + 1) * sizeof *s->cpt_byte);
    s->byte_cpt = malloc((n * 4 + 1) * sizeof *s->byte_cpt);
    s->subject = buf;
    if (!buf || !s->cpt_byte || !s->byte_cpt) return HET_ERR_NOMEM;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t c = cpts[i] >= 0xD800 && cpts[i] <= 0xDFFF ? 0xFFFD : cpts[i];
        s->cpt_byte[i] = (uint32_t)k;
        size_t m = het_utf8_encode(c, buf + k);
        for (size_t j = 0; j < m; j++) s->byte_cpt[k + j] = (uint32_t)i;
        k += m;
    }
    s->cpt_byte[n] = (uint32_t)k;
    s->byte_cpt[k] = (uint32_t)n;
    s->len = k;
    return HET_OK;
}

void het_pretok_words_free(struct het_pretok_words *w)
{
    free(w->cpts);
    free(w->lens);
    memset(w, 0, sizeof *w);
}

static enum het_status split_all(const struct het_pretok *p, struct split_state *s, struct het_pretok_words *w,
                                 het_error *err)
{
    size_t *cur = NULL, n_cur = 0, cap_cur = 0, *next = NULL, n_next = 0, cap_next = 0;
    enum het_status st = HET_OK;
    if (w->n_cpts && push_len(&cur, &n_cur, &cap_cur, w->n_cpts) != HET_OK) st = HET_ERR_NOMEM;
    for (int r = 0; r < p->n_code && st == HET_OK; r++) {
        n_next = 0;
        size_t c0 = 0;
        for (size_t i = 0; i < n_cur && st == HET_OK; c0 += cur[i], i++)
            st = split_piece(p->code[r], s, c0, c0 + cur[i], &next, &n_next, &cap_next, err);
        size_t *tv = cur, tc = cap_cur;
        cur = next, n_cur = n_next, cap_cur = cap_next;
        next = tv, cap_next = tc;
    }
    free(next);
    if (st != HET_OK) {
        free(cur);
        return st == HET_ERR_NOMEM ? het_error_set(err, st, "tokenize: out of memory") : st;
    }
    w->lens = cur;
    w->n_words = n_cur;
    return HET_OK;
}

enum het_status het_pretok_split(const struct het_pretok *p, const char *text, size_t len,
                                 struct het_pretok_words *w, het_error *err)
{
    memset(w, 0, sizeof *w);
    struct split_state s = { 0 };
    enum het_status st = HET_OK;
    w->cpts = malloc((len ? len : 1) * sizeof *w->cpts);
    if (!w->cpts) return het_error_set(err, HET_ERR_NOMEM, "tokenize: out of memory");
    w->n_cpts = het_utf8_decode(text, len, w->cpts);
    if (build_subject(&s, w->cpts, w->n_cpts) != HET_OK || !(s.md = pcre2_match_data_create(4, NULL)))
        st = het_error_set(err, HET_ERR_NOMEM, "tokenize: out of memory");
    if (st == HET_OK) st = split_all(p, &s, w, err);
    pcre2_match_data_free(s.md);
    free((char *)s.subject);
    free(s.cpt_byte);
    free(s.byte_cpt);
    if (st != HET_OK) het_pretok_words_free(w);
    return st;
}
