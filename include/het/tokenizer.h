/*
 * tokenizer.h — text <-> token ids for the vocabularies GGUF files carry.
 *
 * Kinds (tokenizer.ggml.model): "llama" (SentencePiece-style BPE over scores,
 * with byte fallback), "gpt2" (byte-level BPE over merges, with the
 * pre-tokenizer regexes named by tokenizer.ggml.pre, via PCRE2) and "bert"
 * (WordPiece). Special tokens and BOS/EOS rules come from the metadata.
 */
#ifndef HET_TOKENIZER_H
#define HET_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "het/gguf.h"
#include "het/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct het_tokenizer het_tokenizer;

enum het_tokenizer_kind {
    HET_TOKENIZER_SPM  = 0,  /* "llama" */
    HET_TOKENIZER_BPE  = 1,  /* "gpt2"  */
    HET_TOKENIZER_WPM  = 2,  /* "bert"  */
};

/* Build from a GGUF's tokenizer.* keys. NULL on error (err says which key). */
het_tokenizer *het_tokenizer_from_gguf(const het_gguf *g, het_error *err);
void           het_tokenizer_free(het_tokenizer *t);

enum het_tokenizer_kind het_tokenizer_kind(const het_tokenizer *t);
int32_t het_tokenizer_n_vocab(const het_tokenizer *t);
int32_t het_tokenizer_bos(const het_tokenizer *t);   /* -1 if none */
int32_t het_tokenizer_eos(const het_tokenizer *t);   /* -1 if none */
bool    het_tokenizer_add_bos(const het_tokenizer *t);
bool    het_tokenizer_add_eos(const het_tokenizer *t);
/* end of generation: eos, eot, <|im_end|> ... */
bool    het_tokenizer_is_eog(const het_tokenizer *t, int32_t id);
bool    het_tokenizer_is_control(const het_tokenizer *t, int32_t id);
const char *het_tokenizer_token_text(const het_tokenizer *t, int32_t id); /* raw vocab entry */

/* Tokenize len bytes of text. add_special: add BOS/EOS as the metadata says.
 * parse_special: recognise special/control token texts in the input.
 * *ids is malloc'ed (caller frees), *n_ids its length. */
enum het_status het_tokenize(const het_tokenizer *t, const char *text, size_t len, bool add_special,
                             bool parse_special, int32_t **ids, int32_t *n_ids, het_error *err);

/* The bytes token id stands for when detokenising (SPM "▁" -> ' ', byte
 * tokens <0xNN> -> the byte, byte-level BPE mapped back to bytes). Control
 * tokens render as "" unless special is true. Returns the length written, or
 * -needed when cap is too small; never writes a terminating NUL beyond len. */
int het_token_to_piece(const het_tokenizer *t, int32_t id, char *buf, int cap, bool special);

#ifdef __cplusplus
}
#endif
#endif /* HET_TOKENIZER_H */
