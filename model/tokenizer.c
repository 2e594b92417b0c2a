/*
 * tokenizer.c — the kind-independent half of the tokenizers.
 *
 * Loads the vocabulary from a GGUF's tokenizer.* keys (texts, scores, token
 * types), indexes texts in a hash table, resolves the special ids and the
 * BOS/EOS/space-prefix rules with llama.cpp's per-kind defaults, works out
 * the end-of-generation set, and turns ids back into bytes. het_tokenize
 * first splits the input on special-token texts (user-defined ones always,
 * control/unknown ones only with parse_special, longest text first) and
 * hands the plain-text fragments to the SPM, BPE or WPM encoder.
 */
#include "het/tokenizer.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/tokenizer_impl.h"

#define KEY_TOKENS "tokenizer.ggml.tokens"
#define KEY_SCORES "tokenizer.ggml.scores"
#define KEY_TYPES  "tokenizer.ggml.token_type"
#define HET_TOK_MAX_TEXT (256u << 20)

/* ---- hash index ------------------------------------------------------------ */

uint64_t het_tok_hash_begin(void) { return 0xcbf29ce484222325ull; }

uint64_t het_tok_hash_update(uint64_t h, const void *data, size_t n)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

enum het_status het_tok_index_init(struct het_tok_index *ix, size_t n_items)
{
    size_t cap = 16;
    while (cap < n_items * 2) cap *= 2;
    ix->slot = calloc(cap, sizeof *ix->slot);
    ix->mask = (uint32_t)(cap - 1);
    return ix->slot ? HET_OK : HET_ERR_NOMEM;
}

void het_tok_index_free(struct het_tok_index *ix)
{
    free(ix->slot);
    ix->slot = NULL;
}

int32_t het_tok_index_next(const struct het_tok_index *ix, uint32_t h, uint32_t *pos)
{
    uint32_t p = *pos == UINT32_MAX ? (h & ix->mask) : ((*pos + 1) & ix->mask);
    for (; ix->slot[p].value1; p = (p + 1) & ix->mask) {
        if (ix->slot[p].hash == h) {
            *pos = p;
            return (int32_t)(ix->slot[p].value1 - 1);
        }
    }
    *pos = p;
    return -1;
}

void het_tok_index_set(struct het_tok_index *ix, uint32_t pos, int32_t value)
{
    ix->slot[pos].value1 = (uint32_t)value + 1;
}

void het_tok_index_add(struct het_tok_index *ix, uint32_t h, int32_t value)
{
    uint32_t p = h & ix->mask;
    while (ix->slot[p].value1) p = (p + 1) & ix->mask;
    ix->slot[p].value1 = (uint32_t)value + 1;
    ix->slot[p].hash = h;
}

static uint32_t text_hash(const char *s, size_t n)
{
    return het_tok_hash_end(het_tok_hash_update(het_tok_hash_begin(), s, n));
}

int32_t het_tok_lookup(const het_tokenizer *t, const char *s, size_t n)
{
    uint32_t h = text_hash(s, n), pos = UINT32_MAX;
    for (int32_t id; (id = het_tok_index_next(&t->text_index, h, &pos)) >= 0;) {
        const struct het_tok_token *tk = &t->tokens[id];
        if (tk->len == n && memcmp(tk->text, s, n) == 0) return id;
    }
    return -1;
}

enum het_status het_tok_ids_push(struct het_tok_ids *ids, int32_t id)
{
    if (ids->n == ids->cap) {
        size_t cap = ids->cap ? ids->cap * 2 : 64;
        int32_t *v = realloc(ids->v, cap * sizeof *v);
        if (!v) return HET_ERR_NOMEM;
        ids->v = v;
        ids->cap = cap;
    }
    ids->v[ids->n++] = id;
    return HET_OK;
}

static bool bigram_before(const struct het_tok_bigram *a, const struct het_tok_bigram *b)
{
    return a->key < b->key || (a->key == b->key && a->left < b->left);
}

enum het_status het_tok_heap_push(struct het_tok_heap *h, struct het_tok_bigram b)
{
    if (h->n == h->cap) {
        size_t cap = h->cap ? h->cap * 2 : 64;
        struct het_tok_bigram *v = realloc(h->v, cap * sizeof *v);
        if (!v) return HET_ERR_NOMEM;
        h->v = v;
        h->cap = cap;
    }
    size_t i = h->n++;
    while (i > 0 && bigram_before(&b, &h->v[(i - 1) / 2])) {
        h->v[i] = h->v[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h->v[i] = b;
    return HET_OK;
}

bool het_tok_heap_pop(struct het_tok_heap *h, struct het_tok_bigram *out)
{
    if (h->n == 0) return false;
    *out = h->v[0];
    struct het_tok_bigram last = h->v[--h->n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= h->n) break;
        if (c + 1 < h->n && bigram_before(&h->v[c + 1], &h->v[c])) c++;
        if (!bigram_before(&h->v[c], &last)) break;
        h->v[i] = h->v[c];
        i = c;
    }
    if (h->n) h->v[i] = last;
    return true;
}

/* ---- loading --------------------------------------------------------------- */

static bool is_int_type(enum het_gguf_type type)
{
    return type == HET_GGUF_TYPE_UINT8 || type == HET_GGUF_TYPE_INT8 || type == HET_GGUF_TYPE_UINT16 ||
           type == HET_GGUF_TYPE_INT16 || type == HET_GGUF_TYPE_UINT32 || type == HET_GGUF_TYPE_INT32 ||
           type == HET_GGUF_TYPE_UINT64 || type == HET_GGUF_TYPE_INT64;
}

static bool int_elem(const void *data, enum het_gguf_type type, int64_t i, int64_t *out)
{
    switch (type) {
    case HET_GGUF_TYPE_UINT8:  *out = ((const uint8_t *)data)[i];  return true;
    case HET_GGUF_TYPE_INT8:   *out = ((const int8_t *)data)[i];   return true;
    case HET_GGUF_TYPE_UINT16: *out = ((const uint16_t *)data)[i]; return true;
    case HET_GGUF_TYPE_INT16:  *out = ((const int16_t *)data)[i];  return true;
    case HET_GGUF_TYPE_UINT32: *out = ((const uint32_t *)data)[i]; return true;
    case HET_GGUF_TYPE_INT32:  *out = ((const int32_t *)data)[i];  return true;
    case HET_GGUF_TYPE_UINT64: *out = (int64_t)((const uint64_t *)data)[i]; return true;
    case HET_GGUF_TYPE_INT64:  *out = ((const int64_t *)data)[i];  return true;
    default: return false;
    }
}

static uint32_t attr_of_type(int64_t type)
{
    switch (type) {
    case HET_TOK_TYPE_NORMAL:       return HET_TOK_ATTR_NORMAL;
    case HET_TOK_TYPE_UNKNOWN:      return HET_TOK_ATTR_UNKNOWN;
    case HET_TOK_TYPE_CONTROL:      return HET_TOK_ATTR_CONTROL;
    case HET_TOK_TYPE_USER_DEFINED: return HET_TOK_ATTR_USER_DEFINED;
    case HET_TOK_TYPE_UNUSED:       return HET_TOK_ATTR_UNUSED;
    case HET_TOK_TYPE_BYTE:         return HET_TOK_ATTR_BYTE;
    default:                        return 0;   /* undefined: rendered as nothing */
    }
}

/* Copies the texts into one arena (empty entries become "[EMPTY_i]", as
 * llama.cpp names them) and fills text/len. */
static enum het_status load_texts(het_tokenizer *t, const het_gguf *g, het_error *err)
{
    size_t total = 0, len;
    char empty[32];
    for (int32_t i = 0; i < t->n_vocab; i++) {
        if (!het_gguf_get_arr_str(g, KEY_TOKENS, i, &len))
            return het_error_set(err, HET_ERR_FORMAT, "tokenizer: %s[%d] unreadable", KEY_TOKENS, (int)i);
        total += (len ? len : (size_t)snprintf(empty, sizeof empty, "[EMPTY_%d]", (int)i)) + 1;
    }
    t->arena = malloc(total ? total : 1);
    if (!t->arena) return het_error_set(err, HET_ERR_NOMEM, "tokenizer: out of memory for %zu bytes of vocab", total);
    char *p = t->arena;
    for (int32_t i = 0; i < t->n_vocab; i++) {
        const char *s = het_gguf_get_arr_str(g, KEY_TOKENS, i, &len);
        if (len == 0) {
            len = (size_t)snprintf(empty, sizeof empty, "[EMPTY_%d]", (int)i);
            s = empty;
        }
        memcpy(p, s, len);
        p[len] = '\0';
        t->tokens[i].text = p;
        t->tokens[i].len = (uint32_t)len;
        if ((int32_t)len > t->max_token_len) t->max_token_len = (int32_t)len;
        p += len + 1;
    }
    return HET_OK;
}

static enum het_status load_scores_types(het_tokenizer *t, const het_gguf *g, het_error *err)
{
    int64_t n = het_gguf_get_arr_n(g, KEY_SCORES);
    const float *scores = NULL;
    if (n >= 0) {
        if (n != t->n_vocab || het_gguf_get_arr_type(g, KEY_SCORES) != HET_GGUF_TYPE_FLOAT32)
            return het_error_set(err, HET_ERR_FORMAT, "tokenizer: %s must be %d float32 values", KEY_SCORES,
                                 (int)t->n_vocab);
        scores = het_gguf_get_arr_data(g, KEY_SCORES);
    }
    n = het_gguf_get_arr_n(g, KEY_TYPES);
    const void *types = NULL;
    enum het_gguf_type ttype = het_gguf_get_arr_type(g, KEY_TYPES);
    if (n >= 0) {
        if (n != t->n_vocab || !is_int_type(ttype))
            return het_error_set(err, HET_ERR_FORMAT, "tokenizer: %s must be %d integers", KEY_TYPES,
                                 (int)t->n_vocab);
        types = het_gguf_get_arr_data(g, KEY_TYPES);
    }
    for (int32_t i = 0; i < t->n_vocab; i++) {
        int64_t type = HET_TOK_TYPE_NORMAL;
        if (types) int_elem(types, ttype, i, &type);
        t->tokens[i].attr = attr_of_type(type);
        t->tokens[i].score = scores ? scores[i] : 0.0f;
    }
    return HET_OK;
}

static enum het_status build_index(het_tokenizer *t, het_error *err)
{
    if (het_tok_index_init(&t->text_index, (size_t)t->n_vocab) != HET_OK)
        return het_error_set(err, HET_ERR_NOMEM, "tokenizer: out of memory for the text index");
    for (int32_t i = 0; i < t->n_vocab; i++) {
        const struct het_tok_token *tk = &t->tokens[i];
        uint32_t h = text_hash(tk->text, tk->len), pos = UINT32_MAX;
        int32_t id;
        while ((id = het_tok_index_next(&t->text_index, h, &pos)) >= 0)
            if (t->tokens[id].len == tk->len && memcmp(t->tokens[id].text, tk->text, tk->len) == 0) break;
        if (id >= 0) het_tok_index_set(&t->text_index, pos, i);   /* duplicate text: last id wins */
        else het_tok_index_add(&t->text_index, h, i);
    }
    return HET_OK;
}

/* An id key: absent keeps the default; out of range (0xFFFFFFFF = none in
 * old files) also keeps the default, as llama.cpp does. */
static void read_id(const het_tokenizer *t, const het_gguf *g, const char *key, int32_t *id)
{
    int64_t v;
    if (het_gguf_get_int(g, key, &v) && v >= 0 && v < t->n_vocab) *id = (int32_t)v;
}

static void read_special_ids(het_tokenizer *t, const het_gguf *g)
{
    switch (t->kind) {
    case HET_TOKENIZER_SPM:
        t->bos = 1; t->eos = 2; t->unk = 0;
        break;
    case HET_TOKENIZER_BPE:
        t->bos = 11; t->eos = 11;
        break;
    case HET_TOKENIZER_WPM:
        t->bos = 101; t->unk = 100; t->sep = 102; t->pad = 0; t->mask = 103;
        break;
    }
    int32_t *defaults[] = { &t->bos, &t->eos, &t->unk, &t->sep, &t->pad, &t->mask };
    for (size_t i = 0; i < sizeof defaults / sizeof defaults[0]; i++)
        if (*defaults[i] >= t->n_vocab) *defaults[i] = -1;   /* tiny vocab: the default does not exist */

    if (het_gguf_find_key(g, "tokenizer.ggml.bos_token_id") < 0)
        read_id(t, g, "tokenizer.ggml.cls_token_id", &t->bos);   /* BERT files name [CLS] this way */
    read_id(t, g, "tokenizer.ggml.bos_token_id", &t->bos);
    read_id(t, g, "tokenizer.ggml.eos_token_id", &t->eos);
    read_id(t, g, "tokenizer.ggml.eot_token_id", &t->eot);
    read_id(t, g, "tokenizer.ggml.eom_token_id", &t->eom);
    read_id(t, g, "tokenizer.ggml.unknown_token_id", &t->unk);
    read_id(t, g, "tokenizer.ggml.seperator_token_id", &t->sep);   /* sic: the GGUF key is misspelt */
    read_id(t, g, "tokenizer.ggml.padding_token_id", &t->pad);
    read_id(t, g, "tokenizer.ggml.mask_token_id", &t->mask);
}

static void make_control(het_tokenizer *t, int32_t id)
{
    if (!(t->tokens[id].attr & HET_TOK_ATTR_CONTROL)) t->tokens[id].attr = HET_TOK_ATTR_CONTROL;
}

/* First of a NULL-terminated list of texts that is in the vocabulary, or -1;
 * found that way, it is made a control token, as llama.cpp does. */
static int32_t find_by_text(het_tokenizer *t, const char *const *texts)
{
    for (; *texts; texts++) {
        int32_t id = het_tok_lookup(t, *texts, strlen(*texts));
        if (id >= 0) {
            make_control(t, id);
            return id;
        }
    }
    return -1;
}

/* End-of-generation set, as llama.cpp builds it: eos, eot, eom, the FIM
 * pad/repo/file-separator tokens, and every token whose text is in its list
 * of turn enders (<|im_end|>, <|endoftext|>, <|eot_id|> ...). Tokens found
 * by their text are made control tokens if the file typed them otherwise. */
static void mark_eog(het_tokenizer *t, const het_gguf *g)
{
    static const char *const eot_texts[] = {
        "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<EOT>", "_<EOT>",
        "<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>", NULL,   /* DeepSeek */
    };
    static const char *const eom_texts[] = { "<|eom_id|>", NULL };
    static const char *const fim_pad_texts[] = { "<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", NULL };
    static const char *const fim_rep_texts[] = {
        "<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>", NULL,
    };
    static const char *const fim_sep_texts[] = { "<|file_sep|>", NULL };
    static const char *const eog_texts[] = {
        "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|eom_id|>", "<EOT>", "_<EOT>",
    };
    int32_t fim_pad = -1, fim_rep = -1, fim_sep = -1;
    read_id(t, g, "tokenizer.ggml.fim_pad_token_id", &fim_pad);
    read_id(t, g, "tokenizer.ggml.fim_rep_token_id", &fim_rep);
    read_id(t, g, "tokenizer.ggml.fim_sep_token_id", &fim_sep);
    if (t->eot < 0) t->eot = find_by_text(t, eot_texts);
    if (t->eom < 0) t->eom = find_by_text(t, eom_texts);
    if (fim_pad < 0) fim_pad = find_by_text(t, fim_pad_texts);
    if (fim_rep < 0) fim_rep = find_by_text(t, fim_rep_texts);
    if (fim_sep < 0) fim_sep = find_by_text(t, fim_sep_texts);
    for (size_t k = 0; k < sizeof eog_texts / sizeof eog_texts[0]; k++) {
        int32_t id = het_tok_lookup(t, eog_texts[k], strlen(eog_texts[k]));
        if (id < 0) continue;
        make_control(t, id);
        t->tokens[id].attr |= HET_TOK_ATTR_EOG;
    }
    int32_t ends[] = { t->eos, t->eot, t->eom, fim_pad, fim_rep, fim_sep };
    for (size_t k = 0; k < sizeof ends / sizeof ends[0]; k++)
        if (ends[k] >= 0) t->tokens[ends[k]].attr |= HET_TOK_ATTR_EOG;
}

static int cmp_special(const void *a, const void *b, void *ctx)
{
    const het_tokenizer *t = ctx;
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    if (t->tokens[x].len != t->tokens[y].len) return t->tokens[x].len > t->tokens[y].len ? -1 : 1;
    return x < y ? -1 : x > y;
}

static enum het_status collect_specials(het_tokenizer *t, het_error *err)
{
    const uint32_t want = HET_TOK_ATTR_CONTROL | HET_TOK_ATTR_USER_DEFINED | HET_TOK_ATTR_UNKNOWN;
    int32_t n = 0;
    for (int32_t i = 0; i < t->n_vocab; i++) n += (t->tokens[i].attr & want) != 0;
    t->specials = malloc((n ? (size_t)n : 1) * sizeof *t->specials);
    if (!t->specials) return het_error_set(err, HET_ERR_NOMEM, "tokenizer: out of memory for special tokens");
    for (int32_t i = 0; i < t->n_vocab; i++)
        if (t->tokens[i].attr & want) t->specials[t->n_specials++] = i;
    qsort_r(t->specials, (size_t)t->n_specials, sizeof *t->specials, cmp_special, t);
    return HET_OK;
}

static void set_attr_by_text(het_tokenizer *t, const char *s, uint32_t bit, bool on)
{
    int32_t id = het_tok_lookup(t, s, strlen(s));
    if (id < 0) return;
    if (on) t->tokens[id].attr |= bit;
    else t->tokens[id].attr &= ~bit;
}

/* llama.cpp's per-model whitespace stripping around special tokens. */
static void apply_name_fixups(het_tokenizer *t, const het_gguf *g)
{
    const char *name = het_gguf_get_str(g, "general.name");
    if (!name) return;
    char low[256];
    size_t n = strlen(name);
    if (n >= sizeof low) n = sizeof low - 1;
    for (size_t i = 0; i < n; i++) low[i] = (char)tolower((unsigned char)name[i]);
    low[n] = '\0';
    if (strstr(low, "jina-v2-de") || strstr(low, "jina-v2-es") || strstr(low, "jina-v2-code")) {
        set_attr_by_text(t, "<mask>", HET_TOK_ATTR_LSTRIP, true);
    } else if (strstr(low, "phi-3") || strstr(low, "phi3")) {
        for (int32_t i = 0; i < t->n_specials; i++) t->tokens[t->specials[i]].attr |= HET_TOK_ATTR_RSTRIP;
        set_attr_by_text(t, "</s>", HET_TOK_ATTR_RSTRIP, true);
        set_attr_by_text(t, "<unk>", HET_TOK_ATTR_RSTRIP, false);
        set_attr_by_text(t, "<s>", HET_TOK_ATTR_RSTRIP, false);
        set_attr_by_text(t, "<|endoftext|>", HET_TOK_ATTR_RSTRIP, false);
    }
}

static void find_byte_tokens(het_tokenizer *t)
{
    static const char hex[] = "0123456789ABCDEF";
    for (int b = 0; b < 256; b++) {
        char name[7] = { '<', '0', 'x', hex[b >> 4], hex[b & 15], '>', 0 };
        char raw = (char)b;
        int32_t id = het_tok_lookup(t, name, 6);
        if (id < 0) id = het_tok_lookup(t, &raw, 1);
        t->byte_token[b] = id >= 0 ? id : t->unk;
    }
}

static enum het_status read_kind(het_tokenizer *t, const het_gguf *g, het_error *err)
{
    const char *model = het_gguf_get_str(g, "tokenizer.ggml.model");
    if (!model) return het_error_set(err, HET_ERR_FORMAT, "tokenizer: missing key tokenizer.ggml.model");
    if (strcmp(model, "llama") == 0) t->kind = HET_TOKENIZER_SPM;
    else if (strcmp(model, "gpt2") == 0) t->kind = HET_TOKENIZER_BPE;
    else if (strcmp(model, "bert") == 0) t->kind = HET_TOKENIZER_WPM;
    else return het_error_set(err, HET_ERR_UNSUPPORTED, "tokenizer: tokenizer.ggml.model = \"%s\" not supported", model);

    int64_t n = het_gguf_get_arr_n(g, KEY_TOKENS);
    if (n <= 0 || het_gguf_get_arr_type(g, KEY_TOKENS) != HET_GGUF_TYPE_STRING)
        return het_error_set(err, HET_ERR_FORMAT, "tokenizer: %s missing, empty or not a string array", KEY_TOKENS);
    if (n >= INT32_MAX / 2)
        return het_error_set(err, HET_ERR_FORMAT, "tokenizer: %s has %lld entries", KEY_TOKENS, (long long)n);
    t->n_vocab = (int32_t)n;
    return HET_OK;
}

static enum het_status load(het_tokenizer *t, const het_gguf *g, het_error *err)
{
    enum het_status st = read_kind(t, g, err);
    if (st != HET_OK) return st;
    t->tokens = calloc((size_t)t->n_vocab, sizeof *t->tokens);
    if (!t->tokens) return het_error_set(err, HET_ERR_NOMEM, "tokenizer: out of memory for %d tokens", (int)t->n_vocab);
    if ((st = load_texts(t, g, err)) != HET_OK || (st = load_scores_types(t, g, err)) != HET_OK ||
        (st = build_index(t, err)) != HET_OK)
        return st;

    t->add_bos = t->kind != HET_TOKENIZER_BPE;   /* BPE: only llama3-style pre-tokenizers add BOS */
    t->add_space_prefix = t->kind == HET_TOKENIZER_SPM;
    if (t->kind == HET_TOKENIZER_BPE && (st = het_tok_bpe_init(t, g, err)) != HET_OK) return st;
    if (t->kind == HET_TOKENIZER_WPM && (st = het_tok_wpm_init(t, err)) != HET_OK) return st;
    het_gguf_get_bool(g, "tokenizer.ggml.add_space_prefix", &t->add_space_prefix);

    read_special_ids(t, g);
    het_gguf_get_bool(g, "tokenizer.ggml.add_bos_token", &t->add_bos);
    het_gguf_get_bool(g, "tokenizer.ggml.add_eos_token", &t->add_eos);
    mark_eog(t, g);
    if ((st = collect_specials(t, err)) != HET_OK) return st;
    apply_name_fixups(t, g);
    find_byte_tokens(t);
    return HET_OK;
}

het_tokenizer *het_tokenizer_from_gguf(const het_gguf *g, het_error *err)
{
    if (!g) {
        het_error_set(err, HET_ERR_INVALID, "tokenizer: no GGUF given");
        return NULL;
    }
    het_tokenizer *t = calloc(1, sizeof *t);
    if (!t) {
        het_error_set(err, HET_ERR_NOMEM, "tokenizer: out of memory");
        return NULL;
    }
    t->bos = t->eos = t->eot = t->eom = t->unk = t->sep = t->pad = t->mask = -1;
    if (load(t, g, err) != HET_OK) {
        het_tokenizer_free(t);
        return NULL;
    }
    return t;
}

void het_tokenizer_free(het_tokenizer *t)
{
    if (!t) return;
    het_tok_bpe_free(t->bpe);
    het_tok_wpm_free(t->wpm);
    het_tok_index_free(&t->text_index);
    free(t->specials);
    free(t->tokens);
    free(t->arena);
    free(t);
}

/* ---- accessors ------------------------------------------------------------- */

enum het_tokenizer_kind het_tokenizer_kind(const het_tokenizer *t) { return t->kind; }
int32_t het_tokenizer_n_vocab(const het_tokenizer *t) { return t->n_vocab; }
int32_t het_tokenizer_bos(const het_tokenizer *t) { return t->bos; }
int32_t het_tokenizer_eos(const het_tokenizer *t) { return t->eos; }
bool    het_tokenizer_add_bos(const het_tokenizer *t) { return t->add_bos && t->bos >= 0; }
bool    het_tokenizer_add_eos(const het_tokenizer *t) { return t->add_eos && t->eos >= 0; }

bool het_tokenizer_is_eog(const het_tokenizer *t, int32_t id)
{
    return id >= 0 && id < t->n_vocab && (t->tokens[id].attr & HET_TOK_ATTR_EOG);
}

bool het_tokenizer_is_control(const het_tokenizer *t, int32_t id)
{
    return id >= 0 && id < t->n_vocab && (t->tokens[id].attr & HET_TOK_ATTR_CONTROL);
}

const char *het_tokenizer_token_text(const het_tokenizer *t, int32_t id)
{
    return id >= 0 && id < t->n_vocab ? t->tokens[id].text : NULL;
}

/* ---- tokenize -------------------------------------------------------------- */

struct fragment {
    int32_t token;      /* >= 0: an already-resolved special token */
    size_t  off, len;   /* otherwise: raw text */
};

struct fragments {
    struct fragment *v;
    size_t           n, cap;
};

static enum het_status frag_push(struct fragments *f, int32_t token, size_t off, size_t len)
{
    if (f->n == f->cap) {
        size_t cap = f->cap ? f->cap * 2 : 16;
        struct fragment *v = realloc(f->v, cap * sizeof *v);
        if (!v) return HET_ERR_NOMEM;
        f->v = v;
        f->cap = cap;
    }
    f->v[f->n++] = (struct fragment){ token, off, len };
    return HET_OK;
}

/* Split raw fragment fr on every occurrence of special token id into out. */
static enum het_status split_fragment(const het_tokenizer *t, const char *text, struct fragment fr, int32_t id,
                                      struct fragments *out)
{
    const struct het_tok_token *tk = &t->tokens[id];
    size_t base = fr.off, end = fr.off + fr.len;
    for (;;) {
        const char *p = base < end ? memmem(text + base, end - base, tk->text, tk->len) : NULL;
        if (!p) break;
        size_t m = (size_t)(p - text), left_end = m;
        if (tk->attr & HET_TOK_ATTR_LSTRIP)
            while (left_end > base && isspace((unsigned char)text[left_end - 1])) left_end--;
        if (left_end > base && frag_push(out, -1, base, left_end - base) != HET_OK) return HET_ERR_NOMEM;
        if (frag_push(out, id, 0, 0) != HET_OK) return HET_ERR_NOMEM;
        base = m + tk->len;
        if (tk->attr & HET_TOK_ATTR_RSTRIP)
            while (base < end && isspace((unsigned char)text[base])) base++;
    }
    if (base < end && frag_push(out, -1, base, end - base) != HET_OK) return HET_ERR_NOMEM;
    return HET_OK;
}

static enum het_status partition(const het_tokenizer *t, const char *text, size_t len, bool parse_special,
                                 struct fragments *frags)
{
    struct fragments next = { 0 };
    if (len > 0 && frag_push(frags, -1, 0, len) != HET_OK) return HET_ERR_NOMEM;
    for (int32_t k = 0; k < t->n_specials && len > 0; k++) {
        int32_t id = t->specials[k];
        const struct het_tok_token *tk = &t->tokens[id];
        if (!parse_special && (tk->attr & (HET_TOK_ATTR_CONTROL | HET_TOK_ATTR_UNKNOWN))) continue;
        if (!memmem(text, len, tk->text, tk->len)) continue;   /* cheap rejection for big special sets */
        next.n = 0;
        for (size_t i = 0; i < frags->n; i++) {
            enum het_status st = frags->v[i].token >= 0 ? frag_push(&next, frags->v[i].token, 0, 0)
                                                        : split_fragment(t, text, frags->v[i], id, &next);
            if (st != HET_OK) {
                free(next.v);
                return st;
            }
        }
        struct fragments tmp = *frags;
        *frags = next;
        next = tmp;
    }
    free(next.v);
    return HET_OK;
}

static enum het_status push_id(struct het_tok_ids *out, int32_t id, het_error *err)
{
    if (het_tok_ids_push(out, id) != HET_OK) return het_error_set(err, HET_ERR_NOMEM, "tokenize: out of memory");
    return HET_OK;
}

static enum het_status encode_fragments(const het_tokenizer *t, const char *text, const struct fragments *frags,
                                        bool add_special, struct het_tok_ids *out, het_error *err)
{
    enum het_status st = HET_OK;
    bool prev_special = true;   /* SPM: a text fragment at the start or after a special gets the prefix */
    if (add_special && t->add_bos && t->bos >= 0 && (st = push_id(out, t->bos, err)) != HET_OK) return st;
    for (size_t i = 0; i < frags->n && st == HET_OK; i++) {
        const struct fragment *f = &frags->v[i];
        if (f->token >= 0) {
            st = push_id(out, f->token, err);
            prev_special = true;
            continue;
        }
        switch (t->kind) {
        case HET_TOKENIZER_SPM:
            st = het_tok_spm_encode(t, text + f->off, f->len, t->add_space_prefix && prev_special, out, err);
            break;
        case HET_TOKENIZER_BPE: st = het_tok_bpe_encode(t, text + f->off, f->len, out, err); break;
        case HET_TOKENIZER_WPM: st = het_tok_wpm_encode(t, text + f->off, f->len, out, err); break;
        }
        prev_special = false;
    }
    if (st != HET_OK) return st;
    if (add_special && t->kind == HET_TOKENIZER_WPM) {   /* [CLS] ... [SEP] */
        if (t->sep >= 0) st = push_id(out, t->sep, err);
    } else if (add_special && t->add_eos && t->eos >= 0) {
        st = push_id(out, t->eos, err);
    }
    return st;
}

enum het_status het_tokenize(const het_tokenizer *t, const char *text, size_t len, bool add_special,
                             bool parse_special, int32_t **ids, int32_t *n_ids, het_error *err)
{
    if (!t || !ids || !n_ids || (!text && len > 0))
        return het_error_set(err, HET_ERR_INVALID, "tokenize: NULL argument");
    *ids = NULL;
    *n_ids = 0;
    if (len > HET_TOK_MAX_TEXT)   /* keeps every internal offset within 32 bits */
        return het_error_set(err, HET_ERR_INVALID, "tokenize: %zu bytes of text (at most %u per call)", len,
                             (unsigned)HET_TOK_MAX_TEXT);
    struct fragments frags = { 0 };
    struct het_tok_ids out = { 0 };
    enum het_status st = partition(t, text, len, parse_special, &frags);
    if (st != HET_OK) het_error_set(err, st, "tokenize: out of memory splitting on special tokens");
    else st = encode_fragments(t, text, &frags, add_special, &out, err);
    free(frags.v);
    if (st == HET_OK && out.n > (size_t)INT32_MAX)
        st = het_error_set(err, HET_ERR_INVALID, "tokenize: %zu tokens do not fit an int32 count", out.n);
    if (st == HET_OK && !out.v && !(out.v = malloc(sizeof *out.v)))   /* valid pointer even for no tokens */
        st = het_error_set(err, HET_ERR_NOMEM, "tokenize: out of memory");
    if (st != HET_OK) {
        free(out.v);
        return st;
    }
    *ids = out.v;
    *n_ids = (int32_t)out.n;
    return HET_OK;
}

/* ---- detokenize ------------------------------------------------------------ */

static int copy_piece(const char *s, size_t n, char *buf, int cap)
{
    if (n > (size_t)INT32_MAX / 2) return 0;
    if (cap < 0 || (size_t)cap < n) return -(int)n;
    if (n) memcpy(buf, s, n);
    return (int)n;
}

/* SPM / WPM normal tokens: "▁" (E2 96 81) stands for a space. */
static int unescape_piece(const char *s, size_t n, char *buf, int cap)
{
    size_t need = 0;
    for (size_t i = 0; i < n; i++, need++)
        if (i + 2 < n && memcmp(s + i, "\xe2\x96\x81", 3) == 0) i += 2;
    if (cap < 0 || (size_t)cap < need) return -(int)need;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (i + 2 < n && memcmp(s + i, "\xe2\x96\x81", 3) == 0) {
            buf[k++] = ' ';
            i += 2;
        } else {
            buf[k++] = s[i];
        }
    }
    return (int)k;
}

static int hex_digit(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

/* the byte a BYTE-typed token stands for: "<0xNN>" (or a raw one-byte text) */
static int byte_token_value(const struct het_tok_token *tk)
{
    if (tk->len == 6 && memcmp(tk->text, "<0x", 3) == 0 && tk->text[5] == '>') {
        int hi = hex_digit(tk->text[3]), lo = hex_digit(tk->text[4]);
        return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
    }
    return tk->len == 1 ? (unsigned char)tk->text[0] : -1;
}

int het_token_to_piece(const het_tokenizer *t, int32_t id, char *buf, int cap, bool special)
{
    if (!t || id < 0 || id >= t->n_vocab) return 0;
    const struct het_tok_token *tk = &t->tokens[id];
    const uint32_t hidden = HET_TOK_ATTR_UNKNOWN | HET_TOK_ATTR_CONTROL;
    if (!special && (tk->attr & hidden)) return 0;
    if (tk->attr & (hidden | HET_TOK_ATTR_USER_DEFINED)) return copy_piece(tk->text, tk->len, buf, cap);
    if (tk->attr & HET_TOK_ATTR_NORMAL) {
        if (t->kind == HET_TOKENIZER_BPE) return het_tok_bpe_decode(t, tk->text, tk->len, buf, cap);
        return unescape_piece(tk->text, tk->len, buf, cap);
    }
    if ((tk->attr & HET_TOK_ATTR_BYTE) && t->kind != HET_TOKENIZER_BPE) {
        int b = byte_token_value(tk);
        if (b < 0) return 0;
        char c = (char)b;
        return copy_piece(&c, 1, buf, cap);
    }
    return 0;   /* unused / undefined tokens render as nothing */
}
