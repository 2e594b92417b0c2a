/*
 * tokenizer_impl.h — what the tokenizer files share: the vocabulary record,
 * the text -> id hash index, the growable id list, UTF-8/Unicode helpers and
 * the per-kind entry points (SPM, BPE, WPM) that tokenizer.c dispatches to.
 *
 * Behaviour follows llama.cpp's vocabulary code, because the test vectors
 * are llama.cpp's: the same defaults, the same special-token partitioning,
 * the same merge order and tie-breaking.
 */
#ifndef HET_MODEL_TOKENIZER_IMPL_H
#define HET_MODEL_TOKENIZER_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "het/gguf.h"
#include "het/status.h"
#include "het/tokenizer.h"

/* token types as stored in tokenizer.ggml.token_type */
enum het_tok_type {
    HET_TOK_TYPE_NORMAL       = 1,
    HET_TOK_TYPE_UNKNOWN      = 2,
    HET_TOK_TYPE_CONTROL      = 3,
    HET_TOK_TYPE_USER_DEFINED = 4,
    HET_TOK_TYPE_UNUSED       = 5,
    HET_TOK_TYPE_BYTE         = 6,
};

/* per-token attribute bits (derived from the type, plus load-time fix-ups) */
enum het_tok_attr {
    HET_TOK_ATTR_NORMAL       = 1u << 0,
    HET_TOK_ATTR_UNKNOWN      = 1u << 1,
    HET_TOK_ATTR_CONTROL      = 1u << 2,
    HET_TOK_ATTR_USER_DEFINED = 1u << 3,
    HET_TOK_ATTR_UNUSED       = 1u << 4,
    HET_TOK_ATTR_BYTE         = 1u << 5,
    HET_TOK_ATTR_LSTRIP       = 1u << 6,  /* eat whitespace left of it when split out  */
    HET_TOK_ATTR_RSTRIP       = 1u << 7,  /* eat whitespace right of it when split out */
    HET_TOK_ATTR_EOG          = 1u << 8,  /* ends generation                          */
};

struct het_tok_token {
    const char *text;   /* into het_tokenizer.arena, NUL-terminated */
    uint32_t    len;
    uint32_t    attr;
    float       score;
};

/* Open-addressing index from a 32-bit hash to int32 values; the caller keeps
 * the keys and compares them (so one structure serves token texts and merge
 * pairs). */
struct het_tok_index {
    struct het_tok_slot {
        uint32_t hash;
        uint32_t value1;   /* value + 1; 0 = empty */
    } *slot;
    uint32_t mask;
};

enum het_status het_tok_index_init(struct het_tok_index *ix, size_t n_items);
void            het_tok_index_free(struct het_tok_index *ix);
/* Next value stored under hash h, or -1. Start with *pos = UINT32_MAX. */
int32_t         het_tok_index_next(const struct het_tok_index *ix, uint32_t h, uint32_t *pos);
void            het_tok_index_set(struct het_tok_index *ix, uint32_t pos, int32_t value);
/* Adds (h, value) without looking for an existing key. */
void            het_tok_index_add(struct het_tok_index *ix, uint32_t h, int32_t value);

uint64_t het_tok_hash_begin(void);
uint64_t het_tok_hash_update(uint64_t h, const void *data, size_t n);
static inline uint32_t het_tok_hash_end(uint64_t h) { return (uint32_t)(h ^ (h >> 32)); }

/* growable list of token ids */
struct het_tok_ids {
    int32_t *v;
    size_t   n, cap;
};
enum het_status het_tok_ids_push(struct het_tok_ids *ids, int32_t id);

/* Candidate merge of two adjacent symbols. Smaller key first (SPM: -score,
 * BPE: merge rank), then the leftmost; left_n/right_n are the symbol lengths
 * when it was queued, so a candidate whose symbols changed since is stale. */
struct het_tok_bigram {
    double   key;
    int32_t  left, right;
    uint32_t left_n, right_n;
};
struct het_tok_heap {
    struct het_tok_bigram *v;
    size_t                 n, cap;
};
enum het_status het_tok_heap_push(struct het_tok_heap *h, struct het_tok_bigram b);
bool            het_tok_heap_pop(struct het_tok_heap *h, struct het_tok_bigram *out);

/* a symbol being merged: a byte range of the word, linked to its neighbours */
struct het_tok_symbol {
    int32_t  prev, next;
    uint32_t off, n;   /* n == 0: merged into its left neighbour */
};

struct het_tok_bpe;   /* tokenizer_bpe.c */
struct het_tok_wpm;   /* tokenizer_wpm.c */

struct het_tokenizer {
    enum het_tokenizer_kind kind;
    int32_t                 n_vocab;
    struct het_tok_token   *tokens;
    char                   *arena;
    struct het_tok_index    text_index;
    int32_t                 max_token_len;  /* bytes */

    int32_t bos, eos, eot, eom, unk, sep, pad, mask;  /* -1: none */
    bool    add_bos, add_eos, add_space_prefix;

    int32_t *specials;      /* control / user-defined / unknown ids, longest text first */
    int32_t  n_specials;

    int32_t byte_token[256];   /* SPM byte fallback: <0xNN> (or the raw byte), else unk */

    struct het_tok_bpe *bpe;
    struct het_tok_wpm *wpm;
};

/* id of a token text, or -1 (duplicates: the last id wins, as in llama.cpp) */
int32_t het_tok_lookup(const het_tokenizer *t, const char *s, size_t n);

/* ---- UTF-8 and Unicode (tokenizer_unicode.c) ------------------------------ */
/* Length of the UTF-8 sequence a lead byte announces (1 for stray bytes). */
static inline size_t het_utf8_len(unsigned char c)
{
    static const unsigned char len[16] = { 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4 };
    return len[c >> 4];
}
/* Decode like llama.cpp: each malformed byte becomes U+FFFD, code points above
 * U+10FFFF too. out needs room for n entries; returns the count. */
size_t   het_utf8_decode(const char *s, size_t n, uint32_t *out);
/* Encode one code point (surrogates included) into out[4]; returns bytes. */
size_t   het_utf8_encode(uint32_t cpt, char *out);
bool     het_unicode_is_space(uint32_t cpt);   /* Unicode White_Space */
uint32_t het_unicode_tolower(uint32_t cpt);     /* simple lowercase mapping */
uint32_t het_unicode_nfd_first(uint32_t cpt);   /* first code point of the NFD form */

/* ---- regex pre-tokenizer (pretokenize.c) ---------------------------------- */
struct het_pretok;
/* the text as code points, cut into words: lens[i] code points each */
struct het_pretok_words {
    uint32_t *cpts;
    size_t    n_cpts;
    size_t   *lens;
    size_t    n_words;
};
/* HET_ERR_UNSUPPORTED for an unknown name; NULL/"" means "default". */
enum het_status    het_pretok_create(const char *pre, struct het_pretok **out, het_error *err);
void               het_pretok_free(struct het_pretok *p);
bool               het_pretok_ignore_merges(const struct het_pretok *p);   /* whole-word vocab hits skip BPE */
bool               het_pretok_add_bos(const struct het_pretok *p);
enum het_status    het_pretok_split(const struct het_pretok *p, const char *text, size_t len,
                                    struct het_pretok_words *w, het_error *err);
void               het_pretok_words_free(struct het_pretok_words *w);

/* ---- per-kind entry points ------------------------------------------------ */
/* SPM: text gets the "▁" escaping (and a leading one when add_prefix). */
enum het_status het_tok_spm_encode(const het_tokenizer *t, const char *text, size_t len, bool add_prefix,
                                   struct het_tok_ids *out, het_error *err);

/* BPE: reads merges and compiles the pre-tokenizer named by tokenizer.ggml.pre;
 * may set t->add_bos (llama3-style vocabularies). */
enum het_status het_tok_bpe_init(het_tokenizer *t, const het_gguf *g, het_error *err);
void            het_tok_bpe_free(struct het_tok_bpe *b);
enum het_status het_tok_bpe_encode(const het_tokenizer *t, const char *text, size_t len,
                                   struct het_tok_ids *out, het_error *err);
/* byte-level text of a vocab entry -> bytes; same contract as het_token_to_piece */
int             het_tok_bpe_decode(const het_tokenizer *t, const char *text, size_t len, char *buf, int cap);

enum het_status het_tok_wpm_init(het_tokenizer *t, het_error *err);
void            het_tok_wpm_free(struct het_tok_wpm *w);
enum het_status het_tok_wpm_encode(const het_tokenizer *t, const char *text, size_t len,
                                   struct het_tok_ids *out, het_error *err);

#endif /* HET_MODEL_TOKENIZER_IMPL_H */
