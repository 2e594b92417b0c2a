/*
 * tokenizer_bpe.c — byte-level BPE ("gpt2" vocabularies).
 *
 * The pre-tokenizer (pretokenize.c) cuts the text into words; each word's
 * UTF-8 bytes are mapped to the printable stand-ins of GPT-2's byte<->unicode
 * table, split into characters, and adjacent symbols are merged by the rank
 * of their pair in tokenizer.ggml.merges (lowest rank first, ties leftmost)
 * until no ranked pair is left. Ranks sit in a hash index keyed on the pair's
 * bytes, which are contiguous in the word, so a lookup copies nothing.
 */
#include <stdlib.h>
#include <string.h>

#include "model/tokenizer_impl.h"

#define KEY_MERGES "tokenizer.ggml.merges"
#define N_STANDINS 0x144   /* stand-ins are below U+0144 */

struct merge {
    const char *first;        /* "first second" in the arena, not NUL-split */
    uint32_t    first_len, second_len;
};

struct het_tok_bpe {
    struct het_pretok   *pre;
    bool                 ignore_merges;
    struct merge        *merges;   /* index = rank */
    char                *arena;
    struct het_tok_index rank_index;
    char                 byte_utf8[256][2];   /* byte -> UTF-8 of its stand-in */
    uint8_t              byte_utf8_len[256];
    int16_t              standin_byte[N_STANDINS];   /* stand-in code point -> byte, -1 if none */
};

static bool byte_is_printable(int b)
{
    return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

/* GPT-2's table: printable bytes stand for themselves, the other 68 take
 * U+0100.. in byte order. */
static void build_byte_map(struct het_tok_bpe *b)
{
    uint32_t next = 0x100;
    for (int i = 0; i < N_STANDINS; i++) b->standin_byte[i] = -1;
    for (int i = 0; i < 256; i++) {
        uint32_t cpt = byte_is_printable(i) ? (uint32_t)i : next++;
        char tmp[4];
        b->byte_utf8_len[i] = (uint8_t)het_utf8_encode(cpt, tmp);
        memcpy(b->byte_utf8[i], tmp, b->byte_utf8_len[i]);
        b->standin_byte[cpt] = (int16_t)i;
    }
}

static uint32_t pair_hash(const char *l, uint32_t ln, const char *r, uint32_t rn)
{
    return het_tok_hash_end(het_tok_hash_update(het_tok_hash_update(het_tok_hash_begin(), l, ln), r, rn));
}

/* Rank of the merge (l[0..ln), r[0..rn)), or -1. */
static int32_t pair_rank(const struct het_tok_bpe *b, const char *l, uint32_t ln, const char *r, uint32_t rn)
{
    uint32_t h = pair_hash(l, ln, r, rn), pos = UINT32_MAX;
    for (int32_t k; (k = het_tok_index_next(&b->rank_index, h, &pos)) >= 0;) {
        const struct merge *m = &b->merges[k];
        if (m->first_len == ln && m->second_len == rn && memcmp(m->first, l, ln) == 0 &&
            memcmp(m->first + ln + 1, r, rn) == 0)
            return k;
    }
    return -1;
}

static enum het_status load_merges(struct het_tok_bpe *b, const het_gguf *g, het_error *err)
{
    int64_t n = het_gguf_get_arr_n(g, KEY_MERGES);
    if (n < 0) return het_error_set(err, HET_ERR_FORMAT, "tokenizer: gpt2 vocabulary without %s", KEY_MERGES);
    if (het_gguf_get_arr_type(g, KEY_MERGES) != HET_GGUF_TYPE_STRING || n >= INT32_MAX / 2)
        return het_error_set(err, HET_ERR_FORMAT, "tokenizer: %s must be an array of strings", KEY_MERGES);
    size_t total = 0, len;
    for (int64_t i = 0; i < n; i++) {
        if (!het_gguf_get_arr_str(g, KEY_MERGES, i, &len))
            return het_error_set(err, HET_ERR_FORMAT, "tokenizer: %s[%lld] unreadable", KEY_MERGES, (long long)i);
        total += len + 1;
    }
    b->merges = malloc((n ? (size_t)n : 1) * sizeof *b->merges);
    b->arena = malloc(total ? total : 1);
    if (!b->merges || !b->arena || het_tok_index_init(&b->rank_index, (size_t)n) != HET_OK)
        return het_error_set(err, HET_ERR_NOMEM, "tokenizer: out of memory for %lld merges", (long long)n);
    char *p = b->arena;
    for (int64_t i = 0; i < n; i++) {
        const char *s = het_gguf_get_arr_str(g, KEY_MERGES, i, &len);
        memcpy(p, s, len);
        p[len] = '\0';
        const char *sp = len > 1 ? memchr(p + 1, ' ', len - 1) : NULL;   /* split at the first space after byte 0 */
        struct merge m = { p, 0, 0 };
        if (sp) {
            m.first_len = (uint32_t)(sp - p);
            m.second_len = (uint32_t)(len - m.first_len - 1);
        }
        b->merges[i] = m;
        p += len + 1;
        const char *second = m.first + m.first_len + 1;
        if (pair_rank(b, m.first, m.first_len, second, m.second_len) < 0)   /* a repeated pair keeps its first rank */
            het_tok_index_add(&b->rank_index, pair_hash(m.first, m.first_len, second, m.second_len), (int32_t)i);
    }
    return HET_OK;
}

enum het_status het_tok_bpe_init(het_tokenizer *t, const het_gguf *g, het_error *err)
{
    struct het_tok_bpe *b = calloc(1, sizeof *b);
    if (!b) return het_error_set(err, HET_ERR_NOMEM, "tokenizer: out of memory");
    t->bpe = b;
    build_byte_map(b);
    enum het_status st = het_pretok_create(het_gguf_get_str(g, "tokenizer.ggml.pre"), &b->pre, err);
    if (st != HET_OK) return st;
    b->ignore_merges = het_pretok_ignore_merges(b->pre);
    if (het_pretok_add_bos(b->pre)) t->add_bos = true;
    return load_merges(b, g, err);
}

void het_tok_bpe_free(struct het_tok_bpe *b)
{
    if (!b) return;
    het_pretok_free(b->pre);
    het_tok_index_free(&b->rank_index);
    free(b->merges);
    free(b->arena);
    free(b);
}

/* ---- encode ---------------------------------------------------------------- */

struct bpe_session {
    const het_tokenizer   *t;
    const struct het_tok_bpe *b;
    char                  *word;      /* mapped bytes of the current word */
    size_t                 word_len, word_cap;
    struct het_tok_symbol *sym;
    size_t                 n_sym, sym_cap;
    struct het_tok_heap    heap;
    struct het_tok_ids    *out;
};

static enum het_status reserve(void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap) return HET_OK;
    size_t c = *cap ? *cap : 64;
    while (c < need) c *= 2;
    void *np = realloc(*p, c * elem);
    if (!np) return HET_ERR_NOMEM;
    *p = np;
    *cap = c;
    return HET_OK;
}

/* UTF-8 of the word's code points, each byte replaced by its stand-in. */
static enum het_status map_word(struct bpe_session *s, const uint32_t *cpts, size_t n)
{
    if (reserve((void **)&s->word, &s->word_cap, n * 8 + 1, 1) != HET_OK) return HET_ERR_NOMEM;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        char raw[4];
        size_t m = het_utf8_encode(cpts[i], raw);
        for (size_t j = 0; j < m; j++) {
            unsigned char c = (unsigned char)raw[j];
            memcpy(s->word + k, s->b->byte_utf8[c], s->b->byte_utf8_len[c]);
            k += s->b->byte_utf8_len[c];
        }
    }
    s->word_len = k;
    return HET_OK;
}

static enum het_status try_pair(struct bpe_session *s, int32_t left, int32_t right)
{
    if (left < 0 || right < 0) return HET_OK;
    const struct het_tok_symbol *l = &s->sym[left], *r = &s->sym[right];
    int32_t rank = pair_rank(s->b, s->word + l->off, l->n, s->word + r->off, r->n);
    if (rank < 0) return HET_OK;
    return het_tok_heap_push(&s->heap, (struct het_tok_bigram){ (double)rank, left, right, l->n, r->n });
}

static enum het_status merge_word(struct bpe_session *s)
{
    s->n_sym = 0;
    s->heap.n = 0;
    if (reserve((void **)&s->sym, &s->sym_cap, s->word_len + 1, sizeof *s->sym) != HET_OK) return HET_ERR_NOMEM;
    for (size_t off = 0; off < s->word_len;) {
        size_t n = het_utf8_len((unsigned char)s->word[off]);
        if (n > s->word_len - off) n = s->word_len - off;
        int32_t i = (int32_t)s->n_sym++;
        s->sym[i] = (struct het_tok_symbol){ i - 1, off + n == s->word_len ? -1 : i + 1, (uint32_t)off, (uint32_t)n };
        off += n;
    }
    enum het_status st = HET_OK;
    for (size_t i = 1; i < s->n_sym && st == HET_OK; i++) st = try_pair(s, (int32_t)i - 1, (int32_t)i);
    struct het_tok_bigram bg;
    while (st == HET_OK && het_tok_heap_pop(&s->heap, &bg)) {
        struct het_tok_symbol *l = &s->sym[bg.left], *r = &s->sym[bg.right];
        if (l->n == 0 || r->n == 0 || l->n != bg.left_n || r->n != bg.right_n) continue;   /* stale */
        l->n += r->n;
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0) s->sym[r->next].prev = bg.left;
        st = try_pair(s, l->prev, bg.left);
        if (st == HET_OK) st = try_pair(s, bg.left, l->next);
    }
    return st;
}

/* A symbol that is not a token falls back to whichever of its single bytes are. */
static enum het_status emit_symbols(struct bpe_session *s)
{
    for (size_t i = 0; i < s->n_sym; i++) {
        const struct het_tok_symbol *y = &s->sym[i];
        if (y->n == 0) continue;
        int32_t id = het_tok_lookup(s->t, s->word + y->off, y->n);
        if (id >= 0) {
            if (het_tok_ids_push(s->out, id) != HET_OK) return HET_ERR_NOMEM;
            continue;
        }
        for (uint32_t k = 0; k < y->n; k++) {
            int32_t b = het_tok_lookup(s->t, s->word + y->off + k, 1);
            if (b >= 0 && het_tok_ids_push(s->out, b) != HET_OK) return HET_ERR_NOMEM;
        }
    }
    return HET_OK;
}

static enum het_status encode_word(struct bpe_session *s, const uint32_t *cpts, size_t n)
{
    if (map_word(s, cpts, n) != HET_OK) return HET_ERR_NOMEM;
    if (s->b->ignore_merges) {
        int32_t id = het_tok_lookup(s->t, s->word, s->word_len);
        if (id >= 0) return het_tok_ids_push(s->out, id);
    }
    enum het_status st = merge_word(s);
    return st == HET_OK ? emit_symbols(s) : st;
}

enum het_status het_tok_bpe_encode(const het_tokenizer *t, const char *text, size_t len, struct het_tok_ids *out,
                                   het_error *err)
{
    struct het_pretok_words w;
    enum het_status st = het_pretok_split(t->bpe->pre, text, len, &w, err);
    if (st != HET_OK) return st;
    struct bpe_session s = { .t = t, .b = t->bpe, .out = out };
    size_t c0 = 0;
    for (size_t i = 0; i < w.n_words && st == HET_OK; c0 += w.lens[i], i++)
        st = encode_word(&s, w.cpts + c0, w.lens[i]);
    free(s.word);
    free(s.sym);
    free(s.heap.v);
    het_pretok_words_free(&w);
    if (st != HET_OK) return het_error_set(err, st, "tokenize: out of memory in the BPE encoder");
    return HET_OK;
}

/* ---- decode ---------------------------------------------------------------- */

/* Stand-ins map back to their byte; anything else (which byte-level
 * vocabularies do not produce) is passed through as it is. dst may be NULL. */
static size_t decode_into(const struct het_tok_bpe *b, const char *text, size_t len, char *dst)
{
    size_t k = 0;
    for (size_t i = 0; i < len;) {
        size_t n = het_utf8_len((unsigned char)text[i]);
        if (n > len - i) n = len - i;
        uint32_t cpt[4];
        int byte = -1;
        if (het_utf8_decode(text + i, n, cpt) == 1 && cpt[0] < N_STANDINS) byte = b->standin_byte[cpt[0]];
        if (byte >= 0) {
            if (dst) dst[k] = (char)byte;
            k++;
        } else {
            if (dst) memcpy(dst + k, text + i, n);
            k += n;
        }
        i += n;
    }
    return k;
}

int het_tok_bpe_decode(const het_tokenizer *t, const char *text, size_t len, char *buf, int cap)
{
    size_t need = decode_into(t->bpe, text, len, NULL);
    if (cap < 0 || need > (size_t)cap) return -(int)need;
    return (int)decode_into(t->bpe, text, len, buf);
}
