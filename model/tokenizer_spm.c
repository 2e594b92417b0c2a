/*
 * tokenizer_spm.c — SentencePiece-style BPE over scores ("llama" vocabularies).
 *
 * Spaces become U+2581 "▁" (and the text gets a leading one when asked),
 * the text is cut into UTF-8 characters, and adjacent symbols whose
 * concatenation is a vocabulary entry are merged, highest score first (ties:
 * leftmost first), until no pair is left. A final symbol that is not in the
 * vocabulary falls back to its bytes as <0xNN> tokens.
 */
#include <stdlib.h>
#include <string.h>

#include "model/tokenizer_impl.h"

#define SPACE_ESC     "\xe2\x96\x81"
#define SPACE_ESC_LEN 3

struct spm_session {
    const het_tokenizer   *t;
    char                  *text;
    size_t                 len;
    struct het_tok_symbol *sym;
    size_t                 n_sym;
    struct het_tok_heap    heap;
};

static enum het_status escape(struct spm_session *s, const char *text, size_t len, bool add_prefix)
{
    size_t spaces = add_prefix;
    for (size_t i = 0; i < len; i++) spaces += text[i] == ' ';
    s->text = malloc(len + spaces * (SPACE_ESC_LEN - 1) + 1);
    if (!s->text) return HET_ERR_NOMEM;
    size_t k = 0;
    if (add_prefix) {
        memcpy(s->text, SPACE_ESC, SPACE_ESC_LEN);
        k = SPACE_ESC_LEN;
    }
    for (size_t i = 0; i < len; i++) {
        if (text[i] == ' ') {
            memcpy(s->text + k, SPACE_ESC, SPACE_ESC_LEN);
            k += SPACE_ESC_LEN;
        } else {
            s->text[k++] = text[i];
        }
    }
    s->len = k;
    return HET_OK;
}

static enum het_status split_chars(struct spm_session *s)
{
    s->sym = malloc((s->len ? s->len : 1) * sizeof *s->sym);
    if (!s->sym) return HET_ERR_NOMEM;
    for (size_t off = 0; off < s->len;) {
        size_t n = het_utf8_len((unsigned char)s->text[off]);
        if (n > s->len - off) n = s->len - off;
        int32_t i = (int32_t)s->n_sym++;
        s->sym[i] = (struct het_tok_symbol){ i - 1, off + n == s->len ? -1 : i + 1, (uint32_t)off, (uint32_t)n };
        off += n;
    }
    return HET_OK;
}

static enum het_status try_pair(struct spm_session *s, int32_t left, int32_t right)
{
    if (left < 0 || right < 0) return HET_OK;
    const struct het_tok_symbol *l = &s->sym[left], *r = &s->sym[right];
    int32_t id = het_tok_lookup(s->t, s->text + l->off, l->n + r->n);
    if (id < 0) return HET_OK;
    struct het_tok_bigram b = { -(double)s->t->tokens[id].score, left, right, l->n, r->n };
    return het_tok_heap_push(&s->heap, b);
}

static enum het_status merge_all(struct spm_session *s)
{
    enum het_status st = HET_OK;
    for (size_t i = 1; i < s->n_sym && st == HET_OK; i++) st = try_pair(s, (int32_t)i - 1, (int32_t)i);
    struct het_tok_bigram b;
    while (st == HET_OK && het_tok_heap_pop(&s->heap, &b)) {
        struct het_tok_symbol *l = &s->sym[b.left], *r = &s->sym[b.right];
        if (l->n == 0 || r->n == 0 || l->n != b.left_n || r->n != b.right_n) continue;   /* stale */
        l->n += r->n;
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0) s->sym[r->next].prev = b.left;
        st = try_pair(s, l->prev, b.left);
        if (st == HET_OK) st = try_pair(s, b.left, l->next);
    }
    return st;
}

static enum het_status emit(const struct spm_session *s, struct het_tok_ids *out)
{
    if (s->n_sym == 0) return HET_OK;
    for (int32_t i = 0; i != -1; i = s->sym[i].next) {
        const struct het_tok_symbol *y = &s->sym[i];
        int32_t id = het_tok_lookup(s->t, s->text + y->off, y->n);
        if (id >= 0) {
            if (het_tok_ids_push(out, id) != HET_OK) return HET_ERR_NOMEM;
            continue;
        }
        for (uint32_t k = 0; k < y->n; k++) {
            int32_t b = s->t->byte_token[(unsigned char)s->text[y->off + k]];
            if (b >= 0 && het_tok_ids_push(out, b) != HET_OK) return HET_ERR_NOMEM;
        }
    }
    return HET_OK;
}

enum het_status het_tok_spm_encode(const het_tokenizer *t, const char *text, size_t len, bool add_prefix,
                                   struct het_tok_ids *out, het_error *err)
{
    struct spm_session s = { .t = t };
    enum het_status st = escape(&s, text, len, add_prefix);
    if (st == HET_OK) st = split_chars(&s);
    if (st == HET_OK) st = merge_all(&s);
    if (st == HET_OK) st = emit(&s, out);
    free(s.text);
    free(s.sym);
    free(s.heap.v);
    if (st != HET_OK) return het_error_set(err, st, "tokenize: out of memory in the SPM encoder (%zu bytes)", len);
    return HET_OK;
}
